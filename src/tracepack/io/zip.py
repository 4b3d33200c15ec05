"""Reading and writing torch's zip archives (``.pt2``, TorchScript ``.pt``/``.ptl``) without torch.

torch's ``PyTorchStreamWriter`` stores every member uncompressed, all under one
top folder, each record's data 64-byte aligned (the local header's extra field
is padded with an ``FB`` field of ``Z`` bytes). :class:`ArchiveWriter` writes
that layout, so ``torch.export.load`` and ``torch.jit.load`` accept what we
rebuild, and members can still be memory-mapped.

Archives of any size: an :class:`Archive` reads from bytes or from an open file
(:func:`open_archive_file`), and :meth:`ArchiveWriter.copy` moves a member from one
archive to another without holding it in memory: a stored member (every weight
torch writes) is copied as raw bytes, by the kernel where it can
(``copy_file_range``), its CRC and sizes taken from the source (zip64 for members
over 4 GiB); a compressed one is streamed, chunk by chunk, under the ratio budget.
Peak memory follows the members that are decoded (the program), not the weights.

Reading is defensive: a file that is not a zip, a member larger than the
limit, a compressed member that expands past the ``max_ratio`` budget of
:mod:`tracepack.io.limits` (a zip bomb), a corrupt deflate/bzip2/LZMA stream or a
member whose declared size does not match is a one-line
:class:`~tracepack.errors.LegacyFormatError` naming the member.
"""

from __future__ import annotations

import contextlib
import io
import lzma
import os
import struct
import zipfile
import zlib
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import IO, Any, cast

from tracepack.errors import LegacyFormatError
from tracepack.io import limits

__all__ = [
    "ALIGN",
    "MAX_MEMBER_BYTES",
    "MEMBER_ERRORS",
    "ZIP_ERRORS",
    "Archive",
    "ArchiveWriter",
    "check_member",
    "FileSlice",
    "Member",
    "open_archive",
    "open_archive_file",
    "write_archive",
    "write_plain_archive",
]

ALIGN = 64
#: The largest member :meth:`Archive.read` reads by default: the ``max_decompressed`` budget's default
#: (a caller raises it with ``limits.raised(max_decompressed=...)`` or ``--limit``).
MAX_MEMBER_BYTES = limits.DEFAULT.max_decompressed
_LOCAL_HEADER = 30
_CHUNK = 1 << 20
#: Members from this size on keep their data's offset within a page when copied (see ArchiveWriter._info).
_PAGE_MATCH = 1 << 20
_PAGE = 4096
#: How much a large copy into a durable output copies before starting that part's writeback.
_FLUSH_STEP = 256 << 20
#: What a damaged member's decompressor can raise, besides zipfile's own errors.
MEMBER_ERRORS = (
    zipfile.BadZipFile,
    OSError,
    ValueError,
    OverflowError,  # an offset past 2**63 (zip64 extras hold 64 bits): no file position
    EOFError,
    NotImplementedError,
    RuntimeError,
    zlib.error,
    lzma.LZMAError,
)


#: What :mod:`zipfile` raises on a damaged or foreign archive (an unknown extractor version is
#: NotImplementedError; a truncated central directory OSError/EOFError; a bad name KeyError).
ZIP_ERRORS: tuple[type[Exception], ...] = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    OSError,
    ValueError,
    OverflowError,
    EOFError,
    KeyError,
    NotImplementedError,
)


def open_zip(
    f: str | os.PathLike[str] | IO[bytes], *, source: str, expected: str
) -> tuple[zipfile.ZipFile, list[zipfile.ZipInfo]]:
    """``zipfile.ZipFile(f)`` and its members, every member named: anything else is a LegacyFormatError."""
    try:
        z = zipfile.ZipFile(f)
        infos = z.infolist()
    except ZIP_ERRORS as exc:
        raise LegacyFormatError(f"not a readable zip archive: {exc}", source=source, expected=expected) from None
    for index, i in enumerate(infos):
        if not i.filename:  # zipfile's is_dir() would raise IndexError
            raise LegacyFormatError(
                "a member has an empty name", source=source, where=f"member {index}", expected="named members"
            )
    return z, infos


