"""The FlatBuffers runtime that generated codecs (``tracepack_generated.vX_Y.fbcodec``) call.

Wire format: standard FlatBuffers (little-endian; tables with vtables, vectors
with a ``uint32`` length, strings NUL-terminated), so FlatBuffers' own code in
any language reads what :class:`Writer` writes, and :class:`Reader` reads what
any FlatBuffers builder writes. Only the Python side is our own, for speed:

:class:`Writer`
    builds back to front like every FlatBuffers builder, but into a list of
    chunks joined once at the end; a table is one ``struct.pack`` with a layout
    computed once per *shape* (which fields are present), numeric vectors are
    one ``array(...).tobytes()``, and vtables are shared by content.
:class:`Reader`
    reads every table through a layout computed once per vtable (one
    ``unpack_from`` reads all inline fields), numeric vectors through one
    ``memoryview.cast(...).tolist()``. Every position, length and vtable is
    bounds-checked before use, and a budget caps the total number of decoded
    elements, so a hostile buffer raises :class:`Bad` (turned into
    ``DecodeError`` with its place) -- never IndexError, a wrong answer or a hang.

The signatures are a contract with generated code: change them only together
with :mod:`tracepack.codegen.emit_fbs_python`.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Callable, Sequence
from operator import add, sub
from typing import Any, Final

from tracepack.errors import ContainerError, UsageError

__all__ = [
    "LITTLE",
    "SIZES",
    "Bad",
    "CheckedReader",
    "Layout",
    "Reader",
    "TableSpec",
    "Writer",
    "bad",
    "need",
]

#: Whether memoryview casts read FlatBuffers' little-endian data directly.
LITTLE: Final = sys.byteorder == "little"

#: Byte size of each slot kind: struct codes, plus ``O`` for an offset (uoffset_t).
SIZES: Final[dict[str, int]] = {
    "?": 1,
    "B": 1,
    "b": 1,
    "H": 2,
    "h": 2,
    "I": 4,
    "i": 4,
    "O": 4,
    "f": 4,
    "Q": 8,
    "q": 8,
    "d": 8,
}
_STRUCT_CODE: Final = {k: ("I" if k == "O" else k) for k in SIZES}
# array typecodes with the FlatBuffers sizes (checked below; "L"/"l" vary by platform, so unused).
_ARRAY_CODE: Final = {k: k for k in "BbHhIiQqfd"}
_ARRAY_OK: Final = all(array(c).itemsize == SIZES[k] for k, c in _ARRAY_CODE.items())
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U16x2 = struct.Struct("<HH")
_ZEROS: Final = tuple(bytes(n) for n in range(16))
#: How many table positions a reader remembers the layout of (one per vtable when vtables are shared).
_POSITIONS: Final = 4096


class Bad(Exception):
    """A malformed buffer; ``path`` collects the place, innermost step first."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path: list[str] = []

    def where(self) -> str:
        return "$" + "".join(reversed(self.path))


def _describe(e: BaseException) -> str:
    if isinstance(e, struct.error):
        return f"data out of bounds ({e})"
    if isinstance(e, UnicodeDecodeError):
        return f"string is not valid UTF-8 ({e.reason} at byte {e.start})"
    if isinstance(e, MemoryError):
        return "too large to decode"
    return f"malformed data ({type(e).__name__}: {e})"


def bad(e: BaseException, step: str) -> Bad:
    """``e`` as :class:`Bad` with ``step`` (``.field`` or ``[i]``) added to its place.

    A :class:`~tracepack.errors.ContainerError` or :class:`~tracepack.errors.UsageError` is raised
    as it is: it comes from under the reader (:class:`CheckedReader`: a block of the file that does
    not match its checksum, a file that shrank, a closed document), not from the buffer's shape."""
    if isinstance(e, (ContainerError, UsageError)):
        raise e
    if not isinstance(e, Bad):
        e = Bad(_describe(e))
    if step:
        e.path.append(step)
    return e


def need(pos: int) -> int:
    """``pos`` of a required field; absent (0) is an error."""
    if not pos:
        raise Bad("required field is missing")
    return pos


