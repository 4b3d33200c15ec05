// fb_verify: FlatBuffers' own Verifier (flatc --cpp output of generated/fbs/tracepack-1.2.fbs) on a
// flatbuffers-rows .tpk, with the options given: what a C++ user who reads the row layout through flatc's
// code does (cpp/README.md, "FlatBuffers' own Verifier on large graphs"). Built and run by
// tests/cpp/test_verifier.py; not part of the library.
//
//   fb_verify FILE MAX_TABLES MAX_DEPTH   prints "1 NODES" when VerifyDocumentBuffer passes, "0 0" if not
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>
#include "tracepack-1.2_generated.h"
int main(int argc, char** argv) {
    if (argc < 4) return 2;
    std::ifstream in(argv[1], std::ios::binary);
    std::vector<char> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (file.size() < 48) return 2;
    std::uint16_t hsize; std::uint64_t plen;
    std::memcpy(&hsize, file.data() + 10, 2);
    std::memcpy(&plen, file.data() + 24, 8);
    if (file[16] != 2 || file[17] != 0 || hsize + plen > file.size()) return 2;
    std::size_t size = plen;
    const char* p = file.data() + hsize;
    if (size >= 16 && std::memcmp(p + size - 4, "TPKI", 4) == 0) {
        std::uint32_t l; std::memcpy(&l, p + size - 8, 4);
        size = size - 8 - l;
    }
    std::unique_ptr<std::uint8_t[]> buf(new std::uint8_t[size]);
    std::memcpy(buf.get(), p, size);
    flatbuffers::Verifier::Options o;
    o.max_tables = std::strtoull(argv[2], nullptr, 10);
    o.max_depth = std::strtoull(argv[3], nullptr, 10);
    flatbuffers::Verifier v(buf.get(), size, o);
    bool ok = tracepack::VerifyDocumentBuffer(v);
    std::printf("%d %u\n", ok ? 1 : 0, ok ? tracepack::GetDocument(buf.get())->graph()->nodes()->size() : 0u);
    return 0;
}
