// tracepack C++ runtime: the lazy reader (spec §5.6, §7.5, §9.5).
//
// Opens an uncompressed FlatBuffers .tpk (codec 2 `flatbuffers-rows` or codec 4 `flatbuffers-columns`,
// compression 0) and answers one node (by index or by name, through the side index of §5.4), its stack
// trace and module hierarchy (§2.9), and one debug handle (§2.9.6) without decoding the rest of the
// document. Every byte is checked before it is used, as §9.5 asks: the container (§1.3), the payload
// CRC-32 on opening or, for a file with block checksums (§1.5), the CRC-32 of each block before any of
// its bytes is used (§1.5.3); the FlatBuffers structure (§5.1) of every table, vector and string it
// touches; column directories (§7.4); every reference against its table's row count; every trie step
// backwards; the rendered-text budget (§9.6). Errors are the classes of §9 with a place.
//
// The payload is read into memory the reader owns (pread), never mapped: §1.5.3 requires it, since a
// mapped file that shrinks while open faults on the next access. With block checksums only the blocks
// a lookup touches are read (a page-backed buffer of the payload's size is reserved, untouched pages
// cost nothing); without them the whole payload is read and its CRC-32 checked on opening.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tracepack/error.hpp"
#include "tracepack/versions.hpp"

namespace tracepack {

// One frame of a stack (§2.9.1), as `trace --json` lists it.
struct LazyFrame {
    std::string file;
    std::int64_t line = 0;
    std::string function;
    std::string text;
};

// What `tracepack trace` prints of a node (§11.3).
struct NodeTrace {
    std::uint64_t index = 0;
    std::string name;
    std::string target;
    bool has_stack_trace = false;
    std::string stack_trace;
    std::vector<LazyFrame> frames;
    bool has_nn_module_stack = false;
    std::string nn_module_stack;
    std::string module_hierarchy;  // "" when the node has none
};

// A debug handle resolved (§2.9.6).
struct HandleInfo {
    std::string op;
    std::string stack_trace;  // the `stripped` style
    std::string module_hierarchy;
    bool has_range = false;
    std::string file;
    std::int64_t start = 0;
    std::int64_t end = 0;
};

class LazyDocument {
public:
    LazyDocument();
    ~LazyDocument();
    LazyDocument(const LazyDocument&) = delete;
    LazyDocument& operator=(const LazyDocument&) = delete;

    // Open `path`. `checksum = false` skips every CRC-32 (a trusted file; the reference's checksum=False).
    bool open(const std::string& path, Error& error, bool checksum = true);
    // Answer the same questions about a document read whole (tracepack::read_document: any codec and
    // compression, already validated): what `trace` does for a file it cannot read lazily.
    void adopt(current::Document&& doc);
    // Whether the file at `path` is one this reader opens (an uncompressed codec 2 or 4 container); a
    // file whose header cannot be read is not (the full reader reports what is wrong with it).
    static bool is_lazy(const std::string& path);

    std::uint64_t node_count() const noexcept;
    // The node `key`: `#I` (ASCII digits) is an index, any other word a name (the last node of that
    // name, §2.9.5). NotFoundError at `node` when there is none.
    bool find(std::string_view key, std::uint64_t& index, Error& error);
    bool trace(std::uint64_t index, NodeTrace& out, Error& error);
    bool debug_handle(std::int64_t handle, HandleInfo& out, Error& error);
    // How many payload blocks were read and checked so far (0 without block checksums).
    std::uint64_t blocks_read() const noexcept;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

// `trace` output (§11.3): the text blocks, or the JSON object (one node) / array (several).
std::string render_trace_text(const std::vector<NodeTrace>& nodes);
std::string render_trace_json(const std::vector<NodeTrace>& nodes);

}  // namespace tracepack
