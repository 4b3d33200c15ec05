"""Open what a host keeps beside a stripped device file, as symbolicators: any artifact tracepack reads.

* a ``.tpk`` (one per method for ExecuTorch): an uncompressed FlatBuffers file is opened lazily
  (:func:`tracepack.open`: nothing decoded up front), any other codec or compression is loaded;
* an ExecuTorch ETRecord (every method) or ``.pte`` (every method, from its emitted stack traces);
* a TorchScript lite-interpreter archive with mobile debug info;
* a torch.export program (``.pt2``, ``model.json``): its debug handles recomputed from ``from_node``
  the way ExecuTorch numbers them, when it has none.

The ExecuTorch and torch readers are looked up by module name when such a file comes in, as
:mod:`tracepack.formats` does, and need no torch or ExecuTorch installed.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from tracepack.errors import InputError
from tracepack.runtime.symbols import METHOD_EXTENSION, Symbolicator

__all__ = ["open_artifact", "open_exported_program"]

_ETRECORD = "tracepack.torch.executorch.etrecord"
_PTE = "tracepack.torch.executorch.pte"


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=path) from None


def _head(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(64)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=path) from None


def _lazy_or_none(path: str, data: bytes) -> Any:
    from tracepack.container import MAGIC, read_header

    if not data.startswith(MAGIC[:4]):
        return None
    header = read_header(data[:64], source=path)
    from tracepack.lazy import LAZY_CODECS

    if header.codec not in LAZY_CODECS or header.compression != "none":
        return None
    import tracepack

    return tracepack.open(path)


def open_artifact(path: str, *, methods: list[str] | None = None) -> list[Symbolicator]:
    """One symbolicator per method (ExecuTorch) or one for the whole artifact."""
    lazy = _lazy_or_none(path, _head(path))  # a lazily readable .tpk is never read whole
    if lazy is not None:
        return [Symbolicator(lazy, source=path)]
    from tracepack.formats import read_document

    data = _read(path)
    if data[:4] == b"PK\x03\x04":
        from tracepack.io.zip import open_archive

        with open_archive(data, source=path) as archive:
            names = archive.names()
        etr = importlib.import_module(_ETRECORD)
        if etr.is_etrecord(names):
            docs = etr.import_etrecord(data, source=path, methods=methods)
            return [Symbolicator(d, source=f"{path}:{m}") for m, d in docs.items()]
    pte = importlib.import_module(_PTE)
    if pte.is_pte(data):
        program = pte.read_pte(data, source=path)
        wanted = methods or [m.name for m in program.methods]
        return [Symbolicator(pte.pte_document(program, m, source=path), source=f"{path}:{m}") for m in wanted]
    doc = read_document(data, source=path)
    if data[:4] == b"PK\x03\x04" and doc.raw.debug_handles.handle:  # a lite-interpreter archive
        if doc.extension("torchscript/mobile-render") is None:
            # The import could not read what torch's text needs (its data.pkl): the handles are answered
            # in tracepack's form, and the note says why (the archive extension keeps the reason).
            return [Symbolicator(doc, source=path)]
        render = importlib.import_module("tracepack.torch.torchscript.render")
        table = render.LiteDebugTable.from_archive(data, source=path)
        return [Symbolicator(doc, source=path, lite_table=table)]
    if doc.extension(METHOD_EXTENSION) is None and not doc.raw.debug_handles.handle and doc.raw.provenance is not None:
        doc = importlib.import_module(_ETRECORD).with_handles(
            doc, method=doc.raw.graph.name or "forward", recompute=True
        )
    return [Symbolicator(doc, source=path)]


def open_exported_program(path: str) -> Symbolicator | None:
    """The ATen program an ExecuTorch ETRecord keeps (``exported_program``: what ``to_edge`` lowered), as
    a symbolicator over its graph nodes, which an eager torch.profiler trace of the model is matched to
    exactly as with the ``.pt2``; None when ``path`` is not an ETRecord or holds no such program."""
    if _head(path)[:4] != b"PK\x03\x04":
        return None
    data = _read(path)
    from tracepack.io.zip import open_archive

    with open_archive(data, source=path) as archive:
        names = archive.names()
    etr = importlib.import_module(_ETRECORD)
    if not etr.is_etrecord(names):
        return None
    program = etr.read_etrecord(data, source=path).exported_program
    if program is None:
        return None
    from tracepack.torch.export.model_json import import_model_json

    return Symbolicator(
        import_model_json(program, source=f"{path}:exported_program"), source=f"{path}:exported_program"
    )
