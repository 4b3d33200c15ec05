"""The resolving reader: a typed document with its references resolved on demand.

A :class:`Document` wraps the stored form (``doc.raw``, the generated model of
the current schema version). Nothing is expanded up front: asking for a node's
stack trace walks the stack trie once and caches the rendered string *per
distinct stack*, so a graph of 100k nodes sharing 1k stacks holds 1k strings,
and every node that shares a stack shares the same string object. ``from_node``
provenance renders the same way, one cached JSON text per provenance row.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Callable, Iterator
from functools import cached_property
from itertools import accumulate
from operator import ge, ne
from typing import TYPE_CHECKING, Any, NamedTuple

from tracepack import interned_json
from tracepack.errors import DecodeError, IntegrityError, NotFoundError, did_you_mean
from tracepack.traces import (
    FrameKey,
    ModuleKey,
    ModuleRendering,
    Provenance,
    ProvenanceRenderer,
    charge_rendered,
    render_frames_checked,
)

if TYPE_CHECKING:  # the typed model loads with the first document (tracepack.lazy does without it)
    from tracepack import model as m

__all__ = ["FROM_NODE_KEY", "DebugHandle", "Document", "NodeView", "json_value", "resolve_argument"]

#: The metadata key that ``Node.from_node_meta_index`` places the rendered provenance under.
FROM_NODE_KEY = "from_node"


class DebugHandle(NamedTuple):
    """A debug handle resolved: where an instruction came from."""

    handle: int
    op: str
    stack_trace: str
    module_hierarchy: str
    source_range: tuple[str, int, int] | None


class Document(ModuleRendering):
    """A tracepack document. Compare with ``==``; look nodes up with :meth:`node`."""

    __slots__ = ("__dict__", "_module_cache", "_stack_cache", "raw", "source_version")

    def __init__(self, raw: m.Document, *, source_version: tuple[int, int] | None = None) -> None:
        self.raw = raw
        #: The schema version the document was read from (before any migration).
        self.source_version = source_version or (raw.header.version.major, raw.header.version.minor)
        self._stack_cache: dict[tuple[int, int], str] = {}
        self._module_cache: dict[tuple[int, int], str] = {}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Document):
            return NotImplemented
        return self.raw == other.raw

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        g = self.raw.graph
        return (
            f"<tracepack.Document {self.raw.header.version.major}.{self.raw.header.version.minor}: "
            f"{len(g.nodes)} nodes, {len(self.raw.strings)} strings, {len(self.raw.stacks.parent)} stacks>"
        )

    @property
    def version(self) -> tuple[int, int]:
        v = self.raw.header.version
        return (v.major, v.minor)

    @property
    def strings(self) -> list[str]:
        return self.raw.strings

    def validate(self) -> None:
        """Raise :class:`~tracepack.errors.IntegrityError` if any reference or trie is broken."""
        from tracepack import model as m

        m.validate.validate(self.raw)
        nodes = self.raw.graph.nodes
        if any(map(ne, map(len, (n.meta_keys for n in nodes)), map(len, (n.meta_values for n in nodes)))):
            i = next(i for i, n in enumerate(nodes) if len(n.meta_keys) != len(n.meta_values))
            raise IntegrityError(
                f"{len(nodes[i].meta_keys)} metadata keys but {len(nodes[i].meta_values)} values",
                where=f"$.graph.nodes[{i}].meta_values",
                expected="one value per key",
            )
        src = self.raw.sources
        if sum(src.line_count) != len(src.lines):
            raise IntegrityError(
                f"sources take {sum(src.line_count)} lines but the pool has {len(src.lines)}",
                where="$.sources.line_count",
                expected="line counts that add up to len($.sources.lines)",
            )
        handles = self.raw.debug_handles.handle
        if len(handles) > 1 and any(map(ge, handles, handles[1:])):
            i = next(i for i in range(1, len(handles)) if handles[i - 1] >= handles[i])
            raise IntegrityError(
                f"debug handle {handles[i]} follows {handles[i - 1]}",
                where=f"$.debug_handles.handle[{i}]",
                expected="handles strictly ascending (readers find a handle by binary search)",
            )
        self._validate_provenance()

    def _validate_provenance(self) -> None:
        s = self.raw.strings
        for i, n in enumerate(self.raw.graph.nodes):
            at = n.from_node_meta_index
            if at == -1:
                continue
            if not 0 <= at <= len(n.meta_keys):
                problem = f"from_node_meta_index {at} is outside the metadata ({len(n.meta_keys)} keys)"
            elif any(s[k] == FROM_NODE_KEY for k in n.meta_keys):
                problem = "the metadata has a `from_node` key and a lifted `from_node` (from_node_meta_index)"
            else:
                continue
            raise IntegrityError(
                problem,
                where=f"$.graph.nodes[{i}].from_node_meta_index",
                expected=f"-1, or 0..{len(n.meta_keys)} with no `from_node` key among meta_keys",
            )
        t = self.raw.provenance
        if t is None:
            return
        if sum(t.child_count) != len(t.children):
            raise IntegrityError(
                f"provenance rows take {sum(t.child_count)} children but the pool has {len(t.children)}",
                where="$.provenance.child_count",
                expected="child counts that add up to len($.provenance.children)",
            )
        # Children come before their parents: every pooled child is below the row that owns it.
        pos = 0
        for row, count in enumerate(t.child_count):
            if count and max(t.children[pos : pos + count]) >= row:
                j = next(j for j in range(pos, pos + count) if t.children[j] >= row)
                raise IntegrityError(
                    f"provenance row {row} has child {t.children[j]}, which is not an earlier row",
                    where=f"$.provenance.children[{j}]",
                    expected=f"a row below {row}",
                )
            pos += count

    # -- nodes ----------------------------------------------------------------------------------

    @cached_property
    def _node_index(self) -> dict[str, int]:
        strings = self.raw.strings
        return {strings[n.name]: i for i, n in enumerate(self.raw.graph.nodes)}

    def __len__(self) -> int:
        return len(self.raw.graph.nodes)

    def node(self, key: str | int) -> NodeView:
        """A node by name or index."""
        if isinstance(key, int):
            if not -len(self) <= key < len(self):
                raise NotFoundError(f"node index {key} out of range ({len(self)} nodes)", key=key, where="node")
            return NodeView(self, key % len(self) if key < 0 else key)
        i = self._node_index.get(key)
        if i is None:
            hint = did_you_mean(key, self._node_index)
            raise NotFoundError(f"no node named {key!r}{hint}", key=key, where="node")
        return NodeView(self, i)

    def nodes(self) -> Iterator[NodeView]:
        """Every node, in graph order."""
        return (NodeView(self, i) for i in range(len(self)))

    # -- debug info ----------------------------------------------------------------------------

    def frames(self, stack: int) -> list[FrameKey]:
        """The frames of stack-trie row ``stack``, outermost first."""
        r = self.raw
        parent, frame = r.stacks.parent, r.stacks.frame
        f_line, f_col, f_end, f_ann = r.frames.line, r.frames.col, r.frames.end_col, r.frames.annotation
        f_end_line = r.frames.end_line
        l_file, l_line, l_name, l_text = r.lines.file, r.lines.line, r.lines.name, r.lines.text
        names, s = r.files.name, r.strings
        out = []
        seen = 0
        while stack:
            fi = frame[stack]
            li = f_line[fi]
            out.append(
                FrameKey(
                    s[names[l_file[li]]],
                    l_line[li],
                    s[l_name[li]],
                    s[l_text[li]],
                    f_col[fi] if f_col else -1,
                    f_end[fi] if f_end else -1,
                    s[f_ann[fi]] if f_ann else "",
                    f_end_line[fi] if f_end_line else -1,
                )
            )
            stack = parent[stack]
            seen += 1
            if seen > len(parent):  # only reachable on an unvalidated, cyclic document
                raise IntegrityError("stack trie has a cycle", where="$.stacks.parent")
        out.reverse()
        return out

    def stack_trace(self, stack: int, style: int = 1) -> str:
        """Render stack-trie row ``stack`` as a legacy string (cached per stack and style)."""
        key = (stack, style)
        text = self._stack_cache.get(key)
        if text is None:
            frames = self.frames(stack)
            where = f"$.stacks[{stack}]"
            text = self._stack_cache[key] = render_frames_checked(frames, style, source=None, where=where)
        return charge_rendered(text, source=None, where=lambda: f"$.stacks[{stack}]")

    def modules(self, module: int) -> list[ModuleKey]:
        """The module-trie path ending at row ``module``, outermost first."""
        r = self.raw
        t, s = r.modules, r.strings
        out = []
        while module:
            method = s[t.method[module]] if t.method else ""
            out.append(ModuleKey(s[t.key[module]], s[t.path[module]], s[t.type[module]], method))
            module = t.parent[module]
            if len(out) > len(t.parent):
                raise IntegrityError("module trie has a cycle", where="$.modules.parent")
        out.reverse()
        return out

    @cached_property
    def _provenance(self) -> ProvenanceRenderer:
        t = self.raw.provenance
        from tracepack import model as m

        empty = m.ProvenanceTable([0], [0], [0], [0], [0], [0], [])
        return ProvenanceRenderer(self.raw.strings, empty if t is None else t)

    def from_node(self, rows: list[int]) -> str:
        """Render a ``from_node`` list of provenance rows as torch's JSON text (cached per row)."""
        try:
            return charge_rendered(self._provenance.render(rows), source=None, where="from_node")
        except DecodeError:
            raise  # a budget: the message says which
        except ValueError as exc:  # only reachable on an unvalidated document
            raise IntegrityError(str(exc), where="$.provenance.children") from None

    def provenance(self, rows: list[int]) -> list[Provenance]:
        """A ``from_node`` list of provenance rows as :class:`~tracepack.traces.Provenance` trees."""
        try:
            return self._provenance.entries(rows)
        except ValueError as exc:
            raise IntegrityError(str(exc), where="$.provenance.children") from None

    def node_meta(self, node: m.Node) -> dict[str, str]:
        """A stored node's metadata in the producer's order, lifted values rendered back."""
        s = self.raw.strings
        out = {}
        at = node.from_node_meta_index
        for j, (k, v) in enumerate(zip(node.meta_keys, node.meta_values, strict=True)):
            if j == at:
                out[FROM_NODE_KEY] = self.from_node(node.from_node)
            if v >= 0:
                out[s[k]] = s[v]
            elif v == -1:
                out[s[k]] = self.stack_trace(node.stack, node.stack_style)
            else:
                out[s[k]] = self.module_stack(node.module)
        if at >= len(node.meta_keys):
            out[FROM_NODE_KEY] = self.from_node(node.from_node)
        return out

    @cached_property
    def _source_starts(self) -> list[int]:
        return [0, *accumulate(self.raw.sources.line_count)]

    def source_text(self, source: int) -> str:
        """The full text of TorchScript source ``source``."""
        starts, s, lines = self._source_starts, self.raw.strings, self.raw.sources.lines
        return "".join(s[i] for i in lines[starts[source] : starts[source + 1]])

    def debug_handle(self, handle: int) -> DebugHandle:
        """Resolve a debug handle (binary search over the sorted table)."""
        t = self.raw.debug_handles
        i = bisect_left(t.handle, handle)
        if i == len(t.handle) or t.handle[i] != handle:
            raise NotFoundError(f"no debug handle {handle}", key=handle, where="debug_handle")
        rng = t.range[i]
        src = None
        if rng:
            r = self.raw.ranges
            file = self.raw.sources.file[r.source[rng]]
            src = (self.raw.strings[file] if file >= 0 else "", r.start[rng], r.end[rng])
        return DebugHandle(
            handle,
            self.raw.strings[t.op[i]],
            self.stack_trace(t.stack[i]),
            self.module_hierarchy(t.module[i]),
            src,
        )

    def extension(self, name: str) -> str | None:
        """The JSON text of the document's extension ``name`` (the first of that name), or None."""
        for i, e in enumerate(self.raw.extensions):
            if e.name == name:
                if e.template:  # 1.2: its strings interned
                    return interned_json.fill(e.template, e.refs, self.raw.strings, where=f"$.extensions[{i}]")
                return e.json
        return None

    def table_sizes(self) -> dict[str, int]:
        """Rows per table."""
        from tracepack import model as m

        return dict(m.validate.table_sizes(self.raw))


