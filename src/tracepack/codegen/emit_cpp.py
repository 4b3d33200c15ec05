"""Stage 3e: the C++ reader of one schema version, and the version table over all of them.

For version X.Y it writes ``generated/cpp/tracepack/vX_Y/``:

``document.hpp``
    the typed document: enums as ``enum class``, unions as tagged types (``std::variant`` plus the
    variant's id), optional fields as ``std::optional``, defaults as member initialisers;
``codecs.hpp``
    the version's decoders, validator and canonical JSON writer, declared;
``msgpack.cpp``, ``json.cpp``, ``flatbuffers_rows.cpp``
    one decoder per codec, each a function per struct, union and list type, checking every value's type
    and range and naming the place of the first failure (spec §3, §4, §5, §9);
``validate.cpp``
    ``validate(doc)``: every reference in range, table columns aligned, tries pointing backwards, in the
    order and with the places the reference validator uses (spec §9.4.1);
``plain.cpp``
    ``write_plain(doc, writer)``: the canonical JSON of ``tracepack cat`` (spec §11.2).

and, over every version, ``generated/cpp/tracepack/versions.hpp`` / ``versions.cpp``: the released
versions, the current one, decoding a payload of any of them, and the migrations between consecutive
releases that only add (spec §10): a field at a time, every added field at its default. A step that does
more than add is declared there and defined by hand in ``cpp/src/migrations.cpp``.

The runtime the generated code stands on is ``cpp/`` (hand-written: the container, zstd, the readers of
each wire format, the JSON writer). Generated code cites the spec's sections, never the Python modules.
Output is formatted as written (four-space indents, lines under 120 characters).
"""

from __future__ import annotations

import math
from itertools import pairwise

from tracepack.codegen.emit_fbs import box_name, fbs_field_ids
from tracepack.codegen.emit_python import header_lines
from tracepack.codegen.model import INT_RANGES, Field, Schema, Struct, TypeRef
from tracepack.errors import SchemaError

__all__ = ["additive_step", "column_numbers", "column_paths", "cpp_name", "emit_cpp", "emit_cpp_versions"]

# C++ keywords and names that would clash with the standard library's macros: a schema name that is one
# gets a trailing underscore (`int` -> `int_`).
_RESERVED = frozenset(
    [
        "alignas",
        "alignof",
        "and",
        "and_eq",
        "asm",
        "auto",
        "bitand",
        "bitor",
        "bool",
        "break",
        "case",
        "catch",
        "char",
        "char8_t",
        "char16_t",
        "char32_t",
        "class",
        "compl",
        "concept",
        "const",
        "consteval",
        "constexpr",
        "constinit",
        "const_cast",
        "continue",
        "co_await",
        "co_return",
        "co_yield",
        "decltype",
        "default",
        "delete",
        "do",
        "double",
        "dynamic_cast",
        "else",
        "enum",
        "explicit",
        "export",
        "extern",
        "false",
        "float",
        "for",
        "friend",
        "goto",
        "if",
        "inline",
        "int",
        "long",
        "mutable",
        "namespace",
        "new",
        "noexcept",
        "not",
        "not_eq",
        "nullptr",
        "operator",
        "or",
        "or_eq",
        "private",
        "protected",
        "public",
        "register",
        "reinterpret_cast",
        "requires",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "static_assert",
        "static_cast",
        "struct",
        "switch",
        "template",
        "this",
        "thread_local",
        "throw",
        "true",
        "try",
        "typedef",
        "typeid",
        "typename",
        "union",
        "unsigned",
        "using",
        "virtual",
        "void",
        "volatile",
        "wchar_t",
        "while",
        "xor",
        "xor_eq",
        "errno",
        "assert",
        "NULL",
        "EOF",
        "stdin",
        "stdout",
        "stderr",
    ]
)

_CPP_INT = {
    "u8": "std::uint8_t",
    "u16": "std::uint16_t",
    "u32": "std::uint32_t",
    "u64": "std::uint64_t",
    "i8": "std::int8_t",
    "i16": "std::int16_t",
    "i32": "std::int32_t",
    "i64": "std::int64_t",
}
_FB_SIZE = {"bool": 1, "u8": 1, "i8": 1, "u16": 2, "i16": 2, "u32": 4, "i32": 4, "f32": 4, "u64": 8, "i64": 8, "f64": 8}


def cpp_name(name: str) -> str:
    """A schema name as a C++ identifier."""
    return f"{name}_" if name in _RESERVED else name


