"""The columnar codec round-trips every document, agrees with every other codec, and writes what its layout says."""

from __future__ import annotations

import itertools
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tracepack_generated import v1_0

import tracepack
from tests.columnar.helpers import payload_of, stored_values, unforms
from tests.golden import make_golden as mg
from tests.migrations.strategies import RichDocument, documents_1_0, rich_documents
from tests.strategies import documents
from tracepack import container, migrations
from tracepack.codecs import CODECS, codec_by_id, codec_by_name, columnar
from tracepack.versions import CURRENT, generated

OTHERS = [c for c in CODECS if c != "columnar"]


def test_registered_as_codec_3() -> None:
    assert CODECS["columnar"] == (3, "tracepack.codecs.columnar")
    assert codec_by_id(3)[1] is columnar
    assert codec_by_name("columnar") == (3, columnar)
    data = tracepack.dumps(mg.build_document(), codec="columnar", compression="none")
    assert data[16] == 3
    assert container.read_header(data).codec == "columnar"


@pytest.mark.parametrize(("compression", "level"), [("none", 0), ("zstd", 3), ("zstd", 19)])
@given(doc=documents())
def test_roundtrip_equal(doc: tracepack.Document, compression: str, level: int) -> None:
    data = tracepack.dumps(doc, codec="columnar", compression=compression, level=level)
    back = tracepack.loads(data)
    assert back == doc
    assert back.raw.header == doc.raw.header


@given(rich=rich_documents())
def test_roundtrip_uses_of_1_1(rich: RichDocument) -> None:
    """Provenance, lifted from_node, end_line: what 1.1 added round-trips too."""
    back = tracepack.loads(tracepack.dumps(rich.doc, codec="columnar"))
    assert back == rich.doc
    for node in rich.doc.nodes():
        assert back.node(node.name).meta == node.meta


@given(doc=documents())
def test_roundtrip_as_1_0(doc: tracepack.Document) -> None:
    data = tracepack.dumps(doc, codec="columnar", compression="none", version=(1, 0))
    assert container.read_header(data).schema_version == (1, 0)
    back = tracepack.loads(data)
    assert back.source_version == (1, 0)
    assert back == doc


@given(raw=documents_1_0())
def test_roundtrip_in_the_1_0_model(raw: Any) -> None:
    assert isinstance(raw, v1_0.model.Document)
    back = columnar.decode(columnar.encode(raw, (1, 0)), (1, 0))
    assert isinstance(back, v1_0.model.Document)
    assert back == raw


@pytest.mark.parametrize("other", OTHERS)
@given(doc=documents())
def test_cross_codec_equal(doc: tracepack.Document, other: str) -> None:
    """Encoded with any codec and decoded with any other, the documents are equal."""
    via_other = tracepack.loads(tracepack.dumps(doc, codec=other, compression="none"))
    then_columnar = tracepack.loads(tracepack.dumps(via_other, codec="columnar", compression="zstd"))
    via_columnar = tracepack.loads(tracepack.dumps(doc, codec="columnar", compression="none"))
    then_other = tracepack.loads(tracepack.dumps(via_columnar, codec=other, compression="zstd"))
    assert via_other == then_columnar == via_columnar == then_other == doc
    # The raw models agree too, codec by codec.
    _, module = codec_by_name(other)
    assert columnar.decode(
        columnar.encode(module.decode(module.encode(doc.raw, CURRENT), CURRENT), CURRENT), CURRENT
    ) == (doc.raw)


@pytest.mark.parametrize("other", OTHERS)
@pytest.mark.parametrize("version", [(1, 0), (1, 1)])
def test_cross_codec_equal_golden_document(other: str, version: tuple[int, int]) -> None:
    doc = mg.build_document(version)
    raw = doc.raw if version == CURRENT else migrations.downgrade(doc.raw, CURRENT, version)
    _, module = codec_by_name(other)
    assert columnar.decode(columnar.encode(raw, version), version) == module.decode(
        module.encode(raw, version), version
    )


@given(doc=documents())
def test_encoding_is_deterministic(doc: tracepack.Document) -> None:
    data = columnar.encode(doc.raw, CURRENT)
    assert data == columnar.encode(doc.raw, CURRENT)
    assert columnar.encode(columnar.decode(data, CURRENT), CURRENT) == data


