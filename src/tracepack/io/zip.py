"""Reading and writing torch's zip archives (``.pt2``, TorchScript ``.pt``/``.ptl``) without torch.

torch's ``PyTorchStreamWriter`` stores every member uncompressed, all under one
top folder, each record's data 64-byte aligned (the local header's extra field
is padded with an ``FB`` field of ``Z`` bytes). :func:`write_archive` writes
that layout, so ``torch.export.load`` and ``torch.jit.load`` accept what we
rebuild, and members can still be memory-mapped.

Reading is defensive: a file that is not a zip, a member larger than the
limit, or a member whose declared size does not match is a one-line
:class:`~tracepack.errors.LegacyFormatError`.
"""

from __future__ import annotations

import io
import struct
import zipfile
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from tracepack.errors import LegacyFormatError

__all__ = ["ALIGN", "MAX_MEMBER_BYTES", "Archive", "Member", "open_archive", "write_archive", "write_plain_archive"]

ALIGN = 64
#: The largest member read (as the zip declares it): weights can be large, debug members never are.
MAX_MEMBER_BYTES = 1 << 30
_LOCAL_HEADER = 30


@dataclass(frozen=True, slots=True)
class Member:
    """One archive member: its full name, date and attributes (kept when rewriting)."""

    name: str
    date_time: tuple[int, int, int, int, int, int]
    external_attr: int
    size: int


class Archive:
    """A torch archive opened for reading: member names in order, the top folder, member bytes."""

    def __init__(self, data: bytes | bytearray | memoryview, *, source: str) -> None:
        self.source = source
        try:
            self._data = bytes(data)
            self._zip = zipfile.ZipFile(io.BytesIO(self._data))
            infos = self._zip.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError, KeyError) as exc:
            raise LegacyFormatError(
                f"not a readable zip archive: {exc}", source=source, expected="a torch .pt2 or TorchScript .pt archive"
            ) from None
        self._infos = {i.filename: i for i in infos}
        self.members = [Member(i.filename, i.date_time, i.external_attr, i.file_size) for i in infos if not i.is_dir()]
        tops = {m.name.split("/", 1)[0] for m in self.members if "/" in m.name}
        self.top = tops.pop() if len(tops) == 1 and all("/" in m.name for m in self.members) else None

    def names(self) -> list[str]:
        return [m.name for m in self.members]

    def relative(self, name: str) -> str:
        """A member's path below the top folder."""
        return name.split("/", 1)[1] if self.top is not None else name

    def read(self, name: str, *, limit: int = MAX_MEMBER_BYTES) -> bytes:
        info = self._infos.get(name)
        where = f"{self.source}:{name}"
        if info is None:
            raise LegacyFormatError("no such member", source=where)
        if info.file_size > limit:
            raise LegacyFormatError(f"member of {info.file_size} bytes exceeds the {limit}-byte limit", source=where)
        try:
            with self._zip.open(info) as f:
                data = f.read(limit + 1)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, RuntimeError) as exc:
            raise LegacyFormatError(f"cannot read member: {exc}", source=where) from None
        if len(data) != info.file_size:
            raise LegacyFormatError(f"member holds {len(data)} bytes, the zip declares {info.file_size}", source=where)
        return data

    def torch_aligned(self) -> bool:
        """Whether every member carries torch's ``FB`` alignment padding (``PyTorchStreamWriter``);
        archives written with Python's ``zipfile`` (torch 2.1-2.7's ``.pt2``) do not."""
        raw = self._data
        for info in self._infos.values():
            at = info.header_offset
            name_len, extra_len = struct.unpack("<HH", raw[at + 26 : at + 30])
            if not raw[at + 30 + name_len : at + 30 + name_len + extra_len].startswith(b"FB"):
                return False  # the padding sits in the local headers only
        return True

    def compress_type(self, name: str) -> int:
        """How ``name`` is stored (``zipfile.ZIP_STORED``, ``ZIP_DEFLATED``, ...)."""
        return self._infos[name].compress_type

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_archive(data: bytes | bytearray | memoryview, *, source: str) -> Archive:
    """Open zip bytes for reading (see :class:`Archive`)."""
    return Archive(data, source=source)


def write_plain_archive(members: Iterable[tuple[Member, int, bytes]]) -> bytes:
    """Write ``(member, compress_type, data)`` in order as Python's ``zipfile`` does (no padding)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", allowZip64=True) as zout:
        for member, compress_type, data in members:
            info = zipfile.ZipInfo(member.name, date_time=member.date_time)
            info.external_attr = member.external_attr
            info.compress_type = compress_type
            zout.writestr(info, data)
    return out.getvalue()


def write_archive(members: Iterable[tuple[Member | str, bytes]], *, deflate: Collection[str] = ()) -> bytes:
    """Write members, in order, as torch does: stored, 64-byte aligned data, ``FB`` padding.

    Members named in ``deflate`` are compressed instead (torch's reader inflates them; they
    cannot be memory-mapped, so only small text members such as ``model.json`` qualify).
    """
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED, allowZip64=True) as zout:
        for member, data in members:
            if isinstance(member, Member):
                info = zipfile.ZipInfo(member.name, date_time=member.date_time)
                info.external_attr = member.external_attr
            else:
                info = zipfile.ZipInfo(member, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            name = info.filename.encode("utf-8")
            # A zip64 local header needs a 20-byte extra field when the member is large.
            zip64 = 20 if len(data) >= 0xFFFFFFFF else 0
            pad = (-(out.tell() + _LOCAL_HEADER + len(name) + zip64 + 4)) % ALIGN
            info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
            if info.filename in deflate:
                info.compress_type = zipfile.ZIP_DEFLATED
            zout.writestr(info, data)
    return out.getvalue()
