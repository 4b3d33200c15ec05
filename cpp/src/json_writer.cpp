// tracepack C++ runtime: the canonical JSON text (spec §11.2.2).
#include "tracepack/json_writer.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <system_error>

namespace tracepack {

void append_py_float_repr(std::string& out, double x) {
    if (std::isnan(x)) {
        out += "nan";
        return;
    }
    if (std::isinf(x)) {
        out += x > 0 ? "inf" : "-inf";
        return;
    }
    if (x == 0) {
        out += std::signbit(x) ? "-0.0" : "0.0";
        return;
    }
    // The shortest digits that read back as x (as Python's repr finds them), in scientific form:
    // d[.ddd]e[+-]X.
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
    std::string_view sci(buf, static_cast<std::size_t>(res.ptr - buf));
    bool neg = sci[0] == '-';
    if (neg) sci.remove_prefix(1);
    std::size_t e = sci.find('e');
    std::string digits;
    for (std::size_t i = 0; i < e; ++i) {
        if (sci[i] != '.') digits += sci[i];
    }
    int exp10 = 0;
    std::from_chars(sci.data() + e + (sci[e + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exp10);
    // Python's decpt: x = 0.DIGITS * 10**decpt
    int decpt = exp10 + 1;
    int nd = static_cast<int>(digits.size());
    if (neg) out += '-';
    if (decpt <= -4 || decpt > 16) {
        out += digits[0];
        if (nd > 1) {
            out += '.';
            out.append(digits, 1, std::string::npos);
        }
        int ex = decpt - 1;
        char eb[16];
        std::snprintf(eb, sizeof eb, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
        out += eb;
    } else if (decpt <= 0) {
        out += "0.";
        out.append(static_cast<std::size_t>(-decpt), '0');
        out += digits;
    } else if (decpt >= nd) {
        out += digits;
        out.append(static_cast<std::size_t>(decpt - nd), '0');
        out += ".0";
    } else {
        out.append(digits, 0, static_cast<std::size_t>(decpt));
        out += '.';
        out.append(digits, static_cast<std::size_t>(decpt), std::string::npos);
    }
}

std::string py_float_repr(double x) {
    std::string out;
    append_py_float_repr(out, x);
    return out;
}

void JsonWriter::integer(std::int64_t v) {
    item();
    char buf[24];
    auto res = std::to_chars(buf, buf + sizeof buf, v);
    out_.append(buf, res.ptr);
}

void JsonWriter::uinteger(std::uint64_t v) {
    item();
    char buf[24];
    auto res = std::to_chars(buf, buf + sizeof buf, v);
    out_.append(buf, res.ptr);
}

void JsonWriter::real(double v) {
    item();
    // json.dumps writes non-finite floats as NaN, Infinity, -Infinity
    if (std::isnan(v)) {
        out_ += "NaN";
    } else if (std::isinf(v)) {
        out_ += v > 0 ? "Infinity" : "-Infinity";
    } else {
        append_py_float_repr(out_, v);
    }
}

void JsonWriter::quoted(std::string_view s) {
    out_ += '"';
    const char* p = s.data();
    const char* end = p + s.size();
    const char* run = p;
    while (p < end) {
        unsigned char c = static_cast<unsigned char>(*p);
        if (c >= 0x20 && c != '"' && c != '\\') {
            ++p;
            continue;
        }
        out_.append(run, p);
        switch (c) {
            case '"': out_ += "\\\""; break;
            case '\\': out_ += "\\\\"; break;
            case '\n': out_ += "\\n"; break;
            case '\r': out_ += "\\r"; break;
            case '\t': out_ += "\\t"; break;
            case '\b': out_ += "\\b"; break;
            case '\f': out_ += "\\f"; break;
            default: {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out_ += buf;
            }
        }
        ++p;
        run = p;
    }
    out_.append(run, p);
    out_ += '"';
}

}  // namespace tracepack