@given(doc=documents())
def test_layout(doc: tracepack.Document) -> None:
    """Format marker, layout, known paths only, no empty column, and delta exactly where it is smaller;
    layout 3 exactly when a column is ``lag``-coded (spec §6.7)."""
    payload = payload_of(doc.raw, CURRENT)
    assert payload["format"] == columnar.FORMAT == "tracepack-columnar"
    lagged = [path for path, (encoding, _) in payload["columns"].items() if encoding == columnar.LAG]
    assert payload["layout"] == (columnar.LAG_LAYOUT if lagged else columnar.LAYOUT)
    assert (columnar.LAYOUT, columnar.LAG_LAYOUT) == (2, 3)
    stored = msgspec.msgpack.decode(columnar.encode(doc.raw, CURRENT))["columns"]
    assert all(type(k) is int for k in stored)  # every path of a released version by its number
    paths = columnar.column_paths(CURRENT)
    columns = payload["columns"]
    assert list(columns) == [p for p in paths if p in columns]  # written in plan order
    for path, (encoding, values) in columns.items():
        assert values, path
        if encoding == columnar.DELTA:
            plain = _undelta(values)
            assert len(msgspec.msgpack.encode(values)) < len(msgspec.msgpack.encode(plain)), path
        elif encoding == columnar.FORMS:  # a string column (spec §6.4.3): five lists, the first the literals
            assert len(values) == 5, path
            assert all(type(s) is str for s in values[0]), path
        elif encoding == columnar.LAG:  # an integer column of 16 rows or more, a lag the writer tries
            lag, deltas = values
            assert 2 <= lag <= 8, path
            assert len(deltas) >= 16, path
            assert not path.endswith(("#tag", "#present")), path
        else:
            assert encoding == columnar.PLAIN
            if len(values) > 2 and all(type(v) is int for v in values) and not path.endswith("#tag"):
                deltas = [values[0], *(b - a for a, b in itertools.pairwise(values))]
                if all(-(2**63) <= d < 2**64 for d in deltas):
                    assert len(msgspec.msgpack.encode(deltas)) >= len(msgspec.msgpack.encode(values)), path
    # Every row of the graph's nodes is in each node column; a list is its lengths plus its items.
    n = len(doc.raw.graph.nodes)
    if n:
        assert len(_values(columns["$.graph.nodes[].name"])) == n
        lens = _values(columns["$.graph.nodes[].meta_keys#len"])
        assert sum(lens) == len(_values(columns.get("$.graph.nodes[].meta_keys[]", ["plain", []])))
    assert _values(columns["$.strings#len"]) == [len(doc.raw.strings)]
    encoding, values = columns["$.strings[]"]  # forms when most of a long table is numbered strings
    assert (unforms("$.strings[]", values, len(doc.raw.strings)) if encoding == columnar.FORMS else values) == (
        doc.raw.strings
    )


def test_paths_of_the_layout() -> None:
    paths = columnar.column_paths((1, 1))
    for path in [
        "$.header.magic",
        "$.header.producer#present",
        "$.header.producer.name",
        "$.strings#len",
        "$.strings[]",
        "$.graph.nodes#len",
        "$.graph.nodes[].inputs[].arg#tag",
        "$.graph.nodes[].inputs[].arg<2>.name",
        "$.graph.nodes[].outputs[]<3>.names#len",
        "$.graph.nodes[].outputs[]<3>.names[]",
        "$.provenance#present",
        "$.provenance.children[]",
    ]:
        assert path in paths
    old = columnar.column_paths((1, 0))
    assert set(paths) - set(old) == {
        "$.frames.end_line#len",
        "$.frames.end_line[]",
        "$.graph.nodes[].from_node#len",
        "$.graph.nodes[].from_node[]",
        "$.graph.nodes[].from_node_meta_index",
        *(p for p in paths if p.startswith("$.provenance")),
    }
    assert set(old) <= set(paths)


def test_golden_document_columns() -> None:
    doc = mg.build_document()
    columns = payload_of(doc.raw, CURRENT)["columns"]
    # Variants that no row uses, and lists without items, store nothing.
    assert not any(p.startswith("$.graph.inputs[]<4>") for p in columns)
    tags = columns["$.graph.nodes[].outputs[]#tag"][1]
    assert tags == [type(a).__struct_config__.tag for n in doc.raw.graph.nodes for a in n.outputs]
    assert columns["$.header.producer#present"] == ["plain", [True]]
    assert isinstance(doc.raw, generated(CURRENT).model.Document)


def _values(entry: list[Any]) -> list[Any]:
    return stored_values(entry)


def _undelta(values: list[int]) -> list[int]:
    return list(itertools.accumulate(values))


@given(doc=documents(), named=st.lists(st.booleans(), min_size=1, max_size=64))
def test_columns_by_number_or_by_name_read_alike(doc: tracepack.Document, named: list[bool]) -> None:
    """Layout 2: any mix of numbered and named columns, in any order, decodes to the same document."""
    data = columnar.encode(doc.raw, CURRENT)
    payload: dict[str, Any] = msgspec.msgpack.decode(data)
    paths, numbers = columnar.path_numbers()
    keys = list(payload["columns"])
    assert all(type(k) is int and paths[k] for k in keys)
    mixed = {(paths[k] if named[i % len(named)] else k): payload["columns"][k] for i, k in enumerate(reversed(keys))}
    again = msgspec.msgpack.encode({**payload, "columns": mixed})
    assert columnar.decode(again, CURRENT) == doc.raw
    assert {numbers.get(p, p) if isinstance(p, str) else p for p in mixed} == set(keys)
