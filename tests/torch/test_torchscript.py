"""TorchScript archives: debug_pkl rows become interned tables; expand rebuilds loadable archives."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

import tracepack
from tests.torch.conftest import COMMITTED_CORPUS, CORPUS, TORCH_MARKS, TORCHSCRIPT, TORCHSCRIPT_SAMPLES
from tracepack.cli import main
from tracepack.torch.torchscript.archive import read_torchscript_debug_info

torch = pytest.importorskip("torch")

pytestmark = TORCH_MARKS

DATA = COMMITTED_CORPUS.parent  # the TorchScript samples of tests/data/torch (torch 2.13 wrote them)
ARCHIVES = [CORPUS / n for n in TORCHSCRIPT] + [DATA / n for n in TORCHSCRIPT_SAMPLES]


def rows(path: Path) -> dict[str, object]:
    info = read_torchscript_debug_info(path)
    return {k: v.rows for k, v in info.debug_pkls.items()}


@pytest.mark.parametrize("path", ARCHIVES, ids=lambda p: p.name)
def test_expand_rebuilds_the_archive(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tpk, out = tmp_path / "m.tpk", tmp_path / path.name
    assert main(["convert", str(path), str(tpk)]) == 0
    assert main(["expand", str(tpk), str(out), "--archive", str(path)]) == 0
    capsys.readouterr()
    # Same layout as the original: every member byte for byte, debug_pkl included.
    with zipfile.ZipFile(path) as a, zipfile.ZipFile(out) as b:
        assert a.namelist() == b.namelist()
        assert [n for n in a.namelist() if a.read(n) != b.read(n)] == []
    torch.jit.load(str(out))


@pytest.mark.parametrize("path", ARCHIVES, ids=lambda p: p.name)
@pytest.mark.parametrize("fmt", ["legacy", "table"])
def test_expand_in_either_layout(path: Path, fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tpk, out = tmp_path / "m.tpk", tmp_path / path.name
    assert main(["convert", str(path), str(tpk), "--codec", "flatbuffers"]) == 0
    assert main(["expand", str(tpk), str(out), "--archive", str(path), "--debug-format", fmt]) == 0
    capsys.readouterr()
    assert rows(out) == rows(path)
    forms = {p.form.value for p in read_torchscript_debug_info(out).debug_pkls.values()}
    assert forms == {"legacy" if fmt == "legacy" else "string_table"}
    loaded = torch.jit.load(str(out))
    assert "/home/user/" in str(loaded.inlined_graph)  # torch read our source ranges


def test_document_tables() -> None:
    path = DATA / "script_string_table.pt"
    doc = tracepack.load(_convert(path))
    files = {f.path for f in doc.raw.debug_files}
    assert "code/__torch__.py" in files
    info = read_torchscript_debug_info(path)
    total = sum(len(p.rows) for p in info.debug_pkls.values())
    assert sum(len(f.range) for f in doc.raw.debug_files) == total
    # Interning: far fewer sources than rows, every text line stored once.
    assert len(doc.raw.sources.line_count) < total
    assert len(set(doc.strings)) == len(doc.strings)


def _convert(path: Path) -> bytes:
    from tracepack.torch.archives import import_archive

    return tracepack.dumps(import_archive(str(path), path.read_bytes()))


@pytest.mark.parametrize("path", [DATA / "lite_debug.ptl", CORPUS / "transformer_lite.ptl"], ids=lambda p: p.name)
def test_lite_debug_handles(path: Path) -> None:
    doc = tracepack.load(_convert(path))
    info = read_torchscript_debug_info(path)
    assert info.callstack_debug_map is not None
    assert list(doc.raw.debug_handles.handle) == sorted(r.debug_handle for r in info.callstack_debug_map.rows)
    for row in info.callstack_debug_map.rows:
        h = doc.debug_handle(row.debug_handle)
        assert h.op == row.node_name
        calls = row.callstack.frames() if row.callstack is not None else []
        assert h.module_hierarchy.startswith("TOP(")
        assert h.module_hierarchy.count("::") == len(calls) + 1
        for call in calls:
            if call.module is not None:
                short = call.module.type_name.rsplit(".", 1)[-1]
                assert f"{call.module.instance_name}({short})::{call.function_name}" in h.module_hierarchy
        if calls:
            assert h.stack_trace.count('File "') >= len(calls)


def test_lite_sample_known_handle() -> None:
    doc = tracepack.load(_convert(DATA / "lite_debug.ptl"))
    h = doc.debug_handle(144)
    assert h.op == "aten::mul"
    assert h.module_hierarchy == (
        "TOP(TinyScript)::forward.blocks(Sequential)::forward.1(Block)::forward.ff(FeedForward)::forward"
        ".net(Sequential)::forward.1(GatedActivation)::forward.UNKNOWN_INSTANCE(UNKNOWN_TYPE)::_gated"
        ".UNKNOWN_INSTANCE(UNKNOWN_TYPE)::_activation.UNKNOWN_INSTANCE(UNKNOWN_TYPE)::_gelu_tanh"
    )
    frames = h.stack_trace.split("\n  File ")
    assert len(frames) == 9
    assert frames[0].startswith(
        'File "/home/user/project/scripts/torch/export_torchscript_sample.py", line 111, in forward'
    )
    assert frames[-1].endswith("inner = 0.7978845608 * (x + 0.044715 * x * x * x)")
