"""ExecuTorch ETDump profiles (:func:`tracepack.torch.executorch.etdump.read_etdump`, a FlatBuffer read
without ExecuTorch), described and annotated with the committed ETRecord as ``tracepack annotate``
does."""

from __future__ import annotations

from typing import Final

from fuzz.common import contract
from fuzz.harnesses._executorch import SAMPLES, good_record

TARGETS: Final = ("tracepack.torch.executorch.etdump", "tracepack.runtime.profile", "tracepack.runtime.describe")
DICT: Final = "executorch.dict"


def test_one_input(data: bytes) -> None:
    from tracepack.io import limits
    from tracepack.runtime.describe import describe_executorch, render_description
    from tracepack.runtime.profile import annotate_etdump, dumps, module_summary, render_summary
    from tracepack.torch.executorch.etdump import read_etdump

    info = contract(lambda: describe_executorch(data, source="m.etdp"))
    if info is not None:
        contract(lambda: render_description(info))
    dump = contract(lambda: read_etdump(data, source="m.etdp"))
    if dump is None:
        return
    with limits.rendering():
        for method in (None, "forward"):
            trace = contract(lambda method=method: annotate_etdump(dump, good_record(), method=method))
            if trace is not None:
                contract(lambda trace=trace: (dumps(trace), render_summary(module_summary(trace))))


def seeds() -> list[tuple[str, bytes]]:
    return [(p.name, p.read_bytes()) for p in sorted(SAMPLES.glob("*.etdp"))]
