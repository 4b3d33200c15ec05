// tracepack C++ runtime: reading the json codec's payload (spec §3).
#include "tracepack/json_reader.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tracepack/limits.hpp"
#include "tracepack/utf8.hpp"

namespace tracepack::js {

namespace {

constexpr const char* kNotValid = "not valid JSON: ";
constexpr std::uint64_t kMaxIntDigits = 4300;  // spec §9.6

inline bool is_digit(unsigned char c) noexcept { return c >= '0' && c <= '9'; }
// `"`, `\` and the control characters, which end a run of plain string bytes.
inline bool special(unsigned char c) noexcept { return c == '"' || c == '\\' || c < 0x20; }

}  // namespace

bool Reader::truncated() {
    return f_.fail_at(ErrorClass::DecodeError, "payload", std::string(kNotValid) + "Input data was truncated");
}

bool Reader::malformed(const char* what) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "JSON is malformed: %s (byte %zu)", what, pos());
    return f_.fail_at(ErrorClass::DecodeError, "payload", std::string(kNotValid) + buf);
}

bool Reader::too_deep() {
    return f_.fail_at(ErrorClass::DecodeError, "payload",
                      "nested more than " + rt::with_commas(max_depth_) + " levels deep (hostile or damaged input?)",
                      "shallower nesting, " + limit_hint("max_depth"));
}

bool Reader::missing(std::string_view field) {
    std::string msg = "Object missing required field `";
    msg += field;
    msg += "`";
    return f_.fail(ErrorClass::DecodeError, std::move(msg));
}

static bool utf8_failure(rt::Failure& f, std::string_view s) {
    utf8::Problem bad = utf8::check(s);
    return f.fail_at(ErrorClass::DecodeError, "payload", std::string("a string is not valid UTF-8 (") + bad.reason + ")");
}

bool Reader::invalid_enum(std::string_view name) {
    if (!utf8::valid(name)) return utf8_failure(f_, name);
    return f_.fail(ErrorClass::DecodeError, "Invalid enum value " + rt::py_repr(name));
}

bool Reader::invalid_tag(std::string_view name) {
    if (!utf8::valid(name)) return utf8_failure(f_, name);
    std::string msg = "Invalid value '";
    msg += name;
    msg += "'";
    return f_.fail(ErrorClass::DecodeError, std::move(msg));
}

bool Reader::literal(const char* rest, std::size_t len) {
    ++p_;  // the first character, already seen
    if (static_cast<std::size_t>(end_ - p_) < len) return truncated();
    bool ok = true;
    for (std::size_t i = 0; i < len; ++i) ok &= p_[i] == static_cast<unsigned char>(rest[i]);
    p_ += len;
    if (!ok) return malformed("invalid character");
    return true;
}

bool Reader::take_null(bool& null_seen) {
    null_seen = false;
    unsigned char c = 0;
    if (!peek(c)) return false;
    if (c != 'n') return true;
    if (!literal("ull", 3)) return false;
    null_seen = true;
    return true;
}

bool Reader::mismatch(const char* expected) {
    unsigned char c = 0;
    if (!peek(c)) return false;
    const char* got;
    switch (c) {
        case 'n':
            if (!literal("ull", 3)) return false;
            got = "null";
            break;
        case 't':
            if (!literal("rue", 3)) return false;
            got = "bool";
            break;
        case 'f':
            if (!literal("alse", 4)) return false;
            got = "bool";
            break;
        case '[': got = "array"; break;
        case '{': got = "object"; break;
        case '"': {
            std::string_view v;
            bool ascii = false;
            if (!string_view(v, ascii)) return false;
            got = "str";
            break;
        }
        default: {
            Number n;
            if (!number(n)) return false;
            if (n.is_float || n.big) {
                double d = 0.0;
                if (!number_to_double(n, d)) return false;
                got = "float";
            } else {
                got = "int";
            }
            break;
        }
    }
    std::string msg = "Expected `";
    msg += expected;
    msg += "`, got `";
    msg += got;
    msg += "`";
    return f_.fail(ErrorClass::DecodeError, std::move(msg));
}

// --- strings ------------------------------------------------------------------------------------

bool Reader::codepoint(unsigned& cp) {
    if (end_ - p_ < 4) return truncated();
    cp = 0;
    for (int i = 0; i < 4; ++i) {
        unsigned char c = *p_++;
        unsigned v;
        if (c >= '0' && c <= '9') {
            v = c - '0';
        } else if (c >= 'a' && c <= 'f') {
            v = c - 'a' + 10;
        } else if (c >= 'A' && c <= 'F') {
            v = c - 'A' + 10;
        } else {
            return malformed("invalid character in unicode escape");
        }
        cp = cp << 4 | v;
    }
    return true;
}

