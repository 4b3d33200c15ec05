"""Zip archives with zip64 records everywhere, and members of any size that cost no disk.

:func:`write_zip64` writes every member with zip64 sizes in its local header and zip64 sizes and
offset in its central directory entry (the 32-bit fields all ``0xFFFFFFFF``), then a zip64 end
record and its locator: what a writer of members over 4 GiB produces, forced on members of any
size so that the parsing is covered by small files too. A member given as an ``int`` is that
many zero bytes, left as a hole in a sparse file (a 4.5 GiB member costs nothing to write).
``aligned=True`` pads each local header with torch's ``FB`` field, as ``PyTorchStreamWriter``
does, so the data start on a 64-byte boundary.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

__all__ = ["write_zip64", "zero_crc"]

_ZEROS = bytes(16 << 20)
_MASK32 = 0xFFFFFFFF


def zero_crc(size: int) -> int:
    """CRC-32 of ``size`` zero bytes."""
    crc = 0
    while size:
        n = min(size, len(_ZEROS))
        crc = zlib.crc32(memoryview(_ZEROS)[:n], crc)
        size -= n
    return crc


def _write(f: BinaryIO, members: Iterable[tuple[str, bytes | int]], aligned: bool) -> None:
    central = []
    for name, data in members:
        raw = name.encode("utf-8")
        size = data if isinstance(data, int) else len(data)
        crc = zero_crc(data) if isinstance(data, int) else zlib.crc32(data)
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
        if isinstance(data, int):
            f.seek(data, 1)  # a hole: reads as zeros
        else:
            f.write(data)
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


def write_zip64(path: Path, members: Iterable[tuple[str, bytes | int]], *, aligned: bool = True) -> None:
    """Write ``members`` (name, bytes or a count of zero bytes) with forced zip64 records."""
    with path.open("wb") as f:
        _write(f, members, aligned)
