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
    if path is None:
        return None
    return zstandard.ZstdCompressionDict(read(path))


def parse_version(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    major, dot, minor = text.partition(".")
    if not (dot and major.isdigit() and minor.isdigit()):
        raise UsageError(f"version {text!r}", where="--to-version", expected="MAJOR.MINOR, e.g. 1.0")
    return int(major), int(minor)


def load_any(path: str, *, zstd_dict: zstandard.ZstdCompressionDict | None = None) -> Any:
    """Read a ``.tpk`` file or any legacy format ``convert`` accepts, as a Document."""
    import tracepack
    from tracepack.container import MAGIC
    from tracepack.torch.export import model_json as export_json

    data = read(path)
    if data.startswith(MAGIC[:4]):
        return tracepack.loads(data, source=path, zstd_dict=zstd_dict)
    if export_json.is_model_json(data):
        return export_json.import_model_json(data, source=path)
    extra = legacy_importer(path, data)
    if extra is not None:
        return extra
    raise InputError(
        "not a format tracepack reads",
        source=path,
        where="byte 0",
        expected="a .tpk container or a torch.export model.json",
    )


def legacy_importer(path: str, data: bytes) -> Any:
    """Archives (.pt2, TorchScript .pt) when the converters for them are installed."""
    if not data.startswith(b"PK"):
        return None
    archives = optional("tracepack.torch.archives")
    return None if archives is None else archives.import_archive(path, data)


def optional(module: str) -> Any:
    """A module that later parts of the project add; None while it is not there."""
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        return None