bool Reader::unicode_escape(bool skipping) {
    unsigned cp;
    if (!codepoint(cp)) return false;
    if (cp >= 0xDC00 && cp <= 0xDFFF) return malformed("invalid utf-16 surrogate pair");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (end_ - p_ < 6) return truncated();
        if (p_[0] != '\\' || p_[1] != 'u') {
            return malformed(skipping ? "unexpected end of hex escape" : "unexpected end of escaped utf-16 surrogate pair");
        }
        p_ += 2;
        unsigned cp2;
        if (!codepoint(cp2)) return false;
        if (cp2 < 0xDC00 || cp2 > 0xDFFF) return malformed("invalid utf-16 surrogate pair");
        cp = 0x10000 + (((cp - 0xD800) << 10) | (cp2 - 0xDC00));
    }
    if (skipping) return true;
    if (cp < 0x80) {
        scratch_ += static_cast<char>(cp);
    } else if (cp < 0x800) {
        scratch_ += static_cast<char>(0xC0 | (cp >> 6));
        scratch_ += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        scratch_ += static_cast<char>(0xE0 | (cp >> 12));
        scratch_ += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        scratch_ += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        scratch_ += static_cast<char>(0xF0 | (cp >> 18));
        scratch_ += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        scratch_ += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        scratch_ += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return true;
}

bool Reader::string_view(std::string_view& out, bool& ascii) {
    ++p_;  // the opening quote
    const std::uint8_t* start = p_;
    ascii = true;
    while (true) {
        if (p_ == end_) return truncated();
        unsigned char c = *p_;
        if (c == '"') {
            out = std::string_view(reinterpret_cast<const char*>(start), static_cast<std::size_t>(p_ - start));
            ++p_;
            return true;
        }
        if (special(c)) return string_copy(out, ascii, start);
        if (c & 0x80) ascii = false;
        ++p_;
    }
}

bool Reader::string_copy(std::string_view& out, bool& ascii, const std::uint8_t* start) {
    scratch_.clear();
    while (true) {
        if (p_ == end_) return truncated();
        unsigned char c = *p_;
        if (c == '\\') {
            scratch_.append(reinterpret_cast<const char*>(start), static_cast<std::size_t>(p_ - start));
            ++p_;
            if (p_ == end_) return truncated();
            unsigned char e = *p_++;
            switch (e) {
                case 'n': scratch_ += '\n'; break;
                case '"': scratch_ += '"'; break;
                case 't': scratch_ += '\t'; break;
                case 'r': scratch_ += '\r'; break;
                case '\\': scratch_ += '\\'; break;
                case '/': scratch_ += '/'; break;
                case 'b': scratch_ += '\b'; break;
                case 'f': scratch_ += '\f'; break;
                case 'u':
                    ascii = false;
                    if (!unicode_escape(false)) return false;
                    break;
                default: return malformed("invalid escape character in string");
            }
            start = p_;
            continue;
        }
        if (c == '"') {
            scratch_.append(reinterpret_cast<const char*>(start), static_cast<std::size_t>(p_ - start));
            ++p_;
            out = scratch_;
            return true;
        }
        if (c < 0x20) return malformed("invalid character");
        if (c & 0x80) ascii = false;
        ++p_;
    }
}

bool Reader::skip_string() {
    ++p_;  // the opening quote
    while (true) {
        if (p_ == end_) return truncated();
        unsigned char c = *p_;
        if (c == '"') {
            ++p_;
            return true;
        }
        if (c == '\\') {
            ++p_;
            if (p_ == end_) return truncated();
            switch (*p_) {
                case '"':
                case '\\':
                case '/':
                case 'b':
                case 'f':
                case 'n':
                case 'r':
                case 't': ++p_; break;
                case 'u':
                    ++p_;
                    if (!unicode_escape(true)) return false;
                    break;
                default: return malformed("invalid escaped character");
            }
            continue;
        }
        if (c < 0x20) return malformed("invalid character");
        ++p_;
    }
}

bool Reader::str(std::string& out) {
    unsigned char c = 0;
    if (!peek(c)) return false;
    if (c != '"') return mismatch("str");
    std::string_view v;
    bool ascii = false;
    if (!string_view(v, ascii)) return false;
    if (!ascii && !utf8::valid(v)) return utf8_failure(f_, v);
    out.assign(v.data(), v.size());
    return true;
}

