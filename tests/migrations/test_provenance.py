"""Schema 1.1 features: from_node provenance as an interned table, and frame end_line positions."""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tracepack
from tests.migrations.strategies import RichDocument, as_provenance, from_node_lists, node_sources, rich_documents
from tracepack import DocumentBuilder, IntegrityError, UsageError
from tracepack.torch.export.model_json import import_model_json
from tracepack.traces import FrameKey, Provenance, parse_from_node, render_from_node

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "torch" / "export_strict_model.json"

_ONE = [
    {
        "name": "linear",
        "target": "<built-in function linear>",
        "graph_id": 140438283881040,
        "pass_name": "Interpreter_PropagateUnbackedSymInts",
        "action": "create",
        "from_node": [],
    }
]


@given(from_node_lists())
def test_torch_text_parses_and_renders_back_exactly(entries: list[dict[str, Any]]) -> None:
    text = json.dumps(entries)
    parsed = parse_from_node(text)
    assert parsed == as_provenance(entries)
    assert render_from_node(parsed) == text


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(_ONE, separators=(",", ":")),  # not torch's separators
        json.dumps(_ONE, ensure_ascii=False).replace("linear", "lïnear"),  # raw non-ASCII
        json.dumps(_ONE).replace("create", "cre\\u0061te"),  # an escape json.dumps would not write
        json.dumps([{k: _ONE[0][k] for k in reversed(_ONE[0])}]),  # key order
        json.dumps([{**_ONE[0], "extra": 1}]),
        json.dumps([{k: v for k, v in _ONE[0].items() if k != "action"}]),
        json.dumps([{**_ONE[0], "graph_id": True}]),
        json.dumps([{**_ONE[0], "graph_id": 1.0}]),
        json.dumps([{**_ONE[0], "graph_id": 2**63}]),
        json.dumps([{**_ONE[0], "graph_id": None}]),
        json.dumps([{**_ONE[0], "action": ["create"]}]),
        json.dumps([{**_ONE[0], "from_node": {}}]),
        json.dumps([{**_ONE[0], "name": "\ud800"}]),  # a lone surrogate no codec can store
        json.dumps(_ONE) + " ",
        json.dumps(_ONE[0]),
        "[1]",
        "[",
        "",
        "null",
        "[" * 5000 + "]" * 5000,
    ],
)
def test_text_that_does_not_render_back_stays_verbatim(text: str) -> None:
    assert parse_from_node(text) is None
    b = DocumentBuilder()
    b.add_node("n", "t", meta={"a": "1", "from_node": text})
    doc = b.build()
    node = doc.node("n")
    assert node.raw.from_node_meta_index == -1
    assert node.meta == {"a": "1", "from_node": text}
    assert node.from_node == text
    assert doc.raw.provenance is None
    assert tracepack.loads(tracepack.dumps(doc)).node("n").meta == node.meta


def test_lifted_from_node_keeps_its_place_in_the_metadata() -> None:
    text = json.dumps(_ONE)
    b = DocumentBuilder()
    b.add_node("first", "t", meta={"from_node": text, "a": "1"})
    b.add_node("middle", "t", meta={"a": "1", "from_node": text, "b": "2"})
    b.add_node("last", "t", meta={"a": "1", "from_node": "[]"})
    b.add_node("direct", "t", from_node=text)
    b.add_node("none", "t", meta={"a": "1"})
    doc = b.build()
    indices = {n.name: (n.raw.from_node_meta_index, len(n.raw.meta_keys)) for n in doc.nodes()}
    assert indices == {"first": (0, 1), "middle": (1, 2), "last": (1, 1), "direct": (-1, 0), "none": (-1, 1)}
    assert list(doc.node("middle").meta.items()) == [("a", "1"), ("from_node", text), ("b", "2")]
    assert doc.node("last").meta == {"a": "1", "from_node": "[]"}
    assert doc.node("direct").meta == {}
    assert doc.node("direct").from_node == text
    assert doc.node("none").from_node is None
    assert doc.node("direct").provenance == as_provenance(_ONE)
    # Nodes of the same text share the rendered string object.
    assert doc.node("first").from_node is doc.node("middle").from_node
    assert "from_node" not in doc.raw.strings


