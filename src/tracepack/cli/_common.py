"""Helpers shared by the command modules: reading inputs, options, loading any format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import zstandard

from tracepack.errors import InputError, UsageError

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


def read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=path) from None


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

    return read_document(read(path), source=path, zstd_dict=zstd_dict)


def optional(module: str) -> Any:
    """A module that later parts of the project add; None while it is not there."""
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        return None
