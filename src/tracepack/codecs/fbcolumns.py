"""The FlatBuffers column layout: the whole document as typed FlatBuffers vectors, one column per path.

Normative: spec/07-flatbuffers-columns.md.

The row layout (:mod:`tracepack.codecs.flatbuffers`, codec id 2) stores a table per node, per
argument, per value: every row repeats its vtable and offsets, and zstd finds little in it. This
layout (codec id 4) stores the same document as *columns*, one per path of the schema. The paths,
and the way lists, unions and optional values are shredded, are those of the columnar codec
(:mod:`tracepack.codecs.columnar`), whose plan, derived from each schema version's generated model,
is reused: a new schema release gets the layout with no new code.

The payload is a standard FlatBuffer of ``tracepack/data/fbs/tracepack-columns.fbs`` (shipped in the
package; root ``Columns``, file identifier ``TPKC``), then the row layout's side index (node indices
sorted by name) and trailer::

    [Columns buffer, 8-byte aligned][SideIndex buffer][uint32 length of SideIndex buffer]["TPKI"]

``Columns`` is one table: a directory (``paths``: every column's path, each followed by a NUL;
``kinds``: its element kind; ``counts``: its number of values) and one vector per element kind
(``bool``, ``int8`` ... ``uint64``, ``float64``, ``text``, ``blob``) holding the values of every
column of that kind back to back, in directory order. A column's values start where the previous
column of its kind ended. Integer columns use the narrowest kind that holds their values (a column
of small indices is a byte per row). Strings are ``text``: UTF-8, each value followed by a NUL;
a string column where a value holds a NUL, and a bytes column, is ``blob``: its values back to back
in ``blob``, their lengths in ``uint32`` (counted by the column's count). Paths use the columnar
codec's grammar (``$.graph.nodes[].name``; ``P#len`` list lengths, the items under ``P[]``;
``P#tag`` a union's variant ids, 0 for none, each variant's rows under ``P<id>``; ``P#present``).

Every value is directly indexable: row ``i`` of a field is element ``i`` of its column; a list's
items of row ``i`` start at the sum of the ``#len`` column before ``i``; a union's row ``i`` is row
*k* of variant ``#tag[i]``, *k* being how many earlier rows have that tag (readers that jump compute
those running sums once per column). A field whose every row holds its default, and a path without
rows, is not written: a reader takes a missing column as the field's default in every row, and
ignores a column it does not know (a newer minor's field), as the columnar codec does.

Builds before this layout refuse a file with codec id 4 ("unknown codec id 4"); they never misread
it. Decoding checks the directory against the vectors, then every column before a row is built
from it (kind, length, integer bounds, enum values, variant ids, UTF-8): a damaged payload is a
one-line :class:`~tracepack.errors.DecodeError` naming the column.
"""

from __future__ import annotations

import enum
import functools
import gc
import itertools
import math
import operator
import re
import struct
import typing
from array import array
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import msgspec

from tracepack.codecs import _fbrt as rt
from tracepack.codecs import columnar as col
from tracepack.codecs import flatbuffers as fbc
from tracepack.errors import NOT_DECODE_ERRORS, DecodeError, EncodeError
from tracepack.versions import generated

if typing.TYPE_CHECKING:
    from tracepack.io.blocks import BlockFile

__all__ = [
    "FILE_IDENTIFIER",
    "KINDS",
    "KIND_NAMES",
    "LAYOUT",
    "ROOT_SPEC",
    "TEXT_STEP",
    "Directory",
    "RandomAccess",
    "column_bytes",
    "decode",
    "decode_model",
    "encode",
    "encode_model",
]

#: File identifier of the ``Columns`` buffer.
FILE_IDENTIFIER: Final = b"TPKC"
#: The layout this build writes and reads.
LAYOUT: Final = 1
#: Element kinds, by their number in ``kinds``: struct codes, then ``text`` and ``blob``.
KINDS: Final = ("?", "b", "B", "h", "H", "i", "I", "q", "Q", "d", "text", "blob")
KIND_NAMES: Final = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float64",
                     "text", "blob")  # fmt: skip
_TEXT: Final = 10
_BLOB: Final = 11
_U32_KIND: Final = 6
#: The root table's slots: directory, one vector per kind (``bool`` .. ``blob``), then ``text_index``.
ROOT_SPEC: Final = rt.TableSpec(
    "Columns",
    "IOOO" + "O" * len(KINDS) + "O",
    (0,) * (5 + len(KINDS)),
    ("layout", "paths", "kinds", "counts", *KIND_NAMES, "text_index"),
)
_FIRST: Final = 4
_TEXT_INDEX: Final = _FIRST + len(KINDS)
#: ``text_index[j]`` is where ``text`` value ``TEXT_STEP * j`` starts.
TEXT_STEP: Final = 64
#: Integer kinds, narrowest first: (kind number, lowest, highest).
_INTS: Final = tuple(
    (
        KINDS.index(k),
        -(1 << (8 * n - 1)) if k.islower() else 0,
        (1 << (8 * n - 1)) - 1 if k.islower() else (1 << (8 * n)) - 1,
    )
    for k, n in (("B", 1), ("b", 1), ("H", 2), ("h", 2), ("I", 4), ("i", 4), ("Q", 8), ("q", 8))
)
_BOOL: Final = 0
_F64: Final = 9
_UINT8: Final = KINDS.index("B")
#: Bytes per value of each kind's vector (``text`` and ``blob``: counted apart).
_WIDTHS: Final = tuple(rt.SIZES.get(k, 0) for k in KINDS)


def _int_kind(values: Sequence[int]) -> int:
    if len(values) == 1:  # a table's length, a one-row struct's field: half the columns of a small graph
        lo = hi = values[0]
    else:
        lo, hi = min(values), max(values)
    if lo >= 0 and hi <= 255:
        return _UINT8
    return _wide_kind(lo, hi)


def _wide_kind(lo: int, hi: int) -> int:
    for k, a, b in _INTS:
        if a <= lo and hi <= b:
            return k
    raise OverflowError(f"integers {lo}..{hi} do not fit 64 bits")


def _is_default(values: list[Any], default: Any) -> bool:
    """Whether every value is ``default`` (a float also by its sign: -0.0 is not 0.0)."""
    if values.count(default) != len(values):
        return False
    if isinstance(default, float):
        sign = math.copysign(1.0, default)
        return all(math.copysign(1.0, v) == sign for v in values)
    # Equal values of another type (False == 0 == 0.0) are not the default: every type is the default's.
    return not any(map(operator.is_not, map(type, values), itertools.repeat(type(default))))


