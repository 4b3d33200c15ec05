"""The defaults' figures the README and docs/size.md quote are the bench's: ``benchmarks/results/defaults.json``
is what ``python -m benchmarks.run defaults --record`` wrote (the bench, section ``defaults``, fails when a
later run's sizes differ from it), and the text is computed here from that record, so a figure typed from
memory, or left behind when the record is redone, fails.

The real models (torch, timm, transformers in a venv of their own) and the 10k-node ladder are too slow
to make in a test; what the tests can compute themselves (the sample's ratio, what convert prints) is in
test_readme_facts.py.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass
from typing import Any

import pytest

from benchmarks.bench_defaults import GEOMEAN_TARGET, MODEL_TARGET
from benchmarks.bench_sizes import LADDER
from tests.readme.transcript import ROOT

RECORD = ROOT / "benchmarks" / "results" / "defaults.json"
_MODEL_ROW = re.compile(r"^(real|ladder) (\S+) \((\d+) nodes\): defaults vs zstd-19 model\.json$")


@dataclass(frozen=True)
class Model:
    name: str
    nodes: int
    ratio: float
    row: dict[str, Any]


def _rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(RECORD.read_text(encoding="utf-8"))
    return rows


def _models(label: str) -> list[Model]:
    out = []
    for row in _rows():
        m = _MODEL_ROW.match(row["name"])
        if m and m.group(1) == label:
            out.append(Model(m.group(2), int(m.group(3)), row["value"] / row["baseline"], row))
    return out


def _row(name: str) -> dict[str, Any]:
    (row,) = [r for r in _rows() if r["name"] == name]
    return row


def _geo(models: list[Model]) -> float:
    return math.exp(sum(math.log(m.ratio) for m in models) / len(models))


def _text(path: str) -> str:
    return " ".join((ROOT / path).read_text(encoding="utf-8").split())


def _span(values: list[float], digits: int = 2) -> str:
    """``0.52x-0.59x`` (or ``0.30x`` when both ends print alike)."""
    lo, hi = f"{min(values):.{digits}f}x", f"{max(values):.{digits}f}x"
    return lo if lo == hi else f"{lo}-{hi}"


def _nodes(values: list[int]) -> str:
    lo, hi = f"{min(values):,}", f"{max(values):,}"
    return lo if lo == hi else f"{lo}-{hi}"


def test_the_record_is_the_full_sets() -> None:
    """18 real models (the ones scripts/torch/real_models.py exports) and the 14 ladder rungs."""
    tree = ast.parse((ROOT / "scripts" / "torch" / "real_models.py").read_text(encoding="utf-8"))
    (models,) = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "MODELS"
    ]
    assert isinstance(models, ast.Dict)
    exported = {k.value for k in models.keys if isinstance(k, ast.Constant)}
    assert len(exported) == 18
    assert {m.name for m in _models("real")} == exported
    assert sorted(m.name for m in _models("ladder")) == sorted(LADDER)


@pytest.mark.parametrize("label", ["real", "ladder"])
def test_the_record_is_consistent(label: str) -> None:
    """Each row's ratio and verdict are its sizes', the geometric mean row is the models' mean."""
    models = _models(label)
    for m in models:
        assert m.row["unit"] == "B"
        assert m.row["target"] == MODEL_TARGET
        assert math.isclose(m.row["ratio"], m.ratio)
        assert m.row["ok"] == (m.ratio <= MODEL_TARGET)
    geo = _row(f"{label}: geometric mean of defaults over {len(models)} models")
    assert math.isclose(geo["value"], _geo(models), rel_tol=1e-12)
    assert geo["target"] == GEOMEAN_TARGET
    assert geo["ok"] == (geo["value"] <= GEOMEAN_TARGET)
    assert geo["note"] == f"worst {max(m.ratio for m in models):.3f}x"


