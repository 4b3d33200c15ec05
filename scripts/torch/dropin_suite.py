"""PyTorch's own export tests with tracepack in the loop, against the same tests without it.

    python scripts/torch/dropin_suite.py TORCH_TEST_EXPORT_DIR [--sample test_export.py:10] [FILE ...]

``TORCH_TEST_EXPORT_DIR`` is ``test/export`` of a PyTorch source tree of the installed release (its
tests are never copied into this repository). The files (default ``test_serialize.py
test_serdes.py test_export.py``, the last sampled) run three times with
``scripts/torch/dropin_plugin.py``: as they are (``off``), with every ``torch.export.save`` packed by
tracepack and every ``torch.export.load`` routed through ``tracepack.torch.load`` (``on``), and the
same with ``trust_pickles=True`` (``trust``). It prints, per pass, how many tests pass, and every test
that passes as it is but not with tracepack; ``refused`` are tests whose program tracepack refuses to
unpickle without ``trust_pickles`` (by design). Exit status 1 when a test that passes as it is fails
in the ``trust`` pass, or fails in the ``on`` pass other than by a refusal; 2 when no test passes as it
is (nothing was compared: a collection error, a missing test dependency).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_FILES = ("test_serialize.py", "test_serdes.py", "test_export.py")


def run_pass(mode: str, tests: Path, files: list[str], sample: str, extra: list[str]) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        env = {
            **os.environ,
            "TRACEPACK_DROPIN": mode,
            "TRACEPACK_DROPIN_REPORT": str(report),
            "TRACEPACK_DROPIN_SAMPLE": sample,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), str(tests), os.environ.get("PYTHONPATH")])),
        }
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "dropin_plugin", "-p", "no:cacheprovider",
               "-o", "addopts=", "--rootdir", str(tests), *files, *extra]  # fmt: skip
        print(f"== {mode}: {' '.join(cmd[3:])}", flush=True)
        subprocess.run(cmd, cwd=tests, env=env, check=False)
        if not report.exists():
            raise SystemExit(f"the {mode} pass wrote no report (pytest did not start?)")
        data = json.loads(report.read_text())
        print(f"   tracepack calls: {data['calls']}")
        outcomes: dict[str, str] = data["outcomes"]
        return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tests", type=Path, help="test/export of a PyTorch source tree of the installed release")
    parser.add_argument("files", nargs="*", default=list(DEFAULT_FILES))
    parser.add_argument("--sample", default="test_export.py:10", help="FILE:N keeps every Nth test of FILE")
    parser.add_argument("--pytest", nargs=argparse.REMAINDER, default=[], help="more pytest arguments")
    args = parser.parse_args(argv)
    tests: Path = args.tests.resolve()
    missing = [f for f in args.files if not (tests / f).exists()]
    if missing:
        raise SystemExit(f"{tests}: no {', '.join(missing)} (point at test/export of a PyTorch source tree)")
    results = {mode: run_pass(mode, tests, args.files, args.sample, args.pytest) for mode in ("off", "on", "trust")}
    plain = results["off"]
    passing = {t for t, o in plain.items() if o in ("passed", "xfailed")}
    print(f"\n{len(plain)} tests; as they are: {len(passing)} pass")
    if not passing:
        print("no test passed as it is (did collection fail? PyTorch's tests need expecttest): nothing compared")
        return 2
    bad = 0
    for mode in ("on", "trust"):
        got = results[mode]
        still = {t for t in passing if got.get(t) in ("passed", "xfailed")}
        refused = sorted(t for t in passing if got.get(t) == "refused")
        lost = sorted(t for t in passing - still if got.get(t) != "refused")
        print(f"with tracepack ({mode}): {len(still)} of those pass, {len(refused)} refused (unsafe pickle), "
              f"{len(lost)} differ")  # fmt: skip
        for t in lost:
            print(f"   differs: {t} ({got.get(t, 'not run')})")
        for t in refused:
            print(f"   refused: {t}")
        if mode == "trust":
            bad += len(lost) + len(refused)
        else:
            bad += len(lost)
        gained = sorted(t for t, o in got.items() if o == "passed" and t not in passing)
        for t in gained:
            print(f"   passes only with tracepack: {t} (as it is: {plain.get(t, 'not run')})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
