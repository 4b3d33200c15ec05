"""torch.export programs through tracepack: model.json comes back byte for byte through every codec."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracepack
from tests.torch.conftest import CORPUS, PT2, TORCH_MARKS, model_json
from tracepack import interned_json
from tracepack.cli import main
from tracepack.torch.archives import import_archive
from tracepack.torch.export.model_json import export_model_json
from tracepack.torch.pt2 import _walk

torch = pytest.importorskip("torch")

pytestmark = TORCH_MARKS

CODECS = [(c, z) for c in ("json", "msgpack", "flatbuffers-rows", "flatbuffers") for z in ("none", "zstd")]


def all_nodes(data: bytes) -> list[dict[str, object]]:
    """Every node of the program, nested graphs' too, in document order."""
    return [node for _, node in _walk(json.loads(data)["graph_module"]["graph"])]


def round_trips(path: Path) -> None:
    original = model_json(path)
    doc = import_archive(str(path), path.read_bytes())
    assert len(doc) == len(all_nodes(original))
    for codec, compression in CODECS:
        back = tracepack.loads(tracepack.dumps(doc, codec=codec, compression=compression))
        assert back == doc
        assert export_model_json(back) == original, (codec, compression)


@pytest.mark.parametrize("name", PT2)
def test_corpus_model_json_byte_identical_through_every_codec(name: str) -> None:
    round_trips(CORPUS / name)


@pytest.mark.slow
def test_big_model_byte_identical_through_every_codec(big_pt2: Path) -> None:
    assert len(json.loads(model_json(big_pt2))["graph_module"]["graph"]["nodes"]) >= 10_000
    round_trips(big_pt2)


@pytest.mark.parametrize("name", PT2)
def test_every_trace_and_module_stack_is_interned(name: str) -> None:
    path = CORPUS / name
    doc = import_archive(str(path), path.read_bytes())
    for raw, node in zip(all_nodes(model_json(path)), doc.nodes(), strict=True):
        assert node.meta == raw["metadata"]
        if "stack_trace" in raw["metadata"]:
            assert node.raw.stack != 0
        if "nn_module_stack" in raw["metadata"]:
            assert node.raw.module != 0


@pytest.mark.parametrize("name", ["cnn.pt2", "cond.pt2"])
def test_cli_convert_expand_pt2(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tpk, out = tmp_path / "m.tpk", tmp_path / "model.json"
    assert main(["convert", str(CORPUS / name), str(tpk), "--level", "19"]) == 0
    assert main(["expand", str(tpk), str(out)]) == 0
    assert out.read_bytes() == model_json(CORPUS / name)
    rebuilt = tmp_path / "rebuilt.pt2"
    assert main(["expand", str(tpk), str(rebuilt), "--archive", str(CORPUS / name)]) == 0
    assert model_json(rebuilt) == model_json(CORPUS / name)
    program = torch.export.load(rebuilt)
    assert len(program.graph.nodes) > 0
    capsys.readouterr()


def test_dynamic_program_uses_nodes_layout_2() -> None:
    """torch's dynamic-shape export: derivable hints left out, ``as_sym_ints`` lists compact, under a
    name builds before layout 2 do not find (they refuse the file instead of writing ``"hint": null``);
    model.json back byte for byte through every codec."""
    path = CORPUS / "dynamic.pt2"
    original = json.loads(model_json(path))
    doc = import_archive(str(path), path.read_bytes())
    names = [e.name for e in doc.raw.extensions]
    assert "torch.export/nodes-2" in names
    assert "torch.export/nodes" not in names
    exprs = [doc.strings[i] for v in doc.raw.graph.values for i in [*v.sym_shape, *v.sym_strides] if i]
    assert exprs
    nodes = next(e for e in doc.raw.extensions if e.name == "torch.export/nodes-2")
    stored = interned_json.fill_value(nodes.template, nodes.refs, doc.raw.strings)
    assert len(stored.get("values", {}).get("hints", {})) < len(set(exprs))
    round_trips(path)
    static = CORPUS / "cnn.pt2"
    assert "torch.export/nodes" in [e.name for e in import_archive(str(static), static.read_bytes()).raw.extensions]
    assert original["graph_module"]["graph"]["tensor_values"]
