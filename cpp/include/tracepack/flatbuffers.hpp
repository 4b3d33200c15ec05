// tracepack C++ runtime: a verifying reader of the FlatBuffers wire format (spec §5).
//
// The generated flatbuffers-rows decoders (generated/cpp/tracepack/vX_Y/flatbuffers_rows.cpp) read every
// table, vector and string through this reader, which checks each offset before it follows it: the
// table and its vtable inside the buffer, every field the schema knows inside its table, every vector and
// string inside the buffer, UTF-8 strings, and a budget on decoded elements (objects shared by several
// offsets could otherwise make a small buffer decode to a huge document). A failure names the place
// (`$.graph.nodes[3].inputs`) and what is wrong in the reference reader's words (spec §5.5, §9).
//
// It does not use FlatBuffers' own Verifier, and none of its limits (depth, table count) apply: the
// schema is not recursive, so depth is bounded by the schema, and the element budget bounds the work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "tracepack/error.hpp"

namespace tracepack::fb {

// One table type of the schema: its slots (a union field takes two: its type, then its value).
struct TableSpec {
    const char* name;
    std::uint16_t slots;
    const std::uint8_t* sizes;  // inline size of each slot: 1, 2, 4 or 8 (an offset is 4)
    const char* const* names;   // each slot's field name (a union's type slot: `<name>_type`)
};

// A table found and checked: its position and its vtable.
struct Table {
    std::size_t pos = 0;
    const std::uint8_t* vt = nullptr;
    std::uint16_t vsize = 0;

    // Offset of a slot's field in the table, 0 when absent.
    std::uint16_t at(unsigned slot) const noexcept {
        unsigned off = 4 + 2 * slot;
        if (off + 2 > vsize) return 0;
        std::uint16_t v;
        std::memcpy(&v, vt + off, 2);
        return v;
    }
};

class Reader {
public:
    Reader(const std::uint8_t* data, std::size_t size, rt::Failure& failure) noexcept
        : d_(data), n_(size), f_(failure), budget_(2 * static_cast<std::int64_t>(size) + 1024) {}

    rt::Failure& failure() noexcept { return f_; }
    std::size_t size() const noexcept { return n_; }

    // The root table's position; checks the file identifier (spec §5.1).
    bool root(const char* identifier, std::size_t& pos);
    // Find and check the table of type `spec` at `pos` (spec §5.1).
    bool table(std::size_t pos, const TableSpec& spec, Table& t);

    // Inline scalars of a checked table (absent: the default).
    template <typename T>
    T scalar(const Table& t, unsigned slot, T dflt) const noexcept {
        std::uint16_t at = t.at(slot);
        if (at == 0) return dflt;
        T v;
        std::memcpy(&v, d_ + t.pos + at, sizeof(T));
        return v;
    }
    bool flag(const Table& t, unsigned slot, bool dflt) const noexcept {
        std::uint16_t at = t.at(slot);
        return at == 0 ? dflt : d_[t.pos + at] != 0;
    }
    // The position an offset slot points to (0: absent). Not yet checked: the reads below check it.
    std::size_t object(const Table& t, unsigned slot) const noexcept {
        std::uint16_t at = t.at(slot);
        if (at == 0) return 0;
        std::uint32_t rel;
        std::memcpy(&rel, d_ + t.pos + at, 4);
        return t.pos + at + rel;
    }
    // A required object: absent is an error.
    bool need(std::size_t pos) {
        if (pos != 0) return true;
        return f_.fail(ErrorClass::DecodeError, "required field is missing");
    }

    // A vector at `pos` of `count` elements of `elem` bytes each, all inside the buffer (spec §5.1).
    bool vector(std::size_t pos, std::size_t elem, std::size_t& first, std::uint32_t& count);
    // A vector of numbers, copied out (little-endian on the wire).
    template <typename T, typename Out>
    bool scalars(std::size_t pos, Out& out) {
        std::size_t first = 0;
        std::uint32_t count = 0;
        if (!vector(pos, sizeof(T), first, count)) return false;
        out.resize(count);
        if constexpr (sizeof(typename Out::value_type) == sizeof(T) && !std::is_same_v<typename Out::value_type, bool>) {
            if (count) std::memcpy(out.data(), d_ + first, static_cast<std::size_t>(count) * sizeof(T));
        } else {
            for (std::uint32_t i = 0; i < count; ++i) {
                T v;
                std::memcpy(&v, d_ + first + static_cast<std::size_t>(i) * sizeof(T), sizeof(T));
                out[i] = static_cast<typename Out::value_type>(v);
            }
        }
        return true;
    }
    // A vector of booleans (any non-zero byte is true).
    template <typename Out>
    bool flags(std::size_t pos, Out& out) {
        std::size_t first = 0;
        std::uint32_t count = 0;
        if (!vector(pos, 1, first, count)) return false;
        out.resize(count);
        for (std::uint32_t i = 0; i < count; ++i) out[i] = d_[first + i] != 0;
        return true;
    }
    // The positions a vector of offsets points to (not yet checked).
    bool offsets(std::size_t pos, std::size_t& first, std::uint32_t& count);
    std::size_t offset_at(std::size_t first, std::uint32_t i) const noexcept {
        std::size_t at = first + 4 * static_cast<std::size_t>(i);
        std::uint32_t rel;
        std::memcpy(&rel, d_ + at, 4);
        return at + rel;
    }
    // A string (spec §5.1): inside the buffer, followed by a NUL, UTF-8.
    bool string(std::size_t pos, std::string& out);
    // A vector of strings.
    template <typename Out>
    bool strings(std::size_t pos, Out& out) {
        std::size_t first = 0;
        std::uint32_t count = 0;
        if (!offsets(pos, first, count)) return false;
        out.resize(count);
        for (std::uint32_t i = 0; i < count; ++i) {
            if (!string_item(offset_at(first, i), out[i])) return f_.index(i);
        }
        return true;
    }
    // A vector of bytes.
    bool bytes(std::size_t pos, std::string& out);

    // Failures.
    bool bad_enum(std::int64_t value, const char* enum_name);
    bool bad_union(unsigned tag, const char* union_name);

private:
    bool u32(std::size_t pos, std::uint32_t& out);
    bool string_item(std::size_t pos, std::string& out);
    bool utf8_failure(std::string_view s);

    const std::uint8_t* d_;
    std::size_t n_;
    rt::Failure& f_;
    std::int64_t budget_;
};

// A flatbuffers-rows payload is the document buffer, optionally followed by a side index and an 8-byte
// trailer (spec §5.4): the document buffer alone.
std::size_t document_size(const std::uint8_t* data, std::size_t size) noexcept;

}  // namespace tracepack::fb
