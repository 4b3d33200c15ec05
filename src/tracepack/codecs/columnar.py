"""The columnar codec: the whole document shredded into one column per path, for compression.

The bytes, as any reader must read them, are specified in spec/06-columnar.md; this is how this
implementation writes and reads them.

Rows of the positional codec interleave fields (a node's name, target, inputs, stack...), and
the string-index columns in them grow steadily: zstd sees neither. This codec stores every
*path* of the typed document as one column, Dremel-style, and delta-codes integer columns
where that makes them smaller, so a general-purpose compressor finds long runs of alike values.

The payload is a MessagePack map::

    {"format": "tracepack-columnar", "layout": 2,
     "columns": {key: [encoding, [value, ...]], ...}}

A column's key is its path's *number* when the path has one, else the path itself. Every column
path of every released schema version is numbered once, in release order (each release's paths in
the order they are written, a path already numbered keeping its number): :func:`path_numbers`.
Releases are immutable and only append numbers, so a build reads the numbers of every release it
knows, and a number it does not know is a newer release's column, ignored like an unknown path. A
draft's new paths are written by name. (Layout 1, which builds before it wrote and this one still
reads, keyed every column by its path: at a few dozen nodes the paths were 2-3% of the compressed
file, dictionary or not.)

Paths are written like error places, starting at ``$`` (the one ``Document`` row):

``$.a.b``
    a struct field: one value per row of the struct (``$.graph.nodes[].stack``);
``P#len`` and ``P[]``
    a list: its length per row, and all rows' items, concatenated, under ``P[]``
    (``$.strings#len`` holds one length, ``$.strings[]`` every string);
``P#tag`` and ``P<id>``
    a union: its variant id per row (nil for an optional union's None), and the rows of
    each variant under ``P<id>`` (``$.graph.nodes[].inputs[].arg<2>.name``);
``P#present``
    an optional field that is not a union: true where it has a value; the values' rows are
    shredded under ``P`` itself (``$.header.producer#present``, ``$.header.producer.name``).

``encoding`` is ``"plain"`` (the values) or ``"delta"`` (integer columns only: the first value,
then each value minus the one before; MessagePack signed integers make zigzag implicit). The
writer picks delta for an integer column when it makes the column's MessagePack bytes strictly
smaller, so the choice is deterministic. String columns may also be ``"forms"``:
``[literals, row steps, prefixes, suffixes, number residuals]``, where each numbered string
(``add_7``, ``add_8;method_descriptor.add``, ``blocks.3.attn``: no whitespace, at most 256
characters, split at its last run of digits) is an empty literal plus a form: the literals before
and after its number, and the number minus the one predicted (one more than the last number with
the same prefix and suffix; 0 first), so torch's counters become runs of zeros that repeat layer
after layer (:func:`_forms`). The writer tries it when at least half of an evenly spaced sample of
the column's strings are numbered, and picks it when zstd (level 3) makes it smaller than the
plain column, or without comparing when at least three fifths are (:func:`_surely_forms`).
Builds before it refuse such a column with "unknown column encoding 'forms'".
A column with no rows is not written. Equal documents give equal bytes.

Reading is by name, like the JSON codec, for fields, and by number, like MessagePack, for enum
values and union variants: an unknown column is ignored (a newer minor's field); a missing one
is the field's default in every row (an older file; a field without a default is an error
when the struct has rows); an unknown enum value or variant id is an error naming its column.
No row is built from a column before the column is checked: its element types, integer
bounds (the model's ``Meta(ge, le)``), enum values and variant ids (by msgspec, in C, while
decoding the column; again after undoing deltas), its length against the rows it serves,
``#len`` values (non-negative; they sum to the length of the items' columns). Rows that no
stored column counts (defaults, fieldless structs) are capped at one per byte of the payload,
so a few bytes cannot ask for a billion rows. Every problem is a
:class:`~tracepack.errors.DecodeError` with the column's path (and the row). Rows are then
built at C speed: ``list(map(StructClass, *columns))``, lists split with precomputed offsets,
deltas undone with ``itertools.accumulate``, union rows merged by tag. Columns a reader does
not know, and columns of paths without rows, are never even decoded.

The plan (which columns, which checks) is derived from the generated model of each schema
version with :func:`msgspec.inspect.type_info`: there is no per-version code.
"""

from __future__ import annotations

import bisect
import contextlib
import enum
import gc
import importlib
import inspect
import itertools
import operator
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from types import ModuleType
from typing import Annotated, Any, ClassVar, Final, Literal

import msgspec
import msgspec.inspect as mi
import zstandard

from tracepack.codecs._utf8 import bad_utf8_reason
from tracepack.errors import NOT_DECODE_ERRORS, DecodeError, EncodeError, SchemaError
from tracepack.versions import RELEASED, generated

__all__ = [
    "DELTA",
    "FORMAT",
    "FORMS",
    "LAG",
    "LAYOUT",
    "LAYOUTS",
    "PLAIN",
    "column_paths",
    "decode",
    "decode_model",
    "encode",
    "encode_model",
    "path_numbers",
    "plain_strings",
    "without_lag",
]

#: The payload's format marker.
FORMAT: Final = "tracepack-columnar"
#: The layout of columns this build writes when no column needs more (the path grammar, numbering and
#: encodings above). A payload with a ``lag`` column is written as :data:`LAG_LAYOUT`.
LAYOUT: Final = 2
#: Layout 2 plus the ``lag`` encoding of integer columns: builds before it refuse such a payload in one
#: line ("columnar layout 3 is not readable by this build") instead of meeting an unknown encoding.
LAG_LAYOUT: Final = 3
#: The layouts this build reads (1: every column keyed by its path).
LAYOUTS: Final = (1, 2, 3)
#: Column encodings.
PLAIN: Final = "plain"
DELTA: Final = "delta"
FORMS: Final = "forms"
LAG: Final = "lag"
#: A ``lag`` column's lag: from 1 (``delta``) to this.
LAG_MAX: Final = 64

_NONE_TYPE: Final = type(None)


