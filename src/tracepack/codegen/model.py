"""Stage 2: the intermediate model (IR) of a schema, and the language's rules.

The IR is a small tree of frozen dataclasses::

    Schema
    ├── structs: Struct(name, doc, table, fields: tuple[Field, ...], variant_of)
    │                    └── Field(name, id, type: TypeRef, default, ref, null, trie, ...)
    ├── enums:   Enum(name, doc, type, values: tuple[EnumValue, ...])
    └── unions:  Union(name, doc, variants: tuple[Variant, ...])

``TypeRef`` is a parsed type expression: a scalar (``u32``), ``str``,
``bytes``, ``list[T]`` or the name of a struct, enum or union. Everything an
emitter or the compatibility checker needs is resolved here, so they never
look at TOML. :func:`build_model` enforces every rule of the language and
reports all violations at once, each naming the type and the field.
"""

from __future__ import annotations

import hashlib
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tracepack.codegen.parse import RawSchema, parse_schema_text
from tracepack.errors import SchemaError

__all__ = [
    "INT_RANGES",
    "SCALARS",
    "Enum",
    "EnumValue",
    "Field",
    "Schema",
    "Struct",
    "TypeRef",
    "Union",
    "Variant",
    "build_model",
    "load_schema",
    "load_schema_text",
]

#: Inclusive value ranges of the integer scalars.
INT_RANGES: dict[str, tuple[int, int]] = {
    "u8": (0, 2**8 - 1),
    "u16": (0, 2**16 - 1),
    "u32": (0, 2**32 - 1),
    "u64": (0, 2**64 - 1),
    "i8": (-(2**7), 2**7 - 1),
    "i16": (-(2**15), 2**15 - 1),
    "i32": (-(2**31), 2**31 - 1),
    "i64": (-(2**63), 2**63 - 1),
}
SCALARS = frozenset({"bool", "f32", "f64", *INT_RANGES})

TypeKind = Literal["scalar", "str", "bytes", "list", "struct", "enum", "union"]

_TYPE_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_MEMBER_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_VERSION = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")


@dataclass(frozen=True)
class TypeRef:
    """A resolved type expression."""

    kind: TypeKind
    name: str
    item: TypeRef | None = None

    def __str__(self) -> str:
        return f"list[{self.item}]" if self.item is not None else self.name

    @property
    def is_int(self) -> bool:
        return self.kind == "scalar" and self.name in INT_RANGES

    @property
    def is_int_list(self) -> bool:
        return self.item is not None and self.item.is_int


@dataclass(frozen=True)
class Field:
    """A struct field. ``id`` is its position and FlatBuffers id."""

    name: str
    id: int
    type: TypeRef
    doc: str
    has_default: bool
    default: object
    optional: bool = False
    ref: str | None = None
    null: int | None = None
    trie: bool = False
    sparse: bool = False
    pool: bool = False
    deprecated: bool = False

    @property
    def required(self) -> bool:
        return not self.has_default and not self.optional


@dataclass(frozen=True)
class Struct:
    """A struct (a table when ``table`` is set)."""

    name: str
    doc: str
    fields: tuple[Field, ...]
    table: bool = False
    #: ``(union name, variant name, variant id)`` when the struct is a union variant.
    variant_of: tuple[str, str, int] | None = None

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    @property
    def columns(self) -> tuple[Field, ...]:
        """Row-aligned list fields of a table (``sparse`` ones included, ``pool`` ones not)."""
        return tuple(f for f in self.fields if f.type.kind == "list" and not f.pool)

    @property
    def row_column(self) -> Field | None:
        """The column whose length is the table's row count."""
        for f in self.columns:
            if not f.sparse:
                return f
        return None


@dataclass(frozen=True)
class EnumValue:
    name: str
    value: int
    doc: str
    deprecated: bool = False


@dataclass(frozen=True)
class Enum:
    name: str
    doc: str
    type: str
    values: tuple[EnumValue, ...]

    def value(self, name: str) -> EnumValue:
        for v in self.values:
            if v.name == name:
                return v
        raise KeyError(name)


@dataclass(frozen=True)
class Variant:
    name: str
    id: int
    type: str
    doc: str
    deprecated: bool = False


@dataclass(frozen=True)
class Union:
    name: str
    doc: str
    variants: tuple[Variant, ...]


