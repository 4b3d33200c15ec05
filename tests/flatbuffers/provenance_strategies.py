"""Documents that use what schema 1.1 added: ``from_node`` provenance and frame end lines.

``tests/strategies.py`` builds documents of 1.0's features; this adds nodes whose metadata
holds torch.fx ``from_node`` provenance in torch's exact ``json.dumps`` form (lifted into the
provenance table, at any position among the other keys), ``from_node`` text that does not
render back exactly (kept verbatim), provenance given directly (outside the metadata), and
stacks of frames with ``end_line`` positions (8-tuples in :class:`~tracepack.traces.FrameKey`
order). NodeSources come from a small pool, so equal ones (children included) share rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from tracepack import Document, DocumentBuilder
from tracepack.traces import FrameKey, Provenance

__all__ = ["ProvenanceDocument", "from_node_values", "provenance_documents"]

_names = st.sampled_from(["linear", "relu", "add_1", "x", "ÿ_λ", 'q"uote\\', ""])
_targets = st.sampled_from(["<built-in function linear>", "aten.relu.default", "call_module", "☃"])
_passes = st.sampled_from(["Interpreter_PropagateUnbackedSymInts", "ExportPass", "decompose", ""])
_actions = st.sampled_from(["create", "replace"])
_graph_ids = st.one_of(st.sampled_from([0, 1, 140230981]), st.integers(-(2**63), 2**63 - 1))


def _source(children: st.SearchStrategy[list[dict[str, Any]]]) -> st.SearchStrategy[dict[str, Any]]:
    # torch's key order: name, target, graph_id, pass_name, action, from_node.
    return st.builds(
        lambda name, target, graph_id, pass_name, action, kids: {
            "name": name,
            "target": target,
            "graph_id": graph_id,
            "pass_name": pass_name,
            "action": action,
            "from_node": kids,
        },
        _names,
        _targets,
        _graph_ids,
        _passes,
        _actions,
        children,
    )


#: One NodeSource as torch.fx writes it (a dict), with its own provenance nested.
node_sources: st.SearchStrategy[dict[str, Any]] = st.recursive(
    _source(st.just([])), lambda inner: _source(st.lists(inner, max_size=3)), max_leaves=8
)


def _as_provenance(d: dict[str, Any]) -> Provenance:
    return Provenance(
        d["name"], d["target"], d["graph_id"], d["pass_name"], d["action"], tuple(map(_as_provenance, d["from_node"]))
    )


@st.composite
def from_node_values(draw: st.DrawFn) -> tuple[str, bool]:
    """A ``from_node`` metadata value and whether it is torch's exact text (so it is lifted)."""
    entries = draw(st.lists(node_sources, max_size=3))
    kind = draw(st.sampled_from(["exact", "exact", "exact", "indented", "compact", "text"]))
    if kind == "exact":
        return json.dumps(entries), True
    if kind == "indented":
        return json.dumps(entries, indent=1), entries == []  # "[]" has no whitespace to differ in
    if kind == "compact":
        text = json.dumps(entries, separators=(",", ":"))
        return text, text == json.dumps(entries)
    return draw(st.sampled_from(["", "[", "not json", '[{"name": "x", "target": "x", "graph_id": 1}]'])), False


_files = st.sampled_from(["/home/user/model.py", "/usr/lib/python3.12/site-packages/torch/nn/functional.py", "ü.py"])


@st.composite
def frames_with_end_lines(draw: st.DrawFn) -> tuple[Any, ...]:
    """A frame as an 8-tuple ``(file, line, name, text, col, end_col, annotation, end_line)``."""
    line = draw(st.integers(0, 5000))
    end_line = draw(st.one_of(st.just(-1), st.integers(line, line + 20), st.just(2**63 - 1)))
    col = draw(st.integers(-1, 120))
    end_col = draw(st.integers(-1, 200)) if col >= 0 else -1
    text = draw(st.sampled_from(["", "y = self.linear(x)", "return torch.relu(y) ☃"]))
    return (draw(_files), line, draw(st.sampled_from(["forward", "f", "<module>"])), text, col, end_col, "", end_line)


@dataclass
class ProvenanceDocument:
    """A generated document and what went into it."""

    doc: Document
    #: node name -> the metadata given, in order.
    meta: dict[str, dict[str, str]] = field(default_factory=dict)
    #: node name -> the ``from_node`` it has (metadata text, or the rendering of what was given directly).
    from_node: dict[str, str | None] = field(default_factory=dict)
    #: node name -> the frames given directly (``FrameKey``s).
    frames: dict[str, list[FrameKey]] = field(default_factory=dict)
    #: whether some node's provenance was lifted, and whether some frame has an end line.
    lifted: bool = False
    end_lines: bool = False


@st.composite
def provenance_documents(draw: st.DrawFn, *, max_nodes: int = 12) -> ProvenanceDocument:
    """A document with ``from_node`` provenance (lifted, verbatim, direct) and frames with end lines."""
    b = DocumentBuilder(producer="provenance-test")
    out = ProvenanceDocument(doc=None)  # type: ignore[arg-type]
    pool = draw(st.lists(frames_with_end_lines(), min_size=1, max_size=6))
    for i in range(draw(st.integers(0, max_nodes))):
        name = f"n{i}"
        meta: dict[str, str] = {}
        others = draw(st.lists(st.sampled_from(["val", "seq_nr", "torch_fn", "custom"]), unique=True, max_size=3))
        keys = [*others]
        kind = draw(st.sampled_from(["meta", "meta", "direct", "none"]))
        if kind == "meta":
            keys.insert(draw(st.integers(0, len(keys))), "from_node")
        text, exact = draw(from_node_values()) if kind == "meta" else ("", False)
        for k in keys:
            meta[k] = text if k == "from_node" else draw(st.sampled_from(["1", "", "torch.ops.aten.add", "{}"]))
        direct = None
        if kind == "direct":
            direct = [_as_provenance(d) for d in draw(st.lists(node_sources, min_size=1, max_size=2))]
        frames = None
        if draw(st.booleans()):
            frames = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4))
            out.frames[name] = [FrameKey(*f) for f in frames]
            out.end_lines |= any(f[7] != -1 for f in frames)
        b.add_node(name, "call_function", stack_trace=frames, from_node=direct, meta=meta)
        out.meta[name] = meta
        out.lifted |= exact
        if kind == "meta":
            out.from_node[name] = text
        elif direct is not None:
            out.from_node[name] = json.dumps([_as_dict(p) for p in direct])
        else:
            out.from_node[name] = None
    out.doc = b.build()
    return out


def _as_dict(p: Provenance) -> dict[str, Any]:
    return {
        "name": p.name,
        "target": p.target,
        "graph_id": p.graph_id,
        "pass_name": p.pass_name,
        "action": p.action,
        "from_node": [_as_dict(c) for c in p.from_node],
    }
