// tracepack C++ runtime: the built-in zstd dictionaries (spec §8.2).
//
// Every dictionary ever shipped, by id, in the order the Python package's tracepack.dictionaries.BUILTIN
// lists them (the order error messages list them in); withdrawn ones keep their id reserved and are
// refused by name. The files are read from a folder (the package's src/tracepack/data/zstd) and checked
// against their sha256 before use.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tracepack/error.hpp"

namespace tracepack {

struct BuiltinDictionary {
    const char* name;
    std::uint32_t id;
    const char* file;
    const char* sha256;
    const char* withdrawn;  // why it is not shipped; empty when it is
};

// The table, and its length.
const BuiltinDictionary* builtin_dictionaries(std::size_t& count) noexcept;
const BuiltinDictionary* builtin_dictionary(std::uint32_t id) noexcept;
// `1414548225 (torch-export-1), ...`: the shipped ones, as error messages list them.
std::string known_dictionaries();

// Load a built-in dictionary's bytes from `folder`, checked; a ContainerError otherwise (spec §8.2).
bool load_dictionary(const BuiltinDictionary& spec, const std::string& folder, std::string& bytes, Error& error);

// SHA-256 of `data`, as 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

}  // namespace tracepack