# ---------------------------------------------------------------------------------------------
# Table specs and layouts
# ---------------------------------------------------------------------------------------------


class _Shape:
    """How a table with a given set of present slots is written: one compiled function."""

    __slots__ = ("size", "vtable", "write", "write_own")

    def __init__(self, kinds: str, mask: int) -> None:
        present = [i for i in range(len(kinds)) if mask >> i & 1]
        order = sorted(present, key=lambda i: -SIZES[kinds[i]])
        fmt = "<i"
        k = 4
        align = 4
        placed: list[tuple[int, int]] = []
        for i in order:
            size = SIZES[kinds[i]]
            if k % size:
                fmt += f"{-k % size}x"
                k += -k % size
            placed.append((i, k))
            fmt += _STRUCT_CODE[kinds[i]]
            k += size
            align = max(align, size)
        self.size = k
        entries = [0] * (max(present) + 1 if present else 0)
        for i, at in placed:
            entries[i] = at
        self.vtable = vt = struct.pack(f"<HH{len(entries)}H", 4 + 2 * len(entries), k, *entries)
        # Straight-line code for this shape: no loops, no lookups but the vtable cache.
        args = "".join(f", at - {at} - values[{i}]" if kinds[i] == "O" else f", values[{i}]" for i, at in placed)
        src = f"""def write(w, values):
    head = w.head
    size = len(w.buf) - head
    pad = -(size + {k}) % {align}
    at = size + pad + {k}
    if head < pad + {k + len(vt)}:
        w._grow(pad + {k + len(vt)})
        head = w.head
    head -= pad + {k}
    old = w.vtables.get(VT)
    if old is None:
        pack(w.buf, head, {len(vt)}{args})
        head -= {len(vt)}
        w.buf[head : head + {len(vt)}] = VT
        w.vtables[VT] = at + {len(vt)}
    else:
        pack(w.buf, head, old - at{args})
    w.head = head
    return at
"""
        # The same with the table's own vtable right before it: both in one pack (soffset = vtable size).
        words = ", ".join(map(str, struct.unpack(f"<{len(vt) // 2}H", vt)))
        src_own = f"""def write_own(w, values):
    head = w.head
    size = len(w.buf) - head
    pad = -(size + {k}) % {align}
    at = size + pad + {k}
    if head < pad + {k + len(vt)}:
        w._grow(pad + {k + len(vt)})
        head = w.head
    head -= pad + {k + len(vt)}
    pack_own(w.buf, head, {words}, {len(vt)}{args})
    w.head = head
    return at
"""
        scope: dict[str, Any] = {
            "VT": vt,
            "pack": struct.Struct(fmt).pack_into,
            "pack_own": struct.Struct(f"<{len(vt) // 2}H{fmt[1:]}").pack_into,
        }
        exec(compile(src, f"<tracepack table shape {mask:#x}>", "exec"), scope)
        exec(compile(src_own, f"<tracepack table shape {mask:#x}, own vtable>", "exec"), scope)
        self.write: Callable[[Writer, tuple[Any, ...]], int] = scope["write"]
        self.write_own: Callable[[Writer, tuple[Any, ...]], int] = scope["write_own"]


