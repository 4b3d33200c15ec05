// tracepack C++ runtime: the built-in zstd dictionaries (spec §8.2).
#include "tracepack/dictionaries.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tracepack {

namespace {

// spec §8.2: ids are 0x54504B00 + a serial (torch.export from 0x54504B01, ExecuTorch from 0x54504B20). The
// list as it was when the manifest came; tests/cpp/test_dictionaries.py checks it against the manifest
// and tracepack.dictionaries.BUILTIN (whose reasons withdrawn dictionaries are refused with).
struct Compiled {
    const char* name;
    std::uint32_t id;
    const char* sha256;
    const char* withdrawn;
};
const Compiled kCompiled[] = {
    {"torch-export-1", 0x54504B01, "09f7a0b06412853c856c5b841e633886a46e7cf8ece067ee8bfce7c84822c3e8", ""},
    {"torch-export-2", 0x54504B02, "39485dedb99d68dc5551802117897dfa9a99cc2b77232cb602599ccaef0d6028", ""},
    {"torch-export-3", 0x54504B03, "f611fa4a02385a5d7be13ca88fb8573c02e8cc35b5ba3d0b01d3b71375cf526c", ""},
    {"executorch-edge-1", 0x54504B20, "ca6dc0b2a8e508fdd0b41f5150b11b25f669277708e5e2191888b2041ac4a9f5",
     "superseded by executorch-edge-2 in the session that trained it"},
    {"executorch-edge-2", 0x54504B21, "cc78c2e843b2d9a93c657cdc5e48aab988324317039865a4d3f887d8029d69b8", ""},
    {"torch-export-4", 0x54504B04, "8219b4196957ed8e5009bdd090a57c02ee17380bd97afbbfb0f9c8881b50d23a",
     "superseded by torch-export-6 in the session that trained it"},
    {"torch-export-5", 0x54504B05, "df7c3ddc0def695993a0561229b614b610ae02669343bb37f0d496c544c61c5a",
     "superseded by torch-export-6 in the session that trained it"},
    {"torch-export-6", 0x54504B06, "04caf868a7cf5277565e5924e888fe046c0a84df3f116d7471f853169b2492b8", ""},
    {"torch-export-7", 0x54504B07, "47673d109f6f444c5a0bf50d6434227ef63057249ee248d40f2dc6a0e850abe4", ""},
    {"torch-export-8", 0x54504B08, "162dea7371eaeb4a97525ed4ad62c2aa8f41ef591c466ca618ceb0777e65ce53", ""},
    {"torch-export-9", 0x54504B09, "4958990a72b557eebc5fd142a4a5f5d0d5f8073f306bb3fe0059aaedd7e6b9b5", ""},
};

const char* compiled_reason(std::uint32_t id) {
    for (const auto& c : kCompiled) {
        if (c.id == id && *c.withdrawn) return c.withdrawn;
    }
    return "";
}

bool read_file(const std::string& path, std::string& out) {
    std::FILE* in = std::fopen(path.c_str(), "rb");
    if (in == nullptr) return false;
    out.clear();
    char buf[1 << 16];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, in)) > 0) out.append(buf, n);
    std::fclose(in);
    return true;
}

std::vector<std::string> split(const std::string& line, char sep) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (true) {
        std::size_t at = line.find(sep, start);
        out.push_back(line.substr(start, at == std::string::npos ? std::string::npos : at - start));
        if (at == std::string::npos) return out;
        start = at + 1;
    }
}

// --- SHA-256 (FIPS 180-4) ------------------------------------------------------------------------

struct Sha256 {
    std::uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    unsigned char buf[64];
    std::size_t used = 0;
    std::uint64_t total = 0;

