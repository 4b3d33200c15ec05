"""A document as plain JSON with its strings resolved (``tracepack cat``).

The ``json`` codec's payload is made for machines: it follows a 48-byte binary container header and
refers to every string by its index in the string table. :func:`to_plain` gives what a person or
``jq`` expects instead: the same document, in the ``json`` codec's shape (fields by name, enums by
name, union variants tagged ``"kind"``), with every string reference (a field the schema declares
``ref = "strings"``) replaced by its text and the string table itself left out. Other references (a
node's ``stack`` row, a frame's ``line`` row) stay numbers: they index the tables next to them.

``tracepack cat --raw`` is the other thing: the container's payload, decompressed, byte for byte, for
``flatc --json``, ``msgpack`` tools or ``zstd``.
"""

from __future__ import annotations

import functools
from typing import Any

import msgspec

from tracepack.codegen.model import Schema, Struct, TypeRef, load_schema
from tracepack.document import Document
from tracepack.resources import schema_dir

__all__ = ["to_plain"]


@functools.cache
def _schema(version: tuple[int, int]) -> Schema:
    major, minor = version
    return load_schema(schema_dir() / f"tracepack-{major}.{minor}.toml", display=f"tracepack-{major}.{minor}.toml")


def _resolve(value: Any, t: TypeRef, ref: str | None, schema: Schema, strings: list[str]) -> Any:
    if ref == "strings":
        if isinstance(value, list):
            return [strings[v] if isinstance(v, int) and 0 <= v < len(strings) else v for v in value]
        return strings[value] if isinstance(value, int) and 0 <= value < len(strings) else value
    if t.item is not None and isinstance(value, list):
        return [_resolve(v, t.item, None, schema, strings) for v in value]
    if t.kind == "struct" and isinstance(value, dict):
        return _struct(value, schema.structs[t.name], schema, strings)
    if t.kind == "union" and isinstance(value, dict):
        kind = value.get("kind")
        for variant in schema.unions[t.name].variants:
            if variant.name == kind:
                return {"kind": kind, **_struct(value, schema.structs[variant.type], schema, strings, skip="kind")}
    return value


def _struct(value: dict[str, Any], s: Struct, schema: Schema, strings: list[str], skip: str = "") -> dict[str, Any]:
    fields = {f.name: f for f in s.fields}
    out: dict[str, Any] = {}
    for key, v in value.items():
        if key == skip:
            continue
        f = fields.get(key)
        out[key] = v if f is None else _resolve(v, f.type, f.ref, schema, strings)
    return out


def to_plain(doc: Document) -> dict[str, Any]:
    """``doc`` as plain JSON values: the ``json`` codec's shape with string references resolved."""
    from tracepack.versions import generated

    schema = _schema(doc.version)
    value = msgspec.to_builtins(generated(doc.version).convert.to_json(doc.raw))
    root = schema.structs[schema.root]
    plain = _struct(value, root, schema, doc.strings)
    plain.pop("strings", None)
    return plain
