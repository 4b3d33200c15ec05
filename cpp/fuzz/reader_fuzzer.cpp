// libFuzzer harness for the C++ reader (`make fuzz-cov HARNESS=cpp_reader`; fuzz/harnesses/cpp_reader.py
// makes its seeds). Built by fuzz/run.py with clang++ -fsanitize=fuzzer,address,undefined.
//
// The first byte of an input says how the rest reaches the reader:
//   0  a whole file: read_document (the container's checks, zstd, every codec), as `tracepack-cpp cat`;
//   1  an uncompressed payload: byte 1 the codec id (mod 5), byte 2 the released version (mod 3), the rest
//      the payload, wrapped in a container with correct checksums, so no CRC stands between a mutant and
//      the decoders;
//   2  a compressed payload: as 1, byte 3 the dictionary (0: none, else the n-th built-in one), bytes 4..7
//      the declared raw length (little-endian), the rest a zstd frame.
// Whatever the reader makes of it, an uncompressed FlatBuffers file (codec 2 or 4) is also opened by the
// lazy reader, which answers up to 32 nodes and a few debug handles.
//
// Findings, besides what the sanitizers, libFuzzer's -timeout and -rss_limit_mb report (each an abort):
//   - an error of class InternalError (a reader's bug, never an input's fault), without a problem, or without
//     a place (allowed only for an error about the whole file: "an ExecuTorch ETDump (...)");
//   - a document the whole reader accepted that the lazy reader refuses or answers differently
//     (node count, every answered node's trace as `trace --json` renders it, debug handles found and answered).

#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tracepack/container.hpp"
#include "tracepack/dictionaries.hpp"
#include "tracepack/error.hpp"
#include "tracepack/lazy.hpp"
#include "tracepack/reader.hpp"

