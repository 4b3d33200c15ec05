"""Collects benchmark figures and prints them as one table.

A figure is ``value`` of tracepack against ``baseline`` measured in the same
run, as a ratio, with the target it must meet. ``make bench`` exits non-zero
when a target is missed, so a regression cannot pass unnoticed.
"""

from __future__ import annotations

import gc
import json
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["RESULTS", "Figure", "Report", "best_time", "format_value", "peak_memory", "recorded"]

#: The committed figures of ``python -m benchmarks.run SECTION --record``, one file per section.
RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Figure:
    section: str
    name: str
    value: float
    baseline: float
    unit: str
    #: "ratio >= target" when higher is better ("x faster"), "ratio <= target" when lower is better ("x of size").
    target: float | None = None
    higher_is_better: bool = True
    note: str = ""

    @property
    def ratio(self) -> float:
        if self.higher_is_better:
            return self.baseline / self.value if self.value else float("inf")
        return self.value / self.baseline if self.baseline else float("inf")

    @property
    def ok(self) -> bool:
        if self.target is None:
            return True
        return self.ratio >= self.target if self.higher_is_better else self.ratio <= self.target


@dataclass
class Report:
    figures: list[Figure] = field(default_factory=list)
    #: ``--record``: this run's figures become the committed ones (a section does not check against them).
    recording: bool = False

    def add(self, figure: Figure) -> None:
        self.figures.append(figure)
        print(self.format_row(figure), flush=True)

    @staticmethod
    def format_row(f: Figure) -> str:
        goal = ""
        if f.target is not None:
            goal = f"{'>=' if f.higher_is_better else '<='} {f.target:g}x  {'ok' if f.ok else 'MISSED'}"
        word = "faster" if f.higher_is_better else "of baseline"
        return (
            f"{f.section:<12} {f.name:<52} {_fmt(f.value, f.unit):>12} vs {_fmt(f.baseline, f.unit):>12}"
            f"  {f.ratio:8.2f}x {word:<11} {goal}  {f.note}"
        )

    def write(self, path: Path, *, section: str | None = None) -> None:
        """The figures (of ``section`` only, if given) as a JSON list, one object per figure."""
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = [{**asdict(f), "ratio": f.ratio, "ok": f.ok} for f in self.figures if section in (None, f.section)]
        path.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")

    @property
    def missed(self) -> list[Figure]:
        return [f for f in self.figures if not f.ok]


def recorded(section: str) -> dict[str, dict[str, Any]]:
    """The committed figures of ``section`` (``benchmarks/results/SECTION.json``) by name; {} if none."""
    path = RESULTS / f"{section}.json"
    if not path.exists():
        return {}
    return {row["name"]: row for row in json.loads(path.read_text(encoding="utf-8"))}


def format_value(value: float, unit: str) -> str:
    """A figure's value as the report prints it (``321.6 KB``, ``34.93 ms``), and the README quotes it."""
    return _fmt(value, unit)


def _fmt(value: float, unit: str) -> str:
    if unit == "s":
        if value < 1e-3:
            return f"{value * 1e6:.2f} us"
        return f"{value * 1e3:.2f} ms" if value < 1 else f"{value:.3f} s"
    if unit == "B":
        for u in ("B", "KB", "MB", "GB"):
            if value < 1024 or u == "GB":
                return f"{value:.0f} {u}" if u == "B" else f"{value:.1f} {u}"
            value /= 1024
    return f"{value:.3g} {unit}"


def best_time(
    fn: Callable[[], Any], *, repeat: int = 5, min_time: float = 0.2, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Best time of ``fn`` over ``repeat`` rounds (each round loops until ``min_time``): wall time, or
    ``clock=time.process_time`` for this process's CPU time (what a CPU-bound figure on a shared
    machine should compare: other processes' load does not count)."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        n = 0
        start = clock()
        while True:
            fn()
            n += 1
            elapsed = clock() - start
            if elapsed >= min_time:
                break
        best = min(best, elapsed / n)
    return best


def peak_memory(fn: Callable[[], Any]) -> tuple[int, Any]:
    """Peak traced allocation (bytes) while ``fn`` runs and its result is alive."""
    gc.collect()
    tracemalloc.start()
    try:
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, result