class Layout:
    """How a table with a given vtable is read: all inline fields with one ``unpack_from``."""

    __slots__ = ("parts", "read", "size", "spec")

    def __init__(self, spec: TableSpec, vtable: bytes, *, compiled: bool = True) -> None:
        size = _U16x2.unpack_from(vtable, 0)[1]
        n = (len(vtable) - 4) // 2
        entries = struct.unpack_from(f"<{n}H", vtable, 4)
        fields: list[tuple[int, int]] = []  # (offset in table, slot)
        for slot, kind in enumerate(spec.kinds):
            at = entries[slot] if slot < n else 0
            if at:
                if at + SIZES[kind] > size:
                    raise Bad(
                        f"field `{spec.names[slot]}` of {spec.name} at offset {at} overruns the table ({size} bytes)"
                    )
                fields.append((at, slot))
        fields.sort()
        self.size = size
        self.spec = spec
        # One struct over every present field, in offset order, when they do not overlap.
        fmt = "<"
        pos = 0
        for at, slot in fields:
            if at < pos:
                fmt = ""
                break
            if at > pos:
                fmt += f"{at - pos}x"
            fmt += _STRUCT_CODE[spec.kinds[slot]]
            pos = at + SIZES[spec.kinds[slot]]
        self.parts: tuple[tuple[int, struct.Struct], ...] = tuple(
            (at, struct.Struct("<" + _STRUCT_CODE[spec.kinds[slot]])) for at, slot in fields
        )
        unpack: Callable[[Any, int], tuple[Any, ...]] = struct.Struct(fmt).unpack_from if fmt else self._overlapping
        # Straight-line code for this vtable: one unpack, one list of every slot in slot order
        # (offsets made absolute, absent slots at their defaults).
        where = {slot: j for j, (_, slot) in enumerate(fields)}
        at_of = {slot: at for at, slot in fields}
        items = []
        for slot, kind in enumerate(spec.kinds):
            if slot not in where:
                items.append(f"D[{slot}]")
            elif kind == "O":
                items.append(f"pos + {at_of[slot]} + v{where[slot]}")
            else:
                items.append(f"v{where[slot]}")
        self.read: Callable[[Any, int], list[Any]]
        if not compiled:  # the same, interpreted: for vtables past the few a legitimate buffer has
            defaults = spec.defaults
            plan = [(slot, j, at_of[slot] if spec.kinds[slot] == "O" else None) for slot, j in where.items()]

            def read(buf: Any, pos: int) -> list[Any]:
                raw = unpack(buf, pos)
                out = list(defaults)
                for slot, j, at in plan:
                    out[slot] = raw[j] if at is None else pos + at + raw[j]
                return out

            self.read = read
            return
        head = f"    {''.join(f'v{j}, ' for j in range(len(fields)))}= unpack(buf, pos)\n" if fields else ""
        src = f"def read(buf, pos):\n{head}    return [{', '.join(items)}]\n"
        scope: dict[str, Any] = {"D": spec.defaults, "unpack": unpack}
        exec(compile(src, f"<tracepack {spec.name} layout>", "exec"), scope)
        self.read = scope["read"]

    def _overlapping(self, buf: Any, pos: int) -> tuple[Any, ...]:
        return tuple(s.unpack_from(buf, pos + at)[0] for at, s in self.parts)


class TableSpec:
    """A table type: one kind per FlatBuffers slot (struct code, or ``O`` for an offset)."""

    __slots__ = ("_layouts", "defaults", "index", "kinds", "name", "names", "shapes", "slots")
    _count = 0

    def __init__(self, name: str, kinds: str, defaults: tuple[Any, ...], names: tuple[str, ...]) -> None:
        assert len(kinds) == len(defaults) == len(names)
        self.name = name
        self.kinds = kinds
        self.defaults = defaults
        self.names = names
        #: Slot of each field name (a union's ``<name>_type`` slot included).
        self.slots = {n: i for i, n in enumerate(names)}
        self.shapes: dict[int, _Shape] = {}
        self._layouts: dict[bytes, Layout] = {}
        #: A small number unique to this spec (readers key their layout caches with it).
        self.index = TableSpec._count % 4096
        TableSpec._count += 1

    def shape(self, mask: int) -> _Shape:
        sh = self.shapes.get(mask)
        if sh is None:
            sh = self.shapes[mask] = _Shape(self.kinds, mask)
        return sh

    def layout(self, vtable: bytes) -> Layout:
        lay = self._layouts.get(vtable)
        if lay is None:
            # A legitimate buffer has a few vtables per table type; a hostile one may have one per
            # table: past 64, layouts are interpreted (no compile) and not kept.
            if len(self._layouts) >= 64:
                return Layout(self, vtable, compiled=False)
            lay = self._layouts[vtable] = Layout(self, vtable)
        return lay

    def __repr__(self) -> str:
        return f"<TableSpec {self.name}>"


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


