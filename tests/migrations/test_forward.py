"""Reading newer files (docs/schema-rules.md, "Reading newer files").

A reader of 1.0 given a 1.1 file reads it, skipping what 1.1 added, in every codec; a file of a
newer minor (current + 6) is decoded with the newest minor this build knows; a newer major is refused.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from tracepack_generated import v1_0

import tracepack
from tests.golden import make_golden as mg
from tests.migrations.strategies import RichDocument, rich_documents
from tracepack import DecodeError, Document, VersionError, container, migrations
from tracepack.codecs import codec_by_name
from tracepack.migrations import v1_0_to_v1_1 as step
from tracepack.versions import CURRENT, RELEASED, generated, reader_version

CODECS = ["json", "msgpack", "flatbuffers-rows", "columnar", "flatbuffers-columns"]
#: A newer minor of the current version's major, which no release has reached.
NEWER = (CURRENT[0], CURRENT[1] + 6)
N = f"{NEWER[0]}.{NEWER[1]}"
C = f"{CURRENT[0]}.{CURRENT[1]}"
_gen = generated(CURRENT)


def _as_1_1(raw: Any) -> Any:
    """A document of the current version as schema 1.1 holds it (the same document when 1.1 is current)."""
    return migrations.downgrade(raw, CURRENT, (1, 1))


def _without_1_1_additions(raw: Any) -> Any:
    """What a 1.0 reader sees of a 1.1 document: everything but what 1.1 added."""
    nodes = [msgspec.structs.replace(n, from_node=[], from_node_meta_index=-1) for n in raw.graph.nodes]
    return msgspec.structs.replace(
        raw,
        frames=msgspec.structs.replace(raw.frames, end_line=[]),
        graph=msgspec.structs.replace(raw.graph, nodes=nodes),
        provenance=None,
    )


def _read_as_1_0(raw: Any, codec: str) -> Any:
    _, module = codec_by_name(codec)
    old = module.decode(module.encode(_as_1_1(raw), (1, 1)), (1, 0), source="new.tpk")
    assert isinstance(old, v1_0.model.Document)
    v1_0.validate.validate(old)
    return old


@pytest.mark.parametrize("codec", CODECS)
def test_a_1_0_reader_reads_the_1_1_golden_document_skipping_additions(codec: str) -> None:
    doc = mg.build_document()
    assert doc.raw.provenance is not None
    assert doc.raw.frames.end_line
    old = _read_as_1_0(doc.raw, codec)
    assert step.upgrade(old) == _without_1_1_additions(_as_1_1(doc.raw))
    # To the 1.0 reader, lifted from_node entries are absent; verbatim ones and all else are there.
    seen = Document(migrations.upgrade(old, (1, 0), CURRENT))
    for node in doc.nodes():
        meta = dict(node.meta)
        if node.raw.from_node_meta_index >= 0:
            del meta["from_node"]
        assert seen.node(node.name).meta == meta
        assert seen.node(node.name).stack_trace == node.stack_trace
        assert [f._replace(end_line=-1) for f in node.frames] == seen.node(node.name).frames


@given(rich_documents())
def test_a_1_0_reader_reads_any_1_1_document_skipping_additions(rich: RichDocument) -> None:
    for codec in CODECS:
        assert step.upgrade(_read_as_1_0(rich.doc.raw, codec)) == _without_1_1_additions(_as_1_1(rich.doc.raw))


def test_a_build_that_knows_only_1_0_decodes_1_1_with_its_1_0_model() -> None:
    assert reader_version((1, 1), released=((1, 0),)) == (1, 0)
    with pytest.raises(VersionError, match=r"schema version 2\.0 is not readable by this build"):
        reader_version((2, 0), released=((1, 0),))


# -- files of a newer minor ---------------------------------------------------------------------------


def _pad(items: list[Any], struct: type, extra: Any) -> list[Any]:
    """A struct array as a newer writer writes it: every known field, then one this build does not know."""
    tail = []
    for f in msgspec.structs.fields(struct)[len(items) :]:
        value = f.default_factory() if f.default_factory is not msgspec.NODEFAULT else f.default
        tail.append(msgspec.to_builtins(value))
    return [*items, *tail, extra]


def _payload_1_7(raw: Any, codec: str) -> bytes:
    """A payload of a newer minor: the current document plus fields its writer added (JSON, MessagePack,
    columnar)."""
    if codec == "flatbuffers-rows":  # FlatBuffers skips unknown ids: test_a_1_0_reader_... covers it
        _, module = codec_by_name(codec)
        newer = msgspec.structs.replace(
            raw, header=msgspec.structs.replace(raw.header, version=_gen.model.Version(*NEWER))
        )
        return bytes(module.encode(newer, CURRENT))
    if codec == "columnar":  # columns a 1.7 writer added: unknown paths, ignored by name
        _, module = codec_by_name(codec)
        newer = msgspec.structs.replace(
            raw, header=msgspec.structs.replace(raw.header, version=_gen.model.Version(*NEWER))
        )
        payload: Any = msgspec.msgpack.decode(module.encode(newer, CURRENT))
        payload["columns"]["$.added_in_1_7"] = ["plain", [1]]
        payload["columns"]["$.graph.nodes[].added_in_1_7"] = ["plain", [0.5] * len(raw.graph.nodes)]
        return msgspec.msgpack.encode(payload)
    if codec == "flatbuffers-columns":  # columns a 1.7 writer added: unknown paths, ignored by name
        from tracepack.codecs import columnar, fbcolumns
        from tracepack.codecs import flatbuffers as fbc

        newer = msgspec.structs.replace(
            raw, header=msgspec.structs.replace(raw.header, version=_gen.model.Version(*NEWER))
        )
        shredder = fbcolumns._Shredder()
        shredder.shred(columnar._plan(type(newer)), [newer])
        shredder.put("$.added_in_1_7", [1])
        shredder.put("$.graph.nodes[].added_in_1_7", [0.5] * len(raw.graph.nodes))
        return fbc.with_side_index(fbcolumns._write(shredder.values), fbc.side_index(newer))
    if codec == "json":
        keyed: Any = msgspec.to_builtins(_gen.convert.to_json(raw))
        keyed["header"]["version"] = {"major": NEWER[0], "minor": NEWER[1]}
        keyed["added_in_1_7"] = {"anything": [1, 2.5, None]}
        for node in keyed["graph"].get("nodes", []):
            node["added_in_1_7"] = 0.5
        return msgspec.json.encode(keyed)
    arrays: Any = msgspec.to_builtins(raw)
    arrays[0][1] = list(NEWER)
    graph = _pad(arrays[10], _gen.model.Graph, "graph extra")
    graph[3] = [_pad(n, _gen.model.Node, {"added_in_1_7": 0.5}) for n in graph[3]]
    arrays[10] = graph
    return msgspec.msgpack.encode(_pad(arrays, _gen.model.Document, ["added", "in", 1.7]))


@pytest.mark.parametrize("codec", CODECS)
def test_a_newer_minor_decodes_with_the_newest_known_minor(codec: str) -> None:
    doc = mg.build_document()
    data = container.pack(_payload_1_7(doc.raw, codec), schema_version=NEWER, codec=codec)
    back = tracepack.loads(data, source=f"from-{N}.tpk")
    assert back.source_version == NEWER
    assert back.version == CURRENT
    assert back == doc
    assert mg.document_content(back) == mg.document_content(doc)
    # Written again, it is a file of this build's version.
    assert container.read_header(tracepack.dumps(back, codec=codec)).schema_version == CURRENT


def test_a_newer_minor_using_an_unknown_variant_is_refused_naming_both_versions() -> None:
    doc = mg.build_document()
    arrays: Any = msgspec.to_builtins(doc.raw)
    arrays[0][1] = list(NEWER)
    arrays[10][3][0][3] = [[99, "a variant added in 1.7"]]  # outputs of node 0
    data = container.pack(msgspec.msgpack.encode(arrays), schema_version=NEWER, codec="msgpack")
    with pytest.raises(DecodeError) as info:
        tracepack.loads(data, source=f"from-{N}.tpk")
    text = str(info.value)
    assert text.startswith(f"from-{N}.tpk: $.graph.nodes[0].outputs[0][0]: Invalid value 99 (the file is schema {N}")
    assert (
        f"(the file is schema {N}, newer than {C}, the newest this build reads: it may use something added since"
        in text
    )


@pytest.mark.parametrize("codec", CODECS)
def test_a_newer_major_is_refused(codec: str) -> None:
    doc = mg.build_document()
    _, module = codec_by_name(codec)
    major = f"{CURRENT[0] + 1}.0"
    data = container.pack(module.encode(doc.raw, CURRENT), schema_version=(CURRENT[0] + 1, 0), codec=codec)
    with pytest.raises(VersionError) as info:
        tracepack.loads(data, source=f"from-{major}.tpk")
    assert str(info.value) == (
        f"from-{major}.tpk: header: schema version {major} is not readable by this build; expected one of "
        f"{', '.join(f'{a}.{b}' for a, b in RELEASED)} or a newer minor of a known major (this build writes {C})"
    )
    assert info.value.exit_code == 2


def test_load_upgrades_every_older_golden_file() -> None:
    for path in sorted((mg.GOLDEN / "1.0").glob("*.tpk")):
        doc = tracepack.load(path)
        assert (doc.source_version, doc.version) == ((1, 0), CURRENT)
        assert mg.covers(mg.document_content(doc), mg.document_content(mg.build_document((1, 0))))
