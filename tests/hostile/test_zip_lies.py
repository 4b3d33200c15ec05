"""zip64 lies (issue 24): a central directory that declares a member of ``0xFFFFFFFF`` bytes (the zip64
marker) without a zip64 record made ``convert``, ``pack`` and ``expand --archive`` read 4 GiB into
memory (MemoryError under a 2 GiB cap). Every zip reader now checks the directory against the archive
when it opens it (``tracepack.io.zip.check_directory``): a member whose data would run past the
members' end, or a stored member whose two sizes differ, is one line naming the member."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.hostile import crafted
from tracepack.errors import LegacyFormatError
from tracepack.io.zip import open_archive

SAMPLE = crafted.SAMPLE_PT2
#: The three inputs of the issue: the program's central size fields set to the zip64 marker.
LIES = {"file_size": (24,), "compress_size": (20,), "both sizes": (20, 24)}


def _lie(data: bytes, member_suffix: str, offsets: tuple[int, ...]) -> bytes:
    _, _, entries = crafted._central_entries(data)
    b = bytearray(data)
    entry = next(e for e, name, _ in entries if name.endswith(member_suffix))
    for at in offsets:
        struct.pack_into("<I", b, entry + at, 0xFFFFFFFF)
    return bytes(b)


def _capped(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``tracepack ARGV`` in a process whose address space is capped at 2 GiB."""
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
        "from tracepack.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *argv], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture(scope="module")
def good_tpk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import tracepack
    from tracepack.torch.archives import import_archive

    path = tmp_path_factory.mktemp("good") / "sample.tpk"
    path.write_bytes(tracepack.dumps(import_archive(str(SAMPLE), SAMPLE.read_bytes())))
    return path


@pytest.mark.parametrize("lie", sorted(LIES))
@pytest.mark.parametrize("command", ["convert", "pack", "expand --archive"])
def test_the_issues_inputs_are_refused_in_one_line_under_a_2_gib_cap(
    lie: str, command: str, tmp_path: Path, good_tpk: Path
) -> None:
    src = tmp_path / "lie.pt2"
    src.write_bytes(_lie(SAMPLE.read_bytes(), "models/model.json", LIES[lie]))
    out = tmp_path / "out.bin"
    argv = {
        "convert": ["convert", str(src), str(out)],
        "pack": ["pack", str(src), str(out)],
        "expand --archive": ["expand", str(good_tpk), str(out), "--archive", str(src)],
    }[command]
    done = _capped(argv, tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"tracepack: {src}:tiny_transformer/models/model.json: "), done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lie.pt2"]  # nothing written, no temporary file


@pytest.mark.parametrize(("name", "kind", "data"), crafted.zip_seeds(), ids=[s[0] for s in crafted.zip_seeds()])
def test_every_member_of_every_zip_layout_is_checked_when_the_archive_opens(name: str, kind: str, data: bytes) -> None:
    """The central size fields of each member, in turn, set to the zip64 marker: refused by the
    archive reader (every zip reader opens through it) naming that member, when it opens (a stored
    member, or a compressed one whose data would run past the end) or when the member is read (a
    compressed member declaring 4 GiB: the ratio budget); the archive as it was opens."""
    open_archive(data, source=name).close()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        infos = z.infolist()
    for info in infos:
        for lie, offsets in LIES.items():
            bad = _lie(data, info.filename, offsets)
            with pytest.raises(LegacyFormatError) as err, open_archive(bad, source=name) as archive:  # noqa: PT012
                assert info.compress_type != zipfile.ZIP_STORED  # a stored member is refused when it opens,
                assert lie == "file_size"  # and so is one whose data would run past the end
                archive.read(info.filename)
            assert str(err.value).startswith(f"{name}:{info.filename}: "), str(err.value)
            assert "\n" not in str(err.value)


def test_the_torchscript_and_loader_readers_check_it_too(tmp_path: Path) -> None:
    from tracepack.torch.torchscript.archive import read_torchscript_debug_info

    ts = (crafted.TORCH_DATA / "lite_debug.ptl").read_bytes()
    bad = _lie(ts, "mobile_debug_handles.pkl", (20, 24))
    with pytest.raises(LegacyFormatError, match=r"mobile_debug_handles\.pkl: declares 4,294,967,295 bytes"):
        read_torchscript_debug_info(bad, name="lite.ptl")
    path = tmp_path / "lite.ptl"
    path.write_bytes(bad)
    with pytest.raises(LegacyFormatError, match="the zip64 marker, without a zip64 record"):
        read_torchscript_debug_info(path)
