"""Run an implementation against the conformance suite (spec/12-conformance.md, §12.2-§12.3).

::

    python -m conformance.run --impl ".venv/bin/tracepack"         # the reference implementation
    python -m conformance.run --impl "build/tracepack-cpp" -j 2     # any other: the same protocol

For every vector of ``conformance/manifest.json`` the runner starts ``IMPL COMMAND --error-format json
[--zstd-dict DICT] FILE [NODE...]`` and compares: for a valid vector, the exit code 0 and standard
output byte for byte with the expected file; for a damaged one, exit code 2, nothing on standard output,
exactly one line on standard error, a JSON object whose ``error`` is the expected class and whose
``place`` matches the expected place (§12.3); then the same command without ``--error-format json``
must also exit 2 with exactly one line on standard error.

It uses the standard library only and nothing of the tracepack package: it compares bytes, exit codes
and the error JSON, so it runs any implementation the same way.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "manifest.json"
#: Inside the payload (places starting with ``$``), list indices and union variant markers are not compared.
_INDICES = re.compile(r"\[[^\]]*\]|<[^>]*>")


def normalize_place(place: str | None) -> str | None:
    """The part of a place an implementation must reproduce exactly (§12.3)."""
    if place is None or not place.startswith("$"):
        return place
    return _INDICES.sub("", place)


def load_manifest(path: Path = MANIFEST) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if data.get("format") != "tracepack-conformance":
        raise SystemExit(f"{path}: not a conformance manifest")
    return data


def expected_output(name: str, root: Path = HERE) -> bytes:
    """An expected standard output (``.gz`` files are stored gzip-compressed)."""
    data = (root / name).read_bytes()
    return gzip.decompress(data) if name.endswith(".gz") else data


def command(impl: Sequence[str], vector: dict[str, Any], *, json_errors: bool, root: Path = HERE) -> list[str]:
    """The command line of ``vector``: ``IMPL COMMAND [--error-format json] [--zstd-dict D] FILE [ARGS]``."""
    cmd = [*impl, vector["command"]]
    if json_errors:
        cmd += ["--error-format", "json"]
    if vector.get("zstd_dict"):
        cmd += ["--zstd-dict", str((root / vector["zstd_dict"]).resolve())]
    cmd.append(str((root / vector["file"]).resolve()))
    return cmd + list(vector.get("args", []))


@dataclass
class Result:
    id: str
    ok: bool
    problems: list[str] = field(default_factory=list)


def _first_difference(got: bytes, want: bytes) -> str:
    a, b = got.split(b"\n"), want.split(b"\n")
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"line {i + 1}: got {x[:200]!r}, expected {y[:200]!r}"
    return f"got {len(a)} lines, expected {len(b)}"


def check(impl: Sequence[str], vector: dict[str, Any], *, strict_places: bool = False, timeout: float = 120,
          text_mode: bool = True, root: Path = HERE) -> Result:  # fmt: skip
    """Run one vector; a Result listing what differs from the expectation."""
    out = Result(vector["id"], True)
    expect = vector["expect"]

    def run(json_errors: bool) -> subprocess.CompletedProcess[bytes] | None:
        try:
            return subprocess.run(
                command(impl, vector, json_errors=json_errors, root=root),
                capture_output=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            out.problems.append(f"no answer in {timeout:g} s (a hang?)")
        except OSError as exc:
            out.problems.append(f"cannot start the implementation: {exc}")
        return None

    proc = run(True)
    if proc is not None:
        if expect["exit"] == 0:
            if proc.returncode != 0:
                line = proc.stderr.decode("utf-8", "replace").strip()[:300]
                out.problems.append(f"exit code {proc.returncode}, expected 0 (stderr: {line})")
            else:
                want = expected_output(expect["stdout"], root)
                if proc.stdout != want:
                    out.problems.append(f"standard output differs from {expect['stdout']}: "
                                        + _first_difference(proc.stdout, want))  # fmt: skip
        else:
            out.problems += _check_error(proc, expect, strict_places)
    if expect["exit"] != 0 and text_mode and proc is not None:
        plain = run(False)
        if plain is not None:
            if plain.returncode != expect["exit"]:
                out.problems.append(f"without --error-format: exit code {plain.returncode}, expected {expect['exit']}")
            if plain.stdout:
                out.problems.append("without --error-format: output on standard output")
            if plain.stderr.count(b"\n") != 1 or not plain.stderr.endswith(b"\n"):
                out.problems.append(f"without --error-format: standard error is not one line: {plain.stderr[:300]!r}")
    out.ok = not out.problems
    return out


def _check_error(proc: subprocess.CompletedProcess[bytes], expect: dict[str, Any], strict: bool) -> list[str]:
    problems = []
    if proc.returncode != expect["exit"]:
        problems.append(f"exit code {proc.returncode}, expected {expect['exit']}")
    if proc.stdout:
        problems.append(f"{len(proc.stdout)} bytes on standard output, expected none")
    err = proc.stderr
    if err.count(b"\n") != 1 or not err.endswith(b"\n"):
        problems.append(f"standard error is not exactly one line: {err[:300]!r}")
        return problems
    try:
        report = json.loads(err)
    except ValueError:
        problems.append(f"standard error is not a JSON object: {err[:300]!r}")
        return problems
    if not isinstance(report, dict):
        return [*problems, f"standard error is not a JSON object: {err[:300]!r}"]
    if report.get("error") != expect["error"]:
        problems.append(f"error class {report.get('error')!r}, expected {expect['error']!r}")
    place, want = report.get("place"), expect["place"]
    same = place == want if strict else normalize_place(place) == normalize_place(want)
    if not same:
        problems.append(f"place {place!r}, expected {want!r}" + ("" if strict else f" ({normalize_place(want)!r})"))
    if not isinstance(report.get("message"), str) or not report["message"]:
        problems.append("no message")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m conformance.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--impl", help='the implementation\'s command, e.g. ".venv/bin/tracepack"')
    p.add_argument("--only", metavar="REGEX", help="run the vectors whose id matches")
    p.add_argument("--strict-places", action="store_true", help="compare places exactly, indices included")
    p.add_argument("--no-text-mode", action="store_true", help="skip the second run of damaged vectors")
    p.add_argument("-j", "--jobs", type=int, default=min(4, os.cpu_count() or 1), help="vectors run at once")
    p.add_argument("--timeout", type=float, default=120, help="seconds a vector may take (default 120)")
    p.add_argument("--list", action="store_true", help="list the vectors and stop")
    p.add_argument("-q", "--quiet", action="store_true", help="print failures and the summary only")
    args = p.parse_args(argv)
    manifest = load_manifest()
    vectors = [v for v in manifest["vectors"] if not args.only or re.search(args.only, v["id"])]
    if args.list:
        for v in vectors:
            e = v["expect"]
            what = f"exit 0, {e['stdout']}" if e["exit"] == 0 else f"{e['error']} at {e['place']!r}"
            print(f"{v['id']}\t{v['command']}\t{what}\t{v.get('spec', '')}")
        return 0
    if not args.impl:
        p.error("--impl CMD is required (the implementation's command)")
    impl = shlex.split(args.impl)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda v: check(impl, v, strict_places=args.strict_places, timeout=args.timeout,
                                                text_mode=not args.no_text_mode), vectors))  # fmt: skip
    failed = [r for r in results if not r.ok]
    for r in results:
        if not r.ok:
            print(f"FAIL {r.id}: " + "; ".join(r.problems))
        elif not args.quiet:
            print(f"ok   {r.id}")
    print(f"{len(results) - len(failed)} of {len(results)} vectors pass ({args.impl})", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
