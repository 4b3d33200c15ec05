// tracepack C++ runtime: a verifying reader of the FlatBuffers wire format (spec §5).
#include "tracepack/flatbuffers.hpp"

#include "tracepack/utf8.hpp"

namespace tracepack::fb {

namespace {

std::uint32_t load32(const std::uint8_t* p) noexcept {
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

std::uint16_t load16(const std::uint8_t* p) noexcept {
    std::uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}

std::string num(std::int64_t v) { return std::to_string(v); }

}  // namespace

bool Reader::u32(std::size_t pos, std::uint32_t& out) {
    if (n_ < 4 || pos > n_ - 4) {
        return f_.fail(ErrorClass::DecodeError,
                       "offset at byte " + num(static_cast<std::int64_t>(pos)) + " is outside the buffer (" +
                           num(static_cast<std::int64_t>(n_)) + " bytes)");
    }
    out = load32(d_ + pos);
    return true;
}

bool Reader::root(const char* identifier, std::size_t& pos) {
    if (n_ < 8) {
        return f_.fail(ErrorClass::DecodeError, num(static_cast<std::int64_t>(n_)) + " bytes are too few for a FlatBuffer");
    }
    std::string_view got(reinterpret_cast<const char*>(d_ + 4), 4);
    if (identifier != nullptr && *identifier && got != identifier) {
        return f_.fail(ErrorClass::DecodeError, "file identifier " + rt::py_bytes_repr(got) + " is not " +
                                                    rt::py_bytes_repr(identifier) + ": not a tracepack FlatBuffer");
    }
    pos = load32(d_);
    return true;
}

bool Reader::table(std::size_t pos, const TableSpec& spec, Table& t) {
    const std::int64_t n = static_cast<std::int64_t>(n_);
    const std::int64_t p = static_cast<std::int64_t>(pos);
    if (n < 4 || p > n - 4) {
        return f_.fail(ErrorClass::DecodeError, std::string(spec.name) + " table at byte " + num(p) +
                                                    " is outside the buffer (" + num(n) + " bytes)");
    }
    std::int32_t soffset;
    std::memcpy(&soffset, d_ + pos, 4);
    const std::int64_t vt = p - soffset;
    if (vt < 0 || vt > n - 4) {
        return f_.fail(ErrorClass::DecodeError, "vtable of the " + std::string(spec.name) + " table at byte " + num(p) +
                                                    " is outside the buffer (byte " + num(vt) + ")");
    }
    const std::uint16_t vsize = load16(d_ + vt);
    const std::uint16_t tsize = load16(d_ + vt + 2);
    if (vsize < 4 || vsize % 2 || vt + vsize > n || tsize < 4) {
        return f_.fail(ErrorClass::DecodeError, "vtable of the " + std::string(spec.name) + " table at byte " + num(p) +
                                                    " is malformed (size " + num(vsize) + ", table " + num(tsize) + ")");
    }
    t.pos = pos;
    t.vt = d_ + vt;
    t.vsize = vsize;
    // Every field the schema knows lies inside the table (spec §5.1).
    for (unsigned slot = 0; slot < spec.slots; ++slot) {
        std::uint16_t at = t.at(slot);
        if (at && static_cast<unsigned>(at) + spec.sizes[slot] > tsize) {
            return f_.fail(ErrorClass::DecodeError, "field `" + std::string(spec.names[slot]) + "` of " + spec.name +
                                                        " at offset " + num(at) + " overruns the table (" + num(tsize) +
                                                        " bytes)");
        }
    }
    if (p + tsize > n) {
        return f_.fail(ErrorClass::DecodeError, std::string(spec.name) + " table at byte " + num(p) + " (" + num(tsize) +
                                                    " bytes) overruns the buffer (" + num(n) + " bytes)");
    }
    return true;
}

bool Reader::vector(std::size_t pos, std::size_t elem, std::size_t& first, std::uint32_t& count) {
    if (!u32(pos, count)) return false;
    // pos <= n - 4 here, so nothing below overflows
    const std::uint64_t end = static_cast<std::uint64_t>(pos) + 4 + static_cast<std::uint64_t>(count) * elem;
    if (end > n_) {
        return f_.fail(ErrorClass::DecodeError, "vector of " + num(count) + " elements at byte " +
                                                    num(static_cast<std::int64_t>(pos)) + " overruns the buffer (" +
                                                    num(static_cast<std::int64_t>(n_)) + " bytes)");
    }
    budget_ -= count;
    if (budget_ < 0) {
        return f_.fail(ErrorClass::DecodeError,
                       "the buffer decodes to more elements than its size allows (shared objects?)");
    }
    first = pos + 4;
    return true;
}

bool Reader::offsets(std::size_t pos, std::size_t& first, std::uint32_t& count) {
    return vector(pos, 4, first, count);
}

bool Reader::utf8_failure(std::string_view s) {
    utf8::Problem bad = utf8::check(s);
    return f_.fail(ErrorClass::DecodeError, std::string("string is not valid UTF-8 (") + bad.reason + " at byte " +
                                                num(static_cast<std::int64_t>(bad.start)) + ")");
}

bool Reader::string(std::size_t pos, std::string& out) {
    std::uint32_t size;
    if (!u32(pos, size)) return false;
    const std::uint64_t end = static_cast<std::uint64_t>(pos) + 4 + size;
    if (end >= n_) {
        return f_.fail(ErrorClass::DecodeError, "string of " + num(size) + " bytes at byte " +
                                                    num(static_cast<std::int64_t>(pos)) + " overruns the buffer (" +
                                                    num(static_cast<std::int64_t>(n_)) + " bytes)");
    }
    if (d_[end] != 0) {  // a string ends in a NUL (spec §5.1), as FlatBuffers' Verifier checks
        return f_.fail(ErrorClass::DecodeError, "string of " + num(size) + " bytes at byte " +
                                                    num(static_cast<std::int64_t>(pos)) + " has no NUL after it");
    }
    std::string_view v(reinterpret_cast<const char*>(d_ + pos + 4), size);
    if (!utf8::valid(v)) return utf8_failure(v);
    out.assign(v.data(), v.size());
    return true;
}

bool Reader::string_item(std::size_t pos, std::string& out) {
    if (n_ < 4 || pos > n_ - 4) {
        return f_.fail(ErrorClass::DecodeError, "string at byte " + num(static_cast<std::int64_t>(pos)) +
                                                    " is outside the buffer (" + num(static_cast<std::int64_t>(n_)) +
                                                    " bytes)");
    }
    std::uint32_t size = load32(d_ + pos);
    const std::uint64_t end = static_cast<std::uint64_t>(pos) + 4 + size;
    if (end >= n_) {
        return f_.fail(ErrorClass::DecodeError, "string at byte " + num(static_cast<std::int64_t>(pos)) +
                                                    " overruns the buffer (" + num(static_cast<std::int64_t>(n_)) +
                                                    " bytes)");
    }
    if (d_[end] != 0) {
        return f_.fail(ErrorClass::DecodeError,
                       "string at byte " + num(static_cast<std::int64_t>(pos)) + " has no NUL after it");
    }
    std::string_view v(reinterpret_cast<const char*>(d_ + pos + 4), size);
    if (!utf8::valid(v)) return utf8_failure(v);
    out.assign(v.data(), v.size());
    return true;
}

bool Reader::bytes(std::size_t pos, std::string& out) {
    std::size_t first = 0;
    std::uint32_t count = 0;
    if (!vector(pos, 1, first, count)) return false;
    out.assign(reinterpret_cast<const char*>(d_ + first), count);
    return true;
}

bool Reader::bad_enum(std::int64_t value, const char* enum_name) {
    return f_.fail(ErrorClass::DecodeError, num(value) + " is not a value of enum " + enum_name);
}

bool Reader::bad_union(unsigned tag, const char* union_name) {
    if (tag == 0) return f_.fail(ErrorClass::DecodeError, "required union is missing");
    return f_.fail(ErrorClass::DecodeError, num(tag) + " is not a variant of union " + union_name);
}

std::size_t document_size(const std::uint8_t* data, std::size_t size) noexcept {
    if (size >= 16) {
        std::uint32_t side = load32(data + size - 8);
        if (std::memcmp(data + size - 4, "TPKI", 4) == 0 && side >= 8 && static_cast<std::uint64_t>(side) + 8 + 8 <= size) {
            std::size_t start = size - 8 - side;
            if (start % 8 == 0 && std::memcmp(data + start + 4, "TPKI", 4) == 0) return start;
        }
    }
    return size;
}

}  // namespace tracepack::fb
