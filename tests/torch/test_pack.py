"""`tracepack pack` / `unpack`: debug strings move into a tracepack member; torch still loads the archive."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

import tracepack
from tests.torch.conftest import CORPUS, PT2, TORCH_MARKS, is_program, model_json
from tracepack.cli import main
from tracepack.torch.pt2 import DEBUG_KEYS, MEMBER_DIR

torch = pytest.importorskip("torch")
import tracepack.torch  # noqa: E402 - needs torch

pytestmark = TORCH_MARKS


def node_meta(program: object) -> list[tuple[str, str, object, object]]:
    graphs = [program.graph_module.graph]  # type: ignore[attr-defined]
    for _, sub in program.graph_module.named_modules():  # type: ignore[attr-defined]
        if isinstance(sub, torch.fx.GraphModule):
            graphs.append(sub.graph)
    return [(n.name, n.op, n.meta.get("stack_trace"), n.meta.get("nn_module_stack")) for g in graphs for n in g.nodes]


def pack_unpack(src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    packed, unpacked = tmp_path / "packed.pt2", tmp_path / "unpacked.pt2"
    assert main(["pack", str(src), str(packed)]) == 0
    assert main(["unpack", str(packed), str(unpacked)]) == 0
    capsys.readouterr()
    return packed, unpacked


@pytest.mark.parametrize("name", PT2)
def test_pack_unpack_byte_identical_and_loadable(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = CORPUS / name
    packed, unpacked = pack_unpack(src, tmp_path, capsys)
    original = model_json(src)
    assert model_json(unpacked) == original
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(unpacked) as b:
        assert a.namelist() == b.namelist()
        assert all(a.read(n) == b.read(n) for n in a.namelist())
    with zipfile.ZipFile(packed) as archive:  # below the top folder; at the root of a flat (torch 2.6/2.7) archive
        assert any(n.startswith(MEMBER_DIR) or f"/{MEMBER_DIR}" in n for n in archive.namelist())
    stripped = json.loads(model_json(packed))
    debug = set(DEBUG_KEYS)
    want = [
        {k: v for k, v in n["metadata"].items() if k not in debug}
        for n in json.loads(original)["graph_module"]["graph"]["nodes"]
    ]
    assert [n["metadata"] for n in stripped["graph_module"]["graph"]["nodes"]] == want
    assert len(model_json(packed)) < len(original)

    plain = torch.export.load(packed)  # torch still reads it, without the debug strings
    assert all(m[2] is None for m in node_meta(plain))
    reference = torch.export.load(src)
    assert [m[3] for m in node_meta(plain)] == [m[3] for m in node_meta(reference)]  # nn_module_stack kept
    assert str(plain.graph) == str(reference.graph)
    restored = tracepack.torch.load(packed)
    assert node_meta(restored) == node_meta(reference)
    assert str(restored.graph) == str(reference.graph)
    assert tracepack.torch.load(src).graph_signature == reference.graph_signature


def test_packed_member_is_a_tracepack_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    packed, _ = pack_unpack(CORPUS / "transformer.pt2", tmp_path, capsys)
    with zipfile.ZipFile(packed) as archive:
        (member,) = [n for n in archive.namelist() if n.endswith(".tpk")]
        doc = tracepack.loads(archive.read(member))
    raw = json.loads(model_json(CORPUS / "transformer.pt2"))["graph_module"]["graph"]["nodes"]
    if all("name" in n for n in raw):
        assert [n.name for n in doc.nodes()] == [n["name"] for n in raw]
    else:  # torch before 2.12 stores no node names: the member keeps the nodes in order, unnamed like them
        assert len(doc) == len(raw)
    assert [n.meta for n in doc.nodes()] == [{k: v for k, v in n["metadata"].items() if k in DEBUG_KEYS} for n in raw]
    # `convert` of a packed archive gives the full program back.
    tpk, out = tmp_path / "p.tpk", tmp_path / "model.json"
    assert main(["convert", str(packed), str(tpk)]) == 0
    assert main(["expand", str(tpk), str(out)]) == 0
    assert out.read_bytes() == model_json(CORPUS / "transformer.pt2")


def test_pack_keep_leaves_keys_in_model_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, packed, unpacked = CORPUS / "transformer_strict.pt2", tmp_path / "k.pt2", tmp_path / "u.pt2"
    assert main(["pack", str(src), str(packed), "--strip-all", "--keep", "custom", "--keep", "torch_fn"]) == 0
    assert main(["unpack", str(packed), str(unpacked)]) == 0
    nodes = json.loads(model_json(packed))["graph_module"]["graph"]["nodes"]
    written = {k for n in json.loads(model_json(src))["graph_module"]["graph"]["nodes"] for k in n["metadata"]}
    assert "torch_fn" in written  # ("custom" only where the exporting torch has annotate_fn)
    assert {k for n in nodes for k in n["metadata"]} == {"custom", "torch_fn"} & written
    assert model_json(unpacked) == model_json(src)
    torch.export.load(packed)


@pytest.mark.slow
def test_big_model_pack_unpack(big_pt2: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    packed, unpacked = pack_unpack(big_pt2, tmp_path, capsys)
    assert model_json(unpacked) == model_json(big_pt2)
    assert packed.stat().st_size < big_pt2.stat().st_size
    torch.export.load(packed)


@pytest.mark.parametrize("name", PT2)
def test_packed_with_defaults_unflattens_in_plain_torch(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    packed, _ = pack_unpack(CORPUS / name, tmp_path, capsys)
    reference = torch.export.unflatten(torch.export.load(CORPUS / name))
    ours = torch.export.unflatten(torch.export.load(packed))
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in reference.named_modules()]


def test_strip_all_moves_every_string_and_says_what_torch_loses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, packed, unpacked = CORPUS / "transformer.pt2", tmp_path / "s.pt2", tmp_path / "u.pt2"
    assert main(["pack", str(src), str(packed), "--strip-all"]) == 0
    assert main(["unpack", str(packed), str(unpacked)]) == 0
    capsys.readouterr()
    nodes = json.loads(model_json(packed))["graph_module"]["graph"]["nodes"]
    assert all(n["metadata"] == {} for n in nodes)
    assert model_json(unpacked) == model_json(src)
    plain = torch.export.load(packed)
    assert not any(m[3] for m in node_meta(plain))  # no nn_module_stack for plain torch
    assert node_meta(tracepack.torch.load(packed)) == node_meta(torch.export.load(src))


def test_packed_model_json_is_stored_deflated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    packed, _ = pack_unpack(CORPUS / "transformer.pt2", tmp_path, capsys)
    with zipfile.ZipFile(packed) as z, zipfile.ZipFile(CORPUS / "transformer.pt2") as orig:
        (info,) = [i for i in z.infolist() if is_program(i.filename)]
        (before,) = [i for i in orig.infolist() if is_program(i.filename)]
        assert info.compress_type == zipfile.ZIP_DEFLATED
        assert info.compress_size <= 0.3 * before.file_size
        # every other member as torch wrote it (weights stored, in torch 2.8+'s layout 64-byte aligned)
        kept = {i.filename: i.compress_type for i in orig.infolist() if not is_program(i.filename)}
        assert {i.filename: i.compress_type for i in z.infolist() if i.filename in kept} == kept
