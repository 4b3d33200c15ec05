"""tracepack-cpp's command line: its inputs refused as the Python CLI refuses them, usage errors exit 2."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cpp import harness


def test_a_missing_file(cpp_bin: Path, tmp_path: Path) -> None:
    assert harness.compare(cpp_bin, tmp_path / "nothing.tpk").error == "UsageError"


def test_a_folder(cpp_bin: Path, tmp_path: Path) -> None:
    assert harness.compare(cpp_bin, tmp_path).error == "UsageError"


@pytest.mark.parametrize(
    "args", [[], ["trace"], ["cat"], ["cat", "a", "b"], ["cat", "--bogus", "a"], ["cat", "--error-format", "xml", "a"]]
)
def test_usage_errors(cpp_bin: Path, args: list[str]) -> None:
    done = subprocess.run([str(cpp_bin), *args], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines()[-1].startswith("tracepack: ")


def test_help(cpp_bin: Path) -> None:
    done = subprocess.run([str(cpp_bin), "--help"], capture_output=True, text=True, check=False)
    assert done.returncode == 0
    assert "cat FILE" in done.stdout


def test_a_closed_pipe_is_not_an_error(cpp_bin: Path) -> None:
    """`tracepack-cpp cat FILE | head -1`: the reader stops when the pipe closes, exit 0, nothing on stderr."""
    done = subprocess.run(
        f"'{cpp_bin}' cat '{harness.REPO / 'tests/golden/1.2/msgpack.tpk'}' | head -c 10 > /dev/null; "
        "exit ${PIPESTATUS[0]}",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
