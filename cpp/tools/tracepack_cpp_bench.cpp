// tracepack-cpp-bench: timings of the C++ reader for benchmarks/bench_cpp.py.
//
//   tracepack-cpp-bench FILE [ROUNDS [MIN_SECONDS]]
//
// Prints one JSON object: the time of one full read (container, zstd, decode, validation, migration: what
// `tracepack.load` does) and of one read plus the canonical JSON text (what `cat` prints), the file already
// in memory. Measured as benchmarks/report.py's best_time measures Python: ROUNDS rounds (default 5), each
// repeating the work until MIN_SECONDS (default 0.2) of this process's CPU time have passed; the best
// round's time per run.
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <string>

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

}  // namespace

int main(int argc, char** argv) {
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
