"""The ``.tpk`` container: a fixed 48-byte header, then the payload (normative: spec/01-container.md).

=======  ====  ==========================================================
offset   size  field (little-endian)
=======  ====  ==========================================================
0        8     magic ``\\x89TPK\\r\\n\\x1a\\n`` (catches text-mode mangling)
8        2     container version (1)
10       2     header size (48; a reader skips extra header bytes)
12       2     schema major
14       2     schema minor
16       1     codec (0 json, 1 msgpack, 2 flatbuffers-rows, 3 columnar, 4 flatbuffers-columns)
17       1     compression (0 none, 1 zstd)
18       2     flags (0; reserved)
20       4     zstd dictionary id (0: none)
24       8     payload length (bytes stored after the header)
32       8     raw length (payload length after decompression)
40       4     CRC-32 of the stored payload
44       4     CRC-32 of header bytes 0..43
=======  ====  ==========================================================

The payload starts at byte 48, 8-byte aligned for zero-copy readers. Reading
checks, in order: size, magic, header checksum, versions, codec, compression,
payload length, payload checksum, the decompressed-size limit, and only then
decompresses, never past the declared raw length.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from typing import Final

import zstandard

from tracepack.codecs import ALIASES, CODEC_IDS
from tracepack.errors import ContainerError, UsageError, VersionError
from tracepack.io import limits

__all__ = [
    "COMPRESSIONS",
    "CONTAINER_VERSION",
    "DEFAULT_MAX_SIZE",
    "HEADER_SIZE",
    "MAGIC",
    "ContainerHeader",
    "atomic_write",
    "pack",
    "read_header",
    "unpack",
]

MAGIC: Final = b"\x89TPK\r\n\x1a\n"
CONTAINER_VERSION: Final = 1
_HEADER = struct.Struct("<8sHHHHBBHIQQII")
HEADER_SIZE: Final = _HEADER.size
#: Compression name <-> header id.
COMPRESSIONS: Final[dict[str, int]] = {"none": 0, "zstd": 1}
_COMPRESSION_NAMES: Final = {v: k for k, v in COMPRESSIONS.items()}
#: The largest payload (after decompression) read unless the caller allows more: 4 GiB
#: (:attr:`tracepack.io.limits.Limits.max_decompressed`).
DEFAULT_MAX_SIZE: Final = limits.DEFAULT.max_decompressed
#: zstd output is made this many bytes at a time: a lying size never allocates up front.
_CHUNK: Final = 1 << 22

assert HEADER_SIZE == 48


@dataclass(frozen=True)
class ContainerHeader:
    """A decoded container header."""

    schema_version: tuple[int, int]
    codec: str
    compression: str
    dict_id: int
    payload_length: int
    raw_length: int
    payload_crc32: int
    header_size: int = HEADER_SIZE
    container_version: int = CONTAINER_VERSION


def _describe(data: bytes) -> str:
    if data[:2] == b"PK":
        return "a zip archive (a torch .pt2 or .pt? use `tracepack convert`)"
    if data.lstrip()[:1] in (b"{", b"["):
        return "JSON text (a torch model.json? use `tracepack convert`)"
    return repr(bytes(data[:8]))


def read_header(data: bytes | bytearray | memoryview, *, source: str | None = None) -> ContainerHeader:
    """Decode and check the header at the start of ``data``."""
    if len(data) < HEADER_SIZE:
        if bytes(data[: len(MAGIC)]) != MAGIC[: len(data)] or not data:
            raise ContainerError(
                f"not a tracepack container: {_describe(bytes(data[:64]))}" if data else "file is empty",
                source=source,
                where="byte 0",
                expected="the tracepack magic \\x89TPK\\r\\n\\x1a\\n",
            )
        raise ContainerError(
            f"truncated header: {len(data)} bytes",
            source=source,
            where="byte 0",
            expected=f"{HEADER_SIZE} header bytes",
        )
    fields = _HEADER.unpack_from(data, 0)
    magic, cver, hsize, major, minor, codec, comp, flags, dict_id, plen, rlen, pcrc, hcrc = fields
    if magic != MAGIC:
        raise ContainerError(
            f"not a tracepack container: {_describe(bytes(data[:64]))}",
            source=source,
            where="byte 0",
            expected="the tracepack magic \\x89TPK\\r\\n\\x1a\\n",
        )
    if zlib.crc32(bytes(data[:44])) != hcrc:
        raise ContainerError("header checksum mismatch: the header is corrupted", source=source, where="bytes 0..47")
    if cver != CONTAINER_VERSION:
        raise VersionError(
            f"container version {cver} is not readable by this build",
            source=source,
            where="header byte 8",
            expected=f"container version {CONTAINER_VERSION}",
        )
    if hsize < HEADER_SIZE:
        raise ContainerError(
            f"header size {hsize}", source=source, where="header byte 10", expected=f">= {HEADER_SIZE}"
        )
    if codec not in CODEC_IDS:
        raise ContainerError(
            f"unknown codec id {codec}",
            source=source,
            where="header byte 16",
            expected=", ".join(f"{i} ({n})" for i, n in CODEC_IDS.items()),
        )
    if comp not in _COMPRESSION_NAMES:
        raise ContainerError(
            f"unknown compression id {comp}", source=source, where="header byte 17", expected="0 (none) or 1 (zstd)"
        )
    if flags != 0:
        raise ContainerError(f"unknown flags {flags:#x}", source=source, where="header byte 18", expected="0")
    if comp == 0 and rlen != plen:
        raise ContainerError(
            f"raw length {rlen} differs from payload length {plen} without compression",
            source=source,
            where="header byte 32",
        )
    return ContainerHeader(
        (major, minor), CODEC_IDS[codec], _COMPRESSION_NAMES[comp], dict_id, plen, rlen, pcrc, hsize, cver
    )


def unpack(
    data: bytes | bytearray | memoryview,
    *,
    source: str | None = None,
    max_size: int | None = None,
    zstd_dict: zstandard.ZstdCompressionDict | None = None,
) -> tuple[ContainerHeader, bytes | memoryview]:
    """Check a whole container and return its header and decompressed payload.

    ``max_size`` caps the decompressed size (default: the ``max_decompressed`` budget of
    :mod:`tracepack.io.limits`); a zstd payload must also stay within the ``max_ratio`` budget.
    """
    budget = limits.current()
    if max_size is None:
        max_size = budget.max_decompressed
    header = read_header(data, source=source)
    start = header.header_size
    available = len(data) - start
    if available < header.payload_length:
        raise ContainerError(
            f"truncated payload: {max(available, 0)} of {header.payload_length} bytes",
            source=source,
            where=f"byte {start}",
            expected=f"{header.payload_length} payload bytes",
        )
    if available > header.payload_length:
        raise ContainerError(
            f"{available - header.payload_length} unexpected bytes after the payload",
            source=source,
            where=f"byte {start + header.payload_length}",
            expected="the end of the file",
        )
    payload = memoryview(data)[start : start + header.payload_length]
    if zlib.crc32(payload) != header.payload_crc32:
        raise ContainerError(
            "payload checksum mismatch: the file is corrupted", source=source, where=f"bytes {start}.."
        )
    if header.raw_length > max_size:
        raise ContainerError(
            f"declared size {header.raw_length} bytes exceeds the limit of {max_size} bytes (a decompression bomb?)",
            source=source,
            where="header byte 32",
            expected=f"a smaller document, a larger max_size {limits.hint('max_decompressed')}",
        )
    if header.compression != "none" and limits.ratio_exceeded(header.raw_length, header.payload_length, budget):
        raise ContainerError(
            f"declared size {header.raw_length} bytes is over {budget.max_ratio} times the "
            f"{header.payload_length} compressed bytes (a decompression bomb?)",
            source=source,
            where="header byte 32",
            expected=f"a plausible size, {limits.hint('max_ratio')}",
        )
    if header.compression == "none":
        return header, payload
    return header, _decompress(payload, header, source=source, zstd_dict=zstd_dict)


def _decompress(
    payload: memoryview, header: ContainerHeader, *, source: str | None, zstd_dict: zstandard.ZstdCompressionDict | None
) -> bytes:
    if header.dict_id:
        from tracepack import dictionaries  # only a dictionary-compressed payload needs them

        if zstd_dict is None:
            try:
                zstd_dict = dictionaries.by_id(header.dict_id)  # a built-in one: no file needed
            except ContainerError as exc:  # a withdrawn one: say so, naming the file
                raise ContainerError(exc.problem, source=source, where=exc.where, expected=exc.expected) from None
        if zstd_dict is None:
            raise ContainerError(
                f"compressed with zstd dictionary {header.dict_id}, which this install does not have",
                source=source,
                where="header byte 20",
                expected=f"that dictionary (--zstd-dict / zstd_dict=); built-in: {dictionaries.known()}",
            )
        if zstd_dict.dict_id() != header.dict_id:
            raise ContainerError(
                f"compressed with zstd dictionary {dictionaries.describe(header.dict_id)}, "
                f"given {dictionaries.describe(zstd_dict.dict_id())}",
                source=source,
                where="header byte 20",
            )
    dctx = zstandard.ZstdDecompressor(dict_data=zstd_dict) if header.dict_id else zstandard.ZstdDecompressor()
    # Stream with a hard output cap, a chunk at a time, so a lying size cannot make us allocate up front:
    # memory grows only as real output arrives, and stops one byte past the declared size.
    chunks = []
    total = 0
    try:
        reader = dctx.stream_reader(payload)
        while total <= header.raw_length:
            more = reader.read(min(_CHUNK, header.raw_length + 1 - total))
            if not more:
                break
            chunks.append(more)
            total += len(more)
    except zstandard.ZstdError as exc:
        raise ContainerError(f"zstd: {exc}", source=source, where=f"byte {header.header_size}") from None
    data = b"".join(chunks)
    if len(data) != header.raw_length:
        raise ContainerError(
            f"payload decompresses to {'more than ' if len(data) > header.raw_length else ''}{len(data)} bytes",
            source=source,
            where="header byte 32",
            expected=f"the declared {header.raw_length} bytes",
        )
    return data


def pack(
    payload: bytes,
    *,
    schema_version: tuple[int, int],
    codec: str,
    compression: str = "none",
    level: int = 3,
    zstd_dict: zstandard.ZstdCompressionDict | str | None = None,
) -> bytes:
    """Wrap ``payload`` (already encoded with ``codec``) in a container.

    ``zstd_dict`` is a dictionary, or the name of a built-in one (:mod:`tracepack.dictionaries`),
    whose id goes in the header."""
    from tracepack import dictionaries

    zstd_dict = dictionaries.resolve(zstd_dict)
    codec_id = {n: i for i, n in CODEC_IDS.items()}.get(codec)
    if codec_id is None:
        # Not an alias: the payload is already encoded, and "flatbuffers" once named the row layout.
        raise UsageError(
            f"unknown codec {codec!r}" + (" (pack takes the payload's own codec)" if codec in ALIASES else ""),
            where="codec",
            expected=" or ".join(CODEC_IDS.values()),
        )
    comp = COMPRESSIONS.get(compression)
    if comp is None:
        raise UsageError(f"unknown compression {compression!r}", where="compression", expected="none or zstd")
    dict_id = 0
    stored = payload
    if comp == 1:
        if not -7 <= level <= 22:
            raise UsageError(f"zstd level {level} is out of range", where="level", expected="-7..22")
        if zstd_dict is not None:
            dict_id = zstd_dict.dict_id()
            cctx = zstandard.ZstdCompressor(level=level, dict_data=dictionaries.compression_dict(zstd_dict, level))
        else:
            cctx = zstandard.ZstdCompressor(level=level)
        stored = cctx.compress(payload)
    elif zstd_dict is not None:
        raise UsageError("a zstd dictionary needs compression='zstd'", where="zstd_dict")
    head = _HEADER.pack(
        MAGIC,
        CONTAINER_VERSION,
        HEADER_SIZE,
        schema_version[0],
        schema_version[1],
        codec_id,
        comp,
        0,
        dict_id,
        len(stored),
        len(payload),
        zlib.crc32(stored),
        0,
    )
    head = head[:44] + struct.pack("<I", zlib.crc32(head[:44]))
    return head + stored


def atomic_write(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    overwrite: bool = True,
    replace_special: bool = False,
    durable: bool = False,
) -> None:
    """Write ``data`` to ``path`` all at once or not at all: :func:`tracepack.io.files.write_atomic`
    (``durable``: synced to disk before it takes the name)."""
    from tracepack.io.files import write_atomic

    write_atomic(path, data, overwrite=overwrite, replace_special=replace_special, durable=durable)
