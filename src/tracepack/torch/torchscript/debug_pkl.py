"""TorchScript debug pickles: ``debug_pkl`` source ranges and lite-interpreter debug maps.

Every ``code/**.py`` in a TorchScript archive has a ``code/**.py.debug_pkl``
beside it: the source range of each span of the generated code. torch writes
it in one of two forms (``torch._C._set_should_use_format_with_string_table``):

legacy
    ``(row, ...)`` with ``row = (byte_offset, ((text, filename, starting_line),
    start, end), tag)``; ``filename`` may be ``None``. Rows that share a source
    share one ``(text, filename, starting_line)`` tuple through the pickle memo.

string table (torch's default)
    ``("FORMAT_WITH_STRING_TABLE", texts, rows)`` with ``texts[0] == ""`` and
    ``row = (byte_offset, ((line_indices, filename_index, starting_line),
    start, end), tag)``. ``line_indices`` is a TorchScript ``List[int]``
    (``torch.jit._pickle build_intlist``) of indices into ``texts``; the text is
    the concatenation of those lines (each keeps its ``\\n``). A missing
    filename is written as ``""``.

Lite-interpreter archives (``_save_for_lite_interpreter`` with
``_save_mobile_debug_info=True``) add ``mobile_debug_handles.pkl`` (debug handle
per bytecode instruction, per function) and ``callstack_debug_map.pkl`` (debug
handle -> source range tag, node kind, inlined call stack). Source range
``tag`` values are unique across all ``debug_pkl`` files of one archive, and the
call stacks refer to them.

Nothing here imports torch or runs pickle code: everything goes through
:func:`tracepack.torch.torchscript.pickle_reader.read_pickle`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tracepack.errors import EncodeError, LegacyFormatError
from tracepack.torch.torchscript.pickle_reader import (
    DEFAULT_LIMITS,
    Constructor,
    PickleLimits,
    PickleValue,
    read_pickle,
)
from tracepack.torch.torchscript.pickle_writer import INTLIST_GLOBAL, IntList, Writable, write_pickle

__all__ = [
    "FORMAT_WITH_STRING_TABLE",
    "TORCHSCRIPT_CONSTRUCTORS",
    "CallstackDebugMap",
    "CallstackDebugRow",
    "DebugPkl",
    "DebugPklForm",
    "FunctionDebugHandles",
    "InlinedCallStack",
    "MobileDebugHandles",
    "ModuleInstanceInfo",
    "SourceRangeRow",
    "parse_callstack_debug_map",
    "parse_debug_pkl",
    "parse_mobile_debug_handles",
    "read_torchscript_pickle",
    "split_source_lines",
    "write_debug_pkl",
]

FORMAT_WITH_STRING_TABLE = "FORMAT_WITH_STRING_TABLE"


def _build_intlist(args: tuple[PickleValue, ...]) -> PickleValue:
    """Our stand-in for ``torch.jit._pickle.build_intlist``: ``(list_of_ints,) -> list``."""
    if len(args) != 1 or type(args[0]) is not list:
        raise ValueError("expected one list argument")
    values = args[0]
    for item in values:
        if type(item) is not int:
            raise ValueError(f"list item of type {type(item).__name__}, expected int")
    return values


TORCHSCRIPT_CONSTRUCTORS: dict[tuple[str, str], Constructor] = {INTLIST_GLOBAL: _build_intlist}
"""The only globals TorchScript debug pickles use, mapped to our pure stand-ins."""


def read_torchscript_pickle(
    data: bytes | bytearray | memoryview,
    *,
    source: str = "<bytes>",
    limits: PickleLimits = DEFAULT_LIMITS,
) -> PickleValue:
    """Read a TorchScript debug pickle as plain data (``build_intlist`` gives a ``list``)."""
    return read_pickle(data, source=source, limits=limits, constructors=TORCHSCRIPT_CONSTRUCTORS)


# -- debug_pkl ------------------------------------------------------------------


class DebugPklForm(enum.Enum):
    """Which of torch's two ``debug_pkl`` layouts a file uses."""

    LEGACY = "legacy"
    STRING_TABLE = "string_table"


@dataclass(frozen=True, slots=True)
class SourceRangeRow:
    """One ``debug_pkl`` row: generated code from ``byte_offset`` on comes from
    ``text[start:end]``, where ``text`` is the source starting at line
    ``starting_line`` of ``filename``. ``tag`` identifies the range archive-wide
    (``0`` is the empty range)."""

    byte_offset: int
    text: str
    filename: str | None
    starting_line: int
    start: int
    end: int
    tag: int


