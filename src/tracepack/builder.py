"""The interning writer: build a document node by node.

Every string, source line, frame, call stack and module path is stored once,
whatever order nodes arrive in. Stack traces come as ``traceback`` frame
summaries (with Python 3.11 positions), ``(file, line, name, code)`` tuples, or
legacy strings; module stacks as ``(key, path, type)`` tuples or
``nn_module_stack`` strings; torch.fx ``from_node`` provenance as its JSON
metadata text or :class:`~tracepack.traces.Provenance` trees. Repeated inputs
hit a cache keyed by the input itself, so the common case (many nodes, few
distinct traces) costs one dictionary lookup per node.

    >>> b = DocumentBuilder()
    >>> _ = b.add_node("add", "aten.add", stack_trace=[("m.py", 3, "forward", "x + y")])
    >>> doc = b.build()
    >>> doc.node("add").stack_trace
    'File "m.py", line 3, in forward\\n    x + y'
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any, TypeAlias

from tracepack import model as m
from tracepack.errors import TracepackError, UsageError
from tracepack.traces import (
    STYLE_STRIPPED,
    FrameKey,
    ModuleKey,
    Provenance,
    parse_from_node,
    parse_nn_module_stack,
    parse_stack_trace,
)

if TYPE_CHECKING:
    from tracepack.document import Document

__all__ = ["DocumentBuilder", "Generic", "StackInput", "SymInt", "Tensor"]

#: What a stack trace may be given as.
StackInput: TypeAlias = (
    "str | traceback.StackSummary | Sequence[traceback.FrameSummary] | Sequence[tuple[Any, ...]] | Sequence[FrameKey]"
)

_STYLES = tuple(m.StackStyle)
_KINDS = tuple(m.ArgumentKind)

#: Metadata keys whose values are lifted into the node's stack / module / provenance references.
STACK_KEY = "stack_trace"
MODULE_KEY = "nn_module_stack"
FROM_NODE_KEY = "from_node"


@dataclass(frozen=True)
class Tensor:
    """A tensor argument, by value name."""

    name: str


@dataclass(frozen=True)
class SymInt:
    """A symbolic integer argument, by value name."""

    name: str


@dataclass(frozen=True)
class Generic:
    """An argument without a typed form: the producer's variant name and a JSON-able value."""

    variant: str
    value: Any


def _version_info() -> str:
    from tracepack import __version__

    return __version__


