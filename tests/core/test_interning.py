"""Interning invariants: nothing stored twice, every reference in range, parents before children."""

from __future__ import annotations

import traceback

import pytest
from hypothesis import given

import tracepack
from tests.strategies import BuiltDocument, built_documents, documents
from tracepack import DocumentBuilder, IntegrityError
from tracepack.traces import FrameKey


def _rows(*columns: list[int]) -> list[tuple[int, ...]]:
    return list(zip(*columns, strict=True))


def assert_interned(doc: tracepack.Document) -> None:
    r = doc.raw
    assert r.strings[0] == ""
    assert len(set(r.strings)) == len(r.strings), "a string is stored twice"
    assert len(set(r.files.name)) == len(r.files.name), "a file is stored twice"
    lines = _rows(r.lines.file, r.lines.line, r.lines.name, r.lines.text)
    assert len(set(lines)) == len(lines), "a line is stored twice"
    frames = _rows(
        r.frames.line,
        r.frames.col or [-1] * len(r.frames.line),
        r.frames.end_col or [-1] * len(r.frames.line),
        r.frames.annotation or [0] * len(r.frames.line),
    )
    assert len(set(frames[1:])) == len(frames) - 1, "a frame is stored twice"
    stacks = _rows(r.stacks.parent, r.stacks.frame)[1:]
    assert len(set(stacks)) == len(stacks), "a stack is stored twice"
    modules = _rows(
        r.modules.parent, r.modules.key, r.modules.path, r.modules.type, r.modules.method or [0] * len(r.modules.parent)
    )[1:]
    assert len(set(modules)) == len(modules), "a module path is stored twice"
    assert all(p < i for i, p in enumerate(r.stacks.parent) if i), "a stack's parent comes after it"
    assert all(p < i for i, p in enumerate(r.modules.parent) if i), "a module's parent comes after it"
    doc.validate()  # every reference in range


@given(doc=documents())
def test_generated_documents_are_interned(doc: tracepack.Document) -> None:
    assert_interned(doc)
    assert_interned(tracepack.loads(tracepack.dumps(doc, codec="json", compression="none")))


@given(built=built_documents())
def test_nodes_sharing_a_stack_share_one_rendered_string(built: BuiltDocument) -> None:
    doc = tracepack.loads(tracepack.dumps(built.doc))
    by_stack: dict[tuple[int, int], str] = {}
    for node in doc.nodes():
        key = (node.raw.stack, int(node.raw.stack_style))
        if node.raw.stack == 0:
            continue
        text = node.stack_trace
        assert text is not None
        if key in by_stack:
            assert text is by_stack[key], "the same stack was rendered into two string objects"
        by_stack[key] = text


def test_order_of_arrival_does_not_matter() -> None:
    frames = [FrameKey("m.py", i, f"f{i}", f"line {i}") for i in range(6)]
    a, b = DocumentBuilder(), DocumentBuilder()
    for i in range(6):
        a.add_node(f"n{i}", "t", stack_trace=frames[: i + 1])
    for i in reversed(range(6)):
        b.add_node(f"n{i}", "t", stack_trace=frames[: i + 1])
    da, db = a.build(), b.build()
    assert len(da.raw.stacks.parent) == len(db.raw.stacks.parent) == 7
    for i in range(6):
        assert da.node(f"n{i}").stack_trace == db.node(f"n{i}").stack_trace


def test_shared_callers_share_trie_rows() -> None:
    b = DocumentBuilder()
    common = [("m.py", 1, "main", "run()"), ("m.py", 5, "run", "step()")]
    b.add_node("x", "t", stack_trace=[*common, ("m.py", 9, "step", "a()")])
    b.add_node("y", "t", stack_trace=[*common, ("m.py", 10, "step", "b()")])
    doc = b.build()
    # root + 2 shared callers + 2 leaves
    assert len(doc.raw.stacks.parent) == 5


def test_stack_inputs_in_every_form_intern_to_the_same_row() -> None:
    b = DocumentBuilder()
    tuples = [("m.py", 3, "f", "x = 1"), ("m.py", 7, "g", "return x")]
    summary = traceback.StackSummary.from_list([traceback.FrameSummary(t[0], t[1], t[2], line=t[3]) for t in tuples])
    text = "".join(summary.format()).strip()
    rows = {
        b.stack(tuples)[0],  # type: ignore[index]
        b.stack(summary)[0],  # type: ignore[index]
        b.stack(list(summary))[0],  # type: ignore[index]
        b.stack(text)[0],  # type: ignore[index]
    }
    assert len(rows) == 1


def test_unparseable_metadata_is_kept_verbatim() -> None:
    b = DocumentBuilder()
    b.add_node("n", "t", meta={"stack_trace": "weird\ntrace", "nn_module_stack": "x", "other": "1"})
    doc = tracepack.loads(tracepack.dumps(b.build()))
    node = doc.node("n")
    assert node.stack_trace == "weird\ntrace"
    assert node.module_stack == "x"
    assert node.meta == {"stack_trace": "weird\ntrace", "nn_module_stack": "x", "other": "1"}


def test_integrity_errors_name_the_place() -> None:
    b = DocumentBuilder()
    b.add_node("n", "t", stack_trace=[("m.py", 1, "f", "")])
    doc = b.build()
    doc.raw.graph.nodes[0].stack = 99
    with pytest.raises(IntegrityError) as info:
        doc.validate()
    assert str(info.value) == "$.graph.nodes[0].stack: reference 99 is out of range; expected an index below 2"


def test_trie_cycles_are_refused() -> None:
    b = DocumentBuilder()
    b.add_node("n", "t", stack_trace=[("m.py", 1, "f", ""), ("m.py", 2, "g", "")])
    doc = b.build()
    doc.raw.stacks.parent[1] = 2  # 1 -> 2 -> 1
    with pytest.raises(IntegrityError) as info:
        doc.validate()
    assert str(info.value) == (
        "$.stacks.parent[1]: row 1 has parent 2, which is not an earlier row (a cycle or a forward reference); "
        "expected a parent below 1"
    )
