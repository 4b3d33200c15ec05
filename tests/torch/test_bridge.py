"""tracepack.torch: ExportedProgram -> Document -> ExportedProgram, graph and node metadata equal."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracepack
from tests.torch.conftest import CORPUS, PT2, TORCH_MARKS
from tests.torch.test_pack import node_meta

torch = pytest.importorskip("torch")
import tracepack.torch as tt  # noqa: E402 - needs torch

pytestmark = TORCH_MARKS


def full_meta(program: object) -> list[tuple[str, object, object, object]]:
    return [
        (n.name, n.meta.get("source_fn_stack"), n.meta.get("torch_fn"), n.meta.get("custom"))
        for n in program.graph.nodes  # type: ignore[attr-defined]
    ]


@pytest.mark.parametrize("name", PT2)
@pytest.mark.parametrize("codec", ["msgpack", "flatbuffers-rows", "flatbuffers"])
def test_exported_program_round_trip(name: str, codec: str) -> None:
    ep = torch.export.load(CORPUS / name)
    doc = tt.to_document(ep)
    back = tt.from_document(tracepack.loads(tracepack.dumps(doc, codec=codec)), like=ep)
    assert str(back.graph) == str(ep.graph)
    assert node_meta(back) == node_meta(ep)
    assert full_meta(back) == full_meta(ep)
    assert back.graph_signature == ep.graph_signature
    assert tt.model_json(back) == tt.model_json(ep)


def test_round_trip_of_a_fresh_export_runs() -> None:
    class M(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.lin(x)) + 1.0

    torch.manual_seed(0)
    model = M().eval()
    x = torch.randn(2, 4)
    ep = torch.export.export(model, (x,))
    back = tt.from_document(tt.to_document(ep), like=ep)
    assert torch.equal(back.module()(x), model(x))
    zeros = tt.from_document(tt.to_document(ep))  # no weights given: zeros of the right shapes
    assert torch.equal(zeros.module()(x), torch.full((2, 3), 1.0))
    assert [n.meta.get("stack_trace") for n in back.graph.nodes] == [n.meta.get("stack_trace") for n in ep.graph.nodes]


def test_load_plain_and_missing(tmp_path: Path) -> None:
    ep = tt.load(CORPUS / "cnn.pt2")
    assert node_meta(ep) == node_meta(torch.export.load(CORPUS / "cnn.pt2"))
    with pytest.raises(tracepack.InputError, match="cannot open: No such file"):
        tt.load(tmp_path / "missing.pt2")
