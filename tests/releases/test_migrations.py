"""The upgrade chain's steps and torch.fx's naming, on generated inputs and on every real sample."""

from __future__ import annotations

import json
import keyword
import re
from typing import Any

import pytest
from hypothesis import example, given

from tests.releases.samples import files, path
from tests.releases.strategies import all_member_unions, fx_candidates
from tracepack.io.zip import open_archive
from tracepack.torch import pt2
from tracepack.torch.export.node_names import GraphNames, fx_style
from tracepack.torch.export.schema_versions import schema_version_of
from tracepack.torch.export.upgrade import CURRENT, _compact, upgrade_program

EXPORTS = files("export")


@given(union=all_member_unions())
def test_all_member_unions_become_one_member(union: tuple[dict[str, Any], str]) -> None:
    value, chosen = union
    assert _compact(value) == {chosen: value[chosen]}
    assert _compact([value, {"type": "cpu", "index": None}]) == [
        {chosen: value[chosen]},
        {"type": "cpu", "index": None},
    ]


@given(candidates=fx_candidates)
@pytest.mark.parametrize("style", ["legacy", "rewrite", "current"])
def test_fx_names_are_unique_identifiers(candidates: list[str], style: str) -> None:
    names = GraphNames(style=style)
    made = [names.create(c) for c in candidates]
    assert len(set(made)) == len(made)
    for name in made:
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)
        assert name not in keyword.kwlist


@pytest.mark.torch
@given(candidates=fx_candidates)
@example(candidates=["x", "x_11", "x_11"])  # x_11 taken again: x_12 (legacy, current), x_1 (rewrite)
def test_fx_names_are_torchs(candidates: list[str]) -> None:
    """The same names the installed torch.fx's name space gives, candidate after candidate: torch
    2.6 and before name as ``legacy``; torch 2.7 rewrote it (PR #148288), ``rewrite``, and a later
    release looks a taken name's count up by its base, ``current``."""
    fx_graph = pytest.importorskip("torch.fx.graph")
    import torch

    release = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    theirs = fx_graph._Namespace()
    ours = GraphNames(style=fx_style(release))
    assert [ours.create(c) for c in candidates] == [theirs.create_name(c, None) for c in candidates]


def program(version: str, name: str) -> Any:
    with open_archive(path(version, name).read_bytes(), source=name) as archive:
        return json.loads(pt2.read_program(archive)[1])


@pytest.mark.parametrize(("version", "name"), EXPORTS)
def test_upgrade_reaches_the_current_layout(version: str, name: str) -> None:
    old = program(version, name)
    before = json.dumps(old)
    new = upgrade_program(old, source=name)
    assert json.dumps(old) == before, "the input is not changed"
    assert schema_version_of(new) == CURRENT
    assert upgrade_program(new, source=name) == new, "upgrading twice changes nothing"
    text = json.dumps(new)
    assert ': null, "as_' not in text, "no union keeps its null members"
    graph = new["graph_module"]["graph"]
    assert all(type(n.get("name")) is str for n in graph["nodes"])
    assert set(new["graph_module"]["signature"]) == {"input_specs", "output_specs"}
    assert "call_spec" not in new["graph_module"]
