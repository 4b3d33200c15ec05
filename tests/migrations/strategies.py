"""Hypothesis strategies for schema evolution: documents of each version, with and without 1.1 information.

* :func:`documents_1_0`: random schema 1.0 documents, in the 1.0 generated model (the shared
  document strategy, written as 1.0: it never uses what 1.1 added);
* :func:`plain_documents_1_1`: random 1.1 documents with no 1.1-only information;
* :func:`rich_documents`: 1.1 documents that use what 1.1 added (``from_node`` provenance lifted
  from metadata, given directly, or kept verbatim; frames with ``end_line`` positions), with the
  inputs they were built from;
* :data:`json_values`, :func:`signatures`, :func:`signature_specs`, :func:`module_call_entries`: what
  1.2 stores typed or interned (a torch program's signature and module call graph, any JSON).
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from tests.strategies import documents
from tracepack import Document, DocumentBuilder, migrations
from tracepack.traces import Provenance, render_from_node
from tracepack.versions import CURRENT

__all__ = [
    "RichDocument",
    "documents_1_0",
    "documents_1_1",
    "from_node_lists",
    "json_values",
    "module_call_entries",
    "node_sources",
    "plain_documents_1_1",
    "rich_documents",
    "signature_specs",
    "signatures",
]

# Small alphabets, so equal NodeSources (shared rows) happen; some non-ASCII (escaped by json.dumps).
_names = st.text(alphabet=string.ascii_lowercase[:3] + '_ü\u2603\U0001f600"\\\n', max_size=4)
_graph_ids = st.one_of(st.integers(0, 3), st.integers(-(2**63), 2**63 - 1))
_passes = st.sampled_from(["Interpreter_PropagateUnbackedSymInts", "Interpreter_DynamoGraphTransformer", ""])
_actions = st.sampled_from(["create", "replace", "create.replace", ""])


_KEYS = ("name", "target", "graph_id", "pass_name", "action", "from_node")


def _source(*values: Any) -> dict[str, Any]:
    """A NodeSource as torch's ``NodeSource.to_dict`` makes it: name, target, graph_id, pass_name, action,
    from_node (key order included)."""
    return dict(zip(_KEYS, values, strict=True))


@st.composite
def node_sources(draw: st.DrawFn, max_size: int = 8) -> list[dict[str, Any]]:
    """A pool of NodeSources built bottom-up: later ones take earlier ones as their own provenance,
    so histories share subtrees (as passes that copy a node's provenance do)."""
    pool: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, max_size))):
        kids = draw(st.lists(st.sampled_from(pool), max_size=3)) if pool else []
        pool.append(_source(draw(_names), draw(_names), draw(_graph_ids), draw(_passes), draw(_actions), kids))
    return pool


@st.composite
def from_node_lists(draw: st.DrawFn) -> list[dict[str, Any]]:
    """One node's ``from_node`` value: a list of NodeSources (possibly empty)."""
    pool = draw(node_sources())
    return draw(st.lists(st.sampled_from(pool), max_size=3))


def as_provenance(entries: list[dict[str, Any]]) -> list[Provenance]:
    """NodeSource dicts as :class:`Provenance` trees."""
    return [
        Provenance(
            e["name"], e["target"], e["graph_id"], e["pass_name"], e["action"], tuple(as_provenance(e["from_node"]))
        )
        for e in entries
    ]


def documents_1_0() -> st.SearchStrategy[Any]:
    """Random documents in the schema 1.0 generated model."""
    return documents().map(lambda doc: migrations.downgrade(doc.raw, CURRENT, (1, 0)))


def documents_1_1() -> st.SearchStrategy[Any]:
    """Random documents in the schema 1.1 generated model."""
    return documents().map(lambda doc: migrations.downgrade(doc.raw, CURRENT, (1, 1)))


def plain_documents_1_1() -> st.SearchStrategy[Document]:
    """Random 1.1 documents without 1.1-only information (no provenance, no end_line)."""
    return documents()


@dataclass
class RichDocument:
    """A 1.1 document using 1.1 features, and what it was built from."""

    doc: Document
    #: node name -> metadata given (in order).
    meta: dict[str, dict[str, str]] = field(default_factory=dict)
    #: node name -> from_node text the node should render (lifted, verbatim or given directly), or None.
    from_node: dict[str, str | None] = field(default_factory=dict)
    #: nodes whose provenance was given directly (not as metadata) and is not empty.
    direct: set[str] = field(default_factory=set)
    #: distinct frames with an end_line position.
    end_lines: int = 0


