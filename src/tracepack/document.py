"""The resolving reader: a typed document with its references resolved on demand.

A :class:`Document` wraps the stored form (``doc.raw``, the generated model of
the current schema version). Nothing is expanded up front: asking for a node's
stack trace walks the stack trie once and caches the rendered string *per
distinct stack*, so a graph of 100k nodes sharing 1k stacks holds 1k strings,
and every node that shares a stack shares the same string object.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Iterator
from functools import cached_property
from itertools import accumulate
from operator import ne
from typing import Any, NamedTuple

from tracepack import model as m
from tracepack.errors import DecodeError, IntegrityError, UsageError
from tracepack.traces import (
    FrameKey,
    ModuleKey,
    render_frames,
    render_module_hierarchy,
    render_nn_module_stack,
)

__all__ = ["DebugHandle", "Document", "NodeView", "json_value", "resolve_argument"]


class DebugHandle(NamedTuple):
    """A debug handle resolved: where an instruction came from."""

    handle: int
    op: str
    stack_trace: str
    module_hierarchy: str
    source_range: tuple[str, int, int] | None


class Document:
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
                raise UsageError(f"node index {key} out of range ({len(self)} nodes)", where="node")
            return NodeView(self, key % len(self) if key < 0 else key)
        i = self._node_index.get(key)
        if i is None:
            raise UsageError(f"no node named {key!r}", where="node")
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
            text = self._stack_cache[key] = render_frames(self.frames(stack), style)
        return text

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

    def module_stack(self, module: int) -> str:
        """Render module-trie row ``module`` as torch.export's ``nn_module_stack``."""
        key = (module, 0)
        text = self._module_cache.get(key)
        if text is None:
            text = self._module_cache[key] = render_nn_module_stack(self.modules(module))
        return text

    def module_hierarchy(self, module: int) -> str:
        """Render module-trie row ``module`` in TorchScript's ``TOP(C)::forward...`` form."""
        key = (module, 1)
        text = self._module_cache.get(key)
        if text is None:
            text = self._module_cache[key] = render_module_hierarchy(self.modules(module))
        return text

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
            raise UsageError(f"no debug handle {handle}", where="debug_handle")
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

    def table_sizes(self) -> dict[str, int]:
        """Rows per table."""
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
        s = self._doc.raw.strings
        n = self.raw
        out = {}
        for k, v in zip(n.meta_keys, n.meta_values, strict=True):
            if v >= 0:
                out[s[k]] = s[v]
            elif v == -1:
                out[s[k]] = self._doc.stack_trace(n.stack, n.stack_style)
            else:
                out[s[k]] = self._doc.module_stack(n.module)
        return out

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
    """Parse JSON text stored in a document, as a DecodeError when it is not JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DecodeError(f"stored JSON is not valid: {exc.msg} at character {exc.pos}", where=where) from None


def resolve_argument(s: list[str], a: m.Argument) -> Any:
    """A stored argument as a plain Python value (tensors as ``{"tensor": name}``)."""
    if isinstance(a, m.ArgNone):
        return None
    if isinstance(a, m.ArgTensor):
        return {"tensor": s[a.name]}
    if isinstance(a, m.ArgTensors):
        return [{"tensor": s[i]} for i in a.names]
    if isinstance(a, m.ArgString):
        return s[a.value]
    if isinstance(a, m.ArgStrings):
        return [s[i] for i in a.values]
    if isinstance(a, m.ArgSymInt):
        return {"sym_int": s[a.name]}
    if isinstance(a, m.ArgGeneric):
        return {s[a.variant]: json_value(s[a.json], f"$.strings[{a.json}]")}
    if isinstance(a, (m.ArgInts, m.ArgFloats, m.ArgBools)):
        return list(a.values)
    return a.value