def _kind(values: Sequence[Any], strings: bool = False) -> int:
    """The element kind of a column: by its first value (integers: the narrowest kind that holds them)."""
    first = values[0]
    if strings or isinstance(first, str):
        return _BLOB if any(map(operator.contains, values, itertools.repeat("\0"))) else _TEXT
    if isinstance(first, bytes):
        return _BLOB
    if isinstance(first, bool):
        return _BOOL
    if isinstance(first, float):
        return _F64
    return _int_kind(values)


#: The columns of a document, by path in the order they are written: ``(kind, values)``.
_Columns = dict[str, tuple[int, Sequence[Any]]]
#: A plan node compiled for writing: puts the columns of its rows (a non-empty list) in the dict.
_Shred = Callable[[list[Any], _Columns], None]
#: A plan node that writes nothing (a struct without fields).
_NOTHING: Final[_Shred] = lambda values, out: None  # noqa: E731


class _Shredder:
    """Walks the columnar codec's plan, collecting each path's values (the FlatBuffer encodes them).

    A field whose every row holds its default is not written (readers fill it in), nor is a path without rows.
    """

    __slots__ = ("values",)

    def __init__(self) -> None:
        self.values: _Columns = {}

    def put(self, path: str, values: Sequence[Any], strings: bool = False) -> None:
        self.values[path] = (_kind(values, strings), values)

    def shred(self, node: col._Node, values: list[Any]) -> None:
        if values:
            _compiled(node)(values, self.values)


#: Each plan node compiled (plans live as long as the process: one per model type).
_COMPILED: dict[col._Node, _Shred] = {}


def _compiled(node: col._Node) -> _Shred:
    """``node`` as one function of its rows: every path, getter, default and child looked up once,
    so writing a small document (a few rows per path, most paths a single row) costs little per path."""
    fn = _COMPILED.get(node)
    if fn is None:
        fn = _COMPILED[node] = _COMPILERS[type(node)](node)
    return fn


def _compile_struct(node: col._Struct) -> _Shred:
    # Per field: getter, default (_NO_DEFAULT: none), how a value is the default (the default's type;
    # a float default: its sign) and its child.
    fields: list[tuple[Callable[[Any], Any], Any, Any, _Shred]] = []
    for f in node.fields:
        child = _compiled(f.node)
        if f.default is None:
            fields.append((f.get, _NO_DEFAULT, None, child))
        else:
            d = _default_value(f)
            fields.append((f.get, d, math.copysign(1.0, d) if isinstance(d, float) else type(d), child))
    if not fields:
        return _NOTHING
    cls = node.cls
    # Rows of the struct's own class (all of them, in practice) give every column in one transpose
    # of their tuples, when the plan's fields are the class's, in its order: twice as fast as a getter
    # per field from 4 fields on (below, the tuples cost more than they save).
    whole = len(fields) >= 4 and _getters_are_fields(node)
    astuple = msgspec.structs.astuple
    no_default = _NO_DEFAULT
    is_default = _is_default
    copysign = math.copysign

    def shred(values: list[Any], out: _Columns) -> None:
        if len(values) == 1:
            (v,) = values
            for get, d, t, child in fields:
                x = get(v)
                # As _is_default on one value: equal (list.count: `is`, then ==) and of the default's type,
                # or, for a float default, of its sign.
                if d is not no_default and (x is d or x == d):
                    if type(t) is float:
                        if copysign(1.0, x) == t:
                            continue
                    elif type(x) is t:
                        continue
                child([x], out)
            return
        columns: Iterable[list[Any]]
        if whole and set(map(type, values)) == {cls}:
            columns = map(list, zip(*map(astuple, values), strict=True))
        else:
            columns = (list(map(field[0], values)) for field in fields)
        for (_get, d, _t, child), column in zip(fields, columns, strict=True):
            if d is not no_default and is_default(column, d):
                continue
            child(column, out)

    return shred


def _getters_are_fields(node: col._Struct) -> bool:
    """Whether ``node``'s field getters read, in order, every field of its msgspec struct class."""
    names = getattr(node.cls, "__struct_fields__", None)
    if names is None or len(names) != len(node.fields):
        return False
    getters: list[Any] = [f.get for f in node.fields]
    return all(get.__reduce__() == (operator.attrgetter, (name,)) for get, name in zip(getters, names, strict=True))


class _NoDefault:
    __slots__ = ()


_NO_DEFAULT: Final = _NoDefault()


def _compile_list(node: col._List) -> _Shred:
    path = node.len_path
    item = _compiled(node.item)
    chain = itertools.chain.from_iterable
    int_kind = _int_kind
    uint8 = _UINT8

    def shred(values: list[Any], out: _Columns) -> None:
        if len(values) == 1:
            (v,) = values
            n = len(v)
            lengths = [n]
            items = list(v)
            out[path] = (uint8 if n <= 255 else int_kind(lengths), lengths)
        else:
            lengths = list(map(len, values))
            out[path] = (int_kind(lengths), lengths)
            items = list(chain(values))
        if items:
            item(items, out)

    return shred


def _compile_union(node: col._Union) -> _Shred:
    path = node.tag_path
    where = node.path
    tag_of = node.tag_of.__getitem__
    variants = [(tag, _compiled(v)) for tag, v in node.variants.items()]
    shred_of = dict(variants)
    nullable = node.nullable
    int_kind = _int_kind
    compress = itertools.compress
    eq = operator.eq
    repeat = itertools.repeat

    def shred(values: list[Any], out: _Columns) -> None:
        try:
            tags = list(map(tag_of, map(type, values)))
        except KeyError as exc:
            raise EncodeError(f"{exc.args[0].__name__} is not a variant", where=where) from None
        stored: list[Any] = [0 if t is None else t for t in tags] if nullable else tags
        out[path] = (int_kind(stored), stored)
        present = set(tags)
        if len(present) == 1:
            (tag,) = present
            if tag is not None:
                shred_of[tag](values, out)
            return
        if len(present) == 2:
            for tag, variant in variants:
                if tag in present:
                    variant(list(compress(values, map(eq, tags, repeat(tag)))), out)
            return
        # More variants: each row to its variant's list in one pass (rather than one pass per variant).
        rows: dict[int | None, list[Any]] = {tag: [] for tag in present}
        for v, tag in zip(values, tags, strict=True):
            rows[tag].append(v)
        for tag, variant in variants:
            if tag in present:
                variant(rows[tag], out)

    return shred


