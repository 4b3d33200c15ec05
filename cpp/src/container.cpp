// tracepack C++ runtime: the .tpk container (spec §1) and its compression (spec §8).
#include "tracepack/container.hpp"

#include <zlib.h>
#include <zdict.h>
#include <zstd.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "tracepack/dictionaries.hpp"

namespace tracepack {

namespace {

constexpr char kMagic[8] = {'\x89', 'T', 'P', 'K', '\r', '\n', '\x1a', '\n'};

template <typename T>
T le(const char* p) noexcept {
    T v = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
        v = static_cast<T>(v | static_cast<T>(static_cast<unsigned char>(p[i])) << (8 * i));
    }
    return v;
}

std::uint32_t crc32_of(std::string_view data) noexcept {
    uLong crc = crc32(0L, Z_NULL, 0);
    const auto* p = reinterpret_cast<const Bytef*>(data.data());
    std::size_t left = data.size();
    while (left) {
        uInt chunk = left > (1u << 30) ? (1u << 30) : static_cast<uInt>(left);
        crc = crc32(crc, p, chunk);
        p += chunk;
        left -= chunk;
    }
    return static_cast<std::uint32_t>(crc);
}

bool is_space(char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\x0b' || c == '\x0c'; }

// The container's own description of a file that is not one (container.read_header's _describe).
std::string container_describe(std::string_view data) {
    if (data.substr(0, 2) == "PK") return "a zip archive (a torch .pt2 or .pt? use `tracepack convert`)";
    std::size_t i = 0;
    while (i < data.size() && is_space(data[i])) ++i;
    if (i < data.size() && (data[i] == '{' || data[i] == '[')) {
        return "JSON text (a torch model.json? use `tracepack convert`)";
    }
    return rt::py_bytes_repr(data.substr(0, 8));
}

Error container_error(std::string where, std::string problem) {
    return Error{ErrorClass::ContainerError, std::move(where), std::move(problem), {}, false};
}

Error container_error(std::string where, std::string problem, std::string expected) {
    return Error{ErrorClass::ContainerError, std::move(where), std::move(problem), std::move(expected), true};
}

const char* const kExpectedMagic = "the tracepack magic \\x89TPK\\r\\n\\x1a\\n";

}  // namespace

const char* codec_name(std::uint8_t id) noexcept {
    switch (id) {
        case 0: return "json";
        case 1: return "msgpack";
        case 2: return "flatbuffers-rows";
        case 3: return "columnar";
        case 4: return "flatbuffers-columns";
        default: return nullptr;
    }
}

std::string describe_content(std::string_view data) {
    if (data.empty()) return "an empty file";
    static const struct {
        std::string_view magic;
        const char* text;
    } known[] = {
        {std::string_view("\x28\xb5\x2f\xfd", 4), "a zstd frame (decompress it first: zstd -d)"},
        {std::string_view("\x1f\x8b", 2), "a gzip file (decompress it first: gunzip)"},
        {std::string_view("\x80\x02", 2),
         "a pickle (tracepack never unpickles: export with torch.export.save or torch.jit.save)"},
        {std::string_view("\x80\x04", 2),
         "a pickle (tracepack never unpickles: export with torch.export.save or torch.jit.save)"},
        {std::string_view("\x80\x05", 2),
         "a pickle (tracepack never unpickles: export with torch.export.save or torch.jit.save)"},
        {std::string_view("\x08", 1), "perhaps a protobuf (ONNX?), which tracepack does not read"},
    };
    for (const auto& k : known) {
        if (data.substr(0, k.magic.size()) == k.magic) return k.text;
    }
    return "unknown content starting " + rt::py_bytes_repr(data.substr(0, 8));
}

bool read_header(std::string_view data, Header& h, Error& error, std::uint16_t accepted_flags) {
    if (data.size() < kHeaderSize) {
        const std::size_t n = std::min<std::size_t>(8, data.size());
        if (data.empty() || std::memcmp(data.data(), kMagic, n) != 0) {
            error = container_error("byte 0",
                                    data.empty() ? "file is empty"
                                                 : "not a tracepack container: " + container_describe(data.substr(0, 64)),
                                    kExpectedMagic);
            return false;
        }
        error = container_error("byte 0", "truncated header: " + std::to_string(data.size()) + " bytes",
                                std::to_string(kHeaderSize) + " header bytes");
        return false;
    }
    const char* p = data.data();
    if (std::memcmp(p, kMagic, 8) != 0) {
        error = container_error("byte 0", "not a tracepack container: " + container_describe(data.substr(0, 64)),
                                kExpectedMagic);
        return false;
    }
    h.container_version = le<std::uint16_t>(p + 8);
    h.header_size = le<std::uint16_t>(p + 10);
    h.major = le<std::uint16_t>(p + 12);
    h.minor = le<std::uint16_t>(p + 14);
    h.codec = static_cast<std::uint8_t>(p[16]);
    h.compression = static_cast<std::uint8_t>(p[17]);
    h.flags = le<std::uint16_t>(p + 18);
    h.dict_id = le<std::uint32_t>(p + 20);
    h.payload_length = le<std::uint64_t>(p + 24);
    h.raw_length = le<std::uint64_t>(p + 32);
    h.payload_crc32 = le<std::uint32_t>(p + 40);
    std::uint32_t header_crc = le<std::uint32_t>(p + 44);
    if (crc32_of(data.substr(0, 44)) != header_crc) {
        error = container_error("bytes 0..47", "header checksum mismatch: the header is corrupted");
        return false;
    }
    if (h.container_version != kContainerVersion) {
        error = Error{ErrorClass::VersionError, "header byte 8",
                      "container version " + std::to_string(h.container_version) + " is not readable by this build",
                      "container version " + std::to_string(kContainerVersion), true};
        return false;
    }
    if (h.header_size < kHeaderSize) {
        error = container_error("header byte 10", "header size " + std::to_string(h.header_size),
                                ">= " + std::to_string(kHeaderSize));
        return false;
    }
    if (codec_name(h.codec) == nullptr) {
        error = container_error("header byte 16", "unknown codec id " + std::to_string(h.codec),
                                "0 (json), 1 (msgpack), 2 (flatbuffers-rows), 3 (columnar), 4 (flatbuffers-columns)");
        return false;
    }
    if (h.compression > 1) {
        error = container_error("header byte 17", "unknown compression id " + std::to_string(h.compression),
                                "0 (none) or 1 (zstd)");
        return false;
    }
    if ((h.flags & ~(kFlagBlockChecksums | accepted_flags)) != 0) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%#x", h.flags);
        error = container_error("header byte 18", std::string("unknown flags ") + buf, "0 or 0x1 (block checksums)");
        return false;
    }
    if (h.compression == 0 && h.raw_length != h.payload_length) {
        error = container_error("header byte 32", "raw length " + std::to_string(h.raw_length) +
                                                      " differs from payload length " + std::to_string(h.payload_length) +
                                                      " without compression");
        return false;
    }
    return true;
}

