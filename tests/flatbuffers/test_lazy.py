"""tracepack.open: lazy answers equal eager tracepack.load answers, for every node."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

import tracepack
from benchmarks.bench_flatbuffers import stacked_document
from tests.strategies import BuiltDocument, built_documents
from tracepack import container, lazy
from tracepack.codecs import _fbrt as rt
from tracepack.codecs import flatbuffers as fbc
from tracepack.errors import ContainerError, IntegrityError, UsageError
from tracepack.versions import CURRENT

GOLDEN = Path(__file__).parent.parent / "golden"


def _same_node(lz: lazy.LazyNode, node: tracepack.NodeView) -> None:
    assert lz.index == node.index
    assert lz.name == node.name
    assert lz.target == node.target
    assert lz.stack_trace == node.stack_trace
    assert lz.module_stack == node.module_stack
    assert lz.module_hierarchy == node.module_hierarchy
    assert lz.meta == node.meta
    assert lz.frames == node.frames


def _same_document(lz: lazy.LazyDocument, doc: tracepack.Document) -> None:
    assert len(lz) == len(doc)
    # The file's own tables (an older file lacks tables a later version added, which load() migrates in).
    assert lz.table_sizes().items() <= doc.table_sizes().items()
    for node, lazy_node in zip(doc.nodes(), lz.nodes(), strict=True):
        _same_node(lazy_node, node)
        _same_node(lz.node(node.name), node)
        assert lazy_node.inputs == node.inputs
        assert lazy_node.outputs == node.outputs
        assert lazy_node.raw == node.raw
    for h in doc.raw.debug_handles.handle:
        assert lz.debug_handle(h) == doc.debug_handle(h)
    for i in range(1, len(doc.raw.sources.file)):
        assert lz.source_text(i) == doc.source_text(i)


def _write(doc: tracepack.Document, path: Path, **kw: str) -> Path:
    tracepack.dump(doc, path, codec=kw.get("codec", "flatbuffers"), compression=kw.get("compression", "none"))
    return path


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(built=built_documents())
def test_lazy_equals_eager(built: BuiltDocument, tmp_path: Path) -> None:
    doc = built.doc
    with tracepack.open(_write(doc, tmp_path / "doc.tpk")) as lz:
        _same_document(lz, doc)
        for name, meta in built.meta.items():
            assert lz.node(name).meta == meta
        for h, op in built.handles.items():
            assert lz.debug_handle(h).op == op
        assert list(lz.strings) == doc.strings
        lz.verify()


def test_lazy_equals_eager_on_the_golden_files() -> None:
    for path in sorted(GOLDEN.glob("*/flatbuffers.tpk")):
        with tracepack.open(path) as lz:
            _same_document(lz, tracepack.load(path))


def test_lazy_equals_eager_on_a_large_corpus(tmp_path: Path) -> None:
    doc = stacked_document(12_000)
    path = _write(doc, tmp_path / "large.tpk")
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


def test_api_details(tmp_path: Path) -> None:
    b = tracepack.DocumentBuilder()
    b.add_node("a", "t1", stack_trace=[("m.py", 1, "f", "x")], meta={"k": "v"})
    b.add_node("b", "t2")
    b.add_debug_handle(5, op="add")
    doc = b.build()
    path = _write(doc, tmp_path / "x.tpk")
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


@pytest.mark.parametrize(("codec", "compression"), [("msgpack", "none"), ("json", "zstd"), ("flatbuffers", "zstd")])
def test_refuses_what_it_cannot_map(tmp_path: Path, codec: str, compression: str) -> None:
    path = _write(tracepack.DocumentBuilder().build(), tmp_path / "x.tpk", codec=codec, compression=compression)
    with pytest.raises(UsageError, match="--codec flatbuffers --compression none") as err:
        tracepack.open(path)
    assert f"this one is {codec} with compression {compression}" in str(err.value)


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
    tracepack.open(path).close()
    with pytest.raises(ContainerError, match="checksum mismatch"):
        tracepack.open(path, checksum=True)


def test_without_side_index_names_are_found_by_one_scan(tmp_path: Path) -> None:
    doc = stacked_document(300)
    body, side = fbc.split(fbc.encode(doc.raw, CURRENT))
    assert side is not None
    path = tmp_path / "plain.tpk"
    path.write_bytes(container.pack(bytes(body), schema_version=CURRENT, codec="flatbuffers"))
    with tracepack.open(path) as lz:
        assert lz._by_name is None
        for node in doc.nodes():
            assert lz.node(node.name).index == node.index


def test_a_damaged_side_index_can_miss_but_never_lies(tmp_path: Path) -> None:
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
    data[at : at + 4 * count] = b"".join(v.to_bytes(4, "little") for v in values)
    path = tmp_path / "shuffled.tpk"
    path.write_bytes(container.pack(bytes(data), schema_version=CURRENT, codec="flatbuffers"))
    found = 0
    with tracepack.open(path) as lz:
        for node in doc.nodes():
            try:
                hit = lz.node(node.name)
            except UsageError:
                continue
            assert hit.name == node.name
            found += 1
    assert found < len(doc)


def test_references_out_of_range_are_integrity_errors(tmp_path: Path) -> None:
    b = tracepack.DocumentBuilder()
    b.add_node("a", "t", stack_trace=[("m.py", 1, "f", "x"), ("m.py", 2, "g", "y")])
    doc = b.build()
    doc.raw.graph.nodes[0].stack = 99
    path = tmp_path / "bad.tpk"
    path.write_bytes(container.pack(fbc.encode(doc.raw, CURRENT), schema_version=CURRENT, codec="flatbuffers"))
    with tracepack.open(path) as lz:
        assert lz.node(0).name == "a"
        with pytest.raises(IntegrityError) as err:
            _ = lz.node(0).stack_trace
        assert err.value.where == "$.graph.nodes[0].stack"
    doc.raw.graph.nodes[0].stack = 2
    doc.raw.stacks.parent[1] = 2  # a cycle: 2 -> 1 -> 2
    path.write_bytes(container.pack(fbc.encode(doc.raw, CURRENT), schema_version=CURRENT, codec="flatbuffers"))
    with tracepack.open(path) as lz, pytest.raises(IntegrityError) as err:
        _ = lz.node(0).stack_trace
    assert err.value.where == "$.stacks.parent[1]"
