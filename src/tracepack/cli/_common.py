"""Helpers shared by the command modules: reading inputs, writing outputs, options, loading any format.

Unix conventions, the same for every command: ``-`` as an input is standard input and as an output
standard output; an existing output is never replaced unless ``-f``/``--force`` is given; results go
to standard output (``--json`` for a machine-readable form), and nothing is said about what was written
when the output itself is standard output; progress bars appear only on a terminal.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import zstandard

from tracepack.errors import UsageError

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
#: Some inputs of a many-input command failed (each said so on one line); the others were done.
EXIT_PARTIAL = 3
STDIO = "-"
T = TypeVar("T")


def display(path: str) -> str:
    """How errors name an input or output: ``<stdin>``/``<stdout>`` for ``-``."""
    return "<stdin>" if path == STDIO else path


def read(path: str) -> bytes:
    """The bytes of ``path`` (``-``: all of standard input)."""
    from tracepack.io.files import read_input

    return read_input(path, dash_is_stdin=True)


def add_force(p: argparse.ArgumentParser) -> None:
    p.add_argument("-f", "--force", action="store_true", help="replace an output file that exists")


def add_fsync(p: argparse.ArgumentParser) -> None:
    """``--fsync`` / ``--no-fsync`` (every command that writes files; ``args.fsync``, default off)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--fsync",
        dest="fsync",
        action="store_true",
        default=False,
        help="sync each output to disk before it takes its name (waits for the disk: a power loss then leaves "
        "the old file or the new one). Default: not synced, as cp; still atomic, a kill leaves the old file",
    )
    g.add_argument("--no-fsync", dest="fsync", action="store_false", help="do not sync (the default)")


def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the result as JSON (machine-readable)")


def add_jobs(p: argparse.ArgumentParser) -> None:
    """``-j/--jobs N``: worker processes for many inputs (default: every core)."""
    p.add_argument(
        "-j",
        "--jobs",
        metavar="N",
        type=int,
        default=None,
        help="worker processes for many inputs (default: every core; 1: one after another, in this process)",
    )


def jobs_option(args: argparse.Namespace) -> int | None:
    """``-j``'s value (None: every core); a UsageError for less than 1."""
    jobs: int | None = getattr(args, "jobs", None)
    if jobs is not None and jobs < 1:
        raise UsageError(f"-j {jobs}", where="--jobs", expected="a number of processes, 1 or more")
    return jobs


def add_error_format(p: argparse.ArgumentParser) -> None:
    """``--error-format text|json``: how an error is reported on standard error (spec §12.2)."""
    p.add_argument(
        "--error-format",
        choices=["text", "json"],
        default="text",
        help='json: report an error as one JSON object {"error": CLASS, "place": PLACE, "message": LINE} '
        "(the conformance suite's protocol, spec/12-conformance.md)",
    )


def add_limit(p: argparse.ArgumentParser) -> None:
    """``--limit NAME=VALUE`` (every command): raise one budget of :mod:`tracepack.io.limits`."""
    p.add_argument(
        "--limit",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="raise a budget for a trusted input, e.g. max_decompressed=16G or max_depth=5000 (repeatable; "
        "names: max_decompressed, max_ratio, ratio_floor, max_pickle_objects, max_input, max_rendered, "
        "max_depth, max_int_digits; sizes take K, M, G, T)",
    )


def limit_settings(args: argparse.Namespace) -> dict[str, int]:
    """The budgets ``--limit`` asked for (a UsageError naming the flag for a bad one)."""
    from tracepack.io import limits

    out: dict[str, int] = {}
    for text in getattr(args, "limit", None) or []:
        try:
            name, value = limits.parse_setting(text)
        except ValueError as exc:
            raise UsageError(str(exc), where="--limit") from None
        out[name] = value
    return out


def check_output(path: str, *, force: bool) -> None:
    """Refuse to replace an existing ``path`` without ``--force`` (before any work is done)."""
    if path == STDIO:
        return
    from tracepack.io.files import check_destination

    try:
        check_destination(path, overwrite=force)
    except UsageError as exc:
        if exc.problem == "already exists":
            raise UsageError("exists; pass -f/--force to replace it", source=path) from None
        if exc.problem.endswith("refusing to replace it"):
            # The command line never replaces a link, device, FIFO or socket (the API's replace_special does).
            raise UsageError(exc.problem, source=path, expected="a regular file or a new name") from None
        raise