@dataclass(frozen=True, slots=True)
class DebugPkl:
    """A parsed ``debug_pkl``: its form and its rows, in file order.

    ``sources[i]`` numbers the source object row ``i`` used in the file (in
    order of first use): torch shares a source tuple between the rows of one
    ``Source``, and two equal sources can still be two objects. Rows that
    shared a source share the same ``text`` object. ``texts`` is the string
    table as written (string-table form only).
    """

    form: DebugPklForm
    rows: tuple[SourceRangeRow, ...]
    sources: tuple[int, ...] = ()
    texts: tuple[str, ...] = ()


_ROW_SHAPE = "(byte_offset, ((text, filename, starting_line), start, end), tag)"
_TABLE_ROW_SHAPE = "(byte_offset, ((line_indices, filename_index, starting_line), start, end), tag)"


def _int(value: PickleValue) -> bool:
    return type(value) is int


def parse_debug_pkl(
    data: bytes | bytearray | memoryview,
    *,
    source: str = "<bytes>",
    limits: PickleLimits = DEFAULT_LIMITS,
    max_text_chars: int | None = None,
) -> DebugPkl:
    """Parse a ``debug_pkl`` of either form.

    ``max_text_chars`` bounds the total text rebuilt from the string table
    (default: 16 times the input size plus 16 MiB), so that a small hostile
    file cannot expand into gigabytes.
    """
    value = read_torchscript_pickle(data, source=source, limits=limits)
    budget = max_text_chars if max_text_chars is not None else 16 * len(data) + (16 << 20)
    return debug_pkl_from_value(value, source=source, max_text_chars=budget)


def debug_pkl_from_value(value: PickleValue, *, source: str = "<bytes>", max_text_chars: int = 1 << 30) -> DebugPkl:
    """Interpret an already-unpickled ``debug_pkl`` value (see :func:`parse_debug_pkl`)."""
    if type(value) is tuple and len(value) == 3 and value[0] == FORMAT_WITH_STRING_TABLE:
        return _parse_string_table(value, source, max_text_chars)
    if type(value) is not tuple:
        raise LegacyFormatError(
            f"debug_pkl holds a {type(value).__name__}",
            source=source,
            where="$",
            expected=f"a tuple of rows or ({FORMAT_WITH_STRING_TABLE!r}, texts, rows)",
        )
    rows, sources = _parse_legacy_rows(value, source)
    return DebugPkl(DebugPklForm.LEGACY, rows, sources)


def _row_error(source: str, index: int, problem: str, shape: str) -> LegacyFormatError:
    return LegacyFormatError(problem, source=source, where=f"row {index}", expected=shape)


def _split_row(row: PickleValue, index: int, source: str, shape: str) -> tuple[int, PickleValue, int, int, int]:
    """Check ``(byte_offset, (src, start, end), tag)`` and return its parts."""
    if type(row) is not tuple or len(row) != 3:
        raise _row_error(source, index, f"row is a {_describe(row)}", shape)
    offset, rng, tag = row
    if type(rng) is not tuple or len(rng) != 3:
        raise _row_error(source, index, f"range is a {_describe(rng)}", shape)
    src, start, end = rng
    if not (_int(offset) and _int(tag) and _int(start) and _int(end)):
        raise _row_error(source, index, "byte_offset, start, end and tag must be ints", shape)
    return offset, src, start, end, tag  # type: ignore[return-value]


def _describe(value: PickleValue) -> str:
    if type(value) is tuple:
        return f"tuple of {len(value)}"
    return type(value).__name__


def _parse_legacy_rows(
    rows: tuple[PickleValue, ...], source: str
) -> tuple[tuple[SourceRangeRow, ...], tuple[int, ...]]:
    out: list[SourceRangeRow] = []
    numbers: dict[int, int] = {}
    sources: list[int] = []
    for index, row in enumerate(rows):
        offset, src, start, end, tag = _split_row(row, index, source, _ROW_SHAPE)
        if type(src) is not tuple or len(src) != 3:
            raise _row_error(source, index, f"source is a {_describe(src)}", _ROW_SHAPE)
        text, filename, line = src
        if type(text) is not str or not (filename is None or type(filename) is str):
            raise _row_error(source, index, "source text/filename must be strings", _ROW_SHAPE)
        if not _int(line):
            raise _row_error(source, index, "starting_line must be an int", _ROW_SHAPE)
        out.append(SourceRangeRow(offset, text, filename, line, start, end, tag))  # type: ignore[arg-type]
        # ``rows`` keeps every source tuple alive, so ids are stable here.
        sources.append(numbers.setdefault(id(src), len(numbers)))
    return tuple(out), tuple(sources)


