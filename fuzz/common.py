"""What every harness shares: the contract, a document's answers, the .tpk fix-up, seed helpers."""

from __future__ import annotations

import io
import os
import random
import struct
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any, Final, TypeVar

ROOT: Final = Path(__file__).resolve().parents[1]
T = TypeVar("T")

__all__ = [
    "ROOT",
    "Finding",
    "Provider",
    "answers",
    "contract",
    "fix_tpk",
    "mutate_tpk",
    "lazy_answers",
    "scratch_file",
    "zip_members",
]


class Finding(AssertionError):
    """tracepack broke the contract without an exception of its own (a wrong answer, a bad message)."""


def contract(fn: Callable[[], T]) -> T | None:
    """``fn()``'s result, or None when tracepack refused the input with a one-line InputError.

    Every other exception (RecursionError, MemoryError, KeyError, a torch error...) propagates: that
    is a finding, and the fuzzer (or the regression test) reports it with its traceback."""
    from tracepack.errors import InputError

    try:
        return fn()
    except InputError as exc:
        text = str(exc)
        if not text or "\n" in text:
            raise Finding(f"error message is not one line: {text!r}") from None
        return None


def answers(doc: Any) -> list[Any]:
    """Everything a reader hands out about each node of an eager :class:`~tracepack.Document`, under one
    rendering budget (as the CLI's commands run)."""
    from tracepack.io import limits

    out: list[Any] = []
    with limits.rendering():
        for node in doc.nodes():
            out.append((node.name, node.target, node.stack_trace, node.module_stack, node.from_node))
            out.append((node.frames, node.modules, node.module_hierarchy, node.meta, node.inputs, node.outputs))
    return out


def lazy_answers(lz: Any) -> list[Any]:
    """The same answers from a :class:`~tracepack.lazy.LazyDocument`, node by node, and each node found
    again by its name."""
    from tracepack.io import limits

    out: list[Any] = []
    with limits.rendering():
        for i in range(len(lz)):
            node = lz.node(i)
            out.append((node.name, node.target, node.stack_trace, node.module_stack, node.from_node))
            out.append((node.frames, node.modules, node.module_hierarchy, node.meta, node.inputs, node.outputs))
            node.raw  # noqa: B018 - decoding it is the test
            lz.node(node.name)
    return out


_HEADER: Final = 48


def mutate_tpk(data: bytes, max_size: int, seed: int, fix_share: float) -> bytes:
    """libFuzzer's mutation of a ``.tpk``, then in ``fix_share`` of the cases its header made consistent
    (:func:`fix_tpk`), never longer than ``max_size`` (libFuzzer refuses a longer mutant and ends the run):
    where the fix grows it past that (a fresh block table), the unfixed mutant is kept."""
    import atheris

    mutant = bytes(atheris.Mutate(data, max_size))
    if random.Random(seed).random() < fix_share:
        fixed = bytearray(mutant)
        fix_tpk(fixed)
        if len(fixed) <= max_size:
            return bytes(fixed)
    return mutant


def fix_tpk(b: bytearray) -> None:
    """Make a mutated ``.tpk``'s header consistent again: payload length, raw length when uncompressed,
    payload CRC-32 and header CRC-32, so the mutant reaches the decoder (the careful attacker)."""
    if len(b) < _HEADER or b[:4] != b"\x89TPK":
        return
    hsize = struct.unpack_from("<H", b, 10)[0]
    start = hsize if _HEADER <= hsize <= len(b) else _HEADER
    payload = bytes(b[start:])
    from tracepack import container

    if struct.unpack_from("<H", b, 18)[0] & 1 and hasattr(container, "block_table"):
        # block checksums (flag bit 0): the payload is what the header declared, as far as it goes, and a
        # fresh block table of the old table's block size (16 KiB where unreadable) follows it
        declared = struct.unpack_from("<Q", b, 24)[0]
        payload = bytes(b[start : start + declared])
        at = start + declared + 4
        size = struct.unpack_from("<I", b, at)[0] if len(b) >= at + 4 else 0
        b[start:] = payload + container.block_table(payload, size if size in container.BLOCK_SIZES else 1 << 14)
    struct.pack_into("<Q", b, 24, len(payload))
    if b[17] == 0:
        struct.pack_into("<Q", b, 32, len(payload))
    struct.pack_into("<I", b, 40, zlib.crc32(payload))
    struct.pack_into("<I", b, 44, zlib.crc32(bytes(b[:44])))


_scratch: dict[str, Path] = {}


