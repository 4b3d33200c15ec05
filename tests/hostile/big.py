"""Members over 4 GiB, end to end (``make fuzz-big``; too big for ``make test``).

Builds, in a temporary folder, archives holding one stored member of ``--gib`` GiB of zeros (default
4.5: past zip64's 4 GiB line) at no disk cost (a sparse hole, :mod:`tests.hostile.zip64`), in both
``.pt2`` layouts, and runs the commands on them as a user would, each as its own process:

* ``convert`` (the program only is read);
* ``pack`` then ``unpack``: the member comes through whole (its CRC and size in the central
  directory, and every byte read back as zero), every other member byte for byte, and packing the
  unpacked archive again gives the packed one byte for byte;
* ``expand --archive`` of the packed archive: the original members back, the program byte for byte.

``upgrade`` is run on the package layout (streamed: the big member copied raw); the flat sample's
big member is not one torch 2.1-2.7 writes (it sits beside ``serialized_state_dict.pt``, not
inside), which the streamed flat upgrade refuses, so it is not run there.

Every command's peak RSS (``wait4``) must stay within ``300 MB + 3x model.json`` and its exit
status be 0. Prints one line per command (time, peak RSS) and exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import zipfile
from pathlib import Path

from benchmarks.bench_hostile import run_measured
from tests.hostile.zip64 import write_zip64, zero_crc

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
        except Failed as exc:
            print(f"FAILED: {exc}")
            return 1
    print(f"ok: members of {size:,} bytes streamed through every command, byte for byte")
    return 0


if __name__ == "__main__":
    sys.exit(main())
