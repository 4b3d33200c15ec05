"""Where a document's bytes go: encoded and compressed bytes per table and per column.

``tracepack inspect`` shows these so users see what is left after interning and compression. For
the columnar codec the columns are the file's own (one per path, ``$.graph.nodes[].stack``); for the
other codecs they are each table's fields (``lines.text``, ``graph.nodes``) encoded with
MessagePack. Each column's compressed size is that column compressed *on its own* with zstd (level
19 by default, with the file's dictionary if it has one), less zstd's fixed per-frame bytes: about
what it costs inside the whole file, where zstd also finds matches across columns (so the sum is
usually a little more than the compressed payload).
"""

from __future__ import annotations

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
    """Encoded and compressed bytes of every column of ``raw`` (a generated-model Document)."""
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
        for path, column in payload["columns"].items():
            data = enc(column)
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


def table_sizes(columns: list[ColumnSize]) -> dict[str, tuple[int, int]]:
    """Per table: (encoded bytes, compressed bytes), summed over its columns, in first-seen order."""
    out: dict[str, tuple[int, int]] = {}
    for c in columns:
        raw, packed = out.get(c.table, (0, 0))
        out[c.table] = (raw + c.raw_bytes, packed + c.compressed_bytes)
    return out
