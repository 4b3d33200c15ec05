// tracepack C++ runtime: the built-in zstd dictionaries (spec §8.2).
//
// Every dictionary ever given an id, in the order of the folder's MANIFEST.tsv (the order error messages
// list them in); withdrawn ones keep their id reserved and are refused by name. The files are read from
// that folder (the package's src/tracepack/data/zstd) and checked against their sha256 and id before use.
// A folder without a manifest (a package from before it) is read with the list compiled in here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tracepack/error.hpp"

namespace tracepack {

struct BuiltinDictionary {
    std::string name;
    std::uint32_t id = 0;
    std::string file;
    std::string sha256;
    bool withdrawn = false;
    std::string reason;  // why a withdrawn one is not shipped, when known
};

// The dictionaries of `folder`: its MANIFEST.tsv, or the compiled-in list when it has none. False (and
// a ContainerError) when the manifest cannot be read.
bool builtin_dictionaries(const std::string& folder, std::vector<BuiltinDictionary>& out, Error& error);
// `1414548225 (torch-export-1), ...`: the shipped ones, as error messages list them.
std::string known_dictionaries(const std::vector<BuiltinDictionary>& all);

// Load a built-in dictionary's bytes from `folder`, checked; a ContainerError otherwise (spec §8.3).
bool load_dictionary(const BuiltinDictionary& spec, const std::vector<BuiltinDictionary>& all,
                     const std::string& folder, std::string& bytes, Error& error);

// SHA-256 of `data`, as 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

}  // namespace tracepack
