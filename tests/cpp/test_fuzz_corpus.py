"""The C++ reader's fuzzing corpus (``fuzz/corpus/cpp_reader``, inputs libFuzzer kept for reaching new
code of the C++ reader), each built into the file the native harness reads (``fuzz.harnesses.cpp_reader
.build_file``): ``tracepack-cpp cat`` does what ``tracepack cat`` does with it, byte for byte on success,
the same exit code, error class and place on failure. The fuzzer checks the C++ reader against itself
(sanitizers, no internal error, lazy = whole); this checks it against the Python reader, on the inputs
that are most likely to find where two implementations of the spec part."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.harnesses.cpp_reader import VERSIONS, build_file
from tests.cpp import harness
from tracepack.cli import main
from tracepack.formats import sniff
from tracepack.versions import RELEASED

#: the formats the Python reader imports (torch.export model.json and archives, ExecuTorch programs)
LEGACY = ("model.json", "zip", "pte")

CORPUS = harness.REPO / "fuzz" / "corpus" / "cpp_reader"
INPUTS = sorted(p for p in CORPUS.iterdir() if p.is_file()) if CORPUS.is_dir() else []


def test_the_corpus_is_there() -> None:
    assert tuple(RELEASED) == VERSIONS, "cpp/fuzz/reader_fuzzer.cpp's kVersions and VERSIONS name the releases"
    assert len(INPUTS) >= 100
    modes = {p.read_bytes()[:1] for p in INPUTS}
    assert {b"\0", b"\1", b"\2"} <= modes


def _outcome(code: int, out: str, err: str) -> tuple[int, str, str | None, str | None]:
    """``trace --error-format json``'s exit code, output, error class and place."""
    if code == 0:
        return 0, out, None, None
    error = json.loads(err)
    return code, out, error["error"], error["place"]


def _cpp_trace(cpp_bin: Path, args: list[str]) -> tuple[int, str, str | None, str | None]:
    done = subprocess.run([str(cpp_bin), *args], capture_output=True, text=True, check=False)
    return _outcome(done.returncode, done.stdout, done.stderr)


def _python_trace(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str | None, str | None]:
    """``tracepack trace`` in this process (no interpreter start per input)."""
    capsys.readouterr()
    code = main(args)
    got = capsys.readouterr()
    return _outcome(code, got.out, got.err)


@pytest.mark.parametrize("path", INPUTS, ids=[p.name[:12] for p in INPUTS])
def test_the_readers_agree(cpp_bin: Path, path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``cat`` (the whole readers) gives the same bytes or the same error; ``trace #0`` (the lazy readers for
    an uncompressed FlatBuffers file, else the whole ones) the same answer or error where the file is valid.
    Where ``cat`` refuses the file, spec §9.5 lets a lazy reader refuse it (at any place) or answer from
    the parts it read: then each does one of the two, and where both answer, they answer the same."""
    file = build_file(path.read_bytes())
    if file is None:  # too short to name a file: the harness reads nothing either
        assert len(path.read_bytes()) < 8
        return
    out = tmp_path / "fuzz.tpk"
    out.write_bytes(file)
    if sniff(file) in LEGACY:  # what the Python reader imports and the C++ one tells to convert (cpp/src/reader.cpp)
        got = harness.run(cpp_bin, out, json_errors=True)
        assert (got.code, got.error, got.place) == (2, "InputError", "byte 0")
        return
    whole = harness.compare(cpp_bin, out, once=True)
    args = ["trace", "--error-format", "json", str(out), "#0"]
    got = _cpp_trace(cpp_bin, args)
    want = _python_trace(args, capsys)
    if whole.code == 0:
        assert got == want
    else:
        assert {got[0], want[0]} <= {0, 2}
        if got[0] == want[0] == 0:
            assert got[1] == want[1]


REGRESSIONS = sorted((harness.REPO / "tests" / "fuzz_regressions" / "cpp_reader").glob("*"))
#: an address-space limit under which a reader that trusts a declared count fails to allocate
ADDRESS_SPACE = 1 << 30


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.name for p in REGRESSIONS])
def test_a_native_finding_stays_fixed(cpp_bin: Path, path: Path, tmp_path: Path) -> None:
    """What the native fuzzer found, each read by ``cat`` and answered by ``trace`` (the lazy reader) in 1 GiB
    of address space: the C++ reader says what the Python reader says (before the fix: ``trace`` reserved
    a vector for the 3,154,116,682 text values a 6.6 KB file's column directory declares and aborted)."""
    file = build_file(path.read_bytes())
    assert file is not None
    out = tmp_path / "fuzz.tpk"
    out.write_bytes(file)
    harness.compare(cpp_bin, out, once=True)
    got = subprocess.run(
        [str(cpp_bin), "trace", str(out), "#0"], capture_output=True, text=True, preexec_fn=_limited, check=False
    )
    want = subprocess.run(
        [sys.executable, "-m", "tracepack", "trace", str(out), "#0"], capture_output=True, text=True, check=False
    )
    assert (got.returncode, got.stdout, got.stderr) == (want.returncode, want.stdout, want.stderr)
