"""Shared by the ExecuTorch harnesses: what ``tracepack symbolicate`` and ``annotate`` ask of a
symbolicator (:class:`tracepack.runtime.symbols.Symbolicator`) once the artifact is read."""

from __future__ import annotations

from functools import cache
from typing import Any

from fuzz.common import ROOT, contract, scratch_file

SAMPLES = ROOT / "tests/data/executorch"


def ask(symbolicators: list[Any]) -> None:
    """Every handle the document names, a few more, and the first instructions: each answered or refused."""
    from tracepack.io import limits
    from tracepack.runtime.logs import render_handle, render_instruction

    with limits.rendering():
        for sym in symbolicators:
            contract(lambda sym=sym: (sym.info, sym.kind, sym.method, sym.runtime_note))
            handles = contract(lambda sym=sym: sorted(sym.handle_nodes)[:8]) or []
            for handle in [*handles, 0, 1, 3]:
                answer = contract(lambda sym=sym, handle=handle: sym.handle(handle))
                if answer is not None:
                    contract(lambda answer=answer: (render_handle(answer), answer.to_json()))
            for chain, instruction in ((0, 0), (0, 1), (0, 5), (1, 0)):
                answer = contract(lambda sym=sym, c=chain, i=instruction: sym.instruction(c, i))
                if answer is not None:
                    contract(lambda answer=answer: (render_instruction(answer), answer.to_json()))


def open_artifact(name: str, data: bytes) -> list[Any] | None:
    from tracepack.runtime.artifacts import open_artifact

    path = scratch_file(name, data)
    return contract(lambda: open_artifact(str(path)))


@cache
def good_record() -> list[Any]:
    """The committed ETRecord's symbolicators: what an ETDump is annotated with."""
    from tracepack.runtime.artifacts import open_artifact

    return open_artifact(str(SAMPLES / "model.etrecord"))
