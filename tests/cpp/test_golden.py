"""The golden files of every released version (tests/golden/): the C++ reader prints what ``tracepack cat`` prints.

They are read with their own version's model and migrated to the current one (spec §10), as tracepack.load does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cpp import harness

GOLDEN = harness.REPO / "tests" / "golden"
#: The codecs this reader decodes; flatbuffers-columns is refused with one line (below).
READ = ("json", "msgpack", "flatbuffers", "columnar")
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


@pytest.mark.parametrize("rel", [f for f in FILES if _codec(Path(f).name) not in READ])
def test_flatbuffers_columns_is_refused_with_one_line(cpp_bin: Path, rel: str) -> None:
    got = harness.run(cpp_bin, GOLDEN / rel, json_errors=True)
    assert got.code == 2
    assert (got.error, got.place) == ("InputError", "header byte 16")
    assert "is not read by tracepack-cpp yet" in got.line