@st.composite
def rich_documents(draw: st.DrawFn, max_nodes: int = 8) -> RichDocument:
    """A 1.1 document with from_node provenance in every form, and frames with end_line positions."""
    b = DocumentBuilder(producer="migrations")
    out = RichDocument(doc=None)  # type: ignore[arg-type]
    end_lines: set[tuple[Any, ...]] = set()
    for i in range(draw(st.integers(1, max_nodes))):
        name = f"n{i}"
        kind = draw(st.sampled_from(["lifted", "verbatim", "direct", "positions", "none"]))
        meta = {f"k{j}": draw(_names) for j in range(draw(st.integers(0, 3)))}
        kwargs: dict[str, Any] = {}
        text: str | None = None
        if kind == "lifted":
            text = json.dumps(draw(from_node_lists()))
        elif kind == "verbatim":  # not json.dumps's own form: stays a plain string
            text = json.dumps(draw(from_node_lists()), separators=(",", ":"))
            text = text if text != "[]" else "[ ]"
        if text is not None:
            items = list(meta.items())
            items.insert(draw(st.integers(0, len(items))), ("from_node", text))
            meta = dict(items)
        if kind == "direct":
            entries = as_provenance(draw(from_node_lists()))
            kwargs["from_node"] = entries
            # An empty list given directly is no provenance: nothing to tell it from "none" outside metadata.
            text = render_from_node(entries) if entries else None
            if entries:
                out.direct.add(name)
        if kind == "positions":
            frames = []
            for d in range(draw(st.integers(1, 3))):
                line = draw(st.integers(1, 50))
                end_line = draw(st.one_of(st.just(-1), st.integers(line, line + 3)))
                frame = (f"/src/m{d}.py", line, f"f{d}", "x = y(", 0, 3, "", end_line)
                frames.append(frame)
                if end_line != -1:
                    end_lines.add(frame)
            kwargs["stack_trace"] = frames
        b.add_node(name, "call_function", meta=meta, **kwargs)
        out.meta[name] = meta
        out.from_node[name] = text
    out.end_lines = len(end_lines)
    out.doc = b.build()
    return out


# -- schema 1.2: interned JSON, the program's signature and module call graph ---------------------

_text = st.text(alphabet='ab_.\u00fc\u2603"\\\n0', max_size=4)
#: Any JSON value ``json.loads`` gives (no NaN or infinity: ``json.dumps`` would not write them back as read).
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=10,
)
_kinds = st.sampled_from(["parameter", "buffer", "user_input", "user_output", "tensor_constant", "token", ""])
_target_keys = st.sampled_from(["parameter_name", "buffer_name", "target", "persistent", "", "arg"])


@st.composite
def signature_specs(draw: st.DrawFn) -> Any:
    """One input or output spec: the forms the typed columns hold, near misses, and any JSON."""
    name = draw(_text)
    arg = draw(
        st.sampled_from([{"name": name}, {"as_tensor": {"name": name}}, {"name": 3}, {"as_int": 3}, {"as_tensor": {}}])
    )
    inner: dict[str, Any] = {"arg": arg}
    if draw(st.booleans()):
        inner[draw(_target_keys)] = draw(st.one_of(_text, json_values))
    if draw(st.booleans()):
        inner["persistent"] = draw(st.one_of(st.booleans(), json_values))
    if draw(st.integers(0, 9)) == 0:
        inner = {k: inner[k] for k in reversed(inner)}  # "arg" not first
    spec = {draw(_kinds): inner}
    return draw(st.one_of(st.just(spec), st.just(spec), st.just(spec), json_values))


@st.composite
def module_call_entries(draw: st.DrawFn) -> Any:
    """One module call graph entry: torch's ``{"fqn", "signature"}`` (mostly null) or any JSON."""
    entry = {"fqn": draw(_text), "signature": draw(st.one_of(st.none(), st.none(), json_values))}
    return draw(st.one_of(st.just(entry), st.just(entry), json_values))


@st.composite
def signatures(draw: st.DrawFn) -> dict[str, Any]:
    """A program signature: input and output specs, sometimes with a key more."""
    sig: dict[str, Any] = {
        "input_specs": draw(st.lists(signature_specs(), max_size=5)),
        "output_specs": draw(st.lists(signature_specs(), max_size=3)),
    }
    if draw(st.booleans()):
        sig = {"extra": draw(json_values), **sig}
    return sig
