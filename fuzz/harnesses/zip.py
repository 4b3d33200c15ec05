"""The zip reader (:mod:`tracepack.io.zip`) and the archive rewriters built on it: every member read
whole, as a stream and in place; then ``pack`` and ``unpack`` (:mod:`tracepack.torch.pt2`), whose
output must read back with the members in the same order."""

from __future__ import annotations

import zipfile
from typing import Final

from fuzz.common import Finding, contract, small_archives, zip_mutator

TARGETS: Final = ("tracepack.io.zip", "tracepack.torch.pt2", "tracepack.torch.export.layouts")
DICT: Final = "zip.dict"
custom_mutator = zip_mutator


def _read_all(data: bytes) -> list[str]:
    from tracepack.io.zip import open_archive

    with open_archive(data, source="m.pt2") as archive:
        archive.torch_aligned()
        for name in archive.names():
            info = archive.info(name)
            archive.raw_data_offset(info)
            whole = archive.read(name)
            with archive.open_member(name) as f:
                streamed = f.read()
            if streamed != whole:
                raise Finding(f"member {name!r} reads differently as a stream")
            if info.compress_type == zipfile.ZIP_STORED and not info.flag_bits & 1:
                with archive.member_file(name) as f:
                    if f.read() != whole:
                        raise Finding(f"stored member {name!r} reads differently in place")
        return archive.names()


def test_one_input(data: bytes) -> None:
    from tracepack.torch import pt2

    names = contract(lambda: _read_all(data))
    packed = contract(lambda: pt2.pack_pt2(data, source="m.pt2"))
    if packed is None:
        return
    if len(packed) > 2 * len(data) + (1 << 20):  # members are copied, never expanded (a zip bomb)
        raise Finding(f"pack wrote {len(packed)} bytes from {len(data)}")
    unpacked = pt2.unpack_pt2(packed, source="packed.pt2")  # our own output must read back
    if names is not None and _read_all(unpacked) != names:
        raise Finding("pack + unpack changed the member list")


def seeds() -> list[tuple[str, bytes]]:
    return small_archives()
