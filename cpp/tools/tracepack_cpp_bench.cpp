// tracepack-cpp-bench: timings of the C++ reader for benchmarks/bench_cpp.py.
//
//   tracepack-cpp-bench FILE [ROUNDS [MIN_SECONDS]]
//   tracepack-cpp-bench --lazy FILE NODE [ROUNDS [MIN_SECONDS]]
//
// Prints one JSON object: the time of one full read (container, zstd, decode, validation, migration: what
// `tracepack.load` does) and of one read plus the canonical JSON text (what `cat` prints), the file already
// in memory. Measured as benchmarks/report.py's best_time measures Python: ROUNDS rounds (default 5), each
// repeating the work until MIN_SECONDS (default 0.2) of this process's CPU time have passed; the best
// round's time per run.
//
// With --lazy: the lazy reader (spec §9.5) on an uncompressed FlatBuffers file: the time of an open
// (header, block table or payload CRC-32, the root or column directory, the side index), of an open
// and one node's `trace` (found by NODE, its stack trace, frames, nn_module_stack and module hierarchy:
// every block those bytes are in read and checked), and of the same lookup again on an open file.
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tracepack/lazy.hpp"
#include "tracepack/reader.hpp"

namespace {

double cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

template <typename F>
double best(F&& f, int rounds, double min_seconds) {
    double best_s = 1e30;
    for (int round = 0; round < rounds; ++round) {
        double start = cpu_seconds();
        long runs = 0;
        double elapsed = 0;
        do {
            f();
            ++runs;
            elapsed = cpu_seconds() - start;
        } while (elapsed < min_seconds);
        if (elapsed / static_cast<double>(runs) < best_s) best_s = elapsed / static_cast<double>(runs);
    }
    return best_s;
}

int lazy(int argc, char** argv) {
    if (argc < 4) return 2;
    const std::string path = argv[2], key = argv[3];
    int rounds = argc > 4 ? std::atoi(argv[4]) : 5;
    double min_seconds = argc > 5 ? std::atof(argv[5]) : 0.2;
    tracepack::Error error;
    bool ok = true;
    std::size_t text = 0;
    auto lookup = [&](tracepack::LazyDocument& doc) {
        std::uint64_t index = 0;
        std::vector<tracepack::NodeTrace> t(1);
        ok &= doc.find(key, index, error) && doc.trace(index, t[0], error);
        text = tracepack::render_trace_text(t).size();
    };
    double open_s = best(
        [&] {
            tracepack::LazyDocument doc;
            ok &= doc.open(path, error);
        },
        rounds, min_seconds);
    double open_trace_s = best(
        [&] {
            tracepack::LazyDocument doc;
            ok &= doc.open(path, error);
            if (ok) lookup(doc);
        },
        rounds, min_seconds);
    tracepack::LazyDocument warm;
    ok &= warm.open(path, error);
    double warm_s = ok ? best([&] { lookup(warm); }, rounds, min_seconds) : 0;
    if (!ok) {
        std::fprintf(stderr, "tracepack-cpp-bench: %s\n", error.line(path).c_str());
        return 2;
    }
    std::printf("{\"open_s\": %.9f, \"open_trace_s\": %.9f, \"trace_warm_s\": %.9f, \"text_bytes\": %zu, \"blocks\": %llu}\n",
                open_s, open_trace_s, warm_s, text, static_cast<unsigned long long>(warm.blocks_read()));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1 && std::string(argv[1]) == "--lazy") return lazy(argc, argv);
    if (argc < 2) {
        std::fputs("usage: tracepack-cpp-bench FILE [ROUNDS [MIN_SECONDS]]\n", stderr);
        return 2;
    }
    int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
    double min_seconds = argc > 3 ? std::atof(argv[3]) : 0.2;
    std::FILE* in = std::fopen(argv[1], "rb");
    if (in == nullptr) return 2;
    std::string data;
    char buf[1 << 16];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, in)) > 0) data.append(buf, n);
    std::fclose(in);
    tracepack::ReadOptions options;
    const char* dir = std::getenv("TRACEPACK_ZSTD_DICT_DIR");
    options.dictionaries.path = dir ? dir : "src/tracepack/data/zstd";
    tracepack::Error error;
    std::size_t out_bytes = 0;
    bool ok = true;
    double load = best(
        [&] {
            tracepack::current::Document doc;
            ok &= tracepack::read_document(data, options, doc, error);
        },
        rounds, min_seconds);
    double cat = best(
        [&] {
            tracepack::current::Document doc;
            ok &= tracepack::read_document(data, options, doc, error);
            out_bytes = tracepack::canonical_json(doc).size();
        },
        rounds, min_seconds);
    if (!ok) {
        std::fprintf(stderr, "tracepack-cpp-bench: %s\n", error.line(argv[1]).c_str());
        return 2;
    }
    std::printf("{\"load_s\": %.9f, \"cat_s\": %.9f, \"json_bytes\": %zu}\n", load, cat, out_bytes);
    return 0;
}