@dataclass(frozen=True)
class Schema:
    """A whole schema, resolved and checked."""

    name: str
    major: int
    minor: int
    status: str
    root: str
    file_identifier: str
    doc: str
    structs: dict[str, Struct]
    enums: dict[str, Enum]
    unions: dict[str, Union]
    #: Where the schema came from, as shown in generated headers (``schema/tracepack-1.0.toml``).
    source: str
    #: sha256 of the schema file's bytes.
    sha256: str
    text: str = field(repr=False, default="")

    @property
    def version(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def module_name(self) -> str:
        """Python package name of this version's generated code, e.g. ``v1_0``."""
        return f"v{self.major}_{self.minor}"

    @property
    def root_struct(self) -> Struct:
        return self.structs[self.root]

    def ref_targets(self) -> dict[str, Field]:
        """Root fields that ``ref`` may name: the string table and the columnar tables."""
        out: dict[str, Field] = {}
        for f in self.root_struct.fields:
            if (f.type.kind == "list" and f.type.item is not None and f.type.item.kind == "str") or (
                f.type.kind == "struct" and self.structs[f.type.name].table
            ):
                out[f.name] = f
        return out


def _parse_type(text: str, names: dict[str, TypeKind]) -> TypeRef | None:
    text = text.strip()
    if text.startswith("list[") and text.endswith("]"):
        inner = _parse_type(text[5:-1], names)
        if inner is None or inner.kind == "list":
            return None
        return TypeRef("list", "list", inner)
    if text in SCALARS:
        return TypeRef("scalar", text)
    if text in ("str", "bytes"):
        return TypeRef(text, text)  # type: ignore[arg-type]
    kind = names.get(text)
    return TypeRef(kind, text) if kind is not None else None


class _Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, where: str, problem: str) -> None:
        self.items.append(f"{where}: {problem}")


def _check_default(f: Field, raw_default: object, enums: dict[str, Enum], problems: _Problems, where: str) -> None:
    t = f.type
    if t.kind == "list":
        if raw_default != []:
            problems.add(where, "a list field's default must be []")
    elif t.kind == "scalar" and t.name == "bool":
        if not isinstance(raw_default, bool):
            problems.add(where, f"default {raw_default!r} is not a bool")
    elif t.is_int:
        lo, hi = INT_RANGES[t.name]
        if isinstance(raw_default, bool) or not isinstance(raw_default, int) or not lo <= raw_default <= hi:
            problems.add(where, f"default {raw_default!r} is not a {t.name}")
    elif t.kind == "scalar":
        if isinstance(raw_default, bool) or not isinstance(raw_default, (int, float)):
            problems.add(where, f"default {raw_default!r} is not a number")
    elif t.kind in ("str", "bytes"):
        if not isinstance(raw_default, str):
            problems.add(where, f"default {raw_default!r} is not a string")
    elif t.kind == "enum":
        names = {v.name for v in enums[t.name].values}
        if not isinstance(raw_default, str) or raw_default not in names:  # a TOML array or table is not hashable
            problems.add(where, f"default {raw_default!r} is not a value of enum {t.name}")
    else:
        problems.add(where, f"a {t.kind} field cannot have a default; use optional = true")