def scratch_file(name: str, data: bytes) -> Path:
    """``data`` written to a file of this process's own scratch folder (tmpfs where there is one).

    libFuzzer ends a process without Python's exit handlers, so each folder is named by its process
    id, and the first use in a process removes the folders of processes that are gone."""
    folder = _scratch.get("dir")
    if folder is None:
        import atexit
        import shutil

        shm = "/dev/shm"
        base = Path(shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else tempfile.gettempdir())
        root = base / "tracepack-fuzz-scratch"
        root.mkdir(exist_ok=True)
        for old in root.iterdir():
            if old.name.isdigit() and not _alive(int(old.name)):
                shutil.rmtree(old, ignore_errors=True)
        folder = _scratch["dir"] = root / str(os.getpid())
        folder.mkdir(exist_ok=True)
        atexit.register(shutil.rmtree, folder, True)
    path = folder / name
    path.write_bytes(data)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def zip_members(data: bytes) -> Iterator[tuple[zipfile.ZipInfo, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for info in z.infolist():
            yield info, z.read(info)


def rezip(members: list[tuple[zipfile.ZipInfo, bytes]]) -> bytes:
    """A zip of ``members`` with the same names, order and compression, CRCs and sizes recomputed."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for info, content in members:
            fresh = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            fresh.compress_type = info.compress_type
            fresh.extra = info.extra
            z.writestr(fresh, content)
    return out.getvalue()


@cache
def sample_doc(name: str = "dynamic") -> Any:
    """A small torch.export graph (torch 2.13's ``dynamic`` release sample) as a Document."""
    from tracepack.torch.export.model_json import import_model_json

    return import_model_json(release_member("2.13", f"{name}.pt2", "models/model.json"), source=f"{name}.json")


def release_member(release: str, file: str, suffix: str) -> bytes:
    """The member ending in ``suffix`` of a committed torch release sample."""
    data = (ROOT / "tests/data/torch/releases" / release / file).read_bytes()
    for info, content in zip_members(data):
        if info.filename.endswith(suffix):
            return content
    raise KeyError(suffix)


class Provider:
    """Typed values taken from the front of the input (what ``atheris.FuzzedDataProvider`` does, in plain
    Python, so that a saved input replays without atheris); past the end every value is its lowest."""

    __slots__ = ("at", "data")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def int(self, lo: int, hi: int) -> int:
        span = hi - lo + 1
        width = (span.bit_length() + 7) // 8
        chunk = self.data[self.at : self.at + width]
        self.at += width
        return lo + int.from_bytes(chunk, "little") % span

    def bool(self) -> bool:
        return self.int(0, 1) == 1

    def pick(self, items: Any) -> Any:
        return items[self.int(0, len(items) - 1)]

    def bytes(self, most: int) -> bytes:
        n = self.int(0, most)
        out = self.data[self.at : self.at + n]
        self.at += n
        return out

    def rest(self) -> bytes:
        out = self.data[self.at :]
        self.at = len(self.data)
        return out


def zip_mutator(data: bytes, max_size: int, seed: int) -> bytes:
    """Half the time libFuzzer's own mutation of the bytes; half the time one member's content mutated
    and the archive written again (CRCs, sizes and offsets right), so mutants reach the member's reader."""
    import random

    import atheris

    r = random.Random(seed)
    if r.random() < 0.5:
        try:
            members = list(zip_members(data))
        except Exception:
            members = []
        if members:
            i = r.randrange(len(members))
            info, content = members[i]
            members[i] = (info, atheris.Mutate(content, max(len(content) * 2, 64)))
            out = rezip(members)
            if len(out) <= max_size:
                return out
    return bytes(atheris.Mutate(data, max_size))


@cache
def small_archives() -> list[tuple[str, bytes]]:
    """Small committed archives of every kind: torch.export .pt2 in both layouts, TorchScript .pt and
    lite .ptl, a compressed one and one with zip64 records."""
    base = ROOT / "tests/data/torch/releases"
    out = [
        ("2.13-dynamic.pt2", (base / "2.13/dynamic.pt2").read_bytes()),
        ("2.8-dynamic.pt2", (base / "2.8/dynamic.pt2").read_bytes()),
        ("2.6-dynamic.pt2", (base / "2.6/dynamic.pt2").read_bytes()),
        ("2.13-script.pt", (base / "2.13/script.pt").read_bytes()),
        ("2.13-lite.ptl", (base / "2.13/lite.ptl").read_bytes()),
    ]
    members = list(zip_members(out[0][1]))
    deflated = io.BytesIO()
    with zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as z:
        for info, content in members:
            z.writestr(info.filename, content)
    out.append(("2.13-dynamic-deflated.pt2", deflated.getvalue()))
    forced = io.BytesIO()
    with zipfile.ZipFile(forced, "w") as z:
        for info, content in members:
            with z.open(zipfile.ZipInfo(info.filename, date_time=info.date_time), "w", force_zip64=True) as f:
                f.write(content)
    out.append(("2.13-dynamic-zip64.pt2", forced.getvalue()))
    return out


def conformance_vectors(*folders: str) -> list[tuple[str, bytes]]:
    """The conformance suite's ``.tpk`` vectors (``conformance/vectors/<valid|invalid>/<folder>/``): valid files
    and the damaged ones the specification says are refused, each a seed that starts near an edge."""
    base = ROOT / "conformance/vectors"
    return [
        (f"conformance-{p.parent.parent.name}-{p.parent.name}-{p.stem}", p.read_bytes())
        for folder in folders
        for p in sorted(base.glob(f"*/{folder}/*.tpk"))
    ]
