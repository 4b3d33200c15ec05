"""A data-only pickle reader for the pickles inside TorchScript archives.

``debug_pkl``, ``callstack_debug_map.pkl`` and ``mobile_debug_handles.pkl`` are
Python pickles. Loading them with :mod:`pickle` would let a hostile file import
and call anything, so this module walks the opcode stream itself and builds
plain Python values only: ``None``, ``bool``, ``int``, ``float``, ``str``,
``bytes``, ``tuple``, ``list`` and ``dict``. It never imports or calls anything
the stream names.

What it accepts
    ``PROTO`` (0-5), ``FRAME``, ``STOP``, ``MARK``, ``POP``, ``POP_MARK``;
    ints in every encoding (``INT``, ``BININT``, ``BININT1``, ``BININT2``,
    ``LONG``, ``LONG1``, ``LONG4``, and ``INT 00/01`` for booleans);
    ``NONE``, ``NEWTRUE``, ``NEWFALSE``, ``FLOAT``, ``BINFLOAT``;
    text (``UNICODE``, ``BINUNICODE``, ``SHORT_BINUNICODE``, ``BINUNICODE8``)
    and bytes (``BINBYTES``, ``SHORT_BINBYTES``, ``BINBYTES8``);
    tuples, lists and dicts (``EMPTY_*``, ``TUPLE``/``TUPLE1-3``, ``LIST``,
    ``APPEND(S)``, ``DICT``, ``SETITEM(S)``); the memo (``PUT``, ``BINPUT``,
    ``LONG_BINPUT``, ``MEMOIZE``, ``GET``, ``BINGET``, ``LONG_BINGET``).

What it refuses
    Every opcode that imports, calls or builds objects (``GLOBAL``,
    ``STACK_GLOBAL``, ``REDUCE``, ``BUILD``, ``INST``, ``OBJ``, ``NEWOBJ``,
    ``NEWOBJ_EX``, ``PERSID``, ``BINPERSID``, ``EXT1/2/4``, buffers, sets,
    Python 2 strings, ``DUP``) raises :class:`~tracepack.errors.UnsafePickleError`
    naming the opcode and its byte offset. A malformed or truncated stream
    raises :class:`~tracepack.errors.LegacyFormatError` with the byte offset.

The one exception is opt-in: a caller may pass ``constructors``, a mapping from
a ``(module, name)`` pair to a pure function of ours. ``GLOBAL`` of such a pair
then pushes an inert reference, and ``REDUCE`` of that reference calls *our*
function on the (already data-only) argument tuple. TorchScript needs this for
``torch.jit._pickle build_intlist``, which wraps a typed ``List[int]``; nothing
named in the stream is ever imported.

Object sharing is preserved: a memo get returns the very object that was put,
so text that the writer shared through the memo stays one ``str`` object.
Recursive structures are refused (a list or dict cannot be changed once it has
been fetched from the memo or placed inside another value), so results are
always finite DAGs. Every opcode costs time linear in its own bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeAlias

from tracepack.errors import InputError, LegacyFormatError, UnsafePickleError
from tracepack.io import limits as budget

__all__ = [
    "DEFAULT_LIMITS",
    "Constructor",
    "PickleLimits",
    "PickleValue",
    "opcode_name",
    "read_pickle",
]

PickleValue: TypeAlias = (
    bool
    | int
    | float
    | str
    | bytes
    | tuple["PickleValue", ...]
    | list["PickleValue"]
    | dict["PickleValue", "PickleValue"]
    | None
)
"""A value this reader can return: plain data only."""

Constructor: TypeAlias = Callable[[tuple[PickleValue, ...]], PickleValue]
"""A pure function of ours standing in for an allowed ``GLOBAL``; it gets the
``REDUCE`` argument tuple and returns data, or raises ``ValueError``."""


@dataclass(frozen=True, slots=True)
class PickleLimits:
    """Bounds that keep hostile input cheap. All are checked as the stream is read."""

    max_input_bytes: int = 256 * 1024 * 1024
    """Refuse inputs larger than this outright."""
    max_depth: int = 500
    """Deepest nesting of tuples/lists/dicts in the result (or the ``max_depth`` budget of
    :mod:`tracepack.io.limits`, where that is lower)."""
    max_memo: int = 1_000_000
    """Most distinct memo slots."""
    max_int_bytes: int = 1024
    """Largest integer, in bytes of two's complement (about 2,466 decimal digits)."""
    max_line_bytes: int = 1 << 20
    """Longest text line for protocol-0 opcodes (``INT``, ``UNICODE``, ``PUT`` ...)."""
    max_objects: int | None = None
    """Most objects the result expands to, every memo reuse counted again with all it holds (what a
    caller walking the result visits: 32 KB of memo-shared tuples can otherwise stand for billions).
    ``None``: the ``max_pickle_objects`` budget of :mod:`tracepack.io.limits`."""


