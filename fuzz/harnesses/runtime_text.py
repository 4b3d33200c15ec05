"""The text inputs of the runtime commands, whose readers are tracepack's own: a Chrome trace that
``tracepack annotate`` reads (:func:`tracepack.runtime.profile.read_chrome_trace` and the annotation, its
count and ``--by module`` table, with the committed ETRecord, ``.pt2`` and ``.pte``), and a log that
``tracepack symbolicate`` explains (:func:`tracepack.runtime.logs.symbolicate_lines`, with the ETRecord,
the ``.pte`` and the lite-interpreter ``.ptl``). The first byte
chooses: even a trace, odd a log."""

from __future__ import annotations

from functools import cache
from typing import Any, Final

from fuzz.common import Finding, contract
from fuzz.harnesses._executorch import SAMPLES, good_record

TARGETS: Final = ("tracepack.runtime.profile", "tracepack.runtime.logs")


@cache
def _artifacts(*names: str) -> list[list[Any]]:
    from tracepack.runtime.artifacts import open_artifact

    return [good_record(), *(open_artifact(str(SAMPLES / name)) for name in names)]


def _trace(data: bytes) -> None:
    from tracepack.runtime.profile import (
        annotate_chrome,
        annotated,
        dumps,
        module_summary,
        nothing_annotated,
        read_chrome_trace,
        render_summary,
    )
    from tracepack.runtime.symbols import pick

    value = contract(lambda: read_chrome_trace(data, source="p.json"))
    if value is None:
        return
    for syms in _artifacts("profile_model.pt2", "model.pte"):
        trace = contract(lambda syms=syms: annotate_chrome(value, syms, source="p.json"))
        if trace is None:
            continue
        n = annotated(trace)
        if len(trace["traceEvents"]) != len(value["traceEvents"] if isinstance(value, dict) else value):
            raise Finding("the annotated trace has another number of events")
        contract(lambda trace=trace: (dumps(trace), render_summary(module_summary(trace))))
        if not n:
            why = contract(
                lambda trace=trace, syms=syms: nothing_annotated(
                    trace, pick(syms, None), profile="p.json", artifact="a", etdump=False
                )
            )
            if why is not None and (not why or "\n" in why):
                raise Finding(f"the reason nothing was annotated is not one line: {why!r}")


def _log(data: bytes) -> None:
    from tracepack.io import limits
    from tracepack.runtime.logs import find_references, symbolicate_lines

    lines = data.decode("utf-8", "replace").splitlines()
    with limits.rendering():
        for syms in _artifacts("model.pte", "mobile.ptl"):
            out = contract(lambda syms=syms: list(symbolicate_lines(lines, syms, records=[])))
            # a line without a reference passes through as it is (one with a reference may be rewritten:
            # torch's own sentence for a lite-interpreter handle)
            if out and lines and not find_references(lines[0]) and out[0] != lines[0]:
                raise Finding("a line without a reference did not pass through")


def test_one_input(data: bytes) -> None:
    if not data:
        return
    if data[0] % 2 == 0:
        _trace(data[1:])
    else:
        _log(data[1:])


def seeds() -> list[tuple[str, bytes]]:
    out = [(f"trace-{p.name}", b"\x00" + p.read_bytes()) for p in sorted(SAMPLES.glob("profile_trace*.json"))]
    out += [(f"log-{p.name}", b"\x01" + p.read_bytes()) for p in sorted(SAMPLES.glob("*.log"))]
    out += [(f"log-{p.name}", b"\x01" + p.read_bytes()) for p in sorted(SAMPLES.glob("mobile*_error.txt"))]
    return out