def _defaults_sentences() -> list[str]:
    """What the README says of the record, computed from it."""
    real, ladder = _models("real"), _models("ladder")
    by_rung: dict[str, list[Model]] = {}
    for m in ladder:
        by_rung.setdefault(m.name.removesuffix("_dyn"), []).append(m)
    small = [m for m in ladder if m.nodes < 70]
    rungs = [f"{_span([m.ratio for m in small])} below 70 nodes"]
    for group in sorted(by_rung.values(), key=lambda g: min(m.nodes for m in g)):
        if min(m.nodes for m in group) >= 70:
            rungs.append(f"{_span([m.ratio for m in group])} at {_nodes([m.nodes for m in group])}")
    ladder_text = ", ".join(rungs[:-1]) + f" and {rungs[-1]} nodes"
    nodes = [m.nodes for m in ladder]
    over = [m.ratio for m in real if m.ratio > MODEL_TARGET]
    ladder_over = [m for m in ladder if m.ratio > MODEL_TARGET]
    assert all(m.nodes < 70 for m in ladder_over)  # what the README says of them
    assert _geo(ladder) <= GEOMEAN_TARGET  # the ladder's mean meets it in every sentence below
    (big,) = [m for m in ladder if m.name == "size_10k"]
    speed = _row("convert size_10k: defaults vs --level 3 (before)")
    files = re.fullmatch(r"CPU time, whole command; files (\d+) B vs (\d+) B at level 3", speed["note"])
    assert files is not None
    return [
        f"the geometric mean is {_geo(real):.3f}x and the worst {max(m.ratio for m in real):.3f}x; on the size "
        f"ladder ({min(nodes):,} to {max(nodes):,}-node exports, static and dynamic) {_geo(ladder):.3f}x, "
        f"{ladder_text}.",
        (
            f"are met by the ladder's mean only: {len(over)} real models ({_span(over, 3)}), the real set's mean and "
            f"{len(ladder_over)} of the {len(small)} ladder rungs under 70 nodes miss them"
            if over
            else f"are met by the ladder's mean and by every real model (none above 0.5x); the real set's mean and "
            f"{len(ladder_over)} of the {len(small)} ladder rungs under 70 nodes miss them"
            if _geo(real) > GEOMEAN_TARGET
            else f"are met by both means and by every real model (none above 0.5x); {len(ladder_over)} of the "
            f"{len(small)} ladder rungs under 70 nodes miss them"
        ),
        f"Converting the {big.nodes:,}-node "
        f"program takes {speed['value'] / speed['baseline']:.2f}x the CPU time of `--level 3` (the default before)",
        f"for a file {int(files.group(1)) / int(files.group(2)):.2f}x its size (best of 3 runs",
    ]


@pytest.mark.parametrize("index", range(4))
def test_the_readme_defaults_paragraph_is_the_record(index: int) -> None:
    assert _defaults_sentences()[index] in _text("README.md")


def test_the_readme_10k_figure_is_the_record() -> None:
    """The why section's and the columnar codec's 10k-node figure: the ladder's size_10k, as written by default."""
    (big,) = [m for m in _models("ladder") if m.name == "size_10k"]
    assert big.row["note"].startswith("columnar, zstd -19, dictionary ")
    readme = _text("README.md")
    assert (
        f"on a {big.nodes // 1000}k-node model, what `tracepack convert` writes by default (columnar + zstd -19, "
        f"built-in dictionary) is {big.ratio:.2f}x of zstd'd `model.json`"
    ) in readme
    assert (
        f"on a {big.nodes:,}-node torch.export model, columnar + zstd -19 with the built-in dictionary is "
        f"{big.ratio:.2f}x of `zstd -19` of torch's `model.json`"
    ) in readme


def test_docs_size_results_are_the_record() -> None:
    real, ladder = _models("real"), _models("ladder")
    worst = max(real, key=lambda m: m.ratio)
    others = sorted((m for m in real if m.ratio > MODEL_TARGET and m is not worst), key=lambda m: m.name)
    also = " and ".join(f"`{m.name}`" for m in others)
    over = (
        f"over 0.5x also {also}, {_span([m.ratio for m in others], 3)}"
        if others
        else ("none other over 0.5x" if worst.ratio > MODEL_TARGET else "none over 0.5x")
    )
    text = _text("docs/size.md")
    assert (
        f"the 18 real models (`scripts/torch/real_models.py`) {_geo(real):.3f}x geometric mean, worst "
        f"{worst.ratio:.3f}x (`{worst.name}`; {over}); "
        f"the ladder {_geo(ladder):.3f}x, {_span([m.ratio for m in ladder if m.nodes < 70])} below 70 nodes."
    ) in text
    speed = _row("convert size_10k: defaults vs --level 3 (before)")
    files = re.fullmatch(r"CPU time, whole command; files (\d+) B vs (\d+) B at level 3", speed["note"])
    assert files is not None
    sizes = f"{int(files.group(1)):,} B against {int(files.group(2)):,} B"
    assert f"{speed['value'] / speed['baseline']:.2f}x the CPU time of level 3, {sizes}" in text
