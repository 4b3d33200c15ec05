"""Archives of any size and any damage: streamed copies, zip bombs, corrupt members."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from pathlib import Path

import pytest

from tracepack.errors import LegacyFormatError
from tracepack.io import limits
from tracepack.io.zip import ArchiveWriter, open_archive, open_archive_file
from tracepack.torch import pt2
from tracepack.torch.archives import import_archive

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "src/tracepack/data/sample/tiny_transformer.pt2"


def test_streamed_pack_and_unpack_equal_the_in_memory_ones(tmp_path: Path) -> None:
    data = SAMPLE.read_bytes()
    packed = tmp_path / "packed.pt2"
    size_in, size_out = pt2.pack_pt2_file(SAMPLE, packed)
    assert (size_in, size_out) == (len(data), packed.stat().st_size)
    assert packed.read_bytes() == pt2.pack_pt2(data, source="x.pt2")
    back = tmp_path / "back.pt2"
    pt2.unpack_pt2_file(packed, back)
    assert back.read_bytes() == pt2.unpack_pt2(packed.read_bytes(), source="p.pt2")
    with zipfile.ZipFile(back) as z, zipfile.ZipFile(SAMPLE) as orig:
        assert z.namelist() == orig.namelist()
        for name in orig.namelist():
            assert z.read(name) == orig.read(name), name  # zipfile checks every CRC too
            info = z.getinfo(name)
            if info.compress_type == zipfile.ZIP_STORED:
                offset = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
                assert offset % 64 == 0, name  # torch's alignment, kept for memory mapping


def test_a_raw_copy_keeps_the_source_crc_and_alignment() -> None:
    src = io.BytesIO()
    with zipfile.ZipFile(src, "w") as z:
        z.writestr("a/data/0", b"\x01" * 100_000)
        z.writestr("a/data/1", b"")
    out = io.BytesIO()
    with open_archive(src.getvalue(), source="s.zip") as archive, ArchiveWriter(out) as w:
        for m in archive.members:
            w.copy(archive, m.name, m)
    with zipfile.ZipFile(out) as z:
        assert z.testzip() is None
        assert z.read("a/data/0") == b"\x01" * 100_000


def _bomb(method: int, size: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as z:
        z.writestr("top/data/0", bytes(size))
        z.writestr("top/archive_format", b"pt2")
    return buf.getvalue()


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_a_zip_bomb_is_refused_before_it_expands(method: int) -> None:
    data = _bomb(method, 80 << 20)  # 80 MiB of zeros in a few KiB
    assert len(data) < 200_000
    with open_archive(data, source="bomb.pt2") as archive:
        with pytest.raises(LegacyFormatError, match="zip bomb"):
            archive.read("top/data/0")
        with pytest.raises(LegacyFormatError, match="zip bomb"):
            archive.open_member("top/data/0")
        with limits.raised(max_ratio=1 << 20):
            assert len(archive.read("top/data/0")) == 80 << 20


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_a_corrupt_compressed_member_is_one_line(method: int) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as z:
        z.writestr("top/data/0", bytes(range(256)) * 64)
    data = bytearray(buf.getvalue())
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo("top/data/0")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for i in range(start + 2, start + info.compress_size - 2, 7):
        data[i] ^= 0x5A
    with open_archive(bytes(data), source="bad.pt") as archive, pytest.raises(LegacyFormatError) as err:
        archive.read("top/data/0")
    assert "bad.pt:top/data/0" in str(err.value)


def test_an_archive_file_that_is_not_regular_is_refused(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "in.pt2"
    os.mkfifo(fifo)
    from tracepack.errors import UsageError

    with pytest.raises(UsageError, match="FIFO"):
        open_archive_file(fifo)


def test_convert_and_pack_of_a_big_archive_never_hold_the_weights(tmp_path: Path) -> None:
    import tracemalloc

    from benchmarks.bench_hostile import _big_pt2
    from tracepack.cli import main

    src = tmp_path / "big.pt2"
    _big_pt2(src, 96 << 20)  # the sample plus a 96 MiB stored weight member
    tracemalloc.start()
    try:
        assert main(["convert", str(src), str(tmp_path / "big.tpk")]) == 0
        assert main(["pack", str(src), str(tmp_path / "packed.pt2")]) == 0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40 << 20  # the program and its document, not the 96 MiB member
    with zipfile.ZipFile(tmp_path / "packed.pt2") as z:
        assert z.getinfo(f"{z.namelist()[0].split('/')[0]}/data/weights_big").file_size == 96 << 20


RELEASE_FLAT = ROOT / "tests/data/torch/releases/2.3/transformer.pt2"


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}  # zipfile checks each CRC


@pytest.mark.parametrize(("original", "aligned"), [(SAMPLE, True), (RELEASE_FLAT, False)])
def test_zip64_records_on_small_members_pack_and_unpack(tmp_path: Path, original: Path, aligned: bool) -> None:
    from tests.hostile.zip64 import write_zip64

    members = _members(original)
    src = tmp_path / "zip64.pt2"
    write_zip64(src, members.items(), aligned=aligned)
    with zipfile.ZipFile(src) as z:  # the reference reader takes the forced zip64 records
        assert z.testzip() is None
        assert all(i.extract_version == 45 for i in z.infolist())
    with open_archive_file(src) as archive:
        assert archive.names() == list(members)
        assert archive.torch_aligned() is aligned
        for name, data in members.items():
            assert archive.read(name) == data
    packed, back = tmp_path / "packed.pt2", tmp_path / "back.pt2"
    pt2.pack_pt2_file(src, packed)
    pt2.unpack_pt2_file(packed, back)
    assert _members(back) == members
    # The same bytes as packing the archive torch wrote: the zip64 records change nothing.
    pt2.pack_pt2_file(original, tmp_path / "direct.pt2")
    assert _members(packed) == _members(tmp_path / "direct.pt2")


def _flat_with_big_member(path: Path, size: int) -> dict[str, bytes]:
    """torch 2.3's flat archive plus a ``size``-byte stored member of zeros (a sparse hole)."""
    from tests.hostile.zip64 import write_zip64

    members = _members(RELEASE_FLAT)
    write_zip64(path, [*members.items(), ("weights_big.bin", size)], aligned=False)
    return members


