// tracepack C++ runtime: reading the columnar codec's payload (spec §6).
//
// The payload is a MessagePack map {"format", "layout", "columns"}; `Columns` parses it (§6.1), resolves
// layout 2's path numbers (§6.3) and keeps each column's values as raw MessagePack until a generated
// reassembly function (generated/cpp/tracepack/vX_Y/columnar.cpp) asks for them with the row count it
// expects. Each column is then decoded and checked in full (encoding, types, ranges, enum values, variant
// ids, the count; deltas undone, `forms` rebuilt, §6.4) before rows are built from it, and every failure
// names the column's path (§6.6), in the reference reader's words.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tracepack/error.hpp"
#include "tracepack/limits.hpp"

namespace tracepack::col {

__extension__ typedef unsigned __int128 u128;  // exact sums of 64-bit values (GCC, Clang)
__extension__ typedef __int128 i128;

std::string to_string(u128 v);
std::string to_string(i128 v);

// A column as stored: its encoding name and its values, still MessagePack.
struct Entry {
    std::string encoding;
    const std::uint8_t* values = nullptr;
    std::size_t size = 0;
};

// Where the generated row building (generated/cpp/tracepack/vX_Y/columnar.cpp, spec §6.5) gets its
// columns: the columnar codec's MessagePack columns (`Reader`, below) or the FlatBuffers column layout's
// typed vectors (`fbcol::Columns`, fbcolumns.hpp, spec §7.3). Each leaf column is asked for once, with the
// row count it must have, and is checked in full before a row is built from it; a failure names the
// column's path in the reference reader's words.
class Source {
public:
    Source(rt::Failure& failure, std::size_t payload_bytes) : f_(failure), limit_(payload_bytes) {}
    virtual ~Source() = default;
    Source(const Source&) = delete;
    Source& operator=(const Source&) = delete;

    rt::Failure& failure() noexcept { return f_; }

    // Leaf columns of `n` rows (n > 0). `found` is false when the column is not stored (nothing read).
    // `delta`: whether the column may be delta-coded (§6.4; the column layout has no encodings).
    virtual bool ints(const std::string& path, u128 n, std::int64_t lo, std::int64_t hi, bool delta,
                      const char* what, std::vector<std::int64_t>& out, bool& found) = 0;
    virtual bool uints(const std::string& path, u128 n, std::uint64_t hi, bool delta, const char* what,
                       std::vector<std::uint64_t>& out, bool& found) = 0;
    virtual bool floats(const std::string& path, u128 n, std::vector<double>& out, bool& found) = 0;
    virtual bool bools(const std::string& path, u128 n, std::vector<bool>& out, bool& found) = 0;
    virtual bool strings(const std::string& path, u128 n, std::vector<std::string>& out, bool& found) = 0;
    // An enum column: values of `allowed`.
    virtual bool enums(const std::string& path, u128 n, const std::vector<std::int64_t>& allowed, const char* what,
                       std::vector<std::int64_t>& out, bool& found) = 0;
    // A `#len` column: lengths >= 0.
    virtual bool lengths(const std::string& path, u128 n, std::vector<std::uint64_t>& out, bool& found) = 0;
    // A `#tag` column: variant ids of `allowed`, or none (-1 here) when `nullable` (nil in §6, 0 in §7).
    virtual bool tags(const std::string& path, u128 n, const std::vector<std::int64_t>& allowed, bool nullable,
                      const char* what, std::vector<std::int64_t>& out, bool& found) = 0;

    // `n` rows that no stored column counts (defaults, fieldless structs): at most one per payload byte.
    bool rows(const std::string& path, u128 n);
    // A field without a default whose own column is absent.
    bool missing(const std::string& column, u128 n, bool no_default);

protected:
    bool fail(const std::string& path, std::string problem);
    bool fail(const std::string& path, std::string problem, std::string expected);

    rt::Failure& f_;
    std::size_t limit_;
};

// The columnar codec's payload (spec §6): the MessagePack map, its columns decoded on demand.
class Reader final : public Source {
public:
    Reader(rt::Failure& failure, std::size_t payload_bytes) : Source(failure, payload_bytes) {}

    // Parse the payload map (§6.1); `numbers` are the column paths of every released version, by number.
    bool parse(std::string_view payload, const char* const* numbers, std::size_t count, const Limits& limits);

    bool ints(const std::string& path, u128 n, std::int64_t lo, std::int64_t hi, bool delta, const char* what,
              std::vector<std::int64_t>& out, bool& found) override;
    bool uints(const std::string& path, u128 n, std::uint64_t hi, bool delta, const char* what,
               std::vector<std::uint64_t>& out, bool& found) override;
    bool floats(const std::string& path, u128 n, std::vector<double>& out, bool& found) override;
    bool bools(const std::string& path, u128 n, std::vector<bool>& out, bool& found) override;
    bool strings(const std::string& path, u128 n, std::vector<std::string>& out, bool& found) override;
    bool enums(const std::string& path, u128 n, const std::vector<std::int64_t>& allowed, const char* what,
               std::vector<std::int64_t>& out, bool& found) override;
    bool lengths(const std::string& path, u128 n, std::vector<std::uint64_t>& out, bool& found) override;
    bool tags(const std::string& path, u128 n, const std::vector<std::int64_t>& allowed, bool nullable,
              const char* what, std::vector<std::int64_t>& out, bool& found) override;

private:
    const Entry* find(const std::string& path) const;
    bool forms(const std::string& path, u128 n, const Entry& e, std::vector<std::string>& out);

    std::unordered_map<std::string, Entry> columns_;
    std::uint64_t layout_ = 2;  // the payload's layout: 3 allows the `lag` encoding (§6.4.4)
};

}  // namespace tracepack::col