def check_member(info: zipfile.ZipInfo, where: str) -> None:
    """Refuse a member about to be read into memory that breaks the caller's budgets
    (:mod:`tracepack.io.limits`), before a byte of it is read or a buffer allocated: larger than
    ``max_decompressed`` as the zip declares it, or compressed and expanding more than
    ``max_ratio`` times once past ``ratio_floor`` (a zip bomb). ``where`` names the member."""
    budget = limits.current()
    if info.file_size > budget.max_decompressed:
        raise LegacyFormatError(
            f"member of {info.file_size:,} bytes is over the max_decompressed budget of "
            f"{budget.max_decompressed:,} bytes",
            source=where,
            expected=f"a smaller member, {limits.hint('max_decompressed')}",
        )
    if info.compress_type != zipfile.ZIP_STORED and limits.ratio_exceeded(info.file_size, info.compress_size, budget):
        raise LegacyFormatError(
            f"member expands from {info.compress_size:,} to {info.file_size:,} bytes, over {budget.max_ratio:,} "
            f"times (a zip bomb?) past the ratio_floor of {budget.ratio_floor:,} bytes",
            source=where,
            expected=f"a plausible size, {limits.hint('max_ratio')}",
        )


@dataclass(frozen=True, slots=True)
class Member:
    """One archive member: its full name, date and attributes (kept when rewriting)."""

    name: str
    date_time: tuple[int, int, int, int, int, int]
    external_attr: int
    size: int


class Archive:
    """A torch archive opened for reading: member names in order, the top folder, member bytes."""

    def __init__(self, data: bytes | bytearray | memoryview | IO[bytes], *, source: str) -> None:
        self.source = source
        self._fp: IO[bytes] = io.BytesIO(bytes(data)) if isinstance(data, (bytes, bytearray, memoryview)) else data
        self._zip, infos = open_zip(self._fp, source=source, expected="a torch .pt2 or TorchScript .pt archive")
        self._infos = {i.filename: i for i in infos}
        self.members = [Member(i.filename, i.date_time, i.external_attr, i.file_size) for i in infos if not i.is_dir()]
        tops = {m.name.split("/", 1)[0] for m in self.members if "/" in m.name}
        self.top = tops.pop() if len(tops) == 1 and all("/" in m.name for m in self.members) else None

    def info(self, name: str) -> zipfile.ZipInfo:
        info = self._infos.get(name)
        if info is None:
            raise LegacyFormatError("no such member", source=f"{self.source}:{name}")
        return info

    def _check_ratio(self, info: zipfile.ZipInfo) -> None:
        if info.compress_type != zipfile.ZIP_STORED and limits.ratio_exceeded(info.file_size, info.compress_size):
            budget = limits.current()
            raise LegacyFormatError(
                f"member expands from {info.compress_size} to {info.file_size} bytes, over {budget.max_ratio} "
                "times (a zip bomb?)",
                source=f"{self.source}:{info.filename}",
                expected=f"a plausible size, {limits.hint('max_ratio')}",
            )

    def raw_data_offset(self, info: zipfile.ZipInfo) -> int:
        """Where a member's stored bytes start in the archive (after its local header)."""
        where = f"{self.source}:{info.filename}"
        try:
            self._fp.seek(info.header_offset)
            head = self._fp.read(_LOCAL_HEADER)
        except (OSError, ValueError, OverflowError) as exc:
            raise LegacyFormatError(f"cannot read the local header: {exc}", source=where) from None
        if len(head) != _LOCAL_HEADER or head[:4] != b"PK\x03\x04":
            raise LegacyFormatError("bad local header", source=where, where=f"byte {info.header_offset}")
        name_len, extra_len = struct.unpack_from("<HH", head, 26)
        return int(info.header_offset + _LOCAL_HEADER + name_len + extra_len)

    def names(self) -> list[str]:
        return [m.name for m in self.members]

    def relative(self, name: str) -> str:
        """A member's path below the top folder."""
        return name.split("/", 1)[1] if self.top is not None else name

    def read(self, name: str, *, limit: int | None = None) -> bytes:
        """A member's bytes, read into memory within the caller's budgets (:mod:`tracepack.io.limits`):
        at most ``max_decompressed`` bytes as the zip declares them, checked before anything is read,
        and a compressed member at most ``max_ratio`` times its compressed size once past
        ``ratio_floor``. The decompressor stops at the declared size, so a member lying about it is
        refused, never read past. ``limit`` is a format's own cap for one kind of member (a
        ``version`` member of a few bytes), applied on top of the budget; it names no budget."""
        info = self._infos.get(name)
        where = f"{self.source}:{name}"
        if info is None:
            raise LegacyFormatError("no such member", source=where)
        check_member(info, where)
        if limit is not None and info.file_size > limit:
            raise LegacyFormatError(f"member of {info.file_size} bytes exceeds the {limit}-byte limit", source=where)
        try:
            with self._zip.open(info) as f:
                data = f.read(info.file_size + 1)
        except MEMBER_ERRORS as exc:
            raise LegacyFormatError(f"cannot read member: {exc}", source=where) from None
        if len(data) != info.file_size:
            raise LegacyFormatError(f"member holds {len(data)} bytes, the zip declares {info.file_size}", source=where)
        return data

    def torch_aligned(self) -> bool:
        """Whether every member carries torch's ``FB`` alignment padding (``PyTorchStreamWriter``);
        archives written with Python's ``zipfile`` (torch 2.1-2.7's ``.pt2``) do not."""
        for info in self._infos.values():
            try:
                self._fp.seek(info.header_offset)
                head = self._fp.read(_LOCAL_HEADER)
                name_len, extra_len = struct.unpack("<HH", head[26:30])
                self._fp.seek(info.header_offset + _LOCAL_HEADER + name_len)
                extra = self._fp.read(extra_len)
            except (OSError, ValueError, OverflowError, struct.error):
                return False
            if not extra.startswith(b"FB"):
                return False  # the padding sits in the local headers only
        return True

    def compress_type(self, name: str) -> int:
        """How ``name`` is stored (``zipfile.ZIP_STORED``, ``ZIP_DEFLATED``, ...)."""
        return self._infos[name].compress_type

    def open_member(self, name: str) -> IO[bytes]:
        """A member as a stream (checked against the ratio budget; its CRC is checked at its end)."""
        info = self.info(name)
        self._check_ratio(info)
        try:
            return self._zip.open(info)
        except MEMBER_ERRORS as exc:
            raise LegacyFormatError(f"cannot read member: {exc}", source=f"{self.source}:{name}") from None

    def member_file(self, name: str) -> IO[bytes]:
        """A stored member as a read-only file of its own (a zip inside the zip, such as the
        ``torch.save`` archive a legacy weights member is), read in place, never copied: a
        :class:`FileSlice` of the archive's file. A compressed member is a LegacyFormatError."""
        info = self.info(name)
        where = f"{self.source}:{name}"
        if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1:
            raise LegacyFormatError("the member is compressed or encrypted", source=where, expected="a stored member")
        if info.compress_size != info.file_size:
            raise LegacyFormatError(f"stored member of {info.file_size} bytes holds {info.compress_size}", source=where)
        return cast(IO[bytes], FileSlice(self._fp, self.raw_data_offset(info), info.file_size))

    _owned: IO[bytes] | None = None

    def close(self) -> None:
        self._zip.close()
        if self._owned is not None:
            self._owned.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FileSlice(io.RawIOBase):
    """Bytes ``start`` to ``start + size`` of the binary file ``base``, as a seekable read-only file.

    Reads go to ``base`` (which must stay open); :func:`_copy_bytes` copies from it by the kernel,
    at ``slice_start`` + the slice's own offset."""

    def __init__(self, base: IO[bytes], start: int, size: int) -> None:
        super().__init__()
        self._base = base
        self.slice_start = start
        self._size = size
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._base.fileno()

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError("negative seek position")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        n = max(0, min(len(view), self._size - self._pos))
        if n == 0:
            return 0
        self._base.seek(self.slice_start + self._pos)
        got = self._base.readinto(view[:n])  # type: ignore[attr-defined]
        self._pos += got or 0
        return got or 0