class NodeView:
    """One node with its references resolved on access."""

    __slots__ = ("_doc", "index")

    def __init__(self, doc: Document, index: int) -> None:
        self._doc = doc
        self.index = index

    @property
    def raw(self) -> m.Node:
        return self._doc.raw.graph.nodes[self.index]

    @property
    def name(self) -> str:
        return self._doc.raw.strings[self.raw.name]

    @property
    def target(self) -> str:
        return self._doc.raw.strings[self.raw.target]

    @property
    def stack_trace(self) -> str | None:
        """The legacy ``stack_trace`` string, or ``None`` when the node has none."""
        n = self.raw
        if n.stack:
            return self._doc.stack_trace(n.stack, n.stack_style)
        lit = self._literal("stack_trace")
        if lit is not None:
            return lit
        return self._doc.stack_trace(0, n.stack_style) if -1 in n.meta_values else None

    @property
    def module_stack(self) -> str | None:
        """The legacy ``nn_module_stack`` string, or ``None`` when the node has none."""
        n = self.raw
        if n.module:
            return self._doc.module_stack(n.module)
        lit = self._literal("nn_module_stack")
        if lit is not None:
            return lit
        return "" if -2 in n.meta_values else None

    @property
    def module_hierarchy(self) -> str:
        """The module path in TorchScript's ``TOP(C)::forward.A0(A)::forward`` form."""
        return self._doc.module_hierarchy(self.raw.module)

    @property
    def frames(self) -> list[FrameKey]:
        return self._doc.frames(self.raw.stack)

    @property
    def modules(self) -> list[ModuleKey]:
        """The module-trie path of the node, outermost module first (empty at the root)."""
        return self._doc.modules(self.raw.module)

    @property
    def from_node(self) -> str | None:
        """The legacy ``from_node`` metadata string (torch's JSON text), or ``None`` when the node has none."""
        n = self.raw
        if n.from_node or n.from_node_meta_index >= 0:
            return self._doc.from_node(n.from_node)
        return self._literal(FROM_NODE_KEY)

    @property
    def provenance(self) -> list[Provenance]:
        """The node's interned ``from_node`` provenance as NodeSource trees (empty when it has none)."""
        return self._doc.provenance(self.raw.from_node)

    def _literal(self, key: str) -> str | None:
        s = self._doc.raw.strings
        n = self.raw
        for k, v in zip(n.meta_keys, n.meta_values, strict=True):
            if s[k] == key and v >= 0:
                return s[v]
        return None

    @property
    def meta(self) -> dict[str, str]:
        """All metadata in the producer's order, lifted values rendered back."""
        return self._doc.node_meta(self.raw)

    def argument(self, arg: m.Argument) -> Any:
        """A stored argument as a plain Python value (tensors as ``{"tensor": name}``)."""
        return resolve_argument(self._doc.raw.strings, arg)

    @property
    def inputs(self) -> list[tuple[str, Any]]:
        s = self._doc.raw.strings
        return [(s[a.name], resolve_argument(s, a.arg)) for a in self.raw.inputs]

    @property
    def outputs(self) -> list[Any]:
        s = self._doc.raw.strings
        return [resolve_argument(s, a) for a in self.raw.outputs]

    def __repr__(self) -> str:
        return f"<node {self.name} = {self.target}>"


