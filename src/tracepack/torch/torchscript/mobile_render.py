"""What torch's lite interpreter prints for a debug handle, stored in the document itself.

A TorchScript lite-interpreter archive's handles are imported into the document's
debug-handle table (op, inlined stack as frames, module path with short type names,
the node's source range). torch's own text for a handle (``Module hierarchy:top(M)::
<unknown>....aten::embedding`` and the ``Traceback of TorchScript`` with its ``~~~~
<--- HERE`` marks) needs a little more: each inlined call's call-site *range*, the full
type of each module on the chain, the program's type and the set of class types the
file defines. The importer keeps those in the ``torchscript/mobile-render`` extension,
so ``tracepack symbolicate model.tpk`` prints torch's exact text with no ``.ptl`` at hand.

The extension is JSON, columnar and interned; every source range is a row of the
document's own range table (which already holds the source texts), so it adds little::

    {"format": 1,
     "names": [...],            # strings: known types first, then types, instances, functions, ops
     "known": K,                # names[:K] are the program's class types (null: unknown)
     "top": i,                  # names[i]: the program's type
     "calls": {"parent": [p+1], "type": [t+1], "instance": [i], "range": [r+1], "function": [f]},
     "handles": {"handle": [delta], "node": [name], "range": [r+1], "call": [c+1]}}

A document's table (:func:`lite_table_from_document`) is decoded handle by handle: the columns
are checked for shape when it is opened, a handle (a binary search, then its call chain) when it is
first asked for, so one log line of a large model costs one handle, not the table. From a lazily
opened ``.tpk`` the table reads the file's range and source tables: use it while the file is open.

``calls`` is a trie of inlined calls (a call's parent is its caller, 0 for none; a
module-less call has type 0); a handle names its node, its node range (0: none) and
its innermost call (0: none). Offsets are the document's range rows plus one.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from itertools import accumulate, pairwise
from typing import Any

from tracepack.builder import DocumentBuilder
from tracepack.errors import DecodeError, LegacyFormatError
from tracepack.io.zip import Archive
from tracepack.torch.torchscript.debug_pkl import CallstackDebugMap, DebugPkl, MobileDebugHandles
from tracepack.torch.torchscript.render import CallFrame, HandleInfo, LiteDebugTable, SourceRange, class_globals

__all__ = [
    "RENDER_EXTENSION",
    "add_render_extension",
    "decode_table",
    "encode_table",
    "lite_table_from_document",
]

#: The extension a TorchScript archive's document keeps torch's rendering facts in.
RENDER_EXTENSION = "torchscript/mobile-render"
_ARCHIVE_EXTENSION = "torchscript/archive"
_FORMAT = 1
#: Inlined calls a handle may sit under (torch's are a few dozen deep); a deeper chain is refused.
MAX_CALL_DEPTH = 4096


def _deltas(values: Sequence[int]) -> list[int]:
    return [b - a for a, b in zip([0, *values], values, strict=False)]


def encode_table(table: LiteDebugTable, range_index: Callable[[SourceRange], int]) -> dict[str, Any]:
    """``table`` (its type, known types and handles; not its owners) as the extension's JSON value.

    ``range_index`` gives the row of a source range in the document's range table."""
    names: dict[str, int] = {}

    def name(s: str) -> int:
        return names.setdefault(s, len(names))

    known = sorted(table.known_types) if table.known_types is not None else None
    for t in known or ():
        name(t)
    top = name(table.top_type)
    calls: dict[tuple[int, int, int, int, int], int] = {}
    cols: dict[str, list[int]] = {"parent": [], "type": [], "instance": [], "range": [], "function": []}

    def rng(r: SourceRange | None) -> int:
        return 0 if r is None else range_index(r) + 1

    hcols: dict[str, list[int]] = {"handle": [], "node": [], "range": [], "call": []}
    for handle in sorted(table.handles):
        info = table.handles[handle]
        parent = 0
        for call in info.calls:
            type_ = 0 if call.module is None else name(call.module[0]) + 1
            instance = 0 if call.module is None else name(call.module[1])
            key = (parent, type_, instance, rng(call.call_site), name(call.function_name))
            found = calls.get(key)
            if found is None:
                found = calls[key] = len(calls) + 1
                for col, v in zip(cols.values(), key, strict=True):
                    col.append(v)
            parent = found
        hcols["handle"].append(handle)
        hcols["node"].append(name(info.node_name))
        hcols["range"].append(rng(info.node_range))
        hcols["call"].append(parent)
    hcols["handle"] = _deltas(hcols["handle"])
    return {
        "format": _FORMAT,
        "names": list(names),
        "known": None if known is None else len(known),
        "top": top,
        "calls": cols,
        "handles": hcols,
    }


