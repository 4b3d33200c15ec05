"""Members over 4 GiB, end to end (``make fuzz-big``; too big for ``make test``).

Builds, in a temporary folder, archives holding one stored member of ``--gib`` GiB of zeros (default
4.5: past zip64's 4 GiB line) at no disk cost (a sparse hole, :mod:`tests.hostile.zip64`), in both
``.pt2`` layouts, and runs the commands on them as a user would, each as its own process:

* ``convert`` (the program only is read);
* ``pack`` then ``unpack``: the member comes through whole (its CRC and size in the central
  directory, and every byte read back as zero), every other member byte for byte, and packing the
  unpacked archive again gives the packed one byte for byte;
* ``expand --archive`` of the packed archive: the original members back, the program byte for byte.

``upgrade`` is run on the package layout (streamed: the big member copied raw), and on a flat
archive whose ``serialized_state_dict.pt`` (a zip64 member) holds a weight of that size (a zip64
member of the nested ``torch.save`` archive): the upgrade writes it as a ``weight_<n>`` member of
its own, copied raw out of the nested archive. (The flat archive of the other commands has its
big member beside ``serialized_state_dict.pt``, which no torch writes: the flat upgrade refuses it.)

Every command's peak RSS (``wait4``) must stay within ``300 MB + 3x model.json`` and its exit
status be 0. Prints one line per command (time, peak RSS) and exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from benchmarks.bench_hostile import run_measured
from tests.hostile.zip64 import Data, write_zip64, zero_crc, zip64_parts

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src/tracepack/data/sample/tiny_transformer.pt2"
FLAT = ROOT / "tests/data/torch/releases/2.3/transformer.pt2"
BIG = "weights_big.bin"


class Failed(Exception):
    pass


def _run(argv: list[str], budget: int, label: str) -> None:
    elapsed, rss, code = run_measured([sys.executable, "-m", "tracepack", *argv])
    verdict = "ok" if code == 0 and rss <= budget else "FAILED"
    print(
        f"{label:<34} exit {code}  {elapsed:6.1f} s  peak RSS {rss / 2**20:7.1f} MB"
        f" (budget {budget / 2**20:.0f} MB)  {verdict}",
        flush=True,
    )
    if verdict != "ok":
        raise Failed(f"{label}: exit {code}, peak RSS {rss}")


def _members(path: Path, big: str) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist() if n != big}


def _check_big(path: Path, name: str, size: int, crc: int) -> None:
    """The member's central-directory entry, and its bytes as stored, all zeros."""
    with zipfile.ZipFile(path) as z, path.open("rb", buffering=0) as f:
        info = z.getinfo(name)
        if (info.file_size, info.compress_size, info.CRC, info.compress_type) != (size, size, crc, 0):
            raise Failed(f"{path.name}:{name}: {info.file_size} bytes, CRC {info.CRC:08x}")
        f.seek(info.header_offset + 26)
        n, e = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
        f.seek(info.header_offset + 30 + n + e)
        buf = bytearray(16 << 20)
        left = size
        while left:
            got = f.readinto(memoryview(buf)[: min(len(buf), left)])
            if not got or buf[:got].count(0) != got:
                raise Failed(f"{path.name}:{name}: not the member's bytes at {size - left}")
            left -= got


def run_layout(folder: Path, layout: str, size: int) -> None:
    original = PACKAGE if layout == "package" else FLAT
    with zipfile.ZipFile(original) as z:
        members = [(n, z.read(n)) for n in z.namelist()]
        top = z.namelist()[0].split("/")[0] + "/" if layout == "package" else ""
        program = sum(i.file_size for i in z.infolist() if i.filename.endswith(".json"))
    big = f"{top}data/{BIG}" if layout == "package" else BIG
    budget = 300 * 2**20 + 3 * program
    src = folder / f"{layout}.pt2"
    write_zip64(src, [*members, (big, size)], aligned=layout == "package")
    crc = zero_crc(size)
    originals = _members(src, big)
    packed, back, again = folder / "packed.pt2", folder / "back.pt2", folder / "again.pt2"
    if layout == "package":
        # upgrade imports torch (~300 MB): its budget is the same command on the sample alone + 32 MB
        small = folder / "small.pt2"
        _, base, _ = run_measured([sys.executable, "-m", "tracepack", "upgrade", "-f", str(original), str(small)])
        small.unlink(missing_ok=True)
        _run(["upgrade", "-f", str(src), str(again)], base + (32 << 20), f"{layout}: upgrade")
        _check_big(again, big, size, crc)
        again.unlink()
    _run(["convert", "-f", str(src), str(folder / "doc.tpk")], budget, f"{layout}: convert")
    _run(["pack", "-f", str(src), str(packed)], budget, f"{layout}: pack")
    _check_big(packed, big, size, crc)
    _run(["unpack", "-f", str(packed), str(back)], budget, f"{layout}: unpack")
    _check_big(back, big, size, crc)
    if _members(back, big) != originals:
        raise Failed(f"{layout}: unpack did not give the original members back")
    _run(["pack", "-f", str(back), str(again)], budget, f"{layout}: pack of the unpacked")
    if not _same_file(packed, again):
        raise Failed(f"{layout}: packing the unpacked archive gave other bytes")
    again.unlink()
    back.unlink()
    _run(["convert", "-f", str(packed), str(folder / "packed.tpk")], budget, f"{layout}: convert of the packed")
    out = folder / "expanded.pt2"
    _run(["expand", "-f", str(folder / "packed.tpk"), str(out), "--archive", str(packed)], budget, f"{layout}: expand")
    _check_big(out, big, size, crc)
    if _members(out, big) != originals:
        raise Failed(f"{layout}: expand did not give the original members back")
    out.unlink()
    packed.unlink()
    src.unlink()


