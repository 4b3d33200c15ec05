"""Turn what only hostile input can make a parser do into one-line :class:`InputError` s.

JSON, MessagePack and TOML are parsed by C or library code that recurses once per level of
nesting and converts integers of any length; on input nested thousands deep, or an integer of
thousands of digits, they would raise ``RecursionError`` or ``ValueError`` deep inside, which a
caller would see as an internal error. Every entry point that parses user input runs under
:func:`reading`, which holds the parse to two budgets of :mod:`tracepack.io.limits` and reports
going past them as the input's fault, naming it and the budget::

    with guard.reading(source, DecodeError, json_text=data):
        value = json.loads(data)

* ``max_depth`` (default 1,000 levels; real documents nest a few dozen);
* ``max_int_digits`` (default 4,300, Python's own limit): the longest integer converted from text.

**JSON given as ``json_text``** is checked before it is parsed, without touching anything
global: :func:`scan_json` measures its nesting depth and its longest integer in one linear,
iterative pass (strings cut out by one regular expression, the brackets left counted by a running
sum, long digit runs found by another expression: all in C, a few percent of the decode), and
input over a budget is refused with the byte offset. The parse then needs as many frames as the
document really nests: for real documents (a few dozen levels) well within the interpreter's
recursion limit, which is then left alone, and so is ``sys.set_int_max_str_digits`` unless the
document holds an integer longer than the interpreter's limit (a raised ``max_int_digits``).

:func:`parse_json` and :func:`run` avoid even the scan for real documents: with the default
budgets (at least what the interpreter enforces by itself) they run the parse as it is, and
measure and retry under :func:`reading` only when it runs out of room.

**Other input** (MessagePack, TOML, JSON not given) cannot be measured as cheaply in Python; the
parse runs with the interpreter's recursion limit raised to the frames in use plus ``max_depth``
where it is lower (and ``sys.set_int_max_str_digits`` to ``max_int_digits`` where that is higher),
so nesting past the budget raises ``RecursionError``, reported as the input's fault. Those knobs
are the interpreter's: :func:`reading` only ever **raises** them, under a lock, counting the parses
that need them, and puts the old values back when the last one ends, so a parse in one thread never
lowers a limit another thread's parse relies on (while two overlap, the larger need holds for
both). A ``max_depth`` past about 20,000 needs more C stack than a thread's default: run such a
parse in a thread made after ``threading.stack_size(256 << 20)``.

Every schema field holds a 64-bit integer at most, which the decoders and model.json validation
check.
"""

from __future__ import annotations

import contextlib
import operator
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import accumulate
from typing import TypeVar

from tracepack.errors import InputError
from tracepack.io import limits

__all__ = ["JsonShape", "check_depth", "parse_json", "reading", "run", "scan_json", "scan_msgpack", "value_depth"]

#: Frames the parse itself may add before it reaches the input's first level (library wrappers).
_MARGIN = 64
#: Frames a caller's own walk over the parsed value may spend per level (C parsers spend one).
_FRAMES_PER_LEVEL = 2
#: Python's floor for ``sys.set_int_max_str_digits``.
_MIN_DIGITS = 640
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class JsonShape:
    """What :func:`scan_json` measured: the deepest nesting and the longest integer (in digits)."""

    depth: int
    longest_int: int


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
#: Everything but the four brackets (deleted, leaving the brackets in order).
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
#: Opening brackets count 2, closing ones 0: the running sum minus the count is the depth.
_WEIGHTS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
#: Digits as ``0``, everything else as a space.
_DIGITS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))


def _int_runs(min_digits: int) -> re.Pattern[bytes]:
    # An integer: digits not after a '.', an exponent or another digit, and not followed by
    # '.', 'e' or 'E' (a fraction or an exponent: floats, which have no digit limit).
    return re.compile(rb"(?<![0-9.eE+])(?<![eE]-)-?([0-9]{%d,})(?![0-9.eE])" % min_digits)


_RUNS: dict[int, re.Pattern[bytes]] = {}