bool Reader::name(std::string_view& out) {
    unsigned char c = 0;
    if (!peek(c)) return false;
    if (c != '"') return mismatch("str");
    bool ascii = false;
    return string_view(out, ascii);
}

bool Reader::tag(std::string_view& out, std::uint64_t level) {
    unsigned char c = 0;
    if (!peek(c)) return false;
    if (c != '"') {
        if (!skip(level)) return false;  // damage first, then the type
        return f_.fail(ErrorClass::DecodeError, "Expected `str`");
    }
    bool ascii = false;
    return string_view(out, ascii);
}

// --- objects and arrays ----------------------------------------------------------------------------

bool Reader::member(bool& first, bool& done, std::string_view& key) {
    unsigned char c = 0;
    if (!peek(c)) return false;
    done = false;
    if (c == '}') {
        ++p_;
        done = true;
        return true;
    }
    if (c == ',' && !first) {
        ++p_;
        if (!peek(c)) return false;
    } else if (first) {
        first = false;
    } else {
        return malformed("expected ',' or '}'");
    }
    if (c == '"') {
        bool ascii = false;
        if (!string_view(key, ascii)) return false;
    } else if (c == '}') {
        return malformed("trailing comma in object");
    } else {
        return malformed("object keys must be strings");
    }
    if (!peek(c)) return false;
    if (c != ':') return malformed("expected ':'");
    ++p_;
    return true;
}

bool Reader::item(bool& first, bool& done) {
    unsigned char c = 0;
    if (!peek(c)) return false;
    done = false;
    if (c == ']') {
        ++p_;
        done = true;
        return true;
    }
    if (c == ',' && !first) {
        ++p_;
        if (!peek(c)) return false;
    } else if (first) {
        first = false;
    } else {
        return malformed("expected ',' or ']'");
    }
    if (c == ']') return malformed("trailing comma in array");
    return true;
}

// --- numbers ------------------------------------------------------------------------------------

bool Reader::number(Number& n) {
    const std::uint8_t* p = p_;
    n = Number{};
    n.start = p;
    if (*p == '-') {
        ++p;
        if (p == end_) {
            p_ = p;
            return malformed("invalid number");
        }
        n.negative = true;
    }
    const std::uint8_t* int_start = p;
    std::uint64_t m = 0;
    bool overflow = false;
    if (*p == '0') {
        ++p;
        if (p != end_ && is_digit(*p)) {
            p_ = p;
            return malformed("invalid number");
        }
    } else {
        while (p != end_ && is_digit(*p)) {
            unsigned d = *p - '0';
            if (m > (UINT64_MAX - d) / 10) overflow = true;
            m = m * 10 + d;
            ++p;
        }
        if (p == int_start) {
            p_ = p;
            return malformed("invalid character");
        }
    }
    if (p != end_ && *p == '.') {
        n.is_float = true;
        ++p;
        const std::uint8_t* frac = p;
        while (p != end_ && is_digit(*p)) ++p;
        if (p == frac) {
            p_ = p;
            return malformed("invalid number");
        }
    }
    if (p != end_ && (*p == 'e' || *p == 'E')) {
        n.is_float = true;
        ++p;
        if (p == end_) {
            p_ = p;
            return malformed("invalid number");
        }
        if (*p == '+' || *p == '-') ++p;
        const std::uint8_t* exp = p;
        while (p != end_ && is_digit(*p)) ++p;
        if (p == exp) {
            p_ = p;
            return malformed("invalid number");
        }
    }
    p_ = p;
    n.end = p;
    if (!n.is_float) {
        n.big = overflow || (n.negative && m > (1ULL << 63));
        n.mantissa = m;
    }
    return true;
}

bool Reader::number_to_double(const Number& n, double& out) {
    if (!n.is_float && !n.big) {
        out = n.negative ? -static_cast<double>(n.mantissa) : static_cast<double>(n.mantissa);
        if (n.negative && n.mantissa == 0) out = 0.0;  // the integer -0 is 0
        return true;
    }
    // Correctly rounded (glibc strtod), as the reference reader rounds.
    std::string text(reinterpret_cast<const char*>(n.start), static_cast<std::size_t>(n.end - n.start));
    errno = 0;
    double v = std::strtod(text.c_str(), nullptr);
    if (std::isinf(v)) return f_.fail(ErrorClass::DecodeError, "Number out of range");
    out = v;
    return true;
}

