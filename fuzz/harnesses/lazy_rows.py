"""The lazy reader (:func:`tracepack.open`) on the FlatBuffers row layout (``flatbuffers-rows``): see
:mod:`fuzz.harnesses._lazy`."""

from __future__ import annotations

from typing import Final

from fuzz.harnesses import _lazy

TARGETS: Final = ("tracepack.lazy", "tracepack.codecs._fbrt", "tracepack.container")
DICT: Final = "fb.dict"
custom_mutator = _lazy.custom_mutator


def test_one_input(data: bytes) -> None:
    _lazy.read(data)


def seeds() -> list[tuple[str, bytes]]:
    return _lazy.seeds("flatbuffers-rows", "flatbuffers.tpk")
