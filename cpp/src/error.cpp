// tracepack C++ runtime: errors (spec §9).
#include "tracepack/error.hpp"

#include <cstdio>

#include "tracepack/utf8.hpp"

namespace tracepack {

const char* error_class_name(ErrorClass cls) noexcept {
    switch (cls) {
        case ErrorClass::InputError: return "InputError";
        case ErrorClass::ContainerError: return "ContainerError";
        case ErrorClass::VersionError: return "VersionError";
        case ErrorClass::DecodeError: return "DecodeError";
        case ErrorClass::IntegrityError: return "IntegrityError";
        case ErrorClass::UsageError: return "UsageError";
        case ErrorClass::NotFoundError: return "NotFoundError";
        case ErrorClass::InternalError: return "InternalError";
    }
    return "TracepackError";
}

int exit_code(ErrorClass cls) noexcept { return cls == ErrorClass::InternalError ? 1 : 2; }

namespace {

// Errors are one line, always: fold the newlines a message brought in (spec §9).
std::string fold(std::string s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        if (c == '\r') {
            out += "\\r";
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out += c;
        }
    }
    return out;
}

void json_string(std::string& out, std::string_view s) {
    // json.dumps with its defaults (ensure_ascii): what the Python CLI's --error-format json writes.
    out += '"';
    std::size_t i = 0;
    while (i < s.size()) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        char buf[16];
        if (c == '"') {
            out += "\\\"";
        } else if (c == '\\') {
            out += "\\\\";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\b') {
            out += "\\b";
        } else if (c == '\f') {
            out += "\\f";
        } else if (c < 0x20) {
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else if (c < 0x80) {
            out += static_cast<char>(c);
        } else {
            std::uint32_t cp = 0;
            std::size_t len = utf8::decode_one(s, i, cp);
            if (len == 0) {  // not UTF-8 (cannot happen for our messages): escape the byte
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
                ++i;
                continue;
            }
            if (cp >= 0x10000) {
                cp -= 0x10000;
                std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else {
                std::snprintf(buf, sizeof buf, "\\u%04x", cp);
            }
            out += buf;
            i += len;
            continue;
        }
        ++i;
    }
    out += '"';
}

}  // namespace

std::string Error::line(std::string_view source) const {
    std::string out;
    if (!source.empty()) {
        out += source;
        out += ": ";
    }
    if (!where.empty()) {
        out += where;
        out += ": ";
    }
    out += problem;
    if (has_expected) {
        out += "; expected ";
        out += expected;
    }
    return fold(std::move(out));
}

std::string Error::json(std::string_view source) const {
    std::string out = "{\"error\": ";
    json_string(out, error_class_name(cls));
    out += ", \"place\": ";
    if (where.empty()) {
        out += "null";
    } else {
        json_string(out, where);
    }
    out += ", \"message\": ";
    json_string(out, line(source));
    out += "}";
    return out;
}

namespace rt {

bool Failure::fail(ErrorClass cls, std::string problem) {
    error = Error{cls, {}, std::move(problem), {}, false};
    steps.clear();
    fixed = false;
    return false;
}

bool Failure::fail(ErrorClass cls, std::string problem, std::string expected) {
    error = Error{cls, {}, std::move(problem), std::move(expected), true};
    steps.clear();
    fixed = false;
    return false;
}

bool Failure::fail_at(ErrorClass cls, std::string where, std::string problem) {
    error = Error{cls, std::move(where), std::move(problem), {}, false};
    steps.clear();
    fixed = true;
    return false;
}

bool Failure::fail_at(ErrorClass cls, std::string where, std::string problem, std::string expected) {
    error = Error{cls, std::move(where), std::move(problem), std::move(expected), true};
    steps.clear();
    fixed = true;
    return false;
}

bool Failure::step(std::string s) {
    if (!fixed) steps.push_back(std::move(s));
    return false;
}

bool Failure::field(std::string_view name) {
    if (!fixed) {
        std::string s = ".";
        s += name;
        steps.push_back(std::move(s));
    }
    return false;
}

bool Failure::index(std::size_t i) {
    if (!fixed) steps.push_back("[" + std::to_string(i) + "]");
    return false;
}

std::string Failure::path() const {
    std::string out = "$";
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) out += *it;
    return out;
}

namespace {

bool printable(std::uint32_t cp) {
    // Python's str.isprintable() for the code points a message can meet; the Unicode database's
    // unassigned code points are not known here (they print as themselves).
    if (cp < 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad) return false;
    if ((cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f) || (cp >= 0x205f && cp <= 0x206f))
        return false;
    if (cp == 0x1680 || cp == 0x180e || cp == 0x3000 || cp == 0xfeff || cp == 0x061c) return false;
    if ((cp >= 0x0600 && cp <= 0x0605) || cp == 0x06dd || cp == 0x070f || cp == 0x08e2) return false;
    if ((cp >= 0xd800 && cp <= 0xf8ff) || (cp >= 0xfff9 && cp <= 0xfffb) || cp == 0xfffe || cp == 0xffff)
        return false;
    if (cp >= 0xe0000 || (cp >= 0xf0000)) return false;
    return true;
}

}  // namespace

std::string py_repr(std::string_view s) {
    bool single = s.find('\'') == std::string_view::npos || s.find('"') != std::string_view::npos;
    char quote = single ? '\'' : '"';
    std::string out(1, quote);
    std::size_t i = 0;
    char buf[16];
    while (i < s.size()) {
        std::uint32_t cp = 0;
        std::size_t len = utf8::decode_one(s, i, cp);
        if (len == 0) {  // not UTF-8: Python would have refused it earlier; show the byte
            cp = static_cast<unsigned char>(s[i]);
            len = 1;
        }
        if (cp == static_cast<std::uint32_t>(quote) || cp == '\\') {
            out += '\\';
            out += static_cast<char>(cp);
        } else if (cp == '\t') {
            out += "\\t";
        } else if (cp == '\n') {
            out += "\\n";
        } else if (cp == '\r') {
            out += "\\r";
        } else if (!printable(cp)) {
            if (cp < 0x100) {
                std::snprintf(buf, sizeof buf, "\\x%02x", cp);
            } else if (cp < 0x10000) {
                std::snprintf(buf, sizeof buf, "\\u%04x", cp);
            } else {
                std::snprintf(buf, sizeof buf, "\\U%08x", cp);
            }
            out += buf;
        } else {
            out.append(s.data() + i, len);
        }
        i += len;
    }
    out += quote;
    return out;
}

std::string py_bytes_repr(std::string_view s) {
    bool single = s.find('\'') == std::string_view::npos || s.find('"') != std::string_view::npos;
    char quote = single ? '\'' : '"';
    std::string out = "b";
    out += quote;
    char buf[8];
    for (char ch : s) {
        unsigned char c = static_cast<unsigned char>(ch);
        if (c == static_cast<unsigned char>(quote) || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c < 0x20 || c >= 0x7f) {
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    out += quote;
    return out;
}

std::string with_commas(std::uint64_t n) {
    std::string digits = std::to_string(n);
    std::string out;
    int count = 0;
    for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
        if (count && count % 3 == 0) out += ',';
        out += *it;
        ++count;
    }
    return std::string(out.rbegin(), out.rend());
}

}  // namespace rt
}  // namespace tracepack
