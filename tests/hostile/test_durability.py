"""Outputs are atomic always, synced to disk only when asked (``durable=True``, ``--fsync``).

As ``cp``, ``tar``, ``zip`` and ``torch.save``, no writer syncs by default; every writer (API and
command) can be told to, and the output is the same bytes either way. The atomicity half (kill -9,
errors, destinations) is in ``test_writes.py``; it holds in both modes.
"""

from __future__ import annotations

import os
import warnings
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import tracepack
from tracepack.cli import build_parser, main
from tracepack.io import files
from tracepack.io import zip as tzip
from tracepack.torch import pt2

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "src/tracepack/data/sample/tiny_transformer.pt2"
ETDUMP = ROOT / "tests/data/executorch/model.etdp"
ETRECORD = ROOT / "tests/data/executorch/model.etrecord"


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every ``os.fsync`` made while the test runs (the real one still runs)."""
    calls: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    return calls


@pytest.fixture(scope="module")
def tpk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample as a .tpk, with the packed archive beside it (``packed.pt2``)."""
    path = tmp_path_factory.mktemp("durable") / "sample.tpk"
    assert main(["convert", str(SAMPLE), str(path)]) == 0
    pt2.pack_pt2_file(SAMPLE, path.with_name("packed.pt2"))
    return path


def test_write_atomic_and_dump_sync_only_when_durable(tmp_path: Path, fsyncs: list[int]) -> None:
    files.write_atomic(tmp_path / "a", b"contents")
    with files.atomic_output(tmp_path / "b") as f:
        f.write(b"contents")
    doc = tracepack.load(SAMPLE)
    tracepack.dump(doc, tmp_path / "c.tpk")
    assert fsyncs == []  # the default: atomic, not synced (as cp)
    files.write_atomic(tmp_path / "a2", b"contents", durable=True)
    assert len(fsyncs) == 1
    with files.atomic_output(tmp_path / "b2", durable=True) as f:
        f.write(b"contents")
    assert len(fsyncs) == 2
    tracepack.dump(doc, tmp_path / "c2.tpk", durable=True)
    assert len(fsyncs) == 3
    assert (tmp_path / "a").read_bytes() == (tmp_path / "a2").read_bytes() == b"contents"
    assert (tmp_path / "b").read_bytes() == (tmp_path / "b2").read_bytes() == b"contents"
    assert (tmp_path / "c.tpk").read_bytes() == (tmp_path / "c2.tpk").read_bytes()


def test_a_durable_write_syncs_before_the_name_appears(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out"
    seen: list[bool] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (seen.append(target.exists()), real(fd))[1])
    files.write_atomic(target, b"new", durable=True)
    assert seen == [False]  # synced while still unnamed, then renamed into place
    assert target.read_bytes() == b"new"


def test_the_streamed_archive_writers_sync_only_when_durable(tmp_path: Path, fsyncs: list[int]) -> None:
    pt2.pack_pt2_file(SAMPLE, tmp_path / "p.pt2")
    pt2.unpack_pt2_file(tmp_path / "p.pt2", tmp_path / "u.pt2")
    assert fsyncs == []
    pt2.pack_pt2_file(SAMPLE, tmp_path / "p2.pt2", durable=True)
    pt2.unpack_pt2_file(tmp_path / "p2.pt2", tmp_path / "u2.pt2", durable=True)
    assert len(fsyncs) == 2  # one each, at the end, however many members
    assert (tmp_path / "p.pt2").read_bytes() == (tmp_path / "p2.pt2").read_bytes()
    assert (tmp_path / "u.pt2").read_bytes() == (tmp_path / "u2.pt2").read_bytes()
    with zipfile.ZipFile(tmp_path / "u.pt2") as z, zipfile.ZipFile(SAMPLE) as orig:
        assert {n: z.read(n) for n in z.namelist()} == {n: orig.read(n) for n in orig.namelist()}


