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
18       2     flags: bit 0 block checksums (a block table follows the payload); others 0
20       4     zstd dictionary id (0: none)
24       8     payload length (bytes stored after the header)
32       8     raw length (payload length after decompression)
40       4     CRC-32 of the stored payload
44       4     CRC-32 of header bytes 0..43
=======  ====  ==========================================================

The payload starts at byte 48, 8-byte aligned for zero-copy readers. Reading
checks, in order: size, magic, header checksum, versions, codec, compression,
flags, payload length, the block table (when flag bit 0 is set), payload checksum, every block's
checksum, the decompressed-size limit, and only then decompresses, never past the declared raw length.

**Block checksums** (flag bit 0, spec §1.5): the stored payload is cut into blocks of ``B`` bytes
(a power of two, 512 B to 16 MiB; the last block may be shorter) and a *block table* follows it,
the last bytes of the file::

    offset   size  field (little-endian; offsets from the table's first byte)
    0        4     magic ``TPKB``
    4        4     block size B
    8        8     block count N = ceil(payload length / B)
    16       4N    CRC-32 of each block
    16+4N    4     CRC-32 of table bytes 0 .. 15+4N

so that a reader that touches a few blocks (:func:`tracepack.open`) verifies just those. The
whole-payload CRC-32 stays in the header: eager readers check it and every block.
Builds before block checksums refuse such a file in one line ("unknown flags 0x1").
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
    "BLOCK_MAGIC",
    "BLOCK_SIZE",
    "BLOCK_SIZES",
    "BLOCK_TABLE_HEAD",
    "COMPRESSIONS",
    "CONTAINER_VERSION",
    "DEFAULT_MAX_SIZE",
    "FLAG_BLOCK_CHECKSUMS",
    "HEADER_SIZE",
    "MAGIC",
    "BlockTable",
    "ContainerHeader",
    "atomic_write",
    "block_checksums_by_default",
    "block_mismatch",
    "block_table",
    "block_table_size",
    "check_block_table_head",
    "check_blocks",
    "pack",
    "read_block_table",
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
#: Header flag bit 0: the payload is followed by a block table (one CRC-32 per block).
FLAG_BLOCK_CHECKSUMS: Final = 1
#: Every flag this build knows; a file with any other bit set is refused.
_KNOWN_FLAGS: Final = FLAG_BLOCK_CHECKSUMS
#: The block table's magic (its first four bytes).
BLOCK_MAGIC: Final = b"TPKB"
_BLOCK_HEAD = struct.Struct("<4sIQ")
#: Bytes of the block table before its CRCs: magic, block size, block count.
BLOCK_TABLE_HEAD: Final = _BLOCK_HEAD.size
#: The block sizes a reader accepts: powers of two from 512 B to 16 MiB.
BLOCK_SIZES: Final = tuple(1 << k for k in range(9, 25))
#: The block size writers use (``make bench``, flatbuffers figure (e): a lazy lookup on 8k-node files
#: is fastest from 4 to 16 KiB; 16 KiB keeps the table at 0.025% of the payload).
BLOCK_SIZE: Final = 1 << 14

assert HEADER_SIZE == 48
assert BLOCK_TABLE_HEAD == 16


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
    flags: int = 0

    @property
    def block_checksums(self) -> bool:
        """Whether a block table (one CRC-32 per block of the stored payload) follows the payload."""
        return bool(self.flags & FLAG_BLOCK_CHECKSUMS)

    @property
    def block_table_at(self) -> int:
        """The file offset where the block table starts (right after the payload)."""
        return self.header_size + self.payload_length


@dataclass(frozen=True)
class BlockTable:
    """A checked block table: ``crcs[i]`` is the CRC-32 of payload bytes ``[i * block_size, (i + 1) * block_size)``."""

    block_size: int
    crcs: tuple[int, ...]

    @property
    def count(self) -> int:
        return len(self.crcs)

    @property
    def size(self) -> int:
        """The table's bytes in the file."""
        return block_table_size(len(self.crcs))


def block_table_size(count: int) -> int:
    """Bytes of a block table of ``count`` blocks: head, one CRC-32 per block, the table's own CRC-32."""
    return BLOCK_TABLE_HEAD + 4 * count + 4


def _block_count(payload_length: int, block_size: int) -> int:
    return -(-payload_length // block_size)


def block_checksums_by_default(codec: str, compression: str) -> bool:
    """Whether writers add block checksums when not told: for the files :func:`tracepack.open` reads
    lazily (an uncompressed FlatBuffers layout), where a lookup then verifies only the blocks it reads.
    Other files are read whole, and the header's payload CRC-32 already covers them."""
    return compression == "none" and codec in ("flatbuffers-rows", "flatbuffers-columns")


def block_table(stored: bytes | bytearray | memoryview, block_size: int = BLOCK_SIZE) -> bytes:
    """The block table of a stored payload (what follows it in a file with flag bit 0)."""
    if block_size not in BLOCK_SIZES:
        raise UsageError(f"block size {block_size}", where="block_size", expected="a power of two from 512 to 16777216")
    mv = memoryview(stored)
    crc32 = zlib.crc32
    crcs = [crc32(mv[i : i + block_size]) for i in range(0, len(mv), block_size)]
    body = _BLOCK_HEAD.pack(BLOCK_MAGIC, block_size, len(crcs)) + struct.pack(f"<{len(crcs)}I", *crcs)
    return body + struct.pack("<I", zlib.crc32(body))


def check_block_table_head(
    head: bytes | bytearray | memoryview, header: ContainerHeader, available: int, *, source: str | None = None
) -> int:
    """Check the first bytes of a block table (up to 16: magic, block size, count) and its length,
    ``available`` (the file's bytes after the payload), against ``header``; return the table's size.

    In order: at least the 16-byte head is there, the magic, the block size (a power of two, 512 B to
    16 MiB), the block count (the payload's length in blocks), the length (head, one CRC-32 per block,
    the table's own CRC-32, then the end of the file). Errors name the file offset of the field."""
    at = header.block_table_at
    if available < BLOCK_TABLE_HEAD or len(head) < BLOCK_TABLE_HEAD:
        raise ContainerError(
            f"truncated block table: {available} bytes",
            source=source,
            where=f"byte {at}",
            expected=f"a block table of at least {block_table_size(0)} bytes after the payload (header flag bit 0)",
        )
    magic, block_size, count = _BLOCK_HEAD.unpack_from(head, 0)
    if magic != BLOCK_MAGIC:
        raise ContainerError(
            f"block table magic is {bytes(magic)!r}", source=source, where=f"byte {at}", expected=repr(BLOCK_MAGIC)
        )
    if block_size not in BLOCK_SIZES:
        raise ContainerError(
            f"block size {block_size}",
            source=source,
            where=f"byte {at + 4}",
            expected="a power of two from 512 to 16777216",
        )
    want = _block_count(header.payload_length, block_size)
    if count != want:
        raise ContainerError(
            f"block count {count}",
            source=source,
            where=f"byte {at + 8}",
            expected=f"{want}: {header.payload_length} payload bytes in blocks of {block_size}",
        )
    size = block_table_size(count)
    if available != size:
        what = "truncated block table" if available < size else f"{available - size} unexpected bytes after it"
        raise ContainerError(
            f"{what}: {available} block table bytes",
            source=source,
            where=f"byte {at + min(available, size)}",
            expected=f"{size} block table bytes ({count} blocks), then the end of the file",
        )
    return size


def read_block_table(
    data: bytes | bytearray | memoryview, header: ContainerHeader, *, source: str | None = None
) -> BlockTable:
    """Check the block table ``data`` (every byte after the payload, exactly) against ``header``:
    :func:`check_block_table_head`, then the table's own CRC-32."""
    at = header.block_table_at
    size = check_block_table_head(memoryview(data)[:BLOCK_TABLE_HEAD], header, len(data), source=source)
    if zlib.crc32(memoryview(data)[: size - 4]) != struct.unpack_from("<I", data, size - 4)[0]:
        raise ContainerError(
            "block table checksum mismatch: the file is corrupted", source=source, where=f"bytes {at}..{at + size - 1}"
        )
    block_size = struct.unpack_from("<I", data, 4)[0]
    return BlockTable(block_size, struct.unpack_from(f"<{(size - 20) // 4}I", data, BLOCK_TABLE_HEAD))


def block_mismatch(
    table: BlockTable, index: int, header: ContainerHeader, *, source: str | None, changed: bool = False
) -> ContainerError:
    """The error for block ``index`` whose bytes do not match its CRC-32."""
    start = header.header_size + index * table.block_size
    end = header.header_size + min((index + 1) * table.block_size, header.payload_length) - 1
    why = "the file changed while it was open, or is corrupted" if changed else "the file is corrupted"
    return ContainerError(f"block {index} checksum mismatch: {why}", source=source, where=f"bytes {start}..{end}")


def check_blocks(
    payload: bytes | bytearray | memoryview, table: BlockTable, header: ContainerHeader, *, source: str | None
) -> None:
    """Check every block of the stored payload against the table."""
    mv = memoryview(payload)
    size = table.block_size
    crc32 = zlib.crc32
    for i, want in enumerate(table.crcs):
        if crc32(mv[i * size : (i + 1) * size]) != want:
            raise block_mismatch(table, i, header, source=source)


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
    if flags & ~_KNOWN_FLAGS:
        raise ContainerError(
            f"unknown flags {flags:#x}",
            source=source,
            where="header byte 18",
            expected=f"0 or {FLAG_BLOCK_CHECKSUMS:#x} (block checksums)",
        )
    if comp == 0 and rlen != plen:
        raise ContainerError(
            f"raw length {rlen} differs from payload length {plen} without compression",
            source=source,
            where="header byte 32",
        )
    return ContainerHeader(
        (major, minor), CODEC_IDS[codec], _COMPRESSION_NAMES[comp], dict_id, plen, rlen, pcrc, hsize, cver, flags
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
    table = None
    if header.block_checksums:
        table = read_block_table(memoryview(data)[start + header.payload_length :], header, source=source)
    elif available > header.payload_length:
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
    if table is not None:  # the payload's CRC matched: a block that does not is a forged table
        check_blocks(payload, table, header, source=source)
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
    block_checksums: bool | None = None,
    block_size: int = BLOCK_SIZE,
) -> bytes:
    """Wrap ``payload`` (already encoded with ``codec``) in a container.

    ``zstd_dict`` is a dictionary, or the name of a built-in one (:mod:`tracepack.dictionaries`),
    whose id goes in the header. ``block_checksums`` adds a block table (header flag bit 0: one
    CRC-32 per ``block_size`` bytes of the stored payload, so that a lazy reader verifies only the
    blocks it reads); ``None``: :func:`block_checksums_by_default` (on for uncompressed FlatBuffers)."""
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
            cctx = dictionaries.compressor(zstd_dict, level, len(payload))
        else:
            cctx = zstandard.ZstdCompressor(level=level)
        stored = cctx.compress(payload)
    elif zstd_dict is not None:
        raise UsageError("a zstd dictionary needs compression='zstd'", where="zstd_dict")
    if block_checksums is None:
        block_checksums = block_checksums_by_default(codec, compression)
    tail = block_table(stored, block_size) if block_checksums else b""
    head = _HEADER.pack(
        MAGIC,
        CONTAINER_VERSION,
        HEADER_SIZE,
        schema_version[0],
        schema_version[1],
        codec_id,
        comp,
        FLAG_BLOCK_CHECKSUMS if block_checksums else 0,
        dict_id,
        len(stored),
        len(payload),
        zlib.crc32(stored),
        0,
    )
    head = head[:44] + struct.pack("<I", zlib.crc32(head[:44]))
    return b"".join((head, stored, tail))


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