class _Payload(msgspec.Struct, frozen=True):
    """The payload map (keyed: other keys are ignored). Columns stay raw until a node asks for them."""

    format: str
    layout: int
    columns: dict[str | Annotated[int, msgspec.Meta(ge=0)], tuple[str, msgspec.Raw]]


# -- reading ---------------------------------------------------------------------------------------

_ROW: Final = re.compile(r"^`\$\[(\d+)\]")


@cache
def _decoder(t: Any) -> msgspec.msgpack.Decoder[Any]:
    """A decoder of a list of ``t``: msgspec checks every element's type, bounds and enum value in C."""
    return msgspec.msgpack.Decoder(list[t])


_INT_LIST: Final = _decoder(int)
_LENGTHS: Final = _decoder(Annotated[int, msgspec.Meta(ge=0)])
_BOOLS: Final = _decoder(bool)


def _int_type(lo: int | None, hi: int | None) -> Any:
    return int if lo is None and hi is None else Annotated[int, msgspec.Meta(ge=lo, le=hi)]


class _Reader:
    """The columns of one payload, and the checks every node shares."""

    __slots__ = ("columns", "layout", "limit", "source")

    def __init__(
        self, columns: dict[str, tuple[str, msgspec.Raw]], limit: int, source: str | None, layout: int = LAYOUT
    ) -> None:
        self.columns = columns
        self.source = source
        self.layout = layout
        #: The most rows a struct may have without a stored column that counts them.
        self.limit = limit

    def error(self, where: str, problem: str, expected: str | None = None) -> DecodeError:
        return DecodeError(problem, source=self.source, where=where, expected=expected)

    def column(
        self, path: str, n: int, plain: msgspec.msgpack.Decoder[Any], what: str, *, delta: bool = False
    ) -> tuple[list[Any], bool] | None:
        """Column ``path``: its ``n`` values (deltas undone) and whether it was delta-coded; None when absent.

        ``plain`` decodes a plain column, checking each value's type, bounds or enum value; a
        delta-coded column (``delta`` or ``lag``), allowed when ``delta``, holds integers, whose sums the
        caller checks.
        """
        entry = self.columns.get(path)
        if entry is None:
            return None
        encoding, raw = entry
        if encoding == FORMS and plain is _STRINGS:
            return self.forms(path, n, raw), False
        if encoding == PLAIN:
            decoder = plain
        elif encoding == LAG and self.layout >= LAG_LAYOUT:
            if not delta:
                raise self.error(path, "lag encoding of a column that does not hold integers", expected="'plain'")
            return self.lagged(path, n, raw), True
        elif encoding != DELTA:
            if encoding == LAG:
                raise self.error(
                    path, f"lag encoding in a columnar layout {self.layout} payload", expected=f"layout {LAG_LAYOUT}"
                )
            known = "'plain', 'delta' or 'lag'" if self.layout >= LAG_LAYOUT else "'plain' or 'delta'"
            raise self.error(path, f"unknown column encoding {encoding!r}", expected=known)
        elif not delta:
            raise self.error(path, "delta encoding of a column that does not hold integers", expected="'plain'")
        else:
            decoder = _INT_LIST
        try:
            values: list[Any] = decoder.decode(raw)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            reason = bad_utf8_reason(exc, raw, decoder.decode, json=False)
            if reason is not None:
                raise self.error(path, f"a string is not valid UTF-8 ({reason})") from None
            if isinstance(exc, msgspec.ValidationError):
                text, sep, at = str(exc).rpartition(" - at ")
                m = _ROW.match(at) if sep else None
                if m is None:
                    raise self.error(path, f"not a list of values: {exc}", expected=what) from None
                raise self.error(path, f"row {m.group(1)}: {text}", expected=what) from None
            raise self.error(path, f"not valid MessagePack: {exc}") from None
        if len(values) != n:
            raise self.error(path, f"the column has {len(values)} values", expected=f"{n}, one per row")
        if encoding == DELTA:
            return list(itertools.accumulate(values)), True
        return values, False

    def lagged(self, path: str, n: int, raw: msgspec.Raw) -> list[int]:
        """A ``lag``-coded column's ``n`` values: ``[K, [d0, d1, ...]]``, row ``i`` is ``d_i`` plus row
        ``i - K`` (``d_i`` alone for the first ``K`` rows); the caller checks the sums' range."""
        try:
            lag, deltas = _LAG_DECODER.decode(raw)
        except msgspec.ValidationError as exc:
            raise self.error(path, f"not a lag column: {exc}", expected=_LAG_WHAT) from None
        except msgspec.DecodeError as exc:
            raise self.error(path, f"not valid MessagePack: {exc}") from None
        if len(deltas) != n:
            raise self.error(path, f"the column has {len(deltas)} values", expected=f"{n}, one per row")
        out = deltas[:]
        for lane in range(min(lag, n)):  # each lane (rows lane, lane + K, ...) is a running sum
            out[lane::lag] = itertools.accumulate(deltas[lane::lag])
        return out

    def forms(self, path: str, n: int, raw: msgspec.Raw) -> list[str]:
        """A ``forms``-encoded string column: literals, then strings rebuilt as prefix + number + suffix."""
        try:
            literals, steps, prefixes, suffixes, residuals = _FORMS_DECODER.decode(raw)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            reason = bad_utf8_reason(exc, raw, _FORMS_DECODER.decode, json=False)
            if reason is not None:
                raise self.error(path, f"a string is not valid UTF-8 ({reason})") from None
            if isinstance(exc, msgspec.ValidationError):
                raise self.error(path, f"not a forms column: {exc}", expected=_FORMS_WHAT) from None
            raise self.error(path, f"not valid MessagePack: {exc}") from None
        if not len(steps) == len(prefixes) == len(suffixes) == len(residuals):
            raise self.error(path, "the forms' columns differ in length", expected=_FORMS_WHAT)
        if len(literals) < n:
            raise self.error(path, f"the column has {len(literals)} literals", expected=f"at least {n}, one per row")
        if _cforms is not None:  # every check below and the strings in C; None: a check failed, said below
            strings: list[str] | None = _cforms.unforms(
                literals, steps, prefixes, suffixes, residuals, n, _FORM_NUMBER_LIMIT, _FORM_AFFIX_MAX
            )
            if strings is not None:
                return strings
        if not steps:
            return literals[:n]
        # Every check first, at C speed where it can be; the rows are built after.
        rows = list(itertools.accumulate(steps))
        if rows[-1] >= n or (len(steps) > 1 and min(itertools.islice(steps, 1, None)) < 1):
            j = next(j for j, (step, row) in enumerate(zip(steps, rows, strict=True)) if (j and step < 1) or row >= n)
            raise self.error(path, f"form {j} is for row {rows[j]}", expected="rows ascending, below the row count")
        out = literals[:n]
        if any(map(out.__getitem__, rows)):
            j = next(j for j, row in enumerate(rows) if out[row])
            raise self.error(path, f"form {j}: row {rows[j]} also holds a literal", expected="an empty literal")
        # The affixes' checks run once per distinct literal: a form row is found in the ascending rows.
        width = len(literals)
        used_prefixes, used_suffixes = set(prefixes), set(suffixes)
        if (
            max(used_prefixes) >= width
            or max(used_suffixes) >= width
            or any(map(_in_ascending, itertools.repeat(rows), used_prefixes | used_suffixes))
        ):
            taken = set(rows)
            j = next(
                j
                for j, (p, q) in enumerate(zip(prefixes, suffixes, strict=True))
                if p >= width or q >= width or p in taken or q in taken
            )
            raise self.error(
                path, f"form {j} refers to literals {prefixes[j]} and {suffixes[j]}", expected="literal rows, not forms"
            )
        longest = max(map(len, map(literals.__getitem__, used_prefixes)))
        if longest + max(map(len, map(literals.__getitem__, used_suffixes))) > _FORM_AFFIX_MAX:
            for j, (p, q) in enumerate(zip(prefixes, suffixes, strict=True)):
                if len(literals[p]) + len(literals[q]) > _FORM_AFFIX_MAX:
                    raise self.error(
                        path, f"form {j}: prefix and suffix are too long", expected=f"<= {_FORM_AFFIX_MAX}"
                    )
        # One pass: each number from the last one with its prefix and suffix, and its string. Numbers
        # are bounded by the residuals (int64) times the forms, so the strings stay short; a number out
        # of range fails the column before the strings are returned.
        last: dict[int, int] = {}
        get = last.get
        if min(residuals) >= 0 and sum(residuals) + len(residuals) <= _FORM_NUMBER_LIMIT:
            # Every number is then in range (each is at most the residuals plus the forms before it, and
            # none is below 0), so none is kept to check: the common case, a torch counter never steps back.
            for row, p, q, residual in zip(rows, prefixes, suffixes, residuals, strict=True):
                key = p * width + q
                last[key] = number = get(key, -1) + 1 + residual
                out[row] = f"{literals[p]}{number}{literals[q]}"
            return out
        numbers: list[int] = []
        append = numbers.append
        for row, p, q, residual in zip(rows, prefixes, suffixes, residuals, strict=True):
            key = p * width + q
            number = get(key, -1) + 1 + residual
            last[key] = number
            append(number)
            out[row] = f"{literals[p]}{number}{literals[q]}"
        if min(numbers) < 0 or max(numbers) >= _FORM_NUMBER_LIMIT:
            j = next(j for j, v in enumerate(numbers) if not 0 <= v < _FORM_NUMBER_LIMIT)
            raise self.error(path, f"form {j} has number {numbers[j]}", expected=f"0..{_FORM_NUMBER_LIMIT - 1}")
        return out

    def bounds(self, path: str, values: list[int], lo: int | None, hi: int | None) -> None:
        """Check that the integers ``values`` are in ``lo..hi`` (for delta-coded columns)."""
        if not values:
            return
        if lo is not None and min(values) < lo:
            row = next(i for i, v in enumerate(values) if v < lo)
            raise self.error(path, f"row {row} holds {values[row]} (delta-coded)", expected=_range(lo, hi))
        if hi is not None and max(values) > hi:
            row = next(i for i, v in enumerate(values) if v > hi)
            raise self.error(path, f"row {row} holds {values[row]} (delta-coded)", expected=_range(lo, hi))

    def rows(self, path: str, n: int) -> None:
        """Check ``n`` rows that no stored column counts (defaults, fieldless structs)."""
        if n > self.limit:
            raise self.error(
                path,
                f"{n} rows without a stored column",
                expected=f"at most {self.limit} (one per byte of the payload)",
            )