    static std::uint32_t rotr(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

    void block(const unsigned char* p) {
        static const std::uint32_t k[64] = {
            0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
            0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
            0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
            0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
            0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
            0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
            0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
            0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
        std::uint32_t w[64];
        for (int i = 0; i < 16; ++i) {
            w[i] = static_cast<std::uint32_t>(p[4 * i]) << 24 | static_cast<std::uint32_t>(p[4 * i + 1]) << 16 |
                   static_cast<std::uint32_t>(p[4 * i + 2]) << 8 | p[4 * i + 3];
        }
        for (int i = 16; i < 64; ++i) {
            std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
            std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
        for (int i = 0; i < 64; ++i) {
            std::uint32_t s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
            std::uint32_t ch = (e & f) ^ (~e & g);
            std::uint32_t t1 = hh + s1 + ch + k[i] + w[i];
            std::uint32_t s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
            std::uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
            std::uint32_t t2 = s0 + maj;
            hh = g;
            g = f;
            f = e;
            e = d + t1;
            d = c;
            c = b;
            b = a;
            a = t1 + t2;
        }
        h[0] += a;
        h[1] += b;
        h[2] += c;
        h[3] += d;
        h[4] += e;
        h[5] += f;
        h[6] += g;
        h[7] += hh;
    }

    void update(const unsigned char* p, std::size_t n) {
        total += n;
        while (n) {
            std::size_t take = std::min(n, 64 - used);
            std::memcpy(buf + used, p, take);
            used += take;
            p += take;
            n -= take;
            if (used == 64) {
                block(buf);
                used = 0;
            }
        }
    }

    std::string hex() {
        std::uint64_t bits = total * 8;
        unsigned char pad = 0x80;
        update(&pad, 1);
        unsigned char zero = 0;
        while (used != 56) update(&zero, 1);
        unsigned char len[8];
        for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
        update(len, 8);
        std::string out;
        char b[9];
        for (std::uint32_t v : h) {
            std::snprintf(b, sizeof b, "%08x", v);
            out += b;
        }
        return out;
    }
};

}  // namespace

std::string sha256_hex(std::string_view data) {
    Sha256 s;
    s.update(reinterpret_cast<const unsigned char*>(data.data()), data.size());
    return s.hex();
}

bool builtin_dictionaries(const std::string& folder, std::vector<BuiltinDictionary>& out, Error& error) {
    out.clear();
    std::string text;
    const std::string where = "tracepack/data/zstd/MANIFEST.tsv";
    if (!read_file(folder + "/MANIFEST.tsv", text)) {
        for (const auto& c : kCompiled) {
            out.push_back({c.name, c.id, std::string(c.name) + ".dict", c.sha256, *c.withdrawn != 0, c.withdrawn});
        }
        return true;
    }
    // spec §8.2: `#` comments, a line of column names, then one tab-separated line per dictionary.
    bool header = false;
    std::size_t start = 0;
    std::size_t lineno = 0;
    while (start < text.size()) {
        std::size_t end = text.find('\n', start);
        std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
        start = end == std::string::npos ? text.size() : end + 1;
        ++lineno;
        if (line.empty() || line[0] == '#') continue;
        std::vector<std::string> f = split(line, '\t');
        if (!header) {
            if (line != "id\tname\tfile\tsha256\tstatus") {
                error = Error{ErrorClass::ContainerError, where, "line " + std::to_string(lineno) + " is not the column names",
                              "id, name, file, sha256, status", true};
                return false;
            }
            header = true;
            continue;
        }
        char* endp = nullptr;
        unsigned long id = f.size() == 5 ? std::strtoul(f[0].c_str(), &endp, 10) : 0;
        if (f.size() != 5 || endp == nullptr || *endp || f[0].empty() || id > 0xFFFFFFFFUL ||
            (f[4] != "shipped" && f[4] != "withdrawn")) {
            error = Error{ErrorClass::ContainerError, where, "line " + std::to_string(lineno) + " is malformed",
                          "id, name, file, sha256 and shipped or withdrawn, separated by tabs", true};
            return false;
        }
        auto did = static_cast<std::uint32_t>(id);
        bool withdrawn = f[4] == "withdrawn";
        out.push_back({f[1], did, f[2], f[3], withdrawn, withdrawn ? compiled_reason(did) : ""});
    }
    return true;
}

std::string known_dictionaries(const std::vector<BuiltinDictionary>& all) {
    std::string out;
    for (const auto& d : all) {
        if (d.withdrawn) continue;
        if (!out.empty()) out += ", ";
        out += std::to_string(d.id) + " (" + d.name + ")";
    }
    return out.empty() ? "none" : out;
}

bool load_dictionary(const BuiltinDictionary& spec, const std::vector<BuiltinDictionary>& all,
                     const std::string& folder, std::string& bytes, Error& error) {
    if (spec.withdrawn) {
        std::string why = spec.reason.empty() ? "" : " (" + spec.reason + ")";
        error = Error{ErrorClass::ContainerError, "header byte 20",
                      "zstd dictionary " + spec.name + " (id " + std::to_string(spec.id) +
                          ") was withdrawn before any release" + why + "; no build ships it",
                      "a file written with a shipped dictionary (" + known_dictionaries(all) +
                          "): convert it again from its source",
                      true};
        return false;
    }
    std::string where = "tracepack/data/zstd/" + spec.file;
    if (!read_file(folder + "/" + spec.file, bytes)) {
        error = Error{ErrorClass::ContainerError, where,
                      "built-in zstd dictionary " + spec.name + " (id " + std::to_string(spec.id) +
                          ") is missing from this install",
                      {}, false};
        return false;
    }
    if (sha256_hex(bytes) != spec.sha256) {
        error = Error{ErrorClass::ContainerError, where,
                      "built-in zstd dictionary " + spec.name + " is damaged (checksum mismatch)", {}, false};
        return false;
    }
    // zstd's dictionary format: magic 37 A4 30 EC, then the id (spec §8.2)
    std::uint32_t got = 0;
    if (bytes.size() >= 8 && bytes.compare(0, 4, "\x37\xA4\x30\xEC") == 0) {
        for (int i = 3; i >= 0; --i) got = got << 8 | static_cast<unsigned char>(bytes[4 + static_cast<std::size_t>(i)]);
    }
    if (got != spec.id) {
        error = Error{ErrorClass::ContainerError, where,
                      "built-in zstd dictionary " + spec.name + " has id " + std::to_string(got),
                      std::to_string(spec.id), true};
        return false;
    }
    return true;
}

}  // namespace tracepack
