// tracepack C++ runtime: reading the columnar codec's payload (spec §6).
#include "tracepack/columnar.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <initializer_list>
#include <utility>

#include "tracepack/msgpack.hpp"
#include "tracepack/utf8.hpp"

namespace tracepack::col {

std::string to_string(u128 v) {
    if (v == 0) return "0";
    std::string s;
    while (v) {
        s += static_cast<char>('0' + static_cast<int>(v % 10));
        v /= 10;
    }
    return std::string(s.rbegin(), s.rend());
}

std::string to_string(i128 v) {
    if (v < 0) return "-" + to_string(static_cast<u128>(-(v + 1)) + 1);
    return to_string(static_cast<u128>(v));
}

namespace {

constexpr const char* kNotPayload = "not a columnar payload: ";
constexpr const char* kNotValidMp = "not valid MessagePack: ";
constexpr std::uint64_t kFormNumberLimit = 1000000000000000000ULL;  // 10**18 (spec §6.4.3)
constexpr std::size_t kFormAffixMax = 256;
constexpr const char* kFormsWhat = "[literals, row steps, prefixes, suffixes, number residuals]";

std::size_t code_points(std::string_view s) {
    std::size_t n = 0;
    for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
}

// A key of the columns map: an integer (layout 2's path number) or a string (a path).
struct Key {
    bool number;
    std::uint64_t value;
    std::string text;
    bool operator<(const Key& o) const {
        if (number != o.number) return number;
        return number ? value < o.value : text < o.text;
    }
};

}  // namespace

bool Source::fail(const std::string& path, std::string problem) {
    return f_.fail_at(ErrorClass::DecodeError, path, std::move(problem));
}

bool Source::fail(const std::string& path, std::string problem, std::string expected) {
    return f_.fail_at(ErrorClass::DecodeError, path, std::move(problem), std::move(expected));
}

// --- the payload map (§6.1) ------------------------------------------------------------------------

bool Reader::parse(std::string_view payload, const char* const* numbers, std::size_t count, const Limits& limits) {
    rt::Failure inner;
    mp::Reader r(reinterpret_cast<const std::uint8_t*>(payload.data()), payload.size(), inner, limits.max_depth);
    // A failure of the payload's decode, as the reference reader words it (msgspec's message and place).
    auto payload_error = [&](const char* at) {
        Error e = inner.error;
        if (inner.fixed) {
            if (e.problem.rfind(kNotValidMp, 0) == 0) {
                e.problem = kNotPayload + e.problem.substr(std::string(kNotValidMp).size());
            }
            f_.fail_at(e.cls, e.where, e.problem);
            if (e.has_expected) f_.error = e;
            return false;
        }
        std::string text = kNotPayload + e.problem;
        if (*at) text += std::string(" - at ") + at;
        return fail("payload", text);
    };
    std::uint32_t entries = 0;
    if (!r.map(entries)) return payload_error("");
    std::string format;
    bool have_format = false, have_layout = false, have_columns = false;
    bool layout_neg = false;
    std::uint64_t layout = 0;
    std::set<std::string> top_keys;
    bool top_repeat = false;
    std::vector<std::pair<Key, Entry>> columns;  // in the map's order
    std::map<Key, std::size_t> where;
    bool columns_repeat = false;
    for (std::uint32_t i = 0; i < entries; ++i) {
        std::string_view key;
        if (!r.key(key)) return payload_error("`key` in `$`");
        if (!top_keys.insert(std::string(key)).second) top_repeat = true;
        if (key == "format") {
            std::string_view v;
            if (!r.str_view(v)) return payload_error("`$.format`");
            format.assign(v.data(), v.size());
            have_format = true;
        } else if (key == "layout") {
            if (!r.enum_int(layout_neg, layout)) return payload_error("`$.layout`");
            have_layout = true;
        } else if (key == "columns") {
            std::uint32_t n = 0;
            if (!r.map(n)) return payload_error("`$.columns`");
            columns.clear();
            where.clear();
            columns_repeat = false;
            for (std::uint32_t j = 0; j < n; ++j) {
                Key k{false, 0, {}};
                const char* kt = r.next_type();
                if (kt != nullptr && std::string_view(kt) == "str") {
                    std::string_view kv;
                    if (!r.str_view(kv)) return payload_error("");
                    k.text.assign(kv.data(), kv.size());
                } else if (kt != nullptr && std::string_view(kt) == "int") {
                    bool neg = false;
                    if (!r.enum_int(neg, k.value)) return payload_error("`key` in `$.columns`");
                    if (neg) {
                        inner.fail(ErrorClass::DecodeError, "Expected `int` >= 0");
                        return payload_error("`key` in `$.columns`");
                    }
                    k.number = true;
                } else {
                    r.mismatch("int | str");
                    return payload_error("`key` in `$.columns`");
                }
                std::uint32_t len = 0;
                if (!r.array(len)) return payload_error("`$.columns[...]`");
                if (len != 2) {
                    inner.fail(ErrorClass::DecodeError, "Expected `array` of length 2, got " + std::to_string(len));
                    return payload_error("`$.columns[...]`");
                }
                std::string_view encoding;
                if (!r.str_view(encoding)) return payload_error("`$.columns[...][0]`");
                const std::size_t start = r.offset();
                if (!r.skip(3)) return payload_error("");  // the values: in an entry, in the columns, in the payload
                Entry e{std::string(encoding), reinterpret_cast<const std::uint8_t*>(payload.data()) + start,
                        r.offset() - start};
                auto found = where.find(k);
                if (found != where.end()) {
                    columns_repeat = true;
                    columns[found->second].second = std::move(e);  // the last of equal keys, at the first's place
                } else {
                    where.emplace(k, columns.size());
                    columns.emplace_back(std::move(k), std::move(e));
                }
            }
            have_columns = true;
        } else if (!r.skip(1)) {
            return payload_error("");
        }
    }
    for (const char* field : {"format", "layout", "columns"}) {
        bool have = field[0] == 'f' ? have_format : field[0] == 'l' ? have_layout : have_columns;
        if (!have) {
            inner.fail(ErrorClass::DecodeError, std::string("Object missing required field `") + field + "`");
            return payload_error("");
        }
    }
    if (!r.finish()) return payload_error("");  // after the value is complete, as the reference checks
    // No map holds a key twice (spec §6.1).
    if (top_repeat) return fail("payload", "the payload map has a key twice", "each key once");
    if (columns_repeat) return fail("payload.columns", "the columns map has a key twice", "each column once");
    if (format != "tracepack-columnar") {
        return fail("payload.format", "the format marker is " + rt::py_repr(format), "'tracepack-columnar'");
    }
    if (layout_neg || layout < 1 || layout > 3) {
        std::string v = layout_neg ? std::to_string(static_cast<std::int64_t>(layout)) : std::to_string(layout);
        return fail("payload.layout", "columnar layout " + v + " is not readable by this build", "1 or 2 or 3");
    }
    layout_ = layout;
    // Paths (§6.3): every key a string, or layout 2's numbers resolved (an unknown number: a newer release's).
    bool all_strings = true;
    for (const auto& kv : columns) all_strings &= !kv.first.number;
    columns_.clear();
    for (auto& kv : columns) {
        std::string path;
        if (!kv.first.number) {
            path = kv.first.text;
        } else if (layout == 1) {
            return fail("payload.columns", "column key " + std::to_string(kv.first.value) + " is not a path",
                        "paths (layout 1)");
        } else if (kv.first.value < count) {
            path = numbers[kv.first.value];
        } else {
            continue;
        }
        if (!columns_.emplace(path, std::move(kv.second)).second && !all_strings) {
            return fail("payload.columns", "column " + path + " is stored twice (by name and by number)",
                        "one column per path");
        }
    }
    return true;
}

const Entry* Reader::find(const std::string& path) const {
    auto it = columns_.find(path);
    return it == columns_.end() ? nullptr : &it->second;
}

bool Source::rows(const std::string& path, u128 n) {
    if (n <= limit_) return true;
    return fail(path, to_string(n) + " rows without a stored column",
                "at most " + std::to_string(limit_) + " (one per byte of the payload)");
}

bool Source::missing(const std::string& column, u128 n, bool no_default) {
    return fail(column, "the column is missing",
                to_string(n) + " values" + (no_default ? " (the field has no default)" : ""));
}

// --- leaf columns (§6.4) -----------------------------------------------------------------------------

namespace {

// Decode a column's values as a list, element by element; failures named as the reference reader names
// them ("row 3: Expected `int`, got `str`", "not a list of values: ...").
template <typename F>
bool each_value(const Entry& e, std::uint64_t& count, rt::Failure& out, const std::string& path, const char* what,
                F&& item) {
    rt::Failure inner;
    mp::Reader r(e.values, e.size, inner, UINT64_MAX);
    std::uint32_t n = 0;
    if (!r.array(n)) {
        out.fail_at(ErrorClass::DecodeError, path, "not a list of values: " + inner.error.problem, what);
        return false;
    }
    count = n;
    for (std::uint32_t i = 0; i < n; ++i) {
        if (!item(r, i)) {
            if (inner.fixed) {  // a string that is not UTF-8: the column's
                std::string problem = inner.error.problem;
                return out.fail_at(ErrorClass::DecodeError, path, problem);
            }
            out.fail_at(ErrorClass::DecodeError, path, "row " + std::to_string(i) + ": " + inner.error.problem, what);
            return false;
        }
    }
    return true;
}

bool check_count(rt::Failure& f, const std::string& path, std::uint64_t got, u128 n) {
    if (got == n) return true;
    return f.fail_at(ErrorClass::DecodeError, path, "the column has " + std::to_string(got) + " values",
                     to_string(n) + ", one per row");
}

// How a column of integers is stored: plain, delta, or lag (layout 3; both allowed or not).
enum class Enc { plain, delta, lag, bad };

constexpr std::uint64_t kLagMax = 64;  // spec §6.4.4
constexpr const char* kLagWhat = "[lag 1..64, [integer differences]]";

Enc encoding(rt::Failure& f, const std::string& path, const Entry& e, bool delta_ok, std::uint64_t layout) {
    if (e.encoding == "plain") return Enc::plain;
    if (e.encoding == "lag" && layout >= 3) {
        if (delta_ok) return Enc::lag;
        f.fail_at(ErrorClass::DecodeError, path, "lag encoding of a column that does not hold integers", "'plain'");
        return Enc::bad;
    }
    if (e.encoding == "lag") {
        f.fail_at(ErrorClass::DecodeError, path,
                  "lag encoding in a columnar layout " + std::to_string(layout) + " payload", "layout 3");
        return Enc::bad;
    }
    if (e.encoding != "delta") {
        f.fail_at(ErrorClass::DecodeError, path, "unknown column encoding " + rt::py_repr(e.encoding),
                  layout >= 3 ? "'plain', 'delta' or 'lag'" : "'plain' or 'delta'");
        return Enc::bad;
    }
    if (!delta_ok) {
        f.fail_at(ErrorClass::DecodeError, path, "delta encoding of a column that does not hold integers", "'plain'");
        return Enc::bad;
    }
    return Enc::delta;
}

// A lag-coded column's values (§6.4.4): [K, [d0, d1, ...]], row i is d_i plus row i - K, summed exactly.
bool lag_sums(rt::Failure& f, const std::string& path, const Entry& e, u128 n, std::vector<i128>& sums) {
    rt::Failure inner;
    mp::Reader r(e.values, e.size, inner, UINT64_MAX);
    std::uint32_t pair = 0, count = 0;
    bool neg = false;
    std::uint64_t lag = 0;
    auto bad = [&](const std::string& problem) {
        return f.fail_at(ErrorClass::DecodeError, path, "not a lag column: " + problem, kLagWhat);
    };
    if (!r.array(pair)) return bad(inner.error.problem);
    if (pair != 2) return bad("Expected `array` of length 2, got " + std::to_string(pair));
    if (!r.enum_int(neg, lag)) return bad(inner.error.problem + " - at `$[0]`");
    if (neg || lag < 1) return bad("Expected `int` >= 1 - at `$[0]`");
    if (lag > kLagMax) return bad("Expected `int` <= 64 - at `$[0]`");
    if (!r.array(count)) return bad(inner.error.problem + " - at `$[1]`");
    sums.clear();
    sums.reserve(count < n ? count : static_cast<std::size_t>(n));
    for (std::uint32_t i = 0; i < count; ++i) {
        std::uint64_t bits = 0;
        if (!r.enum_int(neg, bits)) return bad(inner.error.problem + " - at `$[1][" + std::to_string(i) + "]`");
        i128 d = neg ? static_cast<i128>(static_cast<std::int64_t>(bits)) : static_cast<i128>(bits);
        sums.push_back(i >= lag ? sums[i - lag] + d : d);
    }
    return check_count(f, path, count, n);
}

// A delta-coded column's values: any integers, summed exactly (a lag-coded one's, from each row K before).
bool deltas(rt::Failure& f, const std::string& path, const Entry& e, u128 n, const char* what,
            std::vector<i128>& sums) {
    if (e.encoding == "lag") return lag_sums(f, path, e, n, sums);
    std::uint64_t count = 0;
    i128 acc = 0;
    sums.clear();
    bool ok = each_value(e, count, f, path, what, [&](mp::Reader& r, std::uint32_t) {
        bool neg = false;
        std::uint64_t bits = 0;
        if (!r.enum_int(neg, bits)) return false;
        acc += neg ? static_cast<i128>(static_cast<std::int64_t>(bits)) : static_cast<i128>(bits);
        sums.push_back(acc);
        return true;
    });
    return ok && check_count(f, path, count, n);
}

std::string range(i128 lo, bool has_lo, i128 hi, bool has_hi) {
    if (!has_lo && !has_hi) return "integers";
    if (!has_lo) return "integers <= " + to_string(hi);
    if (!has_hi) return "integers >= " + to_string(lo);
    return "integers in " + to_string(lo) + ".." + to_string(hi);
}

}  // namespace

bool Reader::ints(const std::string& path, u128 n, std::int64_t lo, std::int64_t hi, bool delta,
                  const char* what, std::vector<std::int64_t>& out, bool& found) {
    if (n == 0) {  // no rows: nothing is read (spec §6.5)
        out.clear();
        found = true;
        return true;
    }
    const Entry* e = find(path);
    found = e != nullptr;
    if (!e) return true;
    Enc enc = encoding(f_, path, *e, delta, layout_);
    if (enc == Enc::bad) return false;
    out.clear();
    if (enc == Enc::delta || enc == Enc::lag) {
        std::vector<i128> sums;
        if (!deltas(f_, path, *e, n, what, sums)) return false;
        // below the range first, then above it (each the first such row)
        for (int pass = 0; pass < 2; ++pass) {
            for (std::size_t i = 0; i < sums.size(); ++i) {
                if (pass == 0 ? sums[i] < lo : sums[i] > hi) {
                    return fail(path, "row " + std::to_string(i) + " holds " + to_string(sums[i]) + " (delta-coded)",
                                range(lo, true, hi, true));
                }
            }
        }
        out.assign(sums.begin(), sums.end());
        return true;
    }
    std::uint64_t count = 0;
    out.reserve(e->size < n ? e->size : static_cast<std::size_t>(n));
    if (!each_value(*e, count, f_, path, what, [&](mp::Reader& r, std::uint32_t) {
            std::int64_t v = 0;
            if (!r.i64(lo, hi, v)) return false;
            out.push_back(v);
            return true;
        })) {
        return false;
    }
    return check_count(f_, path, count, n);
}

bool Reader::uints(const std::string& path, u128 n, std::uint64_t hi, bool delta, const char* what,
                   std::vector<std::uint64_t>& out, bool& found) {
    if (n == 0) {  // no rows: nothing is read (spec §6.5)
        out.clear();
        found = true;
        return true;
    }
    const Entry* e = find(path);
    found = e != nullptr;
    if (!e) return true;
    Enc enc = encoding(f_, path, *e, delta, layout_);
    if (enc == Enc::bad) return false;
    out.clear();
    if (enc == Enc::delta || enc == Enc::lag) {
        std::vector<i128> sums;
        if (!deltas(f_, path, *e, n, what, sums)) return false;
        for (int pass = 0; pass < 2; ++pass) {
            for (std::size_t i = 0; i < sums.size(); ++i) {
                if (pass == 0 ? sums[i] < 0 : sums[i] > static_cast<i128>(hi)) {
                    return fail(path, "row " + std::to_string(i) + " holds " + to_string(sums[i]) + " (delta-coded)",
                                range(0, true, hi, hi != UINT64_MAX));
                }
            }
        }
        out.assign(sums.begin(), sums.end());
        return true;
    }
    std::uint64_t count = 0;
    out.reserve(e->size < n ? e->size : static_cast<std::size_t>(n));
    if (!each_value(*e, count, f_, path, what, [&](mp::Reader& r, std::uint32_t) {
            std::uint64_t v = 0;
            if (!r.u64(hi, v)) return false;
            out.push_back(v);
            return true;
        })) {
        return false;
    }
    return check_count(f_, path, count, n);
}

bool Reader::lengths(const std::string& path, u128 n, std::vector<std::uint64_t>& out, bool& found) {
    if (n == 0) {  // no rows: nothing is read (spec §6.5)
        out.clear();
        found = true;
        return true;
    }
    const Entry* e = find(path);
    found = e != nullptr;
    if (!e) return true;
    const char* what = "lengths (integers >= 0)";
    Enc enc = encoding(f_, path, *e, true, layout_);
    if (enc == Enc::bad) return false;
    out.clear();
    if (enc == Enc::delta || enc == Enc::lag) {
        std::vector<i128> sums;
        if (!deltas(f_, path, *e, n, what, sums)) return false;
        for (std::size_t i = 0; i < sums.size(); ++i) {
            if (sums[i] < 0) {
                return fail(path, "row " + std::to_string(i) + " holds " + to_string(sums[i]) + " (delta-coded)",
                            "integers >= 0");
            }
        }
        // a length past 64 bits cannot have its items in any payload: it fails their count
        for (auto s : sums) out.push_back(s > static_cast<i128>(UINT64_MAX) ? UINT64_MAX : static_cast<std::uint64_t>(s));
        return true;
    }
    std::uint64_t count = 0;
    out.reserve(e->size < n ? e->size : static_cast<std::size_t>(n));
    if (!each_value(*e, count, f_, path, what, [&](mp::Reader& r, std::uint32_t) {
            std::uint64_t v = 0;
            if (!r.u64(UINT64_MAX, v)) return false;
            out.push_back(v);
            return true;
        })) {
        return false;
    }
    return check_count(f_, path, count, n);
}

bool Reader::enums(const std::string& path, u128 n, const std::vector<std::int64_t>& allowed, const char* what,
                   std::vector<std::int64_t>& out, bool& found) {
    if (n == 0) {  // no rows: nothing is read (spec §6.5)
        out.clear();
        found = true;
        return true;
    }
    const Entry* e = find(path);
    found = e != nullptr;
    if (!e) return true;
    Enc enc = encoding(f_, path, *e, true, layout_);
    if (enc == Enc::bad) return false;
    auto known = [&](i128 v) { return std::find(allowed.begin(), allowed.end(), v) != allowed.end(); };
    out.clear();
    if (enc == Enc::delta || enc == Enc::lag) {
        std::vector<i128> sums;
        if (!deltas(f_, path, *e, n, what, sums)) return false;
        for (std::size_t i = 0; i < sums.size(); ++i) {
            if (!known(sums[i])) {
                return fail(path, "row " + std::to_string(i) + " holds " + to_string(sums[i]) + " (delta-coded)", what);
            }
        }
        out.assign(sums.begin(), sums.end());
        return true;
    }
    std::uint64_t count = 0;
    out.reserve(e->size < n ? e->size : static_cast<std::size_t>(n));
    if (!each_value(*e, count, f_, path, what, [&](mp::Reader& r, std::uint32_t) {
            bool neg = false;
            std::uint64_t bits = 0;
            if (!r.enum_int(neg, bits)) return false;
            i128 v = neg ? static_cast<i128>(static_cast<std::int64_t>(bits)) : static_cast<i128>(bits);
            if (!known(v)) {
                return r.failure().fail(ErrorClass::DecodeError, "Invalid enum value " + to_string(v));
            }
            out.push_back(static_cast<std::int64_t>(v));
            return true;
        })) {
        return false;
    }
    return check_count(f_, path, count, n);
}

bool Reader::tags(const std::string& path, u128 n, const std::vector<std::int64_t>& allowed, bool nullable,
                  const char* what, std::vector<std::int64_t>& out, bool& found) {
    if (n == 0) {  // no rows: nothing is read (spec §6.5)
        out.clear();
        found = true;
        return true;
    }
    const Entry* e = find(path);
    found = e != nullptr;
    if (!e) return true;
    if (e->encoding != "plain") {
        if (e->encoding == "delta") {
            return fail(path, "delta encoding of a column that does not hold integers", "'plain'");
        }
        return fail(path, "unknown column encoding " + rt::py_repr(e->encoding), "'plain' or 'delta'");
    }
    std::uint64_t count = 0;
    out.clear();
    out.reserve(e->size < n ? e->size : static_cast<std::size_t>(n));
    if (!each_value(*e, count, f_, path, what, [&](mp::Reader& r, std::uint32_t) {
            if (nullable && r.take_nil()) {
                out.push_back(-1);
                return true;
            }
            bool neg = false;
            std::uint64_t bits = 0;
            const char* t = r.next_type();
            if (t != nullptr && std::string_view(t) != "int") return r.mismatch(nullable ? "int | null" : "int");
            if (!r.enum_int(neg, bits)) return false;
            i128 v = neg ? static_cast<i128>(static_cast<std::int64_t>(bits)) : static_cast<i128>(bits);
            if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
                return r.failure().fail(ErrorClass::DecodeError, "Invalid enum value " + to_string(v));
            }
            out.push_back(static_cast<std::int64_t>(v));
            return true;
        })) {
        return false;
    }
    return check_count(f_, path, count, n);
}

