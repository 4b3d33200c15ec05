"""Delegated programs (XNNPACK) against ExecuTorch's Inspector, and torch.profiler traces of an exported
program against what torch itself maps each op event to (``map_recorded_events_to_aten_ops_with_stack_trace``)
and the nodes' own ``stack_trace`` / ``nn_module_stack``."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tracepack.cli import main
from tracepack.runtime.artifacts import open_artifact
from tracepack.runtime.profile import aten_name, module_summary, source_of
from tracepack.runtime.symbols import Symbolicator
from tracepack.traces import parse_nn_module_stack

from .helpers import DATA, FRAMEWORK_EVENTS

DELEGATE = DATA / "delegate.etrecord"
DELEGATE_DUMP = DATA / "delegate.etdp"
MODEL = DATA / "profile_model.pt2"
TRACE = DATA / "profile_trace.json"
PLAIN = DATA / "profile_trace_plain.json"


@cache
def _json(name: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((DATA / name).read_text())
    return value


def _annotate(tmp_path: Path, profile: Path, artifact: Path) -> dict[str, Any]:
    out = tmp_path / f"{profile.stem}.annotated.json"
    assert main(["annotate", str(profile), "--with", str(artifact), "-o", str(out)]) == 0
    value: dict[str, Any] = json.loads(out.read_text())
    return value


# -- delegates ------------------------------------------------------------------------------------


def test_delegate_events_get_what_inspector_gives_them(tmp_path: Path) -> None:
    trace = _annotate(tmp_path, DELEGATE_DUMP, DELEGATE)
    ops = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["name"] not in FRAMEWORK_EVENTS]
    want = [e for e in _json("delegate_manifest.json")["inspector_events"] if e["name"] not in FRAMEWORK_EVENTS]
    assert len(ops) == len(want) == 15
    assert sum(1 for w in want if w["is_delegated_op"]) == 6
    for got, w in zip(ops, want, strict=True):
        args = got["args"]
        assert got["name"] == w["name"]  # a delegated op is named by its delegate debug id
        assert args.get("delegate_debug_id") == w["delegate_debug_identifier"]
        assert args.get("delegate_backend") == w["delegate_backend_name"]
        handles = w["debug_handles"]
        assert args.get("debug_handles") == ([handles] if isinstance(handles, int) else handles)
        if w["stack_traces"]:
            names = [n.removesuffix("_") for n in w["stack_traces"]]  # Inspector appends "_" to node names
            first = names[0]
            stack = w["stack_traces"][first + "_"]
            assert args["source"] == source_of(stack)[0]
            path = list(w["module_hierarchy"][first + "_"].values())[-1][0]
            assert args["module_path"] == path
        else:
            assert "module_path" not in args  # XNNPACK records no per-op handles: nothing is made up
    calls = [e for e in ops if e["name"] == "DELEGATE_CALL"]
    assert [e["args"]["module_path"] for e in calls] == ["blocks.0.fc", "blocks.1.fc", "head"]
    inner = [e for e in ops if "delegate_debug_id" in e["args"]]
    assert inner[0]["args"]["delegate_call_debug_handles"] == [2, 3, 4]
    # the delegate call's time is counted once, under its module; the ops inside it are not counted again
    rows = {r[0]: r[2] for r in module_summary(trace)}
    assert rows["blocks.0.fc"] == rows["head"] == 1


def test_delegate_instructions_name_their_backend_and_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    manifest = _json("delegate_manifest.json")
    (sym,) = open_artifact(str(DELEGATE))
    assert {k: v["name"] for k, v in sym.info["delegate_map"].items()} == {
        k: v["name"] for k, v in manifest["delegate_map"]["forward"].items()
    }
    nodes_by_handle: dict[int, list[str]] = {}
    for e in manifest["inspector_events"]:
        if e["name"] == "DELEGATE_CALL":
            nodes_by_handle.setdefault(e["instruction_id"], [n.removesuffix("_") for n in e["stack_traces"]])
    for instruction, names in nodes_by_handle.items():
        a = sym.instruction(0, instruction)
        assert a.delegate == "XnnpackBackend"
        assert [n.name for h in a.handles for n in h.nodes] == names
        assert [h.handle for h in a.handles] == manifest["debug_handle_map"]["forward"][str(instruction)]
    assert main(["symbolicate", str(DELEGATE), "--instruction", "0:3"]) == 0
    out = capsys.readouterr().out
    assert "instruction 0:3: aten.linear.default (delegate call to XnnpackBackend) (debug handles 6, 7, 8)" in out


def test_delegate_handles_are_looked_up_as_inspector_does() -> None:
    """ExecuTorch's Inspector (_gen_resolve_debug_handles): the id as it is, then as text, then a key
    contained in the text id. The samples' XNNPACK maps are empty, so this one is written here."""
    sym = Symbolicator(open_artifact(str(DELEGATE))[0].doc)
    sym._info = {
        "delegate_map": {
            "1": {"name": "B", "delegate_map": {"7": [3, 4], "Conv": 5}},
            "2": {"name": "B"},
        }
    }
    assert sym.delegate_handles(1, 7) == [3, 4]
    assert sym.delegate_handles(1, "7") == [3, 4]
    assert sym.delegate_handles(1, "Conv #1") == [5]
    assert sym.delegate_handles(1, "Add") is None
    assert sym.delegate_handles(2, 0) is None
    assert sym.delegate_handles(9, 0) is None