DEFAULT_LIMITS = PickleLimits()

# -- opcode table -------------------------------------------------------------

_OPCODE_NAMES: dict[int, str] = {
    ord("("): "MARK",
    ord("."): "STOP",
    ord("0"): "POP",
    ord("1"): "POP_MARK",
    ord("2"): "DUP",
    ord("F"): "FLOAT",
    ord("I"): "INT",
    ord("J"): "BININT",
    ord("K"): "BININT1",
    ord("L"): "LONG",
    ord("M"): "BININT2",
    ord("N"): "NONE",
    ord("P"): "PERSID",
    ord("Q"): "BINPERSID",
    ord("R"): "REDUCE",
    ord("S"): "STRING",
    ord("T"): "BINSTRING",
    ord("U"): "SHORT_BINSTRING",
    ord("V"): "UNICODE",
    ord("X"): "BINUNICODE",
    ord("a"): "APPEND",
    ord("b"): "BUILD",
    ord("c"): "GLOBAL",
    ord("d"): "DICT",
    ord("}"): "EMPTY_DICT",
    ord("e"): "APPENDS",
    ord("g"): "GET",
    ord("h"): "BINGET",
    ord("i"): "INST",
    ord("j"): "LONG_BINGET",
    ord("l"): "LIST",
    ord("]"): "EMPTY_LIST",
    ord("o"): "OBJ",
    ord("p"): "PUT",
    ord("q"): "BINPUT",
    ord("r"): "LONG_BINPUT",
    ord("s"): "SETITEM",
    ord("t"): "TUPLE",
    ord(")"): "EMPTY_TUPLE",
    ord("u"): "SETITEMS",
    ord("G"): "BINFLOAT",
    0x80: "PROTO",
    0x81: "NEWOBJ",
    0x82: "EXT1",
    0x83: "EXT2",
    0x84: "EXT4",
    0x85: "TUPLE1",
    0x86: "TUPLE2",
    0x87: "TUPLE3",
    0x88: "NEWTRUE",
    0x89: "NEWFALSE",
    0x8A: "LONG1",
    0x8B: "LONG4",
    ord("B"): "BINBYTES",
    ord("C"): "SHORT_BINBYTES",
    0x8C: "SHORT_BINUNICODE",
    0x8D: "BINUNICODE8",
    0x8E: "BINBYTES8",
    0x8F: "EMPTY_SET",
    0x90: "ADDITEMS",
    0x91: "FROZENSET",
    0x92: "NEWOBJ_EX",
    0x93: "STACK_GLOBAL",
    0x94: "MEMOIZE",
    0x95: "FRAME",
    0x96: "BYTEARRAY8",
    0x97: "NEXT_BUFFER",
    0x98: "READONLY_BUFFER",
}


def opcode_name(code: int) -> str:
    """The pickle opcode's name for byte ``code``, or ``0xNN`` if there is none."""
    return _OPCODE_NAMES.get(code, f"0x{code:02x}")


_HIGHEST_PROTOCOL = 5
_MAX_FLOAT_LINE = 64
_MAX_GLOBAL_LINE = 1024

_UNPACK_I4 = struct.Struct("<i").unpack_from
_UNPACK_U2 = struct.Struct("<H").unpack_from
_UNPACK_U4 = struct.Struct("<I").unpack_from
_UNPACK_U8 = struct.Struct("<Q").unpack_from
_UNPACK_F8 = struct.Struct(">d").unpack_from