class _Index:
    """The extension's columns, checked for shape, decoding one handle (and its call chain) at a time."""

    def __init__(self, value: Any, range_at: Callable[[int], SourceRange], where: str) -> None:
        self.where = where
        self.range_at = range_at
        if not isinstance(value, dict) or value.get("format") != _FORMAT:
            raise self.bad("expected an object with format 1", ".format")
        names = value.get("names")
        if not isinstance(names, list) or not all(isinstance(s, str) for s in names):
            raise self.bad("expected a list of strings", ".names")
        self.names: list[str] = names
        known = value.get("known")
        if known is not None and (type(known) is not int or not 0 <= known <= len(names)):
            raise self.bad(f"expected null or a count of at most {len(names)}", ".known")
        self.known = None if known is None else frozenset(names[:known])
        top = value.get("top")
        if type(top) is not int:
            raise self.bad("expected an integer", ".top")
        self.top = self.name(top, ".top")
        c = value.get("calls")
        self.calls = [self.ints(c, k, ".calls") for k in ("parent", "type", "instance", "range", "function")]
        if len({len(col) for col in self.calls}) != 1:
            raise self.bad("columns of different lengths", ".calls")
        h = value.get("handles")
        self.hcols = [self.ints(h, k, ".handles") for k in ("handle", "node", "range", "call")]
        if len({len(col) for col in self.hcols}) != 1:
            raise self.bad("columns of different lengths", ".handles")
        self.keys = list(accumulate(self.hcols[0]))
        for i, (a, b) in enumerate(pairwise(self.keys), 1):
            if b <= a:
                raise self.bad("handles not ascending", f".handles[{i}]")
        self.frames: dict[int, CallFrame] = {}
        self.ranges: dict[int, SourceRange] = {}

    def bad(self, problem: str, at: str = "") -> DecodeError:
        return DecodeError(f"malformed {RENDER_EXTENSION} extension: {problem}", where=self.where + at)

    def ints(self, obj: Any, key: str, at: str) -> list[int]:
        col = obj.get(key) if isinstance(obj, dict) else None
        if not isinstance(col, list) or not all(type(v) is int for v in col):
            raise self.bad("expected a list of integers", f"{at}.{key}")
        return col

    def name(self, i: int, at: str) -> str:
        if not 0 <= i < len(self.names):
            raise self.bad(f"string {i} out of range (there are {len(self.names)})", at)
        return self.names[i]

    def range(self, i: int, at: str) -> SourceRange | None:
        if i == 0:
            return None
        found = self.ranges.get(i)
        if found is None:
            try:
                found = self.ranges[i] = self.range_at(i - 1)
            except IndexError:
                raise self.bad(f"no source range {i - 1} in the document", at) from None
        return found

    def frame(self, call: int) -> CallFrame:
        """Call ``call`` (1-based) itself, decoded once."""
        found = self.frames.get(call)
        if found is None:
            i = call - 1
            _, type_, instance, r, function = (col[i] for col in self.calls)
            at = f".calls[{i}]"
            if type_ < 0:
                raise self.bad(f"type {type_} < 0", at)
            module = None if type_ == 0 else (self.name(type_ - 1, at), self.name(instance, at))
            found = self.frames[call] = CallFrame(module, self.range(r, at), self.name(function, at))
        return found

    def chain(self, call: int, at: str) -> tuple[CallFrame, ...]:
        """The calls from the outermost down to ``call`` (1-based; 0: none), at most MAX_CALL_DEPTH."""
        if not 0 <= call <= len(self.calls[0]):
            raise self.bad(f"no call {call}", at)
        out: list[CallFrame] = []
        parents = self.calls[0]
        while call:
            if len(out) == MAX_CALL_DEPTH:
                raise self.bad(f"a call chain deeper than {MAX_CALL_DEPTH} calls", at)
            out.append(self.frame(call))
            parent = parents[call - 1]
            if not 0 <= parent < call:
                raise self.bad(f"parent {parent} is not an earlier call", f".calls[{call - 1}]")
            call = parent
        out.reverse()
        return tuple(out)

    def info(self, row: int) -> HandleInfo:
        at = f".handles[{row}]"
        _, node, r, call = (col[row] for col in self.hcols)
        return HandleInfo(self.keys[row], self.name(node, at), self.range(r, at), self.chain(call, at))