def json_value(text: str, where: str) -> Any:
    """Parse JSON text stored in a document, as a DecodeError when it is not JSON (or nests, or
    holds an integer, past the budgets of :mod:`tracepack.io.guard`)."""
    from tracepack.io.guard import parse_json

    try:
        return parse_json(lambda: json.loads(text), text, None, DecodeError, where)
    except json.JSONDecodeError as exc:
        raise DecodeError(f"stored JSON is not valid: {exc.msg} at character {exc.pos}", where=where) from None


def _variant(cls: type) -> int:
    return int(cls.__struct_config__.tag)  # type: ignore[attr-defined]


#: Argument variant id -> how it resolves, built on first use (it needs the typed model). Variant ids
#: never change between schema versions, so arguments of any version's model resolve (readers of older
#: files, e.g. tracepack.lazy, use this).
_RESOLVE: dict[int, Callable[[list[str], Any], Any]] = {}


def _resolvers() -> dict[int, Callable[[list[str], Any], Any]]:
    if not _RESOLVE:
        from tracepack import model as m

        _RESOLVE.update(
            {
                _variant(m.ArgNone): lambda s, a: None,
                _variant(m.ArgTensor): lambda s, a: {"tensor": s[a.name]},
                _variant(m.ArgTensors): lambda s, a: [{"tensor": s[i]} for i in a.names],
                _variant(m.ArgString): lambda s, a: s[a.value],
                _variant(m.ArgStrings): lambda s, a: [s[i] for i in a.values],
                _variant(m.ArgSymInt): lambda s, a: {"sym_int": s[a.name]},
                _variant(m.ArgGeneric): lambda s, a: {s[a.variant]: json_value(s[a.json], f"$.strings[{a.json}]")},
                _variant(m.ArgInts): lambda s, a: list(a.values),
                _variant(m.ArgFloats): lambda s, a: list(a.values),
                _variant(m.ArgBools): lambda s, a: list(a.values),
            }
        )
    return _RESOLVE


def resolve_argument(s: list[str], a: m.Argument) -> Any:
    """A stored argument as a plain Python value (tensors as ``{"tensor": name}``), of any schema version."""
    resolve = _resolvers().get(_variant(type(a)))
    return a.value if resolve is None else resolve(s, a)  # type: ignore[union-attr]