# Dict keys are restricted to types whose hashing an input cannot steer into
# collisions: str and bytes use the (randomised) SipHash; ints hash to
# themselves below 2**61 - 1, so distinct small ints never all collide.
_SAFE_INT_KEY = (1 << 61) - 2


class _GlobalRef:
    """An inert stand-in for an allowed ``GLOBAL``: only ``REDUCE`` may consume it."""

    __slots__ = ("build", "qualname")

    def __init__(self, qualname: str, build: Constructor) -> None:
        self.qualname = qualname
        self.build = build


_Item: TypeAlias = PickleValue | _GlobalRef


def read_pickle(
    data: bytes | bytearray | memoryview,
    *,
    source: str = "<bytes>",
    limits: PickleLimits = DEFAULT_LIMITS,
    constructors: Mapping[tuple[str, str], Constructor] | None = None,
) -> PickleValue:
    """Decode one pickle from ``data`` into plain values, never running pickle code.

    The whole of ``data`` must be the pickle: bytes after ``STOP`` are an error.
    ``source`` names the input in error messages. ``constructors`` allows the
    listed ``(module, name)`` globals to be applied by ``REDUCE`` through our
    own functions (see the module docstring); by default nothing is allowed.
    """
    return _Reader(bytes(data), source, limits, constructors or {}).run()