def test_pack_of_a_flat_archive_streams_its_members(tmp_path: Path) -> None:
    import tracemalloc

    src = tmp_path / "flat.pt2"
    members = _flat_with_big_member(src, 96 << 20)
    packed, back = tmp_path / "packed.pt2", tmp_path / "back.pt2"
    tracemalloc.start()
    try:
        pt2.pack_pt2_file(src, packed)
        pt2.unpack_pt2_file(packed, back)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40 << 20  # the program and its document, not the 96 MiB member
    with zipfile.ZipFile(back) as z:
        assert z.getinfo("weights_big.bin").file_size == 96 << 20
        assert all(z.read(n) == data for n, data in members.items())
        with z.open("weights_big.bin") as f:  # read to its end: zipfile checks the CRC
            while chunk := f.read(16 << 20):
                assert not chunk.strip(b"\0")


def _raw(path: Path, name: str) -> bytes:
    """A member's bytes as stored (compressed), after its local header."""
    import struct

    with zipfile.ZipFile(path) as z, path.open("rb") as f:
        info = z.getinfo(name)
        f.seek(info.header_offset + 26)
        name_len, extra_len = struct.unpack("<HH", f.read(4))
        f.seek(info.header_offset + 30 + name_len + extra_len)
        return f.read(info.compress_size)


