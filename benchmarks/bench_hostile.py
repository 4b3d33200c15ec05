"""Hostile-input budgets that cost time or memory: archives of any size, verified lazy reads, linear parsing.

Figures:

* (a) ``tracepack pack`` of a multi-GB ``.pt2`` (made at bench time in a temporary folder, never
  committed: the bundled sample's members plus one stored weight member of
  ``TRACEPACK_BENCH_PT2_GB`` GiB, default 2; set 4.5 for a zip64 member over 4 GiB), run as a
  command: peak RSS against ``300 MB + 3x its model.json`` (target <= 1x) and wall time against
  ``cp`` of the same file in the same run (target <= 1.5x, medians). ``pack`` writes atomically
  but, as ``cp``, does not sync; ``pack --fsync`` waits for the disk and is compared with
  ``cp && sync OUT``. The four commands are interleaved, in rotated order, over
  ``TRACEPACK_BENCH_PT2_ROUNDS`` rounds (default 5; medians are the figures, every time, the
  worst and the round-by-round ratios in the notes), and each starts from the same page-cache
  state: ``sync``, the page cache dropped when run as root (``TRACEPACK_BENCH_DROP_CACHES=0``
  skips it; the note says which), the source read once (cached), the interpreter, tracepack's
  modules (compiled bytecode, as installed) and ``cp`` warmed by packing and copying the sample,
  ``sync`` again and a pause (``TRACEPACK_BENCH_SETTLE`` s, default 2) for the disk to settle;
* (d) streaming: peak RSS of ``pack`` of a flat (torch 2.1-2.7) ``.pt2`` and of ``expand
  --archive`` of a packed ``.pt2``, each with one stored member of the same size (zip64 records),
  against ``300 MB + 3x its model.json`` (target <= 1x);
* (d) upgrade: peak RSS of ``tracepack upgrade`` (streamed) of the sample with one stored weight
  member of that size, and of a flat (torch 2.1-2.7) sample whose ``serialized_state_dict.pt``
  holds a weight of that size, each against the same command on the sample alone (target <= 1.1x);
* (b) a 240 KB hostile stack trace (one line, 20,000 ``", line 1, in x`` separators: the old
  backtracking regex took minutes) parsed, against a 1 s budget (target <= 0.1x);
* (c) the lazy reader's verification, in both FlatBuffers layouts (rows, and columns: codec id 4):
  open (snapshot + CRC-32) + one trace against the same with ``checksum=False`` (no target; the
  >= 100x lookup-vs-decode target with verification on is figure (a) of the flatbuffers section,
  where ``tracepack.open`` verifies by default);
* (f) the ``model.json`` exporter's extension checks (``tracepack.torch.export.checks``, issue 24) on
  the 10k-node ``model.json``: ``export_model_json`` with them against the same with them switched
  off, in the same process, alternated, CPU time (target <= 1.05x).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import tracepack
from benchmarks.report import Figure, Report, best_time

__all__ = ["run"]

SAMPLE = Path(tracepack.__file__).parent / "data" / "sample" / "tiny_transformer.pt2"


class _Pattern:
    """``size`` bytes of a repeating 1 MiB random block, read like a file (no memory for the whole)."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.block = os.urandom(1 << 20)

    def read(self, n: int) -> bytes:
        n = min(n, self.left, len(self.block))
        self.left -= n
        return self.block[:n]


def _big_pt2(path: Path, weight_bytes: int) -> int:
    """The sample .pt2 plus one stored weight member of ``weight_bytes``; returns its model.json size."""
    from tracepack.io.zip import ArchiveWriter, open_archive_file

    model_json = 0
    with open_archive_file(SAMPLE) as archive, path.open("wb") as f, ArchiveWriter(f) as w:
        for m in archive.members:
            w.copy(archive, m.name, m)
            if "/models/" in m.name and m.name.endswith(".json"):
                model_json += m.size
        top = archive.top or "archive"
        w.add_stream(f"{top}/data/weights_big", weight_bytes, _Pattern(weight_bytes))  # type: ignore[arg-type]
    return model_json


