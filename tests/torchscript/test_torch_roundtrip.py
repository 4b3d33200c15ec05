"""Checks against torch itself (skipped without torch 2.13): what we write, torch loads."""

from __future__ import annotations

import struct
import warnings
import zipfile
from pathlib import Path

import pytest

from tracepack.torch.torchscript.debug_pkl import (
    DebugPklForm,
    SourceRangeRow,
    parse_callstack_debug_map,
    parse_debug_pkl,
    write_debug_pkl,
)

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.torch,
    # torch 2.13 deprecates TorchScript (jit.load/save, the lite interpreter) with warnings.
    pytest.mark.filterwarnings("ignore::DeprecationWarning:torch"),
    pytest.mark.filterwarnings("ignore::UserWarning:torch"),
    # torch 2.15 warns on every torch.jit call ("`torch.jit.load` is deprecated. Please switch to ...").
    pytest.mark.filterwarnings(r"ignore:`torch\.jit\.\w+` is deprecated:FutureWarning"),
    pytest.mark.filterwarnings("ignore:Lite Interpreter is deprecated:FutureWarning"),
]

DATA = Path(__file__).resolve().parent.parent / "data" / "torch"
OTHER = {DebugPklForm.LEGACY: DebugPklForm.STRING_TABLE, DebugPklForm.STRING_TABLE: DebugPklForm.LEGACY}


def rebuild(src: Path, dst: Path, replace: dict[str, bytes]) -> None:
    """Copy a torch zip, swapping some members, keeping 64-byte aligned stored records."""
    with zipfile.ZipFile(src) as zin, open(dst, "wb") as raw, zipfile.ZipFile(raw, "w") as zout:
        for info in zin.infolist():
            data = replace.get(info.filename, zin.read(info.filename))
            pad = (-(raw.tell() + 30 + len(info.filename.encode()) + 4)) % 64
            out = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            out.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
            zout.writestr(out, data)


class Tiny(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x)) * 2.0


@pytest.mark.parametrize("string_table", [False, True])
def test_we_read_what_torch_writes_now(tmp_path: Path, string_table: bool) -> None:
    torch._C._set_should_use_format_with_string_table(string_table)
    try:
        path = tmp_path / "tiny.pt"
        torch.jit.save(torch.jit.script(Tiny()), str(path))
    finally:
        torch._C._set_should_use_format_with_string_table(True)
    form = DebugPklForm.STRING_TABLE if string_table else DebugPklForm.LEGACY
    rows: list[SourceRangeRow] = []
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            if name.endswith(".debug_pkl"):
                raw = archive.read(name)
                parsed = parse_debug_pkl(raw, source=name)
                assert parsed.form is form
                assert write_debug_pkl(parsed.rows, parsed.form, sources=parsed.sources) == raw
                rows += parsed.rows
    this_file = str(Path(__file__).resolve())
    assert any(r.filename == this_file and "torch.relu(self.lin(x))" in r.text for r in rows)


@pytest.mark.parametrize("archive", ["script_legacy.pt", "script_string_table.pt", "traced_string_table.pt"])
def test_torch_loads_our_pickles_in_either_form(tmp_path: Path, archive: str) -> None:
    src = DATA / archive
    original = torch.jit.load(str(src))
    replace: dict[str, bytes] = {}
    with zipfile.ZipFile(src) as z:
        for name in z.namelist():
            if name.endswith(".debug_pkl"):
                parsed = parse_debug_pkl(z.read(name), source=name)
                replace[name] = write_debug_pkl(parsed.rows, OTHER[parsed.form], sources=parsed.sources)
    dst = tmp_path / archive
    rebuild(src, dst, replace)
    loaded = torch.jit.load(str(dst))
    # Printing the inlined graph makes torch resolve every node's source range from debug_pkl.
    assert str(loaded.inlined_graph) == str(original.inlined_graph)
    assert "/home/user/project/scripts/torch/export_torchscript_sample.py" in str(loaded.inlined_graph)
    x = torch.randn(2, 3, 4)
    assert torch.equal(loaded(x), original(x))


def test_torch_shows_rows_we_wrote(tmp_path: Path) -> None:
    src = DATA / "script_string_table.pt"
    replace: dict[str, bytes] = {}
    with zipfile.ZipFile(src) as z:
        name = "script_string_table/code/__torch__.py.debug_pkl"
        parsed = parse_debug_pkl(z.read(name))
        rows = [
            SourceRangeRow(
                r.byte_offset,
                r.text,
                "/elsewhere/renamed.py" if r.filename else r.filename,
                r.starting_line + 1000 if r.filename else r.starting_line,
                r.start,
                r.end,
                r.tag,
            )
            for r in parsed.rows
        ]
        replace[name] = write_debug_pkl(rows, DebugPklForm.LEGACY)
    dst = tmp_path / "renamed.pt"
    rebuild(src, dst, replace)
    graph = str(torch.jit.load(str(dst)).inlined_graph)
    assert "/elsewhere/renamed.py:10" in graph


def test_lite_interpreter_debug_maps_match_a_fresh_save(tmp_path: Path) -> None:
    path = tmp_path / "tiny.ptl"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.script(Tiny())._save_for_lite_interpreter(str(path), _save_mobile_debug_info=True)
    with zipfile.ZipFile(path) as z:
        cmap = parse_callstack_debug_map(z.read("tiny/callstack_debug_map.pkl"))
    names = {row.node_name for row in cmap.rows}
    assert {"aten::linear", "aten::relu", "aten::mul"} <= names
    linear = next(r for r in cmap.rows if r.node_name == "aten::linear")
    assert linear.callstack is not None
    assert linear.callstack.module is not None
    assert linear.callstack.module.instance_name == "lin"
