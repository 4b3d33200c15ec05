"""A tiny protocol-2 pickle writer that emits exactly what TorchScript's pickler emits.

Writing is safe (nothing is executed), but :mod:`pickle` cannot write the one
global TorchScript needs (``torch.jit._pickle build_intlist``) without torch
installed, and its memo choices differ from torch's. This writer follows the
rules of torch's C++ pickler, so that a ``debug_pkl`` read by
:mod:`tracepack.torch.torchscript.debug_pkl` and written back is byte-identical:

* ``PROTO 2`` first, ``STOP`` last, no ``FRAME``;
* ints: ``BININT1`` (0..255), ``BININT2`` (..65535), ``BININT`` (int32),
  else ``LONG1`` with 8 bytes (values must fit in int64);
* ``NONE``, ``NEWTRUE``/``NEWFALSE``;
* strings: ``BINUNICODE`` then ``BINPUT``; a string equal to an earlier one is
  a ``BINGET`` (torch memoizes strings by value);
* tuples: ``EMPTY_TUPLE``, ``TUPLE1``-``TUPLE3``, else ``MARK ... TUPLE``;
  a tuple is memoized (``BINPUT`` after it, ``BINGET`` for later uses of the
  *same object*) only if its ``id`` is in ``memoize`` (torch memoizes shared
  tuples by pointer);
* :class:`IntList` values: ``GLOBAL 'torch.jit._pickle build_intlist'``
  (memoized once) ``MARK EMPTY_LIST MARK ints... APPENDS TUPLE REDUCE``;
* memo ids count up from 0; ids from 256 on use ``LONG_BINPUT``/``LONG_BINGET``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import TypeAlias

from tracepack.errors import EncodeError

__all__ = ["INTLIST_GLOBAL", "IntList", "Writable", "write_pickle"]

INTLIST_GLOBAL = ("torch.jit._pickle", "build_intlist")
"""The global TorchScript wraps every ``List[int]`` in."""

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_PACK_I4 = struct.Struct("<i").pack
_PACK_U2 = struct.Struct("<H").pack
_PACK_U4 = struct.Struct("<I").pack


class IntList:
    """A TorchScript ``List[int]``: written as ``build_intlist([...])``."""

    __slots__ = ("values",)

    def __init__(self, values: Iterable[int]) -> None:
        self.values = tuple(values)

    def __repr__(self) -> str:
        return f"IntList({list(self.values)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IntList) and other.values == self.values

    def __hash__(self) -> int:
        return hash(("IntList", self.values))


Writable: TypeAlias = "bool | int | str | IntList | tuple[Writable, ...] | None"


def write_pickle(value: Writable, *, memoize: Iterable[int] = ()) -> bytes:
    """Pickle ``value`` the way TorchScript would (see the module docstring).

    ``memoize`` holds the ``id()`` of the tuples to memoize. Raises
    :class:`~tracepack.errors.EncodeError` for values TorchScript cannot hold
    (ints outside int64, strings that are not valid Unicode, other types).
    """
    writer = _Writer(set(memoize))
    writer.out += b"\x80\x02"
    writer.write(value)
    writer.out += b"."
    return bytes(writer.out)


class _Writer:
    __slots__ = ("global_id", "memo_next", "memoize", "out", "strings", "tuples")

    def __init__(self, memoize: set[int]) -> None:
        self.out = bytearray()
        self.memoize = memoize
        self.memo_next = 0
        self.strings: dict[str, int] = {}
        self.tuples: dict[int, int] = {}
        self.global_id: int | None = None

    def put(self) -> int:
        index = self.memo_next
        self.memo_next += 1
        if index < 256:
            self.out += b"q" + bytes((index,))
        else:
            self.out += b"r" + _PACK_U4(index)
        return index

    def get(self, index: int) -> None:
        if index < 256:
            self.out += b"h" + bytes((index,))
        else:
            self.out += b"j" + _PACK_U4(index)

    def write_int(self, n: int) -> None:
        out = self.out
        if 0 <= n <= 0xFF:
            out += b"K" + bytes((n,))
        elif 0 <= n <= 0xFFFF:
            out += b"M" + _PACK_U2(n)
        elif -(1 << 31) <= n < (1 << 31):
            out += b"J" + _PACK_I4(n)
        elif _INT64_MIN <= n <= _INT64_MAX:
            out += b"\x8a\x08" + n.to_bytes(8, "little", signed=True)
        else:
            raise EncodeError(f"integer {n} does not fit in int64", where="pickle writer")

    def write_str(self, text: str) -> None:
        index = self.strings.get(text)
        if index is not None:
            self.get(index)
            return
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise EncodeError(f"string is not valid Unicode: {exc.reason}", where="pickle writer") from None
        self.out += b"X" + _PACK_U4(len(raw)) + raw
        self.strings[text] = self.put()

    def write_intlist(self, values: tuple[int, ...]) -> None:
        if self.global_id is None:
            module, name = INTLIST_GLOBAL
            self.out += b"c" + module.encode() + b"\n" + name.encode() + b"\n"
            self.global_id = self.put()
        else:
            self.get(self.global_id)
        self.out += b"(]("
        for n in values:
            if type(n) is not int:
                raise EncodeError(f"IntList item of type {type(n).__name__}", where="pickle writer")
            self.write_int(n)
        self.out += b"etR"

    def write(self, value: Writable) -> None:
        # Iterative, so that deep values cannot exhaust the Python stack.
        todo: list[tuple[Writable, int]] = [(value, 0)]
        while todo:
            item, state = todo.pop()
            kind = type(item)
            if kind is tuple:
                items: tuple[Writable, ...] = item  # type: ignore[assignment]
                ident = id(item)
                if state == 0:
                    index = self.tuples.get(ident)
                    if index is not None:
                        self.get(index)
                        continue
                    if len(items) > 3:
                        self.out += b"("
                    todo.append((item, 1))
                    todo.extend((child, 0) for child in reversed(items))
                    continue
                n = len(items)
                self.out += (b")", b"\x85", b"\x86", b"\x87")[n] if n <= 3 else b"t"
                if ident in self.memoize:
                    self.tuples[ident] = self.put()
            elif item is None:
                self.out += b"N"
            elif kind is bool:
                self.out += b"\x88" if item else b"\x89"
            elif kind is int:
                self.write_int(item)  # type: ignore[arg-type]
            elif kind is str:
                self.write_str(item)  # type: ignore[arg-type]
            elif kind is IntList:
                self.write_intlist(item.values)  # type: ignore[union-attr]
            else:
                raise EncodeError(f"cannot pickle a {kind.__name__} for TorchScript", where="pickle writer")