#: Runs a command as its own child and writes that child's peak RSS to the file named first. Linux
#: carries a process's peak RSS over ``exec`` from the process it was forked from, so a command
#: started straight from this (large) process would report this process's peak; started from this
#: small one (the interpreter, ``os`` and ``sys``), it reports its own (plus at most ~10 MB).
_WRAPPER = """import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss * 1024))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_measured(argv: list[str]) -> tuple[float, int, int]:
    """Wall time, peak RSS (bytes) and exit status of one command, that command alone."""
    with tempfile.NamedTemporaryFile("r", prefix="tracepack-rss-") as out:
        start = time.perf_counter()
        code = subprocess.call([sys.executable, "-S", "-c", _WRAPPER, out.name, *argv], stdout=subprocess.DEVNULL)
        elapsed = time.perf_counter() - start
        text = Path(out.name).read_text()
    return elapsed, int(text) if text else 0, code


def _run_measured(argv: list[str]) -> tuple[float, int]:
    elapsed, rss, code = run_measured(argv)
    if code != 0:
        raise RuntimeError(f"{argv[:3]} exited {code}")
    return elapsed, rss


def _drop_caches() -> bool:
    """Empty the page cache (root only; ``TRACEPACK_BENCH_DROP_CACHES=0`` skips it): whether it was."""
    if os.environ.get("TRACEPACK_BENCH_DROP_CACHES", "1") == "0" or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        return False
    return True


def _same_start(src: Path, warm: list[list[str]]) -> bool:
    """The page cache in the same state before every timed command: every dirty page written out
    (nothing of the previous command left for this one to pay for), the cache emptied where
    permitted (no pages of an earlier output), then the source read once (cached, as after it was
    written) and the ``warm`` commands run (interpreter, tracepack's modules, cp itself cached);
    written out again. Returns whether the cache was emptied."""
    _sync()
    dropped = _drop_caches()
    buf = bytearray(16 << 20)
    with src.open("rb", buffering=0) as f:
        while f.readinto(buf):
            pass
    for argv in warm:
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    _sync()
    # A virtual disk may still be taking the previous side's gigabytes after `sync` returns: let it
    # settle (TRACEPACK_BENCH_SETTLE seconds, default 2) so that no side pays for another's writes.
    time.sleep(float(os.environ.get("TRACEPACK_BENCH_SETTLE", "2")))
    return dropped


def _sync() -> float:
    start = time.perf_counter()
    subprocess.run(["sync"], check=False)
    return time.perf_counter() - start


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _pack_vs_cp(report: Report, folder: Path, gib: float) -> None:
    """Figure (a): pack and cp of the same file, interleaved, each from the same page-cache state.

    Four sides per round, in a rotated order: ``cp``, ``pack`` (the default: atomic, not synced,
    as cp), ``pack --fsync`` and ``cp && sync OUT`` (both wait for the disk). The target compares
    the default ``pack`` with ``cp``; ``pack --fsync`` is compared with ``cp && sync``."""
    weight = int(gib * (1 << 30))
    src, out = folder / "big.pt2", folder / "out.pt2"
    model_json = _big_pt2(src, weight)
    size = src.stat().st_size
    # As an installed tracepack runs: from compiled bytecode (PYTHONDONTWRITEBYTECODE would have
    # every run compile tracepack's modules again, ~0.12 s here); the warm-up writes it.
    saved = os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
    exe = [sys.executable, "-m", "tracepack"]
    commands = {
        "cp": ["cp", str(src), str(out)],
        "pack": [*exe, "pack", "-f", str(src), str(out)],
        "pack --fsync": [*exe, "pack", "-f", "--fsync", str(src), str(out)],
        "cp && sync": ["sh", "-c", 'cp "$0" "$1" && sync "$1"', str(src), str(out)],
    }
    warm = [[*exe, "pack", "-f", str(SAMPLE), str(folder / "warm.pt2")], ["cp", str(SAMPLE), str(folder / "warm.pt2")]]
    times: dict[str, list[float]] = {k: [] for k in commands}
    rss = 0
    dropped = True
    rounds = int(os.environ.get("TRACEPACK_BENCH_PT2_ROUNDS", "5"))
    order = list(commands)
    try:
        for i in range(rounds):
            # Interleaved, in a rotated order: on a shared machine the disk's speed drifts, and each
            # command should meet the same conditions.
            for name in order[i % len(order) :] + order[: i % len(order)]:
                dropped = _same_start(src, warm) and dropped
                t, r = _run_measured(commands[name])
                times[name].append(t)
                if name.startswith("pack"):
                    rss = max(rss, r)
                    with zipfile.ZipFile(out) as z:
                        big = z.getinfo(f"{z.namelist()[0].split('/')[0]}/data/weights_big")
                        assert big.file_size == weight, "the weight member must come through whole"
                out.unlink()
    finally:
        os.environ.pop("PYTHONPYCACHEPREFIX", None)
        if saved is not None:
            os.environ["PYTHONDONTWRITEBYTECODE"] = saved
    src.unlink()
    (folder / "warm.pt2").unlink(missing_ok=True)
    shutil.rmtree(folder / "pycache", ignore_errors=True)
    budget = 300 * (1 << 20) + 3 * model_json
    state = "sync + page cache dropped" if dropped else "sync only (page cache not dropped: not root)"
    note = (
        f"{size / (1 << 30):.2f} GiB .pt2, one {gib:g} GiB weight member, model.json {model_json} B; "
        f"{rounds} interleaved rounds, before each side: {state}, source and programs cached"
    )
    report.add(
        Figure(
            "hostile",
            "(a) pack of a large .pt2: peak RSS vs 300 MB + 3x model.json",
            rss,
            budget,
            "B",
            target=1.0,
            higher_is_better=False,
            note=note,
        )
    )
    for side, base, label in (
        ("pack", "cp", "(a) pack (default: atomic, not synced) vs cp, medians"),
        ("pack --fsync", "cp && sync", "(a) pack --fsync vs cp && sync OUT (both on disk at the end), medians"),
    ):
        per_round = [a / b for a, b in zip(times[side], times[base], strict=True)]
        detail = (
            f"{side}: median {_median(times[side]):.2f}s worst {max(times[side]):.2f}s "
            f"[{' '.join(f'{t:.2f}' for t in times[side])}]; {base}: median {_median(times[base]):.2f}s "
            f"worst {max(times[base]):.2f}s [{' '.join(f'{t:.2f}' for t in times[base])}]; "
            f"worst/worst {max(times[side]) / max(times[base]):.2f}x; round by round "
            f"{' '.join(f'{r:.2f}' for r in per_round)}x (median {_median(per_round):.2f}x, "
            f"worst {max(per_round):.2f}x)"
        )
        report.add(
            Figure(
                "hostile",
                label,
                _median(times[side]),
                _median(times[base]),
                "s",
                target=1.5,
                higher_is_better=False,
                note=f"{detail}; {note}",
            )
        )


def _streaming_rss(report: Report, folder: Path, gib: float) -> None:
    """Figure (d): peak RSS of pack of a flat (torch 2.1-2.7) archive and of expand of a packed
    archive, each holding one stored zero member of ``gib`` GiB (a sparse hole: no disk to make)."""
    from tests.hostile.zip64 import write_zip64

    weight = int(gib * (1 << 30))
    exe = [sys.executable, "-m", "tracepack"]
    release = Path(__file__).resolve().parents[1] / "tests/data/torch/releases/2.3/transformer.pt2"
    flat = folder / "flat.pt2"
    with zipfile.ZipFile(release) as z:
        members: list[tuple[str, bytes | int]] = [(n, z.read(n)) for n in z.namelist()]
        flat_json = z.getinfo("serialized_exported_program.json").file_size
    write_zip64(flat, [*members, ("weights_big.bin", weight)], aligned=False)
    _, rss_flat = _run_measured([*exe, "pack", "-f", str(flat), str(folder / "flat-packed.pt2")])
    flat.unlink()
    (folder / "flat-packed.pt2").unlink()
    big, packed = folder / "big.pt2", folder / "packed.pt2"
    model_json = _big_pt2(big, weight)
    _run_measured([*exe, "pack", "-f", str(big), str(packed)])
    big.unlink()
    _run_measured([*exe, "convert", "-f", str(packed), str(folder / "doc.tpk")])
    _, rss_expand = _run_measured(
        [*exe, "expand", "-f", str(folder / "doc.tpk"), str(folder / "out.pt2"), "--archive", str(packed)]
    )
    for name, rss, program in (
        ("(d) pack of a flat (torch 2.1-2.7) .pt2", rss_flat, flat_json),
        ("(d) expand --archive of a packed .pt2", rss_expand, model_json),
    ):
        report.add(
            Figure(
                "hostile",
                f"{name}: peak RSS vs 300 MB + 3x model.json",
                rss,
                300 * (1 << 20) + 3 * program,
                "B",
                target=1.0,
                higher_is_better=False,
                note=f"one stored {gib:g} GiB member",
            )
        )


def _upgrade_rss(report: Report, folder: Path, gib: float) -> None:
    """Figure (d): peak RSS of ``tracepack upgrade`` (streamed) of the sample with one stored weight
    member of ``gib`` GiB, against the same command on the sample alone (torch's import is most of
    either: the weights must add nothing)."""
    weight = int(gib * (1 << 30))
    exe = [sys.executable, "-m", "tracepack", "upgrade", "-f"]
    big = folder / "big.pt2"
    _big_pt2(big, weight)
    _, rss_small = _run_measured([*exe, str(SAMPLE), str(folder / "small-new.pt2")])
    t_big, rss_big = _run_measured([*exe, str(big), str(folder / "big-new.pt2")])
    with zipfile.ZipFile(folder / "big-new.pt2") as z:
        member = z.getinfo(f"{z.namelist()[0].split('/')[0]}/data/weights_big")
        assert member.file_size == weight, "the weight member must come through whole"
    for p in (big, folder / "big-new.pt2", folder / "small-new.pt2"):
        p.unlink()
    report.add(
        Figure(
            "hostile",
            f"(d) upgrade (streamed) with a {gib:g} GiB weight: peak RSS vs the sample alone",
            rss_big,
            rss_small,
            "B",
            target=1.1,
            higher_is_better=False,
            note=f"{rss_big / 2**20:.0f} MB vs {rss_small / 2**20:.0f} MB (torch's import), {t_big:.1f} s",
        )
    )
    _flat_upgrade_rss(report, folder, gib)


def _flat_upgrade_rss(report: Report, folder: Path, gib: float) -> None:
    """Figure (d), flat: ``tracepack upgrade`` (streamed) of a torch 2.1-2.7 archive whose
    ``serialized_state_dict.pt`` holds a weight of ``gib`` GiB (zeros, a hole in the source),
    against the same command on the sample alone: the weight becomes a member of its own, copied
    raw out of the nested archive."""
    from tests.hostile.big import FLAT, flat_with_big_weight

    weight = int(gib * (1 << 30))
    exe = [sys.executable, "-m", "tracepack", "upgrade", "-f"]
    big, small_new, big_new = folder / "flat-big.pt2", folder / "flat-small-new.pt2", folder / "flat-big-new.pt2"
    flat_with_big_weight(big, weight)
    _, rss_small = _run_measured([*exe, str(FLAT), str(small_new)])
    t_big, rss_big = _run_measured([*exe, str(big), str(big_new)])
    with zipfile.ZipFile(big_new) as z:
        largest = max(z.infolist(), key=lambda i: i.file_size)
        assert largest.file_size == weight, "the weight must come through whole"
        assert "/data/weights/weight_" in largest.filename, "as a weight member of its own"
    for p in (big, big_new, small_new):
        p.unlink()
    report.add(
        Figure(
            "hostile",
            f"(d) upgrade (streamed) of a flat torch 2.1-2.7 .pt2 with a {gib:g} GiB weight: peak RSS vs the sample",
            rss_big,
            rss_small,
            "B",
            target=1.1,
            higher_is_better=False,
            note=f"{rss_big / 2**20:.0f} MB vs {rss_small / 2**20:.0f} MB (torch's import), {t_big:.1f} s",
        )
    )


def _guard_cost(report: Report) -> None:
    """Figure (e): the JSON budgets' cost on a 10k-node model.json: the pre-scan (run only when a
    parse runs out of room or a budget is below the interpreter's limit) against the import, and
    the guard's cost on a real document (none is measured: the parse runs once, as it is)."""
    import json

    from benchmarks.corpus import stacked_model_json
    from tracepack.errors import DecodeError
    from tracepack.io import guard
    from tracepack.torch.export.model_json import import_model_json

    data = stacked_model_json(150)
    nodes = len(json.loads(data)["graph_module"]["graph"]["nodes"])
    t_scan = best_time(lambda: guard.scan_json(data, min_digits=4301), repeat=3, min_time=0.2)
    t_import = best_time(lambda: import_model_json(data, source="m.json"), repeat=3, min_time=0.5)
    t_loads = t_guarded = float("inf")
    for _ in range(3):  # alternated, in CPU time: wall time on this shared machine swung 0.92-1.27x
        t_loads = min(t_loads, best_time(lambda: json.loads(data), repeat=2, min_time=0.3, clock=time.process_time))
        t_guarded = min(
            t_guarded,
            best_time(
                lambda: guard.parse_json(lambda: json.loads(data), data, "m.json", DecodeError),
                repeat=2,
                min_time=0.3,
                clock=time.process_time,
            ),
        )
    calls = 100_000  # the guard's own fixed cost: around a parse that does nothing
    start = time.process_time()
    for _ in range(calls):
        guard.parse_json(tuple, b"", "m.json", DecodeError)
    fixed = (time.process_time() - start) / calls
    note = f"{nodes:,} nodes, {len(data) / 2**20:.1f} MB; scan {t_scan * 1e3:.0f} ms, json.loads {t_loads * 1e3:.0f} ms"
    scan = Figure("hostile", "(e) JSON pre-scan vs import_model_json (10k nodes)", t_scan, t_import, "s")
    report.add(dataclasses.replace(scan, target=0.25, higher_is_better=False, note=note))
    bare = Figure("hostile", "(e) json.loads under the guard vs bare (10k nodes)", t_guarded, t_loads, "s")
    report.add(
        dataclasses.replace(
            bare,
            target=1.05,
            higher_is_better=False,
            note=f"CPU time; nothing measured or changed; the guard's own cost {fixed * 1e6:.2f} us a call",
        )
    )


def _export_checks_cost(report: Report) -> None:
    """Figure (f): what checking every extension and typed value costs ``export_model_json``."""
    from benchmarks.corpus import stacked_model_json
    from tracepack.torch.export import checks
    from tracepack.torch.export.model_json import export_model_json, import_model_json

    data = stacked_model_json(150)
    doc = import_model_json(data, source="m.json")
    names = ("check_value", "check_layout", "check_program", "check_nested_graph")
    real = {name: getattr(checks, name) for name in names}

    def unchecked(value: object = None, *args: object, **kwargs: object) -> object:
        return value  # what each check returns when the value passes (check_value returns None)

    def switch(on: bool) -> None:
        for name in names:
            setattr(checks, name, real[name] if on else unchecked)

    timed = {True: float("inf"), False: float("inf")}
    try:
        for round_ in range(4):  # alternated, in CPU time
            for on in (True, False) if round_ % 2 == 0 else (False, True):
                switch(on)
                assert export_model_json(doc) == data
                t = best_time(lambda: export_model_json(doc), repeat=2, min_time=0.5, clock=time.process_time)
                timed[on] = min(timed[on], t)
    finally:
        switch(True)
    report.add(
        Figure(
            "hostile",
            "(f) export_model_json: extension checks on vs off (10k nodes)",
            timed[True],
            timed[False],
            "s",
            target=1.05,
            higher_is_better=False,
            note=f"{len(doc):,} nodes, {len(doc.raw.graph.values):,} values; CPU time, alternated rounds",
        )
    )


def run(report: Report) -> None:
    gib = float(os.environ.get("TRACEPACK_BENCH_PT2_GB", "2"))
    with tempfile.TemporaryDirectory(prefix="tracepack-bench-") as tmp:
        _pack_vs_cp(report, Path(tmp), gib)
        _streaming_rss(report, Path(tmp), gib)
        _upgrade_rss(report, Path(tmp), gib)
        shutil.rmtree(tmp, ignore_errors=True)
    _guard_cost(report)
    _export_checks_cost(report)

    from tracepack import traces

    hostile = '  File "' + '", line 1, in x' * 20_000
    assert len(hostile) > 240_000
    t_parse = best_time(lambda: traces.parse_stack_trace(hostile), repeat=3, min_time=0.05)
    report.add(
        Figure(
            "hostile",
            "(b) 240 KB hostile stack trace: parse vs a 1 s budget",
            t_parse,
            1.0,
            "s",
            target=0.1,
            higher_is_better=False,
            note="was minutes with the backtracking regex",
        )
    )

    from benchmarks.bench_flatbuffers import stacked_document

    doc = stacked_document(20_000)
    with tempfile.TemporaryDirectory(prefix="tracepack-bench-") as tmp:
        for codec, label in (("flatbuffers-rows", ""), ("flatbuffers-columns", " (column layout)")):
            path = Path(tmp) / f"m-{codec}.tpk"
            tracepack.dump(doc, path, codec=codec, compression="none")
            name = doc.node(len(doc) // 2).name

            def verified(path: Path = path, name: str = name) -> str | None:
                with tracepack.open(path) as lz:
                    return lz.node(name).stack_trace

            def unverified(path: Path = path, name: str = name) -> str | None:
                with tracepack.open(path, checksum=False) as lz:
                    return lz.node(name).stack_trace

            assert verified() == unverified() == doc.node(name).stack_trace
            t_on = best_time(verified, repeat=5, min_time=0.2)
            t_off = best_time(unverified, repeat=5, min_time=0.2)
            note = f"20k nodes, {path.stat().st_size / (1 << 20):.1f} MB file; private snapshot either way"
            report.add(
                Figure(
                    "hostile",
                    f"(c) lazy open + one trace{label}: CRC on vs checksum=False",
                    t_on,
                    t_off,
                    "s",
                    higher_is_better=False,
                    note=note,
                )
            )
