"""A ``.tpk`` with block checksums, read a block at a time: what :func:`tracepack.open` reads such a file with.

A file whose container header has flag bit 0 carries, after its payload, a table of one CRC-32 per
block of the payload (:mod:`tracepack.container`, spec §1.5). :class:`BlockFile` keeps the file
open and reads a block only when something first needs one of its bytes: ``os.pread`` into fresh
memory, the block's CRC-32 compared with the table's, and only then copied into a private buffer
(anonymous memory, as large as the payload, whose pages the kernel provides only once written).
So a lookup that touches a few kilobytes reads and verifies a few blocks, whatever the file's size.

Nothing unverified is ever handed out, and the file cannot change what was: a block is checked
before any of its bytes is used and never read again; a file truncated while open gives a short
read (a one-line :class:`~tracepack.errors.ContainerError` naming the byte), a file rewritten
while open a block whose CRC-32 no longer matches the table read at open (the same, naming the
block), never SIGBUS (no file is memory-mapped) and never a mix of old and new bytes.

:class:`BlockView` is a typed view of payload bytes (a column, a vector of offsets) that verifies
the blocks under each element it is asked for: ``view[i]``, a slice (another view, nothing read
yet), iteration and ``tolist()`` (the whole view), ``verified()`` (a plain ``memoryview``).
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from typing import Any, Final

from tracepack.container import BlockTable, ContainerHeader, block_mismatch
from tracepack.errors import ContainerError, UsageError

__all__ = ["BlockFile", "BlockView"]

_ONE: Final = b"\x01"
_PREADV: Final = hasattr(os, "preadv")


class BlockFile:
    """The payload of an open file with block checksums, read and verified a block at a time.

    ``view`` is the whole payload as a read-only ``memoryview``; a byte of it may be read only
    after :meth:`need` covered it (every reader of :mod:`tracepack.lazy` asks first: through
    :class:`tracepack.codecs._fbrt.CheckedReader` and :class:`BlockView`).
    """

    __slots__ = ("_lock", "_mem", "_raw_header", "_raw_table", "_w", "closed", "crcs", "fd", "header", "length",
                 "ok", "origin", "path", "reads", "shift", "size", "table", "view")  # fmt: skip

    def __init__(
        self, fd: int, path: str, header: ContainerHeader, table: BlockTable, *, raw_header: bytes, raw_table: bytes
    ) -> None:
        self.fd = fd
        #: The header's and the block table's bytes as read at open (what :meth:`whole` gives back).
        self._raw_header, self._raw_table = raw_header, raw_table
        self.path = path
        self.header = header
        self.table = table
        self.length = n = header.payload_length
        self.size = table.block_size
        self.shift = table.block_size.bit_length() - 1
        self.crcs = table.crcs
        #: The file offset of payload byte 0.
        self.origin = header.header_size
        # Anonymous memory: pages exist once written, nothing is read up front, and no file is mapped
        # (a mapped file that shrinks turns the next access into SIGBUS).
        self._mem: mmap.mmap | bytearray = _POOL.take(n) if n else bytearray()
        self._w = memoryview(self._mem)[:n]
        self.view = self._w.toreadonly()
        #: ``ok[i]`` is 1 once block ``i`` is read and verified.
        self.ok = bytearray(table.count)
        #: Blocks read so far (what a benchmark reports as bytes verified).
        self.reads = 0
        self.closed = False
        self._lock = threading.Lock()

    def need(self, start: int, end: int) -> None:
        """Make payload bytes ``[start, end)`` readable in :attr:`view`: read and verify every block
        under them not read yet. A range outside the payload is clipped to it."""
        if end <= start:
            return
        shift = self.shift
        a = start >> shift if start > 0 else 0
        b = (end - 1) >> shift
        ok = self.ok
        if a == b:
            if a < len(ok) and ok[a]:
                return
        elif ok.find(0, a, b + 1) < 0:
            return
        self._load(a, min(b + 1, len(ok)))

    def need_all(self) -> None:
        """Read and verify every block (what :meth:`tracepack.lazy.LazyDocument.load` needs)."""
        self.need(0, self.length)

    def whole(self) -> bytes:
        """The file as it was opened (header, payload, block table), every block verified."""
        self.need_all()
        return b"".join((self._raw_header, self.view, self._raw_table))

    def _load(self, a: int, b: int) -> None:
        if self.closed:
            raise UsageError("the document is closed", source=self.path)
        ok, shift, size, length = self.ok, self.shift, self.size, self.length
        crc32, crcs, w = zlib.crc32, self.crcs, self._w
        # One reader at a time fills the buffer, and only blocks not marked verified: a verified block is
        # never written again, and a block is marked only once its bytes matched their CRC-32.
        with self._lock:
            i = a
            while i < b:
                if ok[i]:
                    i += 1
                    continue
                j = i + 1
                while j < b and not ok[j]:
                    j += 1
                start, end = i << shift, min(j << shift, length)
                got = self._read_into(w[start:end], self.origin + start)
                if got != end - start:
                    raise ContainerError(
                        f"the file changed while it was open: {got} of {end - start} bytes read",
                        source=self.path,
                        where=f"byte {self.origin + start + got}",
                        expected=f"{self.origin + length} bytes of header and payload, as when it was opened",
                    )
                for k in range(i, j):
                    lo = k << shift
                    if crc32(w[lo : min(lo + size, length)]) != crcs[k]:
                        raise block_mismatch(self.table, k, self.header, source=self.path, changed=True)
                ok[i:j] = _ONE * (j - i)
                self.reads += j - i
                i = j

    def _read_into(self, into: memoryview, offset: int) -> int:
        """Read ``len(into)`` bytes of the file from ``offset`` into ``into``; the count read (short at the end)."""
        n = len(into)
        done = 0
        try:
            while done < n:
                if _PREADV:
                    got = os.preadv(self.fd, [into[done:]], offset + done)
                else:  # pragma: no cover - no preadv (macOS before 11, Windows)
                    data = self._pread(n - done, offset + done)
                    into[done : done + len(data)] = data
                    got = len(data)
                if not got:
                    break
                done += got
        except OSError as exc:
            raise UsageError(f"cannot read: {exc.strerror}", source=self.path, where=f"byte {offset + done}") from None
        return done

    def _pread(self, n: int, offset: int) -> bytes:  # pragma: no cover - no preadv
        if hasattr(os, "pread"):
            return os.pread(self.fd, n, offset)
        os.lseek(self.fd, offset, os.SEEK_SET)  # no pread (Windows); under the lock
        return os.read(self.fd, n)

    def typed(self, start: int, count: int, code: str) -> BlockView:
        """``count`` elements of struct code ``code`` from payload byte ``start`` (in bounds), as a view."""
        size = struct.calcsize(code)
        mv = self.view[start : start + count * size]
        return BlockView(self, mv if code in "B?" else mv.cast(code), start)  # type: ignore[call-overload]

    def close(self) -> None:
        """Close the file. The buffer goes back to the pool once no view of it is left."""
        if not self.closed:
            self.closed = True
            os.close(self.fd)
            self.view.release()
            self._w.release()
            if isinstance(self._mem, mmap.mmap):
                _POOL.give(self._mem)


class _Pool:
    """Payload buffers of closed files, reused by the next files that fit.

    A fresh anonymous page costs a page fault when first written (microseconds each: tens of them
    per lookup in a virtual machine); a buffer a closed document used has its pages already. A
    buffer is reused only once no view of it is left (a caller may still hold a view of a column:
    ``mmap.resize`` to its own size succeeds only then, and changes nothing), and never holds stale
    bytes that are read: a new file starts with no block verified. At most :data:`_POOL_BUFFERS`
    buffers and :data:`_POOL_BYTES` bytes are kept; where ``mmap`` cannot resize (no ``mremap``),
    none is.
    """

    def __init__(self) -> None:
        self._free: list[mmap.mmap] = []
        self._lock = threading.Lock()

    def take(self, n: int) -> mmap.mmap:
        with self._lock:
            for k, m in enumerate(self._free):
                if n <= len(m) <= max(2 * n, n + (1 << 20)) and _unexported(m):
                    del self._free[k]
                    return m
        # Private: a child process forked while a document is open gets its own copy of each page it
        # writes, never the parent's buffer (the default for anonymous memory is shared).
        return mmap.mmap(-1, n, flags=_PRIVATE) if _PRIVATE else mmap.mmap(-1, n)

    def give(self, m: mmap.mmap) -> None:
        with self._lock:
            self._free.append(m)
            while len(self._free) > _POOL_BUFFERS or sum(map(len, self._free)) > _POOL_BYTES:
                del self._free[0]  # the oldest: unmapped once its last view goes


def _unexported(m: mmap.mmap) -> bool:
    """Whether no view of ``m`` is alive (resizing to its own size is refused while one is)."""
    try:
        m.resize(len(m))
    except (BufferError, OSError, SystemError, TypeError, ValueError):
        return False
    return True


#: Buffers and bytes (of address space; only pages once written take memory) the pool keeps.
_POOL_BUFFERS: Final = 4
_POOL_BYTES: Final = 256 << 20
_POOL: Final = _Pool()
_PRIVATE: Final = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS if hasattr(mmap, "MAP_ANONYMOUS") else 0


class BlockView:
    """Typed payload bytes whose blocks are verified when an element is read (see :class:`BlockFile`).

    Enough of ``memoryview``'s behaviour for the lazy readers: ``len``, ``view[i]`` (an int),
    ``view[a:b]`` (a view, nothing read), iteration, ``tolist()``, ``tobytes()``, ``itemsize``,
    ``release()``; ``verified()`` is the plain ``memoryview`` with every element verified.
    """

    __slots__ = ("_base", "_f", "_n", "_v", "itemsize")

    def __init__(self, f: BlockFile, view: memoryview, base: int) -> None:
        self._f = f
        self._v = view
        self._n = len(view)
        #: Payload offset of element 0.
        self._base = base
        self.itemsize = view.itemsize

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if i.__class__ is int:
            n = self._n
            if i < 0:
                i += n
            if not 0 <= i < n:
                raise IndexError("index out of range")
            size = self.itemsize
            at = self._base + i * size
            f = self._f
            ok, shift = f.ok, f.shift
            if not (ok[at >> shift] and ok[(at + size - 1) >> shift]):
                f.need(at, at + size)
            return self._v[i]
        if isinstance(i, slice):
            start, stop, step = i.indices(self._n)
            if step != 1:
                return self.verified()[i]
            stop = max(start, stop)
            return BlockView(self._f, self._v[start:stop], self._base + start * self.itemsize)
        return self[i.__index__()]

    def _all(self) -> memoryview:
        self._f.need(self._base, self._base + self._n * self.itemsize)
        return self._v

    def verified(self) -> memoryview:
        """The elements as a plain ``memoryview``, every block under them verified."""
        return self._all()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._all())

    def tolist(self) -> list[Any]:
        return self._all().tolist()

    def tobytes(self) -> bytes:
        return self._all().tobytes()

    def release(self) -> None:
        self._v.release()

    def __repr__(self) -> str:
        return f"<BlockView {self._n} x {self._v.format} at payload byte {self._base}>"
