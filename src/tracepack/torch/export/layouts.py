"""Where a ``.pt2`` keeps its program: the two archive layouts torch releases wrote.

``flat`` (torch 2.1-2.7)
    ``torch.export.save`` wrote the zip with Python's ``zipfile``, every member at the
    root: ``serialized_exported_program.json`` (the program), ``serialized_state_dict.pt``
    (``.json`` in 2.1/2.2, a ``torch.save`` pickle either way), ``serialized_constants.pt``,
    ``serialized_example_inputs.pt`` (2.3+), ``version`` and ``constants``/``extra_files``.
``package`` (torch 2.8+)
    ``torch.export.pt2_archive`` writes with torch's ``PyTorchStreamWriter`` (64-byte aligned,
    one top folder): ``<top>/models/<model>.json`` for every program, weights in ``data/``,
    ``archive_format``, ``byteorder`` and ``version`` files.

:func:`programs` finds the programs of either layout; :func:`rewrite_to` writes an archive back
in its own layout, every member not rewritten copied raw (streamed: weights are never held in
memory), so reading and rewriting a program member keeps every other byte.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import IO, Literal

from tracepack.io.zip import Archive, ArchiveWriter, Member

__all__ = ["FLAT_PROGRAM", "Program", "layout_of", "programs", "rewrite", "rewrite_to", "side_member"]

#: The program member of a flat (torch 2.1-2.7) archive.
FLAT_PROGRAM = "serialized_exported_program.json"
#: The weights, constants and example inputs of a flat archive, by the name torch used.
FLAT_STATE_DICT = ("serialized_state_dict.pt", "serialized_state_dict.json")
FLAT_CONSTANTS = "serialized_constants.pt"
FLAT_EXAMPLE_INPUTS = "serialized_example_inputs.pt"
_MODEL = re.compile(r"models/([^/]+)\.json")

Layout = Literal["flat", "package"]


@dataclass(frozen=True, slots=True)
class Program:
    """One program of an archive: its member, its model name and the archive's layout."""

    member: str
    model: str
    layout: Layout


def layout_of(archive: Archive) -> Layout | None:
    """``"flat"``, ``"package"`` or ``None`` (not a ``.pt2`` layout)."""
    names = archive.names()
    if archive.top is None and FLAT_PROGRAM in names:
        return "flat"
    if archive.top is not None and any(_MODEL.fullmatch(archive.relative(n)) for n in names):
        return "package"
    return None


def programs(archive: Archive) -> list[Program]:
    """Every program of the archive, in archive order (a flat archive has one, ``model``)."""
    layout = layout_of(archive)
    if layout == "flat":
        return [Program(FLAT_PROGRAM, "model", "flat")]
    out = []
    if layout == "package":
        for name in archive.names():
            match = _MODEL.fullmatch(archive.relative(name))
            if match is not None:
                out.append(Program(name, match.group(1), "package"))
    return out


def side_member(archive: Archive, folder: str, name: str) -> str:
    """The full name of a member tracepack adds (``tracepack/<model>.tpk``): below the top folder
    of a package archive, at the root of a flat one."""
    return f"{archive.top}/{folder}{name}" if archive.top is not None else f"{folder}{name}"


def rewrite(archive: Archive, members: Iterable[tuple[Member | str, bytes]], *, deflate: Collection[str] = ()) -> bytes:
    """:func:`rewrite_to` into bytes."""
    out = io.BytesIO()
    rewrite_to(archive, out, members, deflate=deflate)
    return out.getvalue()


def rewrite_to(
    archive: Archive,
    out: IO[bytes],
    members: Iterable[tuple[Member | str, bytes | None]],
    *,
    deflate: Collection[str] = (),
) -> None:
    """Write ``members`` to ``out`` as the archive was written: torch-aligned, or plain ``zipfile``.

    A member given with ``None`` is copied from ``archive`` under its name, raw (its stored or
    compressed bytes as they are, never whole in memory: weights stream through). A member given
    with bytes is written: compressed if named in ``deflate``; in a flat archive, stored as before
    (its program, which torch always stored, and a new member, given by name, are stored)."""
    aligned = archive.torch_aligned()
    present = set(archive.names())
    with ArchiveWriter(out, aligned=aligned) as w:
        for given, data in members:
            name = given.name if isinstance(given, Member) else given
            if data is None:
                w.copy(archive, name, given if isinstance(given, Member) else None)
            elif name in deflate:
                w.add(given, data, deflate=True)
            elif aligned:
                w.add(given, data)
            else:
                member = given if isinstance(given, Member) else Member(given, (1980, 1, 1, 0, 0, 0), 0o644 << 16, 0)
                stored = name == FLAT_PROGRAM or name not in present
                w.add(member, data, compress_type=zipfile.ZIP_STORED if stored else archive.compress_type(name))
