// tracepack C++ runtime: the checks generated validators call (spec §9.4.1).
//
// Each check names the first failure it finds: the place, what is wrong and what was expected, as an
// IntegrityError. A place pattern holds `{}` where a row index goes (`$.files.name[{}]`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tracepack/error.hpp"

namespace tracepack::check {

// `pattern` with its `{}` replaced (no `{}`: unchanged).
inline std::string fmt(const std::string& pattern, std::string_view with) {
    std::size_t at = pattern.find("{}");
    if (at == std::string::npos) return pattern;
    std::string out = pattern.substr(0, at);
    out += with;
    out += pattern.substr(at + 2);
    return out;
}
inline std::string fmt(const std::string& pattern, std::size_t index) { return fmt(pattern, std::to_string(index)); }

// The place pattern of the items of list `field` in `parents` rows found at `at`: under one row the
// item index is exact (`$.graph.nodes[{}]`); under many, every row's items are checked together and
// the place says `*` (`$.graph.nodes[*].inputs[*]`).
inline std::string child(const std::string& at, std::size_t parents, std::string_view field) {
    if (parents == 1) {
        std::string out = at.find("{}") != std::string::npos ? fmt(at, std::size_t{0}) : at;
        out += ".";
        out += field;
        out += "[{}]";
        return out;
    }
    std::string out = fmt(at, "*");
    out += ".";
    out += field;
    out += "[*]";
    return out;
}

// Whether `v` indexes a table of `size` rows, or is a sentinel in [null, -1].
template <typename T>
inline bool in_range(T v, std::size_t size, std::int64_t null) noexcept {
    if constexpr (std::is_signed_v<T>) {
        if (v < 0) return static_cast<std::int64_t>(v) >= null;
        return static_cast<std::uint64_t>(v) < size;
    } else {
        (void)null;
        return static_cast<std::uint64_t>(v) < size;
    }
}

template <typename T>
bool bad_ref(rt::Failure& f, T v, std::size_t size, std::int64_t null, const std::string& where) {
    std::string expected = "an index below " + std::to_string(size);
    if (null < 0) expected += " or a sentinel down to " + std::to_string(null);
    f.fail_at(ErrorClass::IntegrityError, where, "reference " + std::to_string(v) + " is out of range", expected);
    return false;
}

template <typename T>
bool check_refs(const std::vector<T>& column, std::size_t size, std::int64_t null, const std::string& pattern,
                rt::Failure& f) {
    for (std::size_t i = 0; i < column.size(); ++i) {
        if (!in_range(column[i], size, null)) return bad_ref(f, column[i], size, null, fmt(pattern, i));
    }
    return true;
}

bool check_string_table(const std::vector<std::string>& strings, const std::string& where, rt::Failure& f);
bool check_column(std::size_t length, std::size_t rows, bool sparse, const std::string& where, rt::Failure& f);
bool check_reserved_row(std::size_t rows, const std::string& where, rt::Failure& f);

template <typename T>
bool check_trie(const std::vector<T>& parent, const std::string& where, rt::Failure& f) {
    if (parent.empty()) return true;
    if (parent[0] != 0) {
        f.fail_at(ErrorClass::IntegrityError, where + "[0]", "root row has parent " + std::to_string(parent[0]), "0");
        return false;
    }
    for (std::size_t i = 1; i < parent.size(); ++i) {
        bool ok;
        if constexpr (std::is_signed_v<T>) {
            ok = parent[i] >= 0 && static_cast<std::uint64_t>(parent[i]) < i;
        } else {
            ok = static_cast<std::uint64_t>(parent[i]) < i;
        }
        if (!ok) {
            f.fail_at(ErrorClass::IntegrityError, where + "[" + std::to_string(i) + "]",
                      "row " + std::to_string(i) + " has parent " + std::to_string(parent[i]) +
                          ", which is not an earlier row (a cycle or a forward reference)",
                      "a parent below " + std::to_string(i));
            return false;
        }
    }
    return true;
}

}  // namespace tracepack::check