def _compile_optional(node: col._Optional) -> _Shred:
    path = node.present_path
    inner = _compiled(node.inner)
    compress = itertools.compress
    is_not = operator.is_not
    repeat = itertools.repeat
    boolean = _BOOL

    def shred(values: list[Any], out: _Columns) -> None:
        flags = list(map(is_not, values, repeat(None)))
        out[path] = (boolean, flags)
        present = list(compress(values, flags))
        if present:
            inner(present, out)

    return shred


def _compile_leaf(node: col._Leaf) -> _Shred:
    path = node.path
    kind = _kind
    if node.plain is col._STRINGS:
        contains = operator.contains
        repeat = itertools.repeat

        def strings(values: list[Any], out: _Columns) -> None:
            out[path] = (_BLOB if any(map(contains, values, repeat("\0"))) else _TEXT, values)

        return strings
    uint8 = _UINT8
    wide_kind = _wide_kind

    def shred(values: list[Any], out: _Columns) -> None:
        first = values[0]
        if type(first) is int:
            if len(values) == 1:
                lo = hi = first
            else:
                lo, hi = min(values), max(values)
            out[path] = (uint8 if lo >= 0 and hi <= 255 else wide_kind(lo, hi), values)
        else:
            out[path] = (kind(values), values)

    return shred


#: How each kind of plan node is compiled.
_COMPILERS: Final[dict[type, Callable[[Any], _Shred]]] = {
    col._Struct: _compile_struct,
    col._List: _compile_list,
    col._Union: _compile_union,
    col._Optional: _compile_optional,
    col._Leaf: _compile_leaf,
    col._Int: _compile_leaf,
    col._Enum: _compile_leaf,
}


_DEFAULTS: dict[int, Any] = {}


def _default_value(f: col._Field) -> Any:
    key = id(f)
    try:
        return _DEFAULTS[key]
    except KeyError:
        assert f.default is not None
        value = _DEFAULTS[key] = f.default(1)[0]
        return value


def _write(columns: _Columns) -> bytes:
    by_kind: list[list[Any]] = [[] for _ in KINDS]
    entries = list(columns.values())
    kinds = bytes(map(operator.itemgetter(0), entries))
    counts = list(map(len, map(operator.itemgetter(1), entries)))
    text = by_kind[_TEXT]
    blobs: list[bytes] = []
    if _BLOB in kinds:  # blob lengths go to uint32 in directory order, between the uint32 columns
        for kind, values in entries:
            if kind == _BLOB:
                encoded = [v.encode("utf-8") if isinstance(v, str) else v for v in values]
                by_kind[_U32_KIND] += map(len, encoded)
                blobs += encoded
            else:
                by_kind[kind] += values
    else:
        for kind, values in entries:
            by_kind[kind] += values
    data = b""
    if text:
        joined = "\0".join(text)
        data = joined.encode("utf-8") + b"\0"
    # Room for everything (the buffer's bytes do not depend on it: offsets count from the end).
    w = rt.Writer(len(data) + sum(map(len, blobs)) + sum(len(v) * _WIDTHS[k] for k, v in enumerate(by_kind))
                  + len(columns) * 64 + 1024)  # fmt: skip
    slots: list[Any] = [LAYOUT, 0, 0, 0] + [0] * (len(KINDS) + 1)
    mask = 1
    # Back to front: the last slot's vector first, so the buffer reads in slot order.
    if text:
        sizes = map(len, text) if len(data) == len(joined) + 1 else (len(t.encode("utf-8")) for t in text)
        starts = itertools.accumulate(map((1).__add__, sizes), initial=0)
        slots[_TEXT_INDEX] = w.scalars("I", list(itertools.islice(starts, 0, len(text), TEXT_STEP)))
    if blobs:
        slots[_FIRST + _BLOB] = w.bytes_(b"".join(blobs))
    if text:
        slots[_FIRST + _TEXT] = w.bytes_(data)
    for kind in range(_F64, -1, -1):
        if by_kind[kind]:
            if kind == _UINT8:  # the same vector as scalars("B", ...): bytes() converts 3x faster than array
                slots[_FIRST + kind] = w.bytes_(bytes(by_kind[kind]))
            else:
                slots[_FIRST + kind] = w.scalars(KINDS[kind], by_kind[kind])
    slots[3] = w.scalars("I", counts)
    slots[2] = w.bytes_(kinds)
    slots[1] = w.bytes_(("\0".join(columns) + "\0" if columns else "").encode("utf-8"))
    for i, at in enumerate(slots[1:], 1):
        if at:
            mask |= 1 << i
    return w.finish(w.table(ROOT_SPEC, mask, tuple(slots)), FILE_IDENTIFIER)


def column_bytes(raw: Any, version: tuple[int, int]) -> dict[str, bytes]:
    """Each stored column's values as they sit in the payload (``tracepack inspect``): numbers at their
    kind's width, text values with their NULs, blob values after their ``uint32`` lengths."""
    s = _Shredder()
    s.shred(col._plan(generated(version).model.Document), [raw])
    out = {}
    for path, (kind, values) in s.values.items():
        if kind == _TEXT:
            data = "".join(v + "\0" for v in values).encode("utf-8")
        elif kind == _BLOB:
            encoded = [v.encode("utf-8") if isinstance(v, str) else v for v in values]
            data = array("I", map(len, encoded)).tobytes() + b"".join(encoded)
        elif kind == _BOOL:
            data = bytes(map(bool, values))
        else:
            data = array(KINDS[kind], values).tobytes()
        out[path] = data
    return out


def encode_model(raw: Any, root: type) -> bytes:
    """The ``Columns`` buffer of ``raw``, an instance of the struct type ``root`` (any msgspec model of
    the kinds the schema language has, on the columnar codec's plan of ``root``): what :func:`encode`
    writes, for any root type, without the side index (which lists a Document's node names)."""
    s = _Shredder()
    # Columns are lists (and a large struct's rows transient tuples) with no garbage cycles: as when
    # decoding, the cyclic collector's passes over them midway would only cost time.
    collecting = gc.isenabled()
    gc.disable()
    try:
        s.shred(col._plan(root), [raw])
        return _write(s.values)
    except NOT_DECODE_ERRORS:
        raise  # tracepack's own (a SchemaError from the plan, ...), as it said it
    except (AttributeError, TypeError, ValueError, OverflowError, UnicodeEncodeError, struct.error) as exc:
        raise EncodeError(f"cannot encode as FlatBuffers columns: {type(exc).__name__}: {exc}") from None
    finally:
        if collecting:
            gc.enable()


