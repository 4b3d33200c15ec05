"""Payloads of the columnar codec as plain maps, for tests that add, drop or damage columns."""

from __future__ import annotations

import itertools
from typing import Any

import msgspec

import tracepack
from tracepack import container
from tracepack.codecs import columnar

__all__ = ["columns_of", "pack", "payload_of", "repack", "stored_values", "unforms"]


def payload_of(raw: Any, version: tuple[int, int]) -> dict[str, Any]:
    """The payload map of ``raw``: ``{"format", "layout", "columns": {path: [encoding, values]}}``
    (layout 2's column numbers turned back into paths, which the reader takes as well)."""
    out: dict[str, Any] = msgspec.msgpack.decode(columnar.encode(raw, version))
    paths = columnar.path_numbers()[0]
    out["columns"] = {paths[k] if type(k) is int else k: v for k, v in out["columns"].items()}
    return out


def columns_of(doc: tracepack.Document) -> dict[str, list[Any]]:
    """The stored columns of ``doc`` (current version), deltas undone: path -> values."""
    out = {}
    columns = payload_of(doc.raw, doc.version)["columns"]
    for path, (encoding, values) in columns.items():
        if encoding == columnar.FORMS:  # rows of a list of strings: P[] counted by P#len
            n = sum(columns[path.removesuffix("[]") + "#len"][1])
            out[path] = unforms(path, values, n)
        else:
            out[path] = stored_values([encoding, values])
    return out


def stored_values(entry: list[Any]) -> list[Any]:
    """The values of a ``plain``, ``delta`` or ``lag`` column entry ``[encoding, values]``, summed here as
    spec §6.4 says (not by the codec): ``delta`` a running sum, ``lag`` ``[K, d]`` with row ``i`` the sum
    of ``d[i]`` and row ``i - K``."""
    encoding, values = entry
    if encoding == columnar.DELTA:
        return list(itertools.accumulate(values))
    if encoding == columnar.LAG:
        lag, deltas = values
        out: list[int] = []
        for i, d in enumerate(deltas):
            out.append(d + (out[i - lag] if i >= lag else 0))
        return out
    return list(values)


def unforms(path: str, values: Any, n: int) -> list[str]:
    """The ``n`` strings of a ``forms``-encoded column (through the codec's own checks)."""
    reader = columnar._Reader({}, 1 << 40, None)
    return reader.forms(path, n, msgspec.Raw(msgspec.msgpack.encode(values)))


def repack(payload: Any) -> bytes:
    """A payload map (possibly damaged) as payload bytes."""
    return msgspec.msgpack.encode(payload)


def pack(payload: Any, version: tuple[int, int], *, compression: str = "none") -> bytes:
    """A payload map as a ``.tpk`` container of ``version``."""
    return container.pack(repack(payload), schema_version=version, codec="columnar", compression=compression)