class Writer:
    """Builds one FlatBuffer back to front in a bytearray (the data lives at ``buf[head:]``).

    Every write returns the object's offset from the end of the buffer, which stays valid as the
    buffer grows. Tables whose slots are all integers (``ArgTensor``, ``ArgInt``...) are written
    once per distinct value and shared, as FlatBuffers allows. Vtables are shared by content, or,
    with ``share_vtables=False``, each table gets its own vtable right before it: more bytes, but
    every table then starts with the same few bytes as its siblings (its vtable, and an ``soffset``
    that is the vtable's size), which zstd stores almost for free, where a shared vtable's
    ``soffset`` is a different number in every table (schema 1.2 on: a third less compressed).
    """

    __slots__ = ("buf", "head", "leaves", "vtables")

    def __init__(self, capacity: int = 1 << 16, *, share_vtables: bool = True) -> None:
        self.buf = bytearray(capacity)
        self.head = capacity
        self.vtables: dict[bytes, int] | None = {} if share_vtables else None
        self.leaves: dict[tuple[Any, ...], int] = {}

    @property
    def size(self) -> int:
        return len(self.buf) - self.head

    def _grow(self, need: int) -> None:
        old = self.buf
        used = len(old) - self.head
        cap = max(2 * len(old), used + need + 1024)
        buf = bytearray(cap)
        buf[cap - used :] = memoryview(old)[self.head :]
        self.buf = buf
        self.head = cap - used

    def table(self, spec: TableSpec, mask: int, values: tuple[Any, ...]) -> int:
        """Write a table; ``values`` has one entry per slot, objects as their offsets from the end."""
        shape = spec.shapes.get(mask) or spec.shape(mask)
        return (shape.write if self.vtables is not None else shape.write_own)(self, values)

    def leaf(self, spec: TableSpec, mask: int, values: tuple[Any, ...]) -> int:
        """A table of integer slots only: written once per distinct content, then shared."""
        key = (spec, mask, values)
        at = self.leaves.get(key)
        if at is None:
            at = self.leaves[key] = self.table(spec, mask, values)
        return at

    def _vector(self, data: Any, nbytes: int, count: int, align: int) -> int:
        """Write ``[count][data]`` with ``data`` (any bytes-like of ``nbytes``) aligned to ``align`` (>= 4)."""
        head = self.head
        size = len(self.buf) - head
        pad = -(size + nbytes) % align
        total = pad + nbytes + 4
        if head < total:
            self._grow(total)
            head = self.head
        head -= pad + nbytes
        self.buf[head : head + nbytes] = data
        head -= 4
        _U32.pack_into(self.buf, head, count)
        self.head = head
        return size + total

    def scalars(self, kind: str, values: Sequence[Any]) -> int:
        """A vector of numbers (``kind`` a struct code), copied in one C call."""
        n = len(values)
        if kind == "?":
            return self._vector(bytes(map(bool, values)), n, n, 4)
        size = SIZES[kind]
        if _ARRAY_OK:
            a = array(_ARRAY_CODE[kind], values)
            if not LITTLE:
                a.byteswap()
            return self._vector(a, n * size, n, 8 if size == 8 else 4)
        data = struct.pack(f"<{n}{kind}", *values)  # pragma: no cover
        return self._vector(data, n * size, n, 8 if size == 8 else 4)  # pragma: no cover

    def bytes_(self, value: bytes) -> int:
        return self._vector(value, len(value), len(value), 4)

    def string(self, value: str) -> int:
        b = value.encode("utf-8") + b"\0"
        return self._vector(b, len(b), len(b) - 1, 4)

    def strings(self, values: Sequence[str]) -> int:
        """A vector of strings (each string written once, in order)."""
        # One bytes object for all of them, laid out in index order, then one copy into the buffer.
        size = self.size
        pieces = []
        ends = []
        pack = _U32.pack
        zeros = _ZEROS
        total = 0
        for s in reversed(values):
            b = s.encode("utf-8")
            n = len(b)
            pad = -(size + total + n + 5) & 3
            pieces.append(pack(n) + b + zeros[pad + 1])
            total += n + pad + 5
            ends.append(size + total)
        pieces.reverse()
        ends.reverse()
        data = b"".join(pieces)
        if self.head < len(data):
            self._grow(len(data))
        self.head -= len(data)
        self.buf[self.head : self.head + len(data)] = data
        return self.offsets(ends)

    def offsets(self, targets: Sequence[int]) -> int:
        """A vector of offsets to objects already written (tables, strings, vectors)."""
        n = len(targets)
        size = self.size
        pad = -size % 4
        first = size + pad + 4 * n  # offset-from-end of element 0
        rel = list(map(sub, range(first, first - 4 * n, -4), targets))
        if _ARRAY_OK:
            a = array("I", rel)
            if not LITTLE:
                a.byteswap()
            return self._vector(a, 4 * n, n, 4)
        return self._vector(struct.pack(f"<{n}I", *rel), 4 * n, n, 4)  # pragma: no cover

    def finish(self, root: int, identifier: bytes) -> bytes:
        """The finished buffer: root offset, file identifier, everything written (8-byte aligned)."""
        size = self.size
        pad = -(size + 8) % 8
        if self.head < pad + 8:
            self._grow(pad + 8)
        head = self.head - pad - 8
        total = size + pad + 8
        _U32.pack_into(self.buf, head, total - root)
        self.buf[head + 4 : head + 8] = identifier
        data = bytes(memoryview(self.buf)[head:])
        self.buf = bytearray()
        self.head = 0
        return data


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------


