"""Shared by the harnesses that need torch: a program (``model.json`` text) put into a committed
archive of a given torch release in place of its own (:func:`tracepack.torch.pt2.replace_program`:
the layout, alignment and every other member kept)."""

from __future__ import annotations

from functools import cache

from fuzz.common import ROOT

ARCHIVES = (("2.13", "dynamic"), ("2.8", "dynamic"), ("2.6", "dynamic"))


@cache
def _archive(release: str, name: str) -> bytes:
    return (ROOT / "tests/data/torch/releases" / release / f"{name}.pt2").read_bytes()


def with_program(release: str, name: str, program: bytes) -> bytes:
    from tracepack.io.zip import open_archive
    from tracepack.torch import pt2

    with open_archive(_archive(release, name), source=f"{name}.pt2") as archive:
        return pt2.replace_program(archive, program)


def program_of(release: str, name: str) -> bytes:
    from tracepack.io.zip import open_archive
    from tracepack.torch import pt2

    with open_archive(_archive(release, name), source=f"{name}.pt2") as archive:
        return pt2.read_program(archive)[1]
