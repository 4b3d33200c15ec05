// tracepack C++ runtime: budgets for what an input can amplify (spec §1.3, §9.6).
//
// The same budgets, with the same defaults, as the Python package's tracepack.io.limits.
#pragma once

#include <cstdint>
#include <string>

namespace tracepack {

struct Limits {
    std::uint64_t max_decompressed = 4ULL << 30;  // a payload after zstd
    std::uint64_t max_ratio = 1000;               // decompressed / compressed, past ratio_floor
    std::uint64_t ratio_floor = 64ULL << 20;      // output below this is never refused for its ratio
    std::uint64_t max_input = 16ULL << 30;        // bytes of one input file
    std::uint64_t max_depth = 1000;               // nesting of JSON and MessagePack values

    // Whether `out` bytes made from `in` compressed bytes break the ratio budget.
    bool ratio_exceeded(std::uint64_t out, std::uint64_t in) const noexcept {
        std::uint64_t base = in ? in : 1;
        return out > ratio_floor && base <= UINT64_MAX / max_ratio && out > max_ratio * base;
    }
};

// How to raise budget `name` (the tail of an over-budget message), as the Python package says it.
inline std::string limit_hint(const std::string& name) {
    return "or raise the " + name + " budget (command line: --limit " + name + "=N; Python: limits.raised(" + name +
           "=...))";
}

}  // namespace tracepack