class Reader:
    """Checked access to a FlatBuffer. ``budget`` caps decoded elements (tables, items, strings)."""

    __slots__ = ("budget", "layouts", "mv", "n")

    def __init__(self, data: bytes | bytearray | memoryview, *, budget: int | None = None) -> None:
        mv = memoryview(data)
        if mv.format != "B" or mv.ndim != 1:
            mv = mv.cast("B")
        self.mv = mv
        self.n = len(mv)
        # Every element a legitimate buffer decodes is backed by at least one byte of its own;
        # shared objects (a DAG) could multiply that without bound, so the budget stops them.
        self.budget = 2 * self.n + 1024 if budget is None else budget
        self.layouts: dict[int, Layout] = {}

    def release(self) -> None:
        self.mv.release()

    def root(self, identifier: bytes) -> int:
        """Position of the root table; checks the file identifier."""
        if self.n < 8:
            raise Bad(f"{self.n} bytes are too few for a FlatBuffer")
        got = bytes(self.mv[4:8])
        if identifier and got != identifier:
            raise Bad(f"file identifier {got!r} is not {identifier!r}: not a tracepack FlatBuffer")
        return int(_U32.unpack_from(self.mv, 0)[0])

    def u32(self, pos: int) -> int:
        if not 0 <= pos <= self.n - 4:
            raise Bad(f"offset at byte {pos} is outside the buffer ({self.n} bytes)")
        return int(_U32.unpack_from(self.mv, pos)[0])

    def fields(self, pos: int, spec: TableSpec) -> list[Any]:
        """Every slot of the table at ``pos``: scalars (defaults when absent), objects as positions (0: absent)."""
        n = self.n
        mv = self.mv
        if not 0 <= pos <= n - 4:
            raise Bad(f"{spec.name} table at byte {pos} is outside the buffer ({n} bytes)")
        soffset = _I32.unpack_from(mv, pos)[0]
        vt = pos - soffset
        if 4 <= soffset <= 256 and vt >= 0:
            # The vtable right before its table (what Writer(share_vtables=False) writes, one vtable per
            # table, schema 1.2 on) is the bytes between them: equal to a vtable this spec has a layout
            # of (made from a vtable already checked), it is one, as a vtable starts with its own size.
            lay = spec._layouts.get(mv[vt:pos].tobytes())
            if lay is None:
                lay = self._layout(spec, vt, pos)
        else:
            key = vt * 4096 + spec.index
            lay = self.layouts.get(key)
            if lay is None or lay.spec is not spec:
                lay = self._layout(spec, vt, pos)
                if len(self.layouts) < _POSITIONS:  # bounded: a hostile buffer may have a vtable per table
                    self.layouts[key] = lay
        if pos + lay.size > n:
            raise Bad(f"{spec.name} table at byte {pos} ({lay.size} bytes) overruns the buffer ({n} bytes)")
        return lay.read(mv, pos)

    def _layout(self, spec: TableSpec, vt: int, pos: int) -> Layout:
        n = self.n
        if not 0 <= vt <= n - 4:
            raise Bad(f"vtable of the {spec.name} table at byte {pos} is outside the buffer (byte {vt})")
        vsize, tsize = _U16x2.unpack_from(self.mv, vt)
        if vsize < 4 or vsize % 2 or vt + vsize > n or tsize < 4:
            raise Bad(f"vtable of the {spec.name} table at byte {pos} is malformed (size {vsize}, table {tsize})")
        return spec.layout(bytes(self.mv[vt : vt + vsize]))

    def vector(self, pos: int, elem: int) -> tuple[int, int]:
        """``(first element position, count)`` of the vector at ``pos``, all in bounds."""
        count = self.u32(pos)
        end = pos + 4 + count * elem
        if end > self.n:
            raise Bad(f"vector of {count} elements at byte {pos} overruns the buffer ({self.n} bytes)")
        self.budget -= count
        if self.budget < 0:
            raise Bad("the buffer decodes to more elements than its size allows (shared objects?)")
        return pos + 4, count

    def scalars(self, pos: int, kind: str) -> list[Any]:
        """A vector of numbers as a list (``kind`` a struct code)."""
        size = SIZES[kind]
        start, count = self.vector(pos, size)
        if kind == "?":
            return list(map(bool, self.mv[start : start + count]))
        if LITTLE:
            values: list[Any] = self.mv[start : start + count * size].cast(kind).tolist()  # type: ignore[call-overload]
            return values
        return list(struct.unpack_from(f"<{count}{kind}", self.mv, start))  # pragma: no cover

    def tables(self, pos: int) -> list[int]:
        """Positions of the objects a vector of offsets points to."""
        start, count = self.vector(pos, 4)
        end = start + 4 * count
        if LITTLE:
            rel = self.mv[start:end].cast("I").tolist()
        else:  # pragma: no cover
            rel = list(struct.unpack_from(f"<{count}I", self.mv, start))
        return list(map(add, rel, range(start, end, 4)))

    def string(self, pos: int) -> str:
        size = self.u32(pos)
        end = pos + 4 + size
        if end >= self.n or self.mv[end]:  # FlatBuffers strings end in a NUL (spec §5.2), as its Verifier checks
            if end >= self.n:
                raise Bad(f"string of {size} bytes at byte {pos} overruns the buffer ({self.n} bytes)")
            raise Bad(f"string of {size} bytes at byte {pos} has no NUL after it")
        return str(self.mv[pos + 4 : end], "utf-8")

    def bytes_(self, pos: int) -> bytes:
        start, count = self.vector(pos, 1)
        return bytes(self.mv[start : start + count])

    def strings(self, pos: int) -> list[str]:
        """A vector of strings as a list."""
        out = []
        mv = self.mv
        n = self.n
        unpack = _U32.unpack_from
        for i, p in enumerate(self.tables(pos)):
            if p > n - 4:
                raise bad(Bad(f"string at byte {p} is outside the buffer ({n} bytes)"), f"[{i}]")
            end = p + 4 + unpack(mv, p)[0]
            if end >= n:
                raise bad(Bad(f"string at byte {p} overruns the buffer ({n} bytes)"), f"[{i}]")
            if mv[end]:
                raise bad(Bad(f"string at byte {p} has no NUL after it"), f"[{i}]")
            try:
                out.append(str(mv[p + 4 : end], "utf-8"))
            except UnicodeDecodeError as e:
                raise bad(e, f"[{i}]") from None
        return out