namespace {

// The block table after the payload (spec §1.5.1), checked as §1.5.2 steps 11a-11f say: `tail` is every
// byte of the file after the payload. On success `block_size` and `crcs` (the table's entries) are set.
bool read_block_table(std::string_view tail, const Header& h, std::uint32_t& block_size, std::string_view& crcs,
                      Error& error) {
    const std::uint64_t at = static_cast<std::uint64_t>(h.header_size) + h.payload_length;
    const std::uint64_t available = tail.size();
    if (available < 16) {
        error = container_error("byte " + std::to_string(at), "truncated block table: " + std::to_string(available) + " bytes",
                                "a block table of at least 20 bytes after the payload (header flag bit 0)");
        return false;
    }
    if (std::memcmp(tail.data(), "TPKB", 4) != 0) {
        error = container_error("byte " + std::to_string(at), "block table magic is " + rt::py_bytes_repr(tail.substr(0, 4)),
                                "b'TPKB'");
        return false;
    }
    block_size = le<std::uint32_t>(tail.data() + 4);
    const std::uint64_t count = le<std::uint64_t>(tail.data() + 8);
    if (block_size < 512 || block_size > (1u << 24) || (block_size & (block_size - 1)) != 0) {
        error = container_error("byte " + std::to_string(at + 4), "block size " + std::to_string(block_size),
                                "a power of two from 512 to 16777216");
        return false;
    }
    const std::uint64_t want = h.payload_length / block_size + (h.payload_length % block_size != 0);
    if (count != want) {
        error = container_error("byte " + std::to_string(at + 8), "block count " + std::to_string(count),
                                std::to_string(want) + ": " + std::to_string(h.payload_length) +
                                    " payload bytes in blocks of " + std::to_string(block_size));
        return false;
    }
    const std::uint64_t size = 20 + 4 * count;
    if (available != size) {
        const std::string what = available < size ? "truncated block table"
                                                  : std::to_string(available - size) + " unexpected bytes after it";
        error = container_error("byte " + std::to_string(at + std::min(available, size)),
                                what + ": " + std::to_string(available) + " block table bytes",
                                std::to_string(size) + " block table bytes (" + std::to_string(count) +
                                    " blocks), then the end of the file");
        return false;
    }
    const std::size_t body = static_cast<std::size_t>(size - 4);
    if (crc32_of(tail.substr(0, body)) != le<std::uint32_t>(tail.data() + body)) {
        error = container_error("bytes " + std::to_string(at) + ".." + std::to_string(at + size - 1),
                                "block table checksum mismatch: the file is corrupted");
        return false;
    }
    crcs = tail.substr(16, static_cast<std::size_t>(4 * count));
    return true;
}

// Every block of the stored payload against its entry (spec §1.5.2 step 12a).
bool check_blocks(std::string_view stored, const Header& h, std::uint32_t block_size, std::string_view crcs,
                  Error& error) {
    const std::size_t count = crcs.size() / 4;
    for (std::size_t i = 0; i < count; ++i) {
        const std::size_t first = i * block_size;
        const std::string_view block = stored.substr(first, block_size);
        if (crc32_of(block) != le<std::uint32_t>(crcs.data() + 4 * i)) {
            const std::uint64_t start = h.header_size + static_cast<std::uint64_t>(first);
            error = container_error("bytes " + std::to_string(start) + ".." + std::to_string(start + block.size() - 1),
                                    "block " + std::to_string(i) + " checksum mismatch: the file is corrupted");
            return false;
        }
    }
    return true;
}

struct DctxFree {
    void operator()(ZSTD_DCtx* d) const noexcept { ZSTD_freeDCtx(d); }
};

// Decompress every frame of `stored` into at most raw_length + 1 bytes (spec §8.1): a lying size never
// allocates more than it declares, and output past it is refused.
struct DDictFree {
    void operator()(ZSTD_DDict* d) const noexcept { ZSTD_freeDDict(d); }
};

// Built-in dictionaries are loaded (read, checked, digested) once per process and folder, as the
// reference keeps them once loaded.
const ZSTD_DDict* builtin_ddict(const std::string& folder, std::uint32_t id, Error& error) {
    static std::mutex lock;
    static std::map<std::pair<std::string, std::uint32_t>, std::unique_ptr<ZSTD_DDict, DDictFree>> cache;
    std::lock_guard<std::mutex> guard(lock);
    auto key = std::make_pair(folder, id);
    auto found = cache.find(key);
    if (found != cache.end()) return found->second.get();
    std::vector<BuiltinDictionary> all;
    if (!builtin_dictionaries(folder, all, error)) return nullptr;
    const BuiltinDictionary* spec = nullptr;
    for (const auto& d : all) {
        if (d.id == id) spec = &d;
    }
    if (spec == nullptr) {
        error = container_error("header byte 20",
                                "compressed with zstd dictionary " + std::to_string(id) +
                                    ", which this install does not have",
                                "that dictionary (--zstd-dict / zstd_dict=); built-in: " + known_dictionaries(all));
        return nullptr;
    }
    std::string bytes;
    if (!load_dictionary(*spec, all, folder, bytes, error)) return nullptr;
    std::unique_ptr<ZSTD_DDict, DDictFree> ddict(ZSTD_createDDict(bytes.data(), bytes.size()));
    if (!ddict) {
        error = container_error("tracepack/data/zstd/" + spec->file, "built-in zstd dictionary " + spec->name +
                                                                          " is not a zstd dictionary");
        return nullptr;
    }
    return cache.emplace(key, std::move(ddict)).first->second.get();
}

// Decompress every frame of `stored` into at most raw_length + 1 bytes (spec §8.1): a lying size never
// allocates more than it declares, and output past it is refused.
bool decompress(std::string_view stored, const Header& h, const DictionaryFolder& folder, std::string& out,
                Error& error) {
    const ZSTD_DDict* ddict = nullptr;
    std::unique_ptr<ZSTD_DDict, DDictFree> user;
    if (h.dict_id && folder.has_user) {
        // spec §8.3 step 1: the dictionary the user gave, which must be the one the file names
        const std::uint32_t given = ZDICT_getDictID(folder.user.data(), folder.user.size());
        if (given != h.dict_id) {
            std::vector<BuiltinDictionary> all;
            Error ignored;
            builtin_dictionaries(folder.path, all, ignored);
            auto describe = [&](std::uint32_t id) {
                for (const auto& d : all) {
                    if (d.id == id) return std::to_string(id) + " (" + d.name + ")";
                }
                return std::to_string(id);
            };
            error = container_error("header byte 20", "compressed with zstd dictionary " + describe(h.dict_id) +
                                                          ", given " + describe(given));
            return false;
        }
        user.reset(ZSTD_createDDict(folder.user.data(), folder.user.size()));
        ddict = user.get();
    } else if (h.dict_id) {
        ddict = builtin_ddict(folder.path, h.dict_id, error);
        if (ddict == nullptr) return false;
    }
    std::unique_ptr<ZSTD_DCtx, DctxFree> dctx(ZSTD_createDCtx());
    if (!dctx) {
        error = Error{ErrorClass::InternalError, {}, "out of memory", {}, false};
        return false;
    }
    if (ddict != nullptr) {
        std::size_t rc = ZSTD_DCtx_refDDict(dctx.get(), ddict);
        if (ZSTD_isError(rc)) {
            error = container_error("byte " + std::to_string(h.header_size),
                                    std::string("zstd: zstd decompress error: ") + ZSTD_getErrorName(rc));
            return false;
        }
    }
    const std::uint64_t cap = h.raw_length + 1;  // one byte past the declared size tells "more than"
    out.clear();
    ZSTD_inBuffer in{stored.data(), stored.size(), 0};
    std::size_t chunk = 1 << 22;
    while (out.size() < cap) {
        std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, cap - out.size()));
        std::size_t old = out.size();
        out.resize(old + want);
        ZSTD_outBuffer ob{out.data() + old, want, 0};
        bool progressed = false;
        while (ob.pos < ob.size) {
            std::size_t before_in = in.pos, before_out = ob.pos;
            std::size_t rc = ZSTD_decompressStream(dctx.get(), &ob, &in);
            if (ZSTD_isError(rc)) {
                error = container_error("byte " + std::to_string(h.header_size),
                                        std::string("zstd: zstd decompress error: ") + ZSTD_getErrorName(rc));
                return false;
            }
            if (in.pos == before_in && ob.pos == before_out) break;  // no input left to make output from
            progressed = true;
        }
        out.resize(old + ob.pos);
        if (!progressed || ob.pos == 0) break;
    }
    if (out.size() != h.raw_length) {
        bool more = out.size() > h.raw_length;
        error = container_error("header byte 32",
                                std::string("payload decompresses to ") + (more ? "more than " : "") +
                                    std::to_string(out.size()) + " bytes",
                                "the declared " + std::to_string(h.raw_length) + " bytes");
        return false;
    }
    return true;
}

}  // namespace

