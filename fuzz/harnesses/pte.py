"""ExecuTorch ``.pte`` programs (:func:`tracepack.torch.executorch.pte.read_pte`, a FlatBuffer read
without ExecuTorch) as ``tracepack symbolicate`` opens them: every method a document, its handles and
instructions answered."""

from __future__ import annotations

from typing import Final

from fuzz.common import contract
from fuzz.harnesses._executorch import SAMPLES, ask, open_artifact

TARGETS: Final = ("tracepack.torch.executorch.pte", "tracepack.runtime.symbols", "tracepack.runtime.artifacts")
DICT: Final = "executorch.dict"


def test_one_input(data: bytes) -> None:
    from tracepack.runtime.describe import describe_executorch

    contract(lambda: describe_executorch(data, source="m.pte"))
    syms = open_artifact("m.pte", data)
    if syms is not None:
        ask(syms)


def seeds() -> list[tuple[str, bytes]]:
    return [(p.name, p.read_bytes()) for p in sorted(SAMPLES.glob("*.pte"))]