def _in_ascending(values: list[int], value: int) -> bool:
    """Whether ``value`` is one of the strictly ascending ``values``."""
    i = bisect.bisect_left(values, value)
    return i < len(values) and values[i] == value


def _range(lo: int | None, hi: int | None) -> str:
    if lo is None and hi is None:
        return "integers"
    if lo is None:
        return f"integers <= {hi}"
    if hi is None:
        return f"integers >= {lo}"
    return f"integers in {lo}..{hi}"


# -- the forms encoding of string columns ----------------------------------------------------------

_STRINGS: Final = _decoder(str)
#: The forms loops in C (``_cforms.c``), or None: not built (no compiler when installed from the sdist,
#: another Python implementation) or turned off with ``TRACEPACK_PURE_PYTHON=1``. Both give the same
#: columns and the same strings; tests run both.
_cforms: ModuleType | None = None
if not os.environ.get("TRACEPACK_PURE_PYTHON"):
    try:
        _cforms = importlib.import_module("tracepack.codecs._cforms")
    except ImportError:  # not built: depends on how the package was installed
        _cforms = None
#: ``[literals, row steps, prefix literal, suffix literal, number residuals]``.
_FORMS_DECODER: Final = msgspec.msgpack.Decoder(
    tuple[
        list[str],
        list[Annotated[int, msgspec.Meta(ge=0)]],
        list[Annotated[int, msgspec.Meta(ge=0)]],
        list[Annotated[int, msgspec.Meta(ge=0)]],
        list[Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]],
    ]
)
_FORMS_WHAT: Final = "[literals, row steps, prefixes, suffixes, number residuals]"
_LAG_DECODER: Final = msgspec.msgpack.Decoder(tuple[Annotated[int, msgspec.Meta(ge=1, le=LAG_MAX)], list[int]])
_LAG_WHAT: Final = f"[lag 1..{LAG_MAX}, [integer differences]]"
#: Integer columns shorter than this are never ``lag``-coded; the lags the writer tries, and how many rows
#: of the column it weighs them on (the lag is then weighed against the column's encoding by zstd).
_LAG_MIN_ROWS: Final = 16
_LAG_TRIED: Final = range(2, 9)
_LAG_SAMPLE: Final = 4096
#: A string without whitespace, split at its last run of decimal digits (no leading zero): a form.
_FORM: Final = re.compile(r"([^\s]*?)(0|[1-9][0-9]{0,17})([^0-9\s]*)", re.S)
_FORM_NUMBER_LIMIT: Final = 10**18
#: The longest prefix + suffix of a form (the writer makes forms of short strings only), so a
#: few payload bytes cannot ask for long strings.
_FORM_AFFIX_MAX: Final = 256
#: String columns shorter than this are always plain.
_FORMS_MIN_ROWS: Final = 16
#: How many rows the writer samples to decide whether a column may pay as forms (:func:`_mostly_numbered`).
_FORMS_SAMPLE: Final = 64
#: The share of the sample numbered (3/5) from which the writer takes ``forms`` without comparing
#: (:func:`_surely_forms`); from half of it up to that, it compares.
_FORMS_SURE: Final = (3, 5)
#: How the writer compares the plain and forms encodings of a column: what zstd makes of each.
_ZSTD: Final = zstandard.ZstdCompressor(level=3)


