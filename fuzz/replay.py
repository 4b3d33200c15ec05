"""Inputs replayed through a harness's contract, without atheris: ``python -m fuzz.replay HARNESS PATH...``
(files, or folders of them). Each input runs under a time limit; prints one line per input that broke
the contract and exits 1 if any did. ``--coverage OUT.json`` measures the branch coverage of the
harness's target modules over the inputs (coverage.py) and writes it per module."""

from __future__ import annotations

import argparse
import importlib.util
import json
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

from fuzz.harnesses import load


class Hang(BaseException):
    """An input ran past the time limit."""


def _alarm(signum: int, frame: Any) -> None:
    raise Hang


def inputs(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(f for f in p.iterdir() if f.is_file() and not f.name.endswith(".txt")))
        elif p.is_file():
            out.append(p)
    return out


def replay(name: str, files: list[Path], seconds: int = 60) -> list[tuple[Path, str]]:
    """``(file, what went wrong)`` for every input that broke the contract."""
    harness = load(name)
    broken = []
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for f in files:
            signal.alarm(seconds)
            try:
                harness.test_one_input(f.read_bytes())
            except Hang:
                broken.append((f, f"hang: over {seconds} s"))
            except Exception as exc:
                last = traceback.extract_tb(exc.__traceback__)[-1]
                broken.append(
                    (f, f"{type(exc).__name__} at {Path(last.filename).name}:{last.lineno}: {str(exc)[:300]}")
                )
            finally:
                signal.alarm(0)
    finally:
        signal.signal(signal.SIGALRM, old)
    return broken


def module_files(module: str) -> list[str]:
    """The source files of ``module`` (every file below it for a package), found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return []
    origin = Path(spec.origin)
    if spec.submodule_search_locations:
        return sorted(str(p) for p in origin.parent.rglob("*.py"))
    return [str(origin)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz.replay")
    parser.add_argument("harness")
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--coverage", metavar="OUT.json")
    parser.add_argument("--timeout", type=int, default=60)
    args = parser.parse_args(argv)
    harness = load(args.harness)
    cov = None
    targets = {m: module_files(m) for m in harness.TARGETS}
    if args.coverage:
        import coverage

        cov = coverage.Coverage(branch=True, include=[f for fs in targets.values() for f in fs], data_file=None)
        cov.start()
    files = inputs(args.paths)
    broken = replay(args.harness, files, args.timeout)
    if cov is not None:
        cov.stop()
        raw = Path(args.coverage).with_suffix(".raw.json")
        cov.json_report(outfile=str(raw))
        per_file = {str(Path(k).resolve()): v for k, v in json.loads(raw.read_text())["files"].items()}
        raw.unlink()
        report: dict[str, Any] = {"inputs": len(files), "broken": len(broken), "modules": {}}
        for module, fs in targets.items():
            totals = {"branches": 0, "covered_branches": 0, "statements": 0, "covered_statements": 0}
            for f in fs:
                s = (
                    per_file[str(Path(f).resolve())]["summary"]
                    if str(Path(f).resolve()) in per_file
                    else _unrun(cov, f)
                )
                totals["branches"] += s["num_branches"]
                totals["covered_branches"] += s["covered_branches"]
                totals["statements"] += s["num_statements"]
                totals["covered_statements"] += s["covered_lines"]
            report["modules"][module] = totals
        Path(args.coverage).write_text(json.dumps(report, indent=1))
    for f, what in broken:
        print(f"{f}: {what}")
    return 1 if broken else 0


def _unrun(cov: Any, path: str) -> dict[str, int]:
    """The summary of a file no input reached (coverage.py leaves it out of its report)."""
    analysis = cov._analyze(path)
    n = analysis.numbers
    return {
        "num_branches": n.n_branches,
        "covered_branches": n.n_branches - n.n_missing_branches,
        "num_statements": n.n_statements,
        "covered_lines": n.n_executed,
    }


if __name__ == "__main__":
    sys.exit(main())
