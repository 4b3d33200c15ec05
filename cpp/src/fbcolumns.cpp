// tracepack C++ runtime: the FlatBuffers column layout, codec 4 (spec §7).
#include "tracepack/fbcolumns.hpp"

#include <algorithm>

#include "tracepack/flatbuffers.hpp"
#include "tracepack/utf8.hpp"

namespace tracepack::fbcol {

namespace {

const char* const kKindNames[kKindCount] = {"bool",   "int8",   "uint8",  "int16",   "uint16", "int32",
                                            "uint32", "int64",  "uint64", "float64", "text",   "blob"};
const std::size_t kWidths[kKindCount] = {1, 1, 1, 2, 2, 4, 4, 8, 8, 8, 1, 1};

// The root table (§7.1): layout, the directory, a vector per kind, text_index.
constexpr unsigned kSlots = 17;
constexpr unsigned kFirstKindSlot = 4;
constexpr unsigned kTextIndexSlot = kFirstKindSlot + kKindCount;
const std::uint8_t kSlotSizes[kSlots] = {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4};
const char* const kSlotNames[kSlots] = {"layout", "paths",  "kinds",  "counts",  "bool", "int8",
                                        "uint8",  "int16",  "uint16", "int32",   "uint32", "int64",
                                        "uint64", "float64", "text",  "blob",    "text_index"};
const fb::TableSpec kColumnsSpec{"Columns", kSlots, kSlotSizes, kSlotNames};

std::string num(std::uint64_t v) { return std::to_string(v); }

// Call `f(row, value)` for every value of an integer column (kinds 1-8), widened to 128 bits; stops at the
// first `false`. One loop per kind, so the element loads are inlined.
template <typename T, typename F>
bool each_of(const Directory& d, const Column& c, F& f) {
    const Vector& v = d.vector(c.kind);
    for (std::uint32_t i = 0; i < c.count; ++i) {
        if (!f(i, static_cast<col::i128>(d.load<T>(v, c.start + i)))) return false;
    }
    return true;
}

template <typename F>
bool each_integer(const Directory& d, const Column& c, F&& f) {
    switch (c.kind) {
        case kInt8: return each_of<std::int8_t>(d, c, f);
        case kUInt8: return each_of<std::uint8_t>(d, c, f);
        case kInt16: return each_of<std::int16_t>(d, c, f);
        case kUInt16: return each_of<std::uint16_t>(d, c, f);
        case kInt32: return each_of<std::int32_t>(d, c, f);
        case kUInt32: return each_of<std::uint32_t>(d, c, f);
        case kInt64: return each_of<std::int64_t>(d, c, f);
        case kUInt64: return each_of<std::uint64_t>(d, c, f);
        default: return false;
    }
}

// The lowest and highest value of an integer kind: a column whose kind lies inside a field's range needs no
// per-value check.
void kind_range(unsigned kind, col::i128& lo, col::i128& hi) {
    switch (kind) {
        case kInt8: lo = INT8_MIN, hi = INT8_MAX; return;
        case kUInt8: lo = 0, hi = UINT8_MAX; return;
        case kInt16: lo = INT16_MIN, hi = INT16_MAX; return;
        case kUInt16: lo = 0, hi = UINT16_MAX; return;
        case kInt32: lo = INT32_MIN, hi = INT32_MAX; return;
        case kUInt32: lo = 0, hi = UINT32_MAX; return;
        case kInt64: lo = INT64_MIN, hi = INT64_MAX; return;
        default: lo = 0, hi = UINT64_MAX; return;
    }
}

}  // namespace

const char* kind_name(unsigned kind) noexcept { return kind < kKindCount ? kKindNames[kind] : "?"; }

std::size_t kind_width(unsigned kind) noexcept { return kind < kKindCount ? kWidths[kind] : 0; }

col::i128 Directory::integer(unsigned kind, std::uint64_t i) const noexcept {
    const Vector& v = vectors_[kind];
    switch (kind) {
        case kInt8: return load<std::int8_t>(v, i);
        case kUInt8: return load<std::uint8_t>(v, i);
        case kInt16: return load<std::int16_t>(v, i);
        case kUInt16: return load<std::uint16_t>(v, i);
        case kInt32: return load<std::int32_t>(v, i);
        case kUInt32: return load<std::uint32_t>(v, i);
        case kInt64: return load<std::int64_t>(v, i);
        case kUInt64: return load<std::uint64_t>(v, i);
        default: return 0;
    }
}

// --- opening: the root table and the directory (§7.1, §7.2, §7.4 "on opening") ----------------------------

bool Directory::fail(rt::Failure& f, std::string where, std::string problem) {
    return f.fail_at(ErrorClass::DecodeError, std::move(where), std::move(problem));
}

bool Directory::fail(rt::Failure& f, std::string where, std::string problem, std::string expected) {
    return f.fail_at(ErrorClass::DecodeError, std::move(where), std::move(problem), std::move(expected));
}

// The vector an offset slot points to (`pos` 0: absent, empty); a failure at `Columns.NAME`. With `read`
// (the directory's vectors), its bytes are handed to the hook before they are used; every vector's length
// word is, always.
bool Directory::slot_vector(rt::Failure& f, std::size_t pos, std::size_t elem, const char* name, bool read, Need need,
                            Vector& out) {
    out = Vector{};
    if (pos == 0) return true;
    rt::Failure inner;
    fb::Reader r(d_, n_, inner);
    if (need && pos < n_ && !need(pos, std::min(n_, pos + 4), f)) return false;
    std::size_t first = 0;
    std::uint32_t count = 0;
    if (!r.vector(pos, elem, first, count)) return fail(f, std::string("Columns.") + name, inner.error.problem);
    // The element budget (§5.1) spans every vector of the buffer, as one reader's would.
    budget_ -= count;
    if (budget_ < 0) {
        return fail(f, std::string("Columns.") + name,
                    "the buffer decodes to more elements than its size allows (shared objects?)");
    }
    if (read && need && !need(first, first + static_cast<std::size_t>(count) * elem, f)) return false;
    out.first = first;
    out.count = count;
    return true;
}

bool Directory::open(const std::uint8_t* data, std::size_t size, rt::Failure& failure, Need need) {
    d_ = data;
    n_ = size;
    columns_.clear();
    by_path_.clear();
    budget_ = 2 * static_cast<std::int64_t>(size) + 1024;
    rt::Failure inner;
    fb::Reader r(data, size, inner);
    std::size_t root = 0;
    fb::Table t;
    if (need && !need(0, std::min<std::size_t>(size, 8), failure)) return false;
    if (!r.root("TPKC", root)) return fail(failure, "Columns", inner.error.problem);
    if (need && root < size) {
        // the table's vtable offset, then the vtable and the table (their bounds are checked below)
        if (!need(root, std::min(size, root + 4), failure)) return false;
    }
    if (!r.table(root, kColumnsSpec, t)) return fail(failure, "Columns", inner.error.problem);
    if (need) {
        std::uint16_t tsize;
        std::memcpy(&tsize, t.vt + 2, 2);
        const std::size_t vt = static_cast<std::size_t>(t.vt - data);
        if (!need(vt, vt + t.vsize, failure) || !need(root, root + tsize, failure)) return false;
    }
    const std::uint32_t layout = r.scalar<std::uint32_t>(t, 0, 0);
    if (layout != kLayout) {
        return fail(failure, "Columns.layout", "column layout " + num(layout) + " is not readable by this build",
                    num(kLayout));
    }
    for (unsigned kind = 0; kind < kKindCount; ++kind) {
        if (!slot_vector(failure, r.object(t, kFirstKindSlot + kind), kWidths[kind], kKindNames[kind], false, need,
                         vectors_[kind])) {
            return false;
        }
    }
    if (!slot_vector(failure, r.object(t, kTextIndexSlot), 4, "text_index", false, need, text_index_)) return false;
    Vector paths, kinds, counts;
    if (!slot_vector(failure, r.object(t, 1), 1, "paths", true, need, paths)) return false;
    if (!slot_vector(failure, r.object(t, 2), 1, "kinds", true, need, kinds)) return false;
    if (!slot_vector(failure, r.object(t, 3), 4, "counts", true, need, counts)) return false;

    const std::string_view all(reinterpret_cast<const char*>(d_ + paths.first), paths.count);
    utf8::Problem bad = utf8::check(all);
    if (bad.reason != nullptr) return fail(failure, "Columns.paths", std::string("not valid UTF-8 (") + bad.reason + ")");
    if (!all.empty() && all.back() != '\0') {
        return fail(failure, "Columns.paths", "the last path has no NUL after it", "NUL-terminated paths");
    }
    std::vector<std::string_view> names;
    for (std::size_t at = 0; at < all.size();) {
        std::size_t nul = all.find('\0', at);
        names.push_back(all.substr(at, nul - at));
        at = nul + 1;
    }
    if (names.size() != kinds.count || names.size() != counts.count) {
        return fail(failure, "Columns.kinds",
                    num(names.size()) + " paths, " + num(kinds.count) + " kinds, " + num(counts.count) + " counts",
                    "one kind and one count per path");
    }
    for (std::size_t i = 0; i < names.size(); ++i) {
        unsigned kind = d_[kinds.first + i];
        if (kind >= kKindCount) {
            return fail(failure, "Columns.kinds (" + std::string(names[i]) + ")", "unknown kind " + num(kind),
                        "0.." + num(kKindCount - 1));
        }
    }
    std::uint64_t used[kKindCount] = {};
    columns_.reserve(names.size());
    by_path_.reserve(names.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
        Column c;
        c.path = names[i];
        c.kind = d_[kinds.first + i];
        std::memcpy(&c.count, d_ + counts.first + 4 * i, 4);
        const unsigned counted = c.kind == kBlob ? static_cast<unsigned>(kUInt32) : static_cast<unsigned>(c.kind);  // a blob's lengths are uint32 values
        c.start = used[counted];
        used[counted] += c.count;
        if (!by_path_.emplace(c.path, columns_.size()).second) {
            return fail(failure, "Columns.paths (" + std::string(c.path) + ")", "the path occurs twice", "each path once");
        }
        columns_.push_back(c);
    }
    for (unsigned kind = 0; kind < kText; ++kind) {
        if (used[kind] != vectors_[kind].count) {
            return fail(failure, std::string("Columns.") + kKindNames[kind],
                        "the directory's columns hold " + num(used[kind]) + " values, the vector has " +
                            num(vectors_[kind].count),
                        "one value per column row");
        }
    }
    text_count_ = used[kText];
    return true;
}

// --- the eager decoder's columns (§7.3, §7.4) --------------------------------------------------------------

bool Columns::column(const std::string& path, col::u128 n, const Column*& c, bool& found) {
    c = d_.find(path);
    found = c != nullptr;
    if (c == nullptr) return true;
    if (c->count != n) {
        return fail(path, "the column has " + num(c->count) + " values", col::to_string(n) + ", one per row");
    }
    return true;
}

bool Columns::fail_kind(const std::string& path, const Column& c, std::string expected) {
    return fail(path, std::string("a ") + kKindNames[c.kind] + " column", std::move(expected));
}

// An integer column (kinds 1-8) whose values lie in [lo, hi]: "row R holds V" for the first that does not.
template <typename Out>
bool Columns::integers(const std::string& path, const Column& c, col::i128 lo, col::i128 hi, const char* what,
                       std::vector<Out>& out) {
    if (!is_integer(c.kind)) return fail_kind(path, c, std::string("integers (") + what + ")");
    out.resize(c.count);
    col::i128 klo = 0, khi = 0;
    kind_range(c.kind, klo, khi);
    if (lo <= klo && khi <= hi) {  // every value of the kind fits the field
        each_integer(d_, c, [&](std::uint32_t i, col::i128 v) {
            out[i] = static_cast<Out>(v);
            return true;
        });
        return true;
    }
    std::uint32_t row = 0;
    col::i128 bad = 0;
    if (each_integer(d_, c, [&](std::uint32_t i, col::i128 v) {
            if (v < lo || v > hi) {
                row = i;
                bad = v;
                return false;
            }
            out[i] = static_cast<Out>(v);
            return true;
        })) {
        return true;
    }
    return fail(path, "row " + num(row) + " holds " + col::to_string(bad), what);
}

bool Columns::ints(const std::string& path, col::u128 n, std::int64_t lo, std::int64_t hi, bool, const char* what,
                   std::vector<std::int64_t>& out, bool& found) {
    out.clear();
    found = true;
    if (n == 0) return true;  // no rows: nothing is read (spec §6.5, §7.3)
    const Column* c = nullptr;
    if (!column(path, n, c, found)) return false;
    if (c == nullptr) return true;
    return integers(path, *c, lo, hi, what, out);
}

bool Columns::uints(const std::string& path, col::u128 n, std::uint64_t hi, bool, const char* what,
                    std::vector<std::uint64_t>& out, bool& found) {
    out.clear();
    found = true;
    if (n == 0) return true;
    const Column* c = nullptr;
    if (!column(path, n, c, found)) return false;
    if (c == nullptr) return true;
    return integers(path, *c, 0, static_cast<col::i128>(hi), what, out);
}

bool Columns::lengths(const std::string& path, col::u128 n, std::vector<std::uint64_t>& out, bool& found) {
    out.clear();
    found = true;
    if (n == 0) return true;
    const Column* c = nullptr;
    if (!column(path, n, c, found)) return false;
    if (c == nullptr) return true;
    return integers(path, *c, 0, static_cast<col::i128>(UINT64_MAX), "lengths (integers >= 0)", out);
}

bool Columns::enums(const std::string& path, col::u128 n, const std::vector<std::int64_t>& allowed, const char* what,
                    std::vector<std::int64_t>& out, bool& found) {
    return tags(path, n, allowed, false, what, out, found);
}

bool Columns::tags(const std::string& path, col::u128 n, const std::vector<std::int64_t>& allowed, bool nullable,
                   const char* what, std::vector<std::int64_t>& out, bool& found) {
    out.clear();
    found = true;
    if (n == 0) return true;
    const Column* c = nullptr;
    if (!column(path, n, c, found)) return false;
    if (c == nullptr) return true;
    if (!is_integer(c->kind)) return fail_kind(path, *c, std::string("integers (") + what + ")");
    out.resize(c->count);
    // Small known sets (enum members, variant ids): a table of the values 0..255 answers most lookups.
    bool small[256] = {};
    for (auto a : allowed) {
        if (a >= 0 && a < 256) small[a] = true;
    }
    std::uint32_t row = 0;
    col::i128 bad = 0;
    if (each_integer(d_, *c, [&](std::uint32_t i, col::i128 v) {
            if (v == 0 && nullable) {  // 0 is none in a `#tag` column (§7.3)
                out[i] = -1;
                return true;
            }
            bool known = v >= 0 && v < 256 ? small[static_cast<int>(v)]
                                           : std::find(allowed.begin(), allowed.end(), v) != allowed.end();
            if (!known) {
                row = i;
                bad = v;
                return false;
            }
            out[i] = static_cast<std::int64_t>(v);
            return true;
        })) {
        return true;
    }
    return fail(path, "row " + num(row) + ": Invalid enum value " + col::to_string(bad), what);
}

bool Columns::floats(const std::string& path, col::u128 n, std::vector<double>& out, bool& found) {
    out.clear();
    found = true;
    if (n == 0) return true;
    const Column* c = nullptr;
    if (!column(path, n, c, found)) return false;
    if (c == nullptr) return true;
    if (c->kind != kFloat64) return fail_kind(path, *c, "float64");
    out.resize(c->count);
    const Vector& v = d_.vector(kFloat64);
    if (c->count) std::memcpy(out.data(), d_.data() + v.first + 8 * c->start, 8 * static_cast<std::size_t>(c->count));
    return true;
}

bool Columns::bools(const std::string& path, col::u128 n, std::vector<bool>& out, bool& found) {
    out.clear();
    found = true;
    if (n == 0) return true;
    const Column* c = nullptr;
    if (!column(path, n, c, found)) return false;
    if (c == nullptr) return true;
    if (c->kind != kBool) return fail_kind(path, *c, "bool");
    out.resize(c->count);
    const std::uint8_t* p = d_.data() + d_.vector(kBool).first + c->start;
    for (std::uint32_t i = 0; i < c->count; ++i) {
        if (p[i] > 1) return fail(path, "row " + num(i) + " holds " + num(p[i]), "booleans (0 or 1)");
        out[i] = p[i] != 0;
    }
    return true;
}

// Every text value (§7.2), checked as §7.4 says when a text value is first needed: UTF-8, a NUL after the
// last, as many as the directory's text columns count, and a non-empty `text_index` exactly right.
bool Columns::texts() {
    if (have_texts_) return true;
    const std::string_view text = d_.text();
    utf8::Problem bad = utf8::check(text);
    if (bad.reason != nullptr) return fail("Columns.text", std::string("not valid UTF-8 (") + bad.reason + ")");
    if (!text.empty() && text.back() != '\0') {
        return fail("Columns.text", "the last value has no NUL after it", "NUL-terminated values");
    }
    texts_.clear();
    texts_.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(d_.text_count(), text.size())));
    for (std::size_t at = 0; at < text.size();) {
        const void* nul = std::memchr(text.data() + at, 0, text.size() - at);
        std::size_t end = static_cast<std::size_t>(static_cast<const char*>(nul) - text.data());
        texts_.push_back(text.substr(at, end - at));
        at = end + 1;
    }
    if (texts_.size() != d_.text_count()) {
        return fail("Columns.text", num(texts_.size()) + " values for the directory's " + num(d_.text_count()),
                    "one value per text column row");
    }
    const Vector& index = d_.text_index();
    if (index.count != 0) {  // what lazy readers jump with must be right: checked against the text itself
        const std::uint64_t want = (texts_.size() + kTextStep - 1) / kTextStep;
        const std::uint64_t common = std::min<std::uint64_t>(want, index.count);
        std::uint64_t j = 0;
        for (; j < common; ++j) {
            const std::uint64_t start =
                static_cast<std::uint64_t>(texts_[static_cast<std::size_t>(j * kTextStep)].data() - text.data());
            if (d_.load<std::uint32_t>(index, j) != start) break;
        }
        if (j < common || index.count != want) {
            if (j == common) j = want;
            return fail("Columns.text_index",
                        "entry " + num(j) + " of " + num(index.count) + " is not where text value " +
                            num(kTextStep * j) + " starts",
                        num(want) + " entries, the start of every " + num(kTextStep) + "th value");
        }
    }
    have_texts_ = true;
    return true;
}

