"""The zoo job over real exports: every core, memory per worker, reruns, Ray (``python -m benchmarks.run zoo``).

Reads the programs ``scripts/zoo/export_zoo.py`` writes into ``.bench/zoo/`` (236 torch.export programs
of transformers, timm and torchvision models; made with a Python that has those libraries, once). Each
figure is a ratio of two runs of ``tracepack.analysis.zoo.export_tables`` in this command, each into a
fresh dataset:

- ``-j 2`` against ``-j 1`` over every program, the two run alternately (``-j 1``, ``-j 2``, ``-j 2``,
  ``-j 1``) and the best of each kept, since the machine may be shared (its load average is printed);
- the peak resident memory of a worker (``ru_maxrss``, the largest of the workers) over 200 inputs
  against over 50: the 200 are the same 50 programs four times under other names, so only the number
  of inputs differs;
- a second run over the unchanged dataset against the first (target 20x faster), and a run with one
  model added (it must convert one program);
- the Ray job (local Ray, 2 CPUs) against ``-j 2``, and its tables against ``-j 2``'s row for row
  (DuckDB); Ray's start-up is not counted (a cluster is already running where such jobs run), and is
  printed.

``ZOO_INPUTS=N`` takes the first N programs only (a quicker run).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import random
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from benchmarks.report import Figure, Report

ZOO = Path(".bench/zoo")
MAKE = "python scripts/zoo/export_zoo.py  (a Python with torch, torchvision, timm and transformers; ~15 min, ~900 MB)"
SECTION = "zoo"


def _export(inputs: list[str], out: Path, **options: Any) -> tuple[float, Any, dict[int, int]]:
    """(seconds, summary, peak RSS in KiB per worker pid) of one run."""
    from tracepack.analysis.zoo import export_tables

    rss: dict[int, int] = {}

    def seen(outcome: Any) -> None:
        if outcome.max_rss_kib is not None:
            rss[outcome.pid] = max(rss.get(outcome.pid, 0), outcome.max_rss_kib)

    start = time.perf_counter()
    summary = export_tables(inputs, out, on_outcome=seen, **options)
    took = time.perf_counter() - start
    if summary.failed:
        raise SystemExit(f"zoo: {len(summary.failed)} input(s) failed, e.g. {summary.failed[0].error}")
    return took, summary, rss


def _rows(folder: Path) -> dict[str, list[tuple[Any, ...]]]:
    import duckdb

    from tracepack.analysis.dataset import COLUMNS

    con = duckdb.connect()
    return {
        name: sorted(con.execute(f"SELECT * FROM read_parquet('{folder / name / '*.parquet'}')").fetchall(), key=repr)
        for name in COLUMNS
    }


def _load() -> str:
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load unknown"
    return f"load {one:.1f}/{five:.1f} on {os.cpu_count()} cores"


def run(report: Report) -> None:
    programs = sorted(str(p) for p in ZOO.glob("*.pt2"))
    if len(programs) < 200:
        print(f"(the zoo section needs >= 200 programs in {ZOO}/, found {len(programs)}; make them with: {MAKE})")
        return
    limit = int(os.environ.get("ZOO_INPUTS", "0") or 0)
    if limit:
        programs = programs[:limit]
    size = sum(os.stat(p).st_size for p in programs)
    print(f"({len(programs)} programs, {size / 1e6:.0f} MB; {_load()})")
    with tempfile.TemporaryDirectory(prefix="tracepack-zoo-") as tmp:
        work = Path(tmp)
        _throughput(report, programs, work)
        _memory(report, programs, work)
        _incremental(report, programs, work)
        _ray(report, programs, work)


def _throughput(report: Report, programs: list[str], work: Path) -> None:
    times: dict[int, list[float]] = {1: [], 2: []}
    for i, jobs in enumerate((1, 2, 2, 1)):
        took, summary, _ = _export(programs, work / f"j{jobs}-{i}", jobs=jobs)
        assert summary.converted == len(programs)
        times[jobs].append(took)
        print(f"  -j {jobs}: {took:.2f} s ({len(programs) / took:.1f} programs/s; {_load()})", flush=True)
    note = f"{len(programs)} real exports, alternating -j 1/-j 2, best of 2 each; {_load()}"
    report.add(Figure(SECTION, "export -j 2 vs -j 1 (throughput)", min(times[2]), min(times[1]), "s", 1.7, True, note))


def _memory(report: Report, programs: list[str], work: Path) -> None:
    rng = random.Random(0)
    sample = rng.sample(programs, min(50, len(programs)))
    repeated = work / "repeated"
    repeated.mkdir()
    inputs_200 = []
    for copy in range(4):
        for p in sample:
            link = repeated / f"{copy}-{Path(p).name}"
            link.symlink_to(Path(p).resolve())
            inputs_200.append(str(link))
    peaks = {}
    for label, inputs in (("50", inputs_200[: len(sample)]), ("200", inputs_200)):
        _, _, rss = _export(inputs, work / f"rss-{label}", jobs=2)
        peaks[label] = max(rss.values())
        print(f"  {len(inputs)} inputs: peak RSS per worker {sorted(rss.values())} KiB ({len(rss)} workers)")
    report.add(
        Figure(
            SECTION,
            "peak RSS per worker, 200 inputs vs 50 (same programs)",
            peaks["200"] * 1024,
            peaks["50"] * 1024,
            "B",
            1.15,
            False,
            "workers recycled every 25 inputs",
        )
    )


def _incremental(report: Report, programs: list[str], work: Path) -> None:
    out = work / "incremental"
    first, s1, _ = _export(programs[:-1], out, jobs=2)
    second, s2, _ = _export(programs[:-1], out, jobs=2)
    assert (s1.converted, s2.converted, s2.unchanged) == (len(programs) - 1, 0, len(programs) - 1)
    report.add(Figure(SECTION, "second run over an unchanged store vs first", second, first, "s", 20.0, True, "-j 2"))
    third, s3, _ = _export(programs, out, jobs=2)
    print(f"  one model added: {s3.converted} converted, {s3.unchanged} unchanged in {third:.2f} s")
    report.add(Figure(SECTION, "programs converted when one model is added", s3.converted, 1, "", 1.0, False))


def _ray(report: Report, programs: list[str], work: Path) -> None:
    if importlib.util.find_spec("ray") is None:
        print("(ray is not installed: the Ray figures are skipped; `make venv-ray` installs it)")
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ray = importlib.import_module("ray")
        start = time.perf_counter()
        ray.init(num_cpus=2, object_store_memory=512 << 20, include_dashboard=False, log_to_driver=False)
        print(f"  Ray started in {time.perf_counter() - start:.1f} s (not counted)")
        try:
            ray_time, summary, _ = _export(programs, work / "ray", engine="ray")
        finally:
            ray.shutdown()
    assert summary.converted == len(programs)
    local_time, _, _ = _export(programs, work / "ray-local", jobs=2)
    print(f"  Ray: {ray_time:.2f} s, -j 2: {local_time:.2f} s ({_load()})")
    report.add(
        Figure(SECTION, "Ray job (local, 2 CPUs) vs -j 2 (throughput)", ray_time, local_time, "s", 1 / 1.5, True)
    )
    a, b = _rows(work / "ray"), _rows(work / "ray-local")
    total = sum(len(v) for v in b.values())
    differing = sum(len(set(a[k]) ^ set(b[k])) + abs(len(a[k]) - len(b[k])) for k in b)
    report.add(Figure(SECTION, "rows differing, Ray vs -j 2 (of all rows)", differing, total, "rows", 0.0, False))
    shutil.rmtree(work / "ray", ignore_errors=True)
