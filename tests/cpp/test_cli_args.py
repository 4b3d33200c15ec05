"""tracepack-cpp's argument parsing, property-tested against the Python command line's argparse.

The C++ command line is a subset of ``tracepack cat`` and ``tracepack trace`` (spec §11, §12.1): what it
accepts it must answer as the Python CLI does, byte for byte; what it refuses it refuses as a usage or
input error, in one line on standard error, exit 2, nothing on standard output, under ASan and UBSan.
Python may accept more (abbreviated options, several FILEs for ``cat``, ``-`` for standard input):
that is the subset, not a disagreement. ``--dict-dir`` is the C++ reader's own option and ``--help``
prints each program's own text, so the strategies leave both out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import tracepack
from tests.cpp import harness

GOLDEN = harness.REPO / "tests" / "golden" / "1.2"
#: a file each reader reads whole and one the lazy readers read (uncompressed FlatBuffers columns)
FILES = [str(GOLDEN / "msgpack-zstd.tpk"), str(GOLDEN / "flatbuffers-columns.tpk")]
NODES = sorted({n.name for n in tracepack.load(FILES[0]).nodes()})[:6]

# Any text an argument may hold: no NUL (argv cannot carry one), no lone surrogates (not encodable).
_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
#: options and option-like tokens, each as the arguments it takes on the command line
_OPTIONS = [
    ["--json"],
    ["--error-format", "json"],
    ["--error-format", "text"],
    ["--error-format=json"],
    ["--error-format", "xml"],
    ["--error-format"],
    ["--zstd-dict"],
    ["--zstd-dict", "torch-export-9"],
    ["--zstd-dict=nothing"],
    ["--bogus"],
    ["-x"],
    ["--"],
    ["-"],
    ["--raw"],
    ["--compact"],
]
_TOKEN = st.one_of(
    st.sampled_from(_OPTIONS),
    st.tuples(st.sampled_from(["--error-format", "--zstd-dict"]), _TEXT).map(list),
    st.sampled_from([*FILES, "no/such/file.tpk", str(GOLDEN), "cat", "trace"]).map(lambda p: [p]),
    st.sampled_from([*NODES, "#0", "#1", "#99999", "#-1", "#x", "nope"]).map(lambda n: [n]),
    _TEXT.map(lambda t: [t]),
)
_GOOD_OPTIONS = st.lists(st.sampled_from([["--error-format", "json"], ["--error-format=text"]]), max_size=2)


@st.composite
def _argv(draw: st.DrawFn) -> list[str]:
    """A command line each program accepts, then up to three edits: a token inserted, dropped, replaced or
    moved (before the command too), or an option inserted."""
    file = [draw(st.sampled_from(FILES))]
    if draw(st.booleans()):
        groups = [["cat"], *draw(_GOOD_OPTIONS), file]
    else:
        nodes = draw(st.lists(st.sampled_from([*NODES, "#0", "#3"]), min_size=1, max_size=3))
        json_out = draw(st.lists(st.just(["--json"]), max_size=1))
        groups = [["trace"], *draw(_GOOD_OPTIONS), *json_out, file, *[[n] for n in nodes]]
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(groups)))
        edit = draw(st.sampled_from(["insert", "option", "drop", "replace", "move"]))
        if edit in ("drop", "replace", "move") and at < len(groups):
            moved = groups.pop(at)
            if edit == "move":
                groups.insert(draw(st.integers(0, len(groups))), moved)
        if edit in ("insert", "replace"):
            groups.insert(at, draw(_TOKEN))
        elif edit == "option":
            groups.insert(at, draw(st.sampled_from(_OPTIONS)))
    return [arg for group in groups for arg in group]


def _run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, **(env or {})}
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False, timeout=120, env=env)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(argv=_argv())
@example(argv=["cat", "--json", FILES[0]])  # --json is trace's
@example(argv=["--error-format", "json", "cat", FILES[0]])  # options follow the command
@example(argv=["--json", "trace", FILES[1], "#0"])
def test_what_the_cpp_command_line_accepts_it_answers_as_python_does(asan_bin: Path, argv: list[str]) -> None:
    cpp = _run([str(asan_bin), *argv], harness.SANITIZER_ENV)
    py = _run([sys.executable, "-m", "tracepack", *argv])
    err = cpp.stderr.decode("utf-8", "replace")
    assert cpp.returncode in (0, 2), f"{argv}: exit {cpp.returncode}: {err}"
    if cpp.returncode == 0:
        assert err == ""
        assert py.returncode == 0, f"{argv}: C++ accepted what Python refuses: {py.stderr.decode(errors='replace')}"
        assert cpp.stdout == py.stdout
        return
    assert cpp.stdout == b""
    assert err.endswith("\n")
    lines = err[:-1].split("\n")  # lines end in "\n" only (an argument's "\x1e" is not a line break)
    last = lines[-1]
    if last.startswith("{"):  # --error-format json: one object, as spec §12.1 says
        assert set(json.loads(last)) == {"error", "place", "message"}
        assert len(lines) == 1
    else:
        assert last.startswith("tracepack: "), err
    # Python refuses it too, or accepts more than the subset (abbreviations, several FILEs, '-').
    assert py.returncode in (0, cpp.returncode), f"{argv}: C++ exit {cpp.returncode}, Python {py.returncode}"