# -- torch.profiler traces ----------------------------------------------------------------------------


def _node_meta(name: str) -> dict[str, Any]:
    meta: dict[str, Any] = _json("profile_manifest.json")["nodes"][name]
    return meta


def test_enriched_trace_events_map_to_the_nodes_torch_maps_them_to(tmp_path: Path) -> None:
    trace = _annotate(tmp_path, TRACE, MODEL)
    by_index = {e["args"]["Ev Idx"]: e for e in trace["traceEvents"] if "Ev Idx" in (e.get("args") or {})}
    torch_says = _json("profile_manifest.json")["torch_event_nodes"]
    assert len(torch_says) >= 60
    for idx, want in torch_says.items():
        args = by_index[int(idx)]["args"]
        assert args["node"] == want["node_name"]
        assert args["stack_trace"] == want["stack_trace"]
        assert args["fx_mapping"] == "node marker"
        meta = _node_meta(want["node_name"])
        innermost = list(meta["nn_module_stack"].values())[-1]
        assert (args["module_path"], args["module_type"]) == (innermost[0], innermost[1])
        assert args["source"] == source_of(meta["stack_trace"])[0]


def test_plain_trace_maps_by_op_order_to_the_same_nodes(tmp_path: Path) -> None:
    trace = _annotate(tmp_path, PLAIN, MODEL)
    top = [e for e in trace["traceEvents"] if "node" in (e.get("args") or {}) and not e["args"].get("fx_nested")]
    nodes = list(_json("profile_manifest.json")["nodes"])
    assert [e["args"]["node"] for e in top] == nodes  # every node once, in graph order
    for e in top:
        meta = _node_meta(e["args"]["node"])
        assert e["name"] == aten_name(meta["op"])
        assert e["args"]["fx_mapping"] == "op order"
        assert e["args"]["nn_module_stack"] is not None
        assert parse_nn_module_stack(e["args"]["nn_module_stack"])[-1].path == e["args"]["module_path"]
    nested = [e for e in trace["traceEvents"] if (e.get("args") or {}).get("fx_nested")]
    assert {e["args"]["node"] for e in nested} >= {"linear", "layer_norm"}  # aten::addmm inside aten::linear
    rows = module_summary(trace)
    assert sum(r[2] for r in rows) == len(nodes)  # nested ops are not counted twice


def test_a_trace_of_something_else_is_copied_unchanged(tmp_path: Path) -> None:
    plain = json.loads(PLAIN.read_text())
    other = {"traceEvents": [e for e in plain["traceEvents"] if e.get("name") in ("aten::empty", "aten::view")]}
    src = tmp_path / "other.json"
    src.write_text(json.dumps(other))
    assert _annotate(tmp_path, src, MODEL)["traceEvents"] == other["traceEvents"]