def encode(raw: Any, version: tuple[int, int]) -> bytes:
    """Encode a document of the generated model of ``version``: the columns, the side index, the trailer."""
    root: type = generated(version).model.Document
    if type(raw) is not root:
        raise EncodeError(f"expected a schema {version[0]}.{version[1]} Document, got {type(raw).__qualname__}")
    body = encode_model(raw, root)
    try:
        side = fbc.side_index(raw)
    except NOT_DECODE_ERRORS:
        raise  # tracepack's own (a SchemaError from the plan, ...), as it said it
    except (AttributeError, TypeError, ValueError, OverflowError, UnicodeEncodeError, struct.error) as exc:
        raise EncodeError(f"cannot encode as FlatBuffers columns: {type(exc).__name__}: {exc}") from None
    return fbc.with_side_index(body, side)


# -- reading ---------------------------------------------------------------------------------------


#: A column's kind -> the kind whose vector counts its values (a blob column's lengths are ``uint32``).
_COUNTED: Final = bytes(_U32_KIND if k == _BLOB else k for k in range(256))


def _entries(paths: list[str], kinds: bytes, counts: list[int]) -> tuple[dict[str, tuple[int, int, int]], list[int]]:
    """Each path's ``(kind, first value in its counted kind's vector, count)``, and the values each kind's
    vector holds (a small file's directory is much of its fixed cost: one tight loop, the rest in C)."""
    used = [0] * len(KINDS)
    starts: list[int] = []
    append = starts.append
    for k, c in zip(kinds.translate(_COUNTED), counts, strict=True):
        append(used[k])
        used[k] += c
    return dict(zip(paths, zip(kinds, starts, counts, strict=True), strict=True)), used


class Directory:
    """The columns of a payload: each path's kind, first value in its kind's vector, and count.

    ``text_index`` (optional: readers that jump use it, decoders ignore it) is a raw view.

    Every entry is checked against the vectors when the directory is read, so a column's values
    are always in bounds. ``vectors[kind]`` is the kind's vector as a typed zero-copy view
    (``bool``, ``text`` and ``blob``: bytes).
    """

    __slots__ = ("entries", "source", "starts", "text_count", "text_index", "vectors")

    def __init__(self, body: memoryview, source: str | None, reader: rt.Reader | None = None) -> None:
        self.source = source
        r = rt.Reader(body) if reader is None else reader
        #: Where each vector's first element is in ``body`` (kinds in order, then ``text_index``; 0: absent).
        self.starts: list[int] = []
        try:
            v = r.fields(r.root(FILE_IDENTIFIER), ROOT_SPEC)
        except rt.Bad as exc:
            raise DecodeError(exc.problem, source=source, where="Columns") from None
        if v[0] != LAYOUT:
            raise self.error(
                "Columns.layout", f"column layout {v[0]} is not readable by this build", expected=str(LAYOUT)
            )
        vectors: list[memoryview] = []
        for kind, code in enumerate(KINDS):
            vectors.append(self._vector(r, v[_FIRST + kind], "B" if kind >= _TEXT or kind == _BOOL else code,
                                        KIND_NAMES[kind]))  # fmt: skip
        self.vectors = vectors
        self.text_index = self._vector(r, v[_TEXT_INDEX], "I", "text_index")
        # The directory is read whole: through a CheckedReader (tracepack.lazy), verified first.
        raw_paths = self._vector(r, v[1], "B", "paths", read=True)
        kinds = self._vector(r, v[2], "B", "kinds", read=True)
        counts = self._vector(r, v[3], "I", "counts", read=True)
        try:
            paths = str(raw_paths, "utf-8").split("\0")
        except UnicodeDecodeError as exc:
            raise self.error("Columns.paths", f"not valid UTF-8 ({exc.reason})") from None
        if paths.pop() != "":
            raise self.error("Columns.paths", "the last path has no NUL after it", expected="NUL-terminated paths")
        if not len(paths) == len(kinds) == len(counts):
            raise self.error(
                "Columns.kinds",
                f"{len(paths)} paths, {len(kinds)} kinds, {len(counts)} counts",
                expected="one kind and one count per path",
            )
        if kinds and max(kinds) >= len(KINDS):
            at = next(i for i, k in enumerate(kinds) if k >= len(KINDS))
            raise self.error(
                f"Columns.kinds ({paths[at]})", f"unknown kind {kinds[at]}", expected=f"0..{len(KINDS) - 1}"
            )
        entries, used = _entries(paths, bytes(kinds), counts.tolist())
        if len(entries) != len(paths):
            seen: set[str] = set()
            twice = next(p for p in paths if p in seen or seen.add(p))  # type: ignore[func-returns-value]
            raise self.error(f"Columns.paths ({twice})", "the path occurs twice", expected="each path once")
        for kind in range(_TEXT):
            if used[kind] != len(vectors[kind]):
                raise self.error(
                    f"Columns.{KIND_NAMES[kind]}",
                    f"the directory's columns hold {used[kind]} values, the vector has {len(vectors[kind])}",
                    expected="one value per column row",
                )
        self.entries = entries
        #: How many ``text`` values the columns hold.
        self.text_count = used[_TEXT]

    def error(self, where: str, problem: str, expected: str | None = None) -> DecodeError:
        return DecodeError(problem, source=self.source, where=where, expected=expected)

    def _vector(self, r: rt.Reader, pos: int, code: str, name: str, *, read: bool = False) -> memoryview:
        if not pos:
            if not read:
                self.starts.append(0)
            return memoryview(b"").cast(code)  # type: ignore[call-overload, no-any-return]
        try:
            start, count = r.vector(pos, rt.SIZES[code])
        except rt.Bad as exc:
            raise self.error(f"Columns.{name}", exc.problem) from None
        if read and isinstance(r, rt.CheckedReader):
            r.need(start, start + count * rt.SIZES[code])
        elif not read:
            self.starts.append(start)
        mv: memoryview = r.mv[start : start + count * rt.SIZES[code]]
        return mv.cast(code) if code != "B" else mv  # type: ignore[call-overload]


class _Check:
    """What an integer column's values must be: a mapping of allowed values, or bounds.

    ``same``: the allowed values map to themselves (variant ids, literals), so values are checked, not
    mapped; ``fits``: the integer kinds whose every value is within the bounds (no value to check)."""

    __slots__ = ("allowed", "fits", "hi", "lo", "same")

    def __init__(self, allowed: dict[int, Any] | None, lo: int | None, hi: int | None) -> None:
        self.allowed, self.lo, self.hi = allowed, lo, hi
        self.same = allowed is not None and all(k is v for k, v in allowed.items())
        self.fits = frozenset(
            k for k, a, b in _INTS if allowed is None and (lo is None or lo <= a) and (hi is None or b <= hi)
        )


