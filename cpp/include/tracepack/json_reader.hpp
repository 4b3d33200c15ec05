// tracepack C++ runtime: reading the json codec's payload (spec §3).
//
// A checked pull parser over JSON text (RFC 8259) for the generated keyed decoders
// (generated/cpp/tracepack/vX_Y/json.cpp). Damage to the text is reported at `payload` with its byte
// offset (`not valid JSON: JSON is malformed: invalid character (byte 12)`), a value of the wrong type at
// its path (`Expected `int`, got `str``), in the words of the reference reader (spec §3.3, §9.2.1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tracepack/error.hpp"

namespace tracepack::js {

class Reader {
public:
    Reader(const std::uint8_t* data, std::size_t size, rt::Failure& failure, std::uint64_t max_depth) noexcept
        : p_(data), start_(data), end_(data + size), f_(failure), max_depth_(max_depth) {}

    rt::Failure& failure() noexcept { return f_; }
    std::size_t pos() const noexcept { return static_cast<std::size_t>(p_ - start_); }
    void seek(std::size_t at) noexcept { p_ = start_ + at; }

    // Skip whitespace; the next character (false and a truncation error at the end).
    bool peek(unsigned char& c) {
        while (p_ < end_) {
            unsigned char ch = *p_;
            if (ch != ' ' && ch != '\n' && ch != '\r' && ch != '\t') {
                c = ch;
                return true;
            }
            ++p_;
        }
        return truncated();
    }
    // The next value is `null`: consume it and return true (`null_seen`); anything else is left.
    bool take_null(bool& null_seen);

    // An object; `expected` names the type the schema wants (`object`, `object | null`). The members
    // follow through member().
    bool object(const char* expected) {
        unsigned char c = 0;
        if (!peek(c)) return false;
        if (c != '{') return mismatch(expected);
        ++p_;
        return true;
    }
    // The next member of an object: `first` is true before the first; `done` when the `}` is read.
    // The key is a view into the text or into `scratch` (escapes decoded); not checked for UTF-8.
    bool member(bool& first, bool& done, std::string_view& key);
    // An array, its items through item().
    bool array(const char* expected) {
        unsigned char c = 0;
        if (!peek(c)) return false;
        if (c != '[') return mismatch(expected);
        ++p_;
        return true;
    }
    bool item(bool& first, bool& done);

    // Scalars of the schema's types (spec §3.2).
    bool i64(std::int64_t lo, std::int64_t hi, std::int64_t& out);
    bool u64(std::uint64_t hi, std::uint64_t& out);
    bool f64(double& out);  // a number, or "NaN", "Infinity", "-Infinity"
    bool boolean(bool& out);
    bool str(std::string& out);  // checked to be UTF-8
    // An enum value's name (a string, not checked for UTF-8 until it is refused).
    bool name(std::string_view& out);
    // A union's `kind` tag: a string (anything else is skipped, then refused).
    bool tag(std::string_view& out, std::uint64_t level);

    // Skip one value of any type (an unknown member); `level` is the nesting level of the object or
    // array the value is in (the root object is level 1).
    bool skip(std::uint64_t level);
    // After the root value: only whitespace may follow.
    bool finish();

    // Failures (each returns false).
    bool truncated();
    bool malformed(const char* what);  // at the current offset
    bool mismatch(const char* expected);
    bool invalid_enum(std::string_view name);
    bool invalid_tag(std::string_view name);
    bool missing(std::string_view field);
    bool too_deep();

private:
    struct Number {
        bool negative = false;
        bool is_float = false;
        bool big = false;  // an integer beyond 64 bits
        std::uint64_t mantissa = 0;
        const std::uint8_t* start = nullptr;
        const std::uint8_t* end = nullptr;
    };
    bool number(Number& n);
    bool number_to_double(const Number& n, double& out);
    bool literal(const char* rest, std::size_t len);  // after the first char, as the typed decoder reads
    bool string_view(std::string_view& out, bool& ascii);
    bool string_copy(std::string_view& out, bool& ascii, const std::uint8_t* start);
    bool unicode_escape(bool skipping);
    bool codepoint(unsigned& cp);
    bool skip_string();
    bool skip_number();

    const std::uint8_t* p_;
    const std::uint8_t* start_;
    const std::uint8_t* end_;
    rt::Failure& f_;
    std::uint64_t max_depth_;
    std::string scratch_;
};

// After a successful decode: the whole text is UTF-8 (ignored members included) and no object repeats a
// name (spec §3.3), refused at `payload` otherwise.
bool check_text(std::string_view text, rt::Failure& failure);

}  // namespace tracepack::js