class DocumentBuilder:
    """Accumulates interned tables and nodes; :meth:`build` returns a :class:`~tracepack.Document`."""

    def __init__(self, *, producer: str = "tracepack", producer_version: str | None = None) -> None:
        self._producer = m.Producer(producer, _version_info() if producer_version is None else producer_version)
        self._metadata: list[m.KeyValue] = []
        self._strings: list[str] = [""]
        self._string_ids: dict[str, int] = {"": 0}
        # Tables, each with its reserved empty row 0.
        self._file_name: list[int] = [0]
        self._file_ids: dict[int, int] = {0: 0}
        self._line_cols: tuple[list[int], list[int], list[int], list[int]] = ([0], [0], [0], [0])
        self._line_ids: dict[tuple[int, int, int, int], int] = {(0, 0, 0, 0): 0}
        self._frame_line: list[int] = [0]
        self._frame_col: list[int] = [-1]
        self._frame_end_col: list[int] = [-1]
        self._frame_annotation: list[int] = [0]
        self._frame_end_line: list[int] = [-1]
        self._frame_ids: dict[FrameKey, int] = {FrameKey("", 0, ""): 0}
        self._stack_parent: list[int] = [0]
        self._stack_frame: list[int] = [0]
        self._stack_ids: dict[tuple[int, int], int] = {}
        self._module_cols: tuple[list[int], ...] = ([0], [0], [0], [0], [0])
        self._module_ids: dict[tuple[int, int, int, int, int], int] = {}
        self._source_cols: tuple[list[int], list[int], list[int]] = ([-1], [0], [0])
        self._source_lines: list[int] = []
        self._source_ids: dict[tuple[str | None, int, str], int] = {}
        self._range_cols: tuple[list[int], list[int], list[int]] = ([0], [0], [0])
        self._range_ids: dict[tuple[int, int, int], int] = {(0, 0, 0): 0}
        # Provenance rows: name, target, graph_id, pass_name, action, child_count; children pooled.
        self._prov_cols: tuple[list[int], ...] = ([0], [0], [0], [0], [0], [0])
        self._prov_children: list[int] = []
        self._prov_ids: dict[tuple[int, int, int, int, int, tuple[int, ...]], int] = {(0, 0, 0, 0, 0, ()): 0}
        self._prov_used = False
        self._handles: list[tuple[int, int, int, int, int]] = []
        #: whether the caller handed over table indices of its own (checked at build())
        self._raw_refs = False
        self._nodes: list[m.Node] = []
        self._node_names: set[str] = set()
        self._inputs: list[m.Argument] = []
        self._outputs: list[m.Argument] = []
        self._values: list[m.Value] = []
        self._graph_name = ""
        self._debug_files: list[m.DebugFile] = []
        self._extensions: list[m.Extension] = []
        # Caches keyed by the caller's own input: one lookup per repeated trace.
        self._trace_cache: dict[str, tuple[int, int] | None] = {}
        self._frames_cache: dict[tuple[Any, ...], int] = {}
        self._nn_cache: dict[str, int | None] = {}
        self._from_node_cache: dict[str, list[int] | None] = {}

    # -- strings and tables -------------------------------------------------------------------

    def string(self, s: str) -> int:
        """Intern ``s``; return its index in the string table."""
        i = self._string_ids.get(s)
        if i is None:
            if type(s) is not str:
                raise UsageError(f"expected a str, got {type(s).__name__}", where="string table")
            i = self._string_ids[s] = len(self._strings)
            self._strings.append(s)
        return i

    def frame(self, f: FrameKey) -> int:
        """Intern one frame (and its file and line entries)."""
        i = self._frame_ids.get(f)
        if i is not None:
            return i
        s = self.string
        name_id = s(f.file)
        file_id = self._file_ids.get(name_id)
        if file_id is None:
            file_id = self._file_ids[name_id] = len(self._file_name)
            self._file_name.append(name_id)
        line_key = (file_id, f.line, s(f.name), s(f.text))
        line_id = self._line_ids.get(line_key)
        if line_id is None:
            line_id = self._line_ids[line_key] = len(self._line_cols[0])
            for col, v in zip(self._line_cols, line_key, strict=True):
                col.append(v)
        i = self._frame_ids[f] = len(self._frame_line)
        self._frame_line.append(line_id)
        self._frame_col.append(f.col)
        self._frame_end_col.append(f.end_col)
        self._frame_annotation.append(s(f.annotation))
        self._frame_end_line.append(f.end_line)
        return i

    def stack_of_frames(self, frames: Iterable[FrameKey]) -> int:
        """Intern a stack given as frames, outermost first; return its trie row."""
        node = 0
        ids = self._stack_ids
        for f in frames:
            key = (node, self.frame(f))
            nxt = ids.get(key)
            if nxt is None:
                nxt = ids[key] = len(self._stack_parent)
                self._stack_parent.append(node)
                self._stack_frame.append(key[1])
            node = nxt
        return node

    def stack(self, trace: StackInput) -> tuple[int, int] | None:
        """Intern a stack trace; return ``(trie row, style)``, or ``None`` for a legacy string
        that no style renders back exactly (keep it as a literal then)."""
        if isinstance(trace, str):
            try:
                return self._trace_cache[trace]
            except KeyError:
                parsed = parse_stack_trace(trace)
                out = None if parsed is None else (self.stack_of_frames(parsed[0]), parsed[1])
                self._trace_cache[trace] = out
                return out
        key: tuple[Any, ...] = tuple(trace)
        try:
            row = self._frames_cache.get(key)
        except TypeError:  # FrameSummary objects are not hashable: key on their contents
            key = tuple(map(_frame_key, key))
            row = self._frames_cache.get(key)
        if row is None:
            row = self._frames_cache[key] = self.stack_of_frames(map(_frame_key, key))
        return row, STYLE_STRIPPED

    def module(self, entries: Iterable[ModuleKey | tuple[str, ...]]) -> int:
        """Intern a module stack (outermost first); return its trie row."""
        node = 0
        ids = self._module_ids
        s = self.string
        for entry in entries:
            e = ModuleKey(*entry)
            key = (node, s(e.key), s(e.path), s(e.type), s(e.method))
            nxt = ids.get(key)
            if nxt is None:
                nxt = ids[key] = len(self._module_cols[0])
                for col, v in zip(self._module_cols, key, strict=True):
                    col.append(v)
            node = nxt
        return node

    def nn_module_stack(self, text: str) -> int | None:
        """Intern an ``nn_module_stack`` string; ``None`` if it does not parse back exactly."""
        try:
            return self._nn_cache[text]
        except KeyError:
            entries = parse_nn_module_stack(text)
            row = None if entries is None else self.module(entries)
            self._nn_cache[text] = row
            return row

    def provenance(self, entries: Iterable[Provenance | tuple[Any, ...]]) -> list[int]:
        """Intern torch.fx NodeSources (a node's ``from_node`` list); return their rows.

        Equal NodeSources, children included, share one row; children get rows before parents.
        """
        try:
            rows = [self._provenance_row(e if type(e) is Provenance else Provenance(*e)) for e in entries]
        except RecursionError:
            raise UsageError("from_node provenance nests too deeply", where="from_node") from None
        self._prov_used = True
        return rows

    def _provenance_row(self, p: Provenance) -> int:
        children = tuple([self._provenance_row(c if type(c) is Provenance else Provenance(*c)) for c in p.from_node])
        s = self.string
        if type(p.graph_id) is not int or not -(2**63) <= p.graph_id < 2**63:
            raise UsageError(f"graph_id {p.graph_id!r} is not a 64-bit integer", where="from_node")
        key = (s(p.name), s(p.target), p.graph_id, s(p.pass_name), s(p.action), children)
        row = self._prov_ids.get(key)
        if row is None:
            row = self._prov_ids[key] = len(self._prov_cols[0])
            for col, v in zip(self._prov_cols, (*key[:5], len(children)), strict=True):
                col.append(v)
            self._prov_children.extend(children)
        return row

    def from_node(self, text: str) -> list[int] | None:
        """Intern ``from_node`` metadata text; ``None`` if it does not render back exactly."""
        try:
            return self._from_node_cache[text]
        except KeyError:
            entries = parse_from_node(text)
            rows = None if entries is None else self.provenance(entries)
            self._from_node_cache[text] = rows
            return rows

    def source(self, text: str, file: str | None, start_line: int) -> int:
        """Intern a TorchScript source text; its lines are interned one by one."""
        key = (file, start_line, text)
        i = self._source_ids.get(key)
        if i is None:
            lines = text.splitlines(keepends=True)
            i = self._source_ids[key] = len(self._source_cols[0])
            self._source_cols[0].append(-1 if file is None else self.string(file))
            self._source_cols[1].append(start_line)
            self._source_cols[2].append(len(lines))
            self._source_lines.extend(map(self.string, lines))
        return i

    def source_range(self, source: int, start: int, end: int) -> int:
        """Intern a byte range of a source text."""
        key = (source, start, end)
        i = self._range_ids.get(key)
        if i is None:
            i = self._range_ids[key] = len(self._range_cols[0])
            for col, v in zip(self._range_cols, key, strict=True):
                col.append(v)
        return i

    # -- graph ----------------------------------------------------------------------------------

    def argument(self, value: Any) -> m.Argument:
        """A typed argument from a Python value (``Tensor``, ``SymInt``, ``Generic`` or a plain value)."""
        s = self.string
        if value is None:
            return m.ArgNone()
        if isinstance(value, Tensor):
            return m.ArgTensor(s(value.name))
        if isinstance(value, SymInt):
            return m.ArgSymInt(s(value.name))
        if isinstance(value, Generic):
            text = json.dumps(value.value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            return m.ArgGeneric(s(value.variant), s(text))
        if isinstance(value, bool):
            return m.ArgBool(value)
        if isinstance(value, int):
            return m.ArgInt(value)
        if isinstance(value, float):
            return m.ArgFloat(value)
        if isinstance(value, str):
            return m.ArgString(s(value))
        if isinstance(value, (list, tuple)):
            return self._list_argument(list(value))
        if isinstance(value, (m.ArgNone, m.ArgTensor, m.ArgTensors, m.ArgInt, m.ArgInts, m.ArgFloat)):
            return value
        if isinstance(value, (m.ArgFloats, m.ArgBool, m.ArgBools, m.ArgString, m.ArgStrings, m.ArgSymInt)):
            return value
        if isinstance(value, m.ArgGeneric):
            return value
        raise UsageError(f"no argument form for {type(value).__name__}", where="argument")

    def _list_argument(self, values: list[Any]) -> m.Argument:
        kinds = {type(v) for v in values}
        if kinds <= {Tensor} and values:
            return m.ArgTensors([self.string(v.name) for v in values])
        if kinds <= {bool} and values:
            return m.ArgBools(values)
        if kinds <= {int}:
            return m.ArgInts(values)
        if kinds <= {float}:
            return m.ArgFloats(values)
        if kinds <= {str}:
            return m.ArgStrings([self.string(v) for v in values])
        raise UsageError(f"no list argument form for items of types {sorted(k.__name__ for k in kinds)}")

    def add_node(
        self,
        name: str,
        target: str,
        *,
        inputs: Sequence[tuple[str, Any]] | Sequence[tuple[str, Any, int]] = (),
        outputs: Sequence[Any] = (),
        stack_trace: StackInput | None = None,
        module_stack: str | Sequence[ModuleKey | tuple[str, ...]] | None = None,
        from_node: str | Sequence[Provenance | tuple[Any, ...]] | None = None,
        meta: Mapping[str, str] | None = None,
    ) -> int:
        """Append a node; return its index.

        ``meta`` is the node's metadata in the producer's order. Its ``stack_trace``,
        ``nn_module_stack`` and ``from_node`` values are lifted into the node's stack, module
        and provenance references when they render back exactly, and kept verbatim otherwise.
        ``stack_trace``, ``module_stack`` and ``from_node`` set the references directly (frames,
        NodeSources or strings); such a value is not part of the metadata.
        """
        names = self._node_names
        count = len(names)
        names.add(name)
        if len(names) == count:
            raise UsageError(f"node {name!r} is already in the graph", where="add_node")
        s = self.string
        stack, style, module = 0, STYLE_STRIPPED, 0
        provenance: list[int] = []
        provenance_at = -1
        if from_node is not None:
            rows = self.from_node(from_node) if isinstance(from_node, str) else self.provenance(from_node)
            if rows is None:
                raise UsageError("from_node string does not parse; pass it in meta to keep it verbatim")
            provenance = rows
        if stack_trace is not None:
            got = self.stack(stack_trace)
            if got is None:
                raise UsageError("stack_trace string does not parse; pass it in meta to keep it verbatim")
            stack, style = got
        if module_stack is not None:
            row = self.nn_module_stack(module_stack) if isinstance(module_stack, str) else self.module(module_stack)
            if row is None:
                raise UsageError("module_stack string does not parse; pass it in meta to keep it verbatim")
            module = row
        keys: list[int] = []
        values: list[int] = []
        if meta:
            for k, v in meta.items():
                if k == FROM_NODE_KEY and from_node is None:
                    rows = self.from_node(v)
                    if rows is not None:
                        provenance, provenance_at = rows, len(keys)
                        continue
                keys.append(s(k))
                if k == STACK_KEY and stack_trace is None:
                    got = self.stack(v)
                    if got is not None:
                        stack, style = got
                        values.append(-1)
                        continue
                elif k == MODULE_KEY and module_stack is None:
                    row = self.nn_module_stack(v)
                    if row is not None:
                        module = row
                        values.append(-2)
                        continue
                values.append(s(v))
        named = (
            [m.NamedArgument(s(a[0]), self.argument(a[1]), _KINDS[a[2]] if len(a) > 2 else _KINDS[0]) for a in inputs]
            if inputs
            else []
        )
        argument = self.argument
        # Positional construction: this is the per-node hot path.
        ids = self._string_ids
        name_id = ids.get(name)
        target_id = ids.get(target)
        node = m.Node(
            s(name) if name_id is None else name_id,
            s(target) if target_id is None else target_id,
            named,
            [argument(o) for o in outputs] if outputs else [],
            stack,
            _STYLES[style],
            module,
            keys,
            values,
            provenance,
            provenance_at,
        )
        self._nodes.append(node)
        return len(self._nodes) - 1

    def add_raw_node(self, node: m.Node) -> int:
        """Append a node built by the caller from this builder's indices (fast path for importers)."""
        self._raw_refs = True
        self._nodes.append(node)
        return len(self._nodes) - 1

    def add_value(
        self,
        name: str,
        *,
        dtype: str = "",
        shape: Sequence[int | str] = (),
        strides: Sequence[int | str] = (),
        device: str = "",
        requires_grad: bool = False,
        storage_offset: int | str = 0,
        layout: str = "",
        json_form: Any = None,
    ) -> int:
        """Append a tensor value. A ``str`` size, stride or offset is a symbolic expression.

        ``json_form`` keeps the producer's own form of the value verbatim, for values the
        typed fields cannot hold exactly."""
        s = self.string
        sym_shape = [s(d) if isinstance(d, str) else 0 for d in shape]
        sym_strides = [s(d) if isinstance(d, str) else 0 for d in strides]
        value = m.Value(
            name=s(name),
            dtype=s(dtype),
            shape=[-1 if isinstance(d, str) else d for d in shape],
            sym_shape=sym_shape if any(sym_shape) else [],
            strides=[-1 if isinstance(d, str) else d for d in strides],
            sym_strides=sym_strides if any(sym_strides) else [],
            device=s(device),
            requires_grad=requires_grad,
            json=0 if json_form is None else s(json.dumps(json_form, separators=(",", ":"), ensure_ascii=False)),
            storage_offset=-1 if isinstance(storage_offset, str) else storage_offset,
            sym_storage_offset=s(storage_offset) if isinstance(storage_offset, str) else 0,
            layout=s(layout),
        )
        self._values.append(value)
        return len(self._values) - 1

    def set_graph(self, *, name: str = "", inputs: Sequence[Any] = (), outputs: Sequence[Any] = ()) -> None:
        """Set the graph's name, inputs and outputs."""
        self._graph_name = name
        self._inputs = [self.argument(a) for a in inputs]
        self._outputs = [self.argument(a) for a in outputs]

    def add_debug_handle(
        self,
        handle: int,
        *,
        stack: int = 0,
        module: int = 0,
        op: str = "",
        source_range: int = 0,
    ) -> None:
        """Record a debug handle (any order; the table is sorted on build)."""
        self._raw_refs = True
        self._handles.append((handle, stack, module, self.string(op), source_range))

    def add_debug_file(self, path: str, rows: Iterable[tuple[int, int, int]], *, legacy: bool = False) -> None:
        """Record a TorchScript debug_pkl: ``(byte_offset, source range, tag)`` rows in order."""
        offsets, ranges, tags = [], [], []
        for off, rng, tag in rows:
            offsets.append(off)
            ranges.append(rng)
            tags.append(tag)
        fmt = m.DebugFormat.LEGACY if legacy else m.DebugFormat.STRING_TABLE
        self._raw_refs = True
        self._debug_files.append(m.DebugFile(path, offsets, ranges, tags, fmt))

    def add_metadata(self, key: str, value: str) -> None:
        """Free-form producer metadata for the header."""
        self._metadata.append(m.KeyValue(key, value))

    def add_extension(self, name: str, value: Any, *, raw_json: str | None = None) -> None:
        """Keep untyped data losslessly as JSON (``raw_json`` as is, or ``value`` encoded)."""
        text = raw_json if raw_json is not None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        self._extensions.append(m.Extension(name, text))

    # -- result -------------------------------------------------------------------------------

    def build_raw(self) -> m.Document:
        """The typed document, as stored."""
        handles = sorted(self._handles)
        for a, b in pairwise(handles):
            if a[0] == b[0]:
                raise UsageError(f"debug handle {a[0]} is recorded twice", where="add_debug_handle")
        cols: list[list[int]] = [list(c) for c in zip(*handles, strict=True)] if handles else [[], [], [], [], []]
        any_col = any(c != -1 for c in self._frame_col) or any(c != -1 for c in self._frame_end_col)
        any_end_line = any(c != -1 for c in self._frame_end_line)
        any_ann = any(self._frame_annotation)
        any_method = any(self._module_cols[4])
        lc, mc, sc, rc, pc = self._line_cols, self._module_cols, self._source_cols, self._range_cols, self._prov_cols
        provenance = (
            m.ProvenanceTable(
                name=list(pc[0]),
                target=list(pc[1]),
                graph_id=list(pc[2]),
                pass_name=list(pc[3]),
                action=list(pc[4]),
                child_count=list(pc[5]),
                children=list(self._prov_children),
            )
            if self._prov_used
            else None
        )
        return m.Document(
            header=m.Header("tracepack", m.Version(*m.CURRENT_VERSION), self._producer, list(self._metadata)),
            strings=list(self._strings),
            files=m.FileTable(list(self._file_name)),
            lines=m.LineTable(file=list(lc[0]), line=list(lc[1]), name=list(lc[2]), text=list(lc[3])),
            frames=m.FrameTable(
                list(self._frame_line),
                list(self._frame_col) if any_col else [],
                list(self._frame_end_col) if any_col else [],
                list(self._frame_annotation) if any_ann else [],
                list(self._frame_end_line) if any_end_line else [],
            ),
            stacks=m.StackTable(list(self._stack_parent), list(self._stack_frame)),
            modules=m.ModuleTable(
                parent=list(mc[0]),
                key=list(mc[1]),
                path=list(mc[2]),
                type=list(mc[3]),
                method=list(mc[4]) if any_method else [],
            ),
            sources=m.SourceTable(
                file=list(sc[0]), start_line=list(sc[1]), line_count=list(sc[2]), lines=list(self._source_lines)
            ),
            ranges=m.RangeTable(source=list(rc[0]), start=list(rc[1]), end=list(rc[2])),
            debug_handles=m.DebugHandleTable(handle=cols[0], stack=cols[1], module=cols[2], op=cols[3], range=cols[4]),
            graph=m.Graph(
                self._graph_name, list(self._inputs), list(self._outputs), list(self._nodes), list(self._values)
            ),
            debug_files=list(self._debug_files),
            extensions=list(self._extensions),
            provenance=provenance,
        )

    def build(self, *, validate: bool | None = None) -> Document:
        """The finished :class:`~tracepack.Document`.

        ``validate`` checks every reference and trie first (:meth:`Document.validate`), so a document
        with a dangling reference (a raw node, debug handle or debug file row pointing past a table) is
        refused here, naming the place, instead of being written into a file that :func:`tracepack.load`
        refuses. By default it runs when the builder was given such raw indices (``add_raw_node``,
        ``add_debug_handle``, ``add_debug_file``); what ``add_node`` interns is valid by construction.
        """
        from tracepack.document import Document

        doc = Document(self.build_raw())
        if self._raw_refs if validate is None else validate:
            try:
                doc.validate()
            except TracepackError as exc:
                raise exc.with_source("DocumentBuilder.build") from None
        return doc


def _frame_key(f: Any) -> FrameKey:
    if isinstance(f, FrameKey):
        return f
    if isinstance(f, traceback.FrameSummary):
        # Python 3.11+ positions (co_positions): lineno, end_lineno, colno, end_colno; None when unknown.
        col = getattr(f, "colno", None)
        end_col = getattr(f, "end_colno", None)
        end_line = getattr(f, "end_lineno", None)
        return FrameKey(
            f.filename,
            f.lineno or 0,
            f.name,
            (f.line or "").strip(),
            -1 if col is None else col,
            -1 if end_col is None else end_col,
            "",
            -1 if end_line is None else end_line,
        )
    if isinstance(f, tuple) and 3 <= len(f) <= 8:
        file, line, name, *rest = f
        return FrameKey(str(file), int(line or 0), str(name), *rest)
    raise UsageError(
        "a frame must be a FrameSummary or a (file, line, name[, code, col, end_col, annotation, end_line]) tuple, "
        f"got {f!r:.80}"
    )
