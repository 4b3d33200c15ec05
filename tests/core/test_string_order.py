"""The string table grouped by field (tracepack.string_order): the same document, renumbered."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import zstandard
from hypothesis import given

import tracepack
from tests.strategies import documents
from tracepack import dictionaries, string_order
from tracepack.codecs import msgpack as mpc
from tracepack.document import Document
from tracepack.plain import to_plain
from tracepack.torch.export.model_json import export_model_json, import_model_json

DATA = Path(__file__).resolve().parent.parent / "data" / "torch"


def _copy(doc: Document) -> Document:
    return Document(mpc.decode(mpc.encode(doc.raw, doc.version), doc.version))


@given(doc=documents())
def test_grouping_keeps_every_reference(doc: Document) -> None:
    before = to_plain(doc)  # every string reference resolved to its text
    raw = _copy(doc).raw
    string_order.group_strings(raw, doc.version)
    grouped = Document(raw)
    assert to_plain(grouped) == before
    assert sorted(raw.strings) == sorted(doc.raw.strings)
    assert raw.strings[:1] == doc.raw.strings[:1]  # "" stays string 0
    assert tracepack.loads(tracepack.dumps(grouped, codec="columnar")).raw == raw
    again = _copy(grouped).raw
    assert string_order.group_strings(again, doc.version).strings == raw.strings  # already grouped


def _model_json(name: str) -> bytes:
    with zipfile.ZipFile(DATA / "corpus" / name) as archive:
        (member,) = [n for n in archive.namelist() if "/models/" in n and n.endswith(".json")]
        return archive.read(member)


@pytest.mark.parametrize("name", ["transformer.pt2", "dynamic.pt2", "cond.pt2"])
def test_torch_import_groups_strings(name: str) -> None:
    data = _model_json(name)
    grouped = import_model_json(data)
    interned = import_model_json(data, group_strings=False)
    assert grouped.raw.strings != interned.raw.strings
    assert to_plain(grouped) == to_plain(interned)
    assert export_model_json(tracepack.loads(tracepack.dumps(grouped, codec="columnar"))) == data
    # Node names sit together, in graph order (but those the graph's outputs name, which come first).
    g = grouped.raw.graph
    outside = {getattr(a, "name", 0) for a in (*g.inputs, *g.outputs)}
    names = [n.name for n in g.nodes if n.name not in outside]
    assert names == list(range(names[0], names[0] + len(names)))
    zdict = dictionaries.get()

    def packed(doc: Document) -> int:
        payload = tracepack.dumps(doc, codec="columnar", compression="none")[48:]
        return len(zstandard.ZstdCompressor(level=19, dict_data=zdict).compress(payload))

    assert packed(grouped) < packed(interned)