#: A float32 element count no sample's weight has: its pickled form (BININT) is found and replaced.
_MARK = 0x0123457


def flat_with_big_weight(dst: Path, size: int) -> None:
    """The flat sample with a float32 weight ``big`` of ``size`` zero bytes in its state dict.

    torch.save writes the state dict with ``big`` of :data:`_MARK` elements; its element count in
    ``data.pkl`` (the storage's and the tensor's size, the same 4-byte BININT) is set to
    ``size // 4`` and its storage record becomes a hole of ``size`` bytes, the nested archive
    rewritten with zip64 records, as parts, stored in the outer one without being built."""
    import importlib
    import io
    import struct

    torch: Any = importlib.import_module("torch")  # the fuzz-big venv has torch; the type check may not

    n = size // 4
    assert n < 2**31, "the element count is a 4-byte BININT"
    with zipfile.ZipFile(FLAT) as z:
        members: list[tuple[str, Data]] = [(name, z.read(name)) for name in z.namelist()]
        state_dict = z.read("serialized_state_dict.pt")
    sd = torch.load(io.BytesIO(state_dict), weights_only=True)
    sd["big"] = torch.zeros(_MARK)
    saved = io.BytesIO()
    torch.save(sd, saved)
    old, new = b"J" + struct.pack("<i", _MARK), b"J" + struct.pack("<i", n)
    nested: list[tuple[str, Data]] = []
    with zipfile.ZipFile(saved) as z:
        for info in z.infolist():
            data = z.read(info)
            if info.filename.endswith("/data.pkl"):
                assert data.count(old) == 2, "the storage's and the tensor's element count"
                data = data.replace(old, new)
            nested.append((info.filename, size if info.file_size == 4 * _MARK else data))
    parts = zip64_parts(nested)
    write_zip64(
        dst, [(name, parts if name == "serialized_state_dict.pt" else data) for name, data in members], aligned=False
    )


def run_flat_upgrade(folder: Path, size: int) -> None:
    """``upgrade`` of a flat archive with a weight of ``size`` bytes: within 32 MB of the same
    command on the sample alone, the weight a member of its own, every byte zero."""
    src, small, out = folder / "flat-weight.pt2", folder / "small.pt2", folder / "upgraded.pt2"
    flat_with_big_weight(src, size)
    _, base, _ = run_measured([sys.executable, "-m", "tracepack", "upgrade", "-f", str(FLAT), str(small)])
    small.unlink(missing_ok=True)
    _run(["upgrade", "-f", str(src), str(out)], base + (32 << 20), "flat: upgrade, big weight")
    with zipfile.ZipFile(out) as z:
        big = max(z.infolist(), key=lambda i: i.file_size).filename
    if "/data/weights/weight_" not in big:
        raise Failed(f"flat: upgrade: the largest member is {big}, not a weight")
    _check_big(out, big, size, zero_crc(size))
    out.unlink()
    src.unlink()


def _same_file(a: Path, b: Path) -> bool:
    if a.stat().st_size != b.stat().st_size:
        return False
    with a.open("rb", buffering=0) as fa, b.open("rb", buffering=0) as fb:
        while True:
            x, y = fa.read(16 << 20), fb.read(16 << 20)
            if x != y:
                return False
            if not x:
                return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=4.5, help="size of the big member in GiB (default 4.5)")
    args = ap.parse_args(argv)
    size = int(args.gib * 2**30)
    with tempfile.TemporaryDirectory(prefix="tracepack-big-") as tmp:
        try:
            for layout in ("package", "flat"):
                run_layout(Path(tmp), layout, size)
            run_flat_upgrade(Path(tmp), size)
        except Failed as exc:
            print(f"FAILED: {exc}")
            return 1
    print(f"ok: members of {size:,} bytes streamed through every command, byte for byte")
    return 0


if __name__ == "__main__":
    sys.exit(main())
