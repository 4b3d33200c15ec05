"""ExecuTorch ETRecords (a zip of edge programs and handle maps: :mod:`tracepack.torch.executorch.etrecord`)
as ``tracepack symbolicate`` opens them: every method imported, its handles and instructions answered.
Half the mutants change one member and write the zip again (:func:`fuzz.common.zip_mutator`)."""

from __future__ import annotations

from typing import Final

from fuzz.common import contract, zip_mutator
from fuzz.harnesses._executorch import SAMPLES, ask, open_artifact

TARGETS: Final = ("tracepack.torch.executorch.etrecord", "tracepack.runtime.symbols", "tracepack.runtime.describe")
DICT: Final = "executorch.dict"
custom_mutator = zip_mutator


def test_one_input(data: bytes) -> None:
    from tracepack.runtime.describe import describe_executorch

    contract(lambda: describe_executorch(data, source="m.etrecord"))
    syms = open_artifact("m.etrecord", data)
    if syms is not None:
        ask(syms)


def seeds() -> list[tuple[str, bytes]]:
    return [(p.name, p.read_bytes()) for p in sorted(SAMPLES.glob("*.etrecord"))]