def _parse_string_table(value: tuple[PickleValue, ...], source: str, max_text_chars: int) -> DebugPkl:
    _, texts, rows = value
    if type(texts) is not tuple or not all(type(t) is str for t in texts):
        raise LegacyFormatError(
            "string table is not a tuple of strings",
            source=source,
            where="$[1]",
            expected="a tuple of str",
        )
    if not texts or texts[0] != "":
        raise LegacyFormatError(
            "string table does not start with the empty string",
            source=source,
            where="$[1][0]",
            expected='""',
        )
    if type(rows) is not tuple:
        raise LegacyFormatError(f"rows are a {_describe(rows)}", source=source, where="$[2]", expected="a tuple")
    table: tuple[str, ...] = texts  # type: ignore[assignment]
    count = len(table)
    # One decoded text per source tuple object: rows that shared a source in
    # the file share the str here, and each source is joined only once.
    decoded: dict[int, tuple[str, str, int]] = {}
    sources: list[int] = []
    keep: list[PickleValue] = []
    spent = 0
    out: list[SourceRangeRow] = []
    for index, row in enumerate(rows):
        offset, src, start, end, tag = _split_row(row, index, source, _TABLE_ROW_SHAPE)
        if type(src) is not tuple or len(src) != 3:
            raise _row_error(source, index, f"source is a {_describe(src)}", _TABLE_ROW_SHAPE)
        lines, file_index, line = src
        if type(file_index) is not int or type(line) is not int:
            raise _row_error(source, index, "filename_index and starting_line must be ints", _TABLE_ROW_SHAPE)
        cached = decoded.get(id(src))
        if cached is None:
            if type(lines) is not list and type(lines) is not tuple:
                raise _row_error(source, index, f"line_indices is a {_describe(lines)}", _TABLE_ROW_SHAPE)
            size = 0
            picked: list[str] = []
            for i in lines:
                if type(i) is not int or not 0 <= i < count:
                    raise _row_error(
                        source,
                        index,
                        f"line index {i!r} outside the string table",
                        f"0..{count - 1}",
                    )
                picked.append(table[i])
                size += len(table[i])
            spent += size
            if spent > max_text_chars:
                raise _row_error(
                    source,
                    index,
                    f"string table expands past {max_text_chars} characters",
                    "a debug_pkl of sane size",
                )
            if not 0 <= file_index < count:
                raise _row_error(
                    source,
                    index,
                    f"filename index {file_index} outside the string table",
                    f"0..{count - 1}",
                )
            cached = ("".join(picked), table[file_index], len(decoded))
            decoded[id(src)] = cached
            keep.append(src)
        text, filename, number = cached
        out.append(SourceRangeRow(offset, text, filename, line, start, end, tag))
        sources.append(number)
    return DebugPkl(DebugPklForm.STRING_TABLE, tuple(out), tuple(sources), table)


def split_source_lines(text: str) -> list[str]:
    """Split ``text`` the way torch does for the string table: each line keeps its
    ``\\n``, and the piece after the last ``\\n`` (maybe ``""``) is a line too.
    The empty text has no lines."""
    if not text:
        return []
    pieces = text.split("\n")
    return [p + "\n" for p in pieces[:-1]] + [pieces[-1]]