def build_model(raw: RawSchema, *, source: str, text: str = "", sha256: str = "") -> Schema:
    """Resolve ``raw`` into a :class:`Schema`; raise :class:`SchemaError` listing every broken rule."""
    p = _Problems()
    meta = raw.schema
    m = _VERSION.match(meta.version)
    if m is None:
        p.add("$.schema.version", f"{meta.version!r} is not MAJOR.MINOR")
        major = minor = 0
    else:
        major, minor = int(m.group(1)), int(m.group(2))
    if len(meta.file_identifier) != 4 or not meta.file_identifier.isascii():
        p.add("$.schema.file_identifier", "must be exactly 4 ASCII characters")

    names: dict[str, TypeKind] = {}
    for kind, group in (("struct", raw.structs), ("enum", raw.enums), ("union", raw.unions)):
        for name in group:
            if not _TYPE_NAME.match(name):
                p.add(f"$.{kind}s.{name}", "type names are PascalCase identifiers")
            if name in names:
                p.add(f"$.{kind}s.{name}", f"name already used by a {names[name]}")
            names[name] = kind  # type: ignore[assignment]

    enums: dict[str, Enum] = {}
    for ename, re_ in raw.enums.items():
        lo, hi = INT_RANGES[re_.type]
        seen: dict[int, str] = {}
        values = []
        for vname, rv in re_.values.items():
            where = f"$.enums.{ename}.values.{vname}"
            if not _MEMBER_NAME.match(vname):
                p.add(where, "enum value names are snake_case identifiers")
            if not lo <= rv.value <= hi:
                p.add(where, f"value {rv.value} does not fit {re_.type}")
            if rv.value in seen:
                p.add(where, f"value {rv.value} already used by {seen[rv.value]}")
            seen[rv.value] = vname
            values.append(EnumValue(vname, rv.value, rv.doc.strip(), rv.deprecated))
        if not values:
            p.add(f"$.enums.{ename}", "an enum needs at least one value")
        enums[ename] = Enum(ename, re_.doc.strip(), re_.type, tuple(sorted(values, key=lambda v: v.value)))

    unions: dict[str, Union] = {}
    variant_of: dict[str, tuple[str, str, int]] = {}
    for uname, ru in raw.unions.items():
        ids: dict[int, str] = {}
        variants = []
        for vname, rvar in ru.variants.items():
            where = f"$.unions.{uname}.variants.{vname}"
            if not _MEMBER_NAME.match(vname):
                p.add(where, "variant names are snake_case identifiers")
            if not 1 <= rvar.id <= 255:
                p.add(where, f"id {rvar.id} is outside 1..255")
            if rvar.id in ids:
                p.add(where, f"id {rvar.id} already used by {ids[rvar.id]}")
            ids[rvar.id] = vname
            if names.get(rvar.type) != "struct":
                p.add(where, f"variant type {rvar.type!r} is not a struct")
            elif {"kind", "type"} & set(raw.structs[rvar.type].fields):
                p.add(
                    where,
                    f"struct {rvar.type} has a field `kind` or `type`, the names msgspec keeps for a variant's tag "
                    "(JSON writes it as `kind`)",
                )
            elif rvar.type in variant_of:
                p.add(where, f"struct {rvar.type} is already a variant of {variant_of[rvar.type][0]}")
            else:
                variant_of[rvar.type] = (uname, vname, rvar.id)
            variants.append(Variant(vname, rvar.id, rvar.type, rvar.doc.strip(), rvar.deprecated))
        if not variants:
            p.add(f"$.unions.{uname}", "a union needs at least one variant")
        unions[uname] = Union(uname, ru.doc.strip(), tuple(sorted(variants, key=lambda v: v.id)))

    structs: dict[str, Struct] = {}
    for sname, rs in raw.structs.items():
        fields = []
        for fname, rf in rs.fields.items():
            where = f"$.structs.{sname}.fields.{fname}"
            if not _MEMBER_NAME.match(fname) or keyword.iskeyword(fname):
                p.add(where, "field names are snake_case identifiers, not Python keywords")
            t = _parse_type(rf.type, names)
            if t is None:
                p.add(where, f"unknown type {rf.type!r}")
                continue
            f = Field(
                name=fname,
                id=rf.id,
                type=t,
                doc=rf.doc.strip(),
                has_default="default" in _present_keys(rf),
                default=rf.default,
                optional=rf.optional,
                ref=rf.ref,
                null=rf.null,
                trie=rf.trie,
                sparse=rf.sparse,
                pool=rf.pool,
                deprecated=rf.deprecated,
            )
            if f.has_default:
                _check_default(f, rf.default, enums, p, where)
            if f.optional and (f.has_default or t.kind not in ("struct", "union")):
                p.add(where, "optional = true is for struct and union fields without a default")
            if f.deprecated and f.required and t.kind in ("struct", "union"):
                p.add(
                    where,
                    "a required struct or union field cannot be deprecated: deprecated fields are not written "
                    "(FlatBuffers has no setter for them) and nothing could be read in its place",
                )
            fields.append(f)
        fields.sort(key=lambda f: f.id)
        for i, f in enumerate(fields):
            if f.id != i:
                p.add(f"$.structs.{sname}", f"field ids must be 0..{len(fields) - 1} without gaps; found {f.id}")
                break
        seen_default = False
        for f in fields:
            if f.required and seen_default:
                p.add(
                    f"$.structs.{sname}.fields.{f.name}",
                    "a required field cannot follow a field with a default (positional codecs append)",
                )
            seen_default = seen_default or not f.required
        structs[sname] = Struct(sname, rs.doc.strip(), tuple(fields), rs.table, variant_of.get(sname))

    schema = Schema(
        name=meta.name,
        major=major,
        minor=minor,
        status=meta.status,
        root=meta.root,
        file_identifier=meta.file_identifier,
        doc=meta.doc.strip(),
        structs=structs,
        enums=enums,
        unions=unions,
        source=source,
        sha256=sha256,
        text=text,
    )
    if names.get(meta.root) != "struct":
        p.add("$.schema.root", f"{meta.root!r} is not a struct")
    else:
        _check_tables(schema, p)
    _check_not_recursive(schema, p)
    if p.items:
        raise SchemaError(
            f"{len(p.items)} problem(s): " + "; ".join(p.items),
            source=source,
        )
    return schema