def write_output(path: str, data: bytes, *, force: bool, durable: bool = False) -> None:
    """Write ``data`` to ``path`` atomically (temporary file, rename; ``durable``: synced to disk
    first), or to standard output for ``-``."""
    if path == STDIO:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    from tracepack.container import atomic_write

    check_output(path, force=force)
    atomic_write(path, data, overwrite=force, durable=durable)  # no-clobber holds even if the file appears meanwhile


def report(path: str, text: str, info: dict[str, Any], *, as_json: bool) -> None:
    """Say what was written: a line (``text``) or ``info`` as JSON. When the output itself went to
    standard output, the line is left out (a pipeline stays quiet) and the JSON goes to standard error."""
    if path == STDIO:
        if as_json:
            print(json.dumps(info), file=sys.stderr)
        return
    print(json.dumps(info) if as_json else text)


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def _tqdm() -> Any:
    """``tqdm.tqdm`` when bars should show: standard error is a terminal, ``tqdm`` is installed (the
    ``progress`` extra) and ``TRACEPACK_PROGRESS`` is not ``0``; otherwise None."""
    if not sys.stderr.isatty() or os.environ.get("TRACEPACK_PROGRESS", "1") == "0":
        return None
    try:
        return importlib.import_module("tqdm").tqdm
    except ImportError:
        return None


def progress(items: Iterable[T], *, total: int | None = None, desc: str = "") -> Iterator[T]:
    """``items``, with a progress bar on standard error when bars should show (see :func:`_tqdm`)."""
    tqdm = _tqdm()
    if tqdm is None:
        yield from items
        return
    yield from tqdm(items, total=total, desc=desc, unit="file", leave=False, file=sys.stderr)


class Stages:
    """The steps of one long job (read, decode, encode, write), shown as a bar with the current step;
    nothing at all when bars should not show."""

    def __init__(self, desc: str, total: int) -> None:
        tqdm = _tqdm()
        fmt = "{desc}: {n}/{total} {postfix} [{elapsed}]"
        self._bar: Any = (
            None if tqdm is None else tqdm(total=total, desc=desc, leave=False, file=sys.stderr, bar_format=fmt)
        )

    def step(self, label: str) -> None:
        """Start step ``label`` (the previous one is done)."""
        if self._bar is not None:
            if self._bar.postfix:
                self._bar.update(1)
            self._bar.set_postfix_str(label)

    def __enter__(self) -> Stages:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()


def zstd_dict(path: str | None) -> zstandard.ZstdCompressionDict | None:
    """``--zstd-dict``: a dictionary file, or the name of a built-in one (tracepack.dictionaries)."""
    if path is None:
        return None
    from tracepack import dictionaries

    if path in {d.name for d in dictionaries.BUILTIN} and not Path(path).exists():
        return dictionaries.get(path)
    return zstandard.ZstdCompressionDict(read(path))


def parse_version(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    major, dot, minor = text.partition(".")
    if not (dot and major.isdigit() and minor.isdigit()):
        raise UsageError(f"version {text!r}", where="--to-version", expected="MAJOR.MINOR, e.g. 1.0")
    return int(major), int(minor)


def load_any(path: str, *, zstd_dict: zstandard.ZstdCompressionDict | None = None) -> Any:
    """Read any file tracepack reads (a .tpk, a torch.export model.json or .pt2, TorchScript) as a Document."""
    from tracepack.formats import read_document

    doc = load_archive_file(path)
    return doc if doc is not None else read_document(read(path), source=display(path), zstd_dict=zstd_dict)


def load_archive_file(path: str) -> Any:
    """A zip archive file (.pt2, TorchScript) of any size as a Document, read member by member
    (weights never); None when ``path`` is not a zip file (or is standard input)."""
    if path == STDIO:
        return None
    from tracepack.io.files import peek

    if peek(path, 4) != b"PK\x03\x04":
        return None
    archives = optional("tracepack.torch.archives")
    return None if archives is None else archives.import_archive_file(path, source=display(path))


def optional(module: str) -> Any:
    """A module that later parts of the project add; None while it is not there."""
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        return None
