"""tracepack: exported ML graphs and their debug info, typed, interned, versioned.

>>> import tracepack
>>> doc = tracepack.load("model.tpk")             # any codec, compression, released version
>>> doc = tracepack.load("model.pt2")             # or a torch.export .pt2 / model.json, a TorchScript .pt
>>> doc.node("linear").stack_trace                 # the legacy string, byte for byte
>>> tracepack.dump(doc, "out.tpk", codec="msgpack", compression="zstd", level=19)
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from tracepack.errors import (
    ContainerError,
    DecodeError,
    EncodeError,
    InputError,
    IntegrityError,
    LegacyFormatError,
    NotFoundError,
    SchemaError,
    TracepackError,
    UnsafePickleError,
    UsageError,
    VersionError,
)

if TYPE_CHECKING:
    from tracepack.builder import DocumentBuilder, Generic, SymInt, Tensor
    from tracepack.document import DebugHandle, Document, NodeView
    from tracepack.formats import ZstdDict
    from tracepack.lazy import LazyDocument, LazyNode
    from tracepack.traces import FrameKey, ModuleKey

__version__ = "0.1.0"

__all__ = [
    "ContainerError",
    "DebugHandle",
    "DecodeError",
    "Document",
    "DocumentBuilder",
    "EncodeError",
    "FrameKey",
    "Generic",
    "InputError",
    "IntegrityError",
    "LazyDocument",
    "LazyNode",
    "LegacyFormatError",
    "ModuleKey",
    "NodeView",
    "NotFoundError",
    "SchemaError",
    "SymInt",
    "Tensor",
    "TracepackError",
    "UnsafePickleError",
    "UsageError",
    "VersionError",
    "ZstdDict",
    "__version__",
    "dump",
    "dumps",
    "load",
    "loads",
    "open",
]

Source = str | os.PathLike[str] | bytes | bytearray | memoryview


#: Public names loaded on first use (PEP 562): ``import tracepack`` stays cheap (a command line that
#: opens one file lazily never imports the typed model, the codecs or the builder).
_LAZY: dict[str, str] = {
    "DocumentBuilder": "tracepack.builder",
    "Generic": "tracepack.builder",
    "SymInt": "tracepack.builder",
    "Tensor": "tracepack.builder",
    "DebugHandle": "tracepack.document",
    "Document": "tracepack.document",
    "NodeView": "tracepack.document",
    "ZstdDict": "tracepack.formats",
    "zstd_dictionary": "tracepack.formats",
    "LazyDocument": "tracepack.lazy",
    "LazyNode": "tracepack.lazy",
    "FrameKey": "tracepack.traces",
    "ModuleKey": "tracepack.traces",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tracepack' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def loads(
    data: bytes | bytearray | memoryview,
    *,
    source: str = "<bytes>",
    max_size: int | None = None,
    zstd_dict: ZstdDict | None = None,
    validate: bool = True,
) -> Document:
    """Decode a ``.tpk`` container held in memory (see :func:`load`)."""
    from tracepack import container, migrations
    from tracepack.codecs import codec_by_name
    from tracepack.document import Document
    from tracepack.formats import zstd_dictionary
    from tracepack.versions import CURRENT, from_newer_file, reader_version

    header, payload = container.unpack(data, source=source, max_size=max_size, zstd_dict=zstd_dictionary(zstd_dict))
    version = reader_version(header.schema_version, source=source)
    newer = version != header.schema_version
    _, codec = codec_by_name(header.codec)
    from tracepack.io.guard import parse_json, run

    try:
        # MessagePack/JSON nested thousands deep: measured (JSON) or given a raised limit only if the
        # decode runs out of room
        if header.codec == "json":
            raw = parse_json(
                lambda: codec.decode(payload, version, source=source), payload, source, DecodeError, "payload"
            )
        else:
            raw = run(
                lambda: codec.decode(payload, version, source=source),
                source,
                DecodeError,
                "payload",
                msgpack=payload if header.codec == "msgpack" else None,
            )
    except DecodeError as exc:
        raise (from_newer_file(exc, header.schema_version, version) if newer else exc) from None
    declared = (raw.header.version.major, raw.header.version.minor)
    if raw.header.magic != "tracepack":
        raise DecodeError(
            f"payload magic is {raw.header.magic!r}", source=source, where="$.header.magic", expected="'tracepack'"
        )
    if declared != header.schema_version:
        raise DecodeError(
            f"payload says schema {declared[0]}.{declared[1]}, container header says "
            f"{header.schema_version[0]}.{header.schema_version[1]}",
            source=source,
            where="$.header.version",
        )
    try:
        from tracepack.versions import generated

        if newer:
            # A newer minor, decoded with the newest model of its major that this build knows: what it
            # added is skipped, and the document now is that model's version (source_version keeps its own).
            raw.header.version = generated(version).model.Version(*version)
        if validate:
            generated(version).validate.validate(raw)
        raw = migrations.upgrade(raw, version, CURRENT)
        doc = Document(raw, source_version=header.schema_version)
        if validate:
            doc.validate()
    except TracepackError as exc:
        if newer and isinstance(exc, DecodeError):
            exc = from_newer_file(exc, header.schema_version, version)
        raise exc.with_source(source) from None
    return doc


def load(
    source: Source,
    *,
    max_size: int | None = None,
    zstd_dict: ZstdDict | None = None,
    validate: bool = True,
) -> Document:
    """Read a file (a path) or its bytes into a :class:`Document`: any format tracepack reads.

    A ``.tpk`` container: the codec, compression and schema version come from the header; older
    released versions are migrated to the current one in memory. ``max_size`` caps the decompressed
    size (default 4 GiB); ``zstd_dict`` is the dictionary it was compressed with (its bytes, or a
    ``zstandard.ZstdCompressionDict``). ``validate`` checks every reference and trie.

    A torch file (a torch.export ``model.json`` or ``.pt2``, a TorchScript ``.pt``/``.ptl``) is
    converted, without torch and without unpickling anything. The format is recognised by content;
    anything else raises :class:`InputError` saying what the file looks like.
    """
    from tracepack.formats import read_document

    if isinstance(source, (bytes, bytearray, memoryview)):
        return read_document(source, max_size=max_size, zstd_dict=zstd_dict, validate=validate)
    from tracepack.io.files import read_input

    name = os.fspath(source)
    data = read_input(name)  # a regular file only: a FIFO or device is refused, not read forever
    return read_document(data, source=name, max_size=max_size, zstd_dict=zstd_dict, validate=validate)


def dumps(
    doc: Document,
    *,
    codec: str = "msgpack",
    compression: str = "zstd",
    level: int = 3,
    zstd_dict: ZstdDict | str | None = None,
    version: tuple[int, int] | None = None,
    block_checksums: bool | None = None,
) -> bytes:
    """Encode ``doc`` as ``.tpk`` container bytes.

    ``codec`` is ``json``, ``msgpack``, ``columnar``, ``flatbuffers`` (the FlatBuffers column layout,
    ``flatbuffers-columns``, codec id 4) or ``flatbuffers-rows`` (the row layout, id 2; what
    ``flatbuffers`` wrote before the column layout), see :mod:`tracepack.codecs`.
    ``version`` writes an older released schema version where no information is lost.
    ``zstd_dict`` is a zstd dictionary or the name of a built-in one (``"torch-export-1"``,
    :mod:`tracepack.dictionaries`): readers find a built-in dictionary by the id in the header.
    ``block_checksums`` writes a CRC-32 per 16 KiB block of the payload after it (container flag
    bit 0), so that :func:`open` verifies only the blocks a lookup reads; ``None`` (the default):
    on for the files :func:`open` reads lazily (uncompressed FlatBuffers), off otherwise. Builds
    before block checksums refuse such a file ("unknown flags 0x1"): write ``False`` for them.
    """
    from tracepack import container, migrations
    from tracepack.codecs import codec_by_name, resolve
    from tracepack.formats import zstd_dictionary
    from tracepack.versions import CURRENT

    target = CURRENT if version is None else version
    codec = resolve(codec, where="codec")  # "flatbuffers": the column layout (flatbuffers-columns, id 4)
    _, module = codec_by_name(codec)
    raw: Any = doc.raw
    if target != CURRENT:
        raw = migrations.downgrade(raw, CURRENT, target)
    payload = module.encode(raw, target)
    return container.pack(
        payload,
        schema_version=target,
        codec=codec,
        compression=compression,
        level=level,
        zstd_dict=zstd_dict if isinstance(zstd_dict, str) else zstd_dictionary(zstd_dict),
        block_checksums=block_checksums,
    )


def dump(
    doc: Document,
    path: str | os.PathLike[str],
    *,
    codec: str = "msgpack",
    compression: str = "zstd",
    level: int = 3,
    zstd_dict: ZstdDict | str | None = None,
    version: tuple[int, int] | None = None,
    durable: bool = False,
    block_checksums: bool | None = None,
) -> int:
    """Write ``doc`` to ``path`` atomically (temporary file, then rename); return the size.

    ``durable=True`` syncs the file to disk before the rename (a power loss then leaves the old
    file or the new one); by default it is not synced, as ``cp`` and ``torch.save``."""
    from tracepack.container import atomic_write

    data = dumps(
        doc,
        codec=codec,
        compression=compression,
        level=level,
        zstd_dict=zstd_dict,
        version=version,
        block_checksums=block_checksums,
    )
    atomic_write(path, data, durable=durable)
    return len(data)


def open(path: str | os.PathLike[str], *, checksum: bool = True) -> LazyDocument:
    """Open an uncompressed FlatBuffers ``.tpk`` for lazy, random access (see :mod:`tracepack.lazy`).

    Every byte handed out is verified: with block checksums (spec §1.5) each block's CRC-32 when the
    block is first read, without them the payload CRC-32 on open; ``checksum=False`` skips the CRCs
    for a trusted file.

    >>> with tracepack.open("model.tpk") as doc:
    ...     doc.node("linear").stack_trace
    """
    from tracepack.lazy import open as open_lazy

    return open_lazy(path, checksum=checksum)
