"""torch.export ``model.json`` import (:func:`~tracepack.torch.export.model_json.import_model_json`),
without torch: accepted text must come back byte for byte from the export (never silently changed)."""

from __future__ import annotations

from typing import Final

from fuzz.common import Finding, answers, contract

TARGETS: Final = (
    "tracepack.torch.export.model_json",
    "tracepack.torch.export.values",
    "tracepack.torch.export.node_names",
    "tracepack.builder",
    "tracepack.traces",
    "tracepack.io.guard",
)
DICT: Final = "model_json.dict"


def test_one_input(data: bytes) -> None:
    from tracepack.torch.export.model_json import export_model_json, import_model_json

    doc = contract(lambda: import_model_json(data, source="model.json"))
    if doc is None:
        return
    contract(lambda: answers(doc))
    back = export_model_json(doc)
    if back != data:
        at = next((i for i, (a, b) in enumerate(zip(back, data, strict=False)) if a != b), min(len(back), len(data)))
        raise Finding(f"accepted model.json comes back different from byte {at}: {data[at - 20 : at + 20]!r}")


def seeds() -> list[tuple[str, bytes]]:
    from fuzz.common import ROOT, release_member

    out = []
    for release in ("2.13", "2.8", "2.10"):
        for name in ("dynamic", "cond", "mlp"):
            out.append((f"{release}-{name}", release_member(release, f"{name}.pt2", "models/model.json")))
    for release in ("2.3", "2.6"):
        out.append((f"{release}-dynamic", release_member(release, "dynamic.pt2", "serialized_exported_program.json")))
    out.append(("small-graph", (ROOT / "fuzz/crafted/small_graph.json").read_bytes()))
    return out
