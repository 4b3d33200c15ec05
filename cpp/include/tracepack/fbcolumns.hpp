// tracepack C++ runtime: the FlatBuffers column layout, codec 4 (spec §7).
//
// The payload is a `Columns` FlatBuffer (file identifier `TPKC`): a directory (each column's path, kind
// and count) and one typed vector per element kind holding the values of every column of that kind back
// to back, in directory order (§7.1, §7.2); the side index and trailer of §5.4 may follow it.
//
// Two pieces:
//
// - `Directory` reads the root table and the directory and makes every check of §7.4 "on opening": after
//   `open`, every column's values lie inside its kind's vector, so any element can be read by index.
// - `Columns` is the eager decoder's column source (`col::Source`): the generated row building of
//   vX_Y/columnar.cpp (§6.5, §7.3) asks it for whole columns, each checked in full (count, kind, values)
//   before a row is built from it, in the reference reader's words and places.
//
// Nothing here throws; a failure fills an `rt::Failure` with a `DecodeError` at its place (`Columns.text`,
// `Columns.kinds ($.x)`, or the column's path) and returns false.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tracepack/columnar.hpp"
#include "tracepack/error.hpp"

namespace tracepack::fbcol {

// The element kinds of §7.2, by their number in `kinds`.
enum Kind : std::uint8_t {
    kBool = 0,
    kInt8 = 1,
    kUInt8 = 2,
    kInt16 = 3,
    kUInt16 = 4,
    kInt32 = 5,
    kUInt32 = 6,
    kInt64 = 7,
    kUInt64 = 8,
    kFloat64 = 9,
    kText = 10,
    kBlob = 11,
};
constexpr unsigned kKindCount = 12;
// The layout this reader reads (slot 0, `layout`).
constexpr std::uint32_t kLayout = 1;
// `text_index[j]` is where text value `kTextStep * j` starts (§7.1).
constexpr std::uint64_t kTextStep = 64;

// "bool", "int8", ... "blob": the kind's name, as places and messages spell it.
const char* kind_name(unsigned kind) noexcept;
// Bytes per element of the kind's vector (text and blob: 1, a byte).
std::size_t kind_width(unsigned kind) noexcept;
// Kinds 1-8.
inline bool is_integer(unsigned kind) noexcept { return kind >= kInt8 && kind <= kUInt64; }

// Called before a reader uses bytes [begin, end) of the buffer; returns false (having filled `failure`) when
// they cannot be used. A lazy reader of a file with block checksums (§1.5.3) reads and verifies the blocks
// under the range here. `block` (optional) is the block size in buffer offsets, so that scans for a text
// value's NUL ask for one block at a time (the Columns buffer starts at payload byte 0). Empty: no hook.
struct Need {
    bool (*fn)(void* context, std::size_t begin, std::size_t end, rt::Failure& failure) = nullptr;
    void* context = nullptr;
    std::size_t block = 0;

    explicit operator bool() const noexcept { return fn != nullptr; }
    bool operator()(std::size_t begin, std::size_t end, rt::Failure& failure) const {
        return fn == nullptr || begin >= end || fn(context, begin, end, failure);
    }
};

// One column of the directory.
struct Column {
    std::string_view path;    // into the buffer (valid as long as it is)
    std::uint8_t kind = 0;    // 0..11
    std::uint32_t count = 0;  // its values (rows)
    std::uint64_t start = 0;  // its first value's index in its kind's vector (text: its first text value;
                              // blob: its first length's index in `uint32`)
};

// A vector of the root table: its first element's byte offset in the buffer and its element count.
struct Vector {
    std::size_t first = 0;
    std::uint32_t count = 0;
};

class Directory {
public:
    // Read and check the root table and the directory (§7.1, §7.4 "on opening", in the reference's order):
    // `data` is the Columns buffer (the payload without its side index, fb::document_size). The buffer must
    // outlive the directory.
    bool open(const std::uint8_t* data, std::size_t size, rt::Failure& failure, Need need = {});