bool Reader::i64(std::int64_t lo, std::int64_t hi, std::int64_t& out) {
    unsigned char c = 0;
    if (!peek(c)) return false;
    if (!(c == '-' || is_digit(c))) {
        if (c == 'n' || c == 't' || c == 'f' || c == '[' || c == '{' || c == '"') return mismatch("int");
        Number n;
        return number(n);  // not a number either: the parse says what is wrong
    }
    Number n;
    if (!number(n)) return false;
    if (n.is_float) {
        double d = 0.0;
        if (!number_to_double(n, d)) return false;
        return f_.fail(ErrorClass::DecodeError, "Expected `int`, got `float`");
    }
    if (n.big) {
        // an integer past 64 bits: its literal longer than the 4,300 characters any reader converts is
        // out of range; a shorter one is out of the field's range (spec §3.2)
        if (n.end - n.start > 4300) return f_.fail(ErrorClass::DecodeError, "Integer value out of range");
        if (n.negative) return f_.fail(ErrorClass::DecodeError, "Expected `int` >= " + std::to_string(lo));
        return f_.fail(ErrorClass::DecodeError, "Expected `int` <= " + std::to_string(hi));
    }
    if (n.negative) {
        std::int64_t v = n.mantissa == (1ULL << 63) ? INT64_MIN : -static_cast<std::int64_t>(n.mantissa);
        if (v < lo) return f_.fail(ErrorClass::DecodeError, "Expected `int` >= " + std::to_string(lo));
        if (v > hi) return f_.fail(ErrorClass::DecodeError, "Expected `int` <= " + std::to_string(hi));
        out = v;
        return true;
    }
    if (n.mantissa > static_cast<std::uint64_t>(hi)) {
        return f_.fail(ErrorClass::DecodeError, "Expected `int` <= " + std::to_string(hi));
    }
    std::int64_t v = static_cast<std::int64_t>(n.mantissa);
    if (v < lo) return f_.fail(ErrorClass::DecodeError, "Expected `int` >= " + std::to_string(lo));
    out = v;
    return true;
}

bool Reader::u64(std::uint64_t hi, std::uint64_t& out) {
    unsigned char c = 0;
    if (!peek(c)) return false;
    if (!(c == '-' || is_digit(c))) {
        if (c == 'n' || c == 't' || c == 'f' || c == '[' || c == '{' || c == '"') return mismatch("int");
        Number n;
        return number(n);
    }
    Number n;
    if (!number(n)) return false;
    if (n.is_float) {
        double d = 0.0;
        if (!number_to_double(n, d)) return false;
        return f_.fail(ErrorClass::DecodeError, "Expected `int`, got `float`");
    }
    if (n.big && n.end - n.start > 4300) return f_.fail(ErrorClass::DecodeError, "Integer value out of range");
    if (n.negative && n.mantissa != 0) return f_.fail(ErrorClass::DecodeError, "Expected `int` >= 0");
    if (n.big) {
        if (hi == UINT64_MAX) {
            // JSON integers have no size: above u64 is refused after the decode (spec §3.2).
            std::string digits(reinterpret_cast<const char*>(n.start), static_cast<std::size_t>(n.end - n.start));
            return f_.fail_at(ErrorClass::DecodeError, "payload",
                              digits + " is above 18446744073709551615, the largest u64", "integers in 0..2**64-1");
        }
        return f_.fail(ErrorClass::DecodeError, "Expected `int` <= " + std::to_string(hi));
    }
    if (n.mantissa > hi) return f_.fail(ErrorClass::DecodeError, "Expected `int` <= " + std::to_string(hi));
    out = n.mantissa;
    return true;
}

bool Reader::f64(double& out) {
    unsigned char c = 0;
    if (!peek(c)) return false;
    if (c == '"') {
        std::string_view v;
        bool ascii = false;
        if (!string_view(v, ascii)) return false;
        if (v == "NaN") {
            out = std::nan("");
        } else if (v == "Infinity") {
            out = HUGE_VAL;
        } else if (v == "-Infinity") {
            out = -HUGE_VAL;
        } else {
            return invalid_enum(v);
        }
        return true;
    }
    if (c == 'n' || c == 't' || c == 'f' || c == '[' || c == '{') return mismatch("float | str");
    Number n;
    if (!number(n)) return false;
    return number_to_double(n, out);
}

bool Reader::boolean(bool& out) {
    unsigned char c = 0;
    if (!peek(c)) return false;
    if (c == 't') {
        if (!literal("rue", 3)) return false;
        out = true;
        return true;
    }
    if (c == 'f') {
        if (!literal("alse", 4)) return false;
        out = false;
        return true;
    }
    return mismatch("bool");
}