bool Reader::floats(const std::string& path, u128 n, std::vector<double>& out, bool& found) {
    if (n == 0) {  // no rows: nothing is read (spec §6.5)
        out.clear();
        found = true;
        return true;
    }
    const Entry* e = find(path);
    found = e != nullptr;
    if (!e) return true;
    if (encoding(f_, path, *e, false, layout_) == Enc::bad) return false;
    std::uint64_t count = 0;
    out.clear();
    out.reserve(e->size < n ? e->size : static_cast<std::size_t>(n));
    if (!each_value(*e, count, f_, path, "numbers", [&](mp::Reader& r, std::uint32_t) {
            double v = 0;
            if (!r.f64(v)) return false;
            out.push_back(v);
            return true;
        })) {
        return false;
    }
    return check_count(f_, path, count, n);
}

bool Reader::bools(const std::string& path, u128 n, std::vector<bool>& out, bool& found) {
    if (n == 0) {  // no rows: nothing is read (spec §6.5)
        out.clear();
        found = true;
        return true;
    }
    const Entry* e = find(path);
    found = e != nullptr;
    if (!e) return true;
    if (encoding(f_, path, *e, false, layout_) == Enc::bad) return false;
    std::uint64_t count = 0;
    out.clear();
    if (!each_value(*e, count, f_, path, "booleans", [&](mp::Reader& r, std::uint32_t) {
            bool v = false;
            if (!r.boolean(v)) return false;
            out.push_back(v);
            return true;
        })) {
        return false;
    }
    return check_count(f_, path, count, n);
}

