"""The hostile-input runner: seeded mutants of every surface's seeds, each run under a time limit.

``python -m tests.hostile.fuzz --cases 2000 [--surface NAME] [--seed N] [--save DIR]`` (``make fuzz``
runs a long campaign); :mod:`tests.hostile.test_fuzz` runs a short one in ``make test``. Outcomes:

* ``accepted`` accepted, and every answer consistent (re-encodes, lazy == eager, byte-exact);
* ``refused``  refused with a one-line InputError;
* ``wrong``    accepted, then answered wrongly (:class:`~tests.hostile.surfaces.Finding`);
* ``error``    an exception that is not an InputError (the CLI would say "internal error");
* ``hang``     still running after the time limit (10 s by default).

The whole run's peak RSS is reported; with ``--save`` every bad input is written to DIR with a note.
"""

from __future__ import annotations

import argparse
import resource
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from tests.hostile.mutate import mutate
from tests.hostile.surfaces import SURFACES, Finding

__all__ = ["GOOD", "Report", "main", "run"]

#: Outcomes that are right: the input was accepted (and answered consistently) or refused cleanly.
GOOD = frozenset({"accepted", "refused"})


class Hang(BaseException):
    """Raised by the alarm: a BaseException, so that no ``except Exception`` in tracepack hides it."""


@dataclass
class Report:
    outcomes: Counter[str] = field(default_factory=Counter)
    per_surface: dict[str, Counter[str]] = field(default_factory=dict)
    bad: list[str] = field(default_factory=list)
    slowest: float = 0.0

    def line(self) -> str:
        parts = [f"{sum(self.outcomes.values())} inputs"] + [f"{k} {v}" for k, v in sorted(self.outcomes.items())]
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        return ", ".join(parts) + f"; slowest {self.slowest:.2f} s; peak RSS {rss} MB"


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang


def run(
    cases: int, *, seed: int = 0, surfaces: list[str] | None = None, timeout: float = 10.0, save: Path | None = None
) -> Report:
    report = Report()
    names = surfaces or list(SURFACES)
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        with tempfile.TemporaryDirectory(prefix="tracepack-fuzz-") as tmp:
            folder = Path(tmp)
            for name in names:
                surface = SURFACES[name]
                seeds = surface.seeds()
                counts = report.per_surface.setdefault(name, Counter())
                for case in range(cases):
                    number = seed * 1_000_003 + case
                    seed_name, data = seeds[case % len(seeds)]
                    splice = seeds[(case * 7 + 3) % len(seeds)][1]
                    mutant, how = mutate(data, number, surface.kinds, splice=splice)
                    outcome, note = _one(surface.run, mutant, folder, timeout, report)
                    counts[outcome] += 1
                    report.outcomes[outcome] += 1
                    if outcome not in GOOD:
                        label = f"{name} #{number} ({seed_name}, {how}): {outcome}: {note}"
                        report.bad.append(label)
                        if save is not None:
                            save.mkdir(parents=True, exist_ok=True)
                            (save / f"{name}-{number}.bin").write_bytes(mutant)
                            (save / f"{name}-{number}.txt").write_text(label + "\n")
                    for p in folder.iterdir():
                        p.unlink()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return report


def _one(fn: object, data: bytes, folder: Path, timeout: float, report: Report) -> tuple[str, str]:
    start = time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        return str(fn(data, folder)), ""  # type: ignore[operator]
    except Hang:
        return "hang", f"over {timeout} s"
    except Finding as exc:
        return "wrong", str(exc)[:300]
    except RecursionError:
        return "error", "RecursionError"
    except Exception as exc:
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        return "error", f"{type(exc).__name__}: {str(exc)[:200]} at {Path(tb.filename).name}:{tb.lineno}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        report.slowest = max(report.slowest, time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.hostile.fuzz", description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=500, help="mutants per surface (default 500)")
    p.add_argument("--seed", type=int, default=0, help="campaign seed (default 0)")
    p.add_argument("--surface", action="append", choices=sorted(SURFACES), help="only these surfaces")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per input before it counts as a hang")
    p.add_argument("--save", type=Path, help="write every bad input and a note to this folder")
    args = p.parse_args(argv)
    report = run(args.cases, seed=args.seed, surfaces=args.surface, timeout=args.timeout, save=args.save)
    for name, counts in report.per_surface.items():
        print(f"  {name:12} " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for line in report.bad[:50]:
        print("  " + line)
    print(report.line())
    return 0 if set(report.outcomes) <= GOOD else 1


if __name__ == "__main__":
    sys.exit(main())