    const std::uint8_t* data() const noexcept { return d_; }
    std::size_t size() const noexcept { return n_; }
    // Every column, in directory order.
    const std::vector<Column>& columns() const noexcept { return columns_; }
    // The column of `path`, or nullptr when it is not stored.
    const Column* find(std::string_view path) const noexcept {
        auto it = by_path_.find(path);
        return it == by_path_.end() ? nullptr : &columns_[it->second];
    }
    // Kind `kind`'s vector (0..11; absent: empty).
    const Vector& vector(unsigned kind) const noexcept { return vectors_[kind]; }
    const Vector& text_index() const noexcept { return text_index_; }
    // How many text values the directory's text columns hold.
    std::uint64_t text_count() const noexcept { return text_count_; }

    // Element `i` of a vector, as stored (little-endian); the index is not checked.
    template <typename T>
    T load(const Vector& v, std::uint64_t i) const noexcept {
        T out;
        std::memcpy(&out, d_ + v.first + static_cast<std::size_t>(i) * sizeof(T), sizeof(T));
        return out;
    }
    // Element `i` of an integer kind's vector, widened (the index is not checked).
    col::i128 integer(unsigned kind, std::uint64_t i) const noexcept;
    // Byte offset of element `i` of kind `kind`'s vector.
    std::size_t offset(unsigned kind, std::uint64_t i) const noexcept {
        return vectors_[kind].first + static_cast<std::size_t>(i) * kind_width(kind);
    }
    // The text vector's bytes.
    std::string_view text() const noexcept {
        return {reinterpret_cast<const char*>(d_ + vectors_[kText].first), vectors_[kText].count};
    }

private:
    bool fail(rt::Failure& f, std::string where, std::string problem);
    bool fail(rt::Failure& f, std::string where, std::string problem, std::string expected);
    bool slot_vector(rt::Failure& f, std::size_t pos, std::size_t elem, const char* name, bool read, Need need,
                     Vector& out);

    const std::uint8_t* d_ = nullptr;
    std::size_t n_ = 0;
    std::vector<Column> columns_;
    std::unordered_map<std::string_view, std::size_t> by_path_;
    Vector vectors_[kKindCount];
    Vector text_index_;
    std::uint64_t text_count_ = 0;
    std::int64_t budget_ = 0;  // elements the vectors may hold in all (§5.1's budget, 2 x bytes + 1024)
};

// The eager decoder's columns (§7.3, §7.4): whole columns, checked in full, for the generated row building.
class Columns final : public col::Source {
public:
    // `payload_bytes`: the whole payload's size (the cap on rows without a column, §6.5).
    Columns(const Directory& d, rt::Failure& failure, std::size_t payload_bytes)
        : col::Source(failure, payload_bytes), d_(d) {}

    bool ints(const std::string& path, col::u128 n, std::int64_t lo, std::int64_t hi, bool delta, const char* what,
              std::vector<std::int64_t>& out, bool& found) override;
    bool uints(const std::string& path, col::u128 n, std::uint64_t hi, bool delta, const char* what,
               std::vector<std::uint64_t>& out, bool& found) override;
    bool floats(const std::string& path, col::u128 n, std::vector<double>& out, bool& found) override;
    bool bools(const std::string& path, col::u128 n, std::vector<bool>& out, bool& found) override;
    bool strings(const std::string& path, col::u128 n, std::vector<std::string>& out, bool& found) override;
    bool enums(const std::string& path, col::u128 n, const std::vector<std::int64_t>& allowed, const char* what,
               std::vector<std::int64_t>& out, bool& found) override;
    bool lengths(const std::string& path, col::u128 n, std::vector<std::uint64_t>& out, bool& found) override;
    bool tags(const std::string& path, col::u128 n, const std::vector<std::int64_t>& allowed, bool nullable,
              const char* what, std::vector<std::int64_t>& out, bool& found) override;

private:
    // The stored column of `n` rows at `path` (nullptr: not stored), its count checked.
    bool column(const std::string& path, col::u128 n, const Column*& c, bool& found);
    // An integer column's values in [lo, hi] (a kind 1-8), else "a KIND column" / "row R holds V".
    template <typename Out>
    bool integers(const std::string& path, const Column& c, col::i128 lo, col::i128 hi, const char* what,
                  std::vector<Out>& out);
    bool texts();
    bool blobs();
    bool fail_kind(const std::string& path, const Column& c, std::string expected);

    const Directory& d_;
    bool have_texts_ = false;
    std::vector<std::string_view> texts_;  // every text value, in order
    bool have_blobs_ = false;
    std::unordered_map<const Column*, std::vector<std::uint64_t>> blob_ends_;  // start, then each value's end
};

}  // namespace tracepack::fbcol
