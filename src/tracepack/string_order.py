"""The string table in the order that compresses best: grouped by the field that first refers to each string.

An importer interns strings as it meets them, so the table interleaves a node's name, its target, its
source line, its ``torch_fn`` tag, then the next node's. :func:`group_strings` renumbers the table so
that strings first referred to by the same field path (every node name, then every target, then
every source line...) sit together, in the order the document first refers to them, with every
reference rewritten. Alike strings next to each other are what zstd matches best, and a reference
column then mostly counts up by one. The document means the same; only the numbers change.

Which fields refer to the string table comes from the schema (``ref = "strings"``), so every
reference of every version is rewritten; string 0 (the empty string, "none") and negative
sentinels stay. Lists are replaced, never changed in place (an importer may share one list between
rows).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from tracepack.codegen.model import Schema, Struct, TypeRef, load_schema
from tracepack.resources import schema_dir

__all__ = ["group_strings"]


@cache
def _schema(version: tuple[int, int]) -> Schema:
    major, minor = version
    return load_schema(schema_dir() / f"tracepack-{major}.{minor}.toml", display=f"tracepack-{major}.{minor}.toml")


class _Refs:
    """The string references of one document: where each sits, and each path's references in order."""

    __slots__ = ("by_path", "schema", "seen", "sites")

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.by_path: dict[str, list[int]] = {}
        #: ``(row, field name, is a list)`` of every reference, to rewrite them after.
        self.sites: list[tuple[Any, str, bool]] = []
        #: Rows already walked (a row object met twice is rewritten once).
        self.seen: set[int] = set()

    def struct(self, row: Any, s: Struct, path: str) -> None:
        if id(row) in self.seen:
            return
        self.seen.add(id(row))
        for f in s.fields:
            value = getattr(row, f.name, None)
            if value is None:
                continue
            where = f"{path}.{f.name}"
            if f.ref == "strings":
                is_list = isinstance(value, list)
                self.sites.append((row, f.name, is_list))
                self.by_path.setdefault(where, []).extend(value if is_list else (value,))
            elif f.type.kind != "scalar":
                self.value(value, f.type, where)

    def value(self, value: Any, t: TypeRef, path: str) -> None:
        if t.item is not None:
            if t.item.kind in ("struct", "union") or t.item.item is not None:
                where = path + "[]"
                for v in value:
                    self.value(v, t.item, where)
        elif t.kind == "struct":
            self.struct(value, self.schema.structs[t.name], path)
        elif t.kind == "union" and value is not None:
            name = type(value).__name__
            self.struct(value, self.schema.structs[name], f"{path}<{name}>")


def group_strings(raw: Any, version: tuple[int, int]) -> Any:
    """Renumber ``raw``'s string table (a document of schema ``version``'s model) in place, grouped by
    the field path that first refers to each string; return ``raw``. Unreferenced strings go last."""
    schema = _schema(version)
    refs = _Refs(schema)
    refs.struct(raw, schema.structs[schema.root], "$")
    strings: list[str] = raw.strings
    pos = {0: 0} if strings else {}
    order = [0] if strings else []
    n = len(strings)
    for values in refs.by_path.values():
        for v in values:
            if v not in pos and 0 <= v < n:
                pos[v] = len(order)
                order.append(v)
    if len(order) < n:
        for i in range(n):
            if i not in pos:
                pos[i] = len(order)
                order.append(i)
    if order == list(range(n)):
        return raw
    for row, name, is_list in refs.sites:
        value = getattr(row, name)
        if is_list:
            setattr(row, name, [pos[v] if 0 <= v < n else v for v in value])
        elif 0 <= value < n:
            setattr(row, name, pos[value])
    raw.strings = [strings[i] for i in order]
    return raw