def _present_keys(rf: object) -> set[str]:
    # msgspec leaves absent optional keys at their default (None); a TOML file cannot spell None,
    # so "default present" is exactly "default is not None".
    return {"default"} if getattr(rf, "default", None) is not None else set()


def _held(schema: Schema, s: Struct) -> list[tuple[str, str]]:
    """``(field, struct)`` for every struct a value of ``s`` holds directly (through lists and unions)."""
    out = []
    for f in s.fields:
        t = f.type.item or f.type
        if t.kind == "struct":
            out.append((f.name, t.name))
        elif t.kind == "union" and t.name in schema.unions:
            out += [(f.name, v.type) for v in schema.unions[t.name].variants]
    return out


def _check_not_recursive(schema: Schema, p: _Problems) -> None:
    """No struct holds itself, however deep: documents are trees of fixed paths (the columnar codec
    shreds one column per path, validation walks them)."""
    for start in schema.structs.values():
        seen: set[str] = set()
        todo = [(t, f) for f, t in _held(schema, start)]
        while todo:
            name, via = todo.pop()
            if name == start.name:
                p.add(f"$.structs.{start.name}.fields.{via}", f"{start.name} holds itself: types cannot be recursive")
                break
            if name in seen or name not in schema.structs:
                continue
            seen.add(name)
            todo += [(t, via) for _, t in _held(schema, schema.structs[name])]


def _check_tables(schema: Schema, p: _Problems) -> None:
    targets = schema.ref_targets()
    for s in schema.structs.values():
        if s.table and s.row_column is None:
            p.add(f"$.structs.{s.name}", "a table needs a list column that is neither sparse nor a pool")
        for f in s.fields:
            where = f"$.structs.{s.name}.fields.{f.name}"
            if (f.sparse or f.pool or f.trie) and not s.table:
                p.add(where, "sparse, pool and trie are for columns of tables (table = true)")
            if (f.sparse or f.pool) and f.type.kind != "list":
                p.add(where, "sparse and pool are for list columns")
            if f.sparse and not f.has_default:
                p.add(where, "a sparse column needs default = []")
            if s.table and f.deprecated and f.type.kind == "list" and not (f.sparse or f.pool):
                p.add(where, "a deprecated column must be sparse: deprecated fields are not written, so it is empty")
            if f.ref is not None:
                if f.ref not in targets:
                    p.add(where, f"ref {f.ref!r} is not a string table or table field of {schema.root}")
                if not (f.type.is_int or f.type.is_int_list):
                    p.add(where, "ref is for integer fields and integer lists")
            if f.null is not None:
                base = f.type.item if f.type.item is not None else f.type
                if f.ref is None or f.null >= 0 or not base.name.startswith("i"):
                    p.add(where, "null is a negative sentinel of a signed ref field")
            if f.trie:
                own = [name for name, t in targets.items() if t.type.name == s.name]
                if f.ref not in own:
                    p.add(where, "a trie column must ref its own table")


def load_schema_text(text: str, *, source: str) -> Schema:
    """Parse and resolve a schema given as text."""
    from tracepack.io.guard import run

    def parse() -> Schema:
        raw = parse_schema_text(text, source=source)
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        return build_model(raw, source=source, text=text, sha256=digest)

    return run(parse, source, SchemaError)  # deep TOML, giant integers: the file's fault, said so


def load_schema(path: str | Path, *, display: str | None = None) -> Schema:
    """Load ``path``; ``display`` is the name used in messages and generated headers."""
    path = Path(path)
    name = display or str(path)
    from tracepack.errors import UsageError
    from tracepack.io.files import read_input

    try:
        data = read_input(path)  # a regular file only: a FIFO or device is refused, not waited on
    except UsageError as exc:
        raise SchemaError(exc.problem, source=name, expected=exc.expected) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SchemaError(f"not UTF-8 at byte {exc.start}", source=name) from None
    from tracepack.io.guard import run

    def parse() -> Schema:
        raw = parse_schema_text(text, source=name)
        return build_model(raw, source=name, text=text, sha256=hashlib.sha256(data).hexdigest())

    return run(parse, name, SchemaError)  # deep TOML, giant integers: the file's fault, said so
