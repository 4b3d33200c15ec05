"""Run every benchmark section: ``python -m benchmarks.run [SECTION ...]`` (``make bench``).

Sections are the ``bench_*.py`` modules beside this file, each with a
``run(report)`` function. Results go to stdout and ``.bench/results.json``;
the exit code is 1 when any target is missed. ``--record`` also writes each section's figures into
``benchmarks/results/SECTION.json``, committed: the figures the docs quote (tests/readme checks the
README's against them; a section may check its run against them, as ``defaults`` does).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from benchmarks.report import RESULTS, Report


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).parent
    sections = sorted(p.stem.removeprefix("bench_") for p in here.glob("bench_*.py"))
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sections", nargs="*", choices=[[], *sections], help="sections to run (default: all)")
    parser.add_argument(
        "--record", action="store_true", help="also write each section's figures to benchmarks/results/SECTION.json"
    )
    args = parser.parse_args(argv)
    report = Report(recording=args.record)
    for name in args.sections or sections:
        print(f"== {name}", flush=True)
        importlib.import_module(f"benchmarks.bench_{name}").run(report)
    report.write(Path(".bench/results.json"))
    if args.record:
        for name in args.sections or sections:
            path = RESULTS / f"{name}.json"
            report.write(path, section=name)
            print(f"recorded {path.relative_to(here.parent)}")
    if report.missed:
        print(f"{len(report.missed)} target(s) missed:", file=sys.stderr)
        for f in report.missed:
            print("  " + Report.format_row(f), file=sys.stderr)
        return 1
    print(f"all {sum(f.target is not None for f in report.figures)} targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
