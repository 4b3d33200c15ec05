"""``tracepack.torch.load``'s JSON path (needs torch): the input is the program (``model.json``) of the
committed torch 2.13 ``dynamic`` archive, whose weights stay; it must load into an ExportedProgram
or be refused. torch's own errors (its deserializer's) must come out as InputError naming the place."""

from __future__ import annotations

import io
from typing import Final

from fuzz.common import contract
from fuzz.harnesses._torch import program_of, with_program

TARGETS: Final = ("tracepack.torch.loader", "tracepack.torch.deserializer", "tracepack.torch.serde")
DICT: Final = "model_json.dict"
TORCH: Final = True


def test_one_input(data: bytes) -> None:
    import tracepack.torch

    archive = contract(lambda: with_program("2.13", "dynamic", data))
    if archive is not None:
        contract(lambda: tracepack.torch.load(io.BytesIO(archive)))


def seeds() -> list[tuple[str, bytes]]:
    return [("2.13-dynamic", program_of("2.13", "dynamic"))]
