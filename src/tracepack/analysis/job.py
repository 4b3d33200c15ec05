"""One input of the zoo job: read it, hash it, skip it when the dataset has it, else make its tables.

The same functions run in the local pool's workers (:mod:`tracepack.analysis.pool`) and in Ray's
(:mod:`tracepack.analysis.ray_engine`), so both write the same rows. An input is a local path or a
URL that ``fsspec`` reads (``s3://``, ``gs://``, ``https://``, ``memory://``...); a URL is copied to a
temporary file first (hashed on the way), so archives are read member by member either way.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracepack.errors import TracepackError, UsageError

__all__ = ["Options", "Outcome", "Task", "is_url", "make_tables", "run_task"]

_CHUNK = 1 << 20


def is_url(source: str) -> bool:
    """Whether ``source`` is a URL (``scheme://...``) rather than a local path."""
    scheme, sep, _ = source.partition("://")
    return bool(sep) and scheme.isidentifier() and len(scheme) > 1


@dataclass(frozen=True)
class Task:
    """One input: where to read it, the model name its rows carry, and the content hash the dataset
    already holds for that name (equal: nothing to do)."""

    source: str
    model: str
    known: str | None = None


@dataclass(frozen=True)
class Options:
    """What every task of a run shares."""

    output: str
    durable: bool = False
    zstd_dict: str | None = None
    #: the budgets of :mod:`tracepack.io.limits` the run was given (workers do not inherit context)
    limits: Mapping[str, int] = field(default_factory=dict)


@dataclass
class Outcome:
    """What became of one input: ``converted`` (its files written), ``unchanged`` (already there) or
    ``failed`` (``error`` says why, in one line)."""

    model: str
    source: str
    status: str
    program: str | None = None
    key: str | None = None
    rows: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0
    pid: int = 0
    #: the worker's peak resident memory so far, in KiB (None where the platform does not say)
    max_rss_kib: int | None = None


def _max_rss_kib() -> int | None:
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak // 1024 if sys.platform == "darwin" else peak)


def _hash_file(path: str) -> str:
    from tracepack.io.files import kind_of

    st = os.stat(path)
    import stat as _stat

    if not _stat.S_ISREG(st.st_mode):
        raise UsageError(f"is {kind_of(st.st_mode)}", source=path, expected="a regular file")
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


@contextlib.contextmanager
def local_copy(source: str) -> Iterator[tuple[str, str]]:
    """``(local path, sha256)`` of an input: the file itself, or a URL copied to a temporary file."""
    if not is_url(source):
        yield source, _hash_file(source)
        return
    try:
        fsspec = importlib.import_module("fsspec")
    except ImportError:
        raise UsageError("reading URLs needs fsspec: pip install fsspec", source=source) from None
    h = hashlib.sha256()
    with tempfile.TemporaryDirectory(prefix="tracepack-") as tmp:
        path = os.path.join(tmp, "input")
        try:
            with fsspec.open(source, "rb") as src, open(path, "wb") as dst:
                while chunk := src.read(_CHUNK):
                    h.update(chunk)
                    dst.write(chunk)
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read: {exc}", source=source) from None
        yield path, h.hexdigest()


def _document(path: str, name: str, zstd_dict: str | None) -> Any:
    from tracepack.formats import read_document
    from tracepack.io.files import peek, read_input

    if peek(path, 4) == b"PK\x03\x04":
        from tracepack.torch.archives import import_archive_file

        return import_archive_file(path, source=name)
    zdict = None
    if zstd_dict is not None:
        from tracepack.cli._common import zstd_dict as load_dict

        zdict = load_dict(zstd_dict)
    return read_document(read_input(path), source=name, zstd_dict=zdict)


def _packed_bytes(path: str, name: str) -> int | None:
    """What ``tracepack pack`` writes for this input (a .pt2), in bytes; None for other inputs."""
    from tracepack.io.zip import open_archive_file

    try:
        with open_archive_file(path, source=name) as archive:
            from tracepack.torch.archives import archive_kind

            if archive_kind(archive) != "pt2":
                return None
    except TracepackError:
        return None
    from tracepack.torch.pt2 import pack_pt2_file

    with tempfile.TemporaryDirectory(prefix="tracepack-") as tmp:
        _, size = pack_pt2_file(path, os.path.join(tmp, "packed.pt2"), source=name)
    return size


def make_tables(
    model: str, program: str, doc: Any, *, size: int, packed: int | None
) -> dict[str, dict[str, list[Any]]]:
    """The rows of one program, as columns (version :data:`~tracepack.analysis.dataset.TABLES_VERSION`)."""
    from tracepack.tables import collect

    tables = collect([(model, doc)])
    for cols in tables.values():
        n = len(next(iter(cols.values())))
        cols["program"] = [program] * n
    from tracepack.analysis.ops import profiler_name

    tables["nodes"]["op_name"] = [profiler_name(op) for op in tables["nodes"]["op"]]
    tables["models"]["bytes"] = [size]
    tables["models"]["packed_bytes"] = [packed]
    return tables


def convert(task: Task, options: Options) -> tuple[Outcome, dict[str, Any] | None]:
    """Hash ``task``'s input and, unless the dataset has it, make its tables (pyarrow Tables)."""
    from tracepack.analysis.dataset import part_key, pyarrow_tables
    from tracepack.io import limits

    start = time.perf_counter()
    out = Outcome(task.model, task.source, "failed", pid=os.getpid())
    tables = None
    try:
        with limits.raised(**options.limits), limits.rendering(), local_copy(task.source) as (path, program):
            out.program = program
            out.key = part_key(task.model, program)
            if program == task.known:
                out.status = "unchanged"
            else:
                doc = _document(path, task.model, options.zstd_dict)
                cols = make_tables(
                    task.model, program, doc, size=os.stat(path).st_size, packed=_packed_bytes(path, task.model)
                )
                tables = pyarrow_tables(cols)
                out.rows = {name: t.num_rows for name, t in tables.items()}
                out.status = "converted"
    except TracepackError as exc:
        out.error = str(exc.with_source(task.model))
    except OSError as exc:
        out.error = f"{task.model}: cannot read: {exc.strerror or exc}"
    except MemoryError:
        out.error = f"{task.model}: out of memory"
    except Exception as exc:  # one line per failing input, never a traceback; the others go on
        text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
        out.error = f"{task.model}: internal error: {text} (please report this)"
    out.seconds = time.perf_counter() - start
    out.max_rss_kib = _max_rss_kib()
    return out, tables


def write(out: Outcome, tables: Mapping[str, Any], options: Options) -> Outcome:
    """Write a converted program's files into the dataset (``out.status`` becomes ``failed`` if it cannot)."""
    from tracepack.analysis.dataset import write_part

    assert out.key is not None
    try:
        write_part(options.output, out.key, tables, durable=options.durable)
    except TracepackError as exc:
        out.status, out.error = "failed", str(exc)
    except OSError as exc:
        out.status, out.error = "failed", f"{options.output}: cannot write: {exc.strerror or exc}"
    return out


def run_task(task: Task, options: Options) -> Outcome:
    """One input, start to end: the unit of work of the local pool."""
    out, tables = convert(task, options)
    if tables is not None:
        out = write(out, tables, options)
        out.max_rss_kib = _max_rss_kib()
    return out


def local_inputs(pattern: str) -> list[str]:
    """A glob pattern's matches (sorted), for inputs the shell did not expand (quoted, or a URL)."""
    if is_url(pattern):
        try:
            fsspec = importlib.import_module("fsspec")
        except ImportError:
            raise UsageError("reading URLs needs fsspec: pip install fsspec", source=pattern) from None
        fs, _, paths = fsspec.get_fs_token_paths(pattern)
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        return sorted(p if is_url(p) else f"{protocol}://{p}" for p in paths)
    import glob

    return sorted(glob.glob(pattern, recursive=True))


def expand_inputs(sources: list[str]) -> list[str]:
    """Inputs as given, with each glob pattern that names no file itself replaced by its matches
    (a pattern that matches nothing is an error, as a missing file is)."""
    out: list[str] = []
    for source in sources:
        if any(c in source for c in "*?[") and (is_url(source) or not Path(source).exists()):
            found = local_inputs(source)
            if not found:
                raise UsageError("matches no file", source=source)
            out += found
        else:
            out.append(source)
    return out
