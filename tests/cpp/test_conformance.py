"""The conformance suite (conformance/, spec §12) against the C++ reader, through the suite's own runner and
protocol: `cat` on every vector, every codec (json, msgpack, flatbuffers-rows, columnar, flatbuffers-columns)
and the block-checksum vectors (spec §1.5; valid ones print the expected output byte for byte; damaged and
hostile ones give the expected error class and exact place, one line), and `trace` on every vector that
has one (the lazy reader on uncompressed FlatBuffers files, the full read on the others). The last test
says that none is left out silently."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conformance import run
from tests.cpp import harness

VECTORS = run.load_manifest()["vectors"]


def _codec(vector: dict[str, Any]) -> int | None:
    data = (run.HERE / vector["file"]).read_bytes()
    return data[16] if data[:4] == b"\x89TPK" and len(data) > 16 else None


def _supported(vector: dict[str, Any]) -> bool:
    return bool(vector["command"] in ("cat", "trace"))


@pytest.mark.parametrize("vector", [v for v in VECTORS if _supported(v)], ids=lambda v: str(v["id"]))
def test_vector(cpp_bin: Path, vector: dict[str, Any]) -> None:
    result = run.check([str(cpp_bin)], vector, strict_places=True)
    assert result.ok, "; ".join(result.problems)


def test_every_vector_is_run() -> None:
    left = [v for v in VECTORS if not _supported(v)]
    assert not left, [v["id"] for v in left]
    assert any(v["command"] == "trace" for v in VECTORS)
    read = [v for v in VECTORS if _supported(v)]
    assert len(read) >= 400
    # every codec and the block-checksum vectors are among them
    assert {_codec(v) for v in read} >= {0, 1, 2, 3, 4}
    assert any("blocks/" in str(v["id"]) for v in read)
    assert harness.REPO.is_dir()