class _LazyHandles(MutableMapping[int, HandleInfo]):
    """A table's handles, decoded from the extension when asked for (a binary search, then the
    handle's call chain): a symbolicator answering one line reads one handle, not all of them."""

    def __init__(self, index: _Index) -> None:
        self._index = index
        self._decoded: dict[int, HandleInfo] = {}
        self._all: dict[int, HandleInfo] | None = None  # every handle, once the mapping is written to

    def _row(self, handle: object) -> int | None:
        keys = self._index.keys
        if type(handle) is not int:
            return None
        i = bisect_left(keys, handle)
        return i if i < len(keys) and keys[i] == handle else None

    def __getitem__(self, handle: int) -> HandleInfo:
        if self._all is not None:
            return self._all[handle]
        found = self._decoded.get(handle)
        if found is None:
            row = self._row(handle)
            if row is None:
                raise KeyError(handle)
            found = self._decoded[handle] = self._index.info(row)
        return found

    def __contains__(self, handle: object) -> bool:
        return handle in self._all if self._all is not None else self._row(handle) is not None

    def __iter__(self) -> Iterator[int]:
        return iter(self._all if self._all is not None else self._index.keys)

    def __len__(self) -> int:
        return len(self._all) if self._all is not None else len(self._index.keys)

    def _materialize(self) -> dict[int, HandleInfo]:
        if self._all is None:
            self._all = {h: self[h] for h in self._index.keys}
        return self._all

    def __setitem__(self, handle: int, info: HandleInfo) -> None:
        self._materialize()[handle] = info

    def __delitem__(self, handle: int) -> None:
        del self._materialize()[handle]


def decode_table(
    value: Any,
    range_at: Callable[[int], SourceRange],
    *,
    where: str = f"$.extensions[{RENDER_EXTENSION}]",
    lazy: bool = False,
) -> LiteDebugTable:
    """:func:`encode_table`'s value back as a table; DecodeError naming the place when it does not fit.

    ``range_at`` gives the source range of a row of the document's range table (IndexError when
    there is no such row). ``lazy``: the columns are checked for shape now, each handle is decoded
    (and checked) when first asked for; otherwise every handle and call is decoded now."""
    index = _Index(value, range_at, where)
    table = LiteDebugTable(index.top, known_types=index.known)
    if lazy:
        table.handles = _LazyHandles(index)
        return table
    for call in range(1, len(index.calls[0]) + 1):  # every call checked, on a handle's chain or not
        index.frame(call)
        if not 0 <= index.calls[0][call - 1] < call:
            raise index.bad(f"parent {index.calls[0][call - 1]} is not an earlier call", f".calls[{call - 1}]")
    for row, handle in enumerate(index.keys):
        table.handles[handle] = index.info(row)
    return table


