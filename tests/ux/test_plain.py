"""``tracepack.plain``: the document as plain JSON, strings resolved, compared with torch's model.json."""

from __future__ import annotations

import json

import tracepack
from tests.ux.helpers import MODEL_JSON, TORCH_DATA, torch_nodes
from tracepack.plain import to_plain


def test_nodes_read_like_torchs_with_strings_resolved() -> None:
    plain = to_plain(tracepack.load(MODEL_JSON))
    assert "strings" not in plain
    nodes = plain["graph"]["nodes"]
    assert [(n["name"], n["target"]) for n in nodes] == [(n["name"], n["target"]) for n in torch_nodes()]
    # argument names and tensor names are strings now, as torch wrote them
    for mine, theirs in zip(nodes, torch_nodes(), strict=True):
        assert [i["name"] for i in mine.get("inputs", [])] == [i["name"] for i in theirs["inputs"]]
    assert plain["header"]["producer"]["name"] == "torch.export"
    # the text is plain JSON: it survives a round trip through json
    assert json.loads(json.dumps(plain)) == plain


def test_module_and_file_tables_hold_text() -> None:
    plain = to_plain(tracepack.load(MODEL_JSON))
    assert "blocks.0.attn" in plain["modules"]["path"]
    assert any(name.endswith("export_sample.py") for name in plain["files"]["name"])


def test_torchscript_source_ranges_resolve() -> None:
    plain = to_plain(tracepack.load(TORCH_DATA / "lite_debug.ptl"))
    assert plain["debug_files"][0]["path"] == "code/__torch__.py"
    assert all(isinstance(t, str) for t in plain["sources"]["lines"])


def test_every_released_version_reads_into_the_current_shape() -> None:
    doc = tracepack.load(MODEL_JSON)
    old = tracepack.loads(tracepack.dumps(doc, codec="json", compression="none", version=(1, 0)))
    assert [n["name"] for n in to_plain(old)["graph"]["nodes"]] == [n["name"] for n in torch_nodes()]
