"""Opening inputs and writing outputs safely.

Inputs (:func:`read_input`): only regular files are read, or standard input when the name is
``-``. A device (``/dev/zero`` reads forever), a FIFO (blocks until a writer comes) or a folder
is refused with a one-line :class:`~tracepack.errors.UsageError` before a byte is read; the
size is checked against :attr:`~tracepack.io.limits.Limits.max_input` before the buffer is made.

Outputs (:func:`atomic_output`, :func:`write_atomic`): the one writer every command uses.

* The bytes go to a file no one can see yet: on Linux an unnamed ``O_TMPFILE`` inode in the
  destination's folder, which the kernel frees if the process dies, even by ``kill -9``; it gets a
  name only once it is complete (``linkat``; synced first when ``durable=True``), then is renamed
  over the destination in one step. Elsewhere (or on a file system without ``O_TMPFILE``) it is a named temporary file
  ``.NAME.PID.RANDOM.tmp`` beside the destination; such a file left by a killed writer (its PID no
  longer running) is removed by the next write to the same destination.
* The old file stays intact until the new one is complete: a reader sees the old bytes or the
  new ones, never a mix, and an error or a kill leaves the old file as it was.
* Only a regular file is ever replaced. A destination that is a symbolic link, a FIFO, a device,
  a socket or a folder is refused unless the caller passes ``replace_special=True`` (then a link,
  FIFO, device or socket is replaced by a regular file: the link itself, never its target; a
  folder is always refused). A missing folder is a clear error, not a traceback.
* ``overwrite=False`` refuses an existing destination, atomically: the finished file is linked
  to the name only if the name is still free (no check-then-write race).
* Not synced by default, as ``cp``, ``tar``, ``zip`` and ``torch.save``: a durable write waits
  for the disk, a ``cp`` only for memory. ``durable=True`` (the CLI's ``--fsync``) syncs the file
  before it takes the name, so a power loss leaves the old contents or the new ones.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final

from tracepack.errors import InputError, UsageError
from tracepack.io import limits

__all__ = [
    "atomic_output",
    "check_destination",
    "check_regular",
    "kind_of",
    "open_regular",
    "peek",
    "read_input",
    "write_atomic",
]

_O_TMPFILE: Final = getattr(os, "O_TMPFILE", 0)


def kind_of(mode: int) -> str:
    """What a file of ``st_mode`` is, in words."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _os_problem(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


#: What every reader says a non-regular input is not (the CLI adds how to pipe data instead).
_EXPECTED_FILE: Final = "a regular file"


