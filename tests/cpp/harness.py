"""Running the C++ reader (``build/tracepack-cpp``) and the Python reader on the same bytes.

The Python side is the reference: ``tracepack cat FILE`` prints ``json.dumps(to_plain(doc),
ensure_ascii=False, indent=2) + "\\n"`` of the document :func:`tracepack.cli._common.load_any` reads,
and on bad input exits 2 with ``tracepack: {error}`` on standard error. :func:`reference` computes both
through the same functions, in this process (no interpreter start per file); :func:`compare` runs the
C++ binary on the file, in the text and the JSON error formats, and asserts it prints the same bytes,
exits with the same code, and names the same error class and place.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tracepack.errors import TracepackError

REPO = Path(__file__).resolve().parents[2]
BINARY = REPO / "build" / "tracepack-cpp"
ASAN_BINARY = REPO / "build" / "asan" / "tracepack-cpp"
#: ASan and UBSan: any report aborts with this exit code (never 0 or 2), leaks included.
SANITIZER_ENV = {
    "ASAN_OPTIONS": "abort_on_error=0:exitcode=86:detect_leaks=1",
    "UBSAN_OPTIONS": "halt_on_error=1:exitcode=86:print_stacktrace=1",
}


def build(target: str) -> None:
    """``make TARGET`` at the repository's root (a no-op when the binary is current)."""
    done = subprocess.run(
        ["make", "--no-print-directory", "-s", target], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"make {target} failed:\n{done.stdout}\n{done.stderr}"


@dataclass(frozen=True)
class Outcome:
    """What a reader did with a file: exit code, standard output, the error line and its class and place."""

    code: int
    stdout: bytes
    line: str = ""  # the one line on standard error, without its newline
    error: str | None = None  # the error class
    place: str | None = None


def reference(path: str | Path) -> Outcome:
    """What ``tracepack cat PATH`` does, computed in this process."""
    from tracepack.cli._common import load_any
    from tracepack.io import limits
    from tracepack.plain import to_plain

    name = str(path)
    try:
        with limits.rendering():
            plain = to_plain(load_any(name))
    except TracepackError as exc:
        exc = exc.with_source(name)
        return Outcome(exc.exit_code, b"", f"tracepack: {exc}", type(exc).__name__, exc.where)
    return Outcome(0, (json.dumps(plain, ensure_ascii=False, indent=2) + "\n").encode())


def run(binary: Path, path: str | Path, *, json_errors: bool = False, env: dict[str, str] | None = None) -> Outcome:
    """Run ``BINARY cat [--error-format json] PATH``."""
    args = [str(binary), "cat", *(["--error-format", "json"] if json_errors else []), str(path)]
    if env is None and binary == ASAN_BINARY:
        env = SANITIZER_ENV
    done = subprocess.run(args, capture_output=True, check=False, env={**os.environ, **(env or {})}, timeout=300)
    err = done.stderr.decode("utf-8", "replace")
    if done.returncode == 0:
        assert err == "", f"{path}: stderr on success: {err!r}"
        return Outcome(0, done.stdout)
    lines = err.splitlines()
    assert len(lines) == 1, f"{path}: not one line on stderr (exit {done.returncode}): {err!r}"
    assert err.endswith("\n"), f"{path}: the error line does not end in a newline: {err!r}"
    assert done.stdout == b"", f"{path}: output on failure"
    if json_errors:
        obj = json.loads(lines[0])
        assert set(obj) == {"error", "place", "message"}, obj
        return Outcome(done.returncode, b"", "tracepack: " + obj["message"], obj["error"], obj["place"])
    return Outcome(done.returncode, b"", lines[0])


def compare(
    binary: Path, path: str | Path, *, expected: Outcome | None = None, message: bool = True, once: bool = False
) -> Outcome:
    """Assert the C++ reader does with ``path`` what ``tracepack cat`` does; return the reference outcome.

    ``message=False`` compares the class and place of an error but not its wording (for failures whose
    words come from a library the Python reader uses, where the C++ reader may word them otherwise).
    ``once``: run the binary once, with ``--error-format json`` (its message is the text line's)."""
    want = reference(path) if expected is None else expected
    got = run(binary, path, json_errors=once)
    assert got.code == want.code, f"{path}: exit {got.code}, Python {want.code}: {got.line} / {want.line}"
    if want.code == 0:
        assert got.stdout == want.stdout, f"{path}: output differs from tracepack cat"
        return want
    as_json = got if once else run(binary, path, json_errors=True)
    assert (as_json.error, as_json.place) == (want.error, want.place), (
        f"{path}: C++ {as_json.error} at {as_json.place!r}, Python {want.error} at {want.place!r}\n"
        f"  C++:    {got.line}\n  Python: {want.line}"
    )
    assert as_json.line == got.line, f"{path}: the JSON message is not the text line"
    if message:
        assert got.line == want.line, f"{path}: messages differ\n  C++:    {got.line}\n  Python: {want.line}"
    return want
