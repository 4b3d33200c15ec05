"""Every codec x compression round-trips a document to an equal one."""

from __future__ import annotations

import pytest
from hypothesis import given

import tracepack
from tests.strategies import BuiltDocument, built_documents, documents

CODECS = ["json", "msgpack"]
COMPRESSIONS = [("none", 0), ("zstd", 3), ("zstd", 19)]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize(("compression", "level"), COMPRESSIONS)
@given(doc=documents())
def test_roundtrip_equal(doc: tracepack.Document, codec: str, compression: str, level: int) -> None:
    data = tracepack.dumps(doc, codec=codec, compression=compression, level=level)
    back = tracepack.loads(data)
    assert back == doc
    assert back.raw.header == doc.raw.header


@given(built=built_documents())
def test_rendered_strings_equal_inputs(built: BuiltDocument) -> None:
    doc = tracepack.loads(tracepack.dumps(built.doc, codec="msgpack"))
    for name, meta in built.meta.items():
        node = doc.node(name)
        assert node.meta == meta
        assert node.stack_trace == meta.get("stack_trace", node.stack_trace)
        if "nn_module_stack" in meta:
            assert node.module_stack == meta["nn_module_stack"]
    for name, frames in built.frames.items():
        assert doc.node(name).frames == [f._replace(annotation="") for f in frames]
    for h, op in built.handles.items():
        assert doc.debug_handle(h).op == op
    for i, text in built.sources.items():
        assert doc.source_text(i) == text
