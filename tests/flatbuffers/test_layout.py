"""FlatBuffers layout by schema version: 1.0 and 1.1 share vtables (their files stay byte for byte as
released); from 1.2 on every table has its own vtable right before it, which zstd stores almost for
free. Both are standard FlatBuffers: FlatBuffers' own Python code (flatc's) and our readers read both."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings

import tracepack
from tests.flatbuffers.flatc_bridge import read_with_flatc
from tests.flatbuffers.test_codec import build_cpp_verifier
from tests.strategies import documents
from tracepack import container, dictionaries, migrations
from tracepack.codecs import _fbrt as rt
from tracepack.codecs import flatbuffers as fbc
from tracepack.codecs import msgpack as mpc
from tracepack.codegen.check import load_schemas
from tracepack.codegen.emit_fbs_python import share_vtables
from tracepack.demo import sample_model_json
from tracepack.errors import DecodeError, TracepackError
from tracepack.sizes import column_sizes
from tracepack.torch.export.model_json import import_model_json
from tracepack.versions import CURRENT, VERSIONS

#: The newest version with generated code (the draft while there is one).
NEWEST = max(VERSIONS)
SCHEMAS = {(s.major, s.minor): s for s in load_schemas("schema")}


def _as(raw: Any, version: tuple[int, int]) -> Any:
    """``raw`` (a CURRENT document) in ``version``'s model: migrated where it can be; else by its fields
    (a newer minor only adds fields with defaults; an older one drops what it does not have)."""
    if version == CURRENT:
        return raw
    try:
        if version < CURRENT:
            out = migrations.downgrade(raw, CURRENT, version)
        else:
            out = migrations.upgrade(raw, CURRENT, version)
    except TracepackError:
        out = mpc.decode(mpc.encode(raw, CURRENT), version)
    out.header.version = fbc.codec_module(version).m.Version(*version)
    return out


def _node_tables(body: bytes, version: tuple[int, int]) -> list[tuple[int, int]]:
    """``(table position, vtable position)`` of every node, read with the generic runtime."""
    module = fbc.codec_module(version)
    r = rt.Reader(body)
    doc = r.fields(r.root(module.FILE_IDENTIFIER), module.SPECS["Document"])
    graph = r.fields(doc[module.SPECS["Document"].slots["graph"]], module.SPECS["Graph"])
    nodes = graph[module.SPECS["Graph"].slots["nodes"]]
    out = []
    for pos in r.tables(nodes) if nodes else []:
        out.append((pos, pos - struct.unpack_from("<i", body, pos)[0]))
    return out


def test_released_versions_share_vtables_and_newer_ones_do_not() -> None:
    assert share_vtables(SCHEMAS[(1, 0)])
    assert share_vtables(SCHEMAS[(1, 1)])
    assert all(not share_vtables(s) for v, s in SCHEMAS.items() if v >= (1, 2))
    for version in VERSIONS:  # what the generated codec of each version writes
        assert share_vtables(SCHEMAS[version]) == fbc.codec_module(version).SHARE_VTABLES


def test_inspect_measures_each_version_in_its_own_layout() -> None:
    """``tracepack inspect``'s FlatBuffers columns add up to the document buffer in either layout."""
    doc = import_model_json(sample_model_json())
    for version in ((1, 1), NEWEST):
        raw = _as(doc.raw, version)
        body, _ = fbc.split(fbc.encode(raw, version))
        total = sum(c.raw_bytes for c in column_sizes(raw, "flatbuffers-rows", version))
        assert 0.9 * len(body) < total < 1.1 * len(body), version


def test_each_table_has_its_own_vtable_from_1_2() -> None:
    doc = import_model_json(sample_model_json())
    for version in sorted(VERSIONS):
        body, _ = fbc.split(fbc.encode(_as(doc.raw, version), version))
        tables = _node_tables(bytes(body), version)
        assert len(tables) == len(doc)
        vtables = {vt for _, vt in tables}
        if share_vtables(SCHEMAS[version]):
            assert len(vtables) < len(tables) // 4, version  # a few shapes, shared
        else:
            assert len(vtables) == len(tables), version
            for pos, vt in tables:  # right before its table: the soffset is the vtable's own size
                assert pos - vt == struct.unpack_from("<H", body, vt)[0]


