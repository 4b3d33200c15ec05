"""FlatBuffers' own Python code (flatc's ``vX_Y/fb/tables.py``) driven generically from the IR.

``read_with_flatc`` walks a buffer through flatc's accessors (``Node.Name()``,
``Node.InputsLength()``, ``NamedArgument.ArgType()``...) and builds our model from
what they return; ``write_with_flatc`` builds a buffer with flatc's builder functions
(``NodeStart``, ``NodeAddName``, ``builder.StartVector``...). Neither shares a line of
code with ``tracepack.codecs._fbrt``, so agreeing with them means agreeing with
FlatBuffers itself.
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType
from typing import Any

import flatbuffers
from flatbuffers.table import Table

from tracepack.codegen.check import load_schemas
from tracepack.codegen.emit_fbs import box_name
from tracepack.codegen.model import Schema, Struct, TypeRef
from tracepack.versions import generated

__all__ = ["read_with_flatc", "schema_of", "write_with_flatc"]

_PREPEND = {
    "bool": "Bool",
    "u8": "Uint8",
    "u16": "Uint16",
    "u32": "Uint32",
    "u64": "Uint64",
    "i8": "Int8",
    "i16": "Int16",
    "i32": "Int32",
    "i64": "Int64",
    "f32": "Float32",
    "f64": "Float64",
}
_SIZE = {"bool": 1, "u8": 1, "i8": 1, "u16": 2, "i16": 2, "u32": 4, "i32": 4, "f32": 4, "u64": 8, "i64": 8, "f64": 8}


@cache
def schema_of(version: tuple[int, int]) -> Schema:
    for s in load_schemas("schema"):
        if (s.major, s.minor) == version:
            return s
    raise LookupError(version)


def _tables(version: tuple[int, int]) -> ModuleType:
    return importlib.import_module(generated(version).__name__ + ".fb.tables")


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def _base(t: TypeRef, schema: Schema) -> str:
    return schema.enums[t.name].type if t.kind == "enum" else t.name


# -- reading --------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, version: tuple[int, int]) -> None:
        self.schema = schema_of(version)
        self.fb = _tables(version)
        self.m = generated(version).model

    def struct(self, obj: Any, s: Struct) -> Any:
        kwargs: dict[str, Any] = {}
        for f in s.fields:
            acc = _camel(f.name)
            t = f.type
            if t.kind == "list":
                assert t.item is not None
                n = getattr(obj, acc + "Length")()
                kwargs[f.name] = [self.item(t.item, getattr(obj, acc)(j)) for j in range(n)]
            elif t.kind == "union":
                kwargs[f.name] = self.union(t.name, getattr(obj, acc + "Type")(), getattr(obj, acc)())
            elif t.kind == "struct":
                sub = getattr(obj, acc)()
                kwargs[f.name] = None if sub is None else self.struct(sub, self.schema.structs[t.name])
            elif t.kind == "str":
                raw = getattr(obj, acc)()
                kwargs[f.name] = f.default if raw is None else raw.decode("utf-8")
            else:
                kwargs[f.name] = self.item(t, getattr(obj, acc)())
        return getattr(self.m, s.name)(**kwargs)

    def item(self, t: TypeRef, value: Any) -> Any:
        if t.kind == "str":
            return value.decode("utf-8")
        if t.kind == "struct":
            return self.struct(value, self.schema.structs[t.name])
        if t.kind == "union":  # a <Union>Box
            return self.union(t.name, value.ValueType(), value.Value())
        if t.kind == "enum":
            return getattr(self.m, t.name)(value)
        if t.name == "bool":
            return bool(value)
        return value

    def union(self, name: str, tag: int, table: Table | None) -> Any:
        variant = next(v for v in self.schema.unions[name].variants if v.id == tag)
        obj = getattr(self.fb, variant.type)()
        assert table is not None
        obj.Init(table.Bytes, table.Pos)
        return self.struct(obj, self.schema.structs[variant.type])


def read_with_flatc(buf: bytes, version: tuple[int, int]) -> Any:
    """Our model of ``buf``'s document, read through flatc's generated accessors only."""
    r = _Reader(version)
    root = r.schema.root
    return r.struct(getattr(r.fb, root).GetRootAs(buf, 0), r.schema.structs[root])


# -- writing --------------------------------------------------------------------------------------


class _Writer:
    def __init__(self, version: tuple[int, int]) -> None:
        self.schema = schema_of(version)
        self.fb = _tables(version)
        self.b = flatbuffers.Builder(1024)

    def fn(self, name: str) -> Any:
        return getattr(self.fb, name)

    def struct(self, o: Any, s: Struct) -> int:
        children: dict[str, Any] = {}
        for f in s.fields:  # children first: FlatBuffers builds bottom up
            v = getattr(o, f.name)
            t = f.type
            if v is None:
                continue
            if t.kind == "list":
                assert t.item is not None
                children[f.name] = self.vector(s, f.name, t.item, v)
            elif t.kind == "str":
                children[f.name] = self.b.CreateString(v)
            elif t.kind == "struct":
                children[f.name] = self.struct(v, self.schema.structs[t.name])
            elif t.kind == "union":
                children[f.name] = self.union(t.name, v)
        self.fn(f"{s.name}Start")(self.b)
        for f in s.fields:
            add = self.fn(f"{s.name}Add{_camel(f.name)}")
            if f.type.kind == "union":
                if f.name in children:
                    tag, at = children[f.name]
                    self.fn(f"{s.name}Add{_camel(f.name)}Type")(self.b, tag)
                    add(self.b, at)
            elif f.name in children:
                add(self.b, children[f.name])
            elif f.type.kind in ("scalar", "enum"):
                add(self.b, getattr(o, f.name))
        return int(self.fn(f"{s.name}End")(self.b))

    def union(self, name: str, o: Any) -> tuple[int, int]:
        variant = next(v for v in self.schema.unions[name].variants if type(o).__name__ == v.type)
        return variant.id, self.struct(o, self.schema.structs[variant.type])

    def vector(self, s: Struct, field: str, item: TypeRef, values: list[Any]) -> int:
        b = self.b
        if item.kind in ("scalar", "enum"):
            base = _base(item, self.schema)
            self.fn(f"{s.name}Start{_camel(field)}Vector")(b, len(values))
            prepend = getattr(b, "Prepend" + _PREPEND[base])
            for v in reversed(values):
                prepend(v)
            return int(b.EndVector())
        if item.kind == "str":
            offsets = [b.CreateString(v) for v in values]
        elif item.kind == "struct":
            offsets = [self.struct(v, self.schema.structs[item.name]) for v in values]
        else:
            box = box_name(item.name)
            offsets = []
            for v in values:
                tag, at = self.union(item.name, v)
                self.fn(f"{box}Start")(b)
                self.fn(f"{box}AddValueType")(b, tag)
                self.fn(f"{box}AddValue")(b, at)
                offsets.append(self.fn(f"{box}End")(b))
        self.fn(f"{s.name}Start{_camel(field)}Vector")(b, len(offsets))
        for at in reversed(offsets):
            b.PrependUOffsetTRelative(at)
        return int(b.EndVector())


def write_with_flatc(raw: Any, version: tuple[int, int]) -> bytes:
    """A FlatBuffer of ``raw`` built with flatc's generated builder functions only."""
    w = _Writer(version)
    schema = w.schema
    root = w.struct(raw, schema.structs[schema.root])
    w.b.Finish(root, file_identifier=schema.file_identifier.encode("ascii"))
    return bytes(w.b.Output())
