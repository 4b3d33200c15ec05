"""Destinations: only regular files are replaced, the old file survives anything, no temp file survives a kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tracepack.errors import UsageError
from tracepack.io import files


def _leftovers(folder: Path, keep: set[str]) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n not in keep)


def test_replaces_a_regular_file_and_keeps_the_usual_mode(tmp_path: Path) -> None:
    target = tmp_path / "out.tpk"
    target.write_bytes(b"old")
    files.write_atomic(target, b"new contents")
    assert target.read_bytes() == b"new contents"
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask
    assert _leftovers(tmp_path, {"out.tpk"}) == []


@pytest.mark.parametrize("kind", ["symlink", "dangling symlink", "fifo", "folder"])
def test_refuses_what_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    target = tmp_path / "out"
    if kind == "symlink":
        target.symlink_to(victim)
    elif kind == "dangling symlink":
        target.symlink_to(tmp_path / "nowhere")
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    with pytest.raises(UsageError) as info:
        files.write_atomic(target, b"payload")
    message = str(info.value)
    assert "\n" not in message
    assert str(target) in message
    assert victim.read_bytes() == b"keep me"
    assert (os.path.lexists(target) and not target.is_file()) or kind == "symlink"
    assert _leftovers(tmp_path, {"victim", "out"}) == []


def test_refuses_a_device(tmp_path: Path) -> None:
    # /dev/null is a character device every Linux has; the writer must not even open it.
    with pytest.raises(UsageError, match="character device"):
        files.write_atomic("/dev/null", b"x")


def test_the_explicit_flag_replaces_a_link_never_its_target(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    link = tmp_path / "out"
    link.symlink_to(victim)
    files.write_atomic(link, b"new", replace_special=True)
    assert not link.is_symlink()
    assert link.read_bytes() == b"new"
    assert victim.read_bytes() == b"keep me"


def test_a_missing_folder_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="folder does not exist"):
        files.write_atomic(tmp_path / "no" / "such" / "out.tpk", b"x")
    (tmp_path / "plain").write_bytes(b"")
    with pytest.raises(UsageError, match="is a regular file"):
        files.write_atomic(tmp_path / "plain" / "out.tpk", b"x")


def test_no_clobber(tmp_path: Path) -> None:
    target = tmp_path / "out"
    files.write_atomic(target, b"first", overwrite=False)
    with pytest.raises(UsageError, match="already exists"):
        files.write_atomic(target, b"second", overwrite=False)
    assert target.read_bytes() == b"first"
    assert _leftovers(tmp_path, {"out"}) == []


def test_an_error_while_writing_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.write_bytes(b"old")

    def produce() -> None:
        with files.atomic_output(target) as f:
            f.write(b"half")
            raise RuntimeError("producer failed")

    with pytest.raises(RuntimeError, match="producer failed"):
        produce()
    assert target.read_bytes() == b"old"
    assert _leftovers(tmp_path, {"out"}) == []


_WRITER = textwrap.dedent(
    """
    import sys, time
    from tracepack.io import files
    with files.atomic_output(sys.argv[1], durable=sys.argv[2] == "durable") as f:
        f.write(b"x" * (1 << 20))
        f.flush()
        print("writing", flush=True)
        while True:
            f.write(b"y" * (1 << 16))
            time.sleep(0.01)
    """
)


@pytest.mark.parametrize(("run", "durable"), [(0, False), (1, False), (2, False), (1, True)])
def test_kill_9_mid_write_leaves_the_old_file_and_no_temp_after_the_next_write(
    tmp_path: Path, run: int, durable: bool
) -> None:
    """Synced or not (the default), a kill leaves the old file and, after the next write, no temp."""
    target = tmp_path / "out.tpk"
    target.write_bytes(b"old contents")
    mode = "durable" if durable else "default"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(target), mode], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"writing\n"
    time.sleep(0.05 * run)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    assert target.read_bytes() == b"old contents"
    if files._CAN_LINK.get(tmp_path.stat().st_dev) or _uses_unnamed(tmp_path):
        # The bytes were in an unnamed O_TMPFILE inode: the kernel freed it with the process.
        assert _leftovers(tmp_path, {"out.tpk"}) == []
    files.write_atomic(target, b"next")  # and in every case the next write clears what a killed one left
    assert target.read_bytes() == b"next"
    assert _leftovers(tmp_path, {"out.tpk"}) == []


def _uses_unnamed(folder: Path) -> bool:
    fd = files._open_unnamed(folder)
    if fd is None:
        return False
    os.close(fd)
    return True


def test_stale_temp_cleanup_spares_live_writers_and_other_files(tmp_path: Path) -> None:
    target = tmp_path / "out"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    dead_pid = int(dead.stdout)
    stale = tmp_path / f".out.{dead_pid}.{'a' * 16}.tmp"
    live = tmp_path / f".out.{os.getpid()}.{'b' * 16}.tmp"
    other = tmp_path / f".other.{dead_pid}.{'c' * 16}.tmp"
    for p in (stale, live, other):
        p.write_bytes(b"t")
    files.write_atomic(target, b"x")
    assert not stale.exists()
    assert live.exists()
    assert other.exists()


@pytest.mark.parametrize("force", [False, True])
def test_the_cli_refuses_a_symlink_destination_even_with_force(
    tmp_path: Path, force: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    from tracepack.cli import main
    from tracepack.demo import sample_model_json

    src = tmp_path / "model.json"
    src.write_bytes(sample_model_json())
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    link = tmp_path / "out.tpk"
    link.symlink_to(victim)
    code = main(["convert", str(src), str(link), *(["-f"] if force else [])])
    err = capsys.readouterr().err
    assert code == 2
    assert (
        err == f"tracepack: {link}: is a symbolic link: refusing to replace it; expected a regular file or a new name\n"
    )
    assert link.is_symlink()
    assert victim.read_bytes() == b"keep me"