class CheckedReader(Reader):
    """A :class:`Reader` that asks ``need(start, end)`` for every byte range before it reads it.

    :mod:`tracepack.lazy` reads a file with block checksums through it: ``need`` reads the blocks
    that cover the range from the file and verifies their CRC-32 (:class:`tracepack.io.blocks.BlockFile`),
    so nothing unverified is ever decoded. Each method asks for exactly what the same method of
    :class:`Reader` then reads (ranges outside the buffer are not asked for: :class:`Reader` refuses
    them with its own error), and then lets it read.
    """

    __slots__ = ("need",)

    def __init__(
        self, data: bytes | bytearray | memoryview, need: Callable[[int, int], None], *, budget: int | None = None
    ) -> None:
        super().__init__(data, budget=budget)
        self.need = need

    def _word(self, pos: int) -> int | None:
        """The ``uint32`` at ``pos``, verified first; None when it is outside the buffer."""
        if not 0 <= pos <= self.n - 4:
            return None
        self.need(pos, pos + 4)
        return int(_U32.unpack_from(self.mv, pos)[0])

    def _region(self, pos: int, elem: int) -> None:
        """Verify the vector at ``pos`` (its length and elements) when it is within the buffer."""
        count = self._word(pos)
        if count is not None and pos + 4 + count * elem <= self.n:
            self.need(pos, pos + 4 + count * elem)

    def root(self, identifier: bytes) -> int:
        self.need(0, min(8, self.n))
        return super().root(identifier)

    def u32(self, pos: int) -> int:
        word = self._word(pos)
        return super().u32(pos) if word is None else word  # outside the buffer: Reader.u32 raises

    def fields(self, pos: int, spec: TableSpec) -> list[Any]:
        n = self.n
        if 0 <= pos <= n - 4:
            need, mv = self.need, self.mv
            need(pos, pos + 4)
            soffset = _I32.unpack_from(mv, pos)[0]
            vt = pos - soffset
            if 4 <= soffset <= 256 and vt >= 0:
                need(vt, pos)  # the vtable right before its table, compared whole
            if 0 <= vt <= n - 4:
                need(vt, vt + 4)
                vsize, tsize = _U16x2.unpack_from(mv, vt)
                need(vt, min(n, vt + vsize))
                need(pos, min(n, pos + tsize))  # a layout's size is its vtable's table size
        return super().fields(pos, spec)

    def vector(self, pos: int, elem: int) -> tuple[int, int]:
        count = self._word(pos)
        if count is None:
            return super().vector(pos, elem)  # raises
        # Reader.vector without reading the length again.
        if pos + 4 + count * elem > self.n:
            raise Bad(f"vector of {count} elements at byte {pos} overruns the buffer ({self.n} bytes)")
        self.budget -= count
        if self.budget < 0:
            raise Bad("the buffer decodes to more elements than its size allows (shared objects?)")
        return pos + 4, count

    def scalars(self, pos: int, kind: str) -> list[Any]:
        self._region(pos, SIZES[kind])
        return super().scalars(pos, kind)

    def tables(self, pos: int) -> list[int]:
        self._region(pos, 4)
        return super().tables(pos)

    def string(self, pos: int) -> str:
        size = self._word(pos)
        if size is not None and pos + 4 + size <= self.n:
            self.need(pos + 4, pos + 4 + size)
        return super().string(pos)

    def bytes_(self, pos: int) -> bytes:
        self._region(pos, 1)
        return super().bytes_(pos)

    def strings(self, pos: int) -> list[str]:
        out = []
        n = self.n
        for i, p in enumerate(self.tables(pos)):
            size = self._word(p)
            if size is None:
                raise bad(Bad(f"string at byte {p} is outside the buffer ({n} bytes)"), f"[{i}]")
            end = p + 4 + size
            if end > n:
                raise bad(Bad(f"string at byte {p} overruns the buffer ({n} bytes)"), f"[{i}]")
            self.need(p + 4, end)
            try:
                out.append(str(self.mv[p + 4 : end], "utf-8"))
            except UnicodeDecodeError as e:
                raise bad(e, f"[{i}]") from None
        return out
