"""Codecs: the payload encodings a ``.tpk`` container can hold.

Every codec module has the same four functions, so that knowing one means
knowing them all:

``encode(raw, version) -> bytes``
    the generated model of ``version`` to bytes;
``decode(data, version, *, source) -> raw``
    bytes to the generated model of ``version`` (raising DecodeError with the
    place in the document);

and the registry here maps codec names and header ids to those modules.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Final

from tracepack.errors import ContainerError, UsageError

__all__ = ["CODECS", "CODEC_IDS", "codec_by_id", "codec_by_name"]

#: Codec name -> (header id, implementing module).
CODECS: Final[dict[str, tuple[int, str]]] = {
    "json": (0, "tracepack.codecs.json"),
    "msgpack": (1, "tracepack.codecs.msgpack"),
    "flatbuffers": (2, "tracepack.codecs.flatbuffers"),
    "columnar": (3, "tracepack.codecs.columnar"),
    "flatbuffers-columns": (4, "tracepack.codecs.fbcolumns"),
}
CODEC_IDS: Final[dict[int, str]] = {i: name for name, (i, _) in CODECS.items()}


def codec_by_name(name: str) -> tuple[int, ModuleType]:
    """The header id and module of codec ``name``."""
    try:
        cid, module = CODECS[name]
    except KeyError:
        raise UsageError(f"unknown codec {name!r}", where="--codec", expected=" or ".join(CODECS)) from None
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
