"""A saved finding made a regression input: ``python -m fuzz.to_regression FINDING [--harness NAME] [--name NAME]``.

Copies the input into ``tests/fuzz_regressions/<harness>/`` (the harness is the folder the finding was
saved in, unless named), where ``tests/fuzz_regressions/test_regressions.py`` replays it through the
harness's contract on every ``make test``. Fix the cause, then run that test."""

from __future__ import annotations

import argparse
import hashlib
import shutil
from pathlib import Path

from fuzz.common import ROOT
from fuzz.harnesses import load

FOLDER = ROOT / "tests/fuzz_regressions"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz.to_regression")
    parser.add_argument("findings", nargs="+", type=Path)
    parser.add_argument("--harness", help="default: the folder the finding is in")
    parser.add_argument("--name", help="a name saying what it is (default: its SHA-1)")
    args = parser.parse_args(argv)
    for finding in args.findings:
        harness = args.harness or finding.resolve().parent.name
        load(harness)  # a harness by that name exists
        data = finding.read_bytes()
        name = args.name or hashlib.sha1(data).hexdigest()[:16]
        target = FOLDER / harness / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(finding, target)
        print(f"{target.relative_to(ROOT)} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