def test_unshared_vtables_compress_better_against_zstd_of_model_json() -> None:
    """The reference is zstd -19 of torch's own model.json (issue 10's yardstick)."""
    data = sample_model_json()
    doc = import_model_json(data)
    zdict = dictionaries.get()
    cctx = zstandard.ZstdCompressor(level=19, dict_data=zdict)
    baseline = len(zstandard.ZstdCompressor(level=19).compress(data))
    shared = len(cctx.compress(fbc.encode(_as(doc.raw, (1, 1)), (1, 1))))
    own = len(cctx.compress(fbc.encode(_as(doc.raw, NEWEST), NEWEST)))
    if share_vtables(SCHEMAS[NEWEST]):
        return
    assert own < 0.9 * shared
    assert own / baseline < shared / baseline - 0.1


@settings(max_examples=20, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents(max_nodes=8))
def test_flatc_python_reads_the_newest_layout(doc: tracepack.Document) -> None:
    raw = _as(doc.raw, NEWEST)
    data = fbc.encode(raw, NEWEST)
    body, _ = fbc.split(data)
    assert read_with_flatc(bytes(body), NEWEST) == raw
    assert fbc.decode(data, NEWEST) == raw


def test_many_tables_past_the_reader_position_cache(tmp_path: Path) -> None:
    """More tables than the reader remembers positions of (rt._POSITIONS): layouts by content."""
    b = tracepack.DocumentBuilder()
    for i in range(3000):
        inputs = [("x", tracepack.Tensor("x")), ("k", i % 7 or None)]
        b.add_node(f"n{i}", "t", inputs=inputs, stack_trace=[("m.py", i % 50 + 1, "f", "x")])
    doc = b.build()
    raw = _as(doc.raw, NEWEST)
    data = fbc.encode(raw, NEWEST)
    assert len(_node_tables(bytes(fbc.split(data)[0]), NEWEST)) == 3000
    assert fbc.decode(data, NEWEST) == raw
    # The lazy reader, on a container of that payload (read with the newest released model).
    path = tmp_path / "many.tpk"
    path.write_bytes(container.pack(data, schema_version=NEWEST, codec="flatbuffers-rows"))
    with tracepack.open(path) as lazy:
        assert lazy.node("n2999").stack_trace == doc.node("n2999").stack_trace
        assert [n.inputs for n in lazy.nodes()] == [n.inputs for n in doc.nodes()]


def test_cpp_verifier_accepts_the_newest_layout(tmp_path: Path) -> None:
    """FlatBuffers' own C++ verifier, compiled from the newest version's ``.fbs``, on unshared vtables."""
    verifier = build_cpp_verifier(tmp_path, NEWEST)
    doc = import_model_json(sample_model_json())
    data = fbc.encode(_as(doc.raw, NEWEST), NEWEST)
    path = tmp_path / "doc.tpk"
    path.write_bytes(container.pack(data, schema_version=NEWEST, codec="flatbuffers-rows"))
    done = subprocess.run([str(verifier), str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout
    assert done.stdout.split() == [str(len(doc)), str(len(doc.strings))]


def test_a_damaged_own_vtable_is_a_decode_error_not_a_crash() -> None:
    """An adjacent vtable that is no vtable the reader knows goes through the full checks."""
    doc = import_model_json(sample_model_json())
    data = bytearray(fbc.encode(_as(doc.raw, NEWEST), NEWEST))
    body, _ = fbc.split(bytes(data))
    _, vt = _node_tables(bytes(body), NEWEST)[3]
    for offset, value in [(0, 3), (0, 0xFFFE), (2, 0xFFFF), (2, 0)]:  # vtable size odd / huge, table size
        bad = bytearray(data)
        struct.pack_into("<H", bad, vt + offset, value)
        with pytest.raises(DecodeError) as info:
            fbc.decode(bytes(bad), NEWEST)
        assert "graph.nodes[3]" in info.value.where or "vtable" in str(info.value)
