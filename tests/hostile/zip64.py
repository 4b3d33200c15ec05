"""Zip archives with zip64 records everywhere, and members of any size that cost no disk.

:func:`write_zip64` writes every member with zip64 sizes in its local header and zip64 sizes and
offset in its central directory entry (the 32-bit fields all ``0xFFFFFFFF``), then a zip64 end
record and its locator: what a writer of members over 4 GiB produces, forced on members of any
size so that the parsing is covered by small files too. A member given as an ``int`` is that
many zero bytes, left as a hole in a sparse file (a 4.5 GiB member costs nothing to write).
``aligned=True`` pads each local header with torch's ``FB`` field, as ``PyTorchStreamWriter``
does, so the data start on a 64-byte boundary. :func:`zip64_parts` writes an archive as such
parts (bytes and zero runs), for a member holding a zip that itself holds a big member (a flat
``.pt2``'s ``serialized_state_dict.pt``): a member given as a list of parts is their concatenation.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

__all__ = ["Data", "write_zip64", "zero_crc", "zip64_parts"]

#: A member's data: bytes, a count of zero bytes, or a list of those (concatenated).
Data = bytes | int | list[bytes | int]

_ZEROS = bytes(16 << 20)
_MASK32 = 0xFFFFFFFF


def zero_crc(size: int, crc: int = 0) -> int:
    """CRC-32 of ``size`` zero bytes (following bytes whose CRC-32 is ``crc``)."""
    while size:
        n = min(size, len(_ZEROS))
        crc = zlib.crc32(memoryview(_ZEROS)[:n], crc)
        size -= n
    return crc


class _Parts:
    """A file-like recorder of what :func:`_write` writes: bytes, and holes as zero runs."""

    def __init__(self) -> None:
        self.parts: list[bytes | int] = []
        self.pos = 0

    def tell(self) -> int:
        return self.pos

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        self.pos += len(data)
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        assert whence == 1, "only holes are skipped"
        self.parts.append(offset)
        self.pos += offset
        return self.pos


def _pieces(data: Data) -> list[bytes | int]:
    return data if isinstance(data, list) else [data]


def _write(f: BinaryIO | _Parts, members: Iterable[tuple[str, Data]], aligned: bool) -> None:
    central = []
    for name, data in members:
        raw = name.encode("utf-8")
        size = crc = 0
        for piece in _pieces(data):
            size += piece if isinstance(piece, int) else len(piece)
            crc = zero_crc(piece, crc) if isinstance(piece, int) else zlib.crc32(piece, crc)
        offset = f.tell()
        zip64 = struct.pack("<HHQQ", 1, 16, size, size)
        extra = zip64
        if aligned:
            pad = (-(offset + 30 + len(raw) + 4 + len(zip64))) % 64
            extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad + zip64
        f.write(
            struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 45, 0, 0, 0, 0x21, crc, _MASK32, _MASK32, len(raw), len(extra))
        )
        f.write(raw + extra)
        for piece in _pieces(data):
            if isinstance(piece, int):
                f.seek(piece, 1)  # a hole: reads as zeros
            else:
                f.write(piece)
        central.append((raw, crc, size, offset))
    cd_start = f.tell()
    for raw, crc, size, offset in central:
        extra = struct.pack("<HHQQQ", 1, 24, size, size, offset)
        f.write(
            struct.pack(
                "<4sHHHHHHIIIHHHHHII",
                b"PK\x01\x02",
                45,
                45,
                0,
                0,
                0,
                0x21,
                crc,
                _MASK32,
                _MASK32,
                len(raw),
                len(extra),
                0,
                0,
                0,
                0o644 << 16,
                _MASK32,
            )
        )
        f.write(raw + extra)
    cd_end = f.tell()
    n = len(central)
    f.write(struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, n, n, cd_end - cd_start, cd_start))
    f.write(struct.pack("<4sIQI", b"PK\x06\x07", 0, cd_end, 1))
    f.write(struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, _MASK32, _MASK32, 0))


def write_zip64(path: Path, members: Iterable[tuple[str, Data]], *, aligned: bool = True) -> None:
    """Write ``members`` (name, bytes or a count of zero bytes, or a list of those) with forced
    zip64 records."""
    with path.open("wb") as f:
        _write(f, members, aligned)


def zip64_parts(members: Iterable[tuple[str, Data]], *, aligned: bool = True) -> list[bytes | int]:
    """The archive :func:`write_zip64` would write, as parts (bytes, and counts of zero bytes)."""
    parts = _Parts()
    _write(parts, members, aligned)
    return parts.parts
