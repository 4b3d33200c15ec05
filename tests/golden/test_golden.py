"""Golden files: every file of every released version reads, with today's code, as it was written.

``tests/golden/<version>/`` holds one feature-complete document in every codec
and compression, written once by ``make_golden.py`` with the code of that
version, and ``expected.json``, its content as plain values. Files here never
change: ``MANIFEST.sha256`` records each one's sha256.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

import tracepack
from tests.golden import make_golden as mg
from tracepack.codecs import CODECS
from tracepack.codegen.check import load_schemas
from tracepack.container import read_header
from tracepack.versions import CURRENT

REPO = mg.GOLDEN.parents[1]
_VERSION_DIR = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")
_FIX = "golden files are immutable: restore it with `git checkout -- tests/golden/{}`"


def _versions() -> list[str]:
    return sorted((p.name for p in mg.GOLDEN.iterdir() if p.is_dir() and _VERSION_DIR.match(p.name)), key=_key)


def _key(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)


def _golden_files() -> list[str]:
    """Every file in the version folders, as ``1.0/msgpack.tpk``."""
    return sorted(f"{v}/{p.name}" for v in _versions() for p in (mg.GOLDEN / v).iterdir() if p.is_file())


def _tpk_files() -> list[str]:
    return [f for f in _golden_files() if f.endswith(".tpk")]


def _expected(version: str) -> Any:
    return json.loads((mg.GOLDEN / version / "expected.json").read_text(encoding="utf-8"))


def _codec_importable(codec: str) -> bool:
    try:
        __import__(CODECS[codec][1])
    except ImportError:
        return False
    return True


def test_every_release_has_golden_files() -> None:
    released = [s.version for s in load_schemas(REPO / "schema") if s.status == "released"]
    missing = [
        f"{v}/{name}"
        for v in released
        for name in ["expected.json"]
        + [mg.file_name(c, comp) for c in mg.REQUIRED_CODECS for _, comp, _ in mg.COMPRESSIONS]
        if not (mg.GOLDEN / v / name).exists()
    ]
    assert not missing, f"missing golden files {missing}: run `python tests/golden/make_golden.py --version X.Y`"


@pytest.mark.parametrize("rel", _tpk_files())
def test_golden_file_reads_as_expected(rel: str) -> None:
    version, name = rel.split("/")
    path = mg.GOLDEN / rel
    header = read_header(path.read_bytes(), source=rel)
    stem = name.removesuffix(".tpk")
    # The compression is the file name's suffix (codec names may hold a dash: flatbuffers-columns); the row
    # layout's files (id 2, flatbuffers-rows) keep the name it had when they were written: flatbuffers.tpk.
    suffix, compression = next((s, c) for s, c, _ in mg.COMPRESSIONS[::-1] if stem.endswith(s))
    codec = mg.codec_of(stem.removesuffix(suffix) if suffix else stem)
    assert f"{header.schema_version[0]}.{header.schema_version[1]}" == version
    assert (header.codec, header.compression) == (codec, compression)
    doc = tracepack.load(path)
    assert doc.source_version == _key(version)
    assert doc.version == CURRENT
    mismatch = _mismatch(mg.document_content(doc), _expected(version), "$")
    assert mismatch is None, f"tests/golden/{rel}: {mismatch}"


def _mismatch(actual: Any, expected: Any, at: str) -> str | None:
    """Where ``actual`` departs from ``expected``; keys added to records since then are ignored."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{at}: expected an object, got {actual!r:.200}"
        for key, value in expected.items():
            if key not in actual:
                return f"{at}: key {key!r} is gone"
            found = _mismatch(actual[key], value, f"{at}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return f"{at}: expected {len(expected)} items, got {actual!r:.200}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            found = _mismatch(a, e, f"{at}[{i}]")
            if found:
                return found
        return None
    if type(actual) is not type(expected) or actual != expected:
        return f"{at}: expected {expected!r:.200}, got {actual!r:.200}"
    return None


@pytest.mark.parametrize("version", _versions())
@pytest.mark.parametrize("codec", sorted(set(CODECS) - set(mg.REQUIRED_CODECS)))
def test_optional_codecs_have_golden_files(version: str, codec: str) -> None:
    """A codec that landed after a release gets golden files for every release too: a gap fails, with the fix."""
    assert _codec_importable(codec), f"{codec}: {CODECS[codec][1]} is registered but not importable"
    missing = [
        mg.file_name(codec, c)
        for _, c, _ in mg.COMPRESSIONS
        if not (mg.GOLDEN / version / mg.file_name(codec, c)).exists()
    ]
    assert not missing, (
        f"tests/golden/{version} has no {', '.join(missing)}: write them with "
        f"`python tests/golden/make_golden.py --version {version} --codec {codec}`"
    )


def test_manifest_covers_every_golden_file() -> None:
    manifest = mg.read_manifest()
    files = _golden_files()
    unrecorded = sorted(set(files) - set(manifest))
    assert not unrecorded, (
        f"{unrecorded} are not in tests/golden/MANIFEST.sha256: write golden files with make_golden.py, "
        "which records them"
    )
    deleted = sorted(set(manifest) - set(files))
    assert not deleted, f"{deleted} were deleted; " + _FIX.format(deleted[0])


@pytest.mark.parametrize("rel", _golden_files())
def test_golden_file_never_changes(rel: str) -> None:
    digest = hashlib.sha256((mg.GOLDEN / rel).read_bytes()).hexdigest()
    assert digest == mg.read_manifest().get(rel), f"tests/golden/{rel} changed; " + _FIX.format(rel)


def test_current_version_can_still_gain_codecs() -> None:
    """make_golden.py still builds the current version's document, so new codecs can be added to it."""
    version = f"{CURRENT[0]}.{CURRENT[1]}"
    assert (mg.GOLDEN / version).exists(), f"no golden files for {version}: run `python tests/golden/make_golden.py`"
    assert mg.document_content(mg.build_document()) == _expected(version)


def test_expected_json_has_no_table_indices() -> None:
    """Content is what the document means, not where it is stored: no raw reference survives."""
    text = (mg.GOLDEN / _versions()[-1] / "expected.json").read_text(encoding="utf-8")
    for word in ('"stack":', '"module":', '"meta_keys":', '"meta_values":', '"strings":', '"sym_shape":'):
        assert word not in text


# -- make_golden.py itself ---------------------------------------------------------------------------


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(mg, "GOLDEN", tmp_path)
    monkeypatch.setattr(mg, "MANIFEST", tmp_path / "MANIFEST.sha256")
    return tmp_path


def test_make_golden_writes_then_keeps(scratch: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert mg.main(["--codec", "msgpack"]) == 0
    version = f"{CURRENT[0]}.{CURRENT[1]}"
    written = sorted(p.name for p in (scratch / version).iterdir())
    assert written == ["expected.json", "msgpack-zstd.tpk", "msgpack.tpk"]
    assert sorted(mg.read_manifest()) == [f"{version}/{n}" for n in written]
    before = {n: (scratch / version / n).read_bytes() for n in written}
    assert mg.main(["--codec", "msgpack,json"]) == 0
    out = capsys.readouterr().out
    assert f"keep tests/golden/{version}/msgpack.tpk (golden files are immutable)" in out
    assert f"wrote tests/golden/{version}/json.tpk" in out
    assert all((scratch / version / n).read_bytes() == data for n, data in before.items())


def test_make_golden_refuses_a_changed_file(scratch: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert mg.main(["--codec", "json"]) == 0
    version = f"{CURRENT[0]}.{CURRENT[1]}"
    target = scratch / version / "json.tpk"
    target.write_bytes(target.read_bytes() + b"\0")
    assert mg.main(["--codec", "json"]) == 1
    assert f"tests/golden/{version}/json.tpk changed since it was recorded" in capsys.readouterr().err


def test_make_golden_skips_codecs_not_importable(
    scratch: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(CODECS, "flatbuffers-rows", (2, "tracepack.codecs.not_written_yet"))
    assert mg.main(["--codec", "flatbuffers-rows"]) == 0
    assert "skip flatbuffers-rows: tracepack.codecs.not_written_yet is not importable yet" in capsys.readouterr().out