// --- skipping -----------------------------------------------------------------------------------

bool Reader::skip_number() {
    const std::uint8_t* p = p_;
    if (*p == '-') ++p;
    if (p != end_ && *p == '0') {
        ++p;
        if (p != end_ && is_digit(*p)) {
            p_ = p;
            return malformed("invalid number");
        }
    } else {
        const std::uint8_t* d = p;
        while (p != end_ && is_digit(*p)) ++p;
        if (p == d) {
            p_ = p;
            return malformed("invalid character");
        }
    }
    if (p != end_ && *p == '.') {
        ++p;
        const std::uint8_t* d = p;
        while (p != end_ && is_digit(*p)) ++p;
        if (p == d) {
            p_ = p;
            return malformed("invalid number");
        }
    }
    if (p != end_ && (*p == 'e' || *p == 'E')) {
        ++p;
        if (p != end_ && (*p == '+' || *p == '-')) ++p;
        const std::uint8_t* d = p;
        while (p != end_ && is_digit(*p)) ++p;
        if (p == d) {
            p_ = p;
            return malformed("invalid number");
        }
    }
    p_ = p;
    return true;
}

bool Reader::skip(std::uint64_t level) {
    // Iterative: one entry per open array ('[') or object ('{'), innermost last.
    std::vector<std::pair<char, bool>> open;  // (kind, first item still to come)
    auto ident = [this](const char* rest, std::size_t len) {
        ++p_;
        if (static_cast<std::size_t>(end_ - p_) < len) return truncated();
        for (std::size_t i = 0; i < len; ++i) {
            if (p_[i] != static_cast<unsigned char>(rest[i])) return malformed("invalid character");
        }
        p_ += len;
        return true;
    };
    bool need_value = true;
    while (true) {
        unsigned char c = 0;
        if (need_value) {
            if (!peek(c)) return false;
            switch (c) {
                case 'n':
                    if (!ident("ull", 3)) return false;
                    break;
                case 't':
                    if (!ident("rue", 3)) return false;
                    break;
                case 'f':
                    if (!ident("alse", 4)) return false;
                    break;
                case '"':
                    if (!skip_string()) return false;
                    break;
                case '[':
                case '{':
                    if (level + open.size() + 1 > max_depth_) return too_deep();
                    ++p_;
                    open.emplace_back(static_cast<char>(c), true);
                    break;
                default:
                    if (!skip_number()) return false;
                    break;
            }
            need_value = false;
        }
        if (open.empty()) return true;
        // Inside a container: the next item, or its end.
        auto& top = open.back();
        if (!peek(c)) return false;
        if (top.first == '[') {
            if (c == ']') {
                ++p_;
                open.pop_back();
                continue;
            }
            if (c == ',' && !top.second) {
                ++p_;
                if (!peek(c)) return false;
            } else if (top.second) {
                top.second = false;
            } else {
                return malformed("expected ',' or ']'");
            }
            if (c == ']') return malformed("trailing comma in array");
            need_value = true;
            continue;
        }
        if (c == '}') {
            ++p_;
            open.pop_back();
            continue;
        }
        if (c == ',' && !top.second) {
            ++p_;
            if (!peek(c)) return false;
        } else if (top.second) {
            top.second = false;
        } else {
            return malformed("expected ',' or '}'");
        }
        if (c == '"') {
            if (!skip_string()) return false;
        } else if (c == '}') {
            return malformed("trailing comma in object");
        } else {
            return malformed("expected '\"'");
        }
        if (!peek(c)) return false;
        if (c != ':') return malformed("expected ':'");
        ++p_;
        need_value = true;
    }
}

bool Reader::finish() {
    while (p_ < end_) {
        unsigned char c = *p_++;
        if (!(c == ' ' || c == '\n' || c == '\t' || c == '\r')) return malformed("trailing characters");
    }
    return true;
}