@contextlib.contextmanager
def plain_strings() -> Iterator[None]:
    """Write string columns plain while in the block, as builds before the ``forms`` encoding did
    (for benchmarks that time today's encoding against that of those builds)."""
    saved, _Writer.forms_min_rows = _Writer.forms_min_rows, sys.maxsize
    try:
        yield
    finally:
        _Writer.forms_min_rows = saved


@contextlib.contextmanager
def without_lag() -> Iterator[None]:
    """Write no ``lag`` column while in the block (layout 2, as builds before it), for benchmarks that weigh
    the encoding and tests that need a layout 2 payload."""
    saved, _Writer.lags = _Writer.lags, False
    try:
        yield
    finally:
        _Writer.lags = saved


@contextlib.contextmanager
def python_loops() -> Iterator[None]:
    """Run the ``forms`` loops in Python while in the block, as an install without the C module does
    (for benchmarks that report both; the bytes are the same)."""
    global _cforms  # noqa: PLW0603 - the one switch between the two implementations
    saved, _cforms = _cforms, None
    try:
        yield
    finally:
        _cforms = saved


def _forms(values: Sequence[str]) -> list[Any] | None:
    """The ``forms`` encoding of a string column, or None when no string has a number: :func:`_forms_py`,
    computed by the C module ``_cforms`` where it is built (the same lists; about 15x faster)."""
    if _cforms is None:
        return _forms_py(values)
    try:
        forms: list[Any] | None = _cforms.forms(values if type(values) is list else list(values), _FORM_AFFIX_MAX)
    except TypeError:  # not every row an exact str (a subclass): the Python loops take any str
        return _forms_py(values)
    return forms


def _forms_py(values: Sequence[str]) -> list[Any] | None:
    """The ``forms`` encoding of a string column, or None when no string has a number.

    A string without whitespace, of at most :data:`_FORM_AFFIX_MAX` characters, whose last run of
    digits is a canonical decimal number, is stored as a *form*: its row holds an empty literal,
    and the form names the literals before and after the number, and the number as its difference
    from the one predicted: one more than the last number with the same prefix and suffix (0 for
    the first). Node names (``add_7``), torch_fn tags (``add_8;method_descriptor.add``) and module
    paths (``layers.3.attn``) then become runs of small, repeating integers. A prefix or suffix that
    is no row's literal is appended after the rows.
    """
    literals = list(values)
    where: dict[str, int] = {}
    rows: list[int] = []
    matches: list[re.Match[str]] = []
    match = _FORM.fullmatch
    for i, s in enumerate(values):  # first every row's literal, so prefixes find them wherever they are
        m = match(s) if len(s) <= _FORM_AFFIX_MAX else None
        if m is None:
            where.setdefault(s, i)
        else:
            literals[i] = ""
            rows.append(i)
            matches.append(m)
    if not rows:
        return None
    prefixes: list[int] = []
    suffixes: list[int] = []
    residuals: list[int] = []
    last: dict[int, int] = {}
    for m in matches:
        prefix, digits, suffix = m.groups()
        p = where.get(prefix)
        if p is None:
            p = where[prefix] = len(literals)
            literals.append(prefix)
        q = where.get(suffix)
        if q is None:
            q = where[suffix] = len(literals)
            literals.append(suffix)
        number = int(digits)
        key = p << 32 | q
        residuals.append(number - last.get(key, -1) - 1)
        last[key] = number
        prefixes.append(p)
        suffixes.append(q)
    steps = [rows[0], *map(operator.sub, itertools.islice(rows, 1, None), rows)]
    return [literals, steps, prefixes, suffixes, residuals]


