"""The upgrade of an older torch release's ``.pt2`` (:func:`tracepack.torch.upgrade.upgrade_pt2`,
streamed, in memory; needs torch): one byte chooses the archive (torch 2.8's ``<top>/models/`` layout
or torch 2.6's flat one), the rest is the program put in it; the migration chain, the operator check
against the installed torch and the rewrite of every member must return or refuse."""

from __future__ import annotations

from typing import Final

from fuzz.common import contract
from fuzz.harnesses._torch import program_of, with_program

TARGETS: Final = ("tracepack.torch.upgrade", "tracepack.torch.export.upgrade", "tracepack.torch.export.layouts")
DICT: Final = "model_json.dict"
TORCH: Final = True
_OLD: Final = (("2.8", "dynamic"), ("2.6", "dynamic"), ("2.8", "cond"))


def test_one_input(data: bytes) -> None:
    from tracepack.torch.upgrade import upgrade_pt2

    if not data:
        return
    release, name = _OLD[data[0] % len(_OLD)]
    archive = contract(lambda: with_program(release, name, data[1:]))
    if archive is not None:
        contract(lambda: upgrade_pt2(archive, source=f"{name}.pt2"))


def seeds() -> list[tuple[str, bytes]]:
    return [(f"{release}-{name}", bytes([i]) + program_of(release, name)) for i, (release, name) in enumerate(_OLD)]
