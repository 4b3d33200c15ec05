"""JSON that the fuzz harnesses do not reach, held to the ``max_depth`` and ``max_int_digits`` budgets:

* the Chrome trace ``tracepack annotate`` reads (a torch.profiler trace is the user's upload);
* torch 2.1's call spec (``call_spec.in_spec``, JSON text inside model.json), which ``upgrade`` parses to
  wrap it as ``(args, kwargs)``.

Both ran out of recursion ("internal error: RecursionError", exit 1) before; now each is refused in one
line naming the file and the place, exit 2, and a nesting within the budget is read. The reference for
"deeper than the budget" is the nesting built here, not tracepack's own scan."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.hostile.test_depth import reference_depth
from tracepack.cli import main
from tracepack.errors import LegacyFormatError
from tracepack.io import limits
from tracepack.torch.export.upgrade import upgrade_program

DATA = Path(__file__).resolve().parents[1] / "data"
ARTIFACT = DATA / "executorch" / "profile_model.pt2"
RELEASE_2_1 = DATA / "torch" / "releases" / "2.1"
#: How deep the artifact's own JSON nests (the budget holds for it too): the traces below nest deeper.
ARTIFACT_DEPTH = 9


def _one_line_refusal(capsys: pytest.CaptureFixture[str], name: str, *words: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"tracepack: {name}"), err
    assert "Traceback" not in err
    assert "internal error" not in err
    for word in words:
        assert word in err, err
    return err


@pytest.mark.parametrize("depth", [1_001, 100_000])
def test_annotate_refuses_a_trace_nested_past_the_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], depth: int
) -> None:
    profile = tmp_path / "deep.json"
    profile.write_text('{"traceEvents": [], "x": ' + "[" * depth + "]" * depth + "}")
    out = tmp_path / "out.json"
    assert main(["annotate", str(profile), "--with", str(ARTIFACT), "-o", str(out)]) == 2
    err = _one_line_refusal(capsys, str(profile), "nested more than 1,000 levels deep", "byte ")
    assert not out.exists(), err


def test_annotate_refuses_an_integer_past_the_digit_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = tmp_path / "digits.json"
    profile.write_text('{"traceEvents": [{"ph": "X", "name": "aten::add", "ts": ' + "9" * 6000 + ', "dur": 1}]}')
    out = tmp_path / "out.json"
    assert main(["annotate", str(profile), "--with", str(ARTIFACT), "-o", str(out)]) == 2
    _one_line_refusal(capsys, str(profile), "digits", "max_int_digits")
    assert not out.exists()


@settings(max_examples=20, deadline=None)
@given(depth=st.integers(ARTIFACT_DEPTH + 3, 80), spread=st.integers(-3, 3))
def test_annotate_depth_refusal_is_at_the_budget(
    tmp_path_factory: pytest.TempPathFactory, depth: int, spread: int
) -> None:
    """Lists nested ``depth`` levels in the top object, under ``--limit max_depth=depth + 1 + spread``:
    refused as too deep exactly when the nesting (the top object counts) is past the budget; otherwise
    read, and refused for what it is (no op event of the program in it)."""
    tmp = tmp_path_factory.mktemp("annotate")
    profile, out = tmp / "p.json", tmp / "o.json"
    profile.write_text('{"traceEvents": [], "x": ' + "[" * depth + "]" * depth + "}")
    budget = max(1, depth + 1 + spread)
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = main(
            ["annotate", str(profile), "--with", str(ARTIFACT), "--limit", f"max_depth={budget}", "-o", str(out)]
        )
    err = stderr.getvalue()
    assert code == 2, err
    assert not out.exists()
    assert ("nested more than" in err) == (depth + 1 > budget), err


def _release_program(name: str) -> dict[str, Any]:
    with zipfile.ZipFile(RELEASE_2_1 / name) as archive:
        (member,) = [n for n in archive.namelist() if n.endswith(".json") and "serialized_exported_program" in n]
        program: dict[str, Any] = json.loads(archive.read(member))
    return program


def _with_in_spec(program: dict[str, Any], in_spec: str) -> dict[str, Any]:
    p = copy.deepcopy(program)
    p["graph_module"]["call_spec"]["in_spec"] = in_spec
    return p


def test_upgrade_of_a_2_1_program_refuses_an_in_spec_nested_past_the_budget() -> None:
    program = _release_program("mlp.pt2")
    assert program["graph_module"]["call_spec"]["in_spec"]  # torch 2.1 wrote one: the place is real
    deep = _with_in_spec(program, "[" * 200_000 + "]" * 200_000)
    with pytest.raises(LegacyFormatError) as info:
        upgrade_program(deep, source="mlp.pt2")
    text = str(info.value)
    assert text.startswith("mlp.pt2: $.graph_module.call_spec.in_spec: nested more than 1,000 levels deep"), text


@settings(max_examples=25, deadline=None)
@given(depth=st.integers(1, 40), spread=st.integers(-3, 3))
def test_upgrade_in_spec_depth_refusal_is_at_the_budget(depth: int, spread: int) -> None:
    """An in_spec ``[protocol, tree]`` whose tree nests ``depth`` lists: refused exactly when its depth (the
    outer pair counts) is past the budget; otherwise wrapped as ``(args, kwargs)`` as torch 2.2 writes it."""
    program = _release_program("mlp.pt2")
    in_spec = "[1, " + "[" * depth + "]" * depth + "]"
    budget = max(1, depth + 1 + spread)
    if depth + 1 > budget:
        with limits.raised(max_depth=budget), pytest.raises(LegacyFormatError, match=r"in_spec: nested more than"):
            upgrade_program(_with_in_spec(program, in_spec), source="mlp.pt2")
        return
    with limits.raised(max_depth=budget):
        upgraded = upgrade_program(_with_in_spec(program, in_spec), source="mlp.pt2")
    (root,) = [e for e in upgraded["graph_module"]["module_call_graph"] if e["fqn"] == ""]
    protocol, tree = json.loads(root["signature"]["in_spec"])
    assert protocol == 1
    assert tree["type"] == "builtins.tuple"
    assert tree["children_spec"][0] == json.loads(in_spec)[1]


def test_the_artifact_nests_as_deep_as_said() -> None:
    with zipfile.ZipFile(ARTIFACT) as archive:
        depths = [reference_depth(json.loads(archive.read(n))) for n in archive.namelist() if n.endswith(".json")]
    assert max(depths) == ARTIFACT_DEPTH
