"""Inputs that are not regular files, at every input position of every command and API (issue 24):
a FIFO nobody writes to (``tracepack trace`` waited on it forever), a folder, a character device
(``/dev/zero`` reads forever). Each is refused the same way (``tracepack.io.files.open_regular``):
exit 2 (3 from ``export``, which goes on with its other inputs), one line naming the file and what it
is, before anything blocks or is written."""

from __future__ import annotations

import contextlib
import io
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from tests.hostile.campaign import SPECIAL_ARGVS, _special_api, goods, refused_exit
from tests.torch.conftest import TORCH_MARKS
from tracepack.cli import main
from tracepack.errors import UsageError

#: upgrade and tracepack.torch.load import torch (its import warns about numpy)
pytestmark = TORCH_MARKS[1:]
KINDS = {"fifo": "a FIFO", "folder": "a folder", "chardev": "a character device"}


class _Hung(BaseException):
    pass


@contextlib.contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    def ring(signum: int, frame: FrameType | None) -> None:
        raise _Hung

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _special(kind: str, folder: Path) -> Path:
    if kind == "fifo":
        os.mkfifo(folder / "fifo")
        return folder / "fifo"
    if kind == "folder":
        (folder / "folder").mkdir()
        return folder / "folder"
    return Path("/dev/zero")


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("argv", SPECIAL_ARGVS, ids=[" ".join(a).replace("/", "_")[-60:] for a in SPECIAL_ARGVS])
def test_every_command_refuses_it_at_every_input(kind: str, argv: tuple[str, ...], tmp_path: Path) -> None:
    special = _special(kind, tmp_path)
    out = tmp_path / "out"
    words = [
        str(special)
        if w == "IN"
        else str(out)
        if w == "OUT"
        else str(goods().get(w[5:]))
        if w.startswith("GOOD:")
        else w
        for w in argv
    ]
    err = io.StringIO()
    with _deadline(20), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(words)
    text = err.getvalue()
    assert code == refused_exit(argv[0]), text  # export: 3, one line per failing input (docs/tables.md)
    assert text.count("\n") == 1, text
    assert f"{special}: is {KINDS[kind]}, not a regular file" in text, text
    assert not out.exists() or not any(out.rglob("*.parquet"))  # export's dataset holds no table of it


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("api", sorted(_special_api()))
def test_every_reading_api_refuses_it(kind: str, api: str, tmp_path: Path) -> None:
    special = _special(kind, tmp_path)
    with _deadline(20), pytest.raises(UsageError) as err:
        _special_api()[api](special)
    assert str(err.value).startswith(f"{special}: is {KINDS[kind]}, not a regular file"), str(err.value)