def add_render_extension(
    b: DocumentBuilder,
    archive: Archive,
    debug_pkls: Iterable[DebugPkl],
    callstack_debug_map: CallstackDebugMap,
    mobile_debug_handles: MobileDebugHandles | None,
) -> str | None:
    """Add the ``torchscript/mobile-render`` extension for a lite-interpreter archive being imported.

    Nothing is added when ``data.pkl`` is missing, not a pickle or names no module type (torch could
    not load the file either; the debug info is still imported, only torch's exact text is not
    available): the reason is returned, for the archive's extension to say so."""
    types: list[str] = []
    found = False
    for member in archive.names():
        if archive.relative(member) == "data.pkl":
            found = True
            try:
                types = class_globals(archive.read(member), source=f"{archive.source}:data.pkl")
            except LegacyFormatError as exc:
                return f"its data.pkl could not be read ({exc.problem})"
    if not found:
        return "it has no data.pkl (the module types torch's text names)"
    if not types:
        return "its data.pkl names no module type"
    top = types[0]
    table = LiteDebugTable.from_members(
        top_type=top,
        debug_pkls=debug_pkls,
        callstack_debug_map=callstack_debug_map,
        mobile_debug_handles=mobile_debug_handles,
        known_types=types,
    )
    b.add_extension(
        RENDER_EXTENSION,
        encode_table(table, lambda r: b.source_range(b.source(r.text, r.filename, r.starting_line), r.start, r.end)),
    )
    return None


def _range_reader(doc: Any) -> Callable[[int], SourceRange]:
    """Row -> SourceRange over a Document or a LazyDocument's range and source tables."""
    from tracepack.document import Document

    if isinstance(doc, Document):
        r = doc.raw
        rs, rstart, rend = r.ranges.source, r.ranges.start, r.ranges.end
        sfile, sline = r.sources.file, r.sources.start_line
        strings: Sequence[str] = r.strings
    else:
        rc, sc = doc.columns("ranges"), doc.columns("sources")
        rs, rstart, rend = rc["source"], rc["start"], rc["end"]
        sfile, sline = sc["file"], sc["start_line"]
        strings = doc.strings
    texts: dict[int, str] = {}

    def at(row: int) -> SourceRange:
        if not 0 <= row < len(rs):
            raise IndexError(row)
        src = int(rs[row])
        if not 0 <= src < len(sfile):
            raise IndexError(src)
        text = texts.get(src)
        if text is None:
            text = texts[src] = doc.source_text(src)
        file = int(sfile[src])
        if file >= len(strings):
            raise IndexError(file)
        return SourceRange(text, None if file < 0 else strings[file], int(sline[src]), int(rstart[row]), int(rend[row]))

    return at


def lite_table_from_document(doc: Any) -> LiteDebugTable | None:
    """The lite-interpreter table kept in ``doc`` (a Document or LazyDocument), or None when the
    document has no ``torchscript/mobile-render`` extension (not a mobile archive, or a ``.tpk``
    converted before tracepack stored it)."""
    text = doc.extension(RENDER_EXTENSION)
    if text is None:
        return None
    from tracepack.document import json_value

    where = f"$.extensions[{RENDER_EXTENSION}]"
    value = json_value(text, where)  # guarded: nesting and integers within the budgets
    table = decode_table(value, _range_reader(doc), where=where, lazy=True)
    archive = doc.extension(_ARCHIVE_EXTENSION)
    try:
        info = json_value(archive, f"$.extensions[{_ARCHIVE_EXTENSION}]") if archive else {}
    except DecodeError:
        info = {}  # the owners only serve tracepack's own form, which the document renders itself
    functions = info.get("functions") if isinstance(info, dict) else None
    for entry in functions if isinstance(functions, list) else ():
        if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and isinstance(entry[1], list):
            for handle in entry[1]:
                if type(handle) is int:
                    table.owners.setdefault(handle, entry[0])
    return table
