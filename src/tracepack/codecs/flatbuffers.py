"""The FlatBuffers codec: zero-copy binary that readers can access lazily, one node at a time.

The payload is a standard FlatBuffer of ``generated/fbs/tracepack-X.Y.fbs``
(root ``Document``, file identifier ``TPK1``), so C++, Rust, Go... read it with
FlatBuffers' own generated code. After it comes a *side index*: a second,
small FlatBuffer whose root is the FlatBuffers-only table ``SideIndex``
(identifier ``TPKI``), then an 8-byte trailer::

    [Document buffer, 8-byte aligned][SideIndex buffer][uint32 length of SideIndex buffer]["TPKI"]

FlatBuffers readers stop at the root and ignore the rest; :mod:`tracepack.lazy`
uses the index (node indices sorted by name) to find a node by name with a
binary search instead of a scan. It is derived data: :func:`decode` ignores it,
and a payload without it (written by another FlatBuffers producer) decodes and
opens all the same.

The layout inside the document buffer depends on the schema version, never the wire format: 1.0
and 1.1 share vtables between tables (their files stay byte for byte as released); from 1.2 on every
table has its own vtable right before it (``emit_fbs_python.share_vtables``), so sibling tables start
with the same bytes and zstd stores them almost for free (a third smaller compressed on torch graphs
of 1,000 nodes, 20% larger uncompressed). Both are standard FlatBuffers that every reader reads.

Encoding and decoding go through code generated from the schema for each
version (``tracepack_generated.vX_Y.fbcodec``, on the runtime
:mod:`tracepack.codecs._fbrt`): numeric columns move as whole arrays in one C
call each, tables as one ``struct`` call each.
"""

from __future__ import annotations

import struct
from functools import cache
from types import ModuleType
from typing import Any, Final

from tracepack.codecs import _fbrt as rt
from tracepack.errors import NOT_DECODE_ERRORS, DecodeError, EncodeError
from tracepack.versions import generated

__all__ = [
    "SIDE_IDENTIFIER",
    "SIDE_SPEC",
    "codec_module",
    "decode",
    "encode",
    "read_side_index",
    "side_index",
    "side_index_at",
    "split",
    "with_side_index",
]

#: File identifier of the side index buffer, and the payload's trailer magic.
SIDE_IDENTIFIER: Final = b"TPKI"
#: The side index table (``SideIndex`` in the ``.fbs``): slot 0 is ``nodes_by_name``.
SIDE_SPEC: Final = rt.TableSpec("SideIndex", "O", (0,), ("nodes_by_name",))
_TRAILER = struct.Struct("<I4s")


@cache
def codec_module(version: tuple[int, int]) -> ModuleType:
    """The generated FlatBuffers codec of ``version`` (``tracepack_generated.vX_Y.fbcodec``)."""
    import importlib

    return importlib.import_module(generated(version).__name__ + ".fbcodec")


def side_index(raw: Any) -> bytes:
    """The side index of ``raw``: its nodes' indices sorted by name (the last of equal names first)."""
    strings = raw.strings
    names = [strings[n.name] for n in raw.graph.nodes]
    # Stable sort of the indices in reverse: among equal names the last node comes first, which is
    # the node a name lookup returns (as in tracepack.Document, where the last one wins).
    order = sorted(range(len(names) - 1, -1, -1), key=names.__getitem__)
    w = rt.Writer()
    return w.finish(w.table(SIDE_SPEC, 1, (w.scalars("I", order),)), SIDE_IDENTIFIER)


def encode(raw: Any, version: tuple[int, int]) -> bytes:
    """Encode a document of the generated model of ``version``: document buffer, side index, trailer."""
    try:
        body: bytes = codec_module(version).encode(raw)
        side = side_index(raw)
    except NOT_DECODE_ERRORS:
        raise  # tracepack's own (a SchemaError from the plan, ...), as it said it
    except (KeyError, TypeError, ValueError, OverflowError, IndexError, UnicodeEncodeError, struct.error) as exc:
        raise EncodeError(f"cannot encode as FlatBuffers: {type(exc).__name__}: {exc}") from None
    return with_side_index(body, side)


def with_side_index(body: bytes, side: bytes) -> bytes:
    """A payload: the (8-byte aligned) document buffer, the side index buffer, the trailer."""
    return body + side + _TRAILER.pack(len(side), SIDE_IDENTIFIER)


def split(data: bytes | bytearray | memoryview) -> tuple[memoryview, memoryview | None]:
    """``(document buffer, side index buffer or None)`` of a payload (no copy)."""
    mv = memoryview(data)
    if len(mv) >= 16:
        size, magic = _TRAILER.unpack_from(mv, len(mv) - 8)
        start = len(mv) - 8 - size
        if (
            magic == SIDE_IDENTIFIER
            and size >= 8
            and start >= 8
            and start % 8 == 0
            and mv[start + 4 : start + 8] == magic
        ):
            return mv[:start], mv[start : len(mv) - 8]
    return mv, None


def read_side_index(side: memoryview) -> memoryview | None:
    """The ``nodes_by_name`` column of a side index buffer (a ``uint32`` view), or None if unusable."""
    found = side_index_at(rt.Reader(side))
    if found is None:
        return None
    start, count = found
    return side[start : start + 4 * count].cast("I")


def side_index_at(r: rt.Reader) -> tuple[int, int] | None:
    """``(first element position, count)`` of the ``nodes_by_name`` column of the side index buffer
    ``r`` reads (the column itself is not read), or None if unusable."""
    try:
        v = r.fields(r.root(SIDE_IDENTIFIER), SIDE_SPEC)
        if not v[0]:
            return None
        start, count = r.vector(v[0], 4)
    except rt.Bad:
        return None
    return (start, count) if rt.LITTLE else None


def decode(data: bytes | memoryview, version: tuple[int, int], *, source: str | None = None) -> Any:
    """Decode into the generated model of ``version`` (the side index is ignored)."""
    body, _ = split(data)
    r = rt.Reader(body)
    try:
        return codec_module(version).decode(r)
    except rt.Bad as exc:
        raise DecodeError(exc.problem, source=source, where=exc.where()) from None
    except (struct.error, ValueError, IndexError, OverflowError, MemoryError) as exc:  # pragma: no cover
        raise DecodeError(f"not a valid FlatBuffer: {exc}", source=source, where="payload") from None