def _snake(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i:
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


def _comment(text: str, indent: str = "") -> list[str]:
    return [f"{indent}// {ln}".rstrip() for ln in text.strip().splitlines()]


def _cpp_string(text: str) -> str:
    """A C++ string literal of ``text``'s UTF-8 bytes (octal escapes: they never swallow a next digit)."""
    out = ['"']
    for b in text.encode("utf-8"):
        ch = chr(b)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= b < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{b:03o}")
    out.append('"')
    return "".join(out)


def _int_literal(value: int, name: str) -> str:
    if name == "i64" and value == INT_RANGES["i64"][0]:
        return "INT64_MIN"
    if name == "u64":
        return f"{value}ULL"
    if name == "i64" and not -(2**31) <= value < 2**31:
        return f"{value}LL"
    if name == "u32" and value >= 2**31:
        return f"{value}U"
    return str(value)


def _float_literal(value: object) -> str:
    x = float(value)  # type: ignore[arg-type]
    if math.isnan(x):
        return "std::numeric_limits<double>::quiet_NaN()"
    if math.isinf(x):
        return ("" if x > 0 else "-") + "std::numeric_limits<double>::infinity()"
    return repr(x)


def _ordered(schema: Schema) -> list[tuple[str, str]]:
    """``("struct"|"union", name)`` in an order where every type comes after what it holds."""
    done: set[str] = set()
    out: list[tuple[str, str]] = []

    def visit_union(name: str) -> None:
        if f"union:{name}" in done:
            return
        for v in schema.unions[name].variants:
            visit_struct(v.type)
        done.add(f"union:{name}")
        out.append(("union", name))

    def visit_struct(name: str) -> None:
        if name in done:
            return
        done.add(name)
        s = schema.structs[name]
        for f in s.fields:
            t = f.type.item or f.type
            if t.kind == "struct":
                visit_struct(t.name)
            elif t.kind == "union":
                visit_union(t.name)
        out.append(("struct", name))

    for name in schema.structs:
        visit_struct(name)
    for name in schema.unions:
        visit_union(name)
    return out


class _Version:
    """What every emitter of one version shares: names, types, defaults."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.ns = f"tracepack::{schema.module_name}"

    def header(self, what: str) -> list[str]:
        return [*header_lines(self.schema, comment="//"), f"// tracepack schema {self.schema.version}: {what}"]

    def ctype(self, t: TypeRef) -> str:
        if t.kind == "list":
            assert t.item is not None
            return f"std::vector<{self.ctype(t.item)}>"
        if t.kind == "scalar":
            if t.name in _CPP_INT:
                return _CPP_INT[t.name]
            # f32 is held as a double: the document holds the value the codec held (JSON and MessagePack
            # carry doubles); FlatBuffers narrows it when it writes (spec §2.2).
            return {"bool": "bool", "f32": "double", "f64": "double"}[t.name]
        if t.kind in ("str", "bytes"):
            return "std::string"
        return t.name

    def field_type(self, f: Field) -> str:
        base = self.ctype(f.type)
        return f"std::optional<{base}>" if f.optional else base

    def default(self, f: Field) -> str:
        """The member initialiser of ``f`` (empty when the type's own default is it)."""
        t = f.type
        if f.optional or t.kind in ("list", "struct", "union"):
            return ""
        if t.kind == "enum":
            if f.has_default:
                return f" = {t.name}::{cpp_name(str(f.default))}"
            first = self.schema.enums[t.name].values[0]
            return f" = {t.name}::{cpp_name(first.name)}"
        if t.kind in ("str", "bytes"):
            return f" = {_cpp_string(str(f.default))}" if f.has_default and f.default != "" else ""
        if t.name == "bool":
            return f" = {'true' if f.has_default and f.default else 'false'}"
        if t.name in ("f32", "f64"):
            return f" = {_float_literal(f.default)}" if f.has_default else " = 0.0"
        value = int(f.default) if f.has_default else 0  # type: ignore[call-overload]
        return f" = {_int_literal(value, t.name)}"

    def int_bounds(self, name: str) -> tuple[str, str]:
        lo, hi = INT_RANGES[name]
        return _int_literal(lo, "i64"), _int_literal(hi, "u64" if name == "u64" else "i64")

    def is_default_expr(self, f: Field, x: str) -> str | None:
        """A C++ condition that ``x`` holds ``f``'s default (the JSON codec and `cat` omit it), or None
        when the field has no default (always written)."""
        t = f.type
        if f.optional:
            return f"!{x}.has_value()"
        if not f.has_default:
            return None
        if t.kind == "list":
            return f"{x}.empty()"
        if t.kind == "enum":
            return f"{x} == {t.name}::{cpp_name(str(f.default))}"
        if t.kind in ("str", "bytes"):
            return f"{x}.empty()" if f.default == "" else f"{x} == {_cpp_string(str(f.default))}"
        if t.name == "bool":
            return f"{x} == {'true' if f.default else 'false'}"
        if t.name in ("f32", "f64"):
            d = float(f.default)  # type: ignore[arg-type]
            if math.isnan(d):
                return "false"
            return (
                f"({x} == {_float_literal(d)} && std::signbit({x}) == {'true' if math.copysign(1, d) < 0 else 'false'})"
            )
        return f"{x} == {_int_literal(int(f.default), t.name)}"  # type: ignore[call-overload]


# ---------------------------------------------------------------------------------------------------
# document.hpp
# ---------------------------------------------------------------------------------------------------


def _emit_document(v: _Version) -> str:
    schema = v.schema
    out = v.header("the typed document (spec §2).")
    out += [
        "//",
        *_comment(schema.doc),
        "#pragma once",
        "",
        "#include <cstdint>",
        "#include <limits>",
        "#include <optional>",
        "#include <string>",
        "#include <string_view>",
        "#include <variant>",
        "#include <vector>",
        "",
        f"namespace {v.ns} {{",
        "",
        f"inline constexpr std::uint16_t kMajor = {schema.major};",
        f"inline constexpr std::uint16_t kMinor = {schema.minor};",
        f'inline constexpr const char* kSchemaName = "{schema.name}";',
        f'inline constexpr const char* kSchemaSha256 = "{schema.sha256}";',
        "",
    ]
    for e in schema.enums.values():
        base = _CPP_INT[e.type]
        out += _comment(e.doc)
        out.append(f"enum class {e.name} : {base} {{")
        for val in e.values:
            out += _comment(val.doc + (" (deprecated)" if val.deprecated else ""), "    ")
            out.append(f"    {cpp_name(val.name)} = {val.value},")
        out += [
            "};",
            f"// The name of a value (spec §3.2: JSON writes enums by name); nullptr for a value {e.name} has not.",
            f"inline const char* name({e.name} x) noexcept {{",
            "    switch (x) {",
            *[f'        case {e.name}::{cpp_name(val.name)}: return "{val.name}";' for val in e.values],
            "    }",
            "    return nullptr;",
            "}",
            f"// Whether `raw` is a value of {e.name} (spec §4.2: positional codecs write enums by value).",
            f"inline bool is_value(std::int64_t raw, {e.name}* out = nullptr) noexcept {{",
            "    switch (raw) {",
            *[
                f"        case {val.value}: if (out) *out = {e.name}::{cpp_name(val.name)}; return true;"
                for val in e.values
            ],
            "        default: return false;",
            "    }",
            "}",
            f"inline bool from_name(std::string_view s, {e.name}& out) noexcept {{",
            *[
                f'    if (s == "{val.name}") {{ out = {e.name}::{cpp_name(val.name)}; return true; }}'
                for val in e.values
            ],
            "    return false;",
            "}",
            "",
        ]
    for kind, name in _ordered(schema):
        if kind == "struct":
            out += _emit_struct(v, schema.structs[name])
        else:
            out += _emit_union(v, name)
    out += [f"}}  // namespace {v.ns}", ""]
    return "\n".join(out)


def _emit_struct(v: _Version, s: Struct) -> list[str]:
    out = _comment(s.doc)
    if s.table:
        out.append("// A table (spec §2.4): each list field is a column of one value per row.")
    if s.variant_of is not None:
        out.append(f"// Variant `{s.variant_of[1]}` (id {s.variant_of[2]}) of union {s.variant_of[0]}.")
    out.append(f"struct {s.name} {{")
    for f in s.fields:
        notes = [f"id {f.id}"]
        if f.ref is not None:
            notes.append(f"refs `{f.ref}`" + (f", sentinels down to {f.null}" if f.null is not None else ""))
        if f.trie:
            notes.append("trie parent")
        if f.sparse:
            notes.append("sparse column")
        if f.pool:
            notes.append("pool, not row-aligned")
        if f.deprecated:
            notes.append("deprecated")
        out += _comment(f"{f.doc} [{'; '.join(notes)}]", "    ")
        out.append(f"    {v.field_type(f)} {cpp_name(f.name)}{v.default(f)};")
    out += ["};", ""]
    return out


def _emit_union(v: _Version, name: str) -> list[str]:
    u = v.schema.unions[name]
    alts = ", ".join(var.type for var in u.variants)
    out = _comment(u.doc)
    out += [
        "// A tagged union (spec §2.3): the variant held, and its id.",
        f"struct {name} {{",
        "    enum class Kind : std::uint8_t {",
        *[f"        {cpp_name(var.name)} = {var.id}," for var in u.variants],
        "    };",
        f"    std::variant<{alts}> value;",
        "",
        "    // The id of the variant held.",
        "    Kind kind() const noexcept {",
        f"        static constexpr std::uint8_t ids[] = {{{', '.join(str(var.id) for var in u.variants)}}};",
        "        return static_cast<Kind>(ids[value.index()]);",
        "    }",
        "    // The name of the variant held (spec §3.2: JSON writes it as `kind`).",
        "    const char* kind_name() const noexcept {",
        "        static constexpr const char* names[] = {" + ", ".join(f'"{var.name}"' for var in u.variants) + "};",
        "        return names[value.index()];",
        "    }",
        "};",
        "",
    ]
    return out


# ---------------------------------------------------------------------------------------------------
# codecs.hpp
# ---------------------------------------------------------------------------------------------------


def _emit_codecs_hpp(v: _Version) -> str:
    schema = v.schema
    root = schema.root
    out = v.header("its decoders, validator and canonical JSON writer.")
    out += [
        "#pragma once",
        "",
        "#include <cstdint>",
        "#include <string_view>",
        "",
        '#include "tracepack/error.hpp"',
        '#include "tracepack/json_writer.hpp"',
        '#include "tracepack/limits.hpp"',
        f'#include "tracepack/{schema.module_name}/document.hpp"',
        "",
        f"namespace {v.ns} {{",
        "",
        "// Decode a payload of each codec into `out` (a default-constructed document). On failure the",
        "// failure holds the class, problem and place (spec §9); the caller frames it for its codec.",
        f"bool decode_msgpack(std::string_view payload, {root}& out, rt::Failure& failure, const Limits& limits);",
        f"bool decode_json(std::string_view payload, {root}& out, rt::Failure& failure, const Limits& limits);",
        f"bool decode_flatbuffers_rows(std::string_view payload, {root}& out, rt::Failure& failure);",
        "// The columnar codec: `numbers` are layout 2's column paths by number (versions.hpp, kColumnPaths).",
        f"bool decode_columnar(std::string_view payload, {root}& out, rt::Failure& failure, const Limits& limits,",
        "                     const char* const* numbers, std::size_t count);",
        "// The FlatBuffers column layout (spec §7): the columnar codec's rows (§6.5) from typed vectors.",
        f"bool decode_flatbuffers_columns(std::string_view payload, {root}& out, rt::Failure& failure);",
        "",
        "// Check what decoding cannot (spec §9.4.1): references, tables, tries. An IntegrityError on failure.",
        f"bool validate(const {root}& doc, rt::Failure& failure);",
        "",
        "// The canonical JSON value of `tracepack cat` (spec §11.2.1): the json codec's shape, string references",
        "// resolved, the string table left out.",
        f"void write_plain(const {root}& doc, JsonWriter& writer);",
        "",
        f"}}  // namespace {v.ns}",
        "",
    ]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------
# msgpack.cpp (spec §4)
# ---------------------------------------------------------------------------------------------------


class _Msgpack:
    """Positional decoders: a struct is an array whose item i is the field with id i (spec §4.2)."""

    def __init__(self, v: _Version) -> None:
        self.v = v
        self.schema = v.schema
        self.lists: dict[str, TypeRef] = {}
        self.bodies: list[str] = []

    def value(self, t: TypeRef, x: str, level: str, raw: str) -> str:
        """A C++ expression decoding one value of ``t`` into ``x``; true on success."""
        if t.kind == "scalar":
            if t.name == "bool":
                return f"r.boolean({x})"
            if t.name in ("f32", "f64"):
                return f"r.f64({x})"
            if t.name == "u64":
                return f"rd_u64(r, {x})"
            lo, hi = self.v.int_bounds(t.name)
            if t.name.startswith("u"):
                return f"rd_uint<{_CPP_INT[t.name]}>(r, {hi}, {x})"
            return f"rd_int<{_CPP_INT[t.name]}>(r, {lo}, {hi}, {x})"
        if t.kind in ("str", "bytes"):
            return f"r.str({x})"
        if t.kind == "enum":
            return f"rd_enum(r, {x})"
        if t.kind == "struct":
            return f"mp_{_snake(t.name)}(r, {x}, {raw}, {level} + 1)"
        if t.kind == "union":
            return f"mp_{_snake(t.name)}(r, {x}, {level} + 1)"
        assert t.item is not None
        key = f"list_{self._list_key(t.item)}"
        self.lists[key] = t.item
        return f"mp_{key}(r, {x}, {raw}, {level} + 1)"

    def _list_key(self, t: TypeRef) -> str:
        if t.kind == "scalar":
            return t.name
        return _snake(t.name)

    def expected(self, f: Field) -> str:
        return '"array | null"' if f.optional else '"array"'

    def struct(self, s: Struct) -> None:
        fn = _snake(s.name)
        tagged = s.variant_of is not None
        shift = 1 if tagged else 0
        required = sum(1 for f in s.fields if f.required)
        # msgspec's rule, kept by spec §4.2: the required fields are the leading ones without defaults.
        body = [
            f"// {s.name}: the fields from array item {shift} on; `n` items in all.",
            f"bool mp_{fn}_items(mp::Reader& r, {s.name}& o, std::uint32_t n, bool raw, std::uint64_t level) {{",
        ]
        if not s.fields:
            body.append("    (void)o;")
            body.append("    (void)raw;")
        for f in s.fields:
            pos = f.id + shift
            x = f"o.{cpp_name(f.name)}"
            step = f'raw ? "[{pos}]" : ".{f.name}"'
            if f.optional:
                if f.type.kind == "struct":
                    call = f'mp_{_snake(f.type.name)}(r, {x}.emplace(), raw, level + 1, "array | null")'
                else:
                    call = f'mp_{_snake(f.type.name)}(r, {x}.emplace(), level + 1, "array | null")'
                body += [
                    f"    if (n > {pos} && !r.take_nil() && !{call}) return r.failure().step({step});",
                ]
            else:
                body.append(
                    f"    if (n > {pos} && !{self.value(f.type, x, 'level', 'raw')}) return r.failure().step({step});"
                )
        total = len(s.fields) + shift
        body += [
            f"    for (std::uint32_t i = {total}; i < n; ++i) {{",
            "        if (!r.skip(level)) return false;  // a field a newer minor added (spec §10.3)",
            "    }",
            "    return true;",
            "}",
            "",
            f"bool mp_{fn}(mp::Reader& r, {s.name}& o, bool raw, std::uint64_t level, const char* expected) {{",
            "    std::uint32_t n = 0;",
            f"    if (!r.array_min({required + shift}, n, expected)) return false;",
        ]
        if tagged:
            assert s.variant_of is not None
            body += [
                "    bool neg = false;",
                "    std::uint64_t tag = 0;",
                '    if (!r.tag_int(neg, tag)) return r.failure().step("[0]");',
                f"    if (neg || tag != {s.variant_of[2]}) return bad_tag(r, neg, tag);",
            ]
        body += [f"    return mp_{fn}_items(r, o, n, raw, level);", "}", ""]
        self.bodies += body

    def union(self, name: str) -> None:
        u = self.schema.unions[name]
        fn = _snake(name)
        body = [
            f"bool mp_{fn}(mp::Reader& r, {name}& o, std::uint64_t level, const char* expected) {{",
            "    std::uint32_t n = 0;",
            "    if (!r.array(n, expected)) return false;",
            "    if (n == 0) {",
            '        return r.failure().fail(ErrorClass::DecodeError, "Expected `array` of at least length 1, got 0");',
            "    }",
            "    bool neg = false;",
            "    std::uint64_t tag = 0;",
            '    if (!r.tag_int(neg, tag)) return r.failure().step("[0]");',
            "    if (neg) return bad_tag(r, neg, tag);",
            "    switch (tag) {",
        ]
        for i, var in enumerate(u.variants):
            s = self.schema.structs[var.type]
            required = sum(1 for f in s.fields if f.required) + 1
            body += [
                f"        case {var.id}: {{",
                f"            if (n < {required}) return too_short(r, {required}, n);",
                f"            return mp_{_snake(var.type)}_items(r, o.value.emplace<{i}>(), n, true, level);",
                "        }",
            ]
        body += ["        default: return bad_tag(r, neg, tag);", "    }", "}", ""]
        self.bodies += body

    def list_fn(self, key: str, item: TypeRef) -> list[str]:
        ct = self.v.ctype(item)
        inner = self.value(item, "out.back()", "level", "raw") if item.name != "bool" else "r.boolean(b)"
        lines = [
            f"bool mp_{key}(mp::Reader& r, std::vector<{ct}>& out, bool raw, std::uint64_t level) {{",
            "    (void)raw;",
            "    (void)level;",
            "    std::uint32_t n = 0;",
            "    if (!r.array(n)) return false;",
            "    out.clear();",
            "    out.reserve(std::min<std::size_t>(n, r.remaining()));  // every item takes a byte at least",
            "    for (std::uint32_t i = 0; i < n; ++i) {",
        ]
        if item.kind == "scalar" and item.name == "bool":
            lines += [
                "        bool b = false;",
                f"        if (!{inner}) return r.failure().index(i);",
                "        out.push_back(b);",
            ]
        else:
            lines += ["        out.emplace_back();", f"        if (!{inner}) return r.failure().index(i);"]
        lines += ["    }", "    return true;", "}", ""]
        return lines

    def emit(self) -> str:
        schema = self.schema
        v = self.v
        for kind, name in _ordered(schema):
            if kind == "struct":
                self.struct(schema.structs[name])
            else:
                self.union(name)
        lists: list[str] = []
        done: set[str] = set()
        while set(self.lists) - done:
            for key in sorted(set(self.lists) - done):
                lists += self.list_fn(key, self.lists[key])
                done.add(key)
        decls = []
        for kind, name in _ordered(schema):
            if kind == "struct":
                fn = _snake(name)
                decls += [
                    f"bool mp_{fn}_items(mp::Reader& r, {name}& o, std::uint32_t n, bool raw, std::uint64_t level);",
                    f"bool mp_{fn}(mp::Reader& r, {name}& o, bool raw, std::uint64_t level,"
                    ' const char* expected = "array");',
                ]
            else:
                decls.append(
                    f"bool mp_{_snake(name)}(mp::Reader& r, {name}& o, std::uint64_t level,"
                    ' const char* expected = "array");'
                )
        for key, item in sorted(self.lists.items()):
            decls.append(
                f"bool mp_{key}(mp::Reader& r, std::vector<{v.ctype(item)}>& out, bool raw, std::uint64_t level);"
            )
        root = schema.root
        out = v.header("the msgpack codec's decoder (spec §4).")
        out += [
            "//",
            "// A struct is an array whose item i is the field with id i (a union variant's array starts with its",
            "// variant id); missing trailing items take their defaults, extra ones (a newer minor's fields) are",
            "// skipped. Places are field names, or item indices under a union (spec §9.2.1).",
            "#include <algorithm>",
            "#include <cstdint>",
            "",
            '#include "tracepack/msgpack.hpp"',
            f'#include "tracepack/{schema.module_name}/codecs.hpp"',
            "",
            f"namespace {v.ns} {{",
            "namespace {",
            "",
            "using tracepack::ErrorClass;",
            "",
            "template <typename T>",
            "bool rd_int(mp::Reader& r, std::int64_t lo, std::int64_t hi, T& out) {",
            "    std::int64_t v = 0;",
            "    if (!r.i64(lo, hi, v)) return false;",
            "    out = static_cast<T>(v);",
            "    return true;",
            "}",
            "",
            "template <typename T>",
            "bool rd_uint(mp::Reader& r, std::uint64_t hi, T& out) {",
            "    std::uint64_t v = 0;",
            "    if (!r.u64(hi, v)) return false;",
            "    out = static_cast<T>(v);",
            "    return true;",
            "}",
            "",
            "[[maybe_unused]] bool rd_u64(mp::Reader& r, std::uint64_t& out) { return r.u64(UINT64_MAX, out); }",
            "",
            "template <typename E>",
            "bool rd_enum(mp::Reader& r, E& out) {",
            "    bool neg = false;",
            "    std::uint64_t bits = 0;",
            "    if (!r.enum_int(neg, bits)) return false;",
            "    if (!neg && bits <= static_cast<std::uint64_t>(INT64_MAX) &&",
            "        is_value(static_cast<std::int64_t>(bits), &out)) {",
            "        return true;",
            "    }",
            "    if (neg && is_value(static_cast<std::int64_t>(bits), &out)) return true;",
            "    std::string v = neg ? std::to_string(static_cast<std::int64_t>(bits)) : std::to_string(bits);",
            '    return r.failure().fail(ErrorClass::DecodeError, "Invalid enum value " + v);',
            "}",
            "",
            "[[maybe_unused]] bool bad_tag(mp::Reader& r, bool neg, std::uint64_t tag) {",
            "    std::string v = neg ? std::to_string(static_cast<std::int64_t>(tag)) : std::to_string(tag);",
            '    r.failure().fail(ErrorClass::DecodeError, "Invalid value " + v);',
            '    return r.failure().step("[0]");',
            "}",
            "",
            "[[maybe_unused]] bool too_short(mp::Reader& r, std::uint32_t need, std::uint32_t got) {",
            "    return r.too_short(need, got);",
            "}",
            "",
            *[f"[[maybe_unused]] {d}" for d in decls],
            "",
            *self.bodies,
            *lists,
            "}  // namespace",
            "",
            f"bool decode_msgpack(std::string_view payload, {root}& out, rt::Failure& failure,"
            " const Limits& limits) {",
            "    mp::Reader r(reinterpret_cast<const std::uint8_t*>(payload.data()), payload.size(), failure,",
            "                 limits.max_depth);",
            f'    if (!mp_{_snake(root)}(r, out, false, 1, "array")) return false;',
            "    return r.finish();",
            "}",
            "",
            f"}}  // namespace {v.ns}",
            "",
        ]
        return "\n".join(out)


# ---------------------------------------------------------------------------------------------------
# json.cpp (spec §3)
# ---------------------------------------------------------------------------------------------------


class _Json:
    """Keyed decoders: a struct is an object keyed by field name; unknown keys are skipped (spec §3.2)."""

    def __init__(self, v: _Version) -> None:
        self.v = v
        self.schema = v.schema
        self.lists: dict[str, TypeRef] = {}
        self.bodies: list[str] = []

    def value(self, t: TypeRef, x: str, level: str) -> str:
        if t.kind == "scalar":
            if t.name == "bool":
                return f"r.boolean({x})"
            if t.name in ("f32", "f64"):
                return f"r.f64({x})"
            if t.name == "u64":
                return f"r.u64(UINT64_MAX, {x})"
            lo, hi = self.v.int_bounds(t.name)
            if t.name.startswith("u"):
                return f"rd_uint<{_CPP_INT[t.name]}>(r, {hi}, {x})"
            return f"rd_int<{_CPP_INT[t.name]}>(r, {lo}, {hi}, {x})"
        if t.kind in ("str", "bytes"):
            return f"r.str({x})"
        if t.kind == "enum":
            return f"rd_enum(r, {x})"
        if t.kind == "struct":
            return f"js_{_snake(t.name)}(r, {x}, {level} + 1)"
        if t.kind == "union":
            return f"js_{_snake(t.name)}(r, {x}, {level} + 1)"
        assert t.item is not None
        key = f"list_{t.item.name if t.item.kind == 'scalar' else _snake(t.item.name)}"
        self.lists[key] = t.item
        return f"js_{key}(r, {x}, {level} + 1)"

    def struct(self, s: Struct) -> None:
        fn = _snake(s.name)
        required = [f for f in s.fields if f.required]
        body = [
            f"// {s.name}'s members, after its `{{` (and, for a union variant, maybe after its `kind`).",
            f"bool js_{fn}_members(js::Reader& r, {s.name}& o, bool first, std::uint64_t level) {{",
        ]
        if required:
            body.append("    std::uint64_t seen = 0;")
        body += [
            "    bool done = false;",
            "    std::string_view key;",
            "    while (true) {",
            "        if (!r.member(first, done, key)) return false;",
            "        if (done) break;",
        ]
        branches: list[list[str]] = []
        for f in s.fields:
            x = f"o.{cpp_name(f.name)}"
            lines = [f'        if (key == "{f.name}") {{']
            if f.optional:
                lines += [
                    "            bool null_seen = false;",
                    f'            if (!r.take_null(null_seen)) return r.failure().field("{f.name}");',
                    "            if (null_seen) {",
                    f"                {x}.reset();",
                    "            } else {",
                    f'                if (!js_{_snake(f.type.name)}(r, {x}.emplace(), level + 1, "object | null")) {{',
                    f'                    return r.failure().field("{f.name}");',
                    "                }",
                    "            }",
                ]
            else:
                if f.type.kind in ("list", "struct", "union"):
                    lines.append(f"            {x} = {{}};")
                lines.append(
                    f'            if (!{self.value(f.type, x, "level")}) return r.failure().field("{f.name}");'
                )
            if f.required:
                lines.append(f"            seen |= 1ULL << {required.index(f)};")
            lines += ["            continue;", "        }"]
            branches.append(lines)
        for lines in branches:
            body += lines
        if s.variant_of is not None:
            body += [
                '        if (key == "kind") {  // the variant\'s tag again: it must be this variant (spec §3.2)',
                "            std::string_view tag;",
                '            if (!r.tag(tag, level)) return r.failure().field("kind");',
                f'            if (tag != "{s.variant_of[1]}") {{',
                "                r.invalid_tag(tag);",
                '                return r.failure().field("kind");',
                "            }",
                "            continue;",
                "        }",
            ]
        body += [
            "        if (!r.skip(level)) return false;  // an unknown member: a newer minor's field (spec §10.3)",
            "    }",
        ]
        for i, f in enumerate(required):
            body.append(f'    if (!(seen & (1ULL << {i}))) return r.missing("{f.name}");')
        if not s.fields:
            body.append("    (void)o;")
        body += ["    return true;", "}", ""]
        body += [
            f"bool js_{fn}(js::Reader& r, {s.name}& o, std::uint64_t level, const char* expected) {{",
            "    if (!r.object(expected)) return false;",
            f"    return js_{fn}_members(r, o, true, level);",
            "}",
            "",
        ]
        self.bodies += body

    def union(self, name: str) -> None:
        u = self.schema.unions[name]
        fn = _snake(name)
        body = [
            f"bool js_{fn}(js::Reader& r, {name}& o, std::uint64_t level, const char* expected) {{",
            "    if (!r.object(expected)) return false;",
            "    const std::size_t start = r.pos();",
            "    bool first = true;",
            "    bool done = false;",
            "    std::string_view key;",
            "    for (std::size_t i = 0;; ++i) {",
            "        if (!r.member(first, done, key)) return false;",
            '        if (done) return r.missing("kind");',
            '        if (key != "kind") {',
            "            if (!r.skip(level)) return false;",
            "            continue;",
            "        }",
            "        std::string_view tag;",
            '        if (!r.tag(tag, level)) return r.failure().field("kind");',
            "        // The tag first: the members follow it; elsewhere: read them all again from the start.",
            "        const bool again = i != 0;",
            "        if (again) r.seek(start);",
        ]
        for i, var in enumerate(u.variants):
            body += [
                f'        if (tag == "{var.name}") {{',
                f"            return js_{_snake(var.type)}_members(r, o.value.emplace<{i}>(), again, level);",
                "        }",
            ]
        body += [
            "        r.invalid_tag(tag);",
            '        return r.failure().field("kind");',
            "    }",
            "}",
            "",
        ]
        self.bodies += body

    def list_fn(self, key: str, item: TypeRef) -> list[str]:
        ct = self.v.ctype(item)
        lines = [
            f"bool js_{key}(js::Reader& r, std::vector<{ct}>& out, std::uint64_t level) {{",
            "    (void)level;",
            '    if (!r.array("array")) return false;',
            "    out.clear();",
            "    bool first = true;",
            "    bool done = false;",
            "    for (std::size_t i = 0;; ++i) {",
            "        if (!r.item(first, done)) return false;",
            "        if (done) return true;",
        ]
        if item.kind == "scalar" and item.name == "bool":
            lines += [
                "        bool b = false;",
                "        if (!r.boolean(b)) return r.failure().index(i);",
                "        out.push_back(b);",
            ]
        else:
            lines += [
                "        out.emplace_back();",
                f"        if (!{self.value(item, 'out.back()', 'level')}) return r.failure().index(i);",
            ]
        lines += ["    }", "}", ""]
        return lines

    def emit(self) -> str:
        schema = self.schema
        v = self.v
        for kind, name in _ordered(schema):
            if kind == "struct":
                self.struct(schema.structs[name])
            else:
                self.union(name)
        lists: list[str] = []
        done: set[str] = set()
        while set(self.lists) - done:
            for key in sorted(set(self.lists) - done):
                lists += self.list_fn(key, self.lists[key])
                done.add(key)
        decls = []
        for kind, name in _ordered(schema):
            fn = _snake(name)
            if kind == "struct":
                decls += [
                    f"bool js_{fn}_members(js::Reader& r, {name}& o, bool first, std::uint64_t level);",
                    f'bool js_{fn}(js::Reader& r, {name}& o, std::uint64_t level, const char* expected = "object");',
                ]
            else:
                decls.append(
                    f'bool js_{fn}(js::Reader& r, {name}& o, std::uint64_t level, const char* expected = "object");'
                )
        for key, item in sorted(self.lists.items()):
            decls.append(f"bool js_{key}(js::Reader& r, std::vector<{v.ctype(item)}>& out, std::uint64_t level);")
        root = schema.root
        out = v.header("the json codec's decoder (spec §3).")
        out += [
            "//",
            "// A struct is an object keyed by field name (members in any order, unknown ones skipped, absent ones",
            '// at their defaults), an enum its value\'s name, a union variant an object whose `"kind"` is the',
            "// variant's name, a float a number or one of the strings NaN, Infinity, -Infinity (spec §3.2).",
            "#include <cstdint>",
            "#include <string_view>",
            "",
            '#include "tracepack/json_reader.hpp"',
            f'#include "tracepack/{schema.module_name}/codecs.hpp"',
            "",
            f"namespace {v.ns} {{",
            "namespace {",
            "",
            "using tracepack::ErrorClass;",
            "",
            "template <typename T>",
            "bool rd_int(js::Reader& r, std::int64_t lo, std::int64_t hi, T& out) {",
            "    std::int64_t v = 0;",
            "    if (!r.i64(lo, hi, v)) return false;",
            "    out = static_cast<T>(v);",
            "    return true;",
            "}",
            "",
            "template <typename T>",
            "bool rd_uint(js::Reader& r, std::uint64_t hi, T& out) {",
            "    std::uint64_t v = 0;",
            "    if (!r.u64(hi, v)) return false;",
            "    out = static_cast<T>(v);",
            "    return true;",
            "}",
            "",
            "template <typename E>",
            "bool rd_enum(js::Reader& r, E& out) {",
            "    std::string_view s;",
            "    if (!r.name(s)) return false;",
            "    if (from_name(s, out)) return true;",
            "    return r.invalid_enum(s);",
            "}",
            "",
            *[f"[[maybe_unused]] {d}" for d in decls],
            "",
            *self.bodies,
            *lists,
            "}  // namespace",
            "",
            f"bool decode_json(std::string_view payload, {root}& out, rt::Failure& failure, const Limits& limits) {{",
            "    js::Reader r(reinterpret_cast<const std::uint8_t*>(payload.data()), payload.size(), failure,",
            "                 limits.max_depth);",
            f"    if (!js_{_snake(root)}(r, out, 1)) return false;",
            "    return r.finish() && js::check_text(payload, failure);",
            "}",
            "",
            f"}}  // namespace {v.ns}",
            "",
        ]
        return "\n".join(out)


# ---------------------------------------------------------------------------------------------------
# flatbuffers_rows.cpp (spec §5)
# ---------------------------------------------------------------------------------------------------


def _slots(schema: Schema, s: Struct) -> list[tuple[str, int, Field]]:
    """``(slot name, inline size, field)`` per FlatBuffers slot (a union takes two: its type first)."""
    ids = fbs_field_ids(s.fields)
    out: list[tuple[str, int, Field]] = []
    for f in s.fields:
        if f.type.kind == "union":
            out.append((f"{f.name}_type", 1, f))
        if f.type.kind == "scalar":
            out.append((f.name, _FB_SIZE[f.type.name], f))
        elif f.type.kind == "enum":
            out.append((f.name, _FB_SIZE[schema.enums[f.type.name].type], f))
        else:
            out.append((f.name, 4, f))
        assert ids[f.name] == len(out) - 1
    return out


class _Flatbuffers:
    """Readers of the row layout: a table per struct, fields by FlatBuffers id (spec §5.2)."""

    def __init__(self, v: _Version) -> None:
        self.v = v
        self.schema = v.schema
        self.vectors: dict[str, TypeRef] = {}
        self.bodies: list[str] = []
        self.specs: list[str] = []

    def spec(self, name: str, slots: list[tuple[str, int]]) -> None:
        const = f"kSpec{name}"
        sizes = ", ".join(str(size) for _, size in slots) or "0"
        names = ", ".join(f'"{n}"' for n, _ in slots) or "nullptr"
        self.specs += [
            f"const std::uint8_t {const}Sizes[] = {{{sizes}}};",
            f"const char* const {const}Names[] = {{{names}}};",
            f'const fb::TableSpec {const} = {{"{name}", {len(slots)}, {const}Sizes, {const}Names}};',
        ]

    def obj(self, t: TypeRef, p: str, x: str) -> str:
        """Decode the object at position ``p`` (known non-zero) into ``x``."""
        if t.kind == "list":
            assert t.item is not None
            it = t.item
            if it.kind == "scalar":
                if it.name == "bool":
                    return f"r.flags({p}, {x})"
                wire = {"f32": "float", "f64": "double"}.get(it.name, _CPP_INT.get(it.name, ""))
                return f"r.scalars<{wire}>({p}, {x})"
            if it.kind == "enum":
                wire = _CPP_INT[self.schema.enums[it.name].type]
                return f'fb_enums<{wire}>(r, {p}, {x}, "{it.name}")'
            if it.kind in ("str", "bytes"):
                return f"r.strings({p}, {x})"
            key = _snake(box_name(it.name)) if it.kind == "union" else _snake(it.name)
            self.vectors[key] = it
            return f"fb_vec_{key}(r, {p}, {x})"
        if t.kind == "str":
            return f"r.string({p}, {x})"
        if t.kind == "bytes":
            return f"r.bytes({p}, {x})"
        return f"fb_{_snake(t.name)}(r, {p}, {x})"

    def struct(self, s: Struct) -> None:
        schema = self.schema
        slots = _slots(schema, s)
        self.spec(s.name, [(n, size) for n, size, _ in slots])
        fn = _snake(s.name)
        body = [
            f"bool fb_{fn}(fb::Reader& r, std::size_t pos, {s.name}& o) {{",
            "    fb::Table t;",
            f"    if (!r.table(pos, kSpec{s.name}, t)) return false;",
        ]
        if not s.fields:
            body.append("    (void)o;")
        for i, (_, _size, f) in enumerate(slots):
            t = f.type
            x = f"o.{cpp_name(f.name)}"
            step = f'r.failure().field("{f.name}")'
            if f.deprecated:
                continue
            if t.kind == "union":
                if slots[i][0].endswith("_type") and i + 1 < len(slots) and slots[i + 1][2] is f:
                    continue
                tag = f"r.scalar<std::uint8_t>(t, {i - 1}, 0)"
                if f.optional:
                    body += [
                        f"    if ({tag} != 0) {{",
                        f"        if (!fb_{_snake(t.name)}(r, {tag}, r.object(t, {i}), {x}.emplace())) return {step};",
                        "    }",
                    ]
                else:
                    body.append(f"    if (!fb_{_snake(t.name)}(r, {tag}, r.object(t, {i}), {x})) return {step};")
            elif t.kind == "enum":
                e = schema.enums[t.name]
                wire = _CPP_INT[e.type]
                enum_default = e.value(str(f.default)).value if f.has_default else 0
                body += [
                    "    {",
                    f"        const {wire} raw = r.scalar<{wire}>(t, {i}, {enum_default});",
                    f"        if (!is_value(raw, &{x})) {{",
                    f'            r.bad_enum(raw, "{t.name}");',
                    f"            return {step};",
                    "        }",
                    "    }",
                ]
            elif t.kind == "scalar":
                if t.name == "bool":
                    dflt = "true" if f.has_default and f.default else "false"
                    body.append(f"    {x} = r.flag(t, {i}, {dflt});")
                elif t.name in ("f32", "f64"):
                    wire = "float" if t.name == "f32" else "double"
                    dflt = _float_literal(f.default) if f.has_default else "0.0"
                    body.append(f"    {x} = r.scalar<{wire}>(t, {i}, static_cast<{wire}>({dflt}));")
                else:
                    dflt = _int_literal(int(f.default), t.name) if f.has_default else "0"  # type: ignore[call-overload]
                    body.append(f"    {x} = r.scalar<{_CPP_INT[t.name]}>(t, {i}, {dflt});")
            else:
                p = f"p{i}"
                if f.optional:
                    body += [
                        f"    if (const std::size_t {p} = r.object(t, {i})) {{",
                        f"        if (!{self.obj(t, p, x + '.emplace()')}) return {step};",
                        "    }",
                    ]
                elif f.required:
                    body += [
                        "    {",
                        f"        const std::size_t {p} = r.object(t, {i});",
                        f"        if (!r.need({p}) || !{self.obj(t, p, x)}) return {step};",
                        "    }",
                    ]
                else:
                    # absent: the default (an empty list, the default string), as initialised
                    body += [
                        f"    if (const std::size_t {p} = r.object(t, {i})) {{",
                        f"        if (!{self.obj(t, p, x)}) return {step};",
                        "    }",
                    ]
        body += ["    return true;", "}", ""]
        self.bodies += body

    def union(self, name: str) -> None:
        u = self.schema.unions[name]
        fn = _snake(name)
        body = [
            f"bool fb_{fn}(fb::Reader& r, unsigned tag, std::size_t pos, {name}& o) {{",
            "    switch (tag) {",
        ]
        for i, var in enumerate(u.variants):
            body += [
                f"        case {var.id}:",
                f"            return r.need(pos) && fb_{_snake(var.type)}(r, pos, o.value.emplace<{i}>());",
            ]
        body += [f'        default: return r.bad_union(tag, "{name}");', "    }", "}", ""]
        self.bodies += body

    def box(self, name: str) -> None:
        box = box_name(name)
        self.spec(box, [("value_type", 1), ("value", 4)])
        self.bodies += [
            f"// One {name} in a table, so that vectors of them work in FlatBuffers (spec §5.2).",
            f"bool fb_{_snake(box)}(fb::Reader& r, std::size_t pos, {name}& o) {{",
            "    fb::Table t;",
            f"    if (!r.table(pos, kSpec{box}, t)) return false;",
            f"    return fb_{_snake(name)}(r, r.scalar<std::uint8_t>(t, 0, 0), r.object(t, 1), o);",
            "}",
            "",
        ]

    def vector_fn(self, key: str, item: TypeRef) -> list[str]:
        ct = self.v.ctype(item)
        return [
            f"bool fb_vec_{key}(fb::Reader& r, std::size_t pos, std::vector<{ct}>& out) {{",
            "    std::size_t first = 0;",
            "    std::uint32_t count = 0;",
            "    if (!r.offsets(pos, first, count)) return false;",
            "    out.resize(count);",
            "    for (std::uint32_t i = 0; i < count; ++i) {",
            f"        if (!fb_{key}(r, r.offset_at(first, i), out[i])) return r.failure().index(i);",
            "    }",
            "    return true;",
            "}",
            "",
        ]

    def emit(self) -> str:
        schema = self.schema
        v = self.v
        vector_unions = sorted(
            {
                f.type.item.name
                for s in schema.structs.values()
                for f in s.fields
                if f.type.item is not None and f.type.item.kind == "union"
            }
        )
        for kind, name in _ordered(schema):
            if kind == "struct":
                self.struct(schema.structs[name])
            else:
                self.union(name)
                if name in vector_unions:
                    self.box(name)
        vectors: list[str] = []
        for key, item in sorted(self.vectors.items()):
            vectors += self.vector_fn(key, item)
        decls = []
        for kind, name in _ordered(schema):
            fn = _snake(name)
            if kind == "struct":
                decls.append(f"bool fb_{fn}(fb::Reader& r, std::size_t pos, {name}& o);")
            else:
                decls.append(f"bool fb_{fn}(fb::Reader& r, unsigned tag, std::size_t pos, {name}& o);")
                if name in vector_unions:
                    decls.append(f"bool fb_{_snake(box_name(name))}(fb::Reader& r, std::size_t pos, {name}& o);")
        for key, item in sorted(self.vectors.items()):
            decls.append(f"bool fb_vec_{key}(fb::Reader& r, std::size_t pos, std::vector<{v.ctype(item)}>& out);")
        root = schema.root
        out = v.header("the flatbuffers-rows codec's decoder (spec §5).")
        out += [
            "//",
            f"// The wire format is generated/fbs/tracepack-{schema.version}.fbs, slot for slot: a table per struct,",
            "// a union field in two slots (its variant id, then the variant's table), a list of unions as a vector",
            "// of one-field box tables. Every offset is checked by the reader before it is followed (spec §5.5).",
            "#include <cstdint>",
            "",
            '#include "tracepack/flatbuffers.hpp"',
            f'#include "tracepack/{schema.module_name}/codecs.hpp"',
            "",
            f"namespace {v.ns} {{",
            "namespace {",
            "",
            "// A vector of enum values: each must be a value of the enum (spec §5.3; the place is the field's).",
            "template <typename W, typename E>",
            "[[maybe_unused]] bool fb_enums(fb::Reader& r, std::size_t pos, std::vector<E>& out, const char* name) {",
            "    std::vector<W> raw;",
            "    if (!r.scalars<W>(pos, raw)) return false;",
            "    out.resize(raw.size());",
            "    for (std::size_t i = 0; i < raw.size(); ++i) {",
            "        if (!is_value(raw[i], &out[i])) return r.bad_enum(raw[i], name);",
            "    }",
            "    return true;",
            "}",
            "",
            *self.specs,
            "",
            *[f"[[maybe_unused]] {d}" for d in decls],
            "",
            *self.bodies,
            *vectors,
            "}  // namespace",
            "",
            f"bool decode_flatbuffers_rows(std::string_view payload, {root}& out, rt::Failure& failure) {{",
            "    const auto* data = reinterpret_cast<const std::uint8_t*>(payload.data());",
            "    fb::Reader r(data, fb::document_size(data, payload.size()), failure);",
            "    std::size_t root = 0;",
            f'    if (!r.root("{schema.file_identifier}", root)) return false;',
            f"    return fb_{_snake(root)}(r, root, out);",
            "}",
            "",
            f"}}  // namespace {v.ns}",
            "",
        ]
        return "\n".join(out)


# ---------------------------------------------------------------------------------------------------
# validate.cpp (spec §9.4.1)
# ---------------------------------------------------------------------------------------------------


class _Validator:
    """Every reference in range, table columns aligned, tries backwards; the first failure in a fixed
    order, at a place: the exact index where one row is checked, `*` where rows of many parents are
    checked together (`$.graph.nodes[*].inputs[*].name`), `<variant>` for a union's variant."""

    def __init__(self, v: _Version) -> None:
        self.v = v
        self.schema = v.schema
        self.functions: dict[str, list[str]] = {}

    def has_refs(self, t: TypeRef) -> bool:
        if t.kind == "list":
            assert t.item is not None
            return self.has_refs(t.item)
        if t.kind == "struct":
            s = self.schema.structs[t.name]
            return any(f.ref is not None or self.has_refs(f.type) for f in s.fields)
        if t.kind == "union":
            return any(self.has_refs(TypeRef("struct", var.type)) for var in self.schema.unions[t.name].variants)
        return False

    def rows_fn(self, s: Struct) -> str:
        name = f"rows_{_snake(s.name)}"
        if name in self.functions:
            return name
        self.functions[name] = []
        body = [
            f"[[maybe_unused]] bool {name}(const std::vector<const {s.name}*>& rows, const std::string& at, "
            "const Sizes& n, rt::Failure& f) {"
        ]
        for fld in s.fields:
            x = cpp_name(fld.name)
            if fld.ref is not None:
                null = fld.null if fld.null is not None else 0
                if fld.type.kind == "list":
                    body += [
                        "    for (std::size_t i = 0; i < rows.size(); ++i) {",
                        f"        const auto& column = rows[i]->{x};",
                        "        for (std::size_t j = 0; j < column.size(); ++j) {",
                        f"            if (!in_range(column[j], n.{fld.ref}, {null})) {{",
                        f"                return bad_ref(f, column[j], n.{fld.ref}, {null},",
                        f'                               fmt(at, i) + ".{fld.name}[" + std::to_string(j) + "]");',
                        "            }",
                        "        }",
                        "    }",
                    ]
                else:
                    body += [
                        "    for (std::size_t i = 0; i < rows.size(); ++i) {",
                        f"        if (!in_range(rows[i]->{x}, n.{fld.ref}, {null})) {{",
                        f"            return bad_ref(f, rows[i]->{x}, n.{fld.ref}, {null},",
                        f'                           fmt(at + ".{fld.name}", i));',
                        "        }",
                        "    }",
                    ]
            elif self.has_refs(fld.type):
                body += self.nested(fld)
        body += ["    (void)at;", "    (void)n;", "    (void)f;", "    return true;", "}", ""]
        self.functions[name] = body
        return name

    def union_fn(self, union: str) -> str:
        name = f"rows_{_snake(union)}"
        if name in self.functions:
            return name
        self.functions[name] = []
        u = self.schema.unions[union]
        body = [
            f"[[maybe_unused]] bool {name}(const std::vector<const {union}*>& rows, const std::string& at, "
            "const Sizes& n, rt::Failure& f) {"
        ]
        for i, var in enumerate(u.variants):
            if not self.has_refs(TypeRef("struct", var.type)):
                continue
            fn = self.rows_fn(self.schema.structs[var.type])
            body += [
                "    {",
                f"        std::vector<const {var.type}*> of;",
                "        for (const auto* r : rows) {",
                f"            if (r->value.index() == {i}) of.push_back(&std::get<{i}>(r->value));",
                "        }",
                f'        if (!{fn}(of, fmt(at, "*") + "<{var.name}>", n, f)) return false;',
                "    }",
            ]
        body += ["    (void)at;", "    (void)n;", "    (void)f;", "    return true;", "}", ""]
        self.functions[name] = body
        return name

    def nested(self, fld: Field) -> list[str]:
        t = fld.type
        x = cpp_name(fld.name)
        if t.kind == "list":
            assert t.item is not None
            item = t.item
            collect = [
                "        for (const auto* r : rows) {",
                f"            for (const auto& item : r->{x}) sub.push_back(&item);",
                "        }",
            ]
            path = f'child(at, rows.size(), "{fld.name}")'
        else:
            item = t
            cond = f"if (r->{x}) " if fld.optional else ""
            deref = f"&*r->{x}" if fld.optional else f"&r->{x}"
            collect = [
                "        for (const auto* r : rows) {",
                f"            {cond}sub.push_back({deref});",
                "        }",
            ]
            path = f'at + ".{fld.name}"'
        fn = self.rows_fn(self.schema.structs[item.name]) if item.kind == "struct" else self.union_fn(item.name)
        return [
            "    {",
            f"        std::vector<const {item.name}*> sub;",
            *collect,
            f"        if (!{fn}(sub, {path}, n, f)) return false;",
            "    }",
        ]

    def table(self, out: list[str], s: Struct, expr: str, path: str, *, own: str | None, indent: str) -> None:
        rc = s.row_column
        assert rc is not None
        out.append(f"{indent}{{")
        inner = indent + "    "
        out.append(f"{inner}const std::size_t rows = {expr}.{cpp_name(rc.name)}.size();")
        for fld in s.columns:
            if fld is not rc:
                sparse = "true" if fld.sparse else "false"
                out.append(
                    f"{inner}if (!check_column({expr}.{cpp_name(fld.name)}.size(), rows, {sparse},"
                    f' {path} + ".{fld.name}", f)) return false;'
                )
        referenced = {fl.ref for st in self.schema.structs.values() for fl in st.fields if fl.ref is not None}
        if own is not None and own in referenced:
            out.append(f"{inner}if (!check_reserved_row(rows, {path}, f)) return false;")
        if not any(fl.ref is not None for fl in s.fields) and not (own is not None and own in referenced):
            out.append(f"{inner}(void)rows;")
        for fld in s.fields:
            if fld.ref is None:
                continue
            null = fld.null if fld.null is not None else 0
            col = f"{expr}.{cpp_name(fld.name)}"
            if fld.trie:
                out.append(f'{inner}if (!check_trie({col}, {path} + ".{fld.name}", f)) return false;')
            elif fld.type.kind == "list":
                out.append(
                    f"{inner}if (!check_refs({col}, n.{fld.ref}, {null},"
                    f' {path} + ".{fld.name}[{{}}]", f)) return false;'
                )
            else:
                out.append(
                    f"{inner}if (!in_range({col}, n.{fld.ref}, {null})) "
                    f'return bad_ref(f, {col}, n.{fld.ref}, {null}, {path} + ".{fld.name}");'
                )
        out.append(f"{indent}}}")

    def emit(self) -> str:
        schema = self.schema
        v = self.v
        root = schema.root_struct
        targets = schema.ref_targets()
        sizes = [f"    std::size_t {name} = 0;" for name in targets]
        fill = []
        for name, fld in targets.items():
            x = cpp_name(name)
            if fld.type.kind == "list":
                fill.append(f"    n.{name} = doc.{x}.size();")
            else:
                rc = schema.structs[fld.type.name].row_column
                assert rc is not None
                if fld.optional:
                    fill.append(f"    n.{name} = doc.{x} ? doc.{x}->{cpp_name(rc.name)}.size() : 0;")
                else:
                    fill.append(f"    n.{name} = doc.{x}.{cpp_name(rc.name)}.size();")
        body: list[str] = []
        if "strings" in targets:
            body.append('    if (!check_string_table(doc.strings, "$.strings", f)) return false;')
        for fld in root.fields:
            x = cpp_name(fld.name)
            if fld.type.kind == "struct" and schema.structs[fld.type.name].table:
                s = schema.structs[fld.type.name]
                if fld.optional:
                    body.append(f"    if (doc.{x}) {{")
                    self.table(body, s, f"(*doc.{x})", f'std::string("$.{fld.name}")', own=fld.name, indent="        ")
                    body.append("    }")
                else:
                    self.table(body, s, f"doc.{x}", f'std::string("$.{fld.name}")', own=fld.name, indent="    ")
            elif fld.type.kind == "list" and fld.type.item is not None and fld.type.item.kind == "struct":
                s = schema.structs[fld.type.item.name]
                if s.table:
                    body.append(f"    for (std::size_t i = 0; i < doc.{x}.size(); ++i) {{")
                    body.append(f"        const auto& t = doc.{x}[i];")
                    self.table(
                        body, s, "t", f'("$.{fld.name}[" + std::to_string(i) + "]")', own=None, indent="        "
                    )
                    body.append("    }")
                elif self.has_refs(fld.type):
                    fn = self.rows_fn(s)
                    body += [
                        "    {",
                        f"        std::vector<const {s.name}*> rows;",
                        f"        for (const auto& item : doc.{x}) rows.push_back(&item);",
                        f'        if (!{fn}(rows, "$.{fld.name}[{{}}]", n, f)) return false;',
                        "    }",
                    ]
            elif fld.type.kind == "struct" and self.has_refs(fld.type):
                s = schema.structs[fld.type.name]
                fn = self.rows_fn(s)
                if fld.optional:
                    rows = f"std::vector<const {s.name}*> rows; if (doc.{x}) rows.push_back(&*doc.{x});"
                else:
                    rows = f"std::vector<const {s.name}*> rows{{&doc.{x}}};"
                body += [
                    "    {",
                    f"        {rows}",
                    f'        if (!{fn}(rows, "$.{fld.name}", n, f)) return false;',
                    "    }",
                ]
        functions = [ln for fn_body in self.functions.values() for ln in fn_body]
        decls = [ln.replace(" {", ";") for fn_body in self.functions.values() for ln in fn_body[:1]]
        out = v.header("validation (spec §9.4.1).")
        out += [
            "#include <cstdint>",
            "#include <string>",
            "#include <vector>",
            "",
            '#include "tracepack/validate.hpp"',
            f'#include "tracepack/{schema.module_name}/codecs.hpp"',
            "",
            f"namespace {v.ns} {{",
            "namespace {",
            "",
            "using namespace tracepack::check;",
            "",
            "// Row count of every table a reference can point into (an absent optional table has none).",
            "struct Sizes {",
            *sizes,
            "};",
            "",
            *decls,
            "",
            *functions,
            "}  // namespace",
            "",
            f"bool validate(const {root.name}& doc, rt::Failure& f) {{",
            "    Sizes n;",
            *fill,
            *body,
            "    return true;",
            "}",
            "",
            f"}}  // namespace {v.ns}",
            "",
        ]
        return "\n".join(out)


# ---------------------------------------------------------------------------------------------------
# plain.cpp (spec §11.2)
# ---------------------------------------------------------------------------------------------------


class _Plain:
    """The canonical JSON: fields in id order, those at their default left out, enums and union variants
    by name (`kind` first), string references as their text, the string table itself left out."""

    def __init__(self, v: _Version) -> None:
        self.v = v
        self.schema = v.schema
        self.bodies: list[str] = []

    def value(self, f: Field | None, t: TypeRef, x: str, indent: str) -> list[str]:
        ref = f.ref if f is not None else None
        if ref == "strings":
            if t.kind == "list":
                return [
                    f"{indent}w.begin_array();",
                    f"{indent}for (const auto& v : {x}) str_ref(w, s, v);",
                    f"{indent}w.end_array();",
                ]
            return [f"{indent}str_ref(w, s, {x});"]
        if t.kind == "list":
            assert t.item is not None
            it = t.item
            return [
                f"{indent}w.begin_array();",
                f"{indent}for (const auto& v : {x}) {{",
                *self.value(None, it, "v", indent + "    "),
                f"{indent}}}",
                f"{indent}w.end_array();",
            ]
        if t.kind == "scalar":
            if t.name == "bool":
                return [f"{indent}w.boolean({x});"]
            if t.name in ("f32", "f64"):
                return [f"{indent}real(w, {x});"]
            if t.name.startswith("u"):
                return [f"{indent}w.uinteger({x});"]
            return [f"{indent}w.integer({x});"]
        if t.kind in ("str", "bytes"):
            return [f"{indent}w.string({x});"]
        if t.kind == "enum":
            return [f"{indent}w.string(name({x}));"]
        return [f"{indent}p_{_snake(t.name)}({x}, w, s);"]

    def struct(self, s: Struct, root: bool) -> None:
        fn = _snake(s.name)
        body = [
            f"// {s.name}'s members (the caller opened the object).",
            f"void p_{fn}_members(const {s.name}& o, JsonWriter& w, const Strings& s) {{",
        ]
        if not s.fields:
            body += ["    (void)o;", "    (void)w;"]
        for f in s.fields:
            if root and f.name == "strings":
                continue
            x = f"o.{cpp_name(f.name)}"
            cond = self.v.is_default_expr(f, x)
            inner = "        " if cond else "    "
            lines = [f'{inner}w.key("{f.name}");']
            lines += self.value(f, f.type, f"*{x}" if f.optional else x, inner)
            if cond:
                body += [f"    if (!({cond})) {{", *lines, "    }"]
            else:
                body += lines
        body += ["    (void)s;", "}", ""]
        body += [
            f"void p_{fn}(const {s.name}& o, JsonWriter& w, const Strings& s) {{",
            "    w.begin_object();",
            f"    p_{fn}_members(o, w, s);",
            "    w.end_object();",
            "}",
            "",
        ]
        self.bodies += body

    def union(self, name: str) -> None:
        u = self.schema.unions[name]
        fn = _snake(name)
        body = [
            f"void p_{fn}(const {name}& o, JsonWriter& w, const Strings& s) {{",
            "    w.begin_object();",
            '    w.key("kind");',
            "    w.string(o.kind_name());",
            "    switch (o.value.index()) {",
        ]
        for i, var in enumerate(u.variants):
            body.append(f"        case {i}: p_{_snake(var.type)}_members(std::get<{i}>(o.value), w, s); break;")
        body += ["        default: break;", "    }", "    w.end_object();", "}", ""]
        self.bodies += body

    def emit(self) -> str:
        schema = self.schema
        v = self.v
        decls = []
        for kind, name in _ordered(schema):
            fn = _snake(name)
            if kind == "struct":
                self.struct(schema.structs[name], name == schema.root)
                decls += [
                    f"void p_{fn}_members(const {name}& o, JsonWriter& w, const Strings& s);",
                    f"void p_{fn}(const {name}& o, JsonWriter& w, const Strings& s);",
                ]
            else:
                self.union(name)
                decls.append(f"void p_{fn}(const {name}& o, JsonWriter& w, const Strings& s);")
        root = schema.root
        out = v.header("the canonical JSON of `tracepack cat` (spec §11.2).")
        out += [
            "#include <cmath>",
            "#include <cstdint>",
            "#include <string>",
            "#include <vector>",
            "",
            f'#include "tracepack/{schema.module_name}/codecs.hpp"',
            "",
            f"namespace {v.ns} {{",
            "namespace {",
            "",
            "using Strings = std::vector<std::string>;",
            "",
            '// A `ref = "strings"` value: its text when it indexes the table, else the number (a sentinel).',
            "template <typename T>",
            "void str_ref(JsonWriter& w, const Strings& s, T v) {",
            "    if constexpr (std::is_signed_v<T>) {",
            "        if (v >= 0 && static_cast<std::uint64_t>(v) < s.size()) {",
            "            w.string(s[static_cast<std::size_t>(v)]);",
            "        } else {",
            "            w.integer(static_cast<std::int64_t>(v));",
            "        }",
            "    } else {",
            "        if (static_cast<std::uint64_t>(v) < s.size()) {",
            "            w.string(s[static_cast<std::size_t>(v)]);",
            "        } else {",
            "            w.uinteger(static_cast<std::uint64_t>(v));",
            "        }",
            "    }",
            "}",
            "",
            "// A float: a number, or the json codec's names for what JSON has no number for (spec §3.2).",
            "[[maybe_unused]] void real(JsonWriter& w, double x) {",
            "    if (std::isnan(x)) {",
            '        w.string("NaN");',
            "    } else if (std::isinf(x)) {",
            '        w.string(x > 0 ? "Infinity" : "-Infinity");',
            "    } else {",
            "        w.real(x);",
            "    }",
            "}",
            "",
            *[f"[[maybe_unused]] {d}" for d in decls],
            "",
            *self.bodies,
            "}  // namespace",
            "",
            f"void write_plain(const {root}& doc, JsonWriter& writer) {{",
            f"    p_{_snake(root)}(doc, writer, doc.strings);",
            "}",
            "",
            f"}}  // namespace {v.ns}",
            "",
        ]
        return "\n".join(out)


# ---------------------------------------------------------------------------------------------------
# columnar.cpp (spec §6)
# ---------------------------------------------------------------------------------------------------


def _range_words(lo: int | None, hi: int | None) -> str:
    if lo is None and hi is None:
        return "integers"
    if lo is None:
        return f"integers <= {hi}"
    if hi is None:
        return f"integers >= {lo}"
    return f"integers in {lo}..{hi}"


def _int_limits(name: str) -> tuple[int | None, int | None]:
    """The bounds the reference model gives an integer type (u64 has no upper one: MessagePack's)."""
    lo, hi = INT_RANGES[name]
    return lo, (None if name == "u64" else hi)


def column_paths(schema: Schema) -> list[str]:
    """Every column path of the version's documents, in plan order (spec §6.2)."""
    out: list[str] = []

    def node(t: TypeRef, path: str, optional: bool) -> None:
        if t.kind == "list":
            assert t.item is not None
            out.append(path + "#len")
            node(t.item, path + "[]", False)
        elif t.kind == "union":
            out.append(path + "#tag")
            for var in schema.unions[t.name].variants:
                struct(schema.structs[var.type], f"{path}<{var.id}>")
        elif t.kind == "struct":
            if optional:
                out.append(path + "#present")
            struct(schema.structs[t.name], path)
        else:
            out.append(path)

    def struct(s: Struct, path: str) -> None:
        for f in s.fields:
            node(f.type, f"{path}.{f.name}", f.optional)

    struct(schema.root_struct, "$")
    return out


def column_numbers(schemas: list[Schema]) -> list[str]:
    """Layout 2's path numbers (spec §6.3): the released versions' paths, each release's new ones appended."""
    paths: list[str] = []
    seen: set[str] = set()
    for schema in sorted((s for s in schemas if s.status == "released"), key=lambda s: (s.major, s.minor)):
        for path in column_paths(schema):
            if path not in seen:
                seen.add(path)
                paths.append(path)
    return paths


class _Columnar:
    """Rows from columns: a function per struct, union and list type, given its path and its row count,
    reading its columns and building its rows in the order of spec §6.5."""

    def __init__(self, v: _Version) -> None:
        self.v = v
        self.schema = v.schema
        self.bodies: list[str] = []
        self.lists: dict[str, TypeRef] = {}

    def what(self, t: TypeRef) -> str:
        if t.kind == "enum":
            e = self.schema.enums[t.name]
            return f"{e.name} values " + ", ".join(f"{val.value} ({val.name})" for val in e.values)
        if t.kind == "scalar" and t.name in INT_RANGES:
            return _range_words(*_int_limits(t.name))
        if t.kind == "scalar":
            return "booleans" if t.name == "bool" else "numbers"
        return "strings"

    def leaf(self, t: TypeRef, path: str, n: str, tmp: str) -> list[str]:
        """Read leaf column ``path`` (a C++ expression) of ``n`` rows into ``tmp``; ``tmp_found``."""
        ct = self.v.ctype(t)
        if t.kind == "enum":
            e = self.schema.enums[t.name]
            allowed = ", ".join(str(val.value) for val in e.values)
            return [
                f"std::vector<std::int64_t> {tmp}_raw;",
                f'if (!r.enums({path}, {n}, {{{allowed}}}, "{self.what(t)}", {tmp}_raw, {tmp}_found)) return false;',
                f"std::vector<{ct}> {tmp};",
                f"for (auto x : {tmp}_raw) {tmp}.push_back(static_cast<{ct}>(x));",
            ]
        if t.kind == "scalar" and t.name in INT_RANGES:
            lo, hi = _int_limits(t.name)
            if t.name.startswith("u"):
                bound = "UINT64_MAX" if hi is None else f"{hi}ULL"
                call = f'r.uints({path}, {n}, {bound}, true, "{self.what(t)}", {tmp}_raw, {tmp}_found)'
                raw = "std::uint64_t"
            else:
                lo_s = "INT64_MIN" if lo == INT_RANGES["i64"][0] else str(lo)
                hi_s = "INT64_MAX" if hi == INT_RANGES["i64"][1] else str(hi)
                call = f'r.ints({path}, {n}, {lo_s}, {hi_s}, true, "{self.what(t)}", {tmp}_raw, {tmp}_found)'
                raw = "std::int64_t"
            return [
                f"std::vector<{raw}> {tmp}_raw;",
                f"if (!{call}) return false;",
                f"std::vector<{ct}> {tmp}({tmp}_raw.begin(), {tmp}_raw.end());",
            ]
        if t.kind == "scalar" and t.name == "bool":
            return [f"std::vector<bool> {tmp};", f"if (!r.bools({path}, {n}, {tmp}, {tmp}_found)) return false;"]
        if t.kind == "scalar":
            return [f"std::vector<double> {tmp};", f"if (!r.floats({path}, {n}, {tmp}, {tmp}_found)) return false;"]
        return [f"std::vector<std::string> {tmp};", f"if (!r.strings({path}, {n}, {tmp}, {tmp}_found)) return false;"]

    def own(self, f: Field, path: str) -> str:
        """A field's own column (spec §6.2): the one that says whether it is stored."""
        t = f.type
        if t.kind == "list":
            return f'{path} + "#len"'
        if t.kind == "union":
            return f'{path} + "#tag"'
        if t.kind == "struct" and f.optional:
            return f'{path} + "#present"'
        return path

    def field(self, f: Field, k: int) -> list[str]:
        """Read field ``f`` of ``n`` rows at ``p.f`` into ``v{k}`` (a vector of ``n`` values)."""
        t = f.type
        path = f'p + ".{f.name}"'
        tmp = f"v{k}"
        ct = self.v.field_type(f)
        lines = [] if t.kind == "struct" and not f.optional else [f"bool {tmp}_found = true;"]
        if t.kind == "list":
            assert t.item is not None
            key = self.list_key(t.item)
            lines += [f"std::vector<{ct}> {tmp};", f"if (!cl_{key}(r, {path}, n, {tmp}, {tmp}_found)) return false;"]
        elif t.kind == "union":
            fn = f"cl_{_snake(t.name)}"
            lines += [
                f"std::vector<{ct}> {tmp};",
                f"if (!{fn}(r, {path}, n, {'true' if f.optional else 'false'}, {tmp}, {tmp}_found)) return false;",
            ]
        elif t.kind == "struct" and f.optional:
            lines += [
                f"std::vector<{ct}> {tmp};",
                f"if (!cl_optional_{_snake(t.name)}(r, {path}, n, {tmp}, {tmp}_found)) return false;",
            ]
        elif t.kind == "struct":
            lines += [f"std::vector<{ct}> {tmp};", f"if (!cl_{_snake(t.name)}(r, {path}, n, {tmp})) return false;"]
        else:
            lines += self.leaf(t, path, "n", tmp)
        if t.kind == "struct" and not f.optional:
            return lines
        # absent: the default in every row (at most one per payload byte), or refused
        if f.required:
            lines.append(f"if (!{tmp}_found) return r.missing({self.own(f, path)}, n, true);")
        else:
            default = self.v.default(f).removeprefix(" = ")
            fill = f"{tmp}.assign(static_cast<std::size_t>(n), {ct}{{{default}}});"
            if t.kind == "scalar" and t.name == "bool":
                fill = f"{tmp}.assign(static_cast<std::size_t>(n), {default or 'false'});"
            lines += [
                f"if (!{tmp}_found) {{",
                f"    if (!r.rows({self.own(f, path)}, n)) return false;",
                f"    {fill}",
                "}",
            ]
        return lines

    def list_key(self, item: TypeRef) -> str:
        key = f"list_{item.name if item.kind == 'scalar' else _snake(item.name)}"
        self.lists[key] = item
        return key

    def struct(self, s: Struct) -> None:
        fn = _snake(s.name)
        body = [
            f"bool cl_{fn}(col::Source& r, const std::string& p, col::u128 n, std::vector<{s.name}>& out) {{",
            "    out.clear();",
            "    if (n == 0) return true;",
        ]
        if not s.fields:
            body += [
                "    if (!r.rows(p, n)) return false;",
                "    out.resize(static_cast<std::size_t>(n));",
                "    return true;",
                "}",
                "",
            ]
            self.bodies += body
            return
        for k, f in enumerate(s.fields):
            body += [f"    // {f.name}"] + [f"    {ln}" for ln in self.field(f, k)]
        body += ["    out.resize(static_cast<std::size_t>(n));", "    for (std::size_t i = 0; i < out.size(); ++i) {"]
        for k, f in enumerate(s.fields):
            x = cpp_name(f.name)
            if f.type.kind == "scalar" and f.type.name == "bool":
                body.append(f"        out[i].{x} = v{k}[i];")
            else:
                body.append(f"        out[i].{x} = std::move(v{k}[i]);")
        body += ["    }", "    return true;", "}", ""]
        self.bodies += body

    def optional(self, name: str) -> None:
        fn = _snake(name)
        self.bodies += [
            f"// An optional {name} (spec §6.2): `#present`, then the present values' rows at the same path.",
            f"bool cl_optional_{fn}(col::Source& r, const std::string& p, col::u128 n,",
            f"                      std::vector<std::optional<{name}>>& out, bool& found) {{",
            "    out.clear();",
            "    found = true;",
            "    if (n == 0) return true;",
            "    std::vector<bool> flags;",
            '    if (!r.bools(p + "#present", n, flags, found)) return false;',
            "    if (!found) return true;",
            "    col::u128 count = 0;",
            "    for (bool b : flags) count += b;",
            f"    std::vector<{name}> present;",
            f"    if (!cl_{fn}(r, p, count, present)) return false;",
            "    out.resize(flags.size());",
            "    std::size_t next = 0;",
            "    for (std::size_t i = 0; i < flags.size(); ++i) {",
            "        if (flags[i]) out[i] = std::move(present[next++]);",
            "    }",
            "    return true;",
            "}",
            "",
        ]

    def union(self, name: str) -> None:
        u = self.schema.unions[name]
        fn = _snake(name)
        what = "variant ids " + ", ".join(f"{var.id} ({var.type})" for var in u.variants)
        ids = ", ".join(str(var.id) for var in u.variants)
        body = [
            f"// A {name} (spec §6.2): `#tag`, then each variant's rows at `<ID>`, in the order of their tags.",
            "template <typename Out>",
            f"bool cl_{fn}(col::Source& r, const std::string& p, col::u128 n, bool nullable, std::vector<Out>& out,",
            "              bool& found) {",
            "    out.clear();",
            "    found = true;",
            "    if (n == 0) return true;",
            "    std::vector<std::int64_t> tags;",
            f'    const char* what = nullable ? "{what} or nil (none)" : "{what}";',
            f'    if (!r.tags(p + "#tag", n, {{{ids}}}, nullable, what, tags, found)) return false;',
            "    if (!found) return true;",
        ]
        for i, var in enumerate(u.variants):
            body += [
                f"    col::u128 count{i} = 0;",
                f"    for (auto t : tags) count{i} += t == {var.id};",
                f"    std::vector<{var.type}> rows{i};",
                f'    if (count{i} && !cl_{_snake(var.type)}(r, p + "<{var.id}>", count{i}, rows{i})) return false;',
                f"    std::size_t next{i} = 0;",
            ]
        body += [
            "    out.resize(tags.size());",
            "    for (std::size_t i = 0; i < tags.size(); ++i) {",
            "        switch (tags[i]) {",
        ]
        for i, var in enumerate(u.variants):
            body += [
                f"            case {var.id}: {{",
                f"                {name} value;",
                f"                value.value.template emplace<{i}>(std::move(rows{i}[next{i}++]));",
                "                out[i] = std::move(value);",
                "                break;",
                "            }",
            ]
        body += ["            default: break;  // nil: none", "        }", "    }", "    return true;", "}", ""]
        self.bodies += body

    def list_fn(self, key: str, item: TypeRef) -> list[str]:
        ct = self.v.ctype(item)
        lines = [
            f"bool cl_{key}(col::Source& r, const std::string& p, col::u128 n, std::vector<std::vector<{ct}>>& out,",
            "             bool& found) {",
            "    out.clear();",
            "    found = true;",
            "    if (n == 0) return true;",
            "    std::vector<std::uint64_t> lens;",
            '    if (!r.lengths(p + "#len", n, lens, found)) return false;',
            "    if (!found) return true;",
            "    col::u128 total = 0;",
            "    for (auto l : lens) total += l;",
            '    const std::string at = p + "[]";',
        ]
        if item.kind == "struct":
            lines += [
                f"    std::vector<{ct}> items;",
                f"    if (!cl_{_snake(item.name)}(r, at, total, items)) return false;",
            ]
        elif item.kind == "union":
            lines += [
                f"    std::vector<{ct}> items;",
                "    bool items_found = true;",
                f"    if (!cl_{_snake(item.name)}(r, at, total, false, items, items_found)) return false;",
                '    if (!items_found && total) return r.missing(at + "#tag", total, false);',
            ]
        else:
            lines += [
                "    bool items_found = true;",
                *[f"    {ln}" for ln in self.leaf(item, "at", "total", "items")],
                "    if (!items_found && total) return r.missing(at, total, false);",
            ]
        lines += [
            "    out.resize(lens.size());",
            "    std::size_t next = 0;",
            "    for (std::size_t i = 0; i < lens.size(); ++i) {",
            "        out[i].reserve(static_cast<std::size_t>(lens[i]));",
            "        for (std::uint64_t j = 0; j < lens[i]; ++j) out[i].push_back(std::move(items[next++]));",
            "    }",
            "    return true;",
            "}",
            "",
        ]
        return lines

    def emit(self) -> str:
        schema = self.schema
        v = self.v
        optionals = sorted(
            {f.type.name for s in schema.structs.values() for f in s.fields if f.optional and f.type.kind == "struct"}
        )
        decls: list[str] = []
        for kind, name in _ordered(schema):
            fn = _snake(name)
            if kind == "struct":
                self.struct(schema.structs[name])
                decls.append(
                    f"bool cl_{fn}(col::Source& r, const std::string& p, col::u128 n, std::vector<{name}>& out);"
                )
            else:
                self.union(name)
        for name in optionals:
            self.optional(name)
            decls.append(
                f"bool cl_optional_{_snake(name)}(col::Source& r, const std::string& p, col::u128 n, "
                f"std::vector<std::optional<{name}>>& out, bool& found);"
            )
        lists: list[str] = []
        for key, item in sorted(self.lists.items()):
            lists += self.list_fn(key, item)
            decls.append(
                f"bool cl_{key}(col::Source& r, const std::string& p, col::u128 n, "
                f"std::vector<std::vector<{v.ctype(item)}>>& out, bool& found);"
            )
        union_decls = []
        for name in schema.unions:
            union_decls += [
                "template <typename Out>",
                f"bool cl_{_snake(name)}(col::Source& r, const std::string& p, col::u128 n, bool nullable, "
                "std::vector<Out>& out, bool& found);",
            ]
        root = schema.root
        out = v.header("the columnar codec's decoder: rows from columns (spec §6).")
        out += [
            "//",
            "// Each struct, union and list type has a function given its path and row count (spec §6.5): it reads",
            "// its columns (each checked in full first: encoding, types, ranges, enum values, variant ids, count)",
            "// and builds its rows; a field whose own column is absent takes its default in every row.",
            "#include <cstdint>",
            "#include <optional>",
            "#include <string>",
            "#include <vector>",
            "",
            '#include "tracepack/columnar.hpp"',
            '#include "tracepack/fbcolumns.hpp"',
            '#include "tracepack/flatbuffers.hpp"',
            f'#include "tracepack/{schema.module_name}/codecs.hpp"',
            "",
            f"namespace {v.ns} {{",
            "namespace {",
            "",
            *[f"[[maybe_unused]] {d}" for d in decls],
            *union_decls,
            "",
            *self.bodies,
            *lists,
            "}  // namespace",
            "",
            f"bool decode_columnar(std::string_view payload, {root}& out, rt::Failure& failure, const Limits& limits,",
            "                     const char* const* numbers, std::size_t count) {",
            "    col::Reader r(failure, payload.size());",
            "    if (!r.parse(payload, numbers, count, limits)) return false;",
            f"    std::vector<{root}> rows;",
            f'    if (!cl_{_snake(root)}(r, "$", 1, rows)) return false;',
            "    out = std::move(rows[0]);",
            "    return true;",
            "}",
            "",
            "// Codec 4 (spec §7): the Columns buffer without its side index (§7.1, §5.4), its directory checked on",
            "// opening (§7.4), then the same row building as codec 3 on its typed vectors (§7.3).",
            f"bool decode_flatbuffers_columns(std::string_view payload, {root}& out, rt::Failure& failure) {{",
            "    const auto* data = reinterpret_cast<const std::uint8_t*>(payload.data());",
            "    fbcol::Directory directory;",
            "    if (!directory.open(data, fb::document_size(data, payload.size()), failure)) return false;",
            "    fbcol::Columns r(directory, failure, payload.size());",
            f"    std::vector<{root}> rows;",
            f'    if (!cl_{_snake(root)}(r, "$", 1, rows)) return false;',
            "    out = std::move(rows[0]);",
            "    return true;",
            "}",
            "",
            f"}}  // namespace {v.ns}",
            "",
        ]
        return "\n".join(out)


# ---------------------------------------------------------------------------------------------------
# versions.hpp / versions.cpp and the migrations (spec §10)
# ---------------------------------------------------------------------------------------------------


def additive_step(old: Schema, new: Schema) -> list[str]:
    """Why the step ``old`` -> ``new`` is not additive (empty when it only adds, spec §10.4): every
    struct, enum and union of ``old`` is in ``new`` with the same fields (same ids and types) first,
    the same values and variants."""
    problems = []
    for name, s in old.structs.items():
        ns = new.structs.get(name)
        if ns is None:
            problems.append(f"struct {name} is gone")
            continue
        for f in s.fields:
            if f.id >= len(ns.fields):
                problems.append(f"{name}.{f.name} is gone")
                continue
            nf = ns.fields[f.id]
            if (nf.name, str(nf.type), nf.optional) != (f.name, str(f.type), f.optional):
                problems.append(f"{name}.{f.name} changed")
        for nf in ns.fields[len(s.fields) :]:
            if nf.required:
                problems.append(f"{name}.{nf.name} is added without a default")
    for name, e in old.enums.items():
        ne = new.enums.get(name)
        values = {(v.name, v.value) for v in ne.values} if ne is not None else set()
        if ne is None or not {(v.name, v.value) for v in e.values} <= values or ne.type != e.type:
            problems.append(f"enum {name} changed")
    for name, u in old.unions.items():
        nu = new.unions.get(name)
        variants = {(v.name, v.id, v.type) for v in nu.variants} if nu is not None else set()
        if nu is None or not {(v.name, v.id, v.type) for v in u.variants} <= variants:
            problems.append(f"union {name} changed")
    return problems


def _upgrade_functions(old: Schema, new: Schema) -> list[str]:
    """``up_<type>(old&&) -> new`` for every struct and union, field by field (added ones at defaults)."""
    o, n = old.module_name, new.module_name
    out: list[str] = []

    def conv(t: TypeRef, x: str) -> str:
        if t.kind in ("scalar", "str", "bytes"):
            return f"std::move({x})"
        if t.kind == "enum":
            return f"static_cast<{n}::{t.name}>(static_cast<std::underlying_type_t<{o}::{t.name}>>({x}))"
        if t.kind in ("struct", "union"):
            return f"up_{_snake(t.name)}(std::move({x}))"
        assert t.item is not None
        if t.item.kind in ("scalar", "str", "bytes"):
            return f"std::move({x})"
        item = t.item
        return f"up_list(std::move({x}), [](auto&& e) {{ return {conv(item, 'e')}; }})"

    for kind, name in _ordered(old):
        fn = _snake(name)
        if kind == "struct":
            s = old.structs[name]
            out += [f"[[maybe_unused]] {n}::{name} up_{fn}({o}::{name}&& x) {{", f"    {n}::{name} y;"]
            for f in s.fields:
                member = cpp_name(f.name)
                if f.optional:
                    out.append(f"    if (x.{member}) y.{member} = {conv(f.type, f'*x.{member}')};")
                else:
                    out.append(f"    y.{member} = {conv(f.type, f'x.{member}')};")
            if not s.fields:
                out.append("    (void)x;")
            out += ["    return y;", "}", ""]
        else:
            u = old.unions[name]
            nu = new.unions[name]
            out += [
                f"[[maybe_unused]] {n}::{name} up_{fn}({o}::{name}&& x) {{",
                f"    {n}::{name} y;",
                "    switch (x.value.index()) {",
            ]
            for i, var in enumerate(u.variants):
                j = next(k for k, nv in enumerate(nu.variants) if nv.id == var.id)
                out.append(
                    f"        case {i}: y.value.emplace<{j}>(up_{_snake(var.type)}"
                    f"(std::get<{i}>(std::move(x.value)))); break;"
                )
            out += ["        default: break;", "    }", "    return y;", "}", ""]
    return out


def _emit_versions(schemas: list[Schema]) -> dict[str, str]:
    released = [s for s in schemas if s.status == "released"]
    current = max(released, key=lambda s: (s.major, s.minor))
    numbers = column_numbers(schemas)
    sources = ", ".join(s.source for s in schemas)
    head = [
        f"// @generated by tracepack.codegen from {sources}",
        *[f"// sha256 of {s.source}: {s.sha256}" for s in schemas],
        "// Do not edit: change the schema and run `make generate`.",
    ]
    docs = ", ".join(f"{s.module_name}::{s.root}" for s in released)
    hpp = [
        *head,
        "// The schema versions this build reads (spec §10): every release, decoded with its own model and",
        "// migrated to the current one.",
        "#pragma once",
        "",
        "#include <cstdint>",
        "#include <string_view>",
        "#include <variant>",
        "",
        '#include "tracepack/error.hpp"',
        '#include "tracepack/limits.hpp"',
        *[f'#include "tracepack/{s.module_name}/codecs.hpp"' for s in schemas],
        "",
        "namespace tracepack {",
        "",
        "struct SchemaVersion {",
        "    std::uint16_t major;",
        "    std::uint16_t minor;",
        "};",
        "",
        "// The released versions, oldest first; the current one is what readers output (spec §10.1).",
        f"inline constexpr SchemaVersion kReleased[] = {{{', '.join(f'{{{s.major}, {s.minor}}}' for s in released)}}};",
        f"inline constexpr SchemaVersion kCurrent = {{{current.major}, {current.minor}}};",
        f"namespace current = {current.module_name};",
        "",
        "// A decoded document of any released version.",
        f"using AnyDocument = std::variant<{docs}>;",
        "",
        "// Decode `payload` (codec id `codec`) with the model of released version `version`. `supported` is",
        "// false when this build has no decoder for the codec (nothing else is done then).",
        "bool decode_payload(SchemaVersion version, std::uint8_t codec, std::string_view payload,",
        "                    const Limits& limits,",
        "                    AnyDocument& out, rt::Failure& failure, bool& supported);",
        "// The header magic and version the payload itself declares (spec §9.2).",
        "void payload_header(const AnyDocument& doc, std::string_view& magic, SchemaVersion& version);",
        "// Set the header's version (a newer minor read with an older model is that model's version).",
        "void set_payload_version(AnyDocument& doc, SchemaVersion version);",
        "// Validate a document of its own version (spec §9.4.1).",
        "bool validate_any(const AnyDocument& doc, rt::Failure& failure);",
        "// Migrate a document to the current version, one release at a time (spec §10.4).",
        "current::Document upgrade_to_current(AnyDocument&& doc);",
        "// Layout 2's column numbers: the path of each (spec §6.3).",
        f"extern const char* const kColumnPaths[{len(numbers)}];",
        "",
        "}  // namespace tracepack",
        "",
    ]
    cpp = [
        *head,
        '#include "tracepack/versions.hpp"',
        "",
        "#include <utility>",
        "",
        "namespace tracepack {",
        "",
        "namespace {",
        "",
        "template <typename T, typename F>",
        "auto up_list(std::vector<T>&& xs, F&& f) {",
        "    std::vector<decltype(f(std::move(xs[0])))> out;",
        "    out.reserve(xs.size());",
        "    for (auto& x : xs) out.push_back(f(std::move(x)));",
        "    return out;",
        "}",
        "",
        "}  // namespace",
        "",
    ]
    cpp += [
        "// Layout 2's column numbers (spec §6.3): every path of every release, each release's new paths appended.",
        "const char* const kColumnPaths[] = {",
        *[f'    "{path}",  // {i}' for i, path in enumerate(numbers)],
        "};",
        "",
    ]
    steps: list[tuple[Schema, Schema]] = list(pairwise(released))
    for old, new in steps:
        fn = f"upgrade_{old.module_name}_to_{new.module_name}"
        problems = additive_step(old, new)
        if problems:
            cpp += [
                f"// {old.version} -> {new.version} is not additive ({'; '.join(problems)}): written by hand in",
                "// cpp/src/migrations.cpp.",
                f"{new.module_name}::{new.root} {fn}({old.module_name}::{old.root}&& doc);",
                "",
            ]
            continue
        cpp += [
            f"// {old.version} -> {new.version} only adds (spec §10.4): every field moves to the same field,",
            "// every added one is at its default.",
            f"namespace {fn}_detail {{",
            *_upgrade_functions(old, new),
            "}  // namespace " + f"{fn}_detail",
            "",
            f"{new.module_name}::{new.root} {fn}({old.module_name}::{old.root}&& doc) {{",
            f"    return {fn}_detail::up_{_snake(old.root)}(std::move(doc));",
            "}",
            "",
        ]
    cpp += [
        "bool decode_payload(SchemaVersion version, std::uint8_t codec, std::string_view payload,",
        "                    const Limits& limits,",
        "                    AnyDocument& out, rt::Failure& failure, bool& supported) {",
        "    supported = true;",
    ]
    for i, s in enumerate(released):
        m = s.module_name
        cpp += [
            f"    if (version.major == {s.major} && version.minor == {s.minor}) {{",
            f"        auto& doc = out.emplace<{i}>();",
            "        switch (codec) {",
            f"            case 0: return {m}::decode_json(payload, doc, failure, limits);",
            f"            case 1: return {m}::decode_msgpack(payload, doc, failure, limits);",
            f"            case 2: return {m}::decode_flatbuffers_rows(payload, doc, failure);",
            f"            case 3: return {m}::decode_columnar(payload, doc, failure, limits, kColumnPaths,",
            f"                                                {len(numbers)});",
            f"            case 4: return {m}::decode_flatbuffers_columns(payload, doc, failure);",
            "            default: supported = false; return false;",
            "        }",
            "    }",
        ]
    cpp += [
        "    supported = false;",
        "    return false;",
        "}",
        "",
        "void payload_header(const AnyDocument& doc, std::string_view& magic, SchemaVersion& version) {",
        "    std::visit(",
        "        [&](const auto& d) {",
        "            magic = d.header.magic;",
        "            version = {d.header.version.major, d.header.version.minor};",
        "        },",
        "        doc);",
        "}",
        "",
        "void set_payload_version(AnyDocument& doc, SchemaVersion version) {",
        "    std::visit(",
        "        [&](auto& d) {",
        "            d.header.version.major = version.major;",
        "            d.header.version.minor = version.minor;",
        "        },",
        "        doc);",
        "}",
        "",
        "bool validate_any(const AnyDocument& doc, rt::Failure& failure) {",
        "    switch (doc.index()) {",
        *[
            f"        case {i}: return {s.module_name}::validate(std::get<{i}>(doc), failure);"
            for i, s in enumerate(released)
        ],
        "        default: return false;",
        "    }",
        "}",
        "",
        "current::Document upgrade_to_current(AnyDocument&& doc) {",
    ]
    for i, s in enumerate(released):
        chain = f"std::get<{i}>(std::move(doc))"
        for old, new in steps[i:]:
            chain = f"upgrade_{old.module_name}_to_{new.module_name}({chain})"
        cpp += [f"    if (doc.index() == {i}) {{", f"        auto out = {chain};"]
        if s is not current:
            cpp += [
                f"        out.header.version.major = {current.major};",
                f"        out.header.version.minor = {current.minor};",
            ]
        cpp += ["        return out;", "    }"]
    cpp += ["    return {};", "}", "", "}  // namespace tracepack", ""]
    return {"cpp/tracepack/versions.hpp": "\n".join(hpp), "cpp/tracepack/versions.cpp": "\n".join(cpp)}


def emit_cpp(schema: Schema) -> dict[str, str]:
    """Return ``{relative path: text}`` of the version's C++ reader (``generated/cpp/tracepack/vX_Y/``)."""
    for s in schema.structs.values():
        for f in s.fields:
            if (f.type.item or f.type).kind == "bytes":
                # MessagePack bin, base64 in JSON: not written yet (no released schema has a bytes field)
                raise SchemaError(
                    "the C++ reader does not decode `bytes` fields yet: add them to tracepack.codegen.emit_cpp",
                    source=schema.source,
                    where=f"$.structs.{s.name}.fields.{f.name}",
                )
    v = _Version(schema)
    base = f"cpp/tracepack/{schema.module_name}"
    return {
        f"{base}/document.hpp": _emit_document(v),
        f"{base}/codecs.hpp": _emit_codecs_hpp(v),
        f"{base}/msgpack.cpp": _Msgpack(v).emit(),
        f"{base}/json.cpp": _Json(v).emit(),
        f"{base}/flatbuffers_rows.cpp": _Flatbuffers(v).emit(),
        f"{base}/validate.cpp": _Validator(v).emit(),
        f"{base}/plain.cpp": _Plain(v).emit(),
        f"{base}/columnar.cpp": _Columnar(v).emit(),
    }


def emit_cpp_versions(schemas: list[Schema]) -> dict[str, str]:
    """Return ``{relative path: text}`` of ``generated/cpp/tracepack/versions.hpp`` and ``.cpp``."""
    return _emit_versions(schemas)
