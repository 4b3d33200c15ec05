"""Hostile provenance: shared rows that would expand exponentially are refused, not rendered."""

from __future__ import annotations

import json

import pytest

import tracepack
from tracepack import DocumentBuilder, IntegrityError
from tracepack.traces import ProvenanceRenderer


def _entry(name: str, children: list[object]) -> dict[str, object]:
    return {"name": name, "target": "t", "graph_id": 1, "pass_name": "p", "action": "create", "from_node": children}


def test_a_doubling_chain_is_refused_before_any_text_is_built() -> None:
    b = DocumentBuilder()
    b.add_node("n", "t", meta={"from_node": json.dumps([_entry("a", [_entry("b", [])])])})
    doc = b.build()
    table = doc.raw.provenance
    assert table is not None
    # Rewrite the table into 64 rows, each with the previous row twice as its children: 2**64 entries.
    rows = 64
    doc.raw.provenance = type(table)(
        name=[0] * rows,
        target=[0] * rows,
        graph_id=[0] * rows,
        pass_name=[0] * rows,
        action=[0] * rows,
        child_count=[0] + [2] * (rows - 1),
        children=[c for r in range(1, rows) for c in (r - 1, r - 1)],
    )
    doc.raw.graph.nodes[0].from_node = [rows - 1]
    with pytest.raises(IntegrityError, match=r"expands to \d+ entries, more than the 1048576 a row may hold"):
        _ = doc.node("n").from_node
    data = tracepack.dumps(doc)
    back = tracepack.loads(data)
    with pytest.raises(IntegrityError):
        _ = back.node("n").meta


def test_real_sharing_renders() -> None:
    shared = _entry("base", [])
    b = DocumentBuilder()
    for i in range(50):
        b.add_node(f"n{i}", "t", meta={"from_node": json.dumps([_entry(f"x{i}", [shared, shared])])})
    doc = tracepack.loads(tracepack.dumps(b.build()))
    assert json.loads(doc.node("n7").from_node or "")[0]["from_node"] == [shared, shared]
    assert ProvenanceRenderer.MAX_ENTRIES == 1 << 20