namespace {

using tracepack::Error;
using tracepack::ErrorClass;

constexpr std::uint16_t kVersions[3][2] = {{1, 0}, {1, 1}, {1, 2}};
constexpr std::size_t kMaxNodes = 32;

[[noreturn]] void finding(const std::string& what) {
    std::fprintf(stderr, "FINDING %s\n", what.c_str());
    std::fflush(stderr);
    std::abort();
}

void check_error(const Error& e, const char* step) {
    if (e.cls == ErrorClass::InternalError) finding(std::string(step) + ": InternalError: " + e.line("fuzz.tpk"));
    // No place only for what the whole file is (an ExecuTorch ETDump: a ContainerError of the file, spec §9).
    if (e.problem.empty() || (e.where.empty() && e.cls != ErrorClass::InputError && e.cls != ErrorClass::ContainerError)) {
        finding(std::string(step) + ": an error without a place or a problem: " + e.line("fuzz.tpk"));
    }
}

std::string dict_dir() {
    if (const char* env = std::getenv("TRACEPACK_ZSTD_DICT_DIR"); env && *env) return env;
    return "src/tracepack/data/zstd";  // fuzz/run.py runs the harness from the repository's root
}

const std::vector<tracepack::BuiltinDictionary>& builtins() {
    static const std::vector<tracepack::BuiltinDictionary> all = [] {
        std::vector<tracepack::BuiltinDictionary> out;
        Error e;
        if (!tracepack::builtin_dictionaries(dict_dir(), out, e)) finding("the built-in dictionaries: " + e.line(dict_dir()));
        return out;
    }();
    return all;
}

void put_le(std::string& s, std::size_t at, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) s[at + static_cast<std::size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

std::uint32_t crc(std::string_view d) {
    return static_cast<std::uint32_t>(
        crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(d.data()), static_cast<uInt>(d.size())));
}

// A container (spec §1.1) around `payload` with correct checksums.
std::string wrap(std::string_view payload, std::uint8_t codec, std::uint8_t version, std::uint8_t compression,
                 std::uint32_t dict_id, std::uint64_t raw_length) {
    std::string out(tracepack::kHeaderSize, '\0');
    std::memcpy(out.data(), "\x89TPK\r\n\x1a\n", 8);
    put_le(out, 8, tracepack::kContainerVersion, 2);
    put_le(out, 10, tracepack::kHeaderSize, 2);
    put_le(out, 12, kVersions[version][0], 2);
    put_le(out, 14, kVersions[version][1], 2);
    out[16] = static_cast<char>(codec);
    out[17] = static_cast<char>(compression);
    put_le(out, 20, dict_id, 4);
    put_le(out, 24, payload.size(), 8);
    put_le(out, 32, raw_length, 8);
    put_le(out, 40, crc(payload), 4);
    put_le(out, 44, crc(std::string_view(out).substr(0, 44)), 4);
    out.append(payload);
    return out;
}

// The lazy reader on `file` (through a memory file: it opens paths); with `whole` (the document the whole
// reader accepted) its answers must be the same.
void lazy(const std::string& file, tracepack::current::Document* whole) {
    if (file.size() < tracepack::kHeaderSize) return;
    const auto codec = static_cast<std::uint8_t>(file[16]);
    if ((codec != 2 && codec != 4) || file[17] != 0) return;
    int fd = memfd_create("fuzz.tpk", 0);
    if (fd < 0) finding("memfd_create failed");
    if (write(fd, file.data(), file.size()) != static_cast<ssize_t>(file.size())) finding("memfd write failed");
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    tracepack::LazyDocument doc;
    Error e;
    if (!doc.open(path, e)) {
        close(fd);
        check_error(e, "lazy open");
        if (whole != nullptr) finding("the lazy reader refuses a document the whole reader accepted: " + e.line("fuzz.tpk"));
        return;
    }
    close(fd);
    tracepack::LazyDocument ref;
    if (whole != nullptr) {
        ref.adopt(std::move(*whole));  // the whole reader is done with it: no copy
        if (ref.node_count() != doc.node_count()) finding("the lazy reader counts another number of nodes");
    }
    const std::uint64_t n = doc.node_count() < kMaxNodes ? doc.node_count() : kMaxNodes;
    for (std::uint64_t i = 0; i < n; ++i) {
        tracepack::NodeTrace got;
        if (!doc.trace(i, got, e)) {
            check_error(e, "lazy trace");
            if (whole != nullptr) finding("the lazy reader refuses node " + std::to_string(i) + ": " + e.line("fuzz.tpk"));
            continue;
        }
        std::uint64_t found = 0;
        if (doc.find(got.name, found, e)) {
            if (found >= doc.node_count()) finding("find answered a node past the end");
        } else {
            check_error(e, "lazy find");
        }
        if (whole == nullptr) continue;
        tracepack::NodeTrace want;
        if (!ref.trace(i, want, e)) finding("the whole document cannot answer node " + std::to_string(i) + ": " + e.line("fuzz.tpk"));
        if (tracepack::render_trace_json({got}) != tracepack::render_trace_json({want})) {
            finding("the lazy reader answers node " + std::to_string(i) + " differently");
        }
    }
    for (std::int64_t h : {0, 1, 2, 3, 7, -1}) {
        tracepack::HandleInfo info;
        const bool found = doc.debug_handle(h, info, e);
        if (!found) check_error(e, "lazy debug_handle");
        if (whole == nullptr) continue;
        tracepack::HandleInfo want;
        Error we;
        if (ref.debug_handle(h, want, we) != found) finding("the lazy reader finds handle " + std::to_string(h) + " otherwise");
        if (found && (info.op != want.op || info.stack_trace != want.stack_trace ||
                      info.module_hierarchy != want.module_hierarchy || info.has_range != want.has_range ||
                      info.file != want.file || info.start != want.start || info.end != want.end)) {
            finding("the lazy reader answers handle " + std::to_string(h) + " differently");
        }
    }
}

void whole(const std::string& file) {
    tracepack::ReadOptions options;
    options.dictionaries.path = dict_dir();
    options.limits.max_decompressed = 64ULL << 20;  // the harness's memory, not the default 4 GiB
    tracepack::current::Document doc;
    Error e;
    if (!tracepack::read_document(file, options, doc, e)) {
        check_error(e, "read_document");
        lazy(file, nullptr);
        return;
    }
    const std::string text = tracepack::canonical_json(doc);
    if (text.empty() || text.back() != '\n') finding("canonical_json is not one line of JSON text");
    lazy(file, &doc);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    switch (data[0] % 3) {
        case 0:
            whole(std::string(in.substr(1)));
            break;
        case 1:
            if (size < 3) return 0;
            whole(wrap(in.substr(3), static_cast<std::uint8_t>(data[1] % 5), static_cast<std::uint8_t>(data[2] % 3), 0, 0,
                       size - 3));
            break;
        default: {
            if (size < 8) return 0;
            std::uint32_t dict_id = 0;
            if (data[3] != 0) {
                const auto& all = builtins();
                if (!all.empty()) dict_id = all[(data[3] - 1u) % all.size()].id;
            }
            std::uint64_t raw = 0;
            for (int i = 0; i < 4; ++i) raw |= static_cast<std::uint64_t>(data[4 + i]) << (8 * i);
            whole(wrap(in.substr(8), static_cast<std::uint8_t>(data[1] % 5), static_cast<std::uint8_t>(data[2] % 3), 1,
                       dict_id, raw));
            break;
        }
    }
    return 0;
}
