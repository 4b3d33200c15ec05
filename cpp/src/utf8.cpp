// tracepack C++ runtime: UTF-8 (spec §2).
#include "tracepack/utf8.hpp"

#include <cstring>

namespace tracepack::utf8 {

namespace {

// For a lead byte: the sequence length, and the range its second byte must be in (Unicode table 3-7).
struct Lead {
    unsigned char len, lo, hi;
};

inline Lead lead(unsigned char c) noexcept {
    if (c < 0x80) return {1, 0, 0};
    if (c < 0xC2) return {0, 0, 0};
    if (c < 0xE0) return {2, 0x80, 0xBF};
    if (c == 0xE0) return {3, 0xA0, 0xBF};
    if (c == 0xED) return {3, 0x80, 0x9F};
    if (c < 0xF0) return {3, 0x80, 0xBF};
    if (c == 0xF0) return {4, 0x90, 0xBF};
    if (c < 0xF4) return {4, 0x80, 0xBF};
    if (c == 0xF4) return {4, 0x80, 0x8F};
    return {0, 0, 0};
}

}  // namespace

Problem check(std::string_view s) noexcept {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const std::size_t n = s.size();
    std::size_t i = 0;
    while (i < n) {
        // ASCII runs, eight bytes at a time.
        while (i + 8 <= n) {
            std::uint64_t w;
            std::memcpy(&w, p + i, 8);
            if (w & 0x8080808080808080ULL) break;
            i += 8;
        }
        if (i >= n) break;
        unsigned char c = p[i];
        if (c < 0x80) {
            ++i;
            continue;
        }
        Lead l = lead(c);
        if (l.len == 0) return {"invalid start byte", i};
        // Python checks the bytes that are there before saying the data ended.
        for (std::size_t k = 1; k < l.len; ++k) {
            if (i + k >= n) return {"unexpected end of data", i};
            unsigned char d = p[i + k];
            unsigned char lo = k == 1 ? l.lo : 0x80, hi = k == 1 ? l.hi : 0xBF;
            if (d < lo || d > hi) return {"invalid continuation byte", i};
        }
        i += l.len;
    }
    return {};
}

std::size_t decode_one(std::string_view s, std::size_t i, std::uint32_t& cp) noexcept {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const std::size_t n = s.size();
    if (i >= n) return 0;
    unsigned char c = p[i];
    Lead l = lead(c);
    if (l.len == 0 || i + l.len > n) return 0;
    if (l.len == 1) {
        cp = c;
        return 1;
    }
    std::uint32_t v = c & (0xFF >> (l.len + 1));
    for (std::size_t k = 1; k < l.len; ++k) {
        unsigned char d = p[i + k];
        unsigned char lo = k == 1 ? l.lo : 0x80, hi = k == 1 ? l.hi : 0xBF;
        if (d < lo || d > hi) return 0;
        v = (v << 6) | (d & 0x3F);
    }
    cp = v;
    return l.len;
}

}  // namespace tracepack::utf8