def _numbered(values: Sequence[str]) -> tuple[int, int]:
    """``(numbered, sampled)``: how many of an evenly spaced sample of :data:`_FORMS_SAMPLE` rows of
    ``values`` (all rows when fewer) are numbered strings, and the sample's size."""
    sample = values[:: max(1, len(values) // _FORMS_SAMPLE)]
    if _cforms is not None and all(type(s) is str for s in sample):
        return int(_cforms.numbered(list(sample), _FORM_AFFIX_MAX)), len(sample)
    match = _FORM.fullmatch
    return sum(1 for s in sample if len(s) <= _FORM_AFFIX_MAX and match(s) is not None), len(sample)


def _mostly_numbered(values: Sequence[str]) -> bool:
    """Whether at least half of the sample (:func:`_numbered`) is numbered: only then may ``forms`` pay,
    and is it worth computing.

    The ``forms`` encoding costs each numbered string a prefix, a suffix and a residual, and makes
    every other row's literal: in columns where few strings are numbered it is larger after zstd
    than the plain column (torch exports below ~60 nodes: 14-49% of the strings numbered; it first
    pays at ~65%), and computing it only to drop it was most of the writer's time there.
    """
    return _may_pay(*_numbered(values))


def _may_pay(numbered: int, sampled: int) -> bool:
    """:func:`_mostly_numbered` on the sample's counts."""
    return 2 * numbered >= sampled


def _surely_forms(numbered: int, sampled: int) -> bool:
    """Whether so much of the sample is numbered (:data:`_FORMS_SURE`) that ``forms`` is written without
    the trial compressions: across the test corpus, the release samples and the size ladder (50 torch
    string tables, 5 to 10,245 nodes), every string table with 60% or more of its sample numbered was
    smaller as forms, by 1-85% after zstd, or within 0.4% of the plain column (60-70% numbered:
    transformers of 47-69 nodes); the trial cost 35-120 us a file, as much as writing the forms."""
    return numbered * _FORMS_SURE[1] >= sampled * _FORMS_SURE[0]


# -- writing ---------------------------------------------------------------------------------------

_encoder: Final = msgspec.msgpack.Encoder()


class _Writer:
    """Columns as they are written: path -> (encoding, the encoded values)."""

    __slots__ = ("columns", "lagged")
    #: String columns shorter than this are always plain.
    forms_min_rows: ClassVar[int] = _FORMS_MIN_ROWS
    #: Whether integer columns may be ``lag``-coded (:func:`without_lag` turns it off).
    lags: ClassVar[bool] = True

    def __init__(self) -> None:
        self.columns: dict[str, tuple[str, msgspec.Raw]] = {}
        #: Whether a column is ``lag``-coded: the payload is then layout :data:`LAG_LAYOUT`.
        self.lagged = False

    @property
    def layout(self) -> int:
        return LAG_LAYOUT if self.lagged else LAYOUT

    def put(self, path: str, values: Sequence[Any], *, integer: bool = False, strings: bool = False) -> None:
        if not values:
            return
        data = _encoder.encode(values)
        encoding = PLAIN
        if strings and len(values) >= self.forms_min_rows:
            numbered, sampled = _numbered(values)
            forms = _forms(values) if _may_pay(numbered, sampled) else None
            if forms is not None:
                packed = _encoder.encode(forms)
                if _surely_forms(numbered, sampled) or len(_ZSTD.compress(packed)) < len(_ZSTD.compress(data)):
                    data, encoding = packed, FORMS
        if integer and len(values) > 2:
            try:
                packed = _encoder.encode(_lag_deltas(values, 1))
            except OverflowError:  # a delta outside MessagePack's integers: plain it is
                pass
            else:
                if len(packed) < len(data):
                    data, encoding = packed, DELTA
            if self.lags and len(values) >= _LAG_MIN_ROWS:
                lagged = _lag_packed(values, data)
                if lagged is not None:
                    data, encoding, self.lagged = lagged, LAG, True
        self.columns[path] = (encoding, msgspec.Raw(data))


def _lag_deltas(values: Sequence[int], lag: int) -> list[int]:
    """Each value minus the one ``lag`` rows before it (the first ``lag`` values as they are)."""
    return [*values[:lag], *map(operator.sub, itertools.islice(values, lag, None), values)]


def _lag_packed(values: Sequence[int], current: bytes) -> bytes | None:
    """The ``lag`` encoding of an integer column when zstd makes it smaller than ``current`` (the column as
    ``plain`` or ``delta`` would store it), else None.

    Lists of a fixed shape shred into columns whose values repeat with a period: a node's metadata values
    (stack trace, module stack, then its ``torch_fn`` string: ``-1, -2, 740, -1, -2, 741, ...``), a
    value's shape. Differences against the value one period back are then runs of zeros and small steps,
    where ``delta`` (a period of 1) gives large jumps. The period is the one of :data:`_LAG_TRIED` whose
    differences are the smallest MessagePack over the first :data:`_LAG_SAMPLE` rows; zstd (level 3, as
    for ``forms``) then decides against the column's own encoding.
    """
    sample = values[:_LAG_SAMPLE]
    best: tuple[int, int, bytes] | None = None
    for lag in _LAG_TRIED:
        try:
            encoded = _encoder.encode(_lag_deltas(sample, lag))
        except OverflowError:  # a difference outside MessagePack's integers
            continue
        if best is None or len(encoded) < best[0]:  # the smallest lag of equal sizes
            best = (len(encoded), lag, encoded)
    if best is None:
        return None
    _, lag, encoded = best
    if len(values) > len(sample):  # the sample was a part: the whole column's differences
        try:
            encoded = _encoder.encode(_lag_deltas(values, lag))
        except OverflowError:
            return None
    packed = bytes((0x92, lag)) + encoded  # [K, D]: a 2-array, K a positive fixint (the lags tried are < 128)
    return packed if len(_ZSTD.compress(packed)) < len(_ZSTD.compress(current)) else None


# -- the plan: one node per path of the model --------------------------------------------------------


class _Node:
    """One path of the document: how its rows are written and read back."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def encode(self, values: Sequence[Any], w: _Writer) -> None:
        raise NotImplementedError

    def decode(self, r: _Reader, n: int) -> list[Any] | None:
        """``n`` rows, or None when this path's own column is not stored."""
        raise NotImplementedError

    def paths(self) -> list[str]:
        """Every column path under this node, in the order they are written."""
        raise NotImplementedError

    @property
    def column(self) -> str:
        """The path of this node's own column: the one that says whether it is stored."""
        return self.path

    def required(self, r: _Reader, n: int) -> list[Any]:
        """``n`` rows; a missing column is an error when there are rows."""
        values = self.decode(r, n)
        if values is None:
            if n:
                raise r.error(self.column, "the column is missing", expected=f"{n} values")
            return []
        return values


class _Leaf(_Node):
    """A column of scalars: ``plain`` is the element type a plain column holds, ``what`` says it in words."""

    __slots__ = ("plain", "what")
    integer = False

    def __init__(self, path: str, plain: Any, what: str) -> None:
        super().__init__(path)
        self.plain = _decoder(plain)
        self.what = what

    def encode(self, values: Sequence[Any], w: _Writer) -> None:
        w.put(self.path, values, integer=self.integer, strings=self.plain is _STRINGS)

    def decode(self, r: _Reader, n: int) -> list[Any] | None:
        if not n:  # no rows: nothing to read (a writer stores no empty column)
            return []
        got = r.column(self.path, n, self.plain, self.what, delta=self.integer)
        if got is None:
            return None
        values, summed = got
        return self.undelta(r, values) if summed else values

    def undelta(self, r: _Reader, values: list[int]) -> list[Any]:
        """Check (and convert) the sums of a delta-coded column."""
        raise NotImplementedError

    def paths(self) -> list[str]:
        return [self.path]


class _Int(_Leaf):
    __slots__ = ("hi", "lo")
    integer = True

    def __init__(self, path: str, lo: int | None, hi: int | None) -> None:
        super().__init__(path, _int_type(lo, hi), _range(lo, hi))
        self.lo, self.hi = lo, hi

    def undelta(self, r: _Reader, values: list[int]) -> list[Any]:
        r.bounds(self.path, values, self.lo, self.hi)
        return values


class _Enum(_Leaf):
    __slots__ = ("members",)
    integer = True

    def __init__(self, path: str, cls: type[enum.IntEnum]) -> None:
        super().__init__(path, cls, f"{cls.__name__} values " + ", ".join(f"{m.value} ({m.name.lower()})" for m in cls))
        self.members: dict[int, Any] = {m.value: m for m in cls}

    def undelta(self, r: _Reader, values: list[int]) -> list[Any]:
        unknown = set(values) - self.members.keys()
        if unknown:
            row = next(i for i, v in enumerate(values) if v in unknown)
            raise r.error(self.path, f"row {row} holds {values[row]} (delta-coded)", expected=self.what)
        return list(map(self.members.__getitem__, values))


class _Field:
    """A struct field: its node, its getter and how its default fills rows (None: it has no default)."""

    __slots__ = ("default", "get", "node")

    def __init__(self, name: str, node: _Node, default: Callable[[int], list[Any]] | None) -> None:
        self.node = node
        self.get = operator.attrgetter(name)
        self.default = default


def _default(f: mi.Field) -> Callable[[int], list[Any]] | None:
    factory = f.default_factory
    if factory is not msgspec.NODEFAULT:
        return lambda n: [factory() for _ in range(n)]
    value = f.default
    if value is msgspec.NODEFAULT:
        return None
    if isinstance(value, (list, dict, set, bytearray, msgspec.Struct)):  # mutable: one copy per row
        return lambda n: [msgspec.structs.replace(value) if isinstance(value, msgspec.Struct) else value.copy()
                          for _ in range(n)]  # fmt: skip
    return lambda n: [value] * n


class _Struct(_Node):
    __slots__ = ("cls", "fields")

    def __init__(self, path: str, cls: type, fields: list[_Field]) -> None:
        super().__init__(path)
        self.cls = cls
        self.fields = fields

    def encode(self, values: Sequence[Any], w: _Writer) -> None:
        if values:
            for f in self.fields:
                f.node.encode(list(map(f.get, values)), w)

    def decode(self, r: _Reader, n: int) -> list[Any]:
        if not n:
            return []
        cls = self.cls
        if not self.fields:
            r.rows(self.path, n)
            return [cls() for _ in range(n)]
        columns = []
        for f in self.fields:
            values = f.node.decode(r, n)
            if values is None:
                if f.default is None:
                    raise r.error(
                        f.node.column, "the column is missing", expected=f"{n} values (the field has no default)"
                    )
                else:
                    r.rows(f.node.column, n)
                    values = f.default(n)
            columns.append(values)
        return list(map(cls, *columns))

    def paths(self) -> list[str]:
        return [p for f in self.fields for p in f.node.paths()]


class _List(_Node):
    __slots__ = ("item", "len_path")

    def __init__(self, path: str, item: _Node) -> None:
        super().__init__(path)
        self.len_path = path + "#len"
        self.item = item

    def encode(self, values: Sequence[Any], w: _Writer) -> None:
        if values:
            w.put(self.len_path, list(map(len, values)), integer=True)
            self.item.encode(list(itertools.chain.from_iterable(values)), w)

    def decode(self, r: _Reader, n: int) -> list[Any] | None:
        if not n:
            return []
        got = r.column(self.len_path, n, _LENGTHS, "lengths (integers >= 0)", delta=True)
        if got is None:
            return None
        lens, summed = got
        if summed:
            r.bounds(self.len_path, lens, 0, None)
        total = sum(lens)
        items = self.item.required(r, total)
        if n == 1:  # one row (a table's column): its items are the list
            return [items]
        if not items:
            return [[] for _ in range(n)]
        ends = list(itertools.accumulate(lens))
        starts = [0, *ends[:-1]]
        return list(map(items.__getitem__, map(slice, starts, ends)))

    def paths(self) -> list[str]:
        return [self.len_path, *self.item.paths()]

    @property
    def column(self) -> str:
        return self.len_path


class _Union(_Node):
    """A tagged union of structs (and None, when optional): ``#tag``, then each variant's rows."""

    __slots__ = ("nullable", "plain", "tag_of", "tag_path", "variants", "what")

    def __init__(self, path: str, variants: dict[int, _Struct], nullable: bool) -> None:
        super().__init__(path)
        self.tag_path = path + "#tag"
        self.variants = variants
        self.nullable = nullable
        self.tag_of: dict[type, int | None] = {v.cls: tag for tag, v in variants.items()}
        # The known variant ids, as a type msgspec checks while decoding.
        ids: Any = operator.getitem(Literal, tuple(variants))
        self.what = "variant ids " + ", ".join(f"{t} ({v.cls.__name__})" for t, v in variants.items())
        if nullable:
            self.tag_of[_NONE_TYPE] = None
            ids = operator.or_(ids, None)
            self.what += " or nil (none)"
        self.plain = _decoder(ids)

    def encode(self, values: Sequence[Any], w: _Writer) -> None:
        if not values:
            return
        try:
            tags = list(map(self.tag_of.__getitem__, map(type, values)))
        except KeyError as exc:
            raise EncodeError(f"{exc.args[0].__name__} is not a variant", where=self.path) from None
        w.put(self.tag_path, tags)
        present = set(tags)
        for tag, node in self.variants.items():
            if tag in present:
                node.encode(list(itertools.compress(values, map(operator.eq, tags, itertools.repeat(tag)))), w)

    def decode(self, r: _Reader, n: int) -> list[Any] | None:
        if not n:
            return []
        got = r.column(self.tag_path, n, self.plain, self.what)
        if got is None:
            return None
        tags = got[0]
        counts = Counter(tags)
        rows: dict[int | None, Any] = {}
        for tag, node in self.variants.items():
            if tag in counts:
                rows[tag] = iter(node.decode(r, counts[tag]))
        if self.nullable:
            rows[None] = itertools.repeat(None)
        return list(map(next, map(rows.__getitem__, tags)))

    def paths(self) -> list[str]:
        return [self.tag_path, *(p for v in self.variants.values() for p in v.paths())]

    @property
    def column(self) -> str:
        return self.tag_path


class _Optional(_Node):
    """An optional value that is not a union: ``#present``, then the present values' rows at the same path."""

    __slots__ = ("inner", "present_path")

    def __init__(self, path: str, inner: _Node) -> None:
        super().__init__(path)
        self.present_path = path + "#present"
        self.inner = inner

    def encode(self, values: Sequence[Any], w: _Writer) -> None:
        if values:
            flags = list(map(operator.is_not, values, itertools.repeat(None)))
            w.put(self.present_path, flags)
            self.inner.encode(list(itertools.compress(values, flags)), w)

    def decode(self, r: _Reader, n: int) -> list[Any] | None:
        if not n:
            return []
        got = r.column(self.present_path, n, _BOOLS, "booleans")
        if got is None:
            return None
        flags = got[0]
        present = iter(self.inner.required(r, flags.count(True)))
        rows = {True: present, False: itertools.repeat(None)}
        return list(map(next, map(rows.__getitem__, flags)))

    def paths(self) -> list[str]:
        return [self.present_path, *self.inner.paths()]

    @property
    def column(self) -> str:
        return self.present_path


def _unsupported(path: str, t: Any) -> SchemaError:
    return SchemaError(f"the columnar codec has no column form for {t!r}", where=path)


def _build(t: Any, path: str, seen: tuple[type, ...]) -> _Node:
    while isinstance(t, mi.Metadata):
        t = t.type
    if isinstance(t, mi.StructType):
        return _build_struct(t, path, seen)
    if isinstance(t, mi.ListType):
        if t.min_length is not None or t.max_length is not None:
            raise _unsupported(path, t)
        return _List(path, _build(t.item_type, path + "[]", seen))
    if isinstance(t, mi.UnionType):
        members = [m for m in t.types if not isinstance(m, mi.NoneType)]
        nullable = len(members) < len(t.types)
        structs = [(m.tag, m) for m in members if isinstance(m, mi.StructType) and isinstance(m.tag, int)]
        if members and len(structs) == len(members):
            variants = {tag: _build_struct(m, f"{path}<{tag}>", seen) for tag, m in structs}
            return _Union(path, variants, nullable)
        if nullable and len(members) == 1:
            return _Optional(path, _build(members[0], path, seen))
        raise _unsupported(path, t)
    if isinstance(t, mi.IntType):
        if t.multiple_of is not None:
            raise _unsupported(path, t)
        lo = t.ge if t.gt is None else t.gt + 1
        hi = t.le if t.lt is None else t.lt - 1
        return _Int(path, lo, hi)
    if isinstance(t, mi.EnumType) and issubclass(t.cls, enum.IntEnum):
        return _Enum(path, t.cls)
    if isinstance(t, mi.FloatType):
        if (t.ge, t.gt, t.le, t.lt, t.multiple_of) != (None,) * 5:
            raise _unsupported(path, t)
        return _Leaf(path, float, "numbers")
    if isinstance(t, mi.BoolType):
        return _Leaf(path, bool, "booleans")
    if isinstance(t, mi.StrType) and (t.min_length, t.max_length, t.pattern) == (None, None, None):
        return _Leaf(path, str, "strings")
    if isinstance(t, mi.BytesType) and (t.min_length, t.max_length) == (None, None):
        return _Leaf(path, bytes, "bytes")
    raise _unsupported(path, t)


def _build_struct(t: mi.StructType, path: str, seen: tuple[type, ...]) -> _Struct:
    if t.cls in seen:
        raise SchemaError(f"{t.cls.__name__} contains itself: the columnar codec shreds fixed paths", where=path)
    if any(p.kind is not p.POSITIONAL_OR_KEYWORD for p in inspect.signature(t.cls).parameters.values()):
        raise SchemaError(f"{t.cls.__name__} has keyword-only fields: rows are built positionally", where=path)
    inner = (*seen, t.cls)
    fields = [_Field(f.name, _build(f.type, f"{path}.{f.encode_name}", inner), _default(f)) for f in t.fields]
    return _Struct(path, t.cls, fields)


@cache
def _plan(root: type) -> _Struct:
    t = mi.type_info(root)
    if not isinstance(t, mi.StructType):
        raise SchemaError(f"{root!r} is not a struct", where="$")
    return _build_struct(t, "$", ())


def column_paths(version: tuple[int, int]) -> list[str]:
    """Every column path of schema ``version``'s documents, in the order they are written."""
    return _plan(generated(version).model.Document).paths()


@cache
def path_numbers() -> tuple[tuple[str, ...], dict[str, int]]:
    """Layout 2's column numbers: every path of every released version, in release order (each
    release's new paths in the order they are written), and each path's number."""
    paths: list[str] = []
    numbers: dict[str, int] = {}
    for version in sorted(RELEASED):
        for path in column_paths(version):
            if path not in numbers:
                numbers[path] = len(paths)
                paths.append(path)
    return tuple(paths), numbers


def _by_path(
    columns: dict[str | int, tuple[str, msgspec.Raw]], layout: int, source: str | None
) -> dict[str, tuple[str, msgspec.Raw]]:
    """A payload's columns keyed by path (numbers of layout 2 resolved; a number this build does not know
    is a newer release's column, left out)."""
    if all(type(k) is str for k in columns):
        return columns  # type: ignore[return-value]
    if layout == 1:
        key = next(k for k in columns if type(k) is not str)
        raise DecodeError(f"column key {key!r} is not a path", source=source, where="payload.columns",
                          expected="paths (layout 1)")  # fmt: skip
    paths = path_numbers()[0]
    out: dict[str, tuple[str, msgspec.Raw]] = {}
    for k, v in columns.items():
        if isinstance(k, str):
            path = k
        elif k < len(paths):
            path = paths[k]
        else:
            continue
        if path in out:
            raise DecodeError(f"column {path} is stored twice (by name and by number)", source=source,
                              where="payload.columns", expected="one column per path")  # fmt: skip
        out[path] = v
    return out


# -- the codec ---------------------------------------------------------------------------------------

_payload_decoder: Final = msgspec.msgpack.Decoder(_Payload)
#: The payload map with its values left raw: how many distinct keys it has, and where its columns are.
_top_decoder: Final = msgspec.msgpack.Decoder(dict[str, msgspec.Raw])


def _map_size(data: bytes | memoryview | msgspec.Raw) -> int | None:
    """The number of entries a MessagePack map's header declares (None: not a map)."""
    head = memoryview(data)[:5]
    if not head:
        return None
    lead = head[0]
    if 0x80 <= lead <= 0x8F:
        return lead & 0x0F
    if lead == 0xDE and len(head) >= 3:
        return int.from_bytes(head[1:3], "big")
    if lead == 0xDF and len(head) >= 5:
        return int.from_bytes(head[1:5], "big")
    return None


def _check_unique_keys(data: bytes | memoryview, columns: int, source: str | None) -> None:
    """A map MUST NOT repeat a key (spec §6.1): msgspec keeps the last of equal keys, so the maps' declared
    sizes are compared with the keys they gave."""
    top = _top_decoder.decode(data)  # the payload decoded already: a map with str keys
    if _map_size(data) != len(top):
        raise DecodeError("the payload map has a key twice", source=source, where="payload", expected="each key once")
    raw = top.get("columns")
    if raw is not None and _map_size(raw) != columns:
        raise DecodeError(
            "the columns map has a key twice", source=source, where="payload.columns", expected="each column once"
        )


def encode(raw: Any, version: tuple[int, int]) -> bytes:
    """Encode a document of the generated model of ``version`` as columns."""
    root = generated(version).model.Document
    if type(raw) is not root:
        raise EncodeError(f"expected a schema {version[0]}.{version[1]} Document, got {type(raw).__qualname__}")
    return encode_model(raw, root)


def decode(data: bytes | memoryview, version: tuple[int, int], *, source: str | None = None) -> Any:
    """Decode columns into the generated model of ``version`` (each column checked before it is used)."""
    return decode_model(data, generated(version).model.Document, source=source)


def encode_model(raw: Any, root: type) -> bytes:
    """Encode ``raw``, an instance of the struct type ``root``, as columns (any msgspec model of the
    kinds the schema language has: the codec of :func:`encode`, for any root type)."""
    w = _Writer()
    try:
        _plan(root).encode([raw], w)
        numbers = path_numbers()[1]
        columns = {numbers.get(path, path): column for path, column in w.columns.items()}
        return _encoder.encode({"format": FORMAT, "layout": w.layout, "columns": columns})
    except NOT_DECODE_ERRORS:
        raise  # tracepack's own (a SchemaError from the plan, ...), as it said it
    except (AttributeError, TypeError, ValueError, OverflowError) as exc:
        raise EncodeError(f"cannot encode as columns: {type(exc).__name__}: {exc}") from None


def decode_model(data: bytes | memoryview, root: type, *, source: str | None = None) -> Any:
    """Decode columns into an instance of the struct type ``root`` (see :func:`encode_model`)."""
    plan = _plan(root)
    from tracepack.io.guard import run

    try:
        # Nesting (in columns this build does not read) is held to the max_depth budget exactly (spec §9.6).
        payload = run(lambda: _payload_decoder.decode(data), source, DecodeError, "payload", msgpack=data)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # ValidationError is a DecodeError
        reason = bad_utf8_reason(exc, data, _payload_decoder.decode, json=False)
        if reason is not None:
            raise DecodeError(f"a string is not valid UTF-8 ({reason})", source=source, where="payload") from None
        raise DecodeError(f"not a columnar payload: {exc}", source=source, where="payload") from None
    _check_unique_keys(data, len(payload.columns), source)
    if payload.format != FORMAT:
        raise DecodeError(
            f"the format marker is {payload.format!r}", source=source, where="payload.format", expected=repr(FORMAT)
        )
    if payload.layout not in LAYOUTS:
        raise DecodeError(
            f"columnar layout {payload.layout} is not readable by this build",
            source=source,
            where="payload.layout",
            expected=" or ".join(map(str, LAYOUTS)),
        )
    columns = _by_path(payload.columns, payload.layout, source)
    # Rows are many small objects and no garbage cycles: the cyclic collector's passes over them
    # midway are wasted work (as in the FlatBuffers columns' reader).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return plan.decode(_Reader(columns, len(data), source, payload.layout), 1)[0]
    finally:
        if collecting:
            gc.enable()
