"""Where a document's bytes go: encoded and compressed bytes per table and per column.

``tracepack inspect`` shows these so users see what is left after interning and compression. For
the columnar codec and the FlatBuffers column layout the columns are the file's own (one per path,
``$.graph.nodes[].stack``; the column layout's values as they sit in its typed vectors); for the
FlatBuffers row layout they are each table's fields as FlatBuffers objects (a vector, a string, a table), each
written on its own by the version's generated writer; for the other codecs they are each table's
fields (``lines.text``, ``graph.nodes``) encoded with MessagePack. Each column's compressed size is
that column compressed *on its own* with zstd (level 19 by default, with the file's dictionary if it
has one), less zstd's fixed per-frame bytes: about what it costs inside the whole file, where zstd
also finds matches across columns (so the sum is usually a little more than the compressed payload).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import zstandard

__all__ = ["ColumnSize", "column_sizes", "table_sizes"]


@dataclass(frozen=True)
class ColumnSize:
    """One column: its table, its name in the table, encoded and compressed bytes."""

    table: str
    column: str
    raw_bytes: int
    compressed_bytes: int


def _table_of(path: str) -> tuple[str, str]:
    """``$.graph.nodes[].stack`` -> (``graph``, ``nodes[].stack``)."""
    body = path.removeprefix("$.")
    for i, ch in enumerate(body):
        if ch in ".[#<":
            return body[:i], body[i:].lstrip(".")
    return body, ""


def column_sizes(
    raw: Any,
    codec: str,
    version: tuple[int, int],
    *,
    level: int = 19,
    zstd_dict: zstandard.ZstdCompressionDict | None = None,
) -> list[ColumnSize]:
    """Encoded and compressed bytes of every column of ``raw`` (a generated-model Document), as
    ``codec`` (a name of :data:`tracepack.codecs.CODECS` or an alias) lays it out."""
    from tracepack.codecs import resolve

    codec = resolve(codec, where="codec")
    cctx = (
        zstandard.ZstdCompressor(level=level, dict_data=zstd_dict)
        if zstd_dict
        else zstandard.ZstdCompressor(level=level)
    )
    enc = msgspec.msgpack.encode
    frame = len(cctx.compress(b""))  # zstd's own per-frame bytes, not the column's

    def packed(data: bytes) -> int:
        return max(len(cctx.compress(data)) - frame, 0)

    out = []
    if codec == "columnar":
        from tracepack.codecs import columnar

        payload = msgspec.msgpack.decode(columnar.encode(raw, version))
        paths = columnar.path_numbers()[0]
        for key, column in payload["columns"].items():
            path = paths[key] if type(key) is int else key  # layout 2 keys a column by its path's number
            data = enc(column)
            table, name = _table_of(path)
            out.append(ColumnSize(table, name, len(data), packed(data)))
        return out
    if codec == "flatbuffers-rows":
        return _flatbuffers_columns(raw, version, packed)
    if codec == "flatbuffers-columns":
        from tracepack.codecs import fbcolumns

        for path, data in fbcolumns.column_bytes(raw, version).items():
            table, name = _table_of(path)
            out.append(ColumnSize(table, name, len(data), packed(data)))
        return out
    for table in raw.__struct_fields__:
        value = getattr(raw, table)
        fields = getattr(value, "__struct_fields__", None)
        parts = [(f, getattr(value, f)) for f in fields] if fields else [("", value)]
        for name, part in parts:
            data = enc(part)
            out.append(ColumnSize(table, name, len(data), packed(data)))
    return out


def _flatbuffers_columns(raw: Any, version: tuple[int, int], packed: Callable[[bytes], int]) -> list[ColumnSize]:
    """Each table's fields as the FlatBuffers row layout writes them: every object field (a vector, a string,
    a table) written on its own by the version's generated writer, its bytes as they sit in the buffer
    (length prefix and alignment included). A table's own bytes (its vtable offset and inline slots) are
    its column ``""``, counted as they are (a few bytes that zstd cannot shrink)."""
    from tracepack.codecs import _fbrt as rt
    from tracepack.codecs.flatbuffers import codec_module

    module = codec_module(version)
    writers = module.FIELD_WRITERS
    root = type(raw).__name__

    def written(key: tuple[str, str], value: Any) -> bytes:
        w = rt.Writer(1024, share_vtables=module.SHARE_VTABLES)  # the version's own layout
        writers[key](w, value)
        return bytes(memoryview(w.buf)[w.head :])

    out = []
    for table in raw.__struct_fields__:
        value = getattr(raw, table)
        fields = getattr(value, "__struct_fields__", None)
        if fields is None:  # a list of the root (strings, debug_files, extensions), or an absent table
            data = written((root, table), value) if value else b""
            out.append(ColumnSize(table, "", len(data), packed(data) if data else 0))
            continue
        struct = type(value).__name__
        spec = module.SPECS[struct]
        # The table itself: its vtable offset and inline slots (vtables are shared, not counted).
        inline = 4 + sum(rt.SIZES[kind] for kind in spec.kinds)
        out.append(ColumnSize(table, "", inline, inline))
        for name in fields:
            part = getattr(value, name)
            if (struct, name) in writers:
                data = written((struct, name), part) if part else b""  # empty or absent: not written
                out.append(ColumnSize(table, name, len(data), packed(data) if data else 0))
    return out


def table_sizes(columns: list[ColumnSize]) -> dict[str, tuple[int, int]]:
    """Per table: (encoded bytes, compressed bytes), summed over its columns, in first-seen order."""
    out: dict[str, tuple[int, int]] = {}
    for c in columns:
        raw, packed = out.get(c.table, (0, 0))
        out[c.table] = (raw + c.raw_bytes, packed + c.compressed_bytes)
    return out
