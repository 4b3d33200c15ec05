// tracepack C++ runtime: the lazy reader (spec §5.6, §7.5, §9.5; container §1.3, block checksums §1.5.3).
//
// Two layouts behind one view of the document: the row layout (§5: a FlatBuffer whose root `Document`
// holds each table as a table of column vectors and `graph.nodes` as a vector of `Node` tables) and the
// column layout (§7: every column a run of a typed vector found through the directory). The reader asks
// both for the same things: a node's fields, a table column's row `k`, string `i`.
#include "tracepack/lazy.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "tracepack/container.hpp"
#include "tracepack/json_writer.hpp"
#include "tracepack/utf8.hpp"

namespace tracepack {
namespace {

constexpr std::uint64_t kMaxRendered = 256ULL << 20;  // §9.6 max_rendered, characters
// Characters of a frame's fixed text plus room for a 64-bit line number (the reference's estimate).
constexpr std::uint64_t kFrameOverhead = 27 + 20;

template <typename T>
T le(const std::uint8_t* p) noexcept {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

std::uint32_t crc_of(const std::uint8_t* p, std::size_t n) noexcept {
    uLong crc = crc32(0L, Z_NULL, 0);
    while (n > 0) {
        uInt chunk = n > (1u << 30) ? (1u << 30) : static_cast<uInt>(n);
        crc = crc32(crc, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return static_cast<std::uint32_t>(crc);
}

std::uint64_t code_points(std::string_view s) noexcept {
    std::uint64_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

// Python's str.isspace() (spec §2.9.2's list).
bool py_space(std::uint32_t cp) noexcept {
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

std::string_view py_strip(std::string_view s) {
    std::size_t a = 0;
    while (a < s.size()) {
        std::uint32_t cp = 0;
        std::size_t k = utf8::decode_one(s, a, cp);
        if (k == 0 || !py_space(cp)) break;
        a += k;
    }
    std::size_t b = s.size();
    while (b > a) {
        std::size_t start = b - 1;
        while (start > a && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
        std::uint32_t cp = 0;
        std::size_t k = utf8::decode_one(s, start, cp);
        if (k == 0 || !py_space(cp)) break;
        b = start;
    }
    return s.substr(a, b - a);
}

// Column-layout kinds (§7.2).
enum Kind : std::uint8_t { kBool, kI8, kU8, kI16, kU16, kI32, kU32, kI64, kU64, kF64, kText, kBlob, kDefault = 255 };
constexpr std::size_t kKindSize[12] = {1, 1, 1, 2, 2, 4, 4, 8, 8, 8, 1, 1};
const char* const kKindName[12] = {"bool",   "int8",  "uint8",  "int16",   "uint16", "int32",
                                   "uint32", "int64", "uint64", "float64", "text",   "blob"};

// A column of integers: `count` values of `kind` from byte `first` (kDefault: every value is 0).
struct Col {
    std::uint8_t kind = kDefault;
    std::size_t first = 0;
    std::uint64_t count = 0;
    const void* host = nullptr;  // a decoded document's vector (kind kU32, kI32 or kI64), not payload bytes
};

template <typename V>
Col host_col(const V& v, std::uint8_t kind) {
    Col c;
    c.kind = kind;
    c.count = v.size();
    c.host = v.data();
    return c;
}

// The field types the reader reads, for range checks.
enum class Ty : std::uint8_t { u32, i32, i64, u8 };

// The tables a lookup reads (their Document slots in the row layout, §5.2) and their columns.
enum TableId { kFiles, kLines, kFrames, kStacks, kModules, kSources, kRanges, kHandles, kTables };
enum Role : std::uint8_t { kRequired, kSparse, kPool };
struct ColumnSpec {
    const char* name;
    Ty ty;
    Role role;
};
struct TableSpec {
    const char* name;
    unsigned slot;
    unsigned columns;
    ColumnSpec c[5];
};
const TableSpec kTableSpecs[kTables] = {
    {"files", 2, 1, {{"name", Ty::u32, kRequired}}},
    {"lines",
     3,
     4,
     {{"file", Ty::u32, kRequired}, {"line", Ty::i64, kRequired}, {"name", Ty::u32, kRequired}, {"text", Ty::u32, kRequired}}},
    {"frames",
     4,
     5,
     {{"line", Ty::u32, kRequired},
      {"col", Ty::i32, kSparse},
      {"end_col", Ty::i32, kSparse},
      {"annotation", Ty::u32, kSparse},
      {"end_line", Ty::i64, kSparse}}},
    {"stacks", 5, 2, {{"parent", Ty::u32, kRequired}, {"frame", Ty::u32, kRequired}}},
    {"modules",
     6,
     5,
     {{"parent", Ty::u32, kRequired},
      {"key", Ty::u32, kRequired},
      {"path", Ty::u32, kRequired},
      {"type", Ty::u32, kRequired},
      {"method", Ty::u32, kSparse}}},
    {"sources",
     7,
     4,
     {{"file", Ty::i64, kRequired}, {"start_line", Ty::i64, kRequired}, {"line_count", Ty::u32, kRequired}, {"lines", Ty::u32, kPool}}},
    {"ranges", 8, 3, {{"source", Ty::u32, kRequired}, {"start", Ty::i64, kRequired}, {"end", Ty::i64, kRequired}}},
    {"debug_handles",
     9,
     5,
     {{"handle", Ty::i64, kRequired},
      {"stack", Ty::u32, kRequired},
      {"module", Ty::u32, kRequired},
      {"op", Ty::u32, kRequired},
      {"range", Ty::u32, kRequired}}},
};

struct Table {
    bool loaded = false;
    std::uint64_t rows = 0;
    Col c[5];
};

// A node's fields (spec §2.5 `Node`), as a lookup needs them.
struct NodeRow {
    std::uint64_t name = 0, target = 0, stack = 0, module = 0;
    std::int64_t style = 1;
    std::vector<std::int64_t> keys, values;
};

// A FlatBuffers table found and checked (§5.1).
struct Tbl {
    std::size_t pos = 0, vt = 0;
    std::uint16_t vsize = 0, tsize = 0;
};

// A column-layout directory entry (§7.2).
struct Entry {
    std::uint8_t kind = 0;
    std::uint64_t start = 0;  // index of its first value in its kind's vector (text: value index)
    std::uint64_t count = 0;
    std::uint64_t order = 0;  // position among the directory's blob columns (blob only)
};

}  // namespace

struct LazyDocument::Impl {
    std::string source;
    int fd = -1;
    Header h;
    std::unique_ptr<std::uint8_t[]> buf;
    std::size_t P = 0;  // payload bytes
    std::size_t n = 0;  // document buffer bytes (the payload's first n)
    // block checksums (§1.5)
    bool blocks = false;
    unsigned shift = 0;
    std::size_t B = 0;
    std::vector<std::uint32_t> crcs;
    std::vector<std::uint8_t> ok;
    std::uint64_t reads = 0;
    bool checksum = true;
    Error e;

    bool columns = false;
    // a document decoded whole (trace of any other file): its tables are read from it
    std::unique_ptr<current::Document> decoded;
    // row layout
    std::size_t strings_first = 0, nodes_first = 0;
    std::uint64_t string_count = 0, node_count = 0;
    // column layout
    std::unordered_map<std::string, Entry> dir;
    std::size_t vec_first[17] = {};
    std::uint64_t vec_count[17] = {};
    std::uint64_t text_count = 0;
    bool text_index_ok = false;
    std::vector<std::uint64_t> text_starts;  // without a usable text_index: every value's start
    std::vector<std::vector<std::uint64_t>> group_starts;  // with one: the starts found so far, per group of 64
    std::vector<std::uint64_t> blob_base;    // per blob column: the byte where its values start
    std::unordered_map<std::string, std::vector<std::uint64_t>> sums;  // list starts per #len column
    Col node_cols[5];  // name, target, stack, module, stack_style
    const Entry* strings_entry = nullptr;

    Table tables[kTables];
    // side index
    bool has_index = false;
    std::size_t index_first = 0;

    ~Impl() {
        if (fd >= 0) ::close(fd);
    }

    bool fail(ErrorClass cls, std::string where, std::string problem, std::string expected = {}) {
        bool has = !expected.empty();
        e = Error{cls, std::move(where), std::move(problem), std::move(expected), has};
        return false;
    }
    bool bad(const std::string& where, std::string problem, std::string expected = {}) {
        return fail(ErrorClass::DecodeError, where, std::move(problem), std::move(expected));
    }

    // -- bytes ------------------------------------------------------------------------------------

    bool pread_all(std::uint8_t* to, std::size_t len, std::uint64_t at, std::size_t& got) {
        got = 0;
        while (got < len) {
            ssize_t r = ::pread(fd, to + got, len - got, static_cast<off_t>(at + got));
            if (r < 0) {
                if (errno == EINTR) continue;
                return fail(ErrorClass::UsageError, "byte " + std::to_string(at + got),
                            std::string("cannot read: ") + std::strerror(errno));
            }
            if (r == 0) break;
            got += static_cast<std::size_t>(r);
        }
        return true;
    }

    // Payload bytes [a, b) are read and checked (§1.5.3) before any of them is used.
    bool need(std::size_t a, std::size_t b) {
        if (!blocks || a >= b) return true;
        for (std::size_t i = a >> shift, last = (b - 1) >> shift; i <= last; ++i) {
            if (ok[i]) continue;
            std::size_t start = i << shift, len = std::min(B, P - start);
            std::size_t got = 0;
            if (!pread_all(buf.get() + start, len, h.header_size + start, got)) return false;
            if (got != len) {
                return fail(ErrorClass::ContainerError, "byte " + std::to_string(h.header_size + start + got),
                            "the file changed while it was open: " + std::to_string(got) + " of " +
                                std::to_string(len) + " bytes read",
                            std::to_string(h.header_size + P) + " bytes of header and payload, as when it was opened");
            }
            if (checksum && crc_of(buf.get() + start, len) != crcs[i]) {
                return fail(ErrorClass::ContainerError,
                            "bytes " + std::to_string(h.header_size + start) + ".." +
                                std::to_string(h.header_size + start + len - 1),
                            "block " + std::to_string(i) +
                                " checksum mismatch: the file changed while it was open, or is corrupted");
            }
            ok[i] = 1;
            ++reads;
        }
        return true;
    }

    // Bytes [pos, pos + len) of the document buffer, inside it and checked.
    bool get(std::size_t pos, std::size_t len, const std::string& where) {
        if (pos > n || len > n - pos) {
            return bad(where, "offset " + std::to_string(pos) + " (+" + std::to_string(len) + ") is outside the buffer (" +
                                  std::to_string(n) + " bytes)");
        }
        return need(pos, pos + len);
    }
    const std::uint8_t* at(std::size_t pos) const noexcept { return buf.get() + pos; }

    // -- FlatBuffers (§5.1) ---------------------------------------------------------------------

    bool table(std::size_t pos, Tbl& t, const std::string& where) {
        if (!get(pos, 4, where)) return false;
        std::int64_t vt = static_cast<std::int64_t>(pos) - le<std::int32_t>(at(pos));
        if (vt < 0 || static_cast<std::uint64_t>(vt) + 4 > n) return bad(where, "vtable outside the buffer");
        if (!get(static_cast<std::size_t>(vt), 4, where)) return false;
        t.pos = pos;
        t.vt = static_cast<std::size_t>(vt);
        t.vsize = le<std::uint16_t>(at(t.vt));
        t.tsize = le<std::uint16_t>(at(t.vt + 2));
        if (t.vsize < 4 || t.vsize % 2) return bad(where, "vtable size " + std::to_string(t.vsize));
        if (t.tsize < 4) return bad(where, "table size " + std::to_string(t.tsize));
        if (!get(t.vt, t.vsize, where)) return false;
        return get(pos, t.tsize, where);
    }
    // The offset of slot `slot`'s `size` inline bytes in table t (0: absent).
    bool field(const Tbl& t, unsigned slot, unsigned size, std::size_t& off, const std::string& where) {
        off = 0;
        unsigned v = 4 + 2 * slot;
        if (v + 2 > t.vsize) return true;
        off = le<std::uint16_t>(at(t.vt + v));
        if (off != 0 && off + size > t.tsize) return bad(where, "field outside its table");
        return true;
    }
    template <typename T>
    bool scalar(const Tbl& t, unsigned slot, T dflt, T& out, const std::string& where) {
        std::size_t off = 0;
        if (!field(t, slot, sizeof(T), off, where)) return false;
        out = off ? le<T>(at(t.pos + off)) : dflt;
        return true;
    }
    // The object slot `slot` points to (0: absent).
    bool object(const Tbl& t, unsigned slot, std::size_t& pos, const std::string& where) {
        std::size_t off = 0;
        pos = 0;
        if (!field(t, slot, 4, off, where)) return false;
        if (!off) return true;
        std::uint64_t target = t.pos + off + static_cast<std::uint64_t>(le<std::uint32_t>(at(t.pos + off)));
        if (target >= n) return bad(where, "offset past the end of the buffer");
        pos = static_cast<std::size_t>(target);
        return true;
    }
    bool vec(std::size_t pos, std::size_t elem, std::size_t& first, std::uint64_t& count, const std::string& where) {
        if (!get(pos, 4, where)) return false;
        count = le<std::uint32_t>(at(pos));
        first = pos + 4;
        if (count * elem > n - first) {
            return bad(where, "vector of " + std::to_string(count) + " elements overruns the buffer");
        }
        return true;
    }
    bool fb_string(std::size_t pos, std::string_view& out, const std::string& where) {
        if (!get(pos, 4, where)) return false;
        std::uint64_t len = le<std::uint32_t>(at(pos));
        if (len + 5 > n - pos) return bad(where, "string at byte " + std::to_string(pos) + " overruns the buffer");
        if (!need(pos + 4, pos + 5 + len)) return false;
        if (at(pos + 4 + len)[0] != 0) return bad(where, "string at byte " + std::to_string(pos) + " has no NUL after it");
        out = std::string_view(reinterpret_cast<const char*>(at(pos + 4)), len);
        return utf8_ok(out, where);
    }
    bool utf8_ok(std::string_view s, const std::string& where) {
        utf8::Problem p = utf8::check(s);
        if (p.reason == nullptr) return true;
        return bad(where, std::string("invalid UTF-8: ") + p.reason + " at byte " + std::to_string(p.start));
    }

    // -- columns of integers ---------------------------------------------------------------------

    bool value(const Col& c, std::uint64_t k, Ty ty, std::int64_t& v, const std::string& where) {
        if (k >= c.count) {
            return bad(where, "row " + std::to_string(k) + " is past the column's " + std::to_string(c.count) + " values");
        }
        if (c.kind == kDefault) {
            v = 0;
            return true;
        }
        if (c.host != nullptr) {  // a decoded, validated document
            if (c.kind == kU32) v = static_cast<const std::uint32_t*>(c.host)[k];
            else if (c.kind == kI32) v = static_cast<const std::int32_t*>(c.host)[k];
            else v = static_cast<const std::int64_t*>(c.host)[k];
            return true;
        }
        std::size_t size = kKindSize[c.kind];
        std::size_t p = c.first + static_cast<std::size_t>(k) * size;
        if (!need(p, p + size)) return false;
        const std::uint8_t* q = at(p);
        switch (c.kind) {
            case kI8: v = le<std::int8_t>(q); break;
            case kU8: v = le<std::uint8_t>(q); break;
            case kI16: v = le<std::int16_t>(q); break;
            case kU16: v = le<std::uint16_t>(q); break;
            case kI32: v = le<std::int32_t>(q); break;
            case kU32: v = le<std::uint32_t>(q); break;
            case kI64: v = le<std::int64_t>(q); break;
            case kU64: {
                std::uint64_t u = le<std::uint64_t>(q);
                if (u > static_cast<std::uint64_t>(INT64_MAX)) return bad(where, "row " + std::to_string(k) + " holds " + std::to_string(u));
                v = static_cast<std::int64_t>(u);
                break;
            }
            default: return bad(where, std::string("a ") + kKindName[c.kind] + " column", "integers");
        }
        std::int64_t lo = INT64_MIN, hi = INT64_MAX;
        switch (ty) {
            case Ty::u32: lo = 0; hi = UINT32_MAX; break;
            case Ty::i32: lo = INT32_MIN; hi = INT32_MAX; break;
            case Ty::u8: lo = 0; hi = 255; break;
            case Ty::i64: break;
        }
        if (v < lo || v > hi) return bad(where, "row " + std::to_string(k) + " holds " + std::to_string(v));
        return true;
    }

    bool ref(std::int64_t v, std::uint64_t rows, const std::string& where, std::int64_t null = 0) {
        if (v < null || (v >= 0 && static_cast<std::uint64_t>(v) >= rows)) {
            return fail(ErrorClass::IntegrityError, where, "reference " + std::to_string(v) + " is out of range",
                        "an index below " + std::to_string(rows) + (null ? " or a sentinel down to " + std::to_string(null) : ""));
        }
        return true;
    }

    // -- opening ------------------------------------------------------------------------------------

    bool open(const std::string& p, bool check) {
        source = p;
        checksum = check;
        fd = ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0) return fail(ErrorClass::UsageError, {}, std::string("cannot open: ") + std::strerror(errno));
        struct stat st {};
        if (fstat(fd, &st) != 0) return fail(ErrorClass::UsageError, {}, std::string("cannot open: ") + std::strerror(errno));
        if (!S_ISREG(st.st_mode)) return fail(ErrorClass::UsageError, {}, "is not a regular file", "a .tpk file");
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
        std::uint8_t head[kHeaderSize];
        std::size_t got = 0;
        if (!pread_all(head, kHeaderSize, 0, got)) return false;
        if (!read_header(std::string_view(reinterpret_cast<const char*>(head), got), h, e, 1)) return false;
        if ((h.codec != 2 && h.codec != 4) || h.compression != 0) {
            return fail(ErrorClass::UsageError, {},
                        std::string("lazy access needs an uncompressed FlatBuffers file, this one is ") + codec_name(h.codec) +
                            " with compression " + (h.compression ? "zstd" : "none"));
        }
        const std::uint64_t H = h.header_size, T = H + h.payload_length;
        if (size < T) {
            return fail(ErrorClass::ContainerError, "byte " + std::to_string(H),
                        "truncated payload: " + std::to_string(size > H ? size - H : 0) + " bytes for a declared " +
                            std::to_string(h.payload_length),
                        std::to_string(h.payload_length) + " payload bytes, then the end of the file");
        }
        if (h.payload_length > SIZE_MAX / 2) return fail(ErrorClass::InputError, {}, "payload too large");
        P = static_cast<std::size_t>(h.payload_length);
        buf.reset(new std::uint8_t[P ? P : 1]);
        if (h.flags & 1) {
            if (!block_table(size - T)) return false;
        } else if (size != T) {
            return fail(ErrorClass::ContainerError, "byte " + std::to_string(H),
                        "unexpected bytes after the payload: " + std::to_string(size - H) + " bytes for a declared " +
                            std::to_string(h.payload_length),
                        std::to_string(h.payload_length) + " payload bytes, then the end of the file");
        }
        if (!blocks) {
            if (!pread_all(buf.get(), P, H, got)) return false;
            if (got != P) return fail(ErrorClass::ContainerError, "byte " + std::to_string(H + got), "the file changed while it was read");
            if (checksum && crc_of(buf.get(), P) != h.payload_crc32) {
                return fail(ErrorClass::ContainerError, "bytes " + std::to_string(H) + "..",
                            "payload checksum mismatch: the file is corrupted");
            }
            ::close(fd);
            fd = -1;
        }
        if (!split()) return false;
        if (h.codec == 4 ? !open_columns() : !open_rows()) return false;
        return true;
    }

    // §1.5.2 steps 11a-11f; checksum = false: the layout only (11a-11e).
    bool block_table(std::uint64_t A) {
        const std::uint64_t T = h.header_size + h.payload_length;
        std::uint8_t head[16];
        std::size_t got = 0;
        if (A < 16) {
            return fail(ErrorClass::ContainerError, "byte " + std::to_string(T), "truncated block table: " + std::to_string(A) + " bytes",
                        "a block table of at least 20 bytes after the payload (header flag bit 0)");
        }
        if (!pread_all(head, 16, T, got)) return false;
        if (got != 16) return fail(ErrorClass::ContainerError, "byte " + std::to_string(T + got), "the file changed while it was read");
        if (std::memcmp(head, "TPKB", 4) != 0) {
            return fail(ErrorClass::ContainerError, "byte " + std::to_string(T),
                        "block table magic is " + rt::py_bytes_repr(std::string_view(reinterpret_cast<const char*>(head), 4)),
                        "b'TPKB'");
        }
        std::uint32_t bs = le<std::uint32_t>(head + 4);
        if (bs < 512 || bs > (1u << 24) || (bs & (bs - 1))) {
            return fail(ErrorClass::ContainerError, "byte " + std::to_string(T + 4), "block size " + std::to_string(bs),
                        "a power of two from 512 to 16777216");
        }
        std::uint64_t count = le<std::uint64_t>(head + 8);
        std::uint64_t want = (h.payload_length + bs - 1) / bs;
        if (count != want) {
            return fail(ErrorClass::ContainerError, "byte " + std::to_string(T + 8), "block count " + std::to_string(count),
                        std::to_string(want) + ": " + std::to_string(h.payload_length) + " payload bytes in blocks of " +
                            std::to_string(bs));
        }
        std::uint64_t tsize = 20 + 4 * count;
        if (A != tsize) {
            std::string what = A < tsize ? "truncated block table" : std::to_string(A - tsize) + " unexpected bytes after it";
            return fail(ErrorClass::ContainerError, "byte " + std::to_string(T + std::min(A, tsize)),
                        what + ": " + std::to_string(A) + " block table bytes",
                        std::to_string(tsize) + " block table bytes (" + std::to_string(count) + " blocks), then the end of the file");
        }
        std::vector<std::uint8_t> table(static_cast<std::size_t>(tsize));
        if (!pread_all(table.data(), table.size(), T, got)) return false;
        if (got != table.size()) return fail(ErrorClass::ContainerError, "byte " + std::to_string(T + got), "the file changed while it was read");
        if (checksum && crc_of(table.data(), table.size() - 4) != le<std::uint32_t>(table.data() + table.size() - 4)) {
            return fail(ErrorClass::ContainerError, "bytes " + std::to_string(T) + ".." + std::to_string(T + tsize - 1),
                        "block table checksum mismatch: the file is corrupted");
        }
        blocks = true;
        B = bs;
        shift = 0;
        while ((std::size_t{1} << shift) < B) ++shift;
        crcs.resize(static_cast<std::size_t>(count));
        for (std::size_t i = 0; i < crcs.size(); ++i) crcs[i] = le<std::uint32_t>(table.data() + 16 + 4 * i);
        ok.assign(crcs.size(), 0);
        return true;
    }

    // §5.4: the document buffer and the side index; the trailer's bytes checked before they are used.
    bool split() {
        n = P;
        if (P < 16) return true;
        if (!need(P - 8, P)) return false;
        if (std::memcmp(at(P - 4), "TPKI", 4) != 0) return true;
        std::uint64_t L = le<std::uint32_t>(at(P - 8));
        if (L < 8 || L > P - 8) return true;
        std::uint64_t S = P - 8 - L;
        if (S < 8 || S % 8) return true;
        if (!need(static_cast<std::size_t>(S) + 4, static_cast<std::size_t>(S) + 8)) return false;
        if (std::memcmp(at(static_cast<std::size_t>(S) + 4), "TPKI", 4) != 0) return true;
        n = static_cast<std::size_t>(S);
        // The side index is derived data (§5.4): read it as a FlatBuffer of its own, never refused.
        side_start = static_cast<std::size_t>(S);
        side_len = static_cast<std::size_t>(L);
        return true;
    }
    std::size_t side_start = 0, side_len = 0;

    void open_side_index() {
        if (!side_len) return;
        // Read through the document-buffer helpers by widening the bounds to the side index for a moment.
        std::size_t saved = n;
        std::size_t base = side_start;
        n = P;
        Error keep = e;
        bool okay = false;
        std::size_t first = 0;
        std::uint64_t count = 0;
        do {
            if (!get(base, 8, "side")) break;
            if (std::memcmp(at(base + 4), "TPKI", 4) != 0) break;
            std::size_t root = base + le<std::uint32_t>(at(base));
            if (root >= base + side_len) break;
            Tbl t;
            if (!table(root, t, "side")) break;
            std::size_t v = 0;
            if (!object(t, 0, v, "side") || v == 0 || v >= base + side_len) break;
            if (!vec(v, 4, first, count, "side")) break;
            if (first + count * 4 > base + side_len) break;
            okay = count == node_count;
        } while (false);
        n = saved;
        e = keep;
        if (okay) {
            has_index = true;
            index_first = first;
        }
    }

    bool check_header(std::string_view magic, std::uint64_t major, std::uint64_t minor) {
        if (magic != "tracepack") {
            return bad("$.header.magic", "payload magic is " + rt::py_repr(magic), "'tracepack'");
        }
        if (major != h.major || minor != h.minor) {
            return bad("$.header.version", "payload says schema " + std::to_string(major) + "." + std::to_string(minor) +
                                               ", container header says " + std::to_string(h.major) + "." +
                                               std::to_string(h.minor));
        }
        return true;
    }

    bool open_rows() {
        if (!get(0, 8, "$")) return false;
        if (std::memcmp(at(4), "TPK1", 4) != 0) {
            return bad("$", "file identifier is " + rt::py_bytes_repr(std::string_view(reinterpret_cast<const char*>(at(4)), 4)),
                       "b'TPK1'");
        }
        Tbl doc, header, version;
        if (!table(le<std::uint32_t>(at(0)), doc, "$")) return false;
        std::size_t hp = 0, mp = 0, vp = 0, sp = 0, gp = 0, np = 0;
        if (!object(doc, 0, hp, "$.header")) return false;
        if (!hp) return bad("$.header", "required field is missing");
        if (!table(hp, header, "$.header") || !object(header, 0, mp, "$.header.magic")) return false;
        if (!mp) return bad("$.header.magic", "required field is missing");
        std::string_view magic;
        if (!fb_string(mp, magic, "$.header.magic")) return false;
        if (!object(header, 1, vp, "$.header.version")) return false;
        if (!vp) return bad("$.header.version", "required field is missing");
        std::uint16_t major = 0, minor = 0;
        if (!table(vp, version, "$.header.version") || !scalar<std::uint16_t>(version, 0, 0, major, "$.header.version.major") ||
            !scalar<std::uint16_t>(version, 1, 0, minor, "$.header.version.minor")) {
            return false;
        }
        if (!check_header(magic, major, minor)) return false;
        if (!rows_header_rest(header)) return false;
        if (!object(doc, 1, sp, "$.strings")) return false;
        if (!sp) return bad("$.strings", "required field is missing");
        if (!vec(sp, 4, strings_first, string_count, "$.strings")) return false;
        doc_ = doc;
        if (!check_string_zero()) return false;
        if (!object(doc, 10, gp, "$.graph")) return false;
        if (!gp) return bad("$.graph", "required field is missing");
        Tbl graph;
        if (!table(gp, graph, "$.graph") || !object(graph, 3, np, "$.graph.nodes")) return false;
        if (np && !vec(np, 4, nodes_first, node_count, "$.graph.nodes")) return false;
        open_side_index();
        return true;
    }
    Tbl doc_;

    // The rest of the header (producer, metadata), decoded whole on opening as the reference does.
    bool rows_header_rest(const Tbl& header) {
        std::size_t pp = 0, mp = 0;
        if (!object(header, 2, pp, "$.header.producer")) return false;
        if (pp) {
            Tbl prod;
            if (!table(pp, prod, "$.header.producer")) return false;
            for (unsigned f = 0; f < 2; ++f) {
                const std::string w = f ? "$.header.producer.version" : "$.header.producer.name";
                std::size_t sp = 0;
                std::string_view v;
                if (!object(prod, f, sp, w) || (sp && !fb_string(sp, v, w))) return false;
            }
        }
        if (!object(header, 3, mp, "$.header.metadata")) return false;
        if (!mp) return true;
        std::size_t first = 0;
        std::uint64_t count = 0;
        if (!vec(mp, 4, first, count, "$.header.metadata")) return false;
        for (std::uint64_t i = 0; i < count; ++i) {
            const std::string w = "$.header.metadata[" + std::to_string(i) + "]";
            std::size_t p = first + 4 * static_cast<std::size_t>(i);
            if (!get(p, 4, w)) return false;
            std::uint64_t target = p + static_cast<std::uint64_t>(le<std::uint32_t>(at(p)));
            if (target >= n) return bad(w, "offset past the end of the buffer");
            Tbl kv;
            if (!table(static_cast<std::size_t>(target), kv, w)) return false;
            for (unsigned f = 0; f < 2; ++f) {
                const std::string fw = w + (f ? ".value" : ".key");
                std::size_t sp = 0;
                std::string_view v;
                if (!object(kv, f, sp, fw)) return false;
                if (!sp) return bad(fw, "required field is missing");
                if (!fb_string(sp, v, fw)) return false;
            }
        }
        return true;
    }

    // Every field of a Node table the file's version knows lies inside the table (§5.1), read or not.
    bool node_fields_inside(const Tbl& t, const std::string& where) {
        static const unsigned sizes[11] = {4, 4, 4, 4, 4, 1, 4, 4, 4, 4, 4};
        const unsigned slots = h.major == 1 && h.minor == 0 ? 9 : 11;
        for (unsigned s = 0; s < slots; ++s) {
            std::size_t off = 0;
            if (!field(t, s, sizes[s], off, where)) return false;
        }
        return true;
    }

    bool check_string_zero() {
        std::string_view s0;
        if (string_count != 0 && !string(0, s0, "$.strings[0]")) return false;
        if (string_count == 0 || !s0.empty()) {
            return fail(ErrorClass::IntegrityError, "$.strings[0]", "string 0 is not the empty string", "\"\"");
        }
        return true;
    }

    // -- the column layout (§7) ---------------------------------------------------------------------

    bool open_columns() {
        if (!get(0, 8, "Columns")) return false;
        if (std::memcmp(at(4), "TPKC", 4) != 0) {
            return bad("Columns", "file identifier is " + rt::py_bytes_repr(std::string_view(reinterpret_cast<const char*>(at(4)), 4)),
                       "b'TPKC'");
        }
        Tbl root;
        if (!table(le<std::uint32_t>(at(0)), root, "Columns")) return false;
        std::uint32_t layout = 0;
        if (!scalar<std::uint32_t>(root, 0, 0, layout, "Columns.layout")) return false;
        if (layout != 1) return bad("Columns.layout", "layout " + std::to_string(layout), "1");
        static const char* const names[17] = {"layout", "paths", "kinds",  "counts", "bool",  "int8",  "uint8", "int16", "uint16",
                                              "int32",  "uint32", "int64", "uint64", "float64", "text", "blob", "text_index"};
        static const std::size_t elem[17] = {0, 1, 1, 4, 1, 1, 1, 2, 2, 4, 4, 8, 8, 8, 1, 1, 4};
        for (unsigned s = 1; s < 17; ++s) {
            std::size_t pos = 0;
            std::string where = std::string("Columns.") + names[s];
            if (!object(root, s, pos, where)) return false;
            if (pos && !vec(pos, elem[s], vec_first[s], vec_count[s], where)) return false;
        }
        // The directory, read whole (§7.4's checks on opening).
        const std::size_t pf = vec_first[1];
        const std::uint64_t pn = vec_count[1];
        if (!need(pf, pf + pn) || !need(vec_first[2], vec_first[2] + vec_count[2]) ||
            !need(vec_first[3], vec_first[3] + 4 * vec_count[3])) {
            return false;
        }
        std::string_view paths(reinterpret_cast<const char*>(at(pf)), pn);
        if (!utf8_ok(paths, "Columns.paths")) return false;
        if (!paths.empty() && paths.back() != '\0') return bad("Columns.paths", "the last path has no NUL after it", "NUL-terminated paths");
        std::uint64_t cols = static_cast<std::uint64_t>(std::count(paths.begin(), paths.end(), '\0'));
        if (vec_count[2] != cols || vec_count[3] != cols) {
            return bad("Columns.kinds", std::to_string(cols) + " paths, " + std::to_string(vec_count[2]) + " kinds and " +
                                            std::to_string(vec_count[3]) + " counts",
                       "one kind and one count per path");
        }
        std::uint64_t totals[12] = {};
        std::uint64_t blobs = 0;
        std::size_t a = 0;
        dir.reserve(static_cast<std::size_t>(cols));
        for (std::uint64_t i = 0; i < cols; ++i) {
            std::size_t z = paths.find('\0', a);
            std::string p(paths.substr(a, z - a));
            a = z + 1;
            std::uint8_t kind = at(vec_first[2] + i)[0];
            std::uint64_t count = le<std::uint32_t>(at(vec_first[3] + 4 * i));
            if (kind > 11) return bad("Columns.kinds (" + p + ")", "unknown kind " + std::to_string(kind), "0..11");
            Entry en{kind, 0, count, 0};
            if (kind == kBlob) {
                en.start = totals[kU32];
                totals[kU32] += count;
                en.order = blobs++;
            } else {
                en.start = totals[kind];
                totals[kind] += count;
            }
            if (!dir.emplace(p, en).second) return bad("Columns.paths (" + p + ")", "the path occurs twice");
        }
        for (unsigned k = 0; k < 10; ++k) {
            if (totals[k] != vec_count[4 + k]) {
                return bad(std::string("Columns.") + kKindName[k],
                           std::to_string(vec_count[4 + k]) + " values for columns that count " + std::to_string(totals[k]),
                           std::to_string(totals[k]) + " values");
            }
        }
        text_count = totals[kText];
        if (vec_count[14]) {
            if (!need(vec_first[14] + vec_count[14] - 1, vec_first[14] + vec_count[14])) return false;
            if (at(vec_first[14] + vec_count[14] - 1)[0] != 0) {
                return bad("Columns.text", "the last value has no NUL after it", "NUL-terminated values");
            }
        }
        text_index_ok = vec_count[16] == (text_count + 63) / 64;
        // The header, the string table and the node count.
        std::string_view magic;
        std::int64_t major = 0, minor = 0;
        if (!text_at("$.header.magic", 0, magic)) return false;
        Col c;
        if (!column("$.header.version.major", 1, c) || !value(c, 0, Ty::i64, major, "$.header.version.major")) return false;
        if (!column("$.header.version.minor", 1, c) || !value(c, 0, Ty::i64, minor, "$.header.version.minor")) return false;
        if (major < 0 || minor < 0 || !check_header(magic, static_cast<std::uint64_t>(major), static_cast<std::uint64_t>(minor))) {
            if (major < 0 || minor < 0) return bad("$.header.version", "negative version");
            return false;
        }
        if (!bool_column_ok("$.header.producer#present", 1)) return false;
        {
            std::string_view v;
            std::uint64_t meta = 0;
            auto pres = dir.find("$.header.producer#present");
            bool producer = pres == dir.end() ? false : at(vec_first[4] + static_cast<std::size_t>(pres->second.start))[0] != 0;
            if (producer && (!text_at("$.header.producer.name", 0, v) || !text_at("$.header.producer.version", 0, v))) return false;
            if (!list_len("$.header.metadata", meta)) return false;
            for (std::uint64_t i = 0; i < meta; ++i) {
                if (!text_req("$.header.metadata[].key", meta, i, v) || !text_req("$.header.metadata[].value", meta, i, v)) return false;
            }
        }
        if (!list_len("$.strings", string_count)) return false;
        auto found = dir.find("$.strings[]");
        if (string_count) {
            if (found == dir.end()) return bad("$.strings[]", "the column is missing", "a value at row 0");
            if (found->second.count != string_count) {
                return bad("$.strings[]", std::to_string(found->second.count) + " values for " + std::to_string(string_count) + " rows");
            }
            if (found->second.kind != kText && found->second.kind != kBlob) {
                return bad("$.strings[]", std::string("a ") + kKindName[found->second.kind] + " column", "text or blob");
            }
            strings_entry = &found->second;
        }
        if (!check_string_zero()) return false;
        if (!list_len("$.graph.nodes", node_count)) return false;
        static const char* const fields[5] = {"name", "target", "stack", "module", "stack_style"};
        for (unsigned f = 0; f < 5; ++f) {
            // name and target have no default (§2.5); stack, module and stack_style do
            if (!column(std::string("$.graph.nodes[].") + fields[f], node_count, node_cols[f], f < 2)) return false;
        }
        open_side_index();
        return true;
    }

    // The integer column `path` of `rows` rows (a missing column: every row the default 0).
    bool column(const std::string& path, std::uint64_t rows, Col& c, bool required = false) {
        c = Col{};
        c.count = rows;
        if (rows == 0) return true;  // §6.5, the n == 0 rule: no rows, the column is not looked at
        auto it = dir.find(path);
        if (it == dir.end()) {
            // §6.5: a field without a default must have its column when there are rows
            if (required && rows > 0) return bad(path, "the column is missing", "a value per row (no default)");
            return true;
        }
        const Entry& en = it->second;
        if (en.count != rows) {
            return bad(path, std::to_string(en.count) + " values for " + std::to_string(rows) + " rows",
                       std::to_string(rows) + " values");
        }
        if (en.kind < kI8 || en.kind > kU64 || en.kind == kBlob) {
            return bad(path, std::string("a ") + kKindName[en.kind] + " column", "integers");
        }
        c.kind = en.kind;
        c.first = vec_first[4 + en.kind] + static_cast<std::size_t>(en.start) * kKindSize[en.kind];
        return true;
    }
    // A bool column's kind and values (0 or 1), read whole (the header's are one row).
    bool bool_column_ok(const std::string& path, std::uint64_t rows) {
        if (rows == 0) return true;  // §6.5: not looked at
        auto it = dir.find(path);
        if (it == dir.end()) return true;
        const Entry& en = it->second;
        if (en.count != rows) return bad(path, std::to_string(en.count) + " values for " + std::to_string(rows) + " rows");
        if (en.kind != kBool) return bad(path, std::string("a ") + kKindName[en.kind] + " column", "bool");
        std::size_t p = vec_first[4] + static_cast<std::size_t>(en.start);
        if (!need(p, p + static_cast<std::size_t>(rows))) return false;
        for (std::uint64_t r = 0; r < rows; ++r) {
            if (at(p + r)[0] > 1) {
                return bad(path, "row " + std::to_string(r) + " holds " + std::to_string(at(p + r)[0]), "booleans (0 or 1)");
            }
        }
        return true;
    }
    // The length of the root-level list `path` (its `#len` column: one row).
    bool list_len(const std::string& path, std::uint64_t& len) {
        Col c;
        len = 0;
        if (dir.find(path + "#len") == dir.end()) return true;
        std::int64_t v = 0;
        if (!column(path + "#len", 1, c) || !value(c, 0, Ty::u32, v, path + "#len")) return false;
        len = static_cast<std::uint64_t>(v);
        if (len > P) return bad(path + "#len", "a list of " + std::to_string(len) + " items in a payload of " + std::to_string(P) + " bytes");
        return true;
    }

    // Text value number `j` of the whole `text` vector, found from text_index (§7.5).
    bool text_value(std::uint64_t j, std::string_view& out, const std::string& where) {
        const std::size_t tf = vec_first[14];
        const std::uint64_t tn = vec_count[14];
        std::uint64_t pos = 0;
        if (text_index_ok) {
            std::size_t ip = vec_first[16] + 4 * static_cast<std::size_t>(j / 64);
            if (!need(ip, ip + 4)) return false;
            pos = le<std::uint32_t>(at(ip));
            if (pos > tn || (pos > 0 && (!need(tf + pos - 1, tf + pos) || at(tf + pos - 1)[0] != 0))) {
                return bad("Columns.text_index", "entry " + std::to_string(j / 64) + " is " + std::to_string(pos) +
                                                     ", not where text value " + std::to_string(j / 64 * 64) + " starts");
            }
            // The group's starts are kept once scanned: a value read again is found without a scan.
            const std::size_t g = static_cast<std::size_t>(j / 64);
            if (group_starts.empty()) group_starts.assign(static_cast<std::size_t>(vec_count[16]), {});
            std::vector<std::uint64_t>& starts = group_starts[g];
            if (starts.empty() || starts.size() <= j % 64) {
                if (starts.empty()) starts.push_back(pos);
                std::uint64_t p = starts.back();
                while (starts.size() <= j % 64) {
                    if (!nul_after(p, where)) return false;
                    starts.push_back(p);
                }
            }
            pos = starts[static_cast<std::size_t>(j % 64)];
        } else {
            if (text_starts.empty()) {
                if (!need(tf, tf + tn)) return false;
                // every value takes a byte at least (its NUL): the directory's count is no size to trust
                text_starts.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(text_count, tn)));
                std::uint64_t p = 0;
                while (p < tn) {
                    text_starts.push_back(p);
                    const void* z = std::memchr(at(tf + p), 0, static_cast<std::size_t>(tn - p));
                    p = static_cast<std::uint64_t>(static_cast<const std::uint8_t*>(z) - at(tf)) + 1;
                }
                if (text_starts.size() != text_count) {
                    // the Python lazy reader's words (tracepack.codecs.fbcolumns, _all_starts)
                    return bad("Columns.text", std::to_string(text_starts.size()) + " values for the directory's " +
                                                   std::to_string(text_count));
                }
            }
            if (j >= text_starts.size()) return bad("Columns.text", "text value " + std::to_string(j) + " is missing");
            pos = text_starts[static_cast<std::size_t>(j)];
        }
        std::uint64_t start = pos;
        if (!nul_after(pos, where)) return false;
        out = std::string_view(reinterpret_cast<const char*>(at(tf + start)), pos - 1 - start);
        return utf8_ok(out, "Columns.text");
    }
    // Move `pos` past the next NUL of `text` (blocks checked as the scan goes).
    bool nul_after(std::uint64_t& pos, const std::string&) {
        const std::size_t tf = vec_first[14];
        const std::uint64_t tn = vec_count[14];
        while (pos < tn) {
            std::uint64_t end = blocks ? std::min<std::uint64_t>(tn, ((tf + pos) / B + 1) * B - tf) : tn;
            if (!need(tf + pos, tf + end)) return false;
            const void* z = std::memchr(at(tf + pos), 0, static_cast<std::size_t>(end - pos));
            if (z) {
                pos = static_cast<std::uint64_t>(static_cast<const std::uint8_t*>(z) - at(tf)) + 1;
                return true;
            }
            pos = end;
        }
        return bad("Columns.text", "fewer text values than the columns count", std::to_string(text_count) + " values");
    }
    // Row k of the text or blob column `path` (which exists).
    bool text_at(const std::string& path, std::uint64_t k, std::string_view& out) {
        auto it = dir.find(path);
        if (it == dir.end()) {
            out = {};
            return true;
        }
        return entry_text(it->second, path, k, out);
    }
    // Row k of a text column of `rows` rows without a default.
    bool text_req(const std::string& path, std::uint64_t rows, std::uint64_t k, std::string_view& out) {
        auto it = dir.find(path);
        if (it == dir.end()) return bad(path, "the column is missing", "a value per row (no default)");
        if (it->second.count != rows) return bad(path, std::to_string(it->second.count) + " values for " + std::to_string(rows) + " rows");
        return entry_text(it->second, path, k, out);
    }
    bool entry_text(const Entry& en, const std::string& path, std::uint64_t k, std::string_view& out) {
        if (k >= en.count) return bad(path, "row " + std::to_string(k) + " is past the column's " + std::to_string(en.count) + " values");
        if (en.kind == kText) return text_value(en.start + k, out, path);
        if (en.kind != kBlob) return bad(path, std::string("a ") + kKindName[en.kind] + " column", "text or blob");
        if (blob_base.empty() && !blob_bases()) return false;
        // The value's offset: the column's base plus the lengths before row k.
        std::uint64_t off = blob_base[static_cast<std::size_t>(en.order)];
        std::size_t lf = vec_first[10] + static_cast<std::size_t>(en.start) * 4;
        if (!need(lf, lf + 4 * static_cast<std::size_t>(k + 1))) return false;
        for (std::uint64_t r = 0; r < k; ++r) off += le<std::uint32_t>(at(lf + 4 * r));
        std::uint64_t len = le<std::uint32_t>(at(lf + 4 * k));
        if (off + len > vec_count[15]) return bad(path, "blob values overrun Columns.blob");
        std::size_t bf = vec_first[15] + static_cast<std::size_t>(off);
        if (!need(bf, bf + len)) return false;
        out = std::string_view(reinterpret_cast<const char*>(at(bf)), len);
        return utf8_ok(out, path);
    }
    bool blob_bases() {
        std::uint64_t total = 0;
        std::vector<std::pair<std::uint64_t, const Entry*>> order;
        for (const auto& kv : dir) {
            if (kv.second.kind == kBlob) order.emplace_back(kv.second.order, &kv.second);
        }
        std::sort(order.begin(), order.end());
        blob_base.assign(order.size(), 0);
        for (const auto& o : order) {
            blob_base[static_cast<std::size_t>(o.first)] = total;
            std::size_t lf = vec_first[10] + static_cast<std::size_t>(o.second->start) * 4;
            if (!need(lf, lf + 4 * static_cast<std::size_t>(o.second->count))) return false;
            for (std::uint64_t r = 0; r < o.second->count; ++r) total += le<std::uint32_t>(at(lf + 4 * r));
        }
        if (total != vec_count[15]) return bad("Columns.blob", std::to_string(vec_count[15]) + " bytes for blob values of " + std::to_string(total));
        return true;
    }

    // Start of node i's items of list field `field` (a `#len` column over the nodes), and their number.
    bool node_list(const std::string& field, std::uint64_t i, std::uint64_t& start, std::uint64_t& len) {
        const std::string lp = "$.graph.nodes[]." + field + "#len";
        auto found = sums.find(lp);
        if (found == sums.end()) {
            Col c;
            if (!column(lp, node_count, c)) return false;
            std::vector<std::uint64_t> s(static_cast<std::size_t>(node_count) + 1, 0);
            for (std::uint64_t r = 0; r < node_count; ++r) {
                std::int64_t v = 0;
                if (!value(c, r, Ty::u32, v, lp)) return false;
                if (static_cast<std::uint64_t>(v) > P) {
                    return bad(lp, "row " + std::to_string(r) + ": a list of " + std::to_string(v) + " items in a payload of " +
                                       std::to_string(P) + " bytes");
                }
                s[static_cast<std::size_t>(r) + 1] = s[static_cast<std::size_t>(r)] + static_cast<std::uint64_t>(v);
            }
            found = sums.emplace(lp, std::move(s)).first;
        }
        start = found->second[static_cast<std::size_t>(i)];
        len = found->second[static_cast<std::size_t>(i) + 1] - start;
        return true;
    }

    // -- one view of both layouts --------------------------------------------------------------------

    bool string(std::uint64_t i, std::string_view& out, const std::string& where) {
        if (i >= string_count) return ref(static_cast<std::int64_t>(i), string_count, where);
        if (decoded) {
            out = decoded->strings[static_cast<std::size_t>(i)];
            return true;
        }
        if (columns_layout()) return entry_text(*strings_entry, "$.strings[]", i, out);
        std::size_t p = strings_first + 4 * static_cast<std::size_t>(i);
        if (!get(p, 4, "$.strings")) return false;
        std::uint64_t target = p + static_cast<std::uint64_t>(le<std::uint32_t>(at(p)));
        if (target >= n) return bad("$.strings[" + std::to_string(i) + "]", "offset past the end of the buffer");
        return fb_string(static_cast<std::size_t>(target), out, "$.strings[" + std::to_string(i) + "]");
    }
    bool str_ref(std::int64_t v, std::string_view& out, const std::string& where) {
        if (!ref(v, string_count, where)) return false;
        return string(static_cast<std::uint64_t>(v), out, where);
    }
    bool columns_layout() const noexcept { return h.codec == 4; }

    bool load(TableId id) {
        Table& t = tables[id];
        if (t.loaded) return true;
        const TableSpec& spec = kTableSpecs[id];
        const std::string base = std::string("$.") + spec.name;
        if (decoded) {
            const current::Document& d = *decoded;
            switch (id) {
                case kFiles: t.c[0] = host_col(d.files.name, kU32); break;
                case kLines:
                    t.c[0] = host_col(d.lines.file, kU32), t.c[1] = host_col(d.lines.line, kI64);
                    t.c[2] = host_col(d.lines.name, kU32), t.c[3] = host_col(d.lines.text, kU32);
                    break;
                case kFrames:
                    t.c[0] = host_col(d.frames.line, kU32), t.c[1] = host_col(d.frames.col, kI32);
                    t.c[2] = host_col(d.frames.end_col, kI32), t.c[3] = host_col(d.frames.annotation, kU32);
                    t.c[4] = host_col(d.frames.end_line, kI64);
                    break;
                case kStacks: t.c[0] = host_col(d.stacks.parent, kU32), t.c[1] = host_col(d.stacks.frame, kU32); break;
                case kModules:
                    t.c[0] = host_col(d.modules.parent, kU32), t.c[1] = host_col(d.modules.key, kU32);
                    t.c[2] = host_col(d.modules.path, kU32), t.c[3] = host_col(d.modules.type, kU32);
                    t.c[4] = host_col(d.modules.method, kU32);
                    break;
                case kSources:
                    t.c[0] = host_col(d.sources.file, kI64), t.c[1] = host_col(d.sources.start_line, kI64);
                    t.c[2] = host_col(d.sources.line_count, kU32), t.c[3] = host_col(d.sources.lines, kU32);
                    break;
                case kRanges:
                    t.c[0] = host_col(d.ranges.source, kU32), t.c[1] = host_col(d.ranges.start, kI64);
                    t.c[2] = host_col(d.ranges.end, kI64);
                    break;
                case kHandles:
                    t.c[0] = host_col(d.debug_handles.handle, kI64), t.c[1] = host_col(d.debug_handles.stack, kU32);
                    t.c[2] = host_col(d.debug_handles.module, kU32), t.c[3] = host_col(d.debug_handles.op, kU32);
                    t.c[4] = host_col(d.debug_handles.range, kU32);
                    break;
                default: break;
            }
        } else if (columns_layout()) {
            for (unsigned j = 0; j < spec.columns; ++j) {
                std::string p = base + "." + spec.c[j].name;
                std::uint64_t len = 0;
                if (!list_len(p, len) || !column(p + "[]", len, t.c[j], true)) return false;
            }
        } else {
            std::size_t pos = 0;
            if (!object(doc_, spec.slot, pos, base)) return false;
            if (!pos) return bad(base, "required field is missing");
            Tbl tb;
            if (!table(pos, tb, base)) return false;
            for (unsigned j = 0; j < spec.columns; ++j) {
                std::string p = base + "." + spec.c[j].name;
                std::size_t vp = 0;
                if (!object(tb, j, vp, p)) return false;
                Col& c = t.c[j];
                c = Col{};
                if (!vp) {
                    if (spec.c[j].role == kRequired) return bad(p, "required field is missing");
                    continue;
                }
                std::size_t size = spec.c[j].ty == Ty::i64 ? 8 : 4;
                if (!vec(vp, size, c.first, c.count, p)) return false;
                c.kind = spec.c[j].ty == Ty::i64 ? kI64 : spec.c[j].ty == Ty::i32 ? kI32 : kU32;
            }
        }
        t.rows = t.c[0].count;
        for (unsigned j = 1; j < spec.columns; ++j) {
            std::uint64_t got = t.c[j].count;
            Role role = spec.c[j].role;
            if (role != kPool && got != t.rows && !(role == kSparse && got == 0)) {
                return fail(ErrorClass::IntegrityError, base + "." + spec.c[j].name,
                            "column has " + std::to_string(got) + " entries but the table has " + std::to_string(t.rows) + " rows",
                            std::to_string(t.rows) + " entries" + (role == kSparse ? " or none" : ""));
            }
        }
        if (t.rows < 1 && id != kHandles) {
            return fail(ErrorClass::IntegrityError, base, "table has no rows", "row 0, the reserved empty entry");
        }
        t.loaded = true;
        return true;
    }
    // Row k of column j of table id (a sparse column that is empty: `dflt`).
    bool cell(TableId id, unsigned j, std::uint64_t k, std::int64_t& v, std::int64_t dflt = 0) {
        const Table& t = tables[id];
        const ColumnSpec& c = kTableSpecs[id].c[j];
        if (c.role == kSparse && t.c[j].count == 0) {
            v = dflt;
            return true;
        }
        return value(t.c[j], k, c.ty, v, std::string("$.") + kTableSpecs[id].name + "." + c.name + "[" + std::to_string(k) + "]");
    }

    bool node(std::uint64_t i, NodeRow& out, bool meta) {
        const std::string where = "$.graph.nodes[" + std::to_string(i) + "]";
        out = NodeRow{};
        std::int64_t v = 0;
        if (decoded) {
            const auto& nd = decoded->graph.nodes[static_cast<std::size_t>(i)];
            out.name = nd.name, out.target = nd.target, out.stack = nd.stack, out.module = nd.module;
            out.style = static_cast<std::int64_t>(nd.stack_style);
            if (meta) {
                out.keys.assign(nd.meta_keys.begin(), nd.meta_keys.end());
                out.values.assign(nd.meta_values.begin(), nd.meta_values.end());
            }
        } else if (columns_layout()) {
            static const char* const fields[5] = {"name", "target", "stack", "module", "stack_style"};
            std::uint64_t* dest[4] = {&out.name, &out.target, &out.stack, &out.module};
            for (unsigned f = 0; f < 5; ++f) {
                if (f == 4 && node_cols[4].kind == kDefault) {
                    out.style = 1;  // absent: the default, `stripped`
                    break;
                }
                if (!value(node_cols[f], i, f == 4 ? Ty::u8 : Ty::u32, v, "$.graph.nodes[]." + std::string(fields[f]))) return false;
                if (f < 4) *dest[f] = static_cast<std::uint64_t>(v);
                else out.style = v;
            }
            if (!meta) return true;
            for (unsigned f = 0; f < 2; ++f) {
                const std::string field = f ? "meta_values" : "meta_keys";
                std::uint64_t start = 0, len = 0;
                if (!node_list(field, i, start, len)) return false;
                const auto& s = sums.find("$.graph.nodes[]." + field + "#len")->second;
                Col c;
                const std::string ip = "$.graph.nodes[]." + field + "[]";
                if (!column(ip, s.back(), c, true)) return false;
                auto& dst = f ? out.values : out.keys;
                dst.resize(static_cast<std::size_t>(len));
                for (std::uint64_t r = 0; r < len; ++r) {
                    if (!value(c, start + r, f ? Ty::i64 : Ty::u32, dst[static_cast<std::size_t>(r)], ip)) return false;
                }
            }
        } else {
            std::size_t p = nodes_first + 4 * static_cast<std::size_t>(i);
            if (!get(p, 4, where)) return false;
            std::uint64_t target = p + static_cast<std::uint64_t>(le<std::uint32_t>(at(p)));
            if (target >= n) return bad(where, "offset past the end of the buffer");
            Tbl t;
            if (!table(static_cast<std::size_t>(target), t, where) || !node_fields_inside(t, where)) return false;
            std::uint32_t u = 0;
            std::uint8_t style = 1;
            if (!scalar<std::uint32_t>(t, 0, 0, u, where + ".name")) return false;
            out.name = u;
            if (!scalar<std::uint32_t>(t, 1, 0, u, where + ".target")) return false;
            out.target = u;
            if (!scalar<std::uint32_t>(t, 4, 0, u, where + ".stack")) return false;
            out.stack = u;
            if (!scalar<std::uint8_t>(t, 5, 1, style, where + ".stack_style")) return false;
            out.style = style;
            if (!scalar<std::uint32_t>(t, 6, 0, u, where + ".module")) return false;
            out.module = u;
            if (!meta) return true;
            for (unsigned f = 0; f < 2; ++f) {
                const std::string fw = where + (f ? ".meta_values" : ".meta_keys");
                std::size_t vp = 0, first = 0;
                std::uint64_t count = 0;
                if (!object(t, 7 + f, vp, fw)) return false;
                if (vp && !vec(vp, f ? 8 : 4, first, count, fw)) return false;
                if (!need(first, first + (f ? 8 : 4) * static_cast<std::size_t>(count))) return false;
                auto& dst = f ? out.values : out.keys;
                dst.resize(static_cast<std::size_t>(count));
                for (std::uint64_t r = 0; r < count; ++r) {
                    dst[static_cast<std::size_t>(r)] = f ? le<std::int64_t>(at(first + 8 * r)) : le<std::uint32_t>(at(first + 4 * r));
                }
            }
        }
        if (out.style != 0 && out.style != 1) {
            return bad(where + ".stack_style", std::to_string(out.style) + " is not a value of enum StackStyle");
        }
        if (meta && out.keys.size() != out.values.size()) {
            return fail(ErrorClass::IntegrityError, where + ".meta_values",
                        std::to_string(out.keys.size()) + " metadata keys but " + std::to_string(out.values.size()) + " values",
                        "one value per key");
        }
        return true;
    }

    bool node_name(std::uint64_t i, std::string_view& out) {
        if (columns_layout() && !decoded) {  // the name column alone
            std::int64_t v = 0;
            if (!value(node_cols[0], i, Ty::u32, v, "$.graph.nodes[].name")) return false;
            return str_ref(v, out, "$.graph.nodes[" + std::to_string(i) + "].name");
        }
        NodeRow r;
        if (!node(i, r, false)) return false;
        return str_ref(static_cast<std::int64_t>(r.name), out, "$.graph.nodes[" + std::to_string(i) + "].name");
    }

    // -- rendering (§2.9) --------------------------------------------------------------------------

    bool frames(std::uint64_t stack, std::vector<LazyFrame>& out, std::vector<std::string_view>& annotations) {
        out.clear();
        annotations.clear();
        if (!load(kStacks) || !load(kFrames) || !load(kLines) || !load(kFiles)) return false;
        if (!ref(static_cast<std::int64_t>(stack), tables[kStacks].rows, "stack")) return false;
        while (stack) {
            std::int64_t up = 0, fi = 0, li = 0, file = 0, name = 0, text = 0, fname = 0, line = 0, ann = 0;
            if (!cell(kStacks, 0, stack, up)) return false;
            if (static_cast<std::uint64_t>(up) >= stack) {
                return fail(ErrorClass::IntegrityError, "$.stacks.parent[" + std::to_string(stack) + "]",
                            "row " + std::to_string(stack) + " has parent " + std::to_string(up) +
                                ", which is not an earlier row (a cycle or a forward reference)",
                            "a parent below " + std::to_string(stack));
            }
            const std::string ss = std::to_string(stack);
            if (!cell(kStacks, 1, stack, fi) || !ref(fi, tables[kFrames].rows, "$.stacks.frame[" + ss + "]")) return false;
            const std::string fs = std::to_string(fi);
            if (!cell(kFrames, 0, static_cast<std::uint64_t>(fi), li) || !ref(li, tables[kLines].rows, "$.frames.line[" + fs + "]")) return false;
            const std::string ls = std::to_string(li);
            const std::uint64_t l = static_cast<std::uint64_t>(li);
            if (!cell(kLines, 0, l, file) || !ref(file, tables[kFiles].rows, "$.lines.file[" + ls + "]")) return false;
            if (!cell(kFiles, 0, static_cast<std::uint64_t>(file), fname) || !cell(kLines, 1, l, line) ||
                !cell(kLines, 2, l, name) || !cell(kLines, 3, l, text) || !cell(kFrames, 3, static_cast<std::uint64_t>(fi), ann)) {
                return false;
            }
            std::string_view a, b, c, d;
            if (!str_ref(fname, a, "$.files.name[" + std::to_string(file) + "]") || !str_ref(name, b, "$.lines.name[" + ls + "]") ||
                !str_ref(text, c, "$.lines.text[" + ls + "]") || !str_ref(ann, d, "$.frames.annotation[" + fs + "]")) {
                return false;
            }
            out.push_back(LazyFrame{std::string(a), line, std::string(b), std::string(c)});
            annotations.push_back(d);
            stack = static_cast<std::uint64_t>(up);
        }
        std::reverse(out.begin(), out.end());
        std::reverse(annotations.begin(), annotations.end());
        return true;
    }

    bool stack_trace(std::uint64_t stack, std::int64_t style, std::string& out, std::vector<LazyFrame>* keep = nullptr) {
        std::vector<LazyFrame> fr;
        std::vector<std::string_view> ann;
        if (!frames(stack, fr, ann)) return false;
        std::uint64_t size = 0;
        for (std::size_t i = 0; i < fr.size(); ++i) {
            size += code_points(fr[i].file) + code_points(fr[i].function) + code_points(fr[i].text) + code_points(ann[i]) + kFrameOverhead;
        }
        if (size > kMaxRendered) {
            return bad("$.stacks[" + std::to_string(stack) + "]",
                       "the stack trace would render to about " + rt::with_commas(size) + " characters (" +
                           rt::with_commas(fr.size()) + " frames)",
                       "at most " + rt::with_commas(kMaxRendered) + " (" + limit_hint("max_rendered") + ")");
        }
        std::string text;
        for (std::size_t i = 0; i < fr.size(); ++i) {
            text += "  File \"";
            text += fr[i].file;
            text += "\", line ";
            text += std::to_string(fr[i].line);
            text += ", in ";
            text += fr[i].function;
            text += '\n';
            if (!fr[i].text.empty()) {
                text += "    ";
                text += fr[i].text;
                text += '\n';
            }
            text += ann[i];
        }
        out = style == 1 ? std::string(py_strip(text)) : std::move(text);
        if (keep) *keep = std::move(fr);
        return true;
    }

    struct ModuleKey {
        std::string_view key, path, type, method;
    };
    bool modules(std::uint64_t module, std::vector<ModuleKey>& out) {
        out.clear();
        if (!load(kModules)) return false;
        if (!ref(static_cast<std::int64_t>(module), tables[kModules].rows, "module")) return false;
        while (module) {
            std::int64_t up = 0, k = 0, p = 0, t = 0, m = 0;
            const std::string ms = std::to_string(module);
            if (!cell(kModules, 0, module, up)) return false;
            if (static_cast<std::uint64_t>(up) >= module) {
                return fail(ErrorClass::IntegrityError, "$.modules.parent[" + ms + "]",
                            "row " + ms + " has parent " + std::to_string(up) +
                                ", which is not an earlier row (a cycle or a forward reference)",
                            "a parent below " + ms);
            }
            ModuleKey mk;
            if (!cell(kModules, 1, module, k) || !cell(kModules, 2, module, p) || !cell(kModules, 3, module, t) ||
                !cell(kModules, 4, module, m) || !str_ref(k, mk.key, "$.modules.key[" + ms + "]") ||
                !str_ref(p, mk.path, "$.modules.path[" + ms + "]") || !str_ref(t, mk.type, "$.modules.type[" + ms + "]") ||
                !str_ref(m, mk.method, "$.modules.method[" + ms + "]")) {
                return false;
            }
            out.push_back(mk);
            module = static_cast<std::uint64_t>(up);
        }
        std::reverse(out.begin(), out.end());
        return true;
    }
    bool check_module_size(std::uint64_t module, const std::vector<ModuleKey>& ms) {
        std::uint64_t size = 0;
        for (const auto& m : ms) size += code_points(m.key) + code_points(m.path) + code_points(m.type) + code_points(m.method) + 8;
        if (size > kMaxRendered) {
            return bad("$.modules[" + std::to_string(module) + "]",
                       "the module path would render to about " + rt::with_commas(size) + " characters",
                       "at most " + rt::with_commas(kMaxRendered) + " (" + limit_hint("max_rendered") + ")");
        }
        return true;
    }
    bool nn_module_stack(std::uint64_t module, std::string& out) {
        std::vector<ModuleKey> ms;
        if (!modules(module, ms) || !check_module_size(module, ms)) return false;
        out.clear();
        for (std::size_t i = 0; i < ms.size(); ++i) {
            if (i) out += ';';
            out.append(ms[i].key).append(",").append(ms[i].path).append(",").append(ms[i].type);
        }
        return true;
    }
    bool module_hierarchy(std::uint64_t module, std::string& out) {
        std::vector<ModuleKey> ms;
        if (!modules(module, ms) || !check_module_size(module, ms)) return false;
        out.clear();
        for (std::size_t i = 0; i < ms.size(); ++i) {
            if (i) out += '.';
            out.append(ms[i].key).append("(").append(ms[i].type).append(")");
            if (!ms[i].method.empty()) out.append("::").append(ms[i].method);
        }
        return true;
    }

    // The first metadata value >= 0 keyed `key` (§2.9.5), if any.
    bool literal(const NodeRow& r, std::uint64_t i, std::string_view key, bool& found, std::string& out) {
        found = false;
        const std::string where = "$.graph.nodes[" + std::to_string(i) + "]";
        for (std::size_t j = 0; j < r.keys.size(); ++j) {
            std::string_view k, v;
            if (!str_ref(r.keys[j], k, where + ".meta_keys[" + std::to_string(j) + "]")) return false;
            if (!ref(r.values[j], string_count, where + ".meta_values[" + std::to_string(j) + "]", -2)) return false;
            if (k == key && r.values[j] >= 0) {
                if (!str_ref(r.values[j], v, where + ".meta_values[" + std::to_string(j) + "]")) return false;
                found = true;
                out = std::string(v);
                return true;
            }
        }
        return true;
    }

    bool trace(std::uint64_t i, NodeTrace& t) {
        NodeRow r;
        if (!node(i, r, true)) return false;
        const std::string where = "$.graph.nodes[" + std::to_string(i) + "]";
        t = NodeTrace{};
        t.index = i;
        std::string_view name, target;
        if (!str_ref(static_cast<std::int64_t>(r.name), name, where + ".name") ||
            !str_ref(static_cast<std::int64_t>(r.target), target, where + ".target")) {
            return false;
        }
        t.name = name;
        t.target = target;
        if (!load(kStacks) || !ref(static_cast<std::int64_t>(r.stack), tables[kStacks].rows, where + ".stack")) return false;
        if (!load(kModules) || !ref(static_cast<std::int64_t>(r.module), tables[kModules].rows, where + ".module")) return false;
        bool has_minus1 = std::find(r.values.begin(), r.values.end(), -1) != r.values.end();
        bool has_minus2 = std::find(r.values.begin(), r.values.end(), -2) != r.values.end();
        if (r.stack) {
            if (!stack_trace(r.stack, r.style, t.stack_trace, &t.frames)) return false;
            t.has_stack_trace = true;
        } else {
            bool found = false;
            if (!literal(r, i, "stack_trace", found, t.stack_trace)) return false;
            t.has_stack_trace = found || has_minus1;
        }
        if (r.module) {
            if (!nn_module_stack(r.module, t.nn_module_stack)) return false;
            t.has_nn_module_stack = true;
        } else {
            bool found = false;
            if (!literal(r, i, "nn_module_stack", found, t.nn_module_stack)) return false;
            t.has_nn_module_stack = found || has_minus2;
        }
        return module_hierarchy(r.module, t.module_hierarchy);
    }

    bool find(std::string_view key, std::uint64_t& index) {
        if (key.size() > 1 && key[0] == '#' &&
            std::all_of(key.begin() + 1, key.end(), [](char c) { return c >= '0' && c <= '9'; })) {
            std::string_view digits = key.substr(1);
            while (digits.size() > 1 && digits[0] == '0') digits.remove_prefix(1);
            std::uint64_t v = 0;
            bool big = digits.size() > 19;
            for (char c : digits) {
                if (big) break;
                v = v * 10 + static_cast<std::uint64_t>(c - '0');
            }
            if (big || v >= node_count) {
                return fail(ErrorClass::NotFoundError, "node",
                            "node index " + std::string(digits) + " out of range (" + std::to_string(node_count) + " nodes)");
            }
            index = v;
            return true;
        }
        std::string_view nm;
        if (has_index) {
            // bisect_left over names sorted by bytes, the last node of a name first (§5.4)
            std::uint64_t lo = 0, hi = node_count;
            bool usable = true;
            while (lo < hi) {
                std::uint64_t mid = (lo + hi) / 2;
                std::uint64_t j = 0;
                if (!side_entry(mid, j)) return false;
                if (j >= node_count) {
                    usable = false;
                    break;
                }
                if (!node_name(j, nm)) return false;
                if (nm < key) lo = mid + 1;
                else hi = mid;
            }
            if (usable && lo < node_count) {
                std::uint64_t j = 0;
                if (!side_entry(lo, j)) return false;
                if (j < node_count) {
                    if (!node_name(j, nm)) return false;
                    if (nm == key) {
                        index = j;
                        return true;
                    }
                }
            }
        }
        // No index, or one that does not lead there: every name read (and checked), as the reference's
        // name table does; the last node of the name wins.
        bool hit = false;
        for (std::uint64_t j = 0; j < node_count; ++j) {
            if (!node_name(j, nm)) return false;
            if (nm == key) {
                index = j;
                hit = true;
            }
        }
        if (hit) return true;
        return fail(ErrorClass::NotFoundError, "node", "no node named " + rt::py_repr(key));
    }
    bool side_entry(std::uint64_t k, std::uint64_t& j) {
        std::size_t p = index_first + 4 * static_cast<std::size_t>(k);
        if (!need(p, p + 4)) return false;
        j = le<std::uint32_t>(at(p));
        return true;
    }

    bool debug_handle(std::int64_t handle, HandleInfo& out) {
        if (!load(kHandles)) return false;
        const std::uint64_t rows = tables[kHandles].rows;
        std::uint64_t lo = 0, hi = rows;
        std::int64_t v = 0;
        while (lo < hi) {
            std::uint64_t mid = (lo + hi) / 2;
            if (!cell(kHandles, 0, mid, v)) return false;
            if (v < handle) lo = mid + 1;
            else hi = mid;
        }
        if (lo < rows && !cell(kHandles, 0, lo, v)) return false;
        if (lo >= rows || v != handle) {
            return fail(ErrorClass::NotFoundError, "debug_handle", "no debug handle " + std::to_string(handle));
        }
        const std::string rs = std::to_string(lo);
        std::int64_t stack = 0, module = 0, op = 0, range = 0;
        if (!cell(kHandles, 1, lo, stack) || !cell(kHandles, 2, lo, module) || !cell(kHandles, 3, lo, op) ||
            !cell(kHandles, 4, lo, range)) {
            return false;
        }
        std::string_view ops;
        if (!str_ref(op, ops, "$.debug_handles.op[" + rs + "]")) return false;
        out = HandleInfo{};
        out.op = ops;
        if (!load(kStacks) || !ref(stack, tables[kStacks].rows, "$.debug_handles.stack[" + rs + "]")) return false;
        if (!load(kModules) || !ref(module, tables[kModules].rows, "$.debug_handles.module[" + rs + "]")) return false;
        if (!stack_trace(static_cast<std::uint64_t>(stack), 1, out.stack_trace)) return false;
        if (!module_hierarchy(static_cast<std::uint64_t>(module), out.module_hierarchy)) return false;
        if (range != 0) {
            if (!load(kRanges) || !ref(range, tables[kRanges].rows, "$.debug_handles.range[" + rs + "]")) return false;
            const std::uint64_t rr = static_cast<std::uint64_t>(range);
            std::int64_t src = 0, file = 0;
            if (!cell(kRanges, 0, rr, src) || !cell(kRanges, 1, rr, out.start) || !cell(kRanges, 2, rr, out.end)) return false;
            if (!load(kSources) || !ref(src, tables[kSources].rows, "$.ranges.source[" + std::to_string(rr) + "]")) return false;
            if (!cell(kSources, 0, static_cast<std::uint64_t>(src), file)) return false;
            std::string_view f;
            if (file != -1 && !str_ref(file, f, "$.sources.file[" + std::to_string(src) + "]")) return false;
            out.file = f;
            out.has_range = true;
        }
        return true;
    }
};

LazyDocument::LazyDocument() : impl_(new Impl) {}
LazyDocument::~LazyDocument() = default;

bool LazyDocument::open(const std::string& path, Error& error, bool checksum) {
    impl_.reset(new Impl);
    if (impl_->open(path, checksum)) return true;
    error = impl_->e;
    return false;
}

void LazyDocument::adopt(current::Document&& doc) {
    impl_.reset(new Impl);
    impl_->decoded.reset(new current::Document(std::move(doc)));
    impl_->string_count = impl_->decoded->strings.size();
    impl_->node_count = impl_->decoded->graph.nodes.size();
}

bool LazyDocument::is_lazy(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st {};
    char head[kHeaderSize];
    bool yes = false;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::pread(fd, head, kHeaderSize, 0) == static_cast<ssize_t>(kHeaderSize)) {
        Header h;
        Error e;
        yes = read_header(std::string_view(head, kHeaderSize), h, e, 1) && (h.codec == 2 || h.codec == 4) && h.compression == 0;
    }
    ::close(fd);
    return yes;
}

std::uint64_t LazyDocument::node_count() const noexcept { return impl_->node_count; }
std::uint64_t LazyDocument::blocks_read() const noexcept { return impl_->reads; }

bool LazyDocument::find(std::string_view key, std::uint64_t& index, Error& error) {
    if (impl_->find(key, index)) return true;
    error = impl_->e;
    return false;
}

bool LazyDocument::trace(std::uint64_t index, NodeTrace& out, Error& error) {
    if (index >= impl_->node_count) {
        error = Error{ErrorClass::NotFoundError, "node",
                      "node index " + std::to_string(index) + " out of range (" + std::to_string(impl_->node_count) + " nodes)",
                      {}, false};
        return false;
    }
    if (impl_->trace(index, out)) return true;
    error = impl_->e;
    return false;
}

bool LazyDocument::debug_handle(std::int64_t handle, HandleInfo& out, Error& error) {
    if (impl_->debug_handle(handle, out)) return true;
    error = impl_->e;
    return false;
}

std::string render_trace_text(const std::vector<NodeTrace>& nodes) {
    std::string out;
    for (const auto& t : nodes) {
        out += "node " + t.name + " (" + t.target + ")\nstack trace:\n";
        out += t.has_stack_trace ? t.stack_trace : std::string("  (none)");
        out += "\nmodule hierarchy:\n  nn_module_stack: ";
        out += t.has_nn_module_stack ? t.nn_module_stack : std::string("(none)");
        out += "\n  ";
        out += t.module_hierarchy.empty() ? std::string("(none)") : t.module_hierarchy;
        out += '\n';
    }
    return out;
}

std::string render_trace_json(const std::vector<NodeTrace>& nodes) {
    std::string out;
    JsonWriter w(out);
    if (nodes.size() != 1) w.begin_array();
    for (const auto& t : nodes) {
        w.begin_object();
        w.key("index");
        w.uinteger(t.index);
        w.key("name");
        w.string(t.name);
        w.key("target");
        w.string(t.target);
        w.key("stack_trace");
        if (t.has_stack_trace) w.string(t.stack_trace);
        else w.null();
        w.key("frames");
        w.begin_array();
        for (const auto& f : t.frames) {
            w.begin_object();
            w.key("file");
            w.string(f.file);
            w.key("line");
            w.integer(f.line);
            w.key("function");
            w.string(f.function);
            w.key("text");
            w.string(f.text);
            w.end_object();
        }
        w.end_array();
        w.key("nn_module_stack");
        if (t.has_nn_module_stack) w.string(t.nn_module_stack);
        else w.null();
        w.key("module_hierarchy");
        if (t.module_hierarchy.empty()) w.null();
        else w.string(t.module_hierarchy);
        w.end_object();
    }
    if (nodes.size() != 1) w.end_array();
    out += '\n';
    return out;
}

}  // namespace tracepack
