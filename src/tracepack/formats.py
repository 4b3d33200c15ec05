"""Which file formats tracepack reads, recognised by content (never by name), and the one reader for all.

:func:`read_document` is what :func:`tracepack.load` and every CLI command use: a ``.tpk`` container,
a torch.export ``model.json``, a ``.pt2`` archive or a TorchScript ``.pt``/``.ptl`` archive becomes a
:class:`~tracepack.Document`. The torch formats are read by ``tracepack.torch``'s converters, which need
no torch installed; they are looked up by module name when such a file comes in, so the core does not
import them. Anything else is refused with what the file looks like and what was expected.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

import zstandard

from tracepack.document import Document
from tracepack.errors import ContainerError

__all__ = ["EXPECTED", "ZstdDict", "describe", "read_document", "sniff", "zstd_dictionary"]

#: What :func:`read_document` accepts, as error messages say it.
EXPECTED = (
    "a .tpk container, a torch.export model.json or .pt2, a TorchScript .pt/.ptl archive, "
    "or an ExecuTorch ETRecord or .pte"
)

#: A zstd dictionary: its bytes (as written by `zstd --train`) or a ``zstandard.ZstdCompressionDict``.
ZstdDict = zstandard.ZstdCompressionDict | bytes | bytearray | memoryview

_MODEL_JSON = "tracepack.torch.export.model_json"
_ARCHIVES = "tracepack.torch.archives"


def zstd_dictionary(value: ZstdDict | None) -> zstandard.ZstdCompressionDict | None:
    """``value`` as a ``ZstdCompressionDict`` (bytes are wrapped)."""
    if value is None or isinstance(value, zstandard.ZstdCompressionDict):
        return value
    return zstandard.ZstdCompressionDict(bytes(value))


def sniff(data: bytes | bytearray | memoryview) -> str:
    """``"tpk"``, ``"model.json"``, ``"zip"`` (a .pt2 or TorchScript archive, or another zip) or ``"unknown"``."""
    from tracepack.container import MAGIC

    head = bytes(data[:8])
    if head.startswith(MAGIC[:4]):
        return "tpk"
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return "zip"
    if importlib.import_module(_MODEL_JSON).is_model_json(bytes(data[: 1 << 20])):
        return "model.json"
    if bytes(data[4:8]) == b"ET12":
        return "pte"
    if bytes(data[8:12]) == b"ED00":
        return "etdump"
    return "unknown"


#: Leading bytes of formats people try, and what to say about them.
_KNOWN = (
    (b"\x28\xb5\x2f\xfd", "a zstd frame (decompress it first: zstd -d)"),
    (b"\x1f\x8b", "a gzip file (decompress it first: gunzip)"),
    (b"\x80\x02", "a pickle (tracepack never unpickles: export with torch.export.save or torch.jit.save)"),
    (b"\x80\x04", "a pickle (tracepack never unpickles: export with torch.export.save or torch.jit.save)"),
    (b"\x80\x05", "a pickle (tracepack never unpickles: export with torch.export.save or torch.jit.save)"),
    (b"\x08", "perhaps a protobuf (ONNX?), which tracepack does not read"),
)


def describe(data: bytes | bytearray | memoryview) -> str:
    """What ``data`` looks like, for an error message."""
    if not data:
        return "an empty file"
    head = bytes(data[:16])
    for magic, text in _KNOWN:
        if head.startswith(magic):
            return text
    if bytes(data[:4096]).lstrip().startswith((b"{", b"[")):
        try:
            json.loads(bytes(data))
        except (ValueError, RecursionError):
            pass
        else:
            return "JSON, but not a torch.export program (no graph_module)"
    return f"unknown content starting {head[:8]!r}"


def read_document(
    data: bytes | bytearray | memoryview,
    *,
    source: str = "<bytes>",
    zstd_dict: ZstdDict | None = None,
    max_size: int | None = None,
    validate: bool = True,
) -> Document:
    """Any supported file's bytes as a Document (see the module docs); for anything else a
    ContainerError (an InputError and a ValueError) names what the bytes are instead."""
    import tracepack

    kind = sniff(data)
    if kind == "tpk":
        return tracepack.loads(data, source=source, zstd_dict=zstd_dict, max_size=max_size, validate=validate)
    if kind == "model.json":
        doc: Any = importlib.import_module(_MODEL_JSON).import_model_json(bytes(data), source=source)
        return doc  # type: ignore[no-any-return]
    if kind == "zip":
        out: Any = importlib.import_module(_ARCHIVES).import_archive(source, bytes(data))
        return out  # type: ignore[no-any-return]
    if kind == "pte":  # ExecuTorch program: its forward method (or the only one)
        pte: Any = importlib.import_module("tracepack.torch.executorch.pte")
        return pte.pte_document(pte.read_pte(data, source=source), source=source)  # type: ignore[no-any-return]
    if kind == "etdump":
        raise ContainerError(
            "an ExecuTorch ETDump (a profile, not a program): annotate it with `tracepack annotate ETDUMP --with "
            "ARTIFACT`",
            source=source,
            expected=EXPECTED,
        )
    # Not a .tpk either: what tracepack.loads says of such bytes (spec §1.3 steps 1-2), so every reader
    # (and `tracepack cat`, the conformance protocol's command) gives one class for them.
    raise ContainerError(
        f"not a format tracepack reads: {describe(data)}", source=source, where="byte 0", expected=EXPECTED
    )
