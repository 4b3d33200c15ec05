// tracepack C++ runtime: UTF-8 (spec §2: every string is valid UTF-8).
//
// Strict UTF-8 as Python's decoder reads it: no surrogates, no overlong forms, nothing above U+10FFFF.
// A failure is described as Python describes it (`invalid start byte`, `invalid continuation byte`,
// `unexpected end of data`), at the offset of the sequence's first byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tracepack::utf8 {

struct Problem {
    const char* reason = nullptr;  // nullptr: valid
    std::size_t start = 0;         // offset of the first byte of the bad sequence
};

// Check that `s` is valid UTF-8; on failure say why and where, as Python's decoder does.
Problem check(std::string_view s) noexcept;

inline bool valid(std::string_view s) noexcept { return check(s).reason == nullptr; }

// Decode the code point at s[i]; its length in bytes, or 0 if the bytes there are not UTF-8.
std::size_t decode_one(std::string_view s, std::size_t i, std::uint32_t& cp) noexcept;

}  // namespace tracepack::utf8