def open_archive(data: bytes | bytearray | memoryview, *, source: str) -> Archive:
    """Open zip bytes for reading (see :class:`Archive`)."""
    return Archive(data, source=source)


def open_archive_file(path: str | os.PathLike[str], *, source: str | None = None) -> Archive:
    """Open an archive file for reading without reading it into memory (a regular file only)."""
    import stat

    from tracepack.errors import UsageError
    from tracepack.io.files import kind_of

    name = source or os.fspath(path)
    try:
        # O_NONBLOCK: a FIFO must be refused, not waited on.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise UsageError(f"cannot open: {exc.strerror}", source=name) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise UsageError(f"is {kind_of(mode)}, not a regular file", source=name, expected="a .pt2 or .pt archive")
    os.set_blocking(fd, True)
    f = os.fdopen(fd, "rb")
    try:
        archive = Archive(f, source=name)
    except BaseException:
        f.close()
        raise
    archive._owned = f
    return archive


class ArchiveWriter:
    """Write members, in order: by default as torch does (stored, 64-byte aligned data, ``FB`` padding).

    ``out`` is a binary file (seekable: a regular file or ``io.BytesIO``). Members come as bytes
    (:meth:`add`) or straight from another archive (:meth:`copy`, streamed, never whole in memory).
    ``aligned=False`` writes as Python's ``zipfile`` does (no padding; what torch 2.1-2.7's flat
    ``.pt2`` archives are): a copied member keeps its compression, its bytes copied raw.
    """

    def __init__(self, out: IO[bytes], *, aligned: bool = True) -> None:
        self._out = out
        self._aligned = aligned
        self._zip = zipfile.ZipFile(out, "w", zipfile.ZIP_STORED, allowZip64=True)

    def _info(
        self, member: Member | str, size: int, extra_header: int = 0, page_with: int | None = None
    ) -> tuple[zipfile.ZipInfo, bool]:
        if isinstance(member, Member):
            info = zipfile.ZipInfo(member.name, date_time=member.date_time)
            info.external_attr = member.external_attr
        else:
            info = zipfile.ZipInfo(member, date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_STORED
        info.file_size = size
        # zipfile writes a zip64 local header (a 20-byte extra field) exactly when this holds.
        zip64 = size * 1.05 > zipfile.ZIP64_LIMIT
        if self._aligned:
            name = info.filename.encode("utf-8")
            start = self._zip.start_dir if hasattr(self._zip, "start_dir") else self._out.tell()
            header_end = start + _LOCAL_HEADER + len(name) + (20 if zip64 else 0) + 4
            pad = (-header_end) % ALIGN
            if page_with is not None and page_with % ALIGN == 0 and size >= _PAGE_MATCH:
                # A large copied member's data starts at the same offset within a page as in its
                # source (still 64-aligned): the kernel's copy then moves whole pages (a 4.5 GB
                # copy at mismatched offsets took ~25% longer here).
                pad = (page_with - header_end) % _PAGE
            info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
        return info, zip64

    def add(
        self, member: Member | str, data: bytes, *, deflate: bool = False, compress_type: int | None = None
    ) -> None:
        """Store ``data`` as a member (``deflate``: compressed; ``compress_type``: any zipfile method)."""
        info, _ = self._info(member, len(data))
        if deflate:
            info.compress_type = zipfile.ZIP_DEFLATED
        elif compress_type is not None:
            info.compress_type = compress_type
        self._zip.writestr(info, data)

    def add_stream(self, member: Member | str, size: int, source: IO[bytes]) -> None:
        """Store ``size`` bytes read from ``source`` as a member, a chunk at a time."""
        info, zip64 = self._info(member, size)
        with self._zip.open(info, "w", force_zip64=zip64) as dest:
            left = size
            while left:
                chunk = source.read(min(_CHUNK, left))
                if not chunk:
                    raise LegacyFormatError(f"the source ended {left} bytes early", source=info.filename)
                dest.write(chunk)
                left -= len(chunk)

    def copy(self, archive: Archive, name: str, member: Member | None = None) -> None:
        """Copy member ``name`` of ``archive`` (under ``member``'s name and attributes, if given).

        Its bytes are copied raw, never decompressed nor recompressed, with the CRC and sizes the
        source's central directory gives (a reader of the output checks them): every member of an
        unaligned archive, and every stored member (all torch writes) of an aligned one. Only a
        compressed member of an aligned archive is decompressed, as a stream, and stored.
        """
        src = archive.info(name)
        target = member or Member(src.filename, src.date_time, src.external_attr, src.file_size)
        where = f"{archive.source}:{src.filename}"
        if src.flag_bits & 0x1:
            raise LegacyFormatError("the member is encrypted", source=where, expected="a plain zip member")
        stored = src.compress_type == zipfile.ZIP_STORED
        if stored and src.compress_size != src.file_size:
            raise LegacyFormatError(f"stored member of {src.file_size} bytes holds {src.compress_size}", source=where)
        if stored or not self._aligned:
            if src.compress_type not in _RAW_METHODS:
                raise LegacyFormatError(f"unknown compression method {src.compress_type}", source=where)
            self._copy_raw(archive, src, target)
            return
        # A compressed member of a torch-aligned archive (torch never writes one): streamed through, stored.
        info, zip64 = self._info(target, src.file_size)
        with archive.open_member(name) as f, self._zip.open(info, "w", force_zip64=zip64) as dest:
            try:
                while chunk := f.read(_CHUNK):
                    dest.write(chunk)
            except MEMBER_ERRORS as exc:
                raise LegacyFormatError(f"cannot read member: {exc}", source=where) from None

    def _copy_raw(self, archive: Archive, src: zipfile.ZipInfo, target: Member) -> None:
        offset = archive.raw_data_offset(src)
        info, _ = self._info(target, max(src.file_size, src.compress_size), page_with=offset + _slice_start(archive))
        zip64 = max(src.file_size, src.compress_size) * 1.05 > zipfile.ZIP64_LIMIT
        info.file_size = src.file_size
        info.compress_type = src.compress_type
        info.compress_size = src.compress_size
        info.CRC = src.CRC
        info.flag_bits = 0
        out, z = self._out, self._zip
        out.seek(z.start_dir)
        info.header_offset = out.tell()
        out.write(info.FileHeader(zip64))
        out.flush()
        data_at = out.tell()
        where = f"{archive.source}:{src.filename}"
        _copy_bytes(archive._fp, offset, out, data_at, src.compress_size, where=where)
        out.seek(data_at + src.compress_size)
        z.filelist.append(info)
        z.NameToInfo[info.filename] = info
        z.start_dir = out.tell()
        z._didModify = True  # type: ignore[attr-defined]

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> ArchiveWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Compression methods a raw copy may carry over (what zipfile, and so torch's readers, can read).
_RAW_METHODS = frozenset({zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA})


def _copy_bytes(src: IO[bytes], src_at: int, dst: IO[bytes], dst_at: int, count: int, *, where: str) -> None:
    """Copy ``count`` bytes between files: in the kernel where possible, else 1 MiB at a time."""
    done = 0
    base = getattr(src, "slice_start", 0)  # a FileSlice: its offsets are the file's minus its start
    src_fd = _fileno(src)
    dst_fd = _fileno(dst)
    if src_fd is not None and dst_fd is not None and hasattr(os, "copy_file_range"):
        fadvise = hasattr(os, "posix_fadvise")
        if fadvise:  # as cp does: read ahead hard (an uncached source reads faster)
            with contextlib.suppress(OSError):
                os.posix_fadvise(src_fd, base + src_at, count, os.POSIX_FADV_SEQUENTIAL)
        from tracepack.io.files import flushes_behind

        # A durable output is synced at the end: have the kernel write each part out as soon as it is
        # copied (DONTNEED starts writeback of the range without waiting for it), so the disk works
        # while the copy goes on, the page cache never fills with dirty pages (no write throttling)
        # and the final fsync finds little left to write.
        behind = fadvise and count > _FLUSH_STEP and flushes_behind(dst_fd)
        step = _FLUSH_STEP if behind else count
        # Where both sides sit at the same offset within a page (ArchiveWriter pads large members
        # so), copy up to the next page boundary first: the rest then moves whole pages, which
        # the kernel copies faster than pages straddling two (as cp's copy from offset 0 does).
        head = (-(base + src_at)) % _PAGE if (base + src_at - dst_at) % _PAGE == 0 and count >= _PAGE_MATCH else 0
        try:
            while done < count:
                want = head - done if done < head else min(step, count - done)
                n = os.copy_file_range(src_fd, dst_fd, want, base + src_at + done, dst_at + done)
                if n == 0:
                    break
                if behind:
                    with contextlib.suppress(OSError):
                        os.posix_fadvise(dst_fd, dst_at + done, n, os.POSIX_FADV_DONTNEED)
                done += n
        except OSError:
            pass  # another file system, an old kernel: copy in user space from where it stopped
    src.seek(src_at + done)
    dst.seek(dst_at + done)
    while done < count:
        chunk = src.read(min(_CHUNK, count - done))
        if not chunk:
            raise LegacyFormatError(f"archive ends {count - done} bytes into a member", source=where)
        dst.write(chunk)
        done += len(chunk)
    if done != count:
        raise LegacyFormatError(f"archive ends {count - done} bytes into a member", source=where)


def _slice_start(archive: Archive) -> int:
    """Where ``archive``'s bytes start in its file (a :class:`FileSlice`: a zip inside a zip)."""
    start = getattr(archive._fp, "slice_start", 0)
    return start if isinstance(start, int) else 0


def _fileno(f: Any) -> int | None:
    try:
        fd = f.fileno()
    except (OSError, AttributeError, io.UnsupportedOperation):
        return None
    return fd if isinstance(fd, int) else None


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
    """Write members, in order, as torch does (see :class:`ArchiveWriter`), into bytes.

    Members named in ``deflate`` are compressed instead (torch's reader inflates them; they
    cannot be memory-mapped, so only small text members such as ``model.json`` qualify).
    """
    out = io.BytesIO()
    with ArchiveWriter(out) as w:
        for member, data in members:
            name = member.name if isinstance(member, Member) else member
            w.add(member, data, deflate=name in deflate)
    return out.getvalue()
