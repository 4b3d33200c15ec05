"""Hypothesis strategies: schema changes, built from the IR of the newest release with ``dataclasses.replace``.

Each strategy draws a :class:`Mutation`: an OLD and a NEW schema and the
findings the checker must report, exactly (rule id and place). The expected
bump and codecs of each rule are written down by hand in :data:`EXPECTED`
(not read from the checker's own table), so a rule that drifts is caught.
:data:`MUTATIONS` maps a name to ``(rule, strategy)``; every rule of the
checker is the subject of at least one.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tests.schema_check.differential import Identity
from tracepack.codegen.check import load_schemas
from tracepack.codegen.emit_fbs import fbs_field_ids
from tracepack.codegen.model import Enum, EnumValue, Field, Schema, Struct, TypeRef, Union, Variant, build_model
from tracepack.codegen.parse import RawEnum, RawEnumValue, RawField, RawMeta, RawSchema, RawStruct, RawUnion, RawVariant
from tracepack.errors import SchemaError

__all__ = [
    "CHAINS",
    "COMPATIBLE",
    "Chain",
    "EXPECTED",
    "MUTATIONS",
    "Mutation",
    "base_schema",
    "compatible_changes",
    "revalidate",
    "valid",
]

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schema"
ALL = ("json", "msgpack", "flatbuffers-rows", "columnar", "flatbuffers-columns")
#: The column codecs: one column per field path (by name), enum values and variant ids by number.
COLUMNS = ("columnar", "flatbuffers-columns")

#: rule -> (bump, codecs it breaks), written down independently of tracepack.schema_check.rules.
EXPECTED: dict[str, tuple[str, tuple[str, ...]]] = {
    # The name only names generated code (the FlatBuffers namespace): no byte changes.
    "SCHEMA_NAME_CHANGED": ("minor", ()),
    "ROOT_CHANGED": ("major", ALL),
    "FILE_IDENTIFIER_CHANGED": ("major", ("flatbuffers-rows",)),
    "STRUCT_ADDED": ("minor", ()),
    # What held a removed type changed too (a finding of its own); the type itself is not on the wire.
    "STRUCT_REMOVED": ("minor", ()),
    # No codec writes type names.
    "STRUCT_RENAMED": ("minor", ()),
    "ENUM_RENAMED": ("minor", ()),
    "UNION_RENAMED": ("minor", ()),
    # msgspec writes a variant's tag first in its array wherever the struct appears.
    # ... and the column codecs shred an optional tagged struct as a one-variant union.
    "STRUCT_BECAME_VARIANT": ("major", ("msgpack", *COLUMNS)),
    "STRUCT_NO_LONGER_VARIANT": ("major", ("msgpack", *COLUMNS)),
    "ENUM_ADDED": ("minor", ()),
    "ENUM_REMOVED": ("minor", ()),
    "UNION_ADDED": ("minor", ()),
    "UNION_REMOVED": ("minor", ()),
    "FIELD_ADDED": ("minor", ()),
    "FIELD_ADDED_WITHOUT_DEFAULT": ("major", ALL),
    "COLUMN_ADDED_NOT_SPARSE": ("major", ALL),
    "FIELD_REMOVED": ("major", ALL),
    "FIELD_RENAMED": ("major", ("json", *COLUMNS)),
    "FIELD_ID_CHANGED": ("major", ("msgpack", "flatbuffers-rows")),
    "FIELD_FB_ID_CHANGED": ("major", ("flatbuffers-rows",)),
    "FIELD_ID_REUSED": ("forbidden", ALL),
    "FIELD_DEPRECATED_REUSED": ("forbidden", ALL),
    "FIELD_NAME_REUSED": ("forbidden", ALL),
    "FIELD_TYPE_PROMOTED": ("major", ("flatbuffers-rows",)),
    "FIELD_TYPE_CHANGED": ("major", ALL),
    # JSON and FlatBuffers omit a value equal to the default, the FlatBuffers column layout a field
    # whose every row holds it; MessagePack (array-like structs) and columnar write every value.
    "FIELD_DEFAULT_CHANGED": ("forbidden", ("json", "flatbuffers-rows", "flatbuffers-columns")),
    "FIELD_DEFAULT_ADDED": ("major", ("json", "flatbuffers-rows", "flatbuffers-columns")),
    "FIELD_DEFAULT_REMOVED": ("major", ("json", "flatbuffers-rows", "flatbuffers-columns")),
    "FIELD_MADE_OPTIONAL": ("major", ALL),
    "FIELD_MADE_REQUIRED": ("major", ALL),
    "FIELD_DEPRECATED": ("minor", ()),
    "REQUIRED_FIELD_DEPRECATED": ("major", ("flatbuffers-rows",)),
    "FIELD_UNDEPRECATED": ("minor", ()),
    "REQUIRED_FIELD_UNDEPRECATED": ("major", ("flatbuffers-rows",)),
    "CONSTRAINT_TIGHTENED": ("major", ALL),
    "CONSTRAINT_LOOSENED": ("major", ALL),
    "CONSTRAINT_CHANGED": ("major", ALL),
    "ENUM_TYPE_CHANGED": ("major", ("flatbuffers-rows",)),
    "ENUM_VALUE_ADDED": ("minor", ()),
    "ENUM_VALUE_REMOVED": ("major", ALL),
    "ENUM_VALUE_RENAMED": ("major", ("json",)),
    "ENUM_VALUE_RENUMBERED": ("major", ("msgpack", "flatbuffers-rows", *COLUMNS)),
    "ENUM_VALUE_DEPRECATED_REUSED": ("forbidden", ALL),
    "ENUM_VALUE_NUMBER_REUSED": ("forbidden", ALL),
    "ENUM_VALUE_NAME_REUSED": ("forbidden", ("msgpack", "flatbuffers-rows", *COLUMNS)),
    "ENUM_VALUE_DEPRECATED": ("minor", ()),
    "ENUM_VALUE_UNDEPRECATED": ("minor", ()),
    "UNION_VARIANT_ADDED": ("minor", ()),
    "UNION_VARIANT_REMOVED": ("major", ALL),
    "UNION_VARIANT_RENAMED": ("major", ("json",)),
    "UNION_VARIANT_ID_CHANGED": ("major", ("msgpack", "flatbuffers-rows", *COLUMNS)),
    "UNION_VARIANT_TYPE_CHANGED": ("major", ALL),
    "UNION_VARIANT_ID_REUSED": ("forbidden", ALL),
    "UNION_VARIANT_DEPRECATED_REUSED": ("forbidden", ALL),
    "UNION_VARIANT_DEPRECATED": ("minor", ()),
    "UNION_VARIANT_UNDEPRECATED": ("minor", ()),
}


@cache
def base_schema() -> Schema:
    """The IR of the newest released schema (whatever version that is: nothing here names it)."""
    return [s for s in load_schemas(SCHEMA_DIR) if s.status == "released"][-1]


@dataclass(frozen=True)
class Mutation:
    """OLD -> NEW and the findings (rule, where) the checker must report, no more, no fewer.

    ``identity`` names the renames the change means (for the differential test, which follows a
    renamed member's value through the rename); every other member keeps its name.
    """

    old: Schema
    new: Schema
    expect: frozenset[tuple[str, str]]
    identity: Identity = field(default_factory=Identity)

    def __repr__(self) -> str:  # the schemas are huge; the expected findings say what changed
        return f"Mutation(expect={sorted(self.expect)})"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # hypothesis' printer
        p.text(repr(self))


# -- building blocks --------------------------------------------------------------------------------

_SCALAR = {name: TypeRef("scalar", name) for name in ("bool", "u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64")}
_SCALAR["f32"], _SCALAR["f64"] = TypeRef("scalar", "f32"), TypeRef("scalar", "f64")
_STR = TypeRef("str", "str")
#: Widenings: type -> types that hold all its values.
_WIDER = {
    "u8": ["u16", "u32", "u64", "i16", "i32", "i64"],
    "u16": ["u32", "u64", "i32", "i64"],
    "u32": ["u64", "i64"],
    "i8": ["i16", "i32", "i64"],
    "i16": ["i32", "i64"],
    "i32": ["i64"],
    "f32": ["f64"],
}


def list_of(t: TypeRef) -> TypeRef:
    return TypeRef("list", "list", t)


def _fresh(existing: set[str]) -> st.SearchStrategy[str]:
    return st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True).filter(
        lambda s: s not in existing and not keyword.iskeyword(s) and s != "kind"
    )


def _fresh_type(schema: Schema) -> st.SearchStrategy[str]:
    taken = {*schema.structs, *schema.enums, *schema.unions}
    return st.from_regex(r"X[A-Za-z0-9]{0,10}", fullmatch=True).filter(lambda s: s not in taken)


def set_struct(schema: Schema, struct: Struct) -> Schema:
    return replace(schema, structs={**schema.structs, struct.name: struct})


def set_fields(schema: Schema, struct: Struct, fields: list[Field]) -> Schema:
    return set_struct(schema, replace(struct, fields=tuple(sorted(fields, key=lambda f: f.id))))


def set_field(schema: Schema, struct: Struct, old: Field, new: Field) -> Schema:
    return set_fields(schema, struct, [new if f is old else f for f in struct.fields])


def set_enum(schema: Schema, enum: Enum, values: list[EnumValue], **changes: object) -> Schema:
    e = replace(enum, values=tuple(sorted(values, key=lambda v: v.value)), **changes)
    return replace(schema, enums={**schema.enums, enum.name: e})


def set_union(schema: Schema, union: Union, variants: list[Variant]) -> Schema:
    u = replace(union, variants=tuple(sorted(variants, key=lambda v: v.id)))
    return replace(schema, unions={**schema.unions, union.name: u})


def new_field(name: str, id: int, t: TypeRef, *, default: object = None, **kw: object) -> Field:
    return Field(name=name, id=id, type=t, doc="test", has_default=default is not None, default=default, **kw)


def _struct(draw: st.DrawFn, schema: Schema, pred: object = None) -> Struct:
    structs = [s for s in schema.structs.values() if pred is None or pred(s)]
    return draw(st.sampled_from(structs))


def _field(draw: st.DrawFn, schema: Schema, pred: object) -> tuple[Struct, Field]:
    pairs = [(s, f) for s in schema.structs.values() for f in s.fields if pred(s, f)]
    return draw(st.sampled_from(pairs))


def _where(s: Struct, f: Field) -> str:
    return f"{s.name}.{f.name}"


def _no_union(s: Struct) -> bool:
    return all(f.type.kind != "union" for f in s.fields)


def _m(old: Schema, new: Schema, *expect: tuple[str, str], identity: Identity | None = None) -> Mutation:
    return Mutation(old, new, frozenset(expect), identity or Identity())


def _renamed(type_name: str, new: str, old: str) -> Identity:
    return Identity(members=(((type_name, new), old),))


# -- fields ---------------------------------------------------------------------------------------

_DEFAULTED = st.sampled_from(
    [
        (_SCALAR["u32"], 0),
        (_SCALAR["i64"], -1),
        (_SCALAR["bool"], False),
        (_SCALAR["f64"], 0.5),
        (_STR, ""),
        (list_of(_SCALAR["u32"]), []),
        (TypeRef("enum", "StackStyle"), "python"),
    ]
)
_REQUIRED_TYPES = st.sampled_from(
    [_SCALAR["u32"], _SCALAR["i64"], _STR, list_of(_SCALAR["i32"]), TypeRef("struct", "Version")]
)


@st.composite
def field_added(draw: st.DrawFn) -> Mutation:
    """A field with a default (a sparse one in a table) or an optional struct, appended."""
    s0 = base_schema()
    s = _struct(draw, s0)
    name = draw(_fresh({f.name for f in s.fields}))
    if draw(st.booleans()):
        f = new_field(name, len(s.fields), TypeRef("struct", "Producer"), optional=True)
    else:
        t, default = draw(_DEFAULTED)
        f = new_field(name, len(s.fields), t, default=default, sparse=s.table and t.kind == "list")
    return _m(s0, set_fields(s0, s, [*s.fields, f]), ("FIELD_ADDED", _where(s, f)))


@st.composite
def field_added_without_default(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    s = _struct(draw, s0)
    f = new_field(draw(_fresh({f.name for f in s.fields})), len(s.fields), draw(_REQUIRED_TYPES))
    return _m(s0, set_fields(s0, s, [*s.fields, f]), ("FIELD_ADDED_WITHOUT_DEFAULT", _where(s, f)))


@st.composite
def column_added_not_sparse(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    s = _struct(draw, s0, lambda s: s.table)
    f = new_field(draw(_fresh({f.name for f in s.fields})), len(s.fields), list_of(_SCALAR["u32"]), default=[])
    return _m(s0, set_fields(s0, s, [*s.fields, f]), ("COLUMN_ADDED_NOT_SPARSE", _where(s, f)))


@st.composite
def field_removed(draw: st.DrawFn) -> Mutation:
    """A field removed; the fields after it move down one id (and are reported as moved)."""
    s0 = base_schema()
    s, gone = _field(draw, s0, lambda s, f: True)
    kept = [replace(f, id=f.id - 1) if f.id > gone.id else f for f in s.fields if f is not gone]
    moved = [("FIELD_ID_CHANGED", _where(s, f)) for f in s.fields if f.id > gone.id]
    return _m(s0, set_fields(s0, s, kept), ("FIELD_REMOVED", _where(s, gone)), *moved)


@st.composite
def field_renamed(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    s, f = _field(draw, s0, lambda s, f: True)
    g = replace(f, name=draw(_fresh({f.name for f in s.fields})))
    return _m(s0, set_field(s0, s, f, g), ("FIELD_RENAMED", _where(s, g)), identity=_renamed(s.name, g.name, f.name))


@st.composite
def field_ids_swapped(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    s = _struct(draw, s0, lambda s: len(s.fields) >= 2 and _no_union(s))
    a, b = draw(st.lists(st.sampled_from(s.fields), min_size=2, max_size=2, unique_by=lambda f: f.name))
    fields = [replace(a, id=b.id) if f is a else replace(b, id=a.id) if f is b else f for f in s.fields]
    return _m(s0, set_fields(s0, s, fields), ("FIELD_ID_CHANGED", _where(s, a)), ("FIELD_ID_CHANGED", _where(s, b)))


@st.composite
def field_fb_id_shifted(draw: st.DrawFn) -> Mutation:
    """A field becomes a union: every later field's FlatBuffers id moves by one."""
    s0 = base_schema()
    s, f = _field(draw, s0, lambda s, f: f.type.kind != "union" and _no_union(s))
    g = replace(f, type=TypeRef("union", "Argument"), has_default=False, default=None)
    new = set_field(s0, s, f, g)
    ids = fbs_field_ids(new.structs[s.name].fields)
    old_ids = fbs_field_ids(s.fields)
    shifted = [("FIELD_FB_ID_CHANGED", _where(s, h)) for h in s.fields if ids[h.name] != old_ids[h.name]]
    return _m(s0, new, ("FIELD_TYPE_CHANGED", _where(s, g)), *shifted)


@st.composite
def field_id_reused(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    s, f = _field(draw, s0, lambda s, f: f.type.kind != "union")
    t = draw(st.sampled_from([_STR, _SCALAR["f64"], list_of(_SCALAR["bool"])]).filter(lambda t: t != f.type))
    g = new_field(draw(_fresh({f.name for f in s.fields})), f.id, t)
    return _m(s0, set_field(s0, s, f, g), ("FIELD_ID_REUSED", _where(s, g)))


@st.composite
def field_deprecated_reused(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    s, f = _field(draw, s0, lambda s, f: f.type.kind != "union")
    old = set_field(s0, s, f, replace(f, deprecated=True))
    g = replace(f, name=draw(_fresh({f.name for f in s.fields})))
    return _m(old, set_field(s0, s, f, g), ("FIELD_DEPRECATED_REUSED", _where(s, g)))


def _int_field(s: Struct, f: Field) -> bool:
    base = f.type.item or f.type
    return base.name in _WIDER


@st.composite
def field_type_promoted(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    s, f = _field(draw, s0, _int_field)
    base = f.type.item or f.type
    wider = _SCALAR[draw(st.sampled_from(_WIDER[base.name]))]
    g = replace(f, type=list_of(wider) if f.type.kind == "list" else wider)
    return _m(s0, set_field(s0, s, f, g), ("FIELD_TYPE_PROMOTED", _where(s, g)))


@st.composite
def field_type_changed(draw: st.DrawFn) -> Mutation:
    """Narrowed, sign changed, or another kind: never a promotion, never to or from a union."""
    s0 = base_schema()
    s, f = _field(draw, s0, lambda s, f: f.type.kind != "union")
    choices = [*_SCALAR.values(), _STR, list_of(_SCALAR["u8"]), list_of(_STR), TypeRef("struct", "Version")]
    base = f.type.item or f.type
    widen = set(_WIDER.get(base.name, ()))
    t = draw(
        st.sampled_from(choices).filter(
            lambda t: t != f.type and not (t.kind == f.type.kind == "scalar" and t.name in widen)
        )
    )
    g = replace(f, type=t)
    return _m(s0, set_field(s0, s, f, g), ("FIELD_TYPE_CHANGED", _where(s, g)))


def _has_scalar_default(s: Struct, f: Field) -> bool:
    return f.has_default and f.type.kind in ("scalar", "str", "enum")


@st.composite
def field_default_changed(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    s, f = _field(draw, s0, _has_scalar_default)
    if f.type.kind == "enum":
        other = st.sampled_from([v.name for v in s0.enums[f.type.name].values])
    elif f.type.kind == "str":
        other = st.text(max_size=5)
    elif f.type.name == "bool":
        other = st.booleans()
    else:  # a reference's default must point at a row (tables have 3 rows in the samples, strings 4)
        other = st.integers(0, 2) if f.ref is not None else st.integers(0, 100)
    g = replace(f, default=draw(other.filter(lambda d: d != f.default)))
    return _m(s0, set_field(s0, s, f, g), ("FIELD_DEFAULT_CHANGED", _where(s, g)))


@st.composite
def field_default_added(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    s, f = _field(draw, s0, lambda s, f: f.required and f.type.kind in ("scalar", "str", "list"))
    default = [] if f.type.kind == "list" else "" if f.type.kind == "str" else False if f.type.name == "bool" else 0
    g = replace(f, has_default=True, default=default)
    return _m(s0, set_field(s0, s, f, g), ("FIELD_DEFAULT_ADDED", _where(s, g)))


@st.composite
def field_default_removed(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    s, f = _field(draw, s0, lambda s, f: f.has_default and not f.sparse)
    g = replace(f, has_default=False, default=None)
    return _m(s0, set_field(s0, s, f, g), ("FIELD_DEFAULT_REMOVED", _where(s, g)))


@st.composite
def field_made_optional(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    s, f = _field(draw, s0, lambda s, f: f.required and f.type.kind in ("struct", "union"))
    g = replace(f, optional=True)
    return _m(s0, set_field(s0, s, f, g), ("FIELD_MADE_OPTIONAL", _where(s, g)))


@st.composite
def field_made_required(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    s, f = _field(draw, s0, lambda s, f: f.optional)
    g = replace(f, optional=False)
    return _m(s0, set_field(s0, s, f, g), ("FIELD_MADE_REQUIRED", _where(s, g)))


def _deprecation(required: bool, undo: bool) -> st.SearchStrategy[Mutation]:
    @st.composite
    def build(draw: st.DrawFn) -> Mutation:
        s0 = base_schema()
        s, f = _field(draw, s0, lambda s, f: f.required == required)
        dep = replace(f, deprecated=True)
        rule = ("REQUIRED_" if required else "") + ("FIELD_UNDEPRECATED" if undo else "FIELD_DEPRECATED")
        with_dep = set_field(s0, s, f, dep)
        return _m(with_dep, s0, (rule, _where(s, f))) if undo else _m(s0, with_dep, (rule, _where(s, f)))

    return build()


# -- constraints ----------------------------------------------------------------------------------


@st.composite
def constraint_tightened(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    kind = draw(st.sampled_from(["ref", "null_raised", "null_removed", "trie", "sparse", "table"]))
    if kind == "table":
        s = _struct(draw, s0, lambda s: not s.table)
        return _m(s0, set_struct(s0, replace(s, table=True)), ("CONSTRAINT_TIGHTENED", s.name))
    if kind == "ref":
        s, f = _field(draw, s0, lambda s, f: f.ref is None and (f.type.is_int or f.type.is_int_list))
        g = replace(f, ref="strings")
    elif kind == "null_raised":
        s, f = _field(draw, s0, lambda s, f: f.null is not None and f.null < -1)
        g = replace(f, null=f.null + 1)
    elif kind == "null_removed":
        s, f = _field(draw, s0, lambda s, f: f.null is not None)
        g = replace(f, null=None)
    elif kind == "trie":
        s, f = _field(draw, s0, lambda s, f: s.table and f.ref is not None and not f.trie)
        g = replace(f, trie=True)
    else:
        s, f = _field(draw, s0, lambda s, f: f.sparse)
        g = replace(f, sparse=False)
    return _m(s0, set_field(s0, s, f, g), ("CONSTRAINT_TIGHTENED", _where(s, g)))


@st.composite
def constraint_loosened(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    kind = draw(st.sampled_from(["ref", "null_lowered", "null_added", "trie", "sparse", "table"]))
    if kind == "table":
        s = _struct(draw, s0, lambda s: s.table)
        return _m(s0, set_struct(s0, replace(s, table=False)), ("CONSTRAINT_LOOSENED", s.name))
    if kind == "ref":
        s, f = _field(draw, s0, lambda s, f: f.ref is not None)
        g = replace(f, ref=None, null=None)
    elif kind == "null_lowered":
        s, f = _field(draw, s0, lambda s, f: f.null is not None)
        g = replace(f, null=f.null - draw(st.integers(1, 5)))
    elif kind == "null_added":
        s, f = _field(draw, s0, lambda s, f: f.ref is not None and f.null is None)
        g = replace(f, null=-draw(st.integers(1, 5)))
    elif kind == "trie":
        s, f = _field(draw, s0, lambda s, f: f.trie)
        g = replace(f, trie=False)
    else:
        s, f = _field(draw, s0, lambda s, f: s.table and f.type.kind == "list" and not f.sparse)
        g = replace(f, sparse=True)
    return _m(s0, set_field(s0, s, f, g), ("CONSTRAINT_LOOSENED", _where(s, g)))


@st.composite
def constraint_changed(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    if draw(st.booleans()):
        s, f = _field(draw, s0, lambda s, f: f.ref is not None)
        g = replace(f, ref=draw(st.sampled_from(sorted(set(s0.ref_targets()) - {f.ref}))))
    else:
        s, f = _field(draw, s0, lambda s, f: s.table and f.type.kind == "list")
        g = replace(f, pool=not f.pool)
    return _m(s0, set_field(s0, s, f, g), ("CONSTRAINT_CHANGED", _where(s, g)))


# -- enums ----------------------------------------------------------------------------------------


def _enum(draw: st.DrawFn, schema: Schema, min_values: int = 1) -> Enum:
    return draw(st.sampled_from([e for e in schema.enums.values() if len(e.values) >= min_values]))


def _unused_value(e: Enum) -> st.SearchStrategy[int]:
    return st.integers(0, 255).filter(lambda n: n not in {v.value for v in e.values})


@st.composite
def enum_value_added(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    e = _enum(draw, s0)
    v = EnumValue(draw(_fresh({v.name for v in e.values})), draw(_unused_value(e)), "test")
    return _m(s0, set_enum(s0, e, [*e.values, v]), ("ENUM_VALUE_ADDED", f"{e.name}.{v.name}"))


@st.composite
def enum_value_removed(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    e = _enum(draw, s0, 2)
    gone = draw(st.sampled_from(e.values))
    new = set_enum(s0, e, [v for v in e.values if v is not gone])
    return _m(s0, new, ("ENUM_VALUE_REMOVED", f"{e.name}.{gone.name}"))


@st.composite
def enum_value_renumbered(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    e = _enum(draw, s0)
    v = draw(st.sampled_from(e.values))
    w = replace(v, value=draw(_unused_value(e)))
    new = set_enum(s0, e, [w if x is v else x for x in e.values])
    return _m(s0, new, ("ENUM_VALUE_RENUMBERED", f"{e.name}.{v.name}"))


def _rename_enum_defaults(schema: Schema, enum: str, old: str, new: str) -> Schema:
    """Defaults follow a renamed enum value, as they must in a valid schema."""
    for s in schema.structs.values():
        for f in s.fields:
            if f.type.kind == "enum" and f.type.name == enum and f.default == old:
                schema = set_field(
                    schema, schema.structs[s.name], schema.structs[s.name].field(f.name), replace(f, default=new)
                )
    return schema


@st.composite
def enum_value_renamed(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    e = _enum(draw, s0)
    v = draw(st.sampled_from(e.values))
    w = replace(v, name=draw(_fresh({v.name for v in e.values})))
    new = _rename_enum_defaults(set_enum(s0, e, [w if x is v else x for x in e.values]), e.name, v.name, w.name)
    return _m(s0, new, ("ENUM_VALUE_RENAMED", f"{e.name}.{w.name}"), identity=_renamed(e.name, w.name, v.name))


@st.composite
def enum_value_deprecated_reused(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    e = _enum(draw, s0)
    v = draw(st.sampled_from(e.values))
    old = set_enum(s0, e, [replace(v, deprecated=True) if x is v else x for x in e.values])
    w = EnumValue(draw(_fresh({v.name for v in e.values})), v.value, "test")
    new = set_enum(s0, e, [w if x is v else x for x in e.values])
    return _m(old, new, ("ENUM_VALUE_DEPRECATED_REUSED", f"{e.name}.{w.name}"))


@st.composite
def enum_value_deprecation(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    e = _enum(draw, s0)
    v = draw(st.sampled_from(e.values))
    dep = set_enum(s0, e, [replace(v, deprecated=True) if x is v else x for x in e.values])
    if draw(st.booleans()):
        return _m(dep, s0, ("ENUM_VALUE_UNDEPRECATED", f"{e.name}.{v.name}"))
    return _m(s0, dep, ("ENUM_VALUE_DEPRECATED", f"{e.name}.{v.name}"))


@st.composite
def enum_type_changed(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    e = _enum(draw, s0)
    new = set_enum(s0, e, list(e.values), type=draw(st.sampled_from(["u16", "u32"])))
    return _m(s0, new, ("ENUM_TYPE_CHANGED", e.name))


# -- unions ---------------------------------------------------------------------------------------


def _argument() -> Union:
    return base_schema().unions["Argument"]


def _unused_id(u: Union) -> st.SearchStrategy[int]:
    return st.integers(1, 255).filter(lambda n: n not in {v.id for v in u.variants})


@st.composite
def union_variant_added(draw: st.DrawFn) -> Mutation:
    """A new struct and a variant holding it: both additions."""
    s0, u = base_schema(), _argument()
    name = draw(_fresh_type(s0))
    schema = set_struct(s0, Struct(name, "test", (new_field("value", 0, _SCALAR["i64"]),)))
    v = Variant(draw(_fresh({v.name for v in u.variants})), draw(_unused_id(u)), name, "test")
    new = set_union(schema, u, [*u.variants, v])
    return _m(s0, new, ("STRUCT_ADDED", name), ("UNION_VARIANT_ADDED", f"{u.name}.{v.name}"))


@st.composite
def union_variant_removed(draw: st.DrawFn) -> Mutation:
    s0, u = base_schema(), _argument()
    gone = draw(st.sampled_from(u.variants))
    return _m(
        s0,
        set_union(s0, u, [v for v in u.variants if v is not gone]),
        ("UNION_VARIANT_REMOVED", f"{u.name}.{gone.name}"),
    )


@st.composite
def union_variant_id_changed(draw: st.DrawFn) -> Mutation:
    s0, u = base_schema(), _argument()
    v = draw(st.sampled_from(u.variants))
    w = replace(v, id=draw(_unused_id(u)))
    return _m(
        s0,
        set_union(s0, u, [w if x is v else x for x in u.variants]),
        ("UNION_VARIANT_ID_CHANGED", f"{u.name}.{v.name}"),
    )


@st.composite
def union_variant_renamed(draw: st.DrawFn) -> Mutation:
    s0, u = base_schema(), _argument()
    v = draw(st.sampled_from(u.variants))
    w = replace(v, name=draw(_fresh({v.name for v in u.variants})))
    return _m(
        s0,
        set_union(s0, u, [w if x is v else x for x in u.variants]),
        ("UNION_VARIANT_RENAMED", f"{u.name}.{w.name}"),
        identity=_renamed(u.name, w.name, v.name),
    )


@st.composite
def union_variant_type_changed(draw: st.DrawFn) -> Mutation:
    s0, u = base_schema(), _argument()
    v = draw(st.sampled_from(u.variants))
    w = replace(v, type=draw(st.sampled_from(sorted(set(s0.structs) - {v.type}))))
    return _m(
        s0,
        set_union(s0, u, [w if x is v else x for x in u.variants]),
        ("UNION_VARIANT_TYPE_CHANGED", f"{u.name}.{v.name}"),
    )


@st.composite
def union_variant_id_reused(draw: st.DrawFn) -> Mutation:
    s0, u = base_schema(), _argument()
    v = draw(st.sampled_from(u.variants))
    w = Variant(
        draw(_fresh({v.name for v in u.variants})), v.id, draw(st.sampled_from(sorted(set(s0.structs) - {v.type}))), "t"
    )
    return _m(
        s0,
        set_union(s0, u, [w if x is v else x for x in u.variants]),
        ("UNION_VARIANT_ID_REUSED", f"{u.name}.{w.name}"),
    )


@st.composite
def union_variant_deprecated_reused(draw: st.DrawFn) -> Mutation:
    s0, u = base_schema(), _argument()
    v = draw(st.sampled_from(u.variants))
    old = set_union(s0, u, [replace(v, deprecated=True) if x is v else x for x in u.variants])
    w = replace(v, name=draw(_fresh({v.name for v in u.variants})))
    new = set_union(s0, u, [w if x is v else x for x in u.variants])
    return _m(old, new, ("UNION_VARIANT_DEPRECATED_REUSED", f"{u.name}.{w.name}"))


@st.composite
def union_variant_deprecation(draw: st.DrawFn) -> Mutation:
    s0, u = base_schema(), _argument()
    v = draw(st.sampled_from(u.variants))
    dep = set_union(s0, u, [replace(v, deprecated=True) if x is v else x for x in u.variants])
    if draw(st.booleans()):
        return _m(dep, s0, ("UNION_VARIANT_UNDEPRECATED", f"{u.name}.{v.name}"))
    return _m(s0, dep, ("UNION_VARIANT_DEPRECATED", f"{u.name}.{v.name}"))


# -- types and the schema -------------------------------------------------------------------------


@st.composite
def type_added(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    name = draw(_fresh_type(s0))
    kind = draw(st.sampled_from(["struct", "enum", "union"]))
    if kind == "struct":
        new = set_struct(s0, Struct(name, "test", ()))
    elif kind == "enum":
        new = replace(s0, enums={**s0.enums, name: Enum(name, "test", "u8", (EnumValue("a", 0, "t"),))})
    else:
        new = replace(s0, unions={**s0.unions, name: Union(name, "test", (Variant("a", 1, "ArgNone", "t"),))})
    return _m(s0, new, (f"{kind.upper()}_ADDED", name))


@st.composite
def type_removed(draw: st.DrawFn) -> Mutation:
    """A type nothing holds, removed (a type something holds cannot be: the schema would not load)."""
    m = draw(type_added())
    return _m(m.new, m.old, *[(rule.replace("_ADDED", "_REMOVED"), where) for rule, where in m.expect])


@st.composite
def schema_setting_changed(draw: st.DrawFn) -> Mutation:
    s0 = base_schema()
    what = draw(st.sampled_from(["name", "root", "file_identifier"]))
    if what == "name":
        return _m(s0, replace(s0, name="tracepack2"), ("SCHEMA_NAME_CHANGED", "schema.name"))
    if what == "root":
        return _m(
            s0,
            replace(s0, root=draw(st.sampled_from(sorted(set(s0.structs) - {s0.root})))),
            ("ROOT_CHANGED", "schema.root"),
        )
    ident = draw(st.from_regex(r"[A-Z0-9]{4}", fullmatch=True).filter(lambda s: s != s0.file_identifier))
    return _m(s0, replace(s0, file_identifier=ident), ("FILE_IDENTIFIER_CHANGED", "schema.file_identifier"))


def _rename_type(schema: Schema, old: str, new: str) -> Schema:
    """``schema`` with type ``old`` called ``new``, every use following."""

    def t(ref: TypeRef) -> TypeRef:
        if ref.item is not None:
            return TypeRef(ref.kind, ref.name, t(ref.item))
        return TypeRef(ref.kind, new) if ref.name == old and ref.kind in ("struct", "enum", "union") else ref

    structs = {
        (new if k == old else k): replace(
            v, name=new if k == old else k, fields=tuple(replace(f, type=t(f.type)) for f in v.fields)
        )
        for k, v in schema.structs.items()
    }
    enums = {(new if k == old else k): replace(v, name=new if k == old else k) for k, v in schema.enums.items()}
    unions = {
        (new if k == old else k): replace(
            v,
            name=new if k == old else k,
            variants=tuple(replace(x, type=new if x.type == old else x.type) for x in v.variants),
        )
        for k, v in schema.unions.items()
    }
    return replace(schema, structs=structs, enums=enums, unions=unions, root=new if schema.root == old else schema.root)


@st.composite
def type_renamed(draw: st.DrawFn) -> Mutation:
    """A struct, enum or union renamed, every use following: no codec writes type names."""
    s0 = base_schema()
    name = draw(st.sampled_from(sorted([*s0.structs, *s0.enums, *s0.unions])))
    kind = "struct" if name in s0.structs else "enum" if name in s0.enums else "union"
    new_name = draw(_fresh_type(s0))
    return _m(
        s0,
        _rename_type(s0, name, new_name),
        (f"{kind.upper()}_RENAMED", new_name),
        identity=Identity(types=((new_name, name),)),
    )


@cache
def _plain_structs() -> list[str]:
    """Structs that fields hold and that could become variants of Argument (no recursion, no `kind`)."""
    schema, u = base_schema(), _argument()
    held = {(f.type.item or f.type).name for s in schema.structs.values() for f in s.fields}
    out = []
    for name, s in schema.structs.items():
        if name not in held or s.variant_of is not None or {"kind", "type"} & {f.name for f in s.fields}:
            continue
        try:
            revalidate(set_union(schema, u, [*u.variants, Variant("x", 255, name, "t")]))
        except SchemaError:
            continue
        out.append(name)
    return sorted(out)


@st.composite
def struct_variant_changed(draw: st.DrawFn) -> Mutation:
    """A struct that fields hold becomes a variant of Argument too (or stops being one)."""
    s0, u = base_schema(), _argument()
    name = draw(st.sampled_from(_plain_structs()))
    v = Variant(draw(_fresh({v.name for v in u.variants})), draw(_unused_id(u)), name, "test")
    with_variant = revalidate(set_union(s0, u, [*u.variants, v]))  # the struct's variant_of follows
    if draw(st.booleans()):
        return _m(with_variant, s0, ("STRUCT_NO_LONGER_VARIANT", name), ("UNION_VARIANT_REMOVED", f"{u.name}.{v.name}"))
    return _m(s0, with_variant, ("STRUCT_BECAME_VARIANT", name), ("UNION_VARIANT_ADDED", f"{u.name}.{v.name}"))


@st.composite
def float_default_kept(draw: st.DrawFn) -> Mutation:
    """A float field with a NaN or infinite default, unchanged, next to an addition: only the addition."""
    s0 = base_schema()
    s = _struct(draw, s0, lambda s: not s.table)
    default = draw(st.sampled_from([float("nan"), float("inf"), float("-inf"), -0.0]))
    f = new_field(draw(_fresh({f.name for f in s.fields})), len(s.fields), _SCALAR["f64"], default=default)
    old = set_fields(s0, s, [*s.fields, f])
    g = new_field(draw(_fresh({f.name for f in s.fields} | {f.name})), len(s.fields) + 1, _SCALAR["u32"], default=0)
    new = set_fields(s0, s, [*s.fields, replace(f, default=float(str(default))), g])
    return _m(old, new, ("FIELD_ADDED", _where(s, g)))


# -- chains of releases: retired in one, reused in a later one -----------------------------------------


@dataclass(frozen=True)
class Chain(Mutation):
    """OLD -> MIDDLE -> NEW: ``expect`` is what NEW against OLD shows, given MIDDLE in between."""

    middle: Schema | None = None

    def __repr__(self) -> str:
        return f"Chain(expect={sorted(self.expect)})"


@st.composite
def chain_field_reused(draw: st.DrawFn) -> Mutation:
    """The last field of a struct removed (a major release), then its id or name given to another."""
    s0 = base_schema()
    s = _struct(draw, s0, lambda s: len(s.fields) >= 2 and not s.table and _no_union(s))
    gone = s.fields[-1]
    middle = set_fields(s0, s, list(s.fields[:-1]))
    same_name = draw(st.booleans())
    name = gone.name if same_name else draw(_fresh({f.name for f in s.fields}))
    t, default = draw(_DEFAULTED.filter(lambda td: td[0] != gone.type or not same_name))
    again = new_field(name, gone.id, t, default=default)
    rule = "FIELD_NAME_REUSED" if same_name else "FIELD_ID_REUSED"
    new = set_fields(s0, s, [*s.fields[:-1], again])
    return Chain(
        s0, new, frozenset({(rule, _where(s, again))}), retired(s.name, gone.name) if same_name else Identity(), middle
    )


def retired(struct: str, name: str) -> Identity:
    """The field ``name`` of OLD and the field of that name in NEW are two members, not one: the
    release in between retired it (a reader of either side finds no counterpart in the other)."""
    return Identity(members=(((struct, name), f"{name}~retired"), ((struct, f"{name}~new"), name)))


@st.composite
def chain_enum_value_reused(draw: st.DrawFn) -> Mutation:
    """An enum value removed (a major release), then its number or its name given to another."""
    s0 = base_schema()
    e = _enum(draw, s0, 2)
    defaults = {f.default for s in s0.structs.values() for f in s.fields if f.type.name == e.name}
    gone = draw(st.sampled_from([v for v in e.values if v.name not in defaults]))
    middle = set_enum(s0, e, [v for v in e.values if v is not gone])
    if draw(st.booleans()):
        back = EnumValue(draw(_fresh({v.name for v in e.values})), gone.value, "test")
        rule = "ENUM_VALUE_NUMBER_REUSED"
    else:
        back = EnumValue(gone.name, draw(_unused_value(e)), "test")
        rule = "ENUM_VALUE_NAME_REUSED"
    new = set_enum(s0, e, [back if v is gone else v for v in e.values])
    return Chain(s0, new, frozenset({(rule, f"{e.name}.{back.name}")}), Identity(), middle)


@st.composite
def chain_variant_reused(draw: st.DrawFn) -> Mutation:
    """A union variant removed (a major release), then its id given to another variant."""
    s0, u = base_schema(), _argument()
    gone = draw(st.sampled_from(u.variants))
    middle = set_union(s0, u, [v for v in u.variants if v is not gone])
    back = Variant(draw(_fresh({v.name for v in u.variants})), gone.id, gone.type, "test")
    new = set_union(s0, u, [back if v is gone else v for v in u.variants])
    return Chain(s0, new, frozenset({("UNION_VARIANT_ID_REUSED", f"{u.name}.{back.name}")}), Identity(), middle)


#: name -> (the rules the mutation may be reported as, strategy).
MUTATIONS: dict[str, tuple[tuple[str, ...], st.SearchStrategy[Mutation]]] = {
    "field_added": (("FIELD_ADDED",), field_added()),
    "field_added_without_default": (("FIELD_ADDED_WITHOUT_DEFAULT",), field_added_without_default()),
    "column_added_not_sparse": (("COLUMN_ADDED_NOT_SPARSE",), column_added_not_sparse()),
    "field_removed": (("FIELD_REMOVED", "FIELD_ID_CHANGED"), field_removed()),
    "field_renamed": (("FIELD_RENAMED",), field_renamed()),
    "field_ids_swapped": (("FIELD_ID_CHANGED",), field_ids_swapped()),
    "field_fb_id_shifted": (("FIELD_FB_ID_CHANGED", "FIELD_TYPE_CHANGED"), field_fb_id_shifted()),
    "field_id_reused": (("FIELD_ID_REUSED",), field_id_reused()),
    "field_deprecated_reused": (("FIELD_DEPRECATED_REUSED",), field_deprecated_reused()),
    "field_type_promoted": (("FIELD_TYPE_PROMOTED",), field_type_promoted()),
    "field_type_changed": (("FIELD_TYPE_CHANGED",), field_type_changed()),
    "field_default_changed": (("FIELD_DEFAULT_CHANGED",), field_default_changed()),
    "field_default_added": (("FIELD_DEFAULT_ADDED",), field_default_added()),
    "field_default_removed": (("FIELD_DEFAULT_REMOVED",), field_default_removed()),
    "field_made_optional": (("FIELD_MADE_OPTIONAL",), field_made_optional()),
    "field_made_required": (("FIELD_MADE_REQUIRED",), field_made_required()),
    "field_deprecated": (("FIELD_DEPRECATED",), _deprecation(required=False, undo=False)),
    "field_undeprecated": (("FIELD_UNDEPRECATED",), _deprecation(required=False, undo=True)),
    "required_field_deprecated": (("REQUIRED_FIELD_DEPRECATED",), _deprecation(required=True, undo=False)),
    "required_field_undeprecated": (("REQUIRED_FIELD_UNDEPRECATED",), _deprecation(required=True, undo=True)),
    "constraint_tightened": (("CONSTRAINT_TIGHTENED",), constraint_tightened()),
    "constraint_loosened": (("CONSTRAINT_LOOSENED",), constraint_loosened()),
    "constraint_changed": (("CONSTRAINT_CHANGED",), constraint_changed()),
    "enum_type_changed": (("ENUM_TYPE_CHANGED",), enum_type_changed()),
    "enum_value_added": (("ENUM_VALUE_ADDED",), enum_value_added()),
    "enum_value_removed": (("ENUM_VALUE_REMOVED",), enum_value_removed()),
    "enum_value_renamed": (("ENUM_VALUE_RENAMED",), enum_value_renamed()),
    "enum_value_renumbered": (("ENUM_VALUE_RENUMBERED",), enum_value_renumbered()),
    "enum_value_deprecated_reused": (("ENUM_VALUE_DEPRECATED_REUSED",), enum_value_deprecated_reused()),
    "enum_value_deprecation": (("ENUM_VALUE_DEPRECATED", "ENUM_VALUE_UNDEPRECATED"), enum_value_deprecation()),
    "union_variant_added": (("UNION_VARIANT_ADDED", "STRUCT_ADDED"), union_variant_added()),
    "union_variant_removed": (("UNION_VARIANT_REMOVED",), union_variant_removed()),
    "union_variant_renamed": (("UNION_VARIANT_RENAMED",), union_variant_renamed()),
    "union_variant_id_changed": (("UNION_VARIANT_ID_CHANGED",), union_variant_id_changed()),
    "union_variant_type_changed": (("UNION_VARIANT_TYPE_CHANGED",), union_variant_type_changed()),
    "union_variant_id_reused": (("UNION_VARIANT_ID_REUSED",), union_variant_id_reused()),
    "union_variant_deprecated_reused": (("UNION_VARIANT_DEPRECATED_REUSED",), union_variant_deprecated_reused()),
    "union_variant_deprecation": (
        ("UNION_VARIANT_DEPRECATED", "UNION_VARIANT_UNDEPRECATED"),
        union_variant_deprecation(),
    ),
    "type_added": (("STRUCT_ADDED", "ENUM_ADDED", "UNION_ADDED"), type_added()),
    "type_removed": (("STRUCT_REMOVED", "ENUM_REMOVED", "UNION_REMOVED"), type_removed()),
    "schema_setting_changed": (
        ("SCHEMA_NAME_CHANGED", "ROOT_CHANGED", "FILE_IDENTIFIER_CHANGED"),
        schema_setting_changed(),
    ),
    "type_renamed": (("STRUCT_RENAMED", "ENUM_RENAMED", "UNION_RENAMED"), type_renamed()),
    "struct_variant_changed": (
        ("STRUCT_BECAME_VARIANT", "STRUCT_NO_LONGER_VARIANT", "UNION_VARIANT_ADDED", "UNION_VARIANT_REMOVED"),
        struct_variant_changed(),
    ),
    "float_default_kept": (("FIELD_ADDED",), float_default_kept()),
    "chain_field_id_reused": (("FIELD_ID_REUSED", "FIELD_NAME_REUSED"), chain_field_reused()),
    "chain_enum_number_reused": (
        ("ENUM_VALUE_NUMBER_REUSED", "ENUM_VALUE_NAME_REUSED"),
        chain_enum_value_reused(),
    ),
    "chain_variant_id_reused": (("UNION_VARIANT_ID_REUSED",), chain_variant_reused()),
}

#: Mutations whose every finding is minor (or none): each alone, and any mix, needs a minor bump.
COMPATIBLE = [
    "field_added",
    "field_deprecated",
    "field_undeprecated",
    "enum_value_added",
    "enum_value_deprecation",
    "union_variant_added",
    "union_variant_deprecation",
    "type_added",
]


@st.composite
def compatible_changes(draw: st.DrawFn) -> Mutation:
    """Several compatible changes to different types, applied together to the same schema."""
    s0 = base_schema()
    schema = s0
    touched: set[str] = set()
    expect: set[tuple[str, str]] = set()
    forward = ["field_added", "field_deprecated", "enum_value_added", "union_variant_added", "type_added"]
    for name in draw(st.lists(st.sampled_from(forward), min_size=1, max_size=5)):
        m = draw(MUTATIONS[name][1])
        changed = _changed_types(s0, m.new)
        if changed & touched:  # one change per type
            continue
        touched |= changed
        schema = replace(
            schema,
            structs={**schema.structs, **{k: v for k, v in m.new.structs.items() if k in changed}},
            enums={**schema.enums, **{k: v for k, v in m.new.enums.items() if k in changed}},
            unions={**schema.unions, **{k: v for k, v in m.new.unions.items() if k in changed}},
        )
        expect |= m.expect
    return Mutation(s0, schema, frozenset(expect))


def _changed_types(base: Schema, changed: Schema) -> set[str]:
    out = set()
    for group in ("structs", "enums", "unions"):
        b, c = getattr(base, group), getattr(changed, group)
        out |= {name for name, t in c.items() if b.get(name) != t}
    return out


# -- validity ------------------------------------------------------------------------------------------


def revalidate(schema: Schema) -> Schema:
    """``schema`` rebuilt through the language's rules (raises SchemaError if it breaks one).

    Mutations edit the IR directly; rebuilding recomputes what the IR derives (which struct is
    which union's variant) exactly as loading a file would.
    """
    raw = RawSchema(
        schema=RawMeta(
            name=schema.name,
            version=schema.version,
            status="draft" if schema.status != "released" else "released",
            root=schema.root,
            file_identifier=schema.file_identifier,
            doc=schema.doc or "-",
        ),
        structs={
            s.name: RawStruct(
                doc=s.doc or "-",
                table=s.table,
                fields={
                    f.name: RawField(
                        id=f.id,
                        type=str(f.type),
                        doc=f.doc or "-",
                        default=f.default if f.has_default else None,
                        optional=f.optional,
                        ref=f.ref,
                        null=f.null,
                        trie=f.trie,
                        sparse=f.sparse,
                        pool=f.pool,
                        deprecated=f.deprecated,
                    )
                    for f in s.fields
                },
            )
            for s in schema.structs.values()
        },
        enums={
            e.name: RawEnum(
                doc=e.doc or "-",
                type=e.type,  # type: ignore[arg-type]
                values={
                    v.name: RawEnumValue(value=v.value, doc=v.doc or "-", deprecated=v.deprecated) for v in e.values
                },
            )
            for e in schema.enums.values()
        },
        unions={
            u.name: RawUnion(
                doc=u.doc or "-",
                variants={
                    v.name: RawVariant(id=v.id, type=v.type, doc=v.doc or "-", deprecated=v.deprecated)
                    for v in u.variants
                },
            )
            for u in schema.unions.values()
        },
    )
    return build_model(raw, source=schema.source, text=schema.text, sha256=schema.sha256)


def valid(m: Mutation) -> Mutation | None:
    """``m`` with both schemas rebuilt, or None when a mutation broke a rule of the language."""
    try:
        if isinstance(m, Chain):
            assert m.middle is not None
            return replace(m, old=revalidate(m.old), middle=revalidate(m.middle), new=revalidate(m.new))
        return replace(m, old=revalidate(m.old), new=revalidate(m.new))
    except SchemaError:
        return None


#: Mutations that are chains of three releases (``Chain``): the reuse shows against the first only.
CHAINS = ["chain_enum_number_reused", "chain_field_id_reused", "chain_variant_id_reused"]