def scan_json(text: bytes | bytearray | memoryview | str, *, min_digits: int = 1) -> JsonShape:
    """The nesting depth and longest integer of JSON ``text`` (valid or not: a parser decides
    that), in one linear pass that recurses nowhere. Integers shorter than ``min_digits`` are not
    measured (``longest_int`` is 0 when there is none as long)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    residue = _STRING.sub(b'""', data)
    brackets = residue.translate(_WEIGHTS, _NOT_BRACKETS)
    depth = max(map(operator.sub, accumulate(brackets), range(1, len(brackets) + 1)), default=0)
    longest = 0
    if b"0" * min_digits in residue.translate(_DIGITS):  # a run that long at all (a fast search)? then exactly
        runs = _RUNS.get(min_digits)
        if runs is None:
            runs = _RUNS[min_digits] = _int_runs(min_digits)
        longest = max((len(m.group(1)) for m in runs.finditer(residue)), default=0)
    return JsonShape(max(depth, 0), longest)


def _place(text: bytes | bytearray | memoryview | str, depth: int | None, digits: int | None) -> int:
    """The byte offset where ``text`` first nests ``depth`` deep, or where its first integer of
    ``digits`` or more digits starts (only called on refusal: one more linear pass)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    if digits is not None:
        found = _int_runs(digits).search(_STRING.sub(lambda m: b"_" * len(m.group()), data))
        return found.start(1) if found else 0
    level = 0
    for m in re.finditer(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', data):
        c = m.group()
        if c in (b"[", b"{"):
            level += 1
            if depth is not None and level >= depth:
                return m.start()
        elif c in (b"]", b"}"):
            level -= 1
    return 0


#: MessagePack lead bytes: (bytes of the length that follows, fixed payload bytes) for scalars.
_MP_FIXED: dict[int, int] = {
    **dict.fromkeys((0xC0, 0xC2, 0xC3), 0),
    0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8,
    0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17,
}  # fmt: skip
#: Lead bytes followed by a big-endian length of this many bytes, then that many bytes (+1 for ext).
_MP_SIZED: dict[int, tuple[int, int]] = {
    0xC4: (1, 0), 0xC5: (2, 0), 0xC6: (4, 0), 0xC7: (1, 1), 0xC8: (2, 1), 0xC9: (4, 1),
    0xD9: (1, 0), 0xDA: (2, 0), 0xDB: (4, 0),
}  # fmt: skip
#: Array/map lead bytes with a length field: (bytes of the length, items per entry).
_MP_CONTAINERS: dict[int, tuple[int, int]] = {0xDC: (2, 1), 0xDD: (4, 1), 0xDE: (2, 2), 0xDF: (4, 2)}


def scan_msgpack(data: bytes | bytearray | memoryview, *, limit: int | None = None) -> tuple[int, int | None]:
    """The nesting depth of the MessagePack ``data`` (arrays and maps; a scalar is 0, ``[]`` is 1),
    in one iterative pass, and the byte offset of the first array or map nested deeper than
    ``limit`` (None when there is none; the scan stops there). Damaged input is measured as far as
    it goes: the decoder says what is wrong with it. Costs a Python step per item, so it runs only
    when a caller lowers ``max_depth`` or a decode ran out of room."""
    view = bytes(data)
    end = len(view)
    pos = 0
    left: list[int] = []  # items still to come in each open array/map, innermost last
    todo = 1  # items at the current level (the top: one value)
    deepest = 0
    while pos < end:
        while todo == 0:
            if not left:
                return deepest, None
            todo = left.pop()
        todo -= 1
        start, lead = pos, view[pos]
        count = -1
        if lead <= 0x7F or lead >= 0xE0:
            pos += 1
        elif lead <= 0x8F:
            count, pos = 2 * (lead & 0x0F), pos + 1
        elif lead <= 0x9F:
            count, pos = lead & 0x0F, pos + 1
        elif lead <= 0xBF:
            pos += 1 + (lead & 0x1F)
        elif lead in _MP_FIXED:
            pos += 1 + _MP_FIXED[lead]
        elif lead in _MP_SIZED:
            width, extra = _MP_SIZED[lead]
            pos += 1 + width + extra + int.from_bytes(view[pos + 1 : pos + 1 + width], "big")
        elif lead in _MP_CONTAINERS:
            width, per = _MP_CONTAINERS[lead]
            count = per * int.from_bytes(view[pos + 1 : pos + 1 + width], "big")
            pos += 1 + width
        else:
            return deepest, None  # 0xC1, never used: the decoder refuses it
        if count >= 0:
            level = len(left) + 1
            if limit is not None and level > limit:
                return max(deepest, level), start
            deepest = max(deepest, level)
            if count:
                left.append(todo)
                todo = count
    return deepest, None


def value_depth(value: object) -> int:
    """How deep a parsed value nests (dicts, lists and tuples; a scalar is 0, ``{}`` is 1), iteratively."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Iterable[object] = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list, tuple)))
    return deepest


def check_depth(value: object, source: str | None, error: type[InputError], where: str | None = None) -> None:
    """Refuse a parsed ``value`` (TOML, a generic decode) nested deeper than the ``max_depth``
    budget: the parse itself is held to the budget only as far as the interpreter's recursion
    limit reaches, which a lowered budget does not."""
    budget = limits.current().max_depth
    if value_depth(value) > budget:
        raise _too_deep(error, budget, source, where)


# -- the interpreter's knobs, raised for as long as some parse needs them --------------------------

_LOCK = threading.Lock()
_NEEDS: list[tuple[int, int]] = []  # (recursion limit, int digits) every running parse asked for
_SAVED: list[int] = []  # the interpreter's values before the first of them: [recursion, digits]


def _apply() -> None:
    """Set both knobs to the largest need of the running parses, never below the saved values."""
    recursion = max([_SAVED[0], *(n[0] for n in _NEEDS)])
    digits = _SAVED[1]
    if digits != 0:  # 0: no limit at all, nothing to raise
        digits = max([digits, *(n[1] for n in _NEEDS)])
    if sys.getrecursionlimit() != recursion:
        sys.setrecursionlimit(recursion)
    if sys.get_int_max_str_digits() != digits:
        sys.set_int_max_str_digits(digits)


@contextlib.contextmanager
def _raised(recursion: int, digits: int) -> Iterator[None]:
    """The interpreter's recursion limit at least ``recursion`` and its integer digit limit at
    least ``digits`` for the block, shared with every other parse running (see the module doc)."""
    current_digits = sys.get_int_max_str_digits()
    if recursion <= sys.getrecursionlimit() and (current_digits == 0 or digits <= current_digits):
        yield  # nothing to change: the common case for scanned JSON
        return
    need = (recursion, digits)
    with _LOCK:
        if not _NEEDS:
            _SAVED[:] = [sys.getrecursionlimit(), current_digits]
        _NEEDS.append(need)
        _apply()
    try:
        yield
    finally:
        with _LOCK:
            _NEEDS.remove(need)
            if _NEEDS:
                _apply()
            else:
                sys.setrecursionlimit(_SAVED[0])
                sys.set_int_max_str_digits(_SAVED[1])


def _frames() -> int:
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]
    return depth


def _too_deep(error: type[InputError], budget: int, source: str | None, where: str | None) -> InputError:
    return error(
        f"nested more than {budget:,} levels deep (hostile or damaged input?)",
        source=source,
        where=where,
        expected=f"shallower nesting, {limits.hint('max_depth')}",
    )


def _too_long(error: type[InputError], digits: int, source: str | None, where: str | None) -> InputError:
    return error(
        f"an integer of more than {digits:,} digits",
        source=source,
        where=where,
        expected=f"a 64-bit integer, {limits.hint('max_int_digits')}",
    )


@contextlib.contextmanager
def reading(
    source: str | None,
    error: type[InputError],
    where: str | None = None,
    *,
    json_text: bytes | bytearray | memoryview | str | None = None,
) -> Iterator[None]:
    """Run a parse of ``source`` within the ``max_depth`` and ``max_int_digits`` budgets: nesting
    and integers past them become ``error``. With ``json_text`` (the JSON about to be parsed) both
    are checked first by :func:`scan_json`, and nothing global changes for real documents."""
    budget = limits.current()
    digits = max(budget.max_int_digits, _MIN_DIGITS)
    if json_text is not None:
        current_digits = sys.get_int_max_str_digits() or digits
        shape = scan_json(json_text, min_digits=min(digits, current_digits) + 1)
        if shape.depth > budget.max_depth:
            at = _place(json_text, budget.max_depth + 1, None)
            raise _too_deep(error, budget.max_depth, source, where or f"byte {at}")
        if shape.longest_int > digits:
            at = _place(json_text, None, digits + 1)
            raise _too_long(error, digits, source, where or f"byte {at}")
        need_recursion = _frames() + _FRAMES_PER_LEVEL * shape.depth + _MARGIN
        need_digits = shape.longest_int
    else:
        need_recursion = _frames() + budget.max_depth + _MARGIN
        need_digits = digits
    try:
        with _raised(need_recursion, need_digits):
            yield
    except RecursionError:
        raise _too_deep(error, budget.max_depth, source, where) from None
    except ValueError as exc:
        if isinstance(exc, InputError) or "integer string conversion" not in str(exc):
            raise
        raise _too_long(error, digits, source, where) from None


def parse_json(
    parse: Callable[[], T],
    text: bytes | bytearray | memoryview | str,
    source: str | None,
    error: type[InputError],
    where: str | None = None,
) -> T:
    """``parse()`` (which parses the JSON ``text``, and may build on it) within the ``max_depth``
    and ``max_int_digits`` budgets, at no cost for real documents and touching nothing global.

    When the budgets are at least what the interpreter's own limits enforce (the defaults), the
    parse runs as it is first: if it succeeds, the text nested less deep than the recursion limit
    allows and held no integer longer than the interpreter converts, both within the budgets.
    Only when it fails (``RecursionError``, an over-long integer), or when a budget is lower than
    the interpreter's limit, is ``text`` measured (:func:`scan_json`) and refused with the byte
    offset, or parsed again under :func:`reading` with the limits it needs raised. ``parse`` must
    be safe to run twice (pure, as parsing is)."""
    return _optimistic(parse, source, error, where, text)


def run(
    work: Callable[[], T],
    source: str | None,
    error: type[InputError],
    where: str | None = None,
    *,
    msgpack: bytes | bytearray | memoryview | None = None,
) -> T:
    """``work()`` (a walk or dump as deep as a document nests, no text to measure) within the
    ``max_depth`` budget, as :func:`parse_json` does: first as it is, and only if it runs out of
    recursion again under :func:`reading` (the recursion limit raised to what the budget allows).

    With ``msgpack`` (the MessagePack ``work`` decodes), the budget is exact: the bytes are measured
    (:func:`scan_msgpack`) and refused with the byte offset before ``work`` runs when the budget is
    lower than the recursion the interpreter leaves (a lowered ``max_depth``), and before it runs
    again when it ran out of room; with the default budget a decode that succeeds needs no scan."""
    if msgpack is None:
        return _optimistic(work, source, error, where, None)
    data = msgpack
    budget = limits.current().max_depth

    def measured() -> T:
        _, at = scan_msgpack(data, limit=budget)
        if at is not None:
            raise _too_deep(error, budget, source, where or f"byte {at}")
        return work()

    if budget >= sys.getrecursionlimit() - _frames() - _MARGIN:
        try:  # a decode that succeeds nested less deep than the interpreter allows, within the budget
            return work()
        except RecursionError:
            pass
    return _optimistic(measured, source, error, where, None)


def _optimistic(
    work: Callable[[], T],
    source: str | None,
    error: type[InputError],
    where: str | None,
    text: bytes | bytearray | memoryview | str | None,
) -> T:
    budget = limits.current()
    headroom = sys.getrecursionlimit() - _frames() - _MARGIN
    interpreter_digits = sys.get_int_max_str_digits()
    if headroom <= budget.max_depth and interpreter_digits != 0 and interpreter_digits <= budget.max_int_digits:
        try:
            return work()
        except RecursionError:
            pass
        except ValueError as exc:
            if isinstance(exc, InputError) or "integer string conversion" not in str(exc):
                raise
    with reading(source, error, where, json_text=text):
        return work()