def write_debug_pkl(
    rows: Iterable[SourceRangeRow],
    form: DebugPklForm,
    *,
    sources: Sequence[int] | None = None,
) -> bytes:
    """Pickle ``rows`` as torch would in ``form``; ``torch.jit.load`` accepts the result.

    Rows share one source tuple when their ``sources`` numbers are equal (pass
    :attr:`DebugPkl.sources`), or, without ``sources``, when their text,
    filename and starting line are equal. For a file torch wrote,
    ``write_debug_pkl(d.rows, d.form, sources=d.sources)`` with
    ``d = parse_debug_pkl(b)`` gives back ``b`` byte for byte. In the
    string-table form a ``None`` filename becomes ``""``, as in torch.
    """
    rows = list(rows)
    if sources is not None and len(sources) != len(rows):
        raise EncodeError(f"{len(sources)} source numbers for {len(rows)} rows")
    for index, row in enumerate(rows):
        for name in ("byte_offset", "starting_line", "start", "end", "tag"):
            if type(getattr(row, name)) is not int:
                raise EncodeError(f"{name} is not an int", where=f"row {index}")
        if type(row.text) is not str or not (row.filename is None or type(row.filename) is str):
            raise EncodeError("text/filename must be str (filename may be None)", where=f"row {index}")
    string_table = form is DebugPklForm.STRING_TABLE
    if not string_table and form is not DebugPklForm.LEGACY:
        raise EncodeError(f"unknown debug_pkl form {form!r}")
    table: dict[str, int] = {"": 0}

    def intern(s: str) -> int:
        index = table.get(s)
        if index is None:
            index = table[s] = len(table)
        return index

    memoize: list[int] = []
    made: dict[object, tuple[tuple[str, str | None, int], tuple[Writable, ...]]] = {}
    body: list[Writable] = []
    for index, row in enumerate(rows):
        filename = row.filename if row.filename is not None or not string_table else ""
        content = (row.text, filename, row.starting_line)
        key: object = content if sources is None else sources[index]
        entry = made.get(key)
        if entry is None:
            if string_table:
                lines = IntList(intern(line) for line in split_source_lines(row.text))
                src: tuple[Writable, ...] = (lines, intern(filename or ""), row.starting_line)
            else:
                src = content
            entry = made[key] = (content, src)
            memoize.append(id(src))
        elif entry[0] != content:
            raise EncodeError(f"rows with source number {key} have different sources", where=f"row {index}")
        body.append((row.byte_offset, (entry[1], row.start, row.end), row.tag))
    rows_tuple: tuple[Writable, ...] = tuple(body)
    memoize.append(id(rows_tuple))
    if not string_table:
        return write_pickle(rows_tuple, memoize=memoize)
    texts: tuple[Writable, ...] = tuple(table)
    memoize.append(id(texts))
    return write_pickle((FORMAT_WITH_STRING_TABLE, texts, rows_tuple), memoize=memoize)


# -- lite interpreter: callstack_debug_map.pkl -------------------------------------------


@dataclass(frozen=True, slots=True)
class ModuleInstanceInfo:
    """The module a call went through: its TorchScript type and attribute name."""

    type_name: str
    instance_name: str


@dataclass(frozen=True, slots=True)
class InlinedCallStack:
    """One frame of an inlined call stack, outermost first: the call at
    ``source_range_tag`` (``-1``: none) in ``function_name``, made from
    ``module`` (``None`` for a free function), continuing into ``callee``."""

    module: ModuleInstanceInfo | None
    source_range_tag: int
    callee: InlinedCallStack | None
    function_name: str

    def frames(self) -> list[InlinedCallStack]:
        """This frame and its callees, outermost first."""
        out: list[InlinedCallStack] = []
        frame: InlinedCallStack | None = self
        while frame is not None:
            out.append(frame)
            frame = frame.callee
        return out


@dataclass(frozen=True, slots=True)
class CallstackDebugRow:
    """``callstack_debug_map.pkl`` row: the node behind ``debug_handle``."""

    debug_handle: int
    source_range_tag: int
    node_name: str
    callstack: InlinedCallStack | None


@dataclass(frozen=True, slots=True)
class CallstackDebugMap:
    """All rows, in file order (torch writes them in hash-map order)."""

    rows: tuple[CallstackDebugRow, ...]


_CS_SHAPE = "(module_info | None, source_range_tag, callee | None, function_name)"
_CS_ROW_SHAPE = "(debug_handle, source_range_tag, node_name, callstack | None)"


def parse_callstack_debug_map(
    data: bytes | bytearray | memoryview,
    *,
    source: str = "<bytes>",
    limits: PickleLimits = DEFAULT_LIMITS,
) -> CallstackDebugMap:
    """Parse ``callstack_debug_map.pkl``. Call stack tails shared through the
    pickle memo become shared :class:`InlinedCallStack` objects."""
    value = read_torchscript_pickle(data, source=source, limits=limits)
    if type(value) is not tuple:
        raise LegacyFormatError(
            f"callstack_debug_map holds a {_describe(value)}",
            source=source,
            where="$",
            expected="a tuple of rows",
        )
    cache: dict[int, InlinedCallStack] = {}
    keep: list[PickleValue] = []
    rows: list[CallstackDebugRow] = []
    for index, row in enumerate(value):
        if type(row) is not tuple or len(row) != 4:
            raise _row_error(source, index, f"row is a {_describe(row)}", _CS_ROW_SHAPE)
        handle, tag, node_name, stack = row
        if not (_int(handle) and _int(tag) and type(node_name) is str):
            raise _row_error(source, index, "debug_handle/tag must be ints, node_name a str", _CS_ROW_SHAPE)
        parsed = None if stack is None else _callstack(stack, index, source, cache, keep)
        rows.append(CallstackDebugRow(handle, tag, node_name, parsed))  # type: ignore[arg-type]
    return CallstackDebugMap(tuple(rows))