bool unpack(std::string_view data, const Limits& limits, const DictionaryFolder& dictionaries, Header& h,
            std::string& storage, std::string_view& payload, Error& error) {
    if (!read_header(data, h, error)) return false;
    const std::uint64_t start = h.header_size;
    const std::int64_t available = static_cast<std::int64_t>(data.size()) - static_cast<std::int64_t>(start);
    if (available < 0 || static_cast<std::uint64_t>(available) < h.payload_length) {
        error = container_error("byte " + std::to_string(start),
                                "truncated payload: " + std::to_string(available < 0 ? 0 : available) + " of " +
                                    std::to_string(h.payload_length) + " bytes",
                                std::to_string(h.payload_length) + " payload bytes");
        return false;
    }
    std::uint32_t block_size = 0;
    std::string_view crcs;
    const bool blocks = (h.flags & kFlagBlockChecksums) != 0;
    if (blocks) {
        if (!read_block_table(data.substr(static_cast<std::size_t>(start + h.payload_length)), h, block_size, crcs,
                              error)) {
            return false;
        }
    } else if (static_cast<std::uint64_t>(available) > h.payload_length) {
        error = container_error("byte " + std::to_string(start + h.payload_length),
                                std::to_string(static_cast<std::uint64_t>(available) - h.payload_length) +
                                    " unexpected bytes after the payload",
                                "the end of the file");
        return false;
    }
    std::string_view stored = data.substr(start, h.payload_length);
    if (crc32_of(stored) != h.payload_crc32) {
        error = container_error("bytes " + std::to_string(start) + "..", "payload checksum mismatch: the file is corrupted");
        return false;
    }
    // the payload's CRC matched: a block that does not is a forged table (§1.5.2 step 12a)
    if (blocks && !check_blocks(stored, h, block_size, crcs, error)) return false;
    if (h.raw_length > limits.max_decompressed) {
        error = container_error("header byte 32",
                                "declared size " + std::to_string(h.raw_length) + " bytes exceeds the limit of " +
                                    std::to_string(limits.max_decompressed) + " bytes (a decompression bomb?)",
                                "a smaller document, a larger max_size " + limit_hint("max_decompressed"));
        return false;
    }
    if (h.compression != 0 && limits.ratio_exceeded(h.raw_length, h.payload_length)) {
        error = container_error("header byte 32",
                                "declared size " + std::to_string(h.raw_length) + " bytes is over " +
                                    std::to_string(limits.max_ratio) + " times the " + std::to_string(h.payload_length) +
                                    " compressed bytes (a decompression bomb?)",
                                "a plausible size, " + limit_hint("max_ratio"));
        return false;
    }
    if (h.compression == 0) {
        payload = stored;
        return true;
    }
    if (!decompress(stored, h, dictionaries, storage, error)) return false;
    payload = storage;
    return true;
}

}  // namespace tracepack
