"""Schema 1.0 <-> 1.1.

1.1 only adds (docs/schema-rules.md, rule 1): ``FrameTable.end_line`` (a sparse
column), ``Node.from_node`` and ``Node.from_node_meta_index`` (provenance
references and where the metadata renders them), and the optional
``Document.provenance`` table.

``upgrade`` is lossless and cheap: every column, the string table and each
node's metadata lists are shared with the input, not copied (so the result
shares lists with its input: mutate neither). Structs are per-version classes,
so nodes are rebuilt positionally; their arguments and the graph's values move
through MessagePack at C speed (1.1's layout is 1.0's with trailing fields
appended, so either version's encoding of them decodes as the other).

``downgrade`` writes 1.0 wherever that loses nothing:

* provenance lifted from metadata (``from_node_meta_index`` >= 0) goes back
  into the metadata as the verbatim JSON string it was lifted from, byte for
  byte (the same text ``NodeView.meta`` shows), at the same position;
* it refuses, with a :class:`~tracepack.errors.VersionError` that counts what
  would be lost, frames with ``end_line`` positions, provenance set on nodes
  outside their metadata, and provenance rows no node refers to.
"""

from __future__ import annotations

from typing import Any

import msgspec
from tracepack_generated.v1_0 import model as old
from tracepack_generated.v1_1 import model as new

from tracepack.errors import VersionError
from tracepack.traces import ProvenanceRenderer

__all__ = ["FROM", "TO", "downgrade", "upgrade"]

FROM = (1, 0)
TO = (1, 1)
#: The metadata key lifted provenance is rendered under.
FROM_NODE_KEY = "from_node"

_encode = msgspec.msgpack.Encoder().encode
_NEW_STYLES = tuple(new.StackStyle)
_OLD_STYLES = tuple(old.StackStyle)
_new_args = msgspec.msgpack.Decoder(list[new.Argument]).decode
_old_args = msgspec.msgpack.Decoder(list[old.Argument]).decode
_new_named = msgspec.msgpack.Decoder(list[new.NamedArgument]).decode
_old_named = msgspec.msgpack.Decoder(list[old.NamedArgument]).decode
_new_values = msgspec.msgpack.Decoder(list[new.Value]).decode
_old_values = msgspec.msgpack.Decoder(list[old.Value]).decode


def _convert_graph(g: Any, to: Any, *, styles: Any, args: Any, named: Any, values: Any) -> Any:
    """A graph in the other version's model: node fields are the same, in the same positions."""
    node, enc = to.Node, _encode
    nodes = [
        node(
            n.name,
            n.target,
            named(enc(n.inputs)) if n.inputs else [],
            args(enc(n.outputs)) if n.outputs else [],
            n.stack,
            styles[n.stack_style],
            n.module,
            n.meta_keys,
            n.meta_values,
        )
        for n in g.nodes
    ]
    return to.Graph(g.name, args(enc(g.inputs)), args(enc(g.outputs)), nodes, values(enc(g.values)))


def _upgrade_graph(g: old.Graph) -> new.Graph:
    result: new.Graph = _convert_graph(g, new, styles=_NEW_STYLES, args=_new_args, named=_new_named, values=_new_values)
    return result


def _downgrade_graph(g: new.Graph) -> old.Graph:
    result: old.Graph = _convert_graph(g, old, styles=_OLD_STYLES, args=_old_args, named=_old_named, values=_old_values)
    return result


def upgrade(raw: old.Document) -> new.Document:
    """A 1.0 document as 1.1: nothing to fill in but defaults."""
    h = raw.header
    p = h.producer
    fr = raw.frames
    mo = raw.modules
    so = raw.sources
    ra = raw.ranges
    dh = raw.debug_handles
    return new.Document(
        header=new.Header(
            h.magic, new.Version(*TO), None if p is None else new.Producer(p.name, p.version), _key_values(h, new)
        ),
        strings=raw.strings,
        files=new.FileTable(raw.files.name),
        lines=new.LineTable(raw.lines.file, raw.lines.line, raw.lines.name, raw.lines.text),
        frames=new.FrameTable(fr.line, fr.col, fr.end_col, fr.annotation),
        stacks=new.StackTable(raw.stacks.parent, raw.stacks.frame),
        modules=new.ModuleTable(mo.parent, mo.key, mo.path, mo.type, mo.method),
        sources=new.SourceTable(so.file, so.start_line, so.line_count, so.lines),
        ranges=new.RangeTable(ra.source, ra.start, ra.end),
        debug_handles=new.DebugHandleTable(dh.handle, dh.stack, dh.module, dh.op, dh.range),
        graph=_upgrade_graph(raw.graph),
        debug_files=[
            new.DebugFile(f.path, f.byte_offset, f.range, f.tag, new.DebugFormat(f.format)) for f in raw.debug_files
        ],
        extensions=[new.Extension(e.name, e.json) for e in raw.extensions],
        provenance=None,
    )