def _callstack(
    value: PickleValue,
    index: int,
    source: str,
    cache: dict[int, InlinedCallStack],
    keep: list[PickleValue],
) -> InlinedCallStack:
    # Walk down to the first known (or absent) callee, then build back up:
    # iterative, and every shared tail is built once.
    chain: list[tuple[PickleValue, ...]] = []
    node: PickleValue = value
    tail: InlinedCallStack | None = None
    while node is not None:
        known = cache.get(id(node))
        if known is not None:
            tail = known
            break
        if type(node) is not tuple or len(node) != 4:
            raise _row_error(source, index, f"call stack frame is a {_describe(node)}", _CS_SHAPE)
        chain.append(node)
        node = node[2]
    for frame in reversed(chain):
        info, tag, _, fn = frame
        module: ModuleInstanceInfo | None = None
        if info is not None:
            if type(info) is not tuple or len(info) != 2 or type(info[0]) is not str or type(info[1]) is not str:
                raise _row_error(source, index, "module info is not (type_name, instance_name)", _CS_SHAPE)
            module = ModuleInstanceInfo(info[0], info[1])
        if not _int(tag) or type(fn) is not str:
            raise _row_error(source, index, "call stack tag must be an int, function_name a str", _CS_SHAPE)
        tail = InlinedCallStack(module, tag, tail, fn)  # type: ignore[arg-type]
        cache[id(frame)] = tail
        keep.append(frame)
    if tail is None:  # pragma: no cover - value was not None, so the chain is non-empty
        raise _row_error(source, index, "empty call stack", _CS_SHAPE)
    return tail


# -- lite interpreter: mobile_debug_handles.pkl ------------------------------------------


@dataclass(frozen=True, slots=True)
class FunctionDebugHandles:
    """The debug handle of each bytecode instruction of one function."""

    name: str
    handles: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MobileDebugHandles:
    """``mobile_debug_handles.pkl``: ``(bytecode_version, (name, (("function_debug_handles",
    (handles,)),)), ...)``."""

    bytecode_version: int
    functions: tuple[FunctionDebugHandles, ...]


_MDH_SHAPE = "(name, (('function_debug_handles', (handles,)),))"


def parse_mobile_debug_handles(
    data: bytes | bytearray | memoryview,
    *,
    source: str = "<bytes>",
    limits: PickleLimits = DEFAULT_LIMITS,
) -> MobileDebugHandles:
    """Parse ``mobile_debug_handles.pkl``."""
    value = read_torchscript_pickle(data, source=source, limits=limits)
    if type(value) is not tuple or not value or not _int(value[0]):
        raise LegacyFormatError(
            "mobile_debug_handles is not (bytecode_version, function, ...)",
            source=source,
            where="$",
            expected="a tuple starting with an int",
        )
    functions: list[FunctionDebugHandles] = []
    for index, entry in enumerate(value[1:]):
        where = f"function {index}"
        ok = (
            type(entry) is tuple
            and len(entry) == 2
            and type(entry[0]) is str
            and type(entry[1]) is tuple
            and len(entry[1]) == 1
        )
        if ok:
            field = entry[1][0]  # type: ignore[index]
            ok = (
                type(field) is tuple
                and len(field) == 2
                and field[0] == "function_debug_handles"
                and type(field[1]) is tuple
                and len(field[1]) == 1
                and type(field[1][0]) in (list, tuple)
            )
        if not ok:
            raise LegacyFormatError(f"entry is a {_describe(entry)}", source=source, where=where, expected=_MDH_SHAPE)
        handles = field[1][0]  # type: ignore[index]
        if not all(type(h) is int for h in handles):  # type: ignore[union-attr]
            raise LegacyFormatError("debug handles must be ints", source=source, where=where, expected="List[int]")
        functions.append(FunctionDebugHandles(entry[0], tuple(handles)))  # type: ignore[arg-type, index]
    return MobileDebugHandles(value[0], tuple(functions))  # type: ignore[arg-type]
