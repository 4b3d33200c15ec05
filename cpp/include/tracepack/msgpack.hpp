// tracepack C++ runtime: reading MessagePack (spec §4).
//
// A checked cursor over a MessagePack payload for the generated positional decoders
// (generated/cpp/tracepack/vX_Y/msgpack.cpp). Every read checks the bytes it needs are there and the
// value has the type the schema asks for; a failure is reported in the words and at the place the
// reference reader uses (spec §4.4, §9.2.1): type errors at a path (`Expected `int`, got `str``), damage to
// the stream itself at `payload` (`not valid MessagePack: Input data was truncated`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "tracepack/error.hpp"

namespace tracepack::mp {

class Reader {
public:
    Reader(const std::uint8_t* data, std::size_t size, rt::Failure& failure, std::uint64_t max_depth) noexcept
        : p_(data), start_(data), end_(data + size), f_(failure), max_depth_(max_depth) {}

    rt::Failure& failure() noexcept { return f_; }
    std::size_t offset() const noexcept { return static_cast<std::size_t>(p_ - start_); }
    std::size_t remaining() const noexcept { return static_cast<std::size_t>(end_ - p_); }

    // The type name of the next value, as error messages give it (`int`, `str`, `array`, ...).
    const char* next_type() const noexcept;

    // The next value is nil: consume it and return true. (False at the end of the data too.)
    bool take_nil() noexcept {
        if (p_ < end_ && *p_ == 0xc0) {
            ++p_;
            return true;
        }
        return false;
    }

    // An array header; `expected` names what the schema wanted (`array`, `array | null`).
    bool array(std::uint32_t& n, const char* expected = "array") {
        if (p_ >= end_) return truncated();
        std::uint8_t c = *p_;
        if ((c & 0xf0) == 0x90) {
            n = c & 0x0f;
            ++p_;
            return true;
        }
        if (c == 0xdc) {
            if (remaining() < 3) return truncated();
            n = static_cast<std::uint32_t>(p_[1]) << 8 | p_[2];
            p_ += 3;
            return true;
        }
        if (c == 0xdd) {
            if (remaining() < 5) return truncated();
            n = be32(p_ + 1);
            p_ += 5;
            return true;
        }
        return mismatch(expected);
    }

    // A map header; `expected` names what the schema wanted.
    bool map(std::uint32_t& n, const char* expected = "object") {
        if (p_ >= end_) return truncated();
        std::uint8_t c = *p_;
        if ((c & 0xf0) == 0x80) {
            n = c & 0x0f;
            ++p_;
            return true;
        }
        if (c == 0xde) {
            if (remaining() < 3) return truncated();
            n = static_cast<std::uint32_t>(p_[1]) << 8 | p_[2];
            p_ += 3;
            return true;
        }
        if (c == 0xdf) {
            if (remaining() < 5) return truncated();
            n = be32(p_ + 1);
            p_ += 5;
            return true;
        }
        return mismatch(expected);
    }

    // A str's bytes, not checked for UTF-8 (a map key matched against field names); a value of another type
    // is refused at its first byte, as a key is.
    bool key(std::string_view& out);

    // An array of at least `need` items (a struct's required fields).
    bool array_min(std::uint32_t need, std::uint32_t& n, const char* expected = "array") {
        if (!array(n, expected)) return false;
        if (n < need) return too_short(need, n);
        return true;
    }

    // An integer in [lo, hi] (the field's type range).
    bool i64(std::int64_t lo, std::int64_t hi, std::int64_t& out) {
        bool neg = false;
        std::uint64_t mag = 0;
        if (!integer(neg, mag, "int")) return false;
        if (neg) {
            std::int64_t v = static_cast<std::int64_t>(mag);
            if (v < lo) return below(lo);
            if (v > hi) return above_signed(hi);
            out = v;
            return true;
        }
        if (mag > static_cast<std::uint64_t>(hi)) return above_signed(hi);
        std::int64_t v = static_cast<std::int64_t>(mag);
        if (v < lo) return below(lo);
        out = v;
        return true;
    }

    // An integer in [0, hi].
    bool u64(std::uint64_t hi, std::uint64_t& out) {
        bool neg = false;
        std::uint64_t mag = 0;
        if (!integer(neg, mag, "int")) return false;
        if (neg) return below(0);
        if (mag > hi) return above_unsigned(hi);
        out = mag;
        return true;
    }

    // Any integer: an enum's value, checked by the caller (spec §4.2).
    bool enum_int(bool& neg, std::uint64_t& bits) { return integer(neg, bits, "int"); }
    // A union's tag (spec §4.2): an integer, refused as soon as its first byte says it is not one.
    bool tag_int(bool& neg, std::uint64_t& bits);

    bool f64(double& out);
    bool boolean(bool& out) {
        if (p_ >= end_) return truncated();
        if (*p_ == 0xc2 || *p_ == 0xc3) {
            out = *p_ == 0xc3;
            ++p_;
            return true;
        }
        return mismatch("bool");
    }

    // A str, checked to be UTF-8.
    bool str(std::string& out) {
        std::string_view v;
        if (!str_view(v)) return false;
        out.assign(v.data(), v.size());
        return true;
    }
    bool str_view(std::string_view& out);

    // Skip one value of any type (a field a newer minor added); `level` is the nesting level of the
    // array the value is in (the root array is level 1, spec §4.3).
    bool skip(std::uint64_t level);
    // After the root value: nothing may follow (spec §4.1).
    bool finish();

    // Failures (each returns false).
    bool truncated();
    // A value of another type than `expected`: read over it (its bytes must be there), then refuse it.
    bool mismatch(const char* expected);
    bool invalid_opcode();
    bool too_short(std::uint32_t need, std::uint32_t got);
    bool below(std::int64_t lo);
    bool above_signed(std::int64_t hi);
    bool above_unsigned(std::uint64_t hi);

private:
    static std::uint32_t be32(const std::uint8_t* q) noexcept {
        return static_cast<std::uint32_t>(q[0]) << 24 | static_cast<std::uint32_t>(q[1]) << 16 |
               static_cast<std::uint32_t>(q[2]) << 8 | q[3];
    }
    static std::uint64_t be64(const std::uint8_t* q) noexcept {
        return static_cast<std::uint64_t>(be32(q)) << 32 | be32(q + 4);
    }

    // An integer of any MessagePack width: `neg` and its two's-complement bits (neg) or magnitude.
    bool integer(bool& neg, std::uint64_t& bits, const char* expected) {
        if (p_ >= end_) return truncated();
        std::uint8_t c = *p_;
        if (c <= 0x7f) {
            neg = false;
            bits = c;
            ++p_;
            return true;
        }
        if (c >= 0xe0) {
            neg = true;
            bits = static_cast<std::uint64_t>(static_cast<std::int64_t>(static_cast<std::int8_t>(c)));
            ++p_;
            return true;
        }
        return integer_slow(neg, bits, expected);
    }
    bool integer_slow(bool& neg, std::uint64_t& bits, const char* expected);

    const std::uint8_t* p_;
    const std::uint8_t* start_;
    const std::uint8_t* end_;
    rt::Failure& f_;
    std::uint64_t max_depth_;
};

}  // namespace tracepack::mp