class _Reader:
    __slots__ = (
        "constructors",
        "data",
        "depth",
        "end",
        "frame_end",
        "frozen",
        "keep",
        "limits",
        "marks",
        "max_depth",
        "max_objects",
        "memo",
        "op",
        "op_pos",
        "pos",
        "sizes",
        "source",
        "stack",
    )

    def __init__(
        self,
        data: bytes,
        source: str,
        limits: PickleLimits,
        constructors: Mapping[tuple[str, str], Constructor],
    ) -> None:
        self.data = data
        self.end = len(data)
        self.source = source
        self.limits = limits
        self.constructors = constructors
        self.pos = 0
        self.op = 0
        self.op_pos = 0
        self.frame_end = 0  # where the current FRAME ends (PEP 3154: no opcode runs past it)
        self.stack: list[_Item] = []
        self.marks: list[int] = []
        self.memo: dict[int, _Item] = {}
        # Nesting depth of every container built so far, by id. ``keep`` holds
        # each container alive so that no id is ever reused while we run.
        self.depth: dict[int, int] = {}
        # Expanded size of every container by id: itself plus all it holds, shared parts counted per use.
        self.sizes: dict[int, int] = {}
        self.max_objects = budget.current().max_pickle_objects if limits.max_objects is None else limits.max_objects
        # The caller's max_depth budget applies where it is lower than the reader's own cap.
        self.max_depth = min(limits.max_depth, budget.current().max_depth)
        self.keep: list[object] = []
        # ids of lists/dicts that can no longer change (shared or nested).
        self.frozen: set[int] = set()

    # -- errors ---------------------------------------------------------------

    def _where(self) -> str:
        return f"at byte {self.op_pos} ({opcode_name(self.op)})"

    def fail(self, problem: str, expected: str | None = None) -> LegacyFormatError:
        return LegacyFormatError(problem, source=self.source, where=self._where(), expected=expected)

    # -- raw input ------------------------------------------------------------

    def take(self, n: int, what: str) -> bytes:
        start = self.pos
        stop = start + n
        if stop > self.end:
            raise self.fail(
                f"pickle truncated: {what} needs {n} bytes at byte {start}, only {self.end - start} left",
                expected="a complete pickle",
            )
        self.pos = stop
        return self.data[start:stop]

    def size(self, width: int, what: str) -> int:
        start = self.pos
        if start + width > self.end:
            raise self.fail(f"pickle truncated inside the {what} length", expected="a complete pickle")
        self.pos = start + width
        if width == 1:
            return self.data[start]
        if width == 4:
            return int(_UNPACK_U4(self.data, start)[0])
        return int(_UNPACK_U8(self.data, start)[0])

    def line(self, limit: int, what: str) -> bytes:
        start = self.pos
        stop = min(self.end, start + limit + 1)
        nl = self.data.find(b"\n", start, stop)
        if nl < 0:
            if stop == self.end and stop - start <= limit:
                raise self.fail(
                    f"pickle truncated: {what} has no terminating newline",
                    expected="a complete pickle",
                )
            raise self.fail(f"{what} longer than {limit} bytes")
        self.pos = nl + 1
        return self.data[start:nl]

    # -- stack helpers --------------------------------------------------------

    def fence(self) -> int:
        return self.marks[-1] if self.marks else 0

    def push(self, value: _Item) -> None:
        self.stack.append(value)

    def pop(self) -> _Item:
        if len(self.stack) <= self.fence():
            raise self.fail("stack underflow", expected="a value on the stack")
        return self.stack.pop()

    def top(self) -> _Item:
        if len(self.stack) <= self.fence():
            raise self.fail("stack underflow", expected="a value on the stack")
        return self.stack[-1]

    def pop_n(self, n: int) -> list[_Item]:
        if len(self.stack) - n < self.fence():
            raise self.fail("stack underflow", expected=f"{n} values on the stack")
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    def pop_mark(self) -> list[_Item]:
        if not self.marks:
            raise self.fail("no MARK on the stack", expected="a MARK before this opcode")
        start = self.marks.pop()
        items = self.stack[start:]
        del self.stack[start:]
        return items

    # -- value bookkeeping ----------------------------------------------------

    def adopt(self, items: list[_Item]) -> tuple[int, int]:
        """Check ``items`` may go inside a container; freeze them; return max child depth and total size."""
        deepest = 0
        total = len(items)
        sizes = self.sizes
        for item in items:
            kind = type(item)
            if kind is tuple:
                ident = id(item)
                deepest = max(deepest, self.depth.get(ident, 1))
                total += sizes.get(ident, 1) - 1
            elif kind is list or kind is dict:
                ident = id(item)
                self.frozen.add(ident)
                deepest = max(deepest, self.depth.get(ident, 1))
                total += sizes.get(ident, 1) - 1
            elif kind is _GlobalRef:
                raise self.fail("a GLOBAL reference used as data", expected="REDUCE to apply it")
        return deepest, total

    def too_deep(self) -> LegacyFormatError:
        if self.max_depth < self.limits.max_depth:  # the caller's lowered budget
            return self.fail(
                f"nesting deeper than {self.max_depth}", expected=f"shallower nesting, {budget.hint('max_depth')}"
            )
        return self.fail(f"nesting deeper than {self.max_depth}")

    def _check_size(self, size: int) -> None:
        if size > self.max_objects:
            raise self.fail(
                f"the pickle expands to more than {self.max_objects} objects (memo-shared parts counted per use)",
                expected=f"a smaller pickle, {budget.hint('max_pickle_objects')}",
            )

    def register(
        self,
        value: tuple[PickleValue, ...] | list[PickleValue] | dict[PickleValue, PickleValue],
        child_depth: int,
        child_size: int = 0,
    ) -> None:
        d = child_depth + 1
        if d > self.max_depth:
            raise self.too_deep()
        self._check_size(child_size + 1)
        self.depth[id(value)] = d
        self.sizes[id(value)] = child_size + 1
        self.keep.append(value)

    def grow(
        self, container: list[PickleValue] | dict[PickleValue, PickleValue], child_depth: int, child_size: int = 0
    ) -> None:
        ident = id(container)
        if ident in self.frozen:
            raise self.fail(
                "a list or dict is changed after it was shared or nested (recursive structures are not supported)"
            )
        d = child_depth + 1
        if d > self.max_depth:
            raise self.too_deep()
        if d > self.depth.get(ident, 1):
            self.depth[ident] = d
        size = self.sizes.get(ident, 1) + child_size
        self._check_size(size)
        self.sizes[ident] = size

    def check_key(self, key: _Item) -> PickleValue:
        kind = type(key)
        if kind is str or kind is bytes or key is None or kind is bool:
            return key  # type: ignore[return-value]
        if kind is int and -_SAFE_INT_KEY <= key <= _SAFE_INT_KEY:  # type: ignore[operator]
            return key  # type: ignore[return-value]
        raise self.fail(
            f"dict key of type {kind.__name__} is not supported",
            expected="a str, bytes, bool, None or small int key",
        )

    def set_items(self, target: dict[PickleValue, PickleValue], items: list[_Item]) -> None:
        if len(items) % 2:
            raise self.fail("odd number of items for a dict", expected="key/value pairs")
        self.grow(target, *self.adopt(items))
        for i in range(0, len(items), 2):
            target[self.check_key(items[i])] = items[i + 1]  # type: ignore[assignment]

    def memo_put(self, index: int) -> None:
        if index < 0:
            raise self.fail(f"negative memo index {index}")
        memo = self.memo
        if index not in memo and len(memo) >= self.limits.max_memo:
            raise self.fail(f"more than {self.limits.max_memo} memo entries")
        memo[index] = self.top()

    def memo_get(self, index: int) -> None:
        try:
            value = self.memo[index]
        except KeyError:
            raise self.fail(f"memo index {index} was never set", expected="a GET after its PUT") from None
        kind = type(value)
        if kind is list or kind is dict:
            self.frozen.add(id(value))
        self.push(value)

    def decimal(self, text: bytes, what: str) -> int:
        body = text[1:] if text[:1] == b"-" else text
        if not body or not body.isdigit() or not body.isascii():
            raise self.fail(f"{what} {text[:40]!r} is not a decimal integer")
        if len(body) > self.limits.max_int_bytes * 5 // 2:
            raise self.fail(f"{what} longer than the integer limit")
        return int(text)

    def new_int(self, raw: bytes) -> int:
        if len(raw) > self.limits.max_int_bytes:
            raise self.fail(f"integer of {len(raw)} bytes exceeds the limit")
        return int.from_bytes(raw, "little", signed=True)

    def text(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise self.fail(f"invalid UTF-8 in a string: {exc.reason}") from None

    def refuse(self) -> UnsafePickleError:
        name = opcode_name(self.op)
        return UnsafePickleError(
            f"opcode {name} is not allowed in a data-only pickle",
            source=self.source,
            where=f"at byte {self.op_pos}",
            expected="plain data (ints, strings, tuples, lists, dicts, None)",
        )

    def global_ref(self, module: str, name: str) -> None:
        build = self.constructors.get((module, name))
        if build is None:
            shown = f"{module} {name}"
            if len(shown) > 120:
                shown = shown[:117] + "..."
            raise UnsafePickleError(
                f"opcode {opcode_name(self.op)} imports {shown!r}, which is not allowed in a data-only pickle",
                source=self.source,
                where=f"at byte {self.op_pos}",
                expected="plain data (ints, strings, tuples, lists, dicts, None)",
            )
        self.push(_GlobalRef(f"{module}.{name}", build))

    # -- main loop ------------------------------------------------------------

    def run(self) -> PickleValue:
        if self.end > self.limits.max_input_bytes:
            raise LegacyFormatError(
                f"pickle of {self.end} bytes exceeds the {self.limits.max_input_bytes}-byte limit",
                source=self.source,
            )
        data = self.data
        end = self.end
        handlers = _HANDLERS
        while True:
            if self.pos >= end:
                self.op_pos = self.pos
                raise LegacyFormatError(
                    "pickle truncated: no STOP opcode",
                    source=self.source,
                    where=f"at byte {self.pos}",
                    expected="a complete pickle",
                )
            self.op_pos = self.pos
            op = data[self.pos]
            self.op = op
            self.pos += 1
            if op == 0x2E:  # STOP
                return self.stop()
            handler = handlers.get(op)
            if handler is None:
                if op in _OPCODE_NAMES:
                    raise self.refuse()
                raise LegacyFormatError(
                    f"unknown pickle opcode 0x{op:02x}",
                    source=self.source,
                    where=f"at byte {self.op_pos}",
                    expected="a pickle opcode",
                )
            handler(self)
            if self.op_pos < self.frame_end < self.pos:
                raise self.fail(
                    f"opcode runs past the end of its FRAME (byte {self.frame_end})",
                    expected="every opcode inside its frame",
                )

    def stop(self) -> PickleValue:
        if self.marks:
            raise self.fail("STOP with an unclosed MARK")
        if len(self.stack) != 1:
            raise self.fail(f"STOP with {len(self.stack)} values on the stack", expected="exactly one")
        if self.pos != self.end:
            raise self.fail(f"{self.end - self.pos} trailing bytes after STOP", expected="end of data")
        result = self.stack[0]
        if type(result) is _GlobalRef:
            raise self.fail("the pickle's value is a GLOBAL reference", expected="data")
        return result  # type: ignore[return-value]


# -- opcode handlers ----------------------------------------------------------


def _proto(r: _Reader) -> None:
    version = r.take(1, "PROTO")[0]
    if version > _HIGHEST_PROTOCOL:
        raise r.fail(f"unsupported pickle protocol {version}", expected="0 to 5")


def _frame(r: _Reader) -> None:
    size = r.size(8, "FRAME")
    if r.op_pos < r.frame_end != r.pos:  # inside a frame, the next one starts where it ends
        raise r.fail(f"a FRAME before the current one ends (byte {r.frame_end})", expected="frames one after another")
    if size > r.end - r.pos:
        raise r.fail(
            f"pickle truncated: FRAME of {size} bytes, only {r.end - r.pos} left",
            expected="a complete pickle",
        )
    r.frame_end = r.pos + size


def _mark(r: _Reader) -> None:
    r.marks.append(len(r.stack))


def _pop(r: _Reader) -> None:
    if len(r.stack) > r.fence():
        r.stack.pop()
    elif r.marks:
        r.marks.pop()
    else:
        raise r.fail("stack underflow", expected="a value on the stack")


def _pop_mark(r: _Reader) -> None:
    r.pop_mark()


def _none(r: _Reader) -> None:
    r.push(None)


def _newtrue(r: _Reader) -> None:
    r.push(True)


def _newfalse(r: _Reader) -> None:
    r.push(False)


def _canonical(r: _Reader, text: bytes, what: str) -> bytes:
    """``text`` if it is written as picklers write integers (``0``, or digits without a leading zero,
    after an optional ``-``). Other spellings are refused rather than read one way: readers disagree
    on them (CPython's C unpickler reads INT ``014`` as octal 12 and ``-0`` as False, its Python one
    refuses ``014`` and reads ``-0`` as 0)."""
    body = text[1:] if text[:1] == b"-" else text
    if body[:1] == b"0" and text != b"0":
        raise r.fail(f"{what} {text[:40]!r} has a leading zero", expected="a decimal integer without one")
    return text


def _int(r: _Reader) -> None:
    text = r.line(r.limits.max_line_bytes, "INT")
    if text == b"00":
        r.push(False)
    elif text == b"01":
        r.push(True)
    else:
        r.push(r.decimal(_canonical(r, text, "INT"), "INT"))


def _long(r: _Reader) -> None:
    text = r.line(r.limits.max_line_bytes, "LONG")
    if text.endswith(b"L"):
        text = text[:-1]
    r.push(r.decimal(_canonical(r, text, "LONG"), "LONG"))


def _binint(r: _Reader) -> None:
    r.take(4, "BININT")
    r.push(int(_UNPACK_I4(r.data, r.pos - 4)[0]))


def _binint1(r: _Reader) -> None:
    r.push(r.take(1, "BININT1")[0])


def _binint2(r: _Reader) -> None:
    r.take(2, "BININT2")
    r.push(int(_UNPACK_U2(r.data, r.pos - 2)[0]))


def _long1(r: _Reader) -> None:
    n = r.size(1, "LONG1")
    r.push(r.new_int(r.take(n, "LONG1")))


def _long4(r: _Reader) -> None:
    r.take(4, "LONG4")
    n = int(_UNPACK_I4(r.data, r.pos - 4)[0])
    if n < 0:
        raise r.fail(f"LONG4 with negative length {n}")
    if n > r.limits.max_int_bytes:
        raise r.fail(f"integer of {n} bytes exceeds the limit")
    r.push(r.new_int(r.take(n, "LONG4")))


def _float(r: _Reader) -> None:
    text = r.line(_MAX_FLOAT_LINE, "FLOAT")
    try:
        value = float(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise r.fail(f"FLOAT {text[:40]!r} is not a number") from None
    r.push(value)


def _binfloat(r: _Reader) -> None:
    r.take(8, "BINFLOAT")
    r.push(float(_UNPACK_F8(r.data, r.pos - 8)[0]))


def _unicode(r: _Reader) -> None:
    raw = r.line(r.limits.max_line_bytes, "UNICODE")
    try:
        r.push(raw.decode("raw-unicode-escape"))
    except UnicodeDecodeError as exc:
        raise r.fail(f"invalid UNICODE text: {exc.reason}") from None


def _binunicode(r: _Reader) -> None:
    r.push(r.text(r.take(r.size(4, "BINUNICODE"), "BINUNICODE")))


def _short_binunicode(r: _Reader) -> None:
    r.push(r.text(r.take(r.size(1, "SHORT_BINUNICODE"), "SHORT_BINUNICODE")))


def _binunicode8(r: _Reader) -> None:
    r.push(r.text(r.take(r.size(8, "BINUNICODE8"), "BINUNICODE8")))


def _binbytes(r: _Reader) -> None:
    r.push(r.take(r.size(4, "BINBYTES"), "BINBYTES"))


def _short_binbytes(r: _Reader) -> None:
    r.push(r.take(r.size(1, "SHORT_BINBYTES"), "SHORT_BINBYTES"))


def _binbytes8(r: _Reader) -> None:
    r.push(r.take(r.size(8, "BINBYTES8"), "BINBYTES8"))


def _make_tuple(r: _Reader, items: list[_Item]) -> None:
    value: tuple[PickleValue, ...] = tuple(items)  # type: ignore[arg-type]
    r.register(value, *r.adopt(items))
    r.push(value)


def _empty_tuple(r: _Reader) -> None:
    _make_tuple(r, [])


def _tuple(r: _Reader) -> None:
    _make_tuple(r, r.pop_mark())


def _tuple1(r: _Reader) -> None:
    _make_tuple(r, r.pop_n(1))


def _tuple2(r: _Reader) -> None:
    _make_tuple(r, r.pop_n(2))


def _tuple3(r: _Reader) -> None:
    _make_tuple(r, r.pop_n(3))


def _empty_list(r: _Reader) -> None:
    value: list[PickleValue] = []
    r.register(value, 0)
    r.push(value)


def _list(r: _Reader) -> None:
    items = r.pop_mark()
    value: list[PickleValue] = items  # type: ignore[assignment]
    r.register(value, *r.adopt(items))
    r.push(value)


def _target_list(r: _Reader) -> list[PickleValue]:
    target = r.top()
    if type(target) is not list:
        raise r.fail(f"{opcode_name(r.op)} onto a {type(target).__name__}", expected="a list")
    return target


def _append(r: _Reader) -> None:
    value = r.pop()
    target = _target_list(r)
    r.grow(target, *r.adopt([value]))
    target.append(value)  # type: ignore[arg-type]


def _appends(r: _Reader) -> None:
    items = r.pop_mark()
    target = _target_list(r)
    r.grow(target, *r.adopt(items))
    target.extend(items)  # type: ignore[arg-type]


def _empty_dict(r: _Reader) -> None:
    value: dict[PickleValue, PickleValue] = {}
    r.register(value, 0)
    r.push(value)


def _dict(r: _Reader) -> None:
    items = r.pop_mark()
    value: dict[PickleValue, PickleValue] = {}
    r.register(value, 0)
    r.set_items(value, items)
    r.push(value)


def _target_dict(r: _Reader) -> dict[PickleValue, PickleValue]:
    target = r.top()
    if type(target) is not dict:
        raise r.fail(f"{opcode_name(r.op)} onto a {type(target).__name__}", expected="a dict")
    return target


def _setitem(r: _Reader) -> None:
    items = r.pop_n(2)
    r.set_items(_target_dict(r), items)


def _setitems(r: _Reader) -> None:
    items = r.pop_mark()
    r.set_items(_target_dict(r), items)


def _put(r: _Reader) -> None:
    r.memo_put(r.decimal(r.line(32, "PUT"), "PUT index"))


def _binput(r: _Reader) -> None:
    r.memo_put(r.take(1, "BINPUT")[0])


def _long_binput(r: _Reader) -> None:
    r.memo_put(r.size(4, "LONG_BINPUT"))


def _memoize(r: _Reader) -> None:
    r.memo_put(len(r.memo))


def _get(r: _Reader) -> None:
    r.memo_get(r.decimal(r.line(32, "GET"), "GET index"))


def _binget(r: _Reader) -> None:
    r.memo_get(r.take(1, "BINGET")[0])


def _long_binget(r: _Reader) -> None:
    r.memo_get(r.size(4, "LONG_BINGET"))


def _global(r: _Reader) -> None:
    try:
        module = r.line(_MAX_GLOBAL_LINE, "GLOBAL module")
        name = r.line(_MAX_GLOBAL_LINE, "GLOBAL name")
        names = (module.decode("utf-8"), name.decode("utf-8"))
    except (LegacyFormatError, UnicodeDecodeError):
        # A GLOBAL is refused as unsafe even when its operands are garbled.
        raise r.refuse() from None
    r.global_ref(*names)


def _stack_global(r: _Reader) -> None:
    name, module = r.pop(), r.pop()
    if type(module) is not str or type(name) is not str:
        raise r.refuse()
    r.global_ref(module, name)


def _reduce(r: _Reader) -> None:
    args, ref = r.pop(), r.pop()
    if type(ref) is not _GlobalRef:
        raise r.refuse()
    if type(args) is not tuple:
        raise r.fail(f"REDUCE of {ref.qualname} with non-tuple arguments")
    try:
        value = ref.build(args)
    except InputError:
        raise  # a constructor's own refusal (a ValueError too), as it said it
    except (ValueError, TypeError) as exc:
        raise r.fail(f"bad arguments for {ref.qualname}: {exc}") from None
    kind = type(value)
    if kind is tuple or kind is list or kind is dict:
        r.register(value, *(r.adopt([*value]) if kind is not dict else (0, 2 * len(value))))  # type: ignore[arg-type, misc]
    r.push(value)


_Handler: TypeAlias = Callable[[_Reader], None]

_HANDLERS: dict[int, _Handler] = {
    0x80: _proto,
    0x95: _frame,
    ord("("): _mark,
    ord("0"): _pop,
    ord("1"): _pop_mark,
    ord("N"): _none,
    0x88: _newtrue,
    0x89: _newfalse,
    ord("I"): _int,
    ord("L"): _long,
    ord("J"): _binint,
    ord("K"): _binint1,
    ord("M"): _binint2,
    0x8A: _long1,
    0x8B: _long4,
    ord("F"): _float,
    ord("G"): _binfloat,
    ord("V"): _unicode,
    ord("X"): _binunicode,
    0x8C: _short_binunicode,
    0x8D: _binunicode8,
    ord("B"): _binbytes,
    ord("C"): _short_binbytes,
    0x8E: _binbytes8,
    ord(")"): _empty_tuple,
    ord("t"): _tuple,
    0x85: _tuple1,
    0x86: _tuple2,
    0x87: _tuple3,
    ord("]"): _empty_list,
    ord("l"): _list,
    ord("a"): _append,
    ord("e"): _appends,
    ord("}"): _empty_dict,
    ord("d"): _dict,
    ord("s"): _setitem,
    ord("u"): _setitems,
    ord("p"): _put,
    ord("q"): _binput,
    ord("r"): _long_binput,
    0x94: _memoize,
    ord("g"): _get,
    ord("h"): _binget,
    ord("j"): _long_binget,
    ord("c"): _global,
    0x93: _stack_global,
    ord("R"): _reduce,
}