def _dontneed_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    calls: list[tuple[int, int]] = []
    real = os.posix_fadvise

    def recording(fd: int, offset: int, length: int, advice: int) -> None:
        if advice == os.POSIX_FADV_DONTNEED:
            calls.append((offset, length))
        real(fd, offset, length, advice)

    monkeypatch.setattr(os, "posix_fadvise", recording)
    return calls


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="posix_fadvise is Linux/POSIX only")
def test_early_writeback_only_for_a_durable_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large copy into a durable output starts each part's writeback as it goes (so the final
    fsync finds little left); into a default output it is one copy, as cp's, nothing else."""
    from benchmarks.bench_hostile import _big_pt2

    src = tmp_path / "big.pt2"
    _big_pt2(src, 5 << 20)
    monkeypatch.setattr(tzip, "_FLUSH_STEP", 1 << 20)
    calls = _dontneed_calls(monkeypatch)
    pt2.pack_pt2_file(src, tmp_path / "fast.pt2")
    assert calls == []
    pt2.pack_pt2_file(src, tmp_path / "durable.pt2", durable=True)
    assert len(calls) >= 5  # the 5 MiB member, 1 MiB at a time
    assert sum(n for _, n in calls) >= 5 << 20
    assert (tmp_path / "fast.pt2").read_bytes() == (tmp_path / "durable.pt2").read_bytes()


def _commands(tpk: Path, out: Path) -> Iterator[tuple[str, list[str], list[Path]]]:
    """Every command that writes files: its argv and what it writes."""
    yield "convert", ["convert", str(SAMPLE), str(out / "a.tpk")], [out / "a.tpk"]
    yield "expand", ["expand", str(tpk), str(out / "model.json")], [out / "model.json"]
    yield "expand --archive", ["expand", str(tpk), str(out / "e.pt2"), "--archive", str(SAMPLE)], [out / "e.pt2"]
    yield "cat", ["cat", str(tpk), "-o", str(out / "c.json")], [out / "c.json"]
    yield "cat --raw", ["cat", "--raw", str(tpk), "-o", str(out / "raw.bin")], [out / "raw.bin"]
    yield "pack", ["pack", str(SAMPLE), str(out / "p.pt2")], [out / "p.pt2"]
    yield "unpack", ["unpack", str(tpk.with_name("packed.pt2")), str(out / "u.pt2")], [out / "u.pt2"]
    yield "upgrade", ["upgrade", str(SAMPLE), str(out / "g.pt2")], [out / "g.pt2"]
    yield "annotate", ["annotate", str(ETDUMP), "--with", str(ETRECORD), "-o", str(out / "t.json")], [out / "t.json"]
    import hashlib

    from tracepack.analysis.dataset import COLUMNS, INDEX, METADATA, part_key

    key = part_key(str(tpk), hashlib.sha256(tpk.read_bytes()).hexdigest()) if tpk.exists() else ""
    tables = [out / "tables" / METADATA, *(out / "tables" / name / f"{key}.parquet" for name in COLUMNS)]
    yield "export", ["export", str(tpk), "-o", str(out / "tables")], [*tables, out / "tables" / INDEX]


_NAMES = [name for name, _, _ in _commands(Path("x"), Path("y"))]


@pytest.mark.parametrize("name", _NAMES)
def test_every_command_syncs_only_with_fsync(name: str, tpk: Path, tmp_path: Path, fsyncs: list[int]) -> None:
    if name == "upgrade":
        with warnings.catch_warnings():  # torch's own import warns here (no NumPy)
            warnings.simplefilter("ignore")
            pytest.importorskip("torch")
    outputs: dict[str, dict[Path, bytes]] = {}
    for mode in ("default", "--no-fsync", "--fsync"):
        folder = tmp_path / mode.strip("-")
        folder.mkdir()
        _, argv, written = next(c for c in _commands(tpk, folder) if c[0] == name)
        before = len(fsyncs)
        assert main([*argv, *([mode] if mode != "default" else [])]) == 0
        synced = len(fsyncs) - before
        if mode == "--fsync":
            assert synced == len(written)  # one per output file
        else:
            assert synced == 0
        outputs[mode] = {p.relative_to(folder): p.read_bytes() for p in written}
    assert outputs["default"] == outputs["--no-fsync"] == outputs["--fsync"]


def test_every_writing_command_takes_fsync_and_no_fsync() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    writers = set()
    for command, p in sub.choices.items():  # type: ignore[union-attr]
        options = {o for a in p._actions for o in a.option_strings}
        if "--force" in options or "--output" in options:
            writers.add(command)
            assert {"--fsync", "--no-fsync"} <= options, command
    assert writers >= {"convert", "expand", "cat", "export", "pack", "unpack", "upgrade", "annotate"}


def test_fsync_and_no_fsync_together_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pack", "--fsync", "--no-fsync", str(SAMPLE), str(tmp_path / "p.pt2")]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after argparse's usage lines
    assert last.startswith("tracepack: pack: ")
    assert "argument --no-fsync: not allowed with argument --fsync" in last
    assert not (tmp_path / "p.pt2").exists()
