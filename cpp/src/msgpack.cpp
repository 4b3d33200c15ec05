// tracepack C++ runtime: reading MessagePack (spec §4).
#include "tracepack/msgpack.hpp"

#include <cstdio>
#include <vector>

#include "tracepack/limits.hpp"
#include "tracepack/utf8.hpp"

namespace tracepack::mp {

namespace {

const char* type_name(std::uint8_t c) noexcept {
    if (c <= 0x7f || c >= 0xe0) return "int";
    if (c <= 0x8f) return "object";
    if (c <= 0x9f) return "array";
    if (c <= 0xbf) return "str";
    switch (c) {
        case 0xc0: return "None";
        case 0xc2:
        case 0xc3: return "bool";
        case 0xc4:
        case 0xc5:
        case 0xc6: return "bytes";
        case 0xc7:
        case 0xc8:
        case 0xc9:
        case 0xd4:
        case 0xd5:
        case 0xd6:
        case 0xd7:
        case 0xd8: return "ext";
        case 0xca:
        case 0xcb: return "float";
        case 0xcc:
        case 0xcd:
        case 0xce:
        case 0xcf:
        case 0xd0:
        case 0xd1:
        case 0xd2:
        case 0xd3: return "int";
        case 0xd9:
        case 0xda:
        case 0xdb: return "str";
        case 0xdc:
        case 0xdd: return "array";
        case 0xde:
        case 0xdf: return "object";
        default: return nullptr;  // 0xc1: never used
    }
}

constexpr const char* kNotValid = "not valid MessagePack: ";

}  // namespace

const char* Reader::next_type() const noexcept {
    if (p_ >= end_) return nullptr;
    return type_name(*p_);
}

bool Reader::truncated() {
    return f_.fail_at(ErrorClass::DecodeError, "payload", std::string(kNotValid) + "Input data was truncated");
}

bool Reader::invalid_opcode() {
    char buf[96];
    std::snprintf(buf, sizeof buf, "MessagePack data is malformed: invalid opcode '\\x%02x' (byte %zu)", *p_, offset());
    return f_.fail_at(ErrorClass::DecodeError, "payload", std::string(kNotValid) + buf);
}

bool Reader::mismatch(const char* expected) {
    if (p_ >= end_) return truncated();
    std::uint8_t c = *p_;
    const char* got = type_name(c);
    if (got == nullptr) return invalid_opcode();
    // The bytes the value's header and payload take (an array's or map's items are not read).
    std::size_t need = 1;
    std::size_t avail = remaining();
    auto sized = [&](std::size_t width, std::size_t extra) -> bool {
        if (avail < 1 + width) return false;
        std::size_t len = 0;
        for (std::size_t i = 0; i < width; ++i) len = len << 8 | p_[1 + i];
        if (avail - 1 - width < extra || avail - 1 - width - extra < len) return false;
        need = 1 + width + extra + len;
        return true;
    };
    if ((c & 0xe0) == 0xa0) {
        need = 1 + (c & 0x1f);
    } else {
        switch (c) {
            case 0xca: need = 5; break;
            case 0xcb: need = 9; break;
            case 0xcc:
            case 0xd0: need = 2; break;
            case 0xcd:
            case 0xd1: need = 3; break;
            case 0xce:
            case 0xd2: need = 5; break;
            case 0xcf:
            case 0xd3: need = 9; break;
            case 0xdc:
            case 0xde: need = 3; break;
            case 0xdd:
            case 0xdf: need = 5; break;
            case 0xd4: need = 3; break;
            case 0xd5: need = 4; break;
            case 0xd6: need = 6; break;
            case 0xd7: need = 10; break;
            case 0xd8: need = 18; break;
            case 0xc4:
            case 0xd9:
                if (!sized(1, 0)) return truncated();
                break;
            case 0xc5:
            case 0xda:
                if (!sized(2, 0)) return truncated();
                break;
            case 0xc6:
            case 0xdb:
                if (!sized(4, 0)) return truncated();
                break;
            case 0xc7:
                if (!sized(1, 1)) return truncated();
                break;
            case 0xc8:
                if (!sized(2, 1)) return truncated();
                break;
            case 0xc9:
                if (!sized(4, 1)) return truncated();
                break;
            default: break;
        }
    }
    if (avail < need) return truncated();
    p_ += need;
    std::string msg = "Expected `";
    msg += expected;
    msg += "`, got `";
    msg += got;
    msg += "`";
    return f_.fail(ErrorClass::DecodeError, std::move(msg));
}

bool Reader::tag_int(bool& neg, std::uint64_t& bits) {
    if (p_ >= end_) return truncated();
    std::uint8_t c = *p_;
    const char* t = type_name(c);
    if (t != nullptr && t[0] == 'i') return integer(neg, bits, "int");
    const char* got = c == 0xc0 ? "null" : t == nullptr ? "unknown" : t;
    ++p_;
    std::string msg = "Expected `int`, got `";
    msg += got;
    msg += "`";
    return f_.fail(ErrorClass::DecodeError, std::move(msg));
}

bool Reader::too_short(std::uint32_t need, std::uint32_t got) {
    return f_.fail(ErrorClass::DecodeError, "Expected `array` of at least length " + std::to_string(need) + ", got " +
                                                std::to_string(got));
}

bool Reader::below(std::int64_t lo) {
    return f_.fail(ErrorClass::DecodeError, "Expected `int` >= " + std::to_string(lo));
}

bool Reader::above_signed(std::int64_t hi) {
    return f_.fail(ErrorClass::DecodeError, "Expected `int` <= " + std::to_string(hi));
}

bool Reader::above_unsigned(std::uint64_t hi) {
    return f_.fail(ErrorClass::DecodeError, "Expected `int` <= " + std::to_string(hi));
}

bool Reader::integer_slow(bool& neg, std::uint64_t& bits, const char* expected) {
    std::uint8_t c = *p_;
    std::size_t need = 0;
    switch (c) {
        case 0xcc:
        case 0xd0: need = 1; break;
        case 0xcd:
        case 0xd1: need = 2; break;
        case 0xce:
        case 0xd2: need = 4; break;
        case 0xcf:
        case 0xd3: need = 8; break;
        default: return mismatch(expected);
    }
    if (remaining() < 1 + need) return truncated();
    const std::uint8_t* q = p_ + 1;
    std::uint64_t raw = 0;
    for (std::size_t i = 0; i < need; ++i) raw = raw << 8 | q[i];
    p_ += 1 + need;
    if (c <= 0xcf) {  // unsigned
        neg = false;
        bits = raw;
        return true;
    }
    // signed: sign-extend from `need` bytes
    std::int64_t v = 0;
    switch (need) {
        case 1: v = static_cast<std::int8_t>(raw); break;
        case 2: v = static_cast<std::int16_t>(raw); break;
        case 4: v = static_cast<std::int32_t>(raw); break;
        default: v = static_cast<std::int64_t>(raw); break;
    }
    neg = v < 0;
    bits = static_cast<std::uint64_t>(v);
    return true;
}

bool Reader::f64(double& out) {
    if (p_ >= end_) return truncated();
    std::uint8_t c = *p_;
    if (c == 0xcb) {
        if (remaining() < 9) return truncated();
        std::uint64_t b = be64(p_ + 1);
        std::memcpy(&out, &b, 8);
        p_ += 9;
        return true;
    }
    if (c == 0xca) {
        if (remaining() < 5) return truncated();
        std::uint32_t b = be32(p_ + 1);
        float fl;
        std::memcpy(&fl, &b, 4);
        out = static_cast<double>(fl);
        p_ += 5;
        return true;
    }
    // Integers are floats too (spec §4.2).
    const char* t = type_name(c);
    if (t != nullptr && t[0] == 'i') {
        bool neg = false;
        std::uint64_t bits = 0;
        if (!integer(neg, bits, "float")) return false;
        out = neg ? static_cast<double>(static_cast<std::int64_t>(bits)) : static_cast<double>(bits);
        return true;
    }
    return mismatch("float");
}

bool Reader::key(std::string_view& out) {
    if (p_ >= end_) return truncated();
    std::uint8_t c = *p_;
    std::size_t len = 0;
    std::size_t head = 1;
    if ((c & 0xe0) == 0xa0) {
        len = c & 0x1f;
    } else if (c == 0xd9 || c == 0xda || c == 0xdb) {
        head = c == 0xd9 ? 2 : c == 0xda ? 3 : 5;
        if (remaining() < head) return truncated();
        for (std::size_t i = 1; i < head; ++i) len = len << 8 | p_[i];
    } else {
        const char* t = type_name(c);
        const char* got = c == 0xc0 ? "null" : t == nullptr ? "unknown" : t;
        ++p_;
        std::string msg = "Expected `str`, got `";
        msg += got;
        msg += "`";
        return f_.fail(ErrorClass::DecodeError, std::move(msg));
    }
    if (remaining() - head < len) return truncated();
    out = std::string_view(reinterpret_cast<const char*>(p_ + head), len);
    p_ += head + len;
    return true;
}

bool Reader::str_view(std::string_view& out) {
    if (p_ >= end_) return truncated();
    std::uint8_t c = *p_;
    std::size_t len;
    std::size_t head;
    if ((c & 0xe0) == 0xa0) {
        len = c & 0x1f;
        head = 1;
    } else if (c == 0xd9) {
        if (remaining() < 2) return truncated();
        len = p_[1];
        head = 2;
    } else if (c == 0xda) {
        if (remaining() < 3) return truncated();
        len = static_cast<std::size_t>(p_[1]) << 8 | p_[2];
        head = 3;
    } else if (c == 0xdb) {
        if (remaining() < 5) return truncated();
        len = be32(p_ + 1);
        head = 5;
    } else {
        return mismatch("str");
    }
    if (remaining() - head < len) return truncated();
    out = std::string_view(reinterpret_cast<const char*>(p_ + head), len);
    utf8::Problem bad = utf8::check(out);
    if (bad.reason != nullptr) {
        return f_.fail_at(ErrorClass::DecodeError, "payload",
                          std::string("a string is not valid UTF-8 (") + bad.reason + ")");
    }
    p_ += head + len;
    return true;
}

bool Reader::skip(std::uint64_t level) {
    // Iterative: items left to skip at each open level, innermost last.
    std::uint64_t todo = 1;
    std::vector<std::uint64_t> stack;  // items left in each enclosing container; its size is the depth
    while (true) {
        while (todo == 0) {
            if (stack.empty()) return true;
            todo = stack.back();
            stack.pop_back();
        }
        --todo;
        if (p_ >= end_) return truncated();
        std::uint8_t c = *p_;
        std::uint64_t count = 0;
        bool container = false;
        std::size_t fixed = 0;
        std::size_t width = 0;  // bytes of a big-endian length that follows
        std::size_t extra = 0;  // ext type byte
        if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3) {
            fixed = 0;
        } else if (c <= 0x8f) {
            container = true;
            count = 2ULL * (c & 0x0f);
        } else if (c <= 0x9f) {
            container = true;
            count = c & 0x0f;
        } else if (c <= 0xbf) {
            fixed = c & 0x1f;
        } else {
            switch (c) {
                case 0xca: fixed = 4; break;
                case 0xcb: fixed = 8; break;
                case 0xcc:
                case 0xd0: fixed = 1; break;
                case 0xcd:
                case 0xd1: fixed = 2; break;
                case 0xce:
                case 0xd2: fixed = 4; break;
                case 0xcf:
                case 0xd3: fixed = 8; break;
                case 0xd4: fixed = 2; break;
                case 0xd5: fixed = 3; break;
                case 0xd6: fixed = 5; break;
                case 0xd7: fixed = 9; break;
                case 0xd8: fixed = 17; break;
                case 0xc4:
                case 0xd9: width = 1; break;
                case 0xc5:
                case 0xda: width = 2; break;
                case 0xc6:
                case 0xdb: width = 4; break;
                case 0xc7:
                    width = 1;
                    extra = 1;
                    break;
                case 0xc8:
                    width = 2;
                    extra = 1;
                    break;
                case 0xc9:
                    width = 4;
                    extra = 1;
                    break;
                case 0xdc:
                case 0xde: {
                    if (remaining() < 3) return truncated();
                    container = true;
                    count = static_cast<std::uint64_t>(p_[1]) << 8 | p_[2];
                    if (c == 0xde) count *= 2;
                    p_ += 2;
                    break;
                }
                case 0xdd:
                case 0xdf: {
                    if (remaining() < 5) return truncated();
                    container = true;
                    count = be32(p_ + 1);
                    if (c == 0xdf) count *= 2;
                    p_ += 4;
                    break;
                }
                default: return invalid_opcode();
            }
        }
        ++p_;
        if (container) {
            std::uint64_t here = level + stack.size() + 1;
            if (here > max_depth_) {
                return f_.fail_at(ErrorClass::DecodeError, "payload",
                                  "nested more than " + rt::with_commas(max_depth_) +
                                      " levels deep (hostile or damaged input?)",
                                  "shallower nesting, " + limit_hint("max_depth"));
            }
            if (count) {
                stack.push_back(todo);
                todo = count;
            }
            continue;
        }
        std::size_t len = fixed;
        if (width) {
            if (remaining() < width) return truncated();
            len = 0;
            for (std::size_t i = 0; i < width; ++i) len = len << 8 | p_[i];
            p_ += width;
            len += extra;
        }
        if (remaining() < len) return truncated();
        p_ += len;
    }
}

bool Reader::finish() {
    if (p_ == end_) return true;
    char buf[96];
    std::snprintf(buf, sizeof buf, "MessagePack data is malformed: trailing characters (byte %zu)", offset());
    return f_.fail_at(ErrorClass::DecodeError, "payload", std::string(kNotValid) + buf);
}

}  // namespace tracepack::mp
