"""Bad torch inputs: each is one line on stderr, exit code 2, and nothing written (no torch needed)."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from pathlib import Path

import pytest

from tracepack.cli import main
from tracepack.demo import sample_model_json
from tracepack.io.zip import open_archive, write_archive

ROOT = Path(__file__).resolve().parent.parent.parent
DATA = ROOT / "tests" / "data" / "torch"
PT2 = ROOT / "src" / "tracepack" / "data" / "sample" / "tiny_transformer.pt2"
SCRIPTED = DATA / "script_string_table.pt"
LITE = DATA / "lite_debug.ptl"


def swap(src: Path, member_suffix: str, data: bytes) -> bytes:
    """``src`` with the (first) member ending in ``member_suffix`` replaced by ``data``."""
    with open_archive(src.read_bytes(), source=str(src)) as archive:
        target = next(n for n in archive.names() if n.endswith(member_suffix))
        return write_archive((m, data if m.name == target else archive.read(m.name)) for m in archive.members)


def zip_of(members: dict[str, bytes]) -> bytes:
    return write_archive(members.items())


def unknown_major() -> bytes:
    model = json.loads(sample_model_json())
    model["schema_version"] = {"major": 99, "minor": 0}
    return json.dumps(model).encode()


# A pickle that imports os.system and calls it: the reader must refuse at GLOBAL, before REDUCE.
IMPORTING = b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00echo\x85R."

CASES: dict[str, tuple[str, Callable[[], bytes], str]] = {
    "malformed json": ("model.json", lambda: sample_model_json()[:-40], "not valid JSON"),
    "unknown schema major": ("model.json", unknown_major, "torch.export schema 99.0 is not supported"),
    "json without a program": ("model.json", lambda: b'{"graph_module": 3, "x": [1, 2]}', "no schema_version"),
    "zip that is not a torch archive": (
        "x.pt",
        lambda: zip_of({"readme.txt": b"hi", "a/b.txt": b"x"}),
        "not one torch wrote",
    ),
    "truncated zip": ("x.pt2", lambda: PT2.read_bytes()[:5000], "not a readable zip archive"),
    "debug_pkl of another shape": (
        "x.pt",
        lambda: swap(SCRIPTED, "code/__torch__.py.debug_pkl", pickle.dumps({"rows": [1, 2]}, protocol=2)),
        "debug_pkl holds a dict",
    ),
    "debug_pkl with a bad row": (
        "x.pt",
        lambda: swap(SCRIPTED, "code/__torch__.py.debug_pkl", pickle.dumps(((0, (1, 2), 3),), protocol=2)),
        "row 0: range is a tuple of 2",
    ),
    "debug_pkl with an unknown opcode": (
        "x.pt",
        lambda: swap(SCRIPTED, "code/__torch__.py.debug_pkl", b"\x80\x02\xff."),
        "at byte 2",
    ),
    "debug_pkl that imports": (
        "x.pt",
        lambda: swap(SCRIPTED, "code/__torch__.py.debug_pkl", IMPORTING),
        "GLOBAL",
    ),
    "callstack map that imports": ("x.ptl", lambda: swap(LITE, "callstack_debug_map.pkl", IMPORTING), "GLOBAL"),
    "pickle built with pickle.dumps of a function": (
        "x.ptl",
        lambda: swap(LITE, "mobile_debug_handles.pkl", pickle.dumps(print, protocol=2)),
        "GLOBAL",
    ),
}


def assert_one_line_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str], out: Path) -> None:
    code = main(args)
    _, err = capsys.readouterr()
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert err.startswith("tracepack: "), err
    assert message in err
    assert not out.exists()
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == []  # no temporary file left


@pytest.mark.parametrize("case", CASES)
def test_convert_refuses(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name, make, message = CASES[case]
    src = tmp_path / name
    src.write_bytes(make())
    out = tmp_path / "out" / "m.tpk"
    out.parent.mkdir()
    assert_one_line_exit_2(["convert", str(src), str(out)], message, capsys, out)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (CASES["zip that is not a torch archive"][1], "not one torch wrote"),
        (CASES["truncated zip"][1], "not a readable zip archive"),
        (lambda: b"plain bytes", "not a readable zip archive"),
        (PT2.read_bytes, "was not imported from a torch model.json"),  # a TorchScript document, a .pt2 archive
        ((DATA / "corpus" / "cnn_script.pt").read_bytes, "different code files"),
    ],
)
def test_expand_archive_refuses(
    make: Callable[[], bytes], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tpk = tmp_path / "good.tpk"
    assert main(["convert", str(LITE), str(tpk)]) == 0
    original = tmp_path / "original.pt"
    original.write_bytes(make())
    out = tmp_path / "out" / "rebuilt.pt"
    out.parent.mkdir()
    capsys.readouterr()
    assert_one_line_exit_2(["expand", str(tpk), str(out), "--archive", str(original)], message, capsys, out)


@pytest.mark.parametrize(
    ("command", "make", "message"),
    [
        ("pack", SCRIPTED.read_bytes, "no program in the archive"),
        ("pack", lambda: b"not a zip at all", "not a readable zip archive"),
        ("unpack", PT2.read_bytes, "the archive is not packed"),
        ("pack", lambda: swap(PT2, "models/model.json", b'{"graph_module": '), "not valid JSON"),
        (
            "pack",
            lambda: swap(PT2, "models/model.json", json.dumps(json.loads(sample_model_json()), indent=1).encode()),
            "not in torch's JSON encoding",
        ),
    ],
)
def test_pack_unpack_refuse(
    command: str, make: Callable[[], bytes], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "in.pt2"
    src.write_bytes(make())
    out = tmp_path / "out" / "o.pt2"
    out.parent.mkdir()
    assert_one_line_exit_2([command, str(src), str(out)], message, capsys, out)


def test_pack_twice_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    packed = tmp_path / "p.pt2"
    assert main(["pack", str(PT2), str(packed)]) == 0
    out = tmp_path / "out" / "pp.pt2"
    out.parent.mkdir()
    capsys.readouterr()
    assert_one_line_exit_2(["pack", str(packed), str(out)], "already packed", capsys, out)


def test_packed_member_tampered(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    packed = tmp_path / "p.pt2"
    assert main(["pack", str(PT2), str(packed)]) == 0
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(swap(packed, ".tpk", b"\x89TPK\r\n\x1a\n" + b"\x00" * 10))
    out = tmp_path / "out" / "u.pt2"
    out.parent.mkdir()
    capsys.readouterr()
    assert_one_line_exit_2(["unpack", str(bad), str(out)], "truncated header", capsys, out)
