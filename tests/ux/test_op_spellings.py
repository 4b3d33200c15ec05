"""``nodes --op``, ``tracepack.query`` and ``annotate`` take an op as any torch tool prints it.

The references are torch's own spellings: the op names of a real torch.profiler trace of the exported
program (``tests/data/executorch/profile_trace.json``, with ``profile_model.pt2``), and, with torch
installed, the names torch.profiler, ``torch.jit.export_opnames`` and ``str``/``repr``/``_schema`` of
the overloads print in this process.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tracepack
from tests.executorch.helpers import DATA as ET_DATA
from tracepack.analysis.ops import op_matches, op_words, profiler_name, same_op
from tracepack.cli import main
from tracepack.query import NodeFilter, find_nodes
from tracepack.runtime.artifacts import open_artifact
from tracepack.runtime.profile import annotate_chrome

MODEL = ET_DATA / "profile_model.pt2"
TRACE = ET_DATA / "profile_trace.json"
PLAIN = ET_DATA / "profile_trace_plain.json"

_word = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
_overload = st.sampled_from(["default", "Tensor", "Scalar", "out", "int", "self"])


def _spellings(ns: str, name: str, overload: str) -> list[str]:
    """Every way torch tools print the overload ``ns.name.overload``."""
    return [
        f"torch.ops.{ns}.{name}.{overload}",
        f"{ns}.{name}.{overload}",
        f"{ns}.{name}",
        f"{ns}::{name}",
        f"{ns}::{name}.{overload}",
        f"<OpOverload(op='{ns}.{name}', overload='{overload}')>",
        f"<OpOverloadPacket(op='{ns}.{name}')>",
        f"{ns}::{name}.{overload}(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
        f"<EdgeOpOverload: {ns}.{name}.{overload}>: schema = {ns}::{name}.{overload}(Tensor self) -> Tensor",
        name,
    ]


@given(_word, _word, _overload, _word)
def test_every_spelling_matches_its_op_and_no_other(ns: str, name: str, overload: str, other: str) -> None:
    target = f"torch.ops.{ns}.{name}.{overload}"
    for spelling in _spellings(ns, name, overload):
        assert op_matches(spelling, target), spelling
        assert same_op(spelling, target), spelling
        assert NodeFilter(op=spelling)._op_matches(target)
    if other not in (name, ns, overload, "torch", "ops"):
        assert not op_matches(f"{ns}::{other}", target)
        assert not op_matches(other, target)
        assert not same_op(f"{ns}::{other}", target)
    assert not op_matches(name + "x", target)  # a longer word is another op (linear vs linear_backward)
    assert not op_matches(name[:-1], target) or name[:-1] in (ns, overload, "torch", "ops", "")
    assert profiler_name(target) == f"{ns}::{name}"


def test_overloads_are_told_apart() -> None:
    assert same_op("aten::add.Tensor", "torch.ops.aten.add.Tensor")
    assert not same_op("aten::add.Tensor", "torch.ops.aten.add.Scalar")
    assert same_op("aten::add", "torch.ops.aten.add.Scalar")
    assert not op_matches("aten::add.Tensor", "torch.ops.aten.add.Scalar")
    assert not op_matches("aten::add", "torch.ops.aten.add_.Tensor")
    assert op_words("aten::add.Tensor(Tensor self) -> Tensor") == ("aten", "add", "Tensor")
    assert profiler_name("_operator.getitem") == "_operator.getitem"
    assert profiler_name("torch.ops.higher_order.cond") == "higher_order::cond"


def _profiled_ops() -> set[str]:
    """The op names of the real torch.profiler trace (``aten::linear``...)."""
    events = json.loads(TRACE.read_text())["traceEvents"]
    return {e["name"] for e in events if e.get("cat") == "cpu_op" and "::" in e["name"]}


def test_the_profilers_names_find_the_nodes_that_ran_them(capsys: pytest.CaptureFixture[str]) -> None:
    doc = tracepack.load(MODEL)
    names = _profiled_ops()
    assert {"aten::linear", "aten::layer_norm", "aten::embedding", "aten::relu"} <= names
    found_any = 0
    for name in sorted(names):
        ns, op = name.split("::")
        expected = [n.name for n in doc.nodes() if re.fullmatch(rf"torch\.ops\.{ns}\.{op}\.\w+", n.target)]
        got = [r.name for r in find_nodes(doc, NodeFilter(op=name))]
        assert got == expected, name
        found_any += bool(got)
        assert main(["nodes", str(MODEL), "--op", name]) == 0
        out, err = capsys.readouterr()
        assert [line.split("\t")[0] for line in out.splitlines()] == expected
        assert ("no op" in err) == (not expected)  # a profiler name of an op the graph does not have: said so
    assert found_any >= 5


def test_the_cli_names_what_it_did_not_find_in_the_profilers_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nodes", str(MODEL), "--op", "aten::linaer"]) == 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("tracepack: ")
    assert err.count("\n") == 0
    assert "no op 'aten::linaer' (did you mean 'aten::linear'" in err
    assert main(["nodes", str(MODEL), "--op", "aten::linear.default"]) == 0
    out, err = capsys.readouterr()
    assert out
    assert not err


def _respell(trace: dict[str, Any], spell: Any) -> dict[str, Any]:
    events = [dict(e, name=spell(e["name"])) if "::" in str(e.get("name")) else e for e in trace["traceEvents"]]
    return {**trace, "traceEvents": events}


def test_annotate_maps_events_spelled_with_overloads_to_the_same_nodes() -> None:
    (sym,) = open_artifact(str(MODEL))
    plain = json.loads(PLAIN.read_text())
    base = annotate_chrome(plain, [sym])
    overloads = {profiler_name(n.target): n.target.split(".")[-1] for n in sym.doc.nodes() if "." in n.target}
    spelled = annotate_chrome(_respell(plain, lambda n: f"{n}.{overloads.get(n, 'default')}"), [sym])

    def nodes(trace: dict[str, Any]) -> list[Any]:
        return [(e.get("args") or {}).get("node") for e in trace["traceEvents"]]

    assert sum(1 for n in nodes(base) if n) >= 10
    assert nodes(spelled) == nodes(base)


@pytest.mark.torch
def test_torchs_own_printed_names_find_the_exported_nodes(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)
            self.norm = torch.nn.LayerNorm(8)

        def forward(self, x: Any) -> Any:
            return torch.relu(self.norm(self.fc(x))) + x * 2

    net = Net().eval()
    x = torch.randn(2, 8)
    program = torch.export.export(net, (x,))
    path = tmp_path / "net.pt2"
    torch.export.save(program, path)
    doc = tracepack.load(path)
    targets = {n.target for n in doc.nodes()}
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        program.module()(x)
    printed = {e.key for e in prof.key_averages() if e.key.startswith("aten::")}
    graph_ops = {profiler_name(t) for t in targets}
    assert {"aten::linear", "aten::layer_norm", "aten::relu", "aten::add", "aten::mul"} <= printed & graph_ops
    for name in printed & graph_ops:
        assert list(find_nodes(doc, NodeFilter(op=name))), name
    for node in program.graph.nodes:  # str(), repr() and the schema of each overload, as torch prints them
        if node.op != "call_function" or not hasattr(node.target, "_schema"):
            continue
        for spelling in (str(node.target), repr(node.target), str(node.target._schema)):
            rows = [r.name for r in find_nodes(doc, NodeFilter(op=spelling))]
            assert node.name in rows, spelling
    with warnings.catch_warnings():  # torch.jit is deprecated (still what mobile models are made with)
        warnings.simplefilter("ignore")
        scripted = torch.jit.trace(net, x)
        opnames = set(torch.jit.export_opnames(scripted))  # the lite interpreter's names: aten::add.Tensor ...
    assert any("." in n for n in opnames)
    for name in opnames:
        hits = [t for t in targets if op_matches(name, t)]
        assert all(same_op(name, t) for t in hits)
        if any(same_op(name, t) for t in targets):
            assert hits, name
