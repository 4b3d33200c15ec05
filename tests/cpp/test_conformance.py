"""The conformance suite (conformance/, spec §12) against the C++ reader, through the suite's own runner and
protocol, every vector of what it reads: `cat` on every file whose codec is json, msgpack, flatbuffers-rows
or columnar (valid ones print the expected output byte for byte; damaged and hostile ones give the expected
error class and place, one line). Not yet: `trace` and the flatbuffers-columns codec (both phase 2 of the C++
reader); their vectors are listed by the last test, so that none is left out silently."""

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
    return vector["command"] == "cat" and _codec(vector) != 4


@pytest.mark.parametrize("vector", [v for v in VECTORS if _supported(v)], ids=lambda v: str(v["id"]))
def test_vector(cpp_bin: Path, vector: dict[str, Any]) -> None:
    result = run.check([str(cpp_bin)], vector, strict_places=True)
    assert result.ok, "; ".join(result.problems)


def test_what_is_not_read_yet() -> None:
    left = sorted(str(v["id"]) for v in VECTORS if not _supported(v))
    assert all("trace" in v or "fbcols" in v or "flatbuffers-columns" in v or "fbcol" in v for v in left), left
    assert len([v for v in VECTORS if _supported(v)]) >= 300
    assert harness.REPO.is_dir()