// Every blob column's value ends (§7.2, §7.4): the lengths fit in `blob` and add up to exactly its length.
bool Columns::blobs() {
    if (have_blobs_) return true;
    const std::uint64_t size = d_.vector(kBlob).count;
    const Vector& lengths = d_.vector(kUInt32);
    std::uint64_t at = 0;
    for (const Column& c : d_.columns()) {
        if (c.kind != kBlob) continue;
        std::vector<std::uint64_t>& ends = blob_ends_[&c];
        ends.resize(static_cast<std::size_t>(c.count) + 1);
        ends[0] = at;
        for (std::uint32_t i = 0; i < c.count; ++i) {
            at += d_.load<std::uint32_t>(lengths, c.start + i);
            ends[i + 1] = at;
        }
        if (at > size) {
            return fail(std::string(c.path), "the values need " + num(at) + " blob bytes, there are " + num(size));
        }
    }
    if (at != size) return fail("Columns.blob", "the columns hold " + num(at) + " bytes, the vector " + num(size), num(at));
    have_blobs_ = true;
    return true;
}

bool Columns::strings(const std::string& path, col::u128 n, std::vector<std::string>& out, bool& found) {
    out.clear();
    found = true;
    if (n == 0) return true;
    const Column* c = nullptr;
    if (!column(path, n, c, found)) return false;
    if (c == nullptr) return true;
    if (c->kind == kText) {
        if (!texts()) return false;
        out.reserve(c->count);
        for (std::uint32_t i = 0; i < c->count; ++i) out.emplace_back(texts_[static_cast<std::size_t>(c->start + i)]);
        return true;
    }
    if (c->kind != kBlob) return fail_kind(path, *c, "text or blob");
    if (!blobs()) return false;
    const std::vector<std::uint64_t>& ends = blob_ends_[c];
    const char* blob = reinterpret_cast<const char*>(d_.data() + d_.vector(kBlob).first);
    out.reserve(c->count);
    for (std::uint32_t i = 0; i < c->count; ++i) {
        std::string_view s(blob + ends[i], static_cast<std::size_t>(ends[i + 1] - ends[i]));
        utf8::Problem bad = utf8::check(s);
        if (bad.reason != nullptr) return fail(path, std::string("a string is not valid UTF-8 (") + bad.reason + ")");
        out.emplace_back(s);
    }
    return true;
}

}  // namespace tracepack::fbcol
