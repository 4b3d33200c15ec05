"""tracepack.open: lazy answers equal eager tracepack.load answers, for every node.

Eager answers are in the current model (``tracepack.load`` migrates older files); so are lazy
ones, on files of every version: ``LazyNode.raw`` is the node migrated to the current model,
``table_sizes()`` has the current model's tables.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

import tracepack
from benchmarks.bench_flatbuffers import stacked_document
from tests.golden import make_golden as mg
from tests.strategies import BuiltDocument, built_documents
from tracepack import container, lazy
from tracepack.codecs import _fbrt as rt
from tracepack.codecs import flatbuffers as fbc
from tracepack.errors import ContainerError, IntegrityError, UsageError
from tracepack.versions import CURRENT

from .provenance_strategies import ProvenanceDocument, provenance_documents

GOLDEN = Path(__file__).parent.parent / "golden"
#: The FlatBuffers layouts tracepack.open reads: rows (codec id 2) and columns (codec id 4).
LAYOUTS = ["flatbuffers-rows", "flatbuffers-columns"]


def _same_node(lz: lazy.LazyNode, node: tracepack.NodeView) -> None:
    assert lz.index == node.index
    assert lz.name == node.name
    assert lz.target == node.target
    assert lz.stack_trace == node.stack_trace
    assert lz.module_stack == node.module_stack
    assert lz.module_hierarchy == node.module_hierarchy
    assert list(lz.meta.items()) == list(node.meta.items())  # the producer's order too
    assert lz.from_node == node.from_node
    assert lz.provenance == node.provenance
    assert lz.frames == node.frames


def _same_document(lz: lazy.LazyDocument, doc: tracepack.Document) -> None:
    assert len(lz) == len(doc)
    # The current model's tables, whatever the file's version (load() migrates; open() reads as empty).
    assert lz.table_sizes() == doc.table_sizes()
    for node, lazy_node in zip(doc.nodes(), lz.nodes(), strict=True):
        _same_node(lazy_node, node)
        _same_node(lz.node(node.name), node)
        assert lazy_node.inputs == node.inputs
        assert lazy_node.outputs == node.outputs
        assert lazy_node.raw == node.raw
        assert type(lazy_node.raw) is type(node.raw)
    for h in doc.raw.debug_handles.handle:
        assert lz.debug_handle(h) == doc.debug_handle(h)
    for i in range(1, len(doc.raw.sources.file)):
        assert lz.source_text(i) == doc.source_text(i)


def _write(doc: tracepack.Document, path: Path, **kw: str) -> Path:
    tracepack.dump(doc, path, codec=kw.get("codec", "flatbuffers-rows"), compression=kw.get("compression", "none"))
    return path


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(built=built_documents())
def test_lazy_equals_eager(built: BuiltDocument, tmp_path: Path) -> None:
    _lazy_equals_eager(built, tmp_path, "flatbuffers-rows")


# The column layout's own reader on fewer examples (its decoder has its own property tests, and CI time counts).
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40)
@given(built=built_documents())
def test_lazy_equals_eager_in_the_column_layout(built: BuiltDocument, tmp_path: Path) -> None:
    _lazy_equals_eager(built, tmp_path, "flatbuffers-columns")


def _lazy_equals_eager(built: BuiltDocument, tmp_path: Path, layout: str) -> None:
    doc = built.doc
    with tracepack.open(_write(doc, tmp_path / "doc.tpk", codec=layout)) as lz:
        _same_document(lz, doc)
        for name, meta in built.meta.items():
            assert lz.node(name).meta == meta
        for h, op in built.handles.items():
            assert lz.debug_handle(h).op == op
        assert list(lz.strings) == doc.strings
        lz.verify()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(built=provenance_documents())
def test_lazy_equals_eager_with_provenance_and_end_lines(built: ProvenanceDocument, tmp_path: Path) -> None:
    _lazy_equals_eager_with_provenance(built, tmp_path, "flatbuffers-rows")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
@given(built=provenance_documents())
def test_lazy_equals_eager_with_provenance_in_the_column_layout(built: ProvenanceDocument, tmp_path: Path) -> None:
    _lazy_equals_eager_with_provenance(built, tmp_path, "flatbuffers-columns")


def _lazy_equals_eager_with_provenance(built: ProvenanceDocument, tmp_path: Path, layout: str) -> None:
    doc = built.doc
    with tracepack.open(_write(doc, tmp_path / "doc.tpk", codec=layout)) as lz:
        _same_document(lz, doc)
        for name, meta in built.meta.items():
            node = lz.node(name)
            assert list(node.meta.items()) == list(meta.items())
            assert node.from_node == built.from_node[name]
            assert node.frames == built.frames.get(name, [])
        lz.verify()


def test_provenance_documents_use_what_they_test() -> None:
    """The strategy reaches lifted provenance, verbatim from_node text and end lines (a guard)."""
    seen = {"lifted": False, "verbatim": False, "direct": False, "end_line": False}

    @settings(max_examples=100, database=None, derandomize=True)
    @given(built=provenance_documents())
    def look(built: ProvenanceDocument) -> None:
        for node in built.doc.nodes():
            seen["lifted"] |= node.raw.from_node_meta_index >= 0
            seen["verbatim"] |= "from_node" in built.meta[node.name] and node.raw.from_node_meta_index < 0
            seen["direct"] |= bool(node.raw.from_node) and node.raw.from_node_meta_index < 0
        seen["end_line"] |= any(v != -1 for v in built.doc.raw.frames.end_line)

    look()
    assert all(seen.values()), seen


@pytest.mark.parametrize("layout", LAYOUTS)
def test_lazy_equals_eager_on_the_golden_files(layout: str) -> None:
    paths = sorted(GOLDEN.glob(f"*/{mg.file_name(layout, 'none')}"))
    assert {p.parent.name for p in paths} >= {"1.0", "1.1", "1.2"}
    for path in paths:
        doc = tracepack.load(path)
        with tracepack.open(path) as lz:
            assert lz.source_version == doc.source_version
            _same_document(lz, doc)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_golden_1_1_features_read_lazily(layout: str) -> None:
    path = GOLDEN / "1.1" / mg.file_name(layout, "none")
    doc = tracepack.load(path)
    with tracepack.open(path) as lz:
        lifted = [n for n in doc.nodes() if n.raw.from_node_meta_index >= 0]
        assert lifted, "the 1.1 golden document lifts from_node metadata"
        for node in lifted:
            assert lz.node(node.index).meta["from_node"] == node.meta["from_node"]
            assert lz.node(node.index).provenance == node.provenance
        assert any(n.provenance for n in lifted)
        ends = [n for n in doc.nodes() if any(f.end_line != -1 for f in n.frames)]
        assert ends, "the 1.1 golden document has frames with end lines"
        for node in ends:
            assert lz.node(node.index).frames == node.frames
        assert lz.columns("frames")["end_line"].tolist() == doc.raw.frames.end_line
        assert lz.table_sizes()["provenance"] == len(doc.raw.provenance.name) > 1


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_1_0_file_answers_in_the_current_model(layout: str) -> None:
    path = GOLDEN / "1.0" / mg.file_name(layout, "none")
    doc = tracepack.load(path)
    assert doc.source_version == (1, 0) != CURRENT
    with tracepack.open(path) as lz:
        assert lz.source_version == (1, 0)
        sizes = lz.table_sizes()
        assert sizes == doc.table_sizes()
        assert sizes["provenance"] == 0
        assert all(len(v) == 0 for v in lz.columns("provenance").values())
        assert len(lz.columns("frames")["end_line"]) == 0
        for node in doc.nodes():
            raw = lz.node(node.index).raw
            assert raw == node.raw
            assert (raw.from_node, raw.from_node_meta_index) == ([], -1)
            assert lz.node(node.index).provenance == []
            assert all(f.end_line == -1 for f in lz.node(node.index).frames)
        # A from_node that 1.0 kept as metadata text stays that text.
        verbatim = doc.node("verbatim")
        assert lz.node("verbatim").from_node == verbatim.from_node == verbatim.meta["from_node"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_lazy_equals_eager_on_a_large_corpus(tmp_path: Path, layout: str) -> None:
    doc = stacked_document(12_000)
    path = _write(doc, tmp_path / "large.tpk", codec=layout)
    with tracepack.open(path, checksum=True) as lz:
        rng = random.Random(0)
        picks = [*range(50), *rng.sample(range(len(doc)), 300), len(doc) - 1]
        for i in picks:
            node = doc.node(i)
            _same_node(lz.node(i), node)
            _same_node(lz.node(node.name), node)
        for node, lazy_node in zip(doc.nodes(), lz, strict=True):
            assert lazy_node.name == node.name
            assert lazy_node.stack_trace == node.stack_trace
        for h in rng.sample(list(doc.raw.debug_handles.handle), 200):
            assert lz.debug_handle(h) == doc.debug_handle(h)
        # Stacks render once per distinct stack and style: nodes sharing a stack share the string.
        a, b = (lz.node(n.name) for n in doc.nodes() if n.name in ("linear", "linear@1"))
        assert a.stack_trace is b.stack_trace


@pytest.mark.parametrize("layout", LAYOUTS)
def test_api_details(tmp_path: Path, layout: str) -> None:
    b = tracepack.DocumentBuilder()
    b.add_node("a", "t1", stack_trace=[("m.py", 1, "f", "x")], meta={"k": "v"})
    b.add_node("b", "t2")
    b.add_debug_handle(5, op="add")
    doc = b.build()
    path = _write(doc, tmp_path / "x.tpk", codec=layout)
    with tracepack.open(path) as lz:
        assert lz.node(-1).name == "b"
        assert lz["a"].target == "t1"
        assert repr(lz.node(0)) == "<node a = t1>"
        assert lz.strings[1:3] == doc.strings[1:3]
        cols = lz.columns("stacks")
        assert cols["parent"].tolist() == doc.raw.stacks.parent
        del cols
        with pytest.raises(UsageError, match="no node named 'zz'"):
            lz.node("zz")
        with pytest.raises(UsageError, match="out of range"):
            lz.node(2)
        with pytest.raises(UsageError, match="no debug handle 6"):
            lz.debug_handle(6)
        assert "2 nodes" in repr(lz)
    with pytest.raises(UsageError, match="closed"):
        lz.node(0)
    assert lazy.trace(path, "a") == doc.node("a").stack_trace
    assert lazy.trace(path, 1) is None


@pytest.mark.parametrize(
    ("codec", "compression", "named"),
    [
        ("msgpack", "none", "msgpack"),
        ("json", "zstd", "json"),
        ("flatbuffers-rows", "zstd", "flatbuffers-rows"),
        ("flatbuffers", "zstd", "flatbuffers-columns"),  # the file's codec by its id's name, not the alias
    ],
)
def test_refuses_what_it_cannot_map(tmp_path: Path, codec: str, compression: str, named: str) -> None:
    path = _write(tracepack.DocumentBuilder().build(), tmp_path / "x.tpk", codec=codec, compression=compression)
    with pytest.raises(UsageError, match="--codec flatbuffers --compression none") as err:
        tracepack.open(path)
    assert f"this one is {named} with compression {compression}" in str(err.value)


def test_refuses_damaged_containers(tmp_path: Path) -> None:
    data = _write(tracepack.DocumentBuilder().build(), tmp_path / "x.tpk").read_bytes()
    cases = {
        "empty": b"",
        "short": data[:20],
        "json": b'{"graph_module": 1}' + b" " * 60,
        "truncated": data[:-5],
        "longer": data + b"\0",
    }
    for name, blob in cases.items():
        (tmp_path / name).write_bytes(blob)
        with pytest.raises(ContainerError):
            tracepack.open(tmp_path / name)
    with pytest.raises(UsageError, match="cannot open"):
        tracepack.open(tmp_path / "missing.tpk")


def test_checksum_option(tmp_path: Path) -> None:
    path = _write(stacked_document(500), tmp_path / "x.tpk")
    data = bytearray(path.read_bytes())
    data[-100] ^= 1  # inside the side index, which nothing reads: only the checksum notices
    path.write_bytes(bytes(data))
    tracepack.open(path, checksum=False).close()  # the explicit opt-out
    with pytest.raises(ContainerError, match="checksum mismatch"):
        tracepack.open(path)  # on by default
    with pytest.raises(ContainerError, match="checksum mismatch"):
        tracepack.open(path, checksum=True)


def test_without_side_index_names_are_found_by_one_scan(tmp_path: Path) -> None:
    doc = stacked_document(300)
    body, side = fbc.split(fbc.encode(doc.raw, CURRENT))
    assert side is not None
    path = tmp_path / "plain.tpk"
    path.write_bytes(container.pack(bytes(body), schema_version=CURRENT, codec="flatbuffers-rows"))
    with tracepack.open(path) as lz:
        assert lz._by_name is None
        for node in doc.nodes():
            assert lz.node(node.name).index == node.index


def test_a_damaged_side_index_neither_misses_nor_lies(tmp_path: Path) -> None:
    """spec §5.4: the side index is derived data; a lookup it does not lead to the name scans the names
    (it used to miss), and an entry out of range is no error (it was an IntegrityError): every node is
    found, as the eager reader finds it."""
    doc = stacked_document(300)
    data = bytearray(fbc.encode(doc.raw, CURRENT))
    body, side = fbc.split(data)
    assert side is not None
    r = rt.Reader(side)
    start, count = r.vector(r.fields(r.root(fbc.SIDE_IDENTIFIER), fbc.SIDE_SPEC)[0], 4)
    at = len(body) + start
    del body, side, r
    values = list(range(count))
    random.Random(1).shuffle(values)
    for damaged in (values, [v + count for v in values]):
        data[at : at + 4 * count] = b"".join(v.to_bytes(4, "little") for v in damaged)
        path = tmp_path / "shuffled.tpk"
        path.write_bytes(container.pack(bytes(data), schema_version=CURRENT, codec="flatbuffers-rows"))
        with tracepack.open(path) as lz:
            for node in doc.nodes():
                assert lz.node(node.name).index == doc.node(node.name).index


def test_references_out_of_range_are_integrity_errors(tmp_path: Path) -> None:
    b = tracepack.DocumentBuilder()
    b.add_node("a", "t", stack_trace=[("m.py", 1, "f", "x"), ("m.py", 2, "g", "y")])
    doc = b.build()
    doc.raw.graph.nodes[0].stack = 99
    path = tmp_path / "bad.tpk"
    path.write_bytes(container.pack(fbc.encode(doc.raw, CURRENT), schema_version=CURRENT, codec="flatbuffers-rows"))
    with tracepack.open(path) as lz:
        assert lz.node(0).name == "a"
        with pytest.raises(IntegrityError) as err:
            _ = lz.node(0).stack_trace
        assert err.value.where == "$.graph.nodes[0].stack"
    doc.raw.graph.nodes[0].stack = 2
    doc.raw.stacks.parent[1] = 2  # a cycle: 2 -> 1 -> 2
    path.write_bytes(container.pack(fbc.encode(doc.raw, CURRENT), schema_version=CURRENT, codec="flatbuffers-rows"))
    with tracepack.open(path) as lz, pytest.raises(IntegrityError) as err:
        _ = lz.node(0).stack_trace
    assert err.value.where == "$.stacks.parent[1]"


# -- hostile provenance: every fault is an IntegrityError naming its place, never IndexError or a hang --------


def _provenance_file(tmp_path: Path, mutate: Callable[[Any], None] | None = None) -> Path:
    """Rows: 1 = leaf x, 2 = y(from x), 3 = z(from y, x); node `a` lifts [z] after its key `k`."""
    leaf = {"name": "x", "target": "t", "graph_id": 1, "pass_name": "p", "action": "create", "from_node": []}
    mid = dict(leaf, name="y", from_node=[leaf])
    top = dict(leaf, name="z", from_node=[mid, leaf])
    b = tracepack.DocumentBuilder()
    b.add_node("a", "t", meta={"k": "v", "from_node": json.dumps([top])})
    b.add_node("b", "t")
    raw = b.build().raw
    assert raw.provenance is not None
    assert (raw.provenance.child_count, raw.provenance.children) == ([0, 0, 1, 2], [1, 2, 1])
    if mutate is not None:
        mutate(raw)
    path = tmp_path / "hostile.tpk"
    path.write_bytes(container.pack(fbc.encode(raw, CURRENT), schema_version=CURRENT, codec="flatbuffers-rows"))
    return path


def _set(obj: str, field: str, index: int | None, value: Any) -> Callable[[Any], None]:
    def mutate(raw: Any) -> None:
        target = raw.provenance if obj == "provenance" else raw.graph.nodes[0]
        if index is None:
            setattr(target, field, value)
        else:
            getattr(target, field)[index] = value

    return mutate


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        (_set("node", "from_node", None, [99]), "$.graph.nodes[0].from_node[0]"),
        (_set("provenance", "children", 0, 2), "$.provenance.children[0]"),  # row 2's child is itself: a cycle
        (_set("provenance", "children", 1, 3), "$.provenance.children[1]"),  # a child above its parent
        (_set("provenance", "children", 2, 10**6), "$.provenance.children[2]"),
        (_set("provenance", "name", 1, 10**6), "$.provenance.name[1]"),
        (_set("provenance", "action", 2, 10**6), "$.provenance.action[2]"),
        (_set("provenance", "child_count", 3, 1), "$.provenance.child_count"),
        (_set("provenance", "child_count", 3, 9), "$.provenance.child_count"),
        (_set("node", "from_node_meta_index", None, 2), "$.graph.nodes[0].from_node_meta_index"),
        (_set("node", "from_node_meta_index", None, -2), "$.graph.nodes[0].from_node_meta_index"),
    ],
)
def test_hostile_provenance_is_an_integrity_error(tmp_path: Path, mutate: Callable[[Any], None], where: str) -> None:
    path = _provenance_file(tmp_path, mutate)
    with pytest.raises(IntegrityError):
        tracepack.load(path)  # the eager reader refuses it too
    with tracepack.open(path) as lz:
        node = lz.node("a")
        attrs = ["from_node", "meta"] + ([] if where.endswith("meta_index") else ["provenance"])  # rows only
        for attr in attrs * 2:  # twice: a failed check stays failed
            with pytest.raises(IntegrityError) as err:
                getattr(node, attr)
            assert err.value.where == where, attr
        assert lz.node("a").stack_trace is None  # the rest of the node still reads
        assert lz.node("b").meta == {}
        assert lz.node("b").from_node is None


def test_a_lifted_from_node_and_a_from_node_key_is_an_integrity_error(tmp_path: Path) -> None:
    def mutate(raw: Any) -> None:  # node `a`'s key `k` becomes `from_node`, beside the lifted one
        raw.strings.append("from_node")
        raw.graph.nodes[0].meta_keys[0] = len(raw.strings) - 1

    path = _provenance_file(tmp_path, mutate)
    with pytest.raises(IntegrityError):
        tracepack.load(path)
    with tracepack.open(path) as lz:
        for attr in ("from_node", "meta"):
            with pytest.raises(IntegrityError, match="a `from_node` key and a lifted") as err:
                getattr(lz.node("a"), attr)
            assert err.value.where == "$.graph.nodes[0].from_node_meta_index"


def test_a_good_provenance_file_reads(tmp_path: Path) -> None:
    path = _provenance_file(tmp_path)
    doc = tracepack.load(path)
    with tracepack.open(path) as lz:
        _same_document(lz, doc)
        a = lz.node("a")
        assert list(a.meta) == ["k", "from_node"]
        assert json.loads(a.meta["from_node"])[0]["from_node"][0]["name"] == "y"
        assert a.from_node is a.meta["from_node"]  # one rendered string per distinct list
        assert [p.name for p in a.provenance[0].from_node] == ["y", "x"]
        assert lz.from_node([1, 1]) == json.dumps([json.loads(lz.from_node([1]))[0]] * 2)


def test_exponential_provenance_is_refused_quickly(tmp_path: Path) -> None:
    """Row r has children [r-1, r-1]: valid (children below parents), but row 200 would render 2**200 entries."""
    depth = 200

    def mutate(raw: Any) -> None:
        t = raw.provenance
        x = raw.strings.index("x")
        t.name = t.target = t.pass_name = t.action = [0] + [x] * depth
        t.graph_id = [0] * (depth + 1)
        t.child_count = [0, 0] + [2] * (depth - 1)
        t.children = [c for r in range(2, depth + 1) for c in (r - 1, r - 1)]
        raw.graph.nodes[0].from_node = [depth]

    path = _provenance_file(tmp_path, mutate)
    started = time.perf_counter()
    with tracepack.open(path) as lz:
        for attr in ("from_node", "meta", "provenance"):
            with pytest.raises(IntegrityError, match="expands to more than") as err:
                getattr(lz.node("a"), attr)
            assert err.value.where == "$.graph.nodes[0].from_node"
        assert json.loads(lz.from_node([5]))[0]["from_node"][0]["from_node"][1]["name"] == "x"  # small rows render
    assert time.perf_counter() - started < 5


def test_arguments_out_of_range_are_integrity_errors(tmp_path: Path) -> None:
    b = tracepack.DocumentBuilder()
    b.add_node("a", "t", inputs=[("x", tracepack.Tensor("x"))], outputs=[tracepack.Tensor("y")])
    raw = b.build().raw
    raw.graph.nodes[0].inputs[0].arg.name = 10**6
    raw.graph.nodes[0].outputs[0].name = 10**6
    path = tmp_path / "bad.tpk"
    path.write_bytes(container.pack(fbc.encode(raw, CURRENT), schema_version=CURRENT, codec="flatbuffers-rows"))
    with tracepack.open(path) as lz:
        for attr in ("inputs", "outputs"):
            with pytest.raises(IntegrityError) as err:
                getattr(lz.node(0), attr)
            assert err.value.where == f"$.graph.nodes[0].{attr}"
