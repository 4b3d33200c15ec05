"""Codecs: the payload encodings a ``.tpk`` container can hold.

Every codec module has the same four functions, so that knowing one means
knowing them all:

``encode(raw, version) -> bytes``
    the generated model of ``version`` to bytes;
``decode(data, version, *, source) -> raw``
    bytes to the generated model of ``version`` (raising DecodeError with the
    place in the document);

and the registry here maps codec names and header ids to those modules.

Names. Every header id has one name, the one ``inspect``/``info`` print and
:attr:`tracepack.container.Header.codec` holds: ``json`` (0), ``msgpack`` (1),
``flatbuffers-rows`` (2, the FlatBuffers row layout: a table per node),
``columnar`` (3) and ``flatbuffers-columns`` (4, the FlatBuffers column
layout). A writer also takes the names of :data:`ALIASES`: ``flatbuffers``
means the column layout (id 4), the FlatBuffers layout that is smaller than
zstd of torch's model.json; earlier builds wrote the row layout (id 2) for
``flatbuffers`` (and refuse id 4 files if older than the column layout).
Readers go by the id in the header, never by a name, so every file written
under any name stays readable.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Mapping
from types import ModuleType
from typing import Final

from tracepack.errors import ContainerError, UsageError

__all__ = [
    "ALIASES",
    "CHOICE_MARGIN",
    "CODECS",
    "CODEC_IDS",
    "TORCH_CANDIDATES",
    "WRITE_NAMES",
    "choose",
    "codec_by_id",
    "codec_by_name",
    "forms_loops",
    "resolve",
]

#: Codec name -> (header id, implementing module): one name per id, the name a header's id prints as.
CODECS: Final[dict[str, tuple[int, str]]] = {
    "json": (0, "tracepack.codecs.json"),
    "msgpack": (1, "tracepack.codecs.msgpack"),
    "flatbuffers-rows": (2, "tracepack.codecs.flatbuffers"),
    "columnar": (3, "tracepack.codecs.columnar"),
    "flatbuffers-columns": (4, "tracepack.codecs.fbcolumns"),
}
CODEC_IDS: Final[dict[int, str]] = {i: name for name, (i, _) in CODECS.items()}

#: Other names a writer takes (``--codec``, ``dumps(codec=)``), and the codec each one means.
ALIASES: Final[dict[str, str]] = {"flatbuffers": "flatbuffers-columns"}

#: Every name a writer takes, in the order help and errors list them.
WRITE_NAMES: Final[tuple[str, ...]] = (
    "json",
    "msgpack",
    "flatbuffers",
    "flatbuffers-rows",
    "columnar",
    "flatbuffers-columns",
)


def _expected() -> str:
    return ", ".join(f"{n} (= {ALIASES[n]})" if n in ALIASES else n for n in WRITE_NAMES)


def resolve(name: str, *, where: str = "--codec") -> str:
    """The codec name (a key of :data:`CODECS`) that ``name`` or its alias means; UsageError if none."""
    if name in CODECS:
        return name
    alias = ALIASES.get(name)
    if alias is None:
        raise UsageError(f"unknown codec {name!r}", where=where, expected=_expected())
    return alias


def codec_by_name(name: str) -> tuple[int, ModuleType]:
    """The header id and module of codec ``name`` (or an alias of one, see :data:`ALIASES`)."""
    cid, module = CODECS[resolve(name)]
    return cid, importlib.import_module(module)


def codec_by_id(cid: int, *, source: str | None = None) -> tuple[str, ModuleType]:
    """The name and module of the codec with header id ``cid``."""
    name = CODEC_IDS.get(cid)
    if name is None:
        raise ContainerError(
            f"unknown codec id {cid}",
            source=source,
            where="header byte 16",
            expected=", ".join(f"{i} ({n})" for i, n in CODEC_IDS.items()),
        )
    return name, importlib.import_module(CODECS[name][1])


#: The codecs ``convert`` weighs for a torch input, fastest to write and read first: MessagePack (one C
#: call each way), columnar, the FlatBuffers column layout (a Python walk over the schema's ~140 column
#: paths each way, a fixed cost of a few hundred microseconds that dominates small graphs).
TORCH_CANDIDATES: Final[tuple[str, ...]] = ("msgpack", "columnar", "flatbuffers-columns")
#: How much smaller a slower candidate must be to be chosen over a faster one.
CHOICE_MARGIN: Final = 0.05


def choose(sizes: Mapping[str, int], order: tuple[str, ...] = TORCH_CANDIDATES) -> str:
    """The codec to write, given each candidate's file size: the first of ``order`` (fastest first) whose
    file is within :data:`CHOICE_MARGIN` of the smallest. An 8-node graph is then MessagePack (857 B
    against the column layout's 830 B, eight times faster to write), a 35-node graph the column layout
    (8% smaller than columnar), a large one columnar (the smallest by far)."""
    candidates = [c for c in order if c in sizes]
    if not candidates:
        raise ValueError(f"no size for any of {', '.join(order)}")
    smallest = min(sizes[c] for c in candidates)
    return next(c for c in candidates if sizes[c] <= smallest * (1 + CHOICE_MARGIN))


def forms_loops() -> str:
    """Where the columnar codec's ``forms`` loops run in this install: ``"C"`` (the ``_cforms`` module is
    built) or ``"Python"`` (not built, or ``TRACEPACK_PURE_PYTHON`` set); ``tracepack --version`` says it.
    Found without importing the codec."""
    if os.environ.get("TRACEPACK_PURE_PYTHON") or importlib.util.find_spec("tracepack.codecs._cforms") is None:
        return "Python"
    return "C"