namespace {

// Decode the JSON string at text[i] (its opening quote), already known to be valid; i moves past it.
std::string unquote(std::string_view text, std::size_t& i) {
    std::string out;
    ++i;
    while (text[i] != '"') {
        char c = text[i];
        if (c != '\\') {
            out += c;
            ++i;
            continue;
        }
        char e = text[i + 1];
        i += 2;
        switch (e) {
            case 'n': out += '\n'; break;
            case 't': out += '\t'; break;
            case 'r': out += '\r'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'u': {
                auto hex = [&](std::size_t at) {
                    unsigned v = 0;
                    for (std::size_t k = 0; k < 4; ++k) {
                        char h = text[at + k];
                        v = v << 4 | static_cast<unsigned>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
                    }
                    return v;
                };
                unsigned cp = hex(i);
                i += 4;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (hex(i + 2) - 0xDC00);
                    i += 6;
                }
                if (cp < 0x80) {
                    out += static_cast<char>(cp);
                } else if (cp < 0x800) {
                    out += static_cast<char>(0xC0 | (cp >> 6));
                    out += static_cast<char>(0x80 | (cp & 0x3F));
                } else if (cp < 0x10000) {
                    out += static_cast<char>(0xE0 | (cp >> 12));
                    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
                    out += static_cast<char>(0x80 | (cp & 0x3F));
                } else {
                    out += static_cast<char>(0xF0 | (cp >> 18));
                    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
                    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
                    out += static_cast<char>(0x80 | (cp & 0x3F));
                }
                break;
            }
            default: out += e; break;  // " \ /
        }
    }
    ++i;
    return out;
}

struct Frame {
    bool object;
    bool expect_key;
    std::vector<std::string> keys;
    bool duplicate = false;
    std::string first_duplicate;
};

}  // namespace

bool check_text(std::string_view text, rt::Failure& failure) {
    utf8::Problem bad = utf8::check(text);
    if (bad.reason != nullptr) {
        return failure.fail_at(ErrorClass::DecodeError, "payload",
                               "not valid UTF-8 at byte " + std::to_string(bad.start) + " (" + bad.reason + ")");
    }
    // The text is valid JSON (the decoder accepted it): find the first object, in the order objects end,
    // whose members repeat a name, and the first repeated name in it.
    std::vector<Frame> stack;
    std::size_t i = 0;
    const std::size_t n = text.size();
    while (i < n) {
        char c = text[i];
        switch (c) {
            case '{': stack.push_back(Frame{true, true, {}, false, {}}); ++i; break;
            case '[': stack.push_back(Frame{false, false, {}, false, {}}); ++i; break;
            case '}':
            case ']': {
                if (!stack.empty()) {
                    Frame& top = stack.back();
                    if (top.duplicate) {
                        return failure.fail_at(ErrorClass::DecodeError, "payload",
                                               "an object has the name " + rt::py_repr(top.first_duplicate) + " twice",
                                               "each name once");
                    }
                    stack.pop_back();
                }
                ++i;
                break;
            }
            case ',':
                if (!stack.empty() && stack.back().object) stack.back().expect_key = true;
                ++i;
                break;
            case '"': {
                if (!stack.empty() && stack.back().object && stack.back().expect_key) {
                    Frame& top = stack.back();
                    std::string key = unquote(text, i);
                    top.expect_key = false;
                    if (!top.duplicate) {
                        for (const auto& k : top.keys) {
                            if (k == key) {
                                top.duplicate = true;
                                top.first_duplicate = key;
                                break;
                            }
                        }
                        if (!top.duplicate) top.keys.push_back(std::move(key));
                    }
                } else {
                    ++i;
                    while (text[i] != '"') i += text[i] == '\\' ? 2 : 1;
                    ++i;
                }
                break;
            }
            case '-':
            case '0':
            case '1':
            case '2':
            case '3':
            case '4':
            case '5':
            case '6':
            case '7':
            case '8':
            case '9': {
                // an integer literal of more than 4,300 digits, anywhere (spec §9.6: max_int_digits)
                std::size_t start = i;
                if (text[i] == '-') ++i;
                std::size_t digits = 0;
                while (i < n && text[i] >= '0' && text[i] <= '9') {
                    ++i;
                    ++digits;
                }
                bool fraction = i < n && (text[i] == '.' || text[i] == 'e' || text[i] == 'E');
                while (i < n && (text[i] == '.' || text[i] == 'e' || text[i] == 'E' || text[i] == '+' ||
                                 text[i] == '-' || (text[i] >= '0' && text[i] <= '9'))) {
                    ++i;
                }
                if (!fraction && digits > kMaxIntDigits) {
                    (void)start;
                    return failure.fail_at(ErrorClass::DecodeError, "payload",
                                           "an integer of more than " + rt::with_commas(kMaxIntDigits) + " digits",
                                           "a 64-bit integer, " + limit_hint("max_int_digits"));
                }
                break;
            }
            default: ++i; break;
        }
    }
    return true;
}

}  // namespace tracepack::js