#: Checks by the plan's column decoder (the plans, and so their decoders, live as long as the process).
_CHECKS: dict[msgspec.msgpack.Decoder[Any], _Check] = {}


def _checks(plain: msgspec.msgpack.Decoder[Any]) -> _Check:
    """The check of a plan's integer column decoder (``list[int]``, bounded, an IntEnum, variant ids)."""
    check = _CHECKS.get(plain)
    if check is None:
        check = _CHECKS[plain] = _make_check(typing.get_args(plain.type)[0])
    return check


def _make_check(item: Any) -> _Check:
    if item is int:
        return _Check(None, None, None)
    if typing.get_origin(item) is typing.Annotated:
        meta = typing.get_args(item)[1]
        return _Check(None, meta.ge, meta.le)
    if isinstance(item, type) and issubclass(item, enum.IntEnum):
        return _Check({m.value: m for m in item}, None, None)
    allowed: dict[int, Any] = {}
    members = (item,) if typing.get_origin(item) is typing.Literal else typing.get_args(item)
    for member in members:  # Literal[1, 2, ...], optionally | None (stored as 0)
        if member is type(None):
            allowed[0] = None
        elif typing.get_origin(member) is typing.Literal:
            allowed.update((v, v) for v in typing.get_args(member))
        else:
            raise TypeError(f"no column check for {item!r}")
    return _Check(allowed, None, None)


_BYTES: Final = col._decoder(bytes)
#: Text values a reader finds by jumping before it computes every start (one pass over the text).
_JUMPS: Final = 4096


@functools.cache
def _value(n: int) -> re.Pattern[bytes]:
    """Matches ``n`` NUL-terminated values, then one more whose bytes are group 1."""
    return re.compile(b"(?:[^\\x00]*\\x00){%d}([^\\x00]*)\\x00" % n)


_FLOATS: Final = col._decoder(float)
#: How :meth:`_Reader.column` reads a column, by the plan's decoder of it (any other: integers).
_M_INT, _M_TEXT, _M_BYTES, _M_BOOL, _M_FLOAT = range(5)
_MODES: Final[dict[Any, int]] = {col._STRINGS: _M_TEXT, _BYTES: _M_BYTES, col._BOOLS: _M_BOOL, _FLOATS: _M_FLOAT}
_U64_KIND: Final = 8


class _Reader(col._Reader):
    """The columnar plan's reader, on the directory's typed vectors instead of MessagePack columns."""

    __slots__ = ("blobs", "directory", "entries", "texts", "vectors")

    def __init__(self, directory: Directory, limit: int, source: str | None) -> None:
        super().__init__({}, limit, source)
        self.directory = directory
        self.entries = directory.entries
        self.vectors = directory.vectors
        self.texts: list[str] | None = None
        self.blobs: dict[str, list[bytes]] | None = None

    def _texts(self) -> list[str]:
        d = self.directory
        try:
            texts = str(d.vectors[_TEXT], "utf-8").split("\0")
        except UnicodeDecodeError as exc:
            raise self.error("Columns.text", f"not valid UTF-8 ({exc.reason})") from None
        if texts.pop() != "":
            raise self.error("Columns.text", "the last value has no NUL after it", expected="NUL-terminated values")
        if len(texts) != d.text_count:
            raise self.error(
                "Columns.text",
                f"{len(texts)} values for the directory's {d.text_count}",
                expected="one value per text column row",
            )
        if len(d.text_index):  # what lazy readers jump with must be right: checked against the text itself
            ascii_only = len(d.vectors[_TEXT]) == sum(map(len, texts)) + len(texts)
            sizes = map(len, texts) if ascii_only else map(len, bytes(d.vectors[_TEXT]).split(b"\0"))
            starts = itertools.accumulate(map((1).__add__, sizes), initial=0)
            want = list(itertools.islice(starts, 0, len(texts), TEXT_STEP))
            if d.text_index.tolist() != want:
                j = next((j for j, (a, b) in enumerate(zip(d.text_index, want, strict=False)) if a != b), len(want))
                raise self.error(
                    "Columns.text_index",
                    f"entry {j} of {len(d.text_index)} is not where text value {TEXT_STEP * j} starts",
                    expected=f"{len(want)} entries, the start of every {TEXT_STEP}th value",
                )
        self.texts = texts
        return texts

    def _blobs(self) -> dict[str, list[bytes]]:
        d = self.directory
        blob = d.vectors[_BLOB]
        lengths = d.vectors[_U32_KIND]
        out: dict[str, list[bytes]] = {}
        at = 0
        for path, (kind, start, count) in d.entries.items():
            if kind == _BLOB:
                ends = list(itertools.accumulate(lengths[start : start + count], initial=at))
                if ends[-1] > len(blob):
                    raise self.error(path, f"the values need {ends[-1]} blob bytes, there are {len(blob)}")
                out[path] = list(map(bytes, map(blob.__getitem__, map(slice, ends, ends[1:]))))
                at = ends[-1]
        if at != len(blob):
            raise self.error("Columns.blob", f"the columns hold {at} bytes, the vector {len(blob)}", expected=f"{at}")
        self.blobs = out
        return out

    def column(
        self, path: str, n: int, plain: msgspec.msgpack.Decoder[Any], what: str, *, delta: bool = False
    ) -> tuple[list[Any], bool] | None:
        entry = self.entries.get(path)
        if entry is None:
            return None
        kind, start, count = entry
        if count != n:
            raise self.error(path, f"the column has {count} values", expected=f"{n}, one per row")
        check = _CHECKS.get(plain)  # an integer column whose check is known: one lookup
        mode = _M_INT if check is not None else _MODES.get(plain, _M_INT)
        if mode == _M_INT:
            if not _BOOL < kind <= _U64_KIND:  # bool, float64, text, blob
                raise self.error(path, f"a {KIND_NAMES[kind]} column", expected=f"integers ({what})")
            values: list[Any] = self.vectors[kind][start : start + n].tolist()
            if check is None:
                check = _checks(plain)
            if check.allowed is not None:  # enum values, variant ids (0: none)
                if check.same:
                    if check.allowed.keys() >= set(values):
                        return values, False
                else:
                    try:
                        return list(map(check.allowed.__getitem__, values)), False
                    except KeyError:
                        pass
                row = next(i for i, v in enumerate(values) if v not in check.allowed)
                raise self.error(path, f"row {row}: Invalid enum value {values[row]}", expected=what)
            if kind in check.fits or not values:
                return values, False
            lo, hi = check.lo, check.hi
            if (lo is not None and min(values) < lo) or (hi is not None and max(values) > hi):
                row = next(
                    i for i, v in enumerate(values) if (lo is not None and v < lo) or (hi is not None and v > hi)
                )
                raise self.error(path, f"row {row} holds {values[row]}", expected=what)
            return values, False
        if mode == _M_TEXT:
            if kind == _TEXT:
                texts = self.texts if self.texts is not None else self._texts()
                return texts[start : start + n], False
            if kind != _BLOB:
                raise self.error(path, f"a {KIND_NAMES[kind]} column", expected="text or blob")
            try:
                return [str(b, "utf-8") for b in (self.blobs if self.blobs is not None else self._blobs())[path]], False
            except UnicodeDecodeError as exc:
                raise self.error(path, f"a string is not valid UTF-8 ({exc.reason})") from None
        if mode == _M_BYTES:
            if kind != _BLOB:
                raise self.error(path, f"a {KIND_NAMES[kind]} column", expected="text or blob")
            return (self.blobs if self.blobs is not None else self._blobs())[path], False
        if mode == _M_BOOL:
            if kind != _BOOL:
                raise self.error(path, f"a {KIND_NAMES[kind]} column", expected="bool")
            raw = self.vectors[_BOOL][start : start + n]
            if n and max(raw) > 1:
                row = next(i for i, v in enumerate(raw) if v > 1)
                raise self.error(path, f"row {row} holds {raw[row]}", expected="booleans (0 or 1)")
            return list(map(bool, raw)), False
        if kind != _F64:
            raise self.error(path, f"a {KIND_NAMES[kind]} column", expected="float64")
        return self.vectors[_F64][start : start + n].tolist(), False


