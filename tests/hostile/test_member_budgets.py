"""Zip members read into memory and data-only pickles follow the caller's budgets (issue 12):
``max_decompressed``, ``max_ratio``, ``ratio_floor``, ``max_pickle_objects``. At the default a
crafted input is refused with one line naming the member, the budget, ``--limit`` and the API
call; raised (``--limit`` or ``limits.raised``), it is read."""

from __future__ import annotations

import io
import struct
import zipfile
from pathlib import Path

import pytest

from tracepack.cli import main
from tracepack.errors import LegacyFormatError
from tracepack.io import limits
from tracepack.io.zip import open_archive

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_PT2 = ROOT / "src/tracepack/data/sample/tiny_transformer.pt2"
ETRECORD = ROOT / "tests/data/executorch/model.etrecord"
LITE = ROOT / "tests/data/torch/lite_debug.ptl"
#: Just past the default ``ratio_floor`` (64 MiB): the smallest output the ratio budget refuses.
_OVER_FLOOR = limits.DEFAULT.ratio_floor + 1


def _hint(budget: str) -> str:
    return f"--limit {budget}=N; Python: limits.raised({budget}=...)"


def _lying_member(declared: int, compress_type: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A zip whose central directory declares ``declared`` bytes (zip64) for a 10-byte member
    (deflated: a stored member's two sizes must agree, ``test_a_stored_member_lying_...``)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("top/archive_format", b"pt2")
        info = zipfile.ZipInfo("top/data/0")
        info.compress_type = compress_type
        with z.open(info, "w", force_zip64=True) as f:
            f.write(b"0123456789")
        z.filelist[-1].file_size = declared  # what the central directory will say
    return out.getvalue()


def test_a_member_over_max_decompressed_is_refused_before_it_is_read() -> None:
    data = _lying_member(5 << 30)
    with open_archive(data, source="big.pt2") as archive:
        assert archive.info("top/data/0").file_size == 5 << 30
        with pytest.raises(LegacyFormatError) as err:
            archive.read("top/data/0")  # nothing allocated: the default budget (4 GiB) refuses the declaration
        line = str(err.value)
        assert line.startswith("big.pt2:top/data/0: member of 5,368,709,120 bytes is over the max_decompressed budget")
        assert "4,294,967,296 bytes" in line
        assert _hint("max_decompressed") in line
        with (
            limits.raised(max_decompressed=8 << 30, max_ratio=1 << 40),
            pytest.raises(LegacyFormatError, match="the zip declares"),
        ):
            archive.read("top/data/0")  # within the budgets now, and the decompressor stops at the real end
        assert archive.read("top/archive_format") == b"pt2"
        with limits.raised(max_decompressed=2), pytest.raises(LegacyFormatError, match="max_decompressed"):
            archive.read("top/archive_format")  # a lowered budget holds every member


def test_a_stored_member_lying_about_its_size_is_refused_when_the_archive_opens() -> None:
    """A stored member holds its size: one declaring 5 GiB while its local data is 10 bytes is refused
    naming both sizes, before any member is read (a stored member's size is the archive's bytes)."""
    with pytest.raises(LegacyFormatError) as err:
        open_archive(_lying_member(5 << 30, zipfile.ZIP_STORED), source="big.pt2")
    assert str(err.value) == (
        "big.pt2:top/data/0: stored member of 5,368,709,120 bytes declares 10 stored bytes; "
        "expected a stored member's two sizes equal"
    )


def test_the_torchscript_debug_reader_follows_the_budget_too() -> None:
    from tracepack.torch.torchscript.archive import read_torchscript_debug_info

    data = LITE.read_bytes()
    assert read_torchscript_debug_info(data).mobile_debug_handles is not None
    with limits.raised(max_decompressed=1000), pytest.raises(LegacyFormatError, match="max_decompressed") as err:
        read_torchscript_debug_info(data, name="lite.ptl")
    assert str(err.value).startswith("lite.ptl:")


@pytest.fixture(scope="module")
def ratio_bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ExecuTorch sample ETRecord with its ``export_graph_id`` JSON padded with spaces past
    the ratio floor, stored bzip2-compressed (a few hundred bytes: far over 1000 times)."""
    out = io.BytesIO()
    with zipfile.ZipFile(ETRECORD) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            body = src.read(info)
            if info.filename == "export_graph_id":
                body += b" " * (_OVER_FLOOR - len(body))
                member = zipfile.ZipInfo(info.filename, date_time=info.date_time)
                member.compress_type = zipfile.ZIP_BZIP2
                dst.writestr(member, body)
            else:
                dst.writestr(info, body)
    path = tmp_path_factory.mktemp("ratio") / "bomb.etrecord"
    path.write_bytes(out.getvalue())
    info = zipfile.ZipFile(path).getinfo("export_graph_id")
    assert info.file_size == _OVER_FLOOR
    assert info.file_size > 1000 * info.compress_size
    return path


def test_a_zip_member_over_the_ratio_is_refused_by_the_api(ratio_bomb: Path) -> None:
    with open_archive(ratio_bomb.read_bytes(), source="bomb.etrecord") as archive:
        with pytest.raises(LegacyFormatError) as err:
            archive.read("export_graph_id")
        assert str(err.value).startswith("bomb.etrecord:export_graph_id: member expands from")
        assert _hint("max_ratio") in str(err.value)
        with limits.raised(ratio_floor=_OVER_FLOOR):
            assert len(archive.read("export_graph_id")) == _OVER_FLOOR  # at the floor: never refused for its ratio
        with limits.raised(max_ratio=1 << 20):
            assert archive.read("export_graph_id").strip().isdigit()


@pytest.mark.parametrize("setting", ["max_ratio=1M", "ratio_floor=128M"])
def test_ratio_budgets_on_the_command_line(
    ratio_bomb: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], setting: str
) -> None:
    out = tmp_path / "out.tpk"
    assert main(["convert", str(ratio_bomb), str(out)]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line
    assert f"{ratio_bomb}:export_graph_id: member expands from" in line
    assert "zip bomb" in line
    assert _hint("max_ratio") in line
    assert not out.exists()
    assert main(["convert", str(ratio_bomb), str(out), "--limit", setting]) == 0
    assert out.stat().st_size > 0


def test_max_decompressed_on_the_command_line_names_the_member(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.tpk"
    with zipfile.ZipFile(SAMPLE_PT2) as z:
        program = next(i for i in z.infolist() if i.filename.endswith("models/model.json"))
    assert main(["convert", str(SAMPLE_PT2), str(out), "--limit", "max_decompressed=64K"]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line
    assert f"{SAMPLE_PT2}:{program.filename}: member of {program.file_size:,} bytes" in line
    assert "max_decompressed budget of 65,536 bytes" in line
    assert _hint("max_decompressed") in line
    assert main(["convert", str(SAMPLE_PT2), str(out), "--limit", f"max_decompressed={program.file_size}"]) == 0


def _shared_handles(functions: int, handles: int) -> bytes:
    """``mobile_debug_handles.pkl`` listing one function ``functions`` times through the pickle
    memo (a few bytes each): ``functions * handles`` objects to whoever walks it."""

    def text(s: str) -> bytes:
        return b"X" + struct.pack("<I", len(s)) + s.encode()

    ints = b"".join(b"K" + bytes((i % 174,)) for i in range(handles))
    entry = text("__torch__.TinyScript.forward") + text("function_debug_handles") + b"](" + ints + b"e"
    entry += b"\x85\x86\x85\x86q\x00"  # ((name, (("function_debug_handles", (handles,)),))), memo slot 0
    return b"\x80\x02(K\x08" + entry + b"h\x00" * (functions - 1) + b"t."


def test_max_pickle_objects_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    functions, handles = 2001, 5000  # 10,005,000 handles: just over the default budget
    pkl = _shared_handles(functions, handles)
    assert len(pkl) < 20_000
    path = tmp_path / "shared.ptl"
    with zipfile.ZipFile(LITE) as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, pkl if info.filename.endswith("/mobile_debug_handles.pkl") else src.read(info))
    out = tmp_path / "out.tpk"
    assert main(["convert", str(path), str(out)]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line
    assert f"{path}:mobile_debug_handles.pkl: at byte " in line
    assert "expands to more than 10000000 objects" in line
    assert _hint("max_pickle_objects") in line
    assert main(["convert", str(path), str(out), "--limit", "max_pickle_objects=11M"]) == 0
    from tracepack.torch.torchscript.debug_pkl import parse_mobile_debug_handles

    with limits.raised(max_pickle_objects=11 << 20):
        parsed = parse_mobile_debug_handles(pkl)
    assert len(parsed.functions) == functions
    assert parsed.functions[0] is not parsed.functions[1]
    assert parsed.functions[-1].handles == tuple(i % 174 for i in range(handles))


def test_tracepack_torch_load_reads_members_within_the_budget() -> None:
    """``tracepack.torch.load`` reads the program, configs and tensor data into memory: each
    member is held to ``max_decompressed`` before its buffer is allocated."""
    pytest.importorskip("torch")
    from tracepack.torch.loader import load_pt2

    with zipfile.ZipFile(SAMPLE_PT2) as z:
        largest = max((i for i in z.infolist() if not i.is_dir()), key=lambda i: i.file_size)
    with limits.raised(max_decompressed=largest.file_size - 1), pytest.raises(LegacyFormatError) as err:
        load_pt2(SAMPLE_PT2)
    assert "max_decompressed" in str(err.value)
    assert _hint("max_decompressed") in str(err.value)
    assert str(err.value).startswith(f"{SAMPLE_PT2}:")
    with limits.raised(max_decompressed=largest.file_size):
        assert load_pt2(SAMPLE_PT2) is not None
