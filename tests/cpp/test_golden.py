"""The golden files of every released version (tests/golden/): the C++ reader prints what ``tracepack cat`` prints.

They are read with their own version's model and migrated to the current one (spec §10), as tracepack.load does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cpp import harness

GOLDEN = harness.REPO / "tests" / "golden"
#: Every codec (golden names: `flatbuffers` is the row layout, `flatbuffers-columns` the column layout).
READ = ("json", "msgpack", "flatbuffers", "columnar", "flatbuffers-columns")
FILES = sorted(p.relative_to(GOLDEN).as_posix() for p in GOLDEN.glob("*/*.tpk"))


def _codec(name: str) -> str:
    stem = name.removesuffix(".tpk").removesuffix("-zstd")
    return stem


@pytest.mark.parametrize("rel", [f for f in FILES if _codec(Path(f).name) in READ])
def test_golden_file_prints_as_python(cpp_bin: Path, rel: str) -> None:
    out = harness.compare(cpp_bin, GOLDEN / rel)
    assert out.code == 0


def test_every_release_and_codec_is_covered() -> None:
    versions = {Path(f).parent.name for f in FILES}
    assert {"1.0", "1.1", "1.2"} <= versions
    for version in versions:
        got = {_codec(Path(f).name) for f in FILES if f.startswith(version + "/")}
        assert set(READ) <= got, version


def test_every_golden_file_is_read() -> None:
    assert all(_codec(Path(f).name) in READ for f in FILES)
