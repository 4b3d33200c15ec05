// tracepack C++ runtime: reading a .tpk file into the current version's document (spec §1-§10).
//
// What the Python package's tracepack.load does for a container: check and unpack the container (§1),
// decompress (§8), decode with the model of the version it was written with (§3-§5), check the payload's
// own header (§9.2.2), validate (§9.4.1), migrate to the current version (§10.4) and check the
// document-level invariants (§9.4.2).
#pragma once

#include <string>
#include <string_view>

#include "tracepack/container.hpp"
#include "tracepack/error.hpp"
#include "tracepack/limits.hpp"
#include "tracepack/versions.hpp"

namespace tracepack {

struct ReadOptions {
    Limits limits;
    DictionaryFolder dictionaries;  // where the built-in zstd dictionaries are (spec §8.2)
};

// Read the bytes of a file into `out`; false with the error (class, place, message) otherwise.
bool read_document(std::string_view data, const ReadOptions& options, current::Document& out, Error& error);

// The document-level invariants of spec §9.4 (metadata alignment, pools, provenance order).
bool check_document(const current::Document& doc, rt::Failure& failure);

// The canonical JSON text of a document (spec §11.2): what `tracepack cat FILE` prints, newline included.
std::string canonical_json(const current::Document& doc);

}  // namespace tracepack