def decode_model(data: bytes | memoryview, root: type, *, source: str | None = None) -> Any:
    """Decode a ``Columns`` buffer (a side index and trailer after it are allowed, and ignored) into an
    instance of the struct type ``root``: what :func:`decode` reads, for any root type (see
    :func:`encode_model`). Every column is checked against the model before a row is built from it."""
    plan = col._plan(root)
    body, _ = fbc.split(data)
    directory = Directory(body, source)
    # Rows are many small objects and no garbage cycles: the cyclic collector's passes over them
    # midway would cost two thirds of the time on a 10k-node graph.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return plan.decode(_Reader(directory, len(data), source), 1)[0]
    finally:
        if collecting:
            gc.enable()


def decode(data: bytes | memoryview, version: tuple[int, int], *, source: str | None = None) -> Any:
    """Decode into the generated model of ``version`` (the side index is ignored)."""
    return decode_model(data, generated(version).model.Document, source=source)


@functools.cache
def _fields_by_path(table: col._Struct) -> dict[str, col._Node]:
    """A plan struct's field nodes by path (plans live as long as the process: one dict per table)."""
    return {f.node.path: f.node for f in table.fields}


# -- random access (tracepack.lazy) ----------------------------------------------------------------


class RandomAccess:
    """One row at a time from a column-layout payload, every access checked: what :mod:`tracepack.lazy` reads.

    Opening reads the directory (checked against the vectors) and finds where each ``text`` value
    starts (one split of the text at C speed); rows are then read from the typed vectors directly.
    A list's items start at the running sum of its ``#len`` column, computed once per column when
    first needed; a union's (or optional value's) row in its variant is the count of its tag before
    it (a C count over the tag column). Every index is checked against its column's length, every
    value against the model (integer bounds, enum values, variant ids, UTF-8), and a list may not
    ask for more rows than the payload has bytes: a damaged payload is a DecodeError naming the
    column and row, never an IndexError.
    """

    def __init__(
        self, body: memoryview, version: tuple[int, int], source: str | None, blocks: BlockFile | None = None
    ) -> None:
        self.source = source
        #: With block checksums (``blocks``): every byte is verified before it is read (see the module
        #: :mod:`tracepack.io.blocks`): the directory through a CheckedReader, the vectors as BlockViews,
        #: the text (scanned by regular expressions) by asking ``need`` for each range first.
        self.need: Callable[[int, int], None] | None = None
        if blocks is None:
            self.d = d = Directory(body, source)
        else:
            from tracepack.io.blocks import BlockView

            self.d = d = Directory(body, source, rt.CheckedReader(body, blocks.need))
            # BlockViews index, slice, iterate and list as the views do (all this class asks of them).
            d.vectors = [v if k == _TEXT else BlockView(blocks, v, d.starts[k]) for k, v in enumerate(d.vectors)]  # type: ignore[misc]
            d.text_index = BlockView(blocks, d.text_index, d.starts[_TEXT_INDEX - _FIRST])  # type: ignore[assignment]
            self.need = blocks.need
        #: The block size (:meth:`_scan` reads the text a block at a time).
        self.block = blocks.size if blocks is not None else 0
        self.limit = len(body)
        root: type = generated(version).model.Document
        self.plan = col._plan(root)
        self.text = text = d.vectors[_TEXT]
        self.text_at = d.starts[_TEXT] if blocks is not None else 0
        if len(text) and self.need is not None:
            self.need(self.text_at + len(text) - 1, self.text_at + len(text))
        if len(text) and text[-1] != 0:
            raise d.error("Columns.text", "the last value has no NUL after it", expected="NUL-terminated values")
        #: Where each text value starts, when there is no usable ``text_index`` (computed on first use).
        self.text_starts: list[int] | None = None
        self.index = d.text_index if len(d.text_index) == -(-d.text_count // TEXT_STEP) else None
        #: Values found by jumping from ``text_index`` so far (past :data:`_JUMPS`, every start is computed).
        self.jumps = 0
        self.sums: dict[str, list[int]] = {}
        #: The node name column's bytes and item size, once a name lookup needed it.
        self.names: tuple[bytes, int] | None = None
        self.fields = {f.node.path: f for f in self.plan.fields}
        graph = self.fields["$.graph"].node
        assert isinstance(graph, col._Struct)
        nodes = next(f.node for f in graph.fields if f.node.path == "$.graph.nodes")
        assert isinstance(nodes, col._List)
        assert isinstance(nodes.item, col._Struct)
        self.nodes = nodes
        self.node_fields = {f.node.path.rpartition(".")[2]: f for f in nodes.item.fields}
        #: Rows of the node table.
        self.node_count = self.count(nodes, 0)[1] if nodes.len_path in d.entries else 0

    def error(self, where: str, problem: str, expected: str | None = None) -> DecodeError:
        return DecodeError(problem, source=self.source, where=where, expected=expected)

    # -- columns ---------------------------------------------------------------------------------

    def _at(self, path: str, k: int) -> tuple[int, int]:
        """``(kind, position in the kind's vector)`` of row ``k`` of column ``path`` (which must exist)."""
        entry = self.d.entries.get(path)
        if entry is None:
            raise self.error(path, "the column is missing", expected=f"a value at row {k}")
        kind, start, count = entry
        if not 0 <= k < count:
            raise self.error(path, f"row {k} is past the column's {count} values", expected=f"a row below {count}")
        return kind, start + k

    def integer(self, node: col._Leaf | col._Union | col._Optional, k: int) -> Any:
        """Row ``k`` of an integer, enum, tag or presence column, checked."""
        if isinstance(node, col._Union):
            path, plain, what = node.tag_path, node.plain, node.what
        elif isinstance(node, col._Optional):
            path, plain, what = node.present_path, col._BOOLS, "booleans"
        else:
            path, plain, what = node.path, node.plain, node.what
        kind, at = self._at(path, k)
        if plain is col._BOOLS:
            if kind != _BOOL:
                raise self.error(path, f"a {KIND_NAMES[kind]} column", expected="bool")
            v = self.d.vectors[_BOOL][at]
            if v > 1:
                raise self.error(path, f"row {k} holds {v}", expected="booleans (0 or 1)")
            return bool(v)
        if plain is _FLOATS:
            if kind != _F64:
                raise self.error(path, f"a {KIND_NAMES[kind]} column", expected="float64")
            return self.d.vectors[_F64][at]
        if kind in (_BOOL, _F64, _TEXT, _BLOB):
            raise self.error(path, f"a {KIND_NAMES[kind]} column", expected=f"integers ({what})")
        v = self.d.vectors[kind][at]
        check = _checks(plain)
        if check.allowed is not None:
            if v not in check.allowed:
                raise self.error(path, f"row {k}: Invalid enum value {v}", expected=what)
            return check.allowed[v]
        if (check.lo is not None and v < check.lo) or (check.hi is not None and v > check.hi):
            raise self.error(path, f"row {k} holds {v}", expected=what)
        return v

    def raw_bytes(self, path: str, k: int) -> memoryview:
        """Row ``k`` of a text or blob column, as bytes (no copy)."""
        kind, at = self._at(path, k)
        if kind == _TEXT:
            return self.text_value(at)
        if kind != _BLOB:
            raise self.error(path, f"a {KIND_NAMES[kind]} column", expected="text or blob")
        ends = self.sums.get(path + "#blob")
        if ends is None:
            ends = self._blob_ends(path)
        i = at - self.d.entries[path][1]
        value = self.d.vectors[_BLOB][ends[i] : ends[i + 1]]
        return value if self.need is None else value.verified()  # type: ignore[attr-defined]

    def text_value(self, j: int) -> memoryview:
        """Text value ``j`` (below the directory's text count): found from the nearest ``text_index``
        entry, skipping at most ``TEXT_STEP - 1`` values; without an index, every start is computed once."""
        text = self.text
        index = self.index
        if index is None:
            starts = self.text_starts
            if starts is None:
                starts = self.text_starts = self._all_starts()
            return text[starts[j] : starts[j + 1] - 1]
        self.jumps += 1
        if self.jumps > _JUMPS:  # reading most of the text (every string, say): every start at once
            self.index = None
            return self.text_value(j)
        pos = index[j // TEXT_STEP]
        skip = j % TEXT_STEP
        need = self.need
        if pos and need is not None and pos <= len(text):
            need(self.text_at + pos - 1, self.text_at + pos)
        if pos > len(text) or (pos and text[pos - 1] != 0):
            raise self.error("Columns.text_index", f"entry {j // TEXT_STEP} ({pos}) is not where a value starts")
        m = _value(skip).match(text, pos) if need is None else self._scan(_value(skip).match, pos)
        if m is None:
            raise self.error("Columns.text", f"value {j} is past the end of the text")
        return text[m.start(1) : m.end(1)]

    def _scan(self, find: Callable[[Any, int, int], re.Match[bytes] | None], pos: int) -> re.Match[bytes] | None:
        """``find(text, pos)`` (a pattern's ``match``) reading only verified text: over a window from
        ``pos`` to the end of its block, then four times as long each time until it finds or reaches the
        end. The patterns here (NUL-terminated values) find the same within a window as in the whole
        text, when they find."""
        text, need, at, block = self.text, self.need, self.text_at, self.block
        assert need is not None
        n = len(text)
        end = min(n, ((at + pos) // block + 1) * block - at)  # to the end of the block at pos first
        while True:
            need(at + pos, at + end)
            m = find(text, pos, end)
            if m is not None or end == n:
                return m
            end = min(n, end + max(block, 3 * (end - pos)))

    def _all_starts(self) -> list[int]:
        if self.need is not None:
            self.need(self.text_at, self.text_at + len(self.text))
        parts = bytes(self.text).split(b"\0")
        parts.pop()
        if len(parts) != self.d.text_count:
            raise self.error("Columns.text", f"{len(parts)} values for the directory's {self.d.text_count}")
        return list(itertools.accumulate(map((1).__add__, map(len, parts)), initial=0))

    def _blob_ends(self, path: str) -> list[int]:
        lengths = self.d.vectors[_U32_KIND]
        at = 0
        for p, (kind, start, count) in self.d.entries.items():
            if kind == _BLOB:
                ends = list(itertools.accumulate(lengths[start : start + count], initial=at))
                if ends[-1] > len(self.d.vectors[_BLOB]):
                    raise self.error(
                        p, f"the values need {ends[-1]} blob bytes, there are {len(self.d.vectors[_BLOB])}"
                    )
                self.sums[p + "#blob"] = ends
                at = ends[-1]
        return self.sums[path + "#blob"]

    def count(self, node: col._List, k: int) -> tuple[int, int]:
        """``(first item row, end)`` of row ``k`` of a list (its ``#len`` column must exist)."""
        path = node.len_path
        sums = self.sums.get(path)
        if sums is None:
            kind, start, count = self.d.entries[path]
            if kind in (_BOOL, _F64, _TEXT, _BLOB) or KINDS[kind].islower():
                raise self.error(path, f"a {KIND_NAMES[kind]} column", expected="unsigned lengths")
            sums = self.sums[path] = list(itertools.accumulate(self.d.vectors[kind][start : start + count], initial=0))
        if not 0 <= k < len(sums) - 1:
            raise self.error(path, f"row {k} is past the column's {len(sums) - 1} values")
        a, b = sums[k], sums[k + 1]
        if b - a > self.limit:
            raise self.error(
                path, f"row {k} holds {b - a} items", expected=f"at most {self.limit} (the payload's bytes)"
            )
        return a, b

    def rank(self, path: str, k: int, value: int) -> int:
        """How many rows before ``k`` of the (checked) column ``path`` hold ``value``."""
        kind, start, _count = self.d.entries[path]
        view = self.d.vectors[kind][start : start + k]
        if view.itemsize == 1:
            return view.tobytes().count(bytes((value,)))
        return int(view.tolist().count(value))

    # -- rows --------------------------------------------------------------------------------------

    def row(self, node: col._Node, k: int) -> Any:
        """Row ``k`` of ``node``, in the model of the payload's version."""
        entries = self.d.entries
        if isinstance(node, col._Struct):
            values = []
            for f in node.fields:
                sub = f.node
                if isinstance(sub, col._Struct) or sub.column in entries:
                    values.append(self.row(sub, k))
                elif f.default is None:
                    raise self.error(sub.column, "the column is missing", expected="a value per row (no default)")
                else:
                    values.append(_default_value(f))
            return node.cls(*values)
        if isinstance(node, col._List):
            a, b = self.count(node, k)
            item = node.item
            return [self.row(item, j) for j in range(a, b)]
        if isinstance(node, col._Union):
            tag = self.integer(node, k)
            if tag is None:
                return None
            return self.row(node.variants[tag], self.rank(node.tag_path, k, tag))
        if isinstance(node, col._Optional):
            if not self.integer(node, k):
                return None
            return self.row(node.inner, self.rank(node.present_path, k, 1))
        assert isinstance(node, col._Leaf)
        if node.plain is col._STRINGS:
            try:
                return str(self.raw_bytes(node.path, k), "utf-8")
            except UnicodeDecodeError as exc:
                raise self.error(node.path, f"row {k}: not valid UTF-8 ({exc.reason})") from None
        if node.plain is _BYTES:
            return bytes(self.raw_bytes(node.path, k))
        return self.integer(node, k)

    def field(self, name: str) -> Any:
        """A field of the document (``header``, ``extensions``...), decoded whole."""
        f = self.fields[f"$.{name}"]
        if isinstance(f.node, col._Struct) or f.node.column in self.d.entries:
            return self.row(f.node, 0)
        if f.default is None:
            raise self.error(f.node.column, "the column is missing", expected="a value (no default)")
        return _default_value(f)

    def node(self, i: int) -> Any:
        """Node ``i`` (below :attr:`node_count`), decoded whole."""
        return self.row(self.nodes.item, i)

    def node_value(self, i: int, name: str, default: Any = None) -> Any:
        """Field ``name`` (a number) of node ``i``: its default when no row has another value;
        ``default`` when the version has no such field."""
        f = self.node_fields.get(name)
        if f is None:
            return default
        sub = f.node
        if sub.column not in self.d.entries:
            if f.default is None:
                raise self.error(sub.column, "the column is missing", expected="a value per node (no default)")
            return _default_value(f)
        assert isinstance(sub, col._Leaf)
        return self.integer(sub, i)

    def node_ints(self, i: int, name: str) -> list[int]:
        """Field ``name`` (a list of integers) of node ``i``."""
        f = self.node_fields.get(name)
        if f is None or f.node.column not in self.d.entries:
            return []
        sub = f.node
        assert isinstance(sub, col._List)
        assert isinstance(sub.item, col._Leaf)
        a, b = self.count(sub, i)
        if a == b:
            return []
        item = sub.item.path
        if item not in self.d.entries:
            raise self.error(item, "the column is missing", expected=f"{b} values at least")
        kind, start, count = self.d.entries[item]
        if b > count:
            raise self.error(item, f"rows {a}..{b - 1} are past the column's {count} values")
        if kind in (_BOOL, _F64, _TEXT, _BLOB):
            raise self.error(item, f"a {KIND_NAMES[kind]} column", expected="integers")
        values: list[int] = self.d.vectors[kind][start + a : start + b].tolist()
        check = _checks(sub.item.plain)
        if (check.lo is not None and min(values) < check.lo) or (check.hi is not None and max(values) > check.hi):
            raise self.error(item, f"rows {a}..{b - 1} hold {min(values)}..{max(values)}", expected=sub.item.what)
        return values

    def last_named_alike(self, i: int) -> int:
        """The last node whose name is node ``i``'s string (the one a name lookup returns, as in
        ``tracepack.Document``): ``i`` itself unless a damaged name column repeats the name."""
        names = self.names
        if names is None:
            entry = self.d.entries.get(self.node_fields["name"].node.path)
            if entry is None:  # every name is the default
                return self.node_count - 1
            kind, start, count = entry
            if kind in (_BOOL, _F64, _TEXT, _BLOB):
                return i  # not integers: node_value refuses the column
            column = self.d.vectors[kind][start : start + count]
            names = self.names = (column.tobytes(), column.itemsize)
        data, size = names
        if not 0 <= i < len(data) // size:
            return i
        # The last element holding node i's value: its bytes found from the end at C speed, skipping
        # matches that straddle two elements (at least one aligned match, node i's own, exists).
        needle = data[i * size : (i + 1) * size]
        at = data.rfind(needle)
        while at % size:
            at = data.rfind(needle, 0, at + size - 1)
        return at // size

    def table_column(self, name: str, column: str) -> memoryview | None:
        """Column ``column`` of the table ``name`` as a zero-copy typed view (None: not stored, the
        column's default). As decoding reads it: its ``#len`` says whether it is stored and how many
        values it has, and its values column must hold exactly those."""
        table = self.fields[f"$.{name}"].node
        if isinstance(table, col._Optional):
            table = table.inner
        assert isinstance(table, col._Struct)
        node = _fields_by_path(table).get(f"$.{name}.{column}")
        if not isinstance(node, col._List) or node.len_path not in self.d.entries:
            return None
        a, b = self.count(node, 0)
        path = node.item.path
        entry = self.d.entries.get(path)
        if entry is None:
            if a == b:
                return None
            raise self.error(path, "the column is missing", expected=f"{b - a} values")
        kind, start, count = entry
        if count != b - a:
            raise self.error(path, f"the column has {count} values", expected=f"{b - a}, as {node.len_path} says")
        if kind in (_F64, _TEXT, _BLOB):
            raise self.error(path, f"a {KIND_NAMES[kind]} column", expected="integers")
        return self.d.vectors[kind][start : start + count]

    def present(self, name: str) -> bool:
        """Whether the optional table ``name`` is there."""
        path = f"$.{name}#present"
        return path in self.d.entries and bool(self.integer(self.fields[f"$.{name}"].node, 0))  # type: ignore[arg-type]

    @property
    def string_count(self) -> int:
        entry = self.d.entries.get("$.strings[]")
        return 0 if entry is None else entry[2]