def test_a_compressed_member_of_a_flat_archive_is_copied_without_recompressing(tmp_path: Path) -> None:
    members = _members(RELEASE_FLAT)
    notes = " ".join(str(i * i) for i in range(20_000)).encode()
    src = tmp_path / "flat.pt2"
    with zipfile.ZipFile(src, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
        # Deflated at level 1: zipfile's default level (6) would give other bytes.
        z.writestr("extra_files/notes.txt", notes, compress_type=zipfile.ZIP_DEFLATED, compresslevel=1)
    packed = tmp_path / "packed.pt2"
    pt2.pack_pt2_file(src, packed)
    assert _raw(packed, "extra_files/notes.txt") == _raw(src, "extra_files/notes.txt")
    assert zlib.compress(notes, 6) != zlib.compress(notes, 1)
    with zipfile.ZipFile(packed) as z:
        assert z.getinfo("extra_files/notes.txt").compress_type == zipfile.ZIP_DEFLATED
        assert z.read("extra_files/notes.txt") == notes


def test_expand_of_a_packed_archive_streams_the_weights(tmp_path: Path) -> None:
    import tracemalloc

    from benchmarks.bench_hostile import _big_pt2
    from tracepack.cli import main

    src, packed = tmp_path / "big.pt2", tmp_path / "packed.pt2"
    _big_pt2(src, 96 << 20)
    pt2.pack_pt2_file(src, packed)
    assert main(["convert", str(packed), str(tmp_path / "doc.tpk")]) == 0
    out = tmp_path / "out.pt2"
    tracemalloc.start()
    try:
        assert main(["expand", str(tmp_path / "doc.tpk"), str(out), "--archive", str(packed)]) == 0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40 << 20
    original, expanded = _members(src), _members(out)
    assert expanded == original  # the program byte for byte, the weights whole


def test_pack_syncs_once_with_fsync_and_never_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from tracepack.cli import main

    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    assert main(["pack", "--fsync", str(SAMPLE), str(tmp_path / "a.pt2")]) == 0
    assert len(synced) == 1  # one fsync, at the end, however many members
    assert main(["pack", str(SAMPLE), str(tmp_path / "b.pt2")]) == 0
    assert main(["unpack", "--no-fsync", str(tmp_path / "b.pt2"), str(tmp_path / "c.pt2")]) == 0
    assert len(synced) == 1
    assert (tmp_path / "a.pt2").read_bytes() == (tmp_path / "b.pt2").read_bytes()
    assert _members(tmp_path / "c.pt2") == _members(SAMPLE)


def test_a_large_copied_member_keeps_its_offset_within_a_page(tmp_path: Path) -> None:
    """The kernel copies whole pages when source and output offsets agree modulo the page size;
    the data stays 64-byte aligned (torch's) and every byte comes through."""
    from benchmarks.bench_hostile import _big_pt2

    src, packed, back = tmp_path / "big.pt2", tmp_path / "packed.pt2", tmp_path / "back.pt2"
    _big_pt2(src, 2 << 20)
    pt2.pack_pt2_file(src, packed)
    pt2.unpack_pt2_file(packed, back)

    def data_offsets(path: Path) -> dict[str, int]:
        with zipfile.ZipFile(path) as z:
            return {
                i.filename.split("/", 1)[1]: i.header_offset + 30 + len(i.filename.encode()) + len(i.extra)
                for i in z.infolist()
            }

    orig, out = data_offsets(src), data_offsets(packed)
    big = "data/weights_big"
    assert orig[big] != out[big]  # packing moved it (model.json shrank) ...
    assert out[big] % 4096 == orig[big] % 4096  # ... but not within its page
    assert data_offsets(back)[big] % 4096 == orig[big] % 4096
    assert all(offset % 64 == 0 for offset in out.values())
    assert _members(back) == _members(src)
    pt2.pack_pt2_file(back, tmp_path / "again.pt2")
    assert (tmp_path / "again.pt2").read_bytes() == packed.read_bytes()


def _member_offset_past_2_63(data: bytes) -> bytes:
    """``data`` (a zip) with its first member's central entry pointing at offset 2**64 - 1 through a zip64
    extra field: a position no file has (zipfile reads it; seeking to it raises OverflowError)."""
    eocd = data.rindex(b"PK\x05\x06")
    at = struct.unpack_from("<I", data, eocd + 16)[0]  # the central directory's first entry
    name_len, extra_len = struct.unpack_from("<HH", data, at + 28)
    b = bytearray(data)
    struct.pack_into("<H", b, at + 30, extra_len + 12)
    struct.pack_into("<I", b, at + 42, 0xFFFFFFFF)
    end = at + 46 + name_len
    b[end:end] = struct.pack("<HHQ", 1, 8, 2**64 - 1)
    eocd = b.rindex(b"PK\x05\x06")
    struct.pack_into("<I", b, eocd + 12, struct.unpack_from("<I", b, eocd + 12)[0] + 12)
    return bytes(b)


def test_a_member_at_an_offset_past_2_63_is_one_line() -> None:
    """Found by the coverage-guided zip harness: OverflowError escaped from seeking to the member."""
    plain = io.BytesIO()  # Python's zipfile writes no zip64 end record here, unlike torch
    with zipfile.ZipFile(ROOT / "tests/data/torch/releases/2.13/dynamic.pt2") as z, zipfile.ZipFile(plain, "w") as w:
        for info in z.infolist():
            w.writestr(info.filename, z.read(info))
    data = _member_offset_past_2_63(plain.getvalue())
    with open_archive(data, source="far.pt2") as archive:
        assert not archive.torch_aligned()
        name = archive.names()[0]
        for read in (archive.read, archive.open_member, archive.member_file):
            with pytest.raises(LegacyFormatError) as info:
                read(name)
            assert "far.pt2" in str(info.value)
            assert "\n" not in str(info.value)
    with pytest.raises(LegacyFormatError, match=r"far\.pt2"):  # pack copies every member raw: it must find this one
        pt2.pack_pt2(data, source="far.pt2")
    import_archive("far.pt2", data)  # reads the program and the version only: the far member is never touched