@given(node_sources(max_size=10))
def test_equal_node_sources_share_one_row(pool: list[dict[str, Any]]) -> None:
    b = DocumentBuilder()
    for i, entry in enumerate(pool):
        b.add_node(f"n{i}", "t", meta={"from_node": json.dumps([entry])})
    doc = b.build()
    t = doc.raw.provenance
    assert t is not None
    keys = {(t.name[r], t.target[r], t.graph_id[r], t.pass_name[r], t.action[r]) for r in range(len(t.name))}
    assert len(t.name) <= 1 + len({json.dumps(e) for e in _all(pool)})
    assert len(keys) <= len(t.name)
    for i, entry in enumerate(pool):
        assert doc.node(f"n{i}").meta["from_node"] == json.dumps([entry])
    doc.validate()


def _all(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for e in entries:
        out.append(e)
        out.extend(_all(e["from_node"]))
    return out


@given(rich_documents())
def test_rich_documents_render_what_went_in_through_every_codec(rich: RichDocument) -> None:
    for codec in ("json", "msgpack", "flatbuffers-rows", "flatbuffers-columns"):
        doc = tracepack.loads(tracepack.dumps(rich.doc, codec=codec))
        assert doc == rich.doc
        for name, meta in rich.meta.items():
            node = doc.node(name)
            assert list(node.meta.items()) == list(meta.items())
            assert node.from_node == rich.from_node[name]


def test_the_torch_sample_lifts_every_from_node() -> None:
    data = SAMPLE.read_bytes()
    doc = import_model_json(data)
    nodes = json.loads(data)["graph_module"]["graph"]["nodes"]
    t = doc.raw.provenance
    assert t is not None
    # Two NodeSources per node (a chain): every row but the reserved one is used once.
    assert len(t.name) == 1 + 2 * len(nodes)
    for i, n in enumerate(nodes):
        view = doc.node(i)
        assert view.raw.from_node_meta_index >= 0
        assert view.meta == n["metadata"]
        assert view.from_node == n["metadata"]["from_node"]
    # Interned, the provenance takes less room than the strings it replaces.
    lifted, verbatim = DocumentBuilder(), DocumentBuilder()
    for i, n in enumerate(nodes):
        lifted.add_node(str(i), "t", meta={"from_node": n["metadata"]["from_node"]})
        verbatim.add_node(str(i), "t", meta={"from_node_text": n["metadata"]["from_node"]})
    small, large = (len(msgspec.msgpack.encode(x.build_raw())) for x in (lifted, verbatim))
    assert small < large * 0.6


def test_deep_provenance_renders_without_recursion() -> None:
    chain = Provenance("n0", "t", 0, "p", "a")
    for i in range(1, 5000):
        chain = Provenance(f"n{i}", "t", i, "p", "a", (chain,))
    # Chains this deep come from stored files (JSON metadata nests less deeply): build the table.
    b = DocumentBuilder()
    b.add_node("deep", "t")
    raw = b.build_raw()
    n = 3000
    raw.provenance = tracepack.model.ProvenanceTable(
        name=[0] * (n + 1),
        target=[0] * (n + 1),
        graph_id=list(range(n + 1)),
        pass_name=[0] * (n + 1),
        action=[0] * (n + 1),
        child_count=[0, *([1] * n)],
        children=list(range(n)),
    )
    raw.graph.nodes[0].from_node = [n]
    raw.graph.nodes[0].from_node_meta_index = 0
    doc = tracepack.Document(raw)
    doc.validate()
    text = doc.node("deep").meta["from_node"]
    assert text.count('"from_node": [') == n + 1
    assert doc.node("deep").provenance[0].graph_id == n
    with pytest.raises(UsageError, match="nests too deeply"):
        DocumentBuilder().add_node("x", "t", from_node=[chain])


def _broken(**changes: Any) -> tracepack.Document:
    b = DocumentBuilder()
    b.add_node("n", "t", meta={"a": "1", "from_node": json.dumps([{**_ONE[0], "from_node": _ONE}])})
    raw = b.build_raw()
    for path, value in changes.items():
        obj: Any = raw
        *head, last = path.split("__")
        for part in head:
            obj = getattr(obj, part) if not part.isdigit() else obj[int(part)]
        setattr(obj, last, value)
    return tracepack.Document(raw)


@pytest.mark.parametrize(
    ("changes", "where", "message"),
    [
        ({"provenance__children": [2]}, "$.provenance.children[0]", "provenance row 2 has child 2"),
        ({"provenance__child_count": [0, 0, 0]}, "$.provenance.child_count", "take 0 children but the pool has 1"),
        ({"graph__nodes__0__from_node_meta_index": 2}, "$.graph.nodes[0].from_node_meta_index", "outside"),
        ({"graph__nodes__0__from_node": [3]}, "$.graph.nodes[0].from_node[0]", "reference 3 is out of range"),
    ],
)
def test_broken_provenance_is_an_integrity_error(changes: dict[str, Any], where: str, message: str) -> None:
    doc = _broken(**changes)
    with pytest.raises(IntegrityError) as info:
        doc.validate()
    assert info.value.where == where
    assert message in info.value.problem


def test_a_from_node_key_beside_a_lifted_one_is_an_integrity_error() -> None:
    b = DocumentBuilder()
    b.add_node("n", "t", meta={"from_node": "[]"})
    raw = b.build_raw()
    raw.graph.nodes[0].meta_keys = [b.string("from_node")]
    raw.graph.nodes[0].meta_values = [0]
    raw.strings = list(b._strings)
    with pytest.raises(IntegrityError, match="has a `from_node` key and a lifted `from_node`"):
        tracepack.Document(raw).validate()


def test_unvalidated_cycles_raise_integrity_errors_when_rendered() -> None:
    doc = _broken(provenance__children=[2])
    with pytest.raises(IntegrityError, match="not an earlier row"):
        _ = doc.node("n").meta
    with pytest.raises(IntegrityError, match="not an earlier row"):
        _ = doc.node("n").provenance


def test_from_node_arguments() -> None:
    b = DocumentBuilder()
    with pytest.raises(UsageError, match="from_node string does not parse"):
        b.add_node("a", "t", from_node="not json")
    with pytest.raises(UsageError, match=r"graph_id 1\.5 is not a 64-bit integer"):
        b.add_node("b", "t", from_node=[("n", "t", 1.5, "p", "a", ())])
    b.add_node("c", "t", from_node=[("n", "t", 1, "p", "a", (("m", "u", 2, "q", "b"),))])
    assert b.build().node("c").provenance == [Provenance("n", "t", 1, "p", "a", (Provenance("m", "u", 2, "q", "b"),))]


# -- positions ------------------------------------------------------------------------------------


@pytest.mark.skipif(sys.version_info < (3, 11), reason="FrameSummary has positions since Python 3.11")
@given(st.integers(1, 2**40), st.integers(0, 10), st.integers(0, 200), st.integers(0, 200))
def test_frame_summary_positions_are_kept(line: int, extra: int, col: int, end_col: int) -> None:
    kwargs = {"end_lineno": line + extra, "colno": col, "end_colno": end_col}
    summary = traceback.FrameSummary("/m.py", line, "f", line="x = y(", **kwargs)  # type: ignore[arg-type]
    b = DocumentBuilder()
    b.add_node("a", "t", stack_trace=[summary])
    b.add_node("b", "t", stack_trace=[("/m.py", line, "f", "x = y(", col, end_col, "", line + extra)])
    doc = tracepack.loads(tracepack.dumps(b.build()))
    want = FrameKey("/m.py", line, "f", "x = y(", col, end_col, "", line + extra)
    assert doc.node("a").frames == doc.node("b").frames == [want]
    assert doc.raw.frames.end_line == [-1, line + extra]
    assert doc.node("a").stack_trace == f'File "/m.py", line {line}, in f\n    x = y('


def test_end_line_column_is_absent_when_no_frame_has_one() -> None:
    b = DocumentBuilder()
    b.add_node("a", "t", stack_trace=[("/m.py", 3, "f", "x", 1, 2)])
    b.add_node("b", "t", stack_trace=[traceback.FrameSummary("/m.py", 4, "g", line="y")])
    raw = b.build_raw()
    assert raw.frames.end_line == []
    assert raw.frames.col == [-1, 1, -1]
    with pytest.raises(UsageError, match="end_line"):
        b.add_node("c", "t", stack_trace=[("/m.py", 3, "f", "x", 1, 2, "", 3, "one too many")])
