"""The json codec's decoder (``json``), through validation, migration and every answer: see
:mod:`fuzz.harnesses._codec`."""

from __future__ import annotations

from typing import Final

from fuzz.harnesses import _codec

TARGETS: Final = (
    "tracepack.codecs.json",
    "tracepack_generated.v1_2.validate",
    "tracepack.document",
    "tracepack.traces",
    "tracepack.migrations",
)
DICT: Final = "json-tpk.dict"
CODEC: Final = "json"


def test_one_input(data: bytes) -> None:
    _codec.read(CODEC, data)


def seeds() -> list[tuple[str, bytes]]:
    return _codec.seeds(CODEC)