def _key_values(h: Any, to: Any) -> list[Any]:
    return [to.KeyValue(kv.key, kv.value) for kv in h.metadata]


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def losses(raw: new.Document) -> list[str]:
    """What writing ``raw`` as 1.0 would lose, one phrase per kind (empty when nothing)."""
    out = []
    with_end_line = sum(1 for v in raw.frames.end_line if v != -1)
    if with_end_line:
        out.append(
            f"{_plural(with_end_line, 'frame has', 'frames have')} an end_line position "
            "(Python 3.11 co_positions), which schema 1.0 cannot hold"
        )
    nodes = raw.graph.nodes
    outside = sum(1 for n in nodes if n.from_node and n.from_node_meta_index < 0)
    if outside:
        out.append(
            f"{_plural(outside, 'node has', 'nodes have')} from_node provenance outside its metadata, which "
            "schema 1.0 cannot hold (it has no provenance table, and adding a metadata entry would change the node)"
        )
    t = raw.provenance
    if t is not None and not outside:
        unused = len(t.name) - len(_reachable(raw))
        if unused:
            out.append(
                f"{_plural(unused, 'provenance row is', 'provenance rows are')} referenced by no node, "
                "which schema 1.0 cannot hold"
            )
    return out


def _reachable(raw: new.Document) -> set[int]:
    """Provenance rows reachable from the nodes, row 0 (the reserved empty entry) included."""
    t = raw.provenance
    assert t is not None
    starts = [0]
    for n in t.child_count:
        starts.append(starts[-1] + n)
    seen = {0}
    stack = [r for n in raw.graph.nodes for r in n.from_node]
    while stack:
        r = stack.pop()
        if r not in seen:
            seen.add(r)
            stack.extend(t.children[starts[r] : starts[r + 1]])
    return seen


def downgrade(raw: new.Document) -> old.Document:
    """A 1.1 document as 1.0, or a VersionError naming everything 1.0 cannot hold."""
    lost = losses(raw)
    if lost:
        raise VersionError(
            "cannot write schema 1.0 without losing information: " + "; ".join(lost),
            where="schema 1.0",
            expected="a document without 1.1-only information, or schema version 1.1",
        )
    strings = raw.strings
    graph = raw.graph
    lifted = [i for i, n in enumerate(graph.nodes) if n.from_node_meta_index >= 0]
    if lifted:
        # Lifted provenance goes back into the metadata as the exact text it renders as.
        table = raw.provenance or new.ProvenanceTable([0], [0], [0], [0], [0], [0], [])
        renderer = ProvenanceRenderer(strings, table)
        strings = list(strings)
        ids = dict(zip(strings, range(len(strings)), strict=True))

        def intern(s: str) -> int:
            i = ids.get(s)
            if i is None:
                i = ids[s] = len(strings)
                strings.append(s)
            return i

        key = intern(FROM_NODE_KEY)
        nodes = list(graph.nodes)
        for i in lifted:
            n = nodes[i]
            at = n.from_node_meta_index
            if at > len(n.meta_keys):
                raise VersionError(
                    f"from_node_meta_index {at} is outside the metadata ({len(n.meta_keys)} keys)",
                    where=f"$.graph.nodes[{i}].from_node_meta_index",
                )
            try:
                text = renderer.render(n.from_node)
            except (ValueError, IndexError) as exc:  # only an unvalidated document gets here
                raise VersionError(f"provenance does not render: {exc}", where="$.provenance") from None
            keys, values = list(n.meta_keys), list(n.meta_values)
            keys.insert(at, key)
            values.insert(at, intern(text))
            nodes[i] = msgspec.structs.replace(
                n, meta_keys=keys, meta_values=values, from_node=[], from_node_meta_index=-1
            )
        graph = msgspec.structs.replace(graph, nodes=nodes)
    h = raw.header
    p = h.producer
    fr = raw.frames
    mo = raw.modules
    so = raw.sources
    ra = raw.ranges
    dh = raw.debug_handles
    return old.Document(
        header=old.Header(
            h.magic, old.Version(*FROM), None if p is None else old.Producer(p.name, p.version), _key_values(h, old)
        ),
        strings=strings,
        files=old.FileTable(raw.files.name),
        lines=old.LineTable(raw.lines.file, raw.lines.line, raw.lines.name, raw.lines.text),
        frames=old.FrameTable(fr.line, fr.col, fr.end_col, fr.annotation),
        stacks=old.StackTable(raw.stacks.parent, raw.stacks.frame),
        modules=old.ModuleTable(mo.parent, mo.key, mo.path, mo.type, mo.method),
        sources=old.SourceTable(so.file, so.start_line, so.line_count, so.lines),
        ranges=old.RangeTable(ra.source, ra.start, ra.end),
        debug_handles=old.DebugHandleTable(dh.handle, dh.stack, dh.module, dh.op, dh.range),
        graph=_downgrade_graph(graph),
        debug_files=[
            old.DebugFile(f.path, f.byte_offset, f.range, f.tag, old.DebugFormat(f.format)) for f in raw.debug_files
        ],
        extensions=[old.Extension(e.name, e.json) for e in raw.extensions],
    )