bool Reader::strings(const std::string& path, u128 n, std::vector<std::string>& out, bool& found) {
    if (n == 0) {  // no rows: nothing is read (spec §6.5)
        out.clear();
        found = true;
        return true;
    }
    const Entry* e = find(path);
    found = e != nullptr;
    if (!e) return true;
    if (e->encoding == "forms") return forms(path, n, *e, out);
    if (encoding(f_, path, *e, false, layout_) == Enc::bad) return false;
    std::uint64_t count = 0;
    out.clear();
    out.reserve(e->size < n ? e->size : static_cast<std::size_t>(n));
    if (!each_value(*e, count, f_, path, "strings", [&](mp::Reader& r, std::uint32_t) {
            std::string_view v;
            if (!r.str_view(v)) return false;
            out.emplace_back(v);
            return true;
        })) {
        return false;
    }
    return check_count(f_, path, count, n);
}

// --- forms (§6.4.3) ----------------------------------------------------------------------------------

bool Reader::forms(const std::string& path, u128 n, const Entry& e, std::vector<std::string>& out) {
    rt::Failure inner;
    mp::Reader r(e.values, e.size, inner, UINT64_MAX);
    std::vector<std::string> literals;
    std::vector<std::uint64_t> steps, prefixes, suffixes;
    std::vector<std::int64_t> residuals;
    // msgspec's words for the 5-tuple of lists, with its own place suffix (` - at `$[1][3]``)
    auto bad = [&](const std::string& at) {
        if (inner.fixed) return fail(path, inner.error.problem);
        std::string text = "not a forms column: " + inner.error.problem;
        if (!at.empty()) text += " - at `$" + at + "`";
        return fail(path, text, kFormsWhat);
    };
    std::uint32_t parts = 0;
    if (!r.array(parts)) return bad("");
    if (parts != 5) {
        inner.fail(ErrorClass::DecodeError, "Expected `array` of length 5, got " + std::to_string(parts));
        return bad("");
    }
    std::uint32_t len = 0;
    if (!r.array(len)) return bad("[0]");
    literals.reserve(std::min<std::size_t>(len, e.size));
    for (std::uint32_t i = 0; i < len; ++i) {
        std::string_view v;
        if (!r.str_view(v)) return bad("[0][" + std::to_string(i) + "]");
        literals.emplace_back(v);
    }
    std::vector<std::uint64_t>* unsigned_parts[3] = {&steps, &prefixes, &suffixes};
    for (int k = 0; k < 3; ++k) {
        std::string at = "[" + std::to_string(k + 1) + "]";
        if (!r.array(len)) return bad(at);
        auto& v = *unsigned_parts[k];
        v.reserve(std::min<std::size_t>(len, e.size));
        for (std::uint32_t i = 0; i < len; ++i) {
            std::uint64_t x = 0;
            if (!r.u64(UINT64_MAX, x)) return bad(at + "[" + std::to_string(i) + "]");
            v.push_back(x);
        }
    }
    if (!r.array(len)) return bad("[4]");
    residuals.reserve(std::min<std::size_t>(len, e.size));
    for (std::uint32_t i = 0; i < len; ++i) {
        std::int64_t x = 0;
        if (!r.i64(INT64_MIN, INT64_MAX, x)) return bad("[4][" + std::to_string(i) + "]");
        residuals.push_back(x);
    }
    const std::size_t m = steps.size();
    if (!(m == prefixes.size() && m == suffixes.size() && m == residuals.size())) {
        return fail(path, "the forms' columns differ in length", kFormsWhat);
    }
    if (literals.size() < n) {
        return fail(path, "the column has " + std::to_string(literals.size()) + " literals",
                    "at least " + to_string(n) + ", one per row");
    }
    out.assign(literals.begin(), literals.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(n)));
    if (m == 0) return true;
    // 2. rows ascending, below the row count
    std::vector<u128> rowsum(m);
    u128 acc = 0;
    for (std::size_t j = 0; j < m; ++j) {
        acc += steps[j];
        rowsum[j] = acc;
    }
    for (std::size_t j = 0; j < m; ++j) {
        if ((j && steps[j] < 1) || rowsum[j] >= n) {
            // the reference checks the last row and the steps first, then names the first bad form
            return fail(path, "form " + std::to_string(j) + " is for row " + to_string(rowsum[j]),
                        "rows ascending, below the row count");
        }
    }
    // 3. a form's row holds the empty literal
    for (std::size_t j = 0; j < m; ++j) {
        if (!out[static_cast<std::size_t>(rowsum[j])].empty()) {
            return fail(path, "form " + std::to_string(j) + ": row " + to_string(rowsum[j]) + " also holds a literal",
                        "an empty literal");
        }
    }
    // 4. prefixes and suffixes are literals, not form rows
    const std::uint64_t width = literals.size();
    auto is_row = [&](std::uint64_t v) { return std::binary_search(rowsum.begin(), rowsum.end(), static_cast<u128>(v)); };
    for (std::size_t j = 0; j < m; ++j) {
        std::uint64_t p = prefixes[j], q = suffixes[j];
        if (p >= width || q >= width || is_row(p) || is_row(q)) {
            return fail(path,
                        "form " + std::to_string(j) + " refers to literals " + std::to_string(p) + " and " +
                            std::to_string(q),
                        "literal rows, not forms");
        }
    }
    // 5. short affixes
    for (std::size_t j = 0; j < m; ++j) {
        if (code_points(literals[prefixes[j]]) + code_points(literals[suffixes[j]]) > kFormAffixMax) {
            return fail(path, "form " + std::to_string(j) + ": prefix and suffix are too long",
                        "<= " + std::to_string(kFormAffixMax));
        }
    }
    // 6. numbers from the last form with the same prefix and suffix, in 0..10**18 - 1
    std::map<std::pair<std::uint64_t, std::uint64_t>, i128> last;
    std::vector<i128> numbers(m);
    for (std::size_t j = 0; j < m; ++j) {
        auto key = std::make_pair(prefixes[j], suffixes[j]);
        auto it = last.find(key);
        i128 number = (it == last.end() ? -1 : it->second) + 1 + residuals[j];
        last[key] = number;
        numbers[j] = number;
    }
    for (std::size_t j = 0; j < m; ++j) {
        if (numbers[j] < 0 || numbers[j] >= static_cast<i128>(kFormNumberLimit)) {
            return fail(path, "form " + std::to_string(j) + " has number " + to_string(numbers[j]),
                        "0.." + std::to_string(kFormNumberLimit - 1));
        }
    }
    // 7. the strings
    for (std::size_t j = 0; j < m; ++j) {
        std::string& s = out[static_cast<std::size_t>(rowsum[j])];
        s = literals[prefixes[j]];
        s += to_string(static_cast<u128>(numbers[j]));
        s += literals[suffixes[j]];
    }
    return true;
}

}  // namespace tracepack::col