def open_regular(path: str | os.PathLike[str], *, expected: str = _EXPECTED_FILE, source: str | None = None) -> int:
    """A read-only descriptor of the regular file at ``path`` (blocking, as files are): every input
    path of every command and API opens its file here, so a FIFO (whose ``open`` waits for a writer,
    forever if none comes), a device (``/dev/zero`` reads forever), a socket or a folder is refused
    the same way, before anything blocks or a byte is read: a one-line
    :class:`~tracepack.errors.UsageError` naming the file and what it is. The caller closes the
    descriptor. ``source`` names the file in errors (default: ``path``)."""
    name = source or os.fspath(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer before we can refuse it.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise UsageError(f"cannot open: {_os_problem(exc)}", source=name) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UsageError(f"is {kind_of(mode)}, not a regular file", source=name, expected=expected)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_regular(path: str | os.PathLike[str], *, expected: str = _EXPECTED_FILE, source: str | None = None) -> None:
    """Refuse ``path`` as :func:`open_regular` does, for a reader that opens it itself afterwards."""
    os.close(open_regular(path, expected=expected, source=source))


def read_input(path: str | os.PathLike[str], *, max_size: int | None = None, dash_is_stdin: bool = False) -> bytes:
    """The bytes of a regular file (or of standard input for ``-``), refusing anything else."""
    name = os.fspath(path)
    cap = limits.current().max_input if max_size is None else max_size
    if name == "-" and dash_is_stdin:
        parts, got = [], 0
        while got <= cap:  # in chunks: read(cap + 1) would allocate the whole budget up front
            chunk = sys.stdin.buffer.read(min(1 << 24, cap + 1 - got))
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
        data = b"".join(parts)
        if len(data) > cap:
            raise InputError(
                f"standard input is larger than {cap} bytes",
                source="<stdin>",
                expected=f"a smaller input, {limits.hint('max_input')}",
            )
        return data
    fd = open_regular(
        name, expected="a file (pipe data through standard input with '-')" if dash_is_stdin else _EXPECTED_FILE
    )
    try:
        st = os.fstat(fd)
        if st.st_size > cap:
            raise InputError(
                f"file of {st.st_size} bytes is larger than the {cap}-byte input limit",
                source=name,
                expected=f"a smaller input, {limits.hint('max_input')}",
            )
        with os.fdopen(fd, "rb", closefd=False) as f:
            # Ask for the size the file has (read(n) allocates n up front), then one byte more to
            # notice a file that grew meanwhile.
            data = f.read(st.st_size + 1)
            if len(data) > st.st_size:  # it grew: go on a chunk at a time, up to the budget
                parts = [data]
                got = len(data)
                while got <= cap and (chunk := f.read(min(1 << 24, cap + 1 - got))):
                    parts.append(chunk)
                    got += len(chunk)
                data = b"".join(parts)
    except OSError as exc:
        raise UsageError(f"cannot open: {_os_problem(exc)}", source=name) from None
    finally:
        os.close(fd)
    if len(data) > cap:  # grew while we read it
        raise InputError(f"file is larger than the {cap}-byte input limit", source=name)
    return data


def peek(path: str | os.PathLike[str], size: int) -> bytes:
    """The first ``size`` bytes of a regular file; ``b""`` for anything else (let the reader refuse it)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return b""
    try:
        return os.read(fd, size) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        return b""
    finally:
        os.close(fd)


def check_destination(path: str | os.PathLike[str], *, overwrite: bool = True, replace_special: bool = False) -> None:
    """Refuse a destination :func:`atomic_output` would refuse, before any work is done."""
    target = Path(path)
    parent = target.parent
    try:
        pst = os.stat(parent)
    except FileNotFoundError:
        raise UsageError("the folder does not exist", source=str(target), expected="an existing folder") from None
    except OSError as exc:
        raise UsageError(f"cannot use the folder: {_os_problem(exc)}", source=str(target)) from None
    if not stat.S_ISDIR(pst.st_mode):
        raise UsageError(f"{parent} is {kind_of(pst.st_mode)}", source=str(target), expected="a folder")
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"cannot check the destination: {_os_problem(exc)}", source=str(target)) from None
    if stat.S_ISDIR(st.st_mode):
        raise UsageError("is a folder", source=str(target), expected="a file name")
    if not stat.S_ISREG(st.st_mode) and not replace_special:
        raise UsageError(
            f"is {kind_of(st.st_mode)}: refusing to replace it",
            source=str(target),
            expected="a regular file or a new name (replace_special=True replaces it)",
        )
    if not overwrite:
        raise UsageError("already exists", source=str(target), expected="a new name (or allow overwriting)")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, not ours
    return True


def _remove_stale_temps(target: Path) -> None:
    """Remove ``.NAME.PID.RANDOM.tmp`` files a killed writer left beside ``target``."""
    prefix = f".{target.name}."
    with contextlib.suppress(OSError), os.scandir(target.parent) as entries:
        for entry in entries:
            n = entry.name
            if not (n.startswith(prefix) and n.endswith(".tmp")):
                continue
            parts = n[len(prefix) : -len(".tmp")].split(".")
            if len(parts) != 2 or not parts[0].isdigit() or len(parts[1]) != 16:
                continue
            if not _pid_alive(int(parts[0])) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def _temp_name(target: Path) -> Path:
    import secrets  # here: its hashlib/hmac imports cost a command that writes nothing ~4 ms

    return target.parent / f".{target.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp"


_AT_FDCWD: Final = -100
_AT_EMPTY_PATH: Final = 0x1000
#: Per device: whether an unnamed file can be given a name there (probed once).
_CAN_LINK: dict[int, bool] = {}


def _link_unnamed(fd: int, name: Path) -> None:
    """Give the ``O_TMPFILE`` inode ``fd`` the name ``name`` (fails if the name exists)."""
    try:
        os.link(f"/proc/self/fd/{fd}", name, follow_symlinks=True)  # linkat(..., AT_SYMLINK_FOLLOW)
        return
    except OSError as exc:
        if exc.errno == errno.EEXIST:
            raise
        first = exc
    import ctypes  # linkat(fd, "", ..., AT_EMPTY_PATH): where /proc is not usable

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.linkat(fd, b"", _AT_FDCWD, os.fsencode(name), _AT_EMPTY_PATH) != 0:
        err = ctypes.get_errno()
        if err == errno.EEXIST:
            raise FileExistsError(err, os.strerror(err), str(name))
        raise first


def _open_unnamed(folder: Path) -> int | None:
    """An ``O_TMPFILE`` descriptor in ``folder`` that can later be named, or None where there is none."""
    if not _O_TMPFILE or not sys.platform.startswith("linux"):
        return None
    flags = _O_TMPFILE | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0)
    try:
        dev = os.stat(folder).st_dev
        fd = os.open(folder, flags, 0o666)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT):
            return None
        raise
    if dev not in _CAN_LINK:
        # Probe once per file system with an empty unnamed file: linking may be refused (a sandbox,
        # no /proc, no privilege for AT_EMPTY_PATH); then named temporary files are used instead.
        probe = _temp_name(folder / "probe")
        try:
            pfd = os.open(folder, flags, 0o600)
            try:
                _link_unnamed(pfd, probe)
                os.unlink(probe)
                _CAN_LINK[dev] = True
            finally:
                os.close(pfd)
        except OSError:
            _CAN_LINK[dev] = False
    if not _CAN_LINK[dev]:
        os.close(fd)
        return None
    return fd


@contextlib.contextmanager
def atomic_output(
    path: str | os.PathLike[str], *, overwrite: bool = True, replace_special: bool = False, durable: bool = False
) -> Iterator[BinaryIO]:
    """A binary file to write the new contents of ``path`` to; they replace it only on success.

    Always atomic: the new contents go to an unnamed (or temporary) file that takes the name only
    once complete, so a kill at any point leaves the old file intact and no temporary file behind.
    By default (``durable=False``) the new file is not synced to disk, as ``cp``, ``tar``, ``zip``
    and ``torch.save`` do not sync: a power loss (or OS crash) soon after may leave the name with
    missing data. ``durable=True`` (the CLI's ``--fsync``) syncs it (one ``fsync``, at the end,
    with large copies written out as they go) before it takes the name: after a power loss the
    name holds the old contents or the new ones. It waits for the disk (about 1-2 s for 4.5 GB
    here), where ``cp`` only waits for memory."""
    target = Path(path)
    check_destination(target, overwrite=overwrite, replace_special=replace_special)
    _remove_stale_temps(target)
    try:
        fd = _open_unnamed(target.parent)
        tmp: Path | None = None
        if fd is None:
            tmp = _temp_name(target)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        raise UsageError(f"cannot write: {_os_problem(exc)}", source=str(target)) from None
    done = False
    try:
        if durable:
            _FLUSH_BEHIND.add(fd)
        with os.fdopen(fd, "wb", closefd=False) as f:
            yield f
            f.flush()
        if durable:
            os.fsync(fd)
        _publish(fd, tmp, target, overwrite=overwrite)
        done = True
    except OSError as exc:
        raise UsageError(f"cannot write: {_os_problem(exc)}", source=str(target)) from None
    finally:
        _FLUSH_BEHIND.discard(fd)
        os.close(fd)
        if tmp is not None and not done:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


#: Descriptors of durable outputs being written: large copies into them start writeback as they go.
_FLUSH_BEHIND: set[int] = set()


def flushes_behind(fd: int) -> bool:
    """Whether ``fd`` is a durable :func:`atomic_output` being written: it will be synced at the
    end, so a large copy into it should start the disk writing each part as soon as it is copied
    (``tracepack.io.zip`` does, with ``POSIX_FADV_DONTNEED``), instead of leaving gigabytes of
    dirty pages for the final ``fsync``."""
    return fd in _FLUSH_BEHIND


def _publish(fd: int, tmp: Path | None, target: Path, *, overwrite: bool) -> None:
    """Give the finished file its name: atomically, and without clobbering when ``overwrite`` is off."""
    if tmp is None:
        # Name the unnamed inode. Without overwrite, straight at the destination: linkat fails if it exists.
        if not overwrite:
            try:
                _link_unnamed(fd, target)
            except FileExistsError:
                raise UsageError("already exists", source=str(target), expected="a new name") from None
            return
        tmp = _temp_name(target)
        _link_unnamed(fd, tmp)
    try:
        if overwrite:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)
            except FileExistsError:
                raise UsageError("already exists", source=str(target), expected="a new name") from None
            os.unlink(tmp)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_atomic(
    path: str | os.PathLike[str],
    data: bytes | bytearray | memoryview,
    *,
    overwrite: bool = True,
    replace_special: bool = False,
    durable: bool = False,
) -> None:
    """Write ``data`` to ``path`` all at once or not at all (see :func:`atomic_output`; ``durable``:
    synced to disk before it takes the name)."""
    with atomic_output(path, overwrite=overwrite, replace_special=replace_special, durable=durable) as f:
        f.write(data)
