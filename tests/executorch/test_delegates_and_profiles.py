"""Delegated programs (XNNPACK) against ExecuTorch's Inspector, and torch.profiler traces of an exported
program against what torch itself maps each op event to (``map_recorded_events_to_aten_ops_with_stack_trace``)
and the nodes' own ``stack_trace`` / ``nn_module_stack``."""

from __future__ import annotations

import contextlib
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracepack.cli import main
from tracepack.errors import TracepackError
from tracepack.runtime.artifacts import open_artifact
from tracepack.runtime.describe import describe_executorch
from tracepack.runtime.profile import annotate_chrome, aten_name, debug_value, module_summary, source_of
from tracepack.runtime.symbols import Symbolicator
from tracepack.torch.executorch.etdump import read_etdump
from tracepack.traces import parse_nn_module_stack

from .helpers import DATA, FRAMEWORK_EVENTS
from .strategies import profiler_traces

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


def test_node_markers_are_trusted_only_when_their_ops_agree(tmp_path: Path) -> None:
    plain = json.loads(TRACE.read_text())
    lone = [{"ph": "X", "cat": "cpu_op", "name": "## 3 ##", "pid": 1, "tid": 1, "ts": 0, "dur": 2, "args": {}}]
    sym = _model_symbolicator()
    assert annotate_chrome({"traceEvents": lone}, [sym])["traceEvents"] == lone
    # two node markers swapped: the first op inside each is no longer its node's op, so no marker is used
    shifted = json.loads(json.dumps(plain))
    marks = [
        e for e in shifted["traceEvents"] if str(e.get("name", "")).startswith("## ") and e["name"][3:-3].isdigit()
    ]
    marks[0]["name"], marks[1]["name"] = marks[1]["name"], marks[0]["name"]
    mapped = [
        e["args"].get("fx_mapping")
        for e in annotate_chrome(shifted, [sym])["traceEvents"]
        if "node" in (e.get("args") or {})
    ]
    assert mapped
    assert set(mapped) == {"op order"}


def test_a_trace_of_something_else_is_copied_unchanged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = json.loads(PLAIN.read_text())
    other = {"traceEvents": [e for e in plain["traceEvents"] if e.get("name") in ("aten::empty", "aten::view")]}
    assert annotate_chrome(other, [_model_symbolicator()])["traceEvents"] == other["traceEvents"]
    # the command refuses to call that a success: one line saying why, exit 2, nothing written
    src, out = tmp_path / "other.json", tmp_path / "out.json"
    src.write_text(json.dumps(other))
    assert main(["annotate", str(src), "--with", str(MODEL), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"tracepack: nothing annotated: none of the {len(other['traceEvents'])} op events of {src}")
    assert not out.exists()


# -- debug (intermediate output) events -----------------------------------------------------------------


def test_debug_events_are_the_tensors_inspector_read_per_instruction(tmp_path: Path) -> None:
    trace = _annotate(tmp_path, DATA / "model_debug.etdp", DATA / "model.etrecord")
    ours: dict[int, list[dict[str, Any]]] = {}
    for e in trace["traceEvents"]:
        if e.get("cat") == "executorch.debug" and e["args"]["chain"] >= 0:
            ours.setdefault(e["args"]["instruction_id"], []).extend(e["args"]["tensors"])
    theirs = {
        e["instruction_id"]: e["debug_data"]
        for e in _json("debug_manifest.json")["inspector_events"]
        if e["name"].startswith("native_call_")
    }
    assert len(theirs) == 14
    assert {i: [(t["dtype"], t["sizes"]) for t in ts] for i, ts in ours.items()} == {
        i: [(t["dtype"], t["sizes"]) for t in ts] for i, ts in theirs.items()
    }
    first = next(e for e in trace["traceEvents"] if e.get("cat") == "executorch.debug")
    assert first["ph"] == "i"
    assert first["args"]["module_path"] == "embed"  # annotated like its instruction
    ends = [
        e["ts"] + e["dur"]
        for e in trace["traceEvents"]
        if e.get("ph") == "X" and e["args"]["chain"] == 0 and e["args"]["instruction_id"] == 0
    ]
    assert len(ends) == 2  # native_call_embedding.out inside OPERATOR_CALL
    assert first["ts"] == max(ends)  # placed where its instruction ended
    outputs = [e for e in trace["traceEvents"] if e.get("cat") == "executorch.debug" and e["args"]["chain"] < 0]
    assert [e["args"].get("method_output") for e in outputs] == [True]
    assert outputs[0]["args"]["tensors"][0]["sizes"] == [1, 4, 16]


# -- inspect ------------------------------------------------------------------------------------------


def _inspect(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["inspect", str(path)]) == 0
    assert path.name in capsys.readouterr().out
    assert main(["inspect", "--json", str(path)]) == 0
    info: dict[str, Any] = json.loads(capsys.readouterr().out)
    return info


def test_inspect_summarises_executorch_files_as_executorch_reports_them(capsys: pytest.CaptureFixture[str]) -> None:
    base = _json("manifest.json")
    rec = _inspect(DATA / "model.etrecord", capsys)
    assert rec["kind"] == "etrecord"
    (forward,) = rec["methods"]
    assert forward["instructions"] == len(base["debug_handle_map"]["forward"])
    handles = {h for hs in base["debug_handle_map"]["forward"].values() for h in ([hs] if isinstance(hs, int) else hs)}
    assert forward["debug_handles"] == len(handles)
    # the serialized graph's nodes: ExecuTorch's loaded graph adds a getitem per output of a multi-output op
    loaded = base["edge_debug_handles"]["forward"]
    assert forward["nodes"] == len([n for n in loaded if "getitem" not in n and "_unused_" not in n])
    assert set(rec["weights_members"]) < set(base["etrecord_members"])

    pte = _inspect(DATA / "model.pte", capsys)
    (method,) = pte["methods"]
    assert method["instructions"] == len(base["pte"]["instructions"])
    assert method["stack_traces"] is True
    assert sum(o["calls"] for o in method["top_operators"]) <= method["instructions"]

    dump = _inspect(DATA / "model.etdp", capsys)
    ops = [e for e in base["inspector_events"] if e["name"] not in FRAMEWORK_EVENTS]
    assert dump["runs"][1]["operator_events"] == len(ops)
    assert dump["runs"][1]["instructions"] == len({e["instruction_id"] for e in ops})

    debug = _inspect(DATA / "model_debug.etdp", capsys)
    tensors = sum(
        len(e["debug_data"])
        for e in _json("debug_manifest.json")["inspector_events"]
        if e["name"].startswith("native_call_")
    )
    assert debug["runs"][1]["debug_values"] == {"tensor": debug["runs"][1]["debug_events"]}
    assert debug["runs"][1]["debug_tensors"] == tensors + 1  # and the method's output

    delegate = _json("delegate_manifest.json")
    drec = _inspect(DELEGATE, capsys)
    assert drec["methods"][0]["delegate_calls"] == {
        k: v["name"] for k, v in delegate["delegate_map"]["forward"].items()
    }
    dpte = _inspect(DATA / "delegate.pte", capsys)
    assert dpte["methods"][0]["instruction_kinds"]["DelegateCall"] == len(delegate["delegate_map"]["forward"])
    ddump = _inspect(DELEGATE_DUMP, capsys)
    assert ddump["runs"][1]["delegated_events"] == sum(1 for e in delegate["inspector_events"] if e["is_delegated_op"])


def test_inspect_of_a_damaged_etdump_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "cut.etdp"
    bad.write_bytes((DATA / "model.etdp").read_bytes()[:200])
    assert main(["inspect", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "cut.etdp" in err


def _etrecord_with_program(tmp_path: Path, program: bytes) -> Path:
    """The committed ETRecord with its forward method's program replaced (every other member kept)."""
    import io
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(DATA / "model.etrecord") as z, zipfile.ZipFile(out, "w") as w:
        for info in z.infolist():
            w.writestr(info, program if info.filename == "edge_dialect_exported_program/forward" else z.read(info))
    path = tmp_path / "m.etrecord"
    path.write_bytes(out.getvalue())
    return path


@pytest.mark.parametrize(
    ("program", "fragment"),
    [
        (b'{"graph_module": {"graph": {"nodes": [', "not valid JSON"),  # the fuzzer's JSONDecodeError
        (b'{"graph_module": "\xb9"}', "not UTF-8"),  # and UnicodeDecodeError, from inspect's own parse
        (b"[" * 5_000 + b"]" * 5_000, "max_depth"),
    ],
)
def test_inspect_of_an_etrecord_whose_program_is_not_json_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], program: bytes, fragment: str
) -> None:
    assert main(["inspect", str(_etrecord_with_program(tmp_path, program))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "m.etrecord:edge_dialect_exported_program/forward" in err
    assert fragment in err


@pytest.mark.parametrize("program", [b"[]", b'{"graph_module": []}', b'{"graph_module": {"graph": {"nodes": 7}}}'])
def test_inspect_of_an_etrecord_whose_program_has_no_graph_counts_no_nodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], program: bytes
) -> None:
    assert main(["inspect", "--json", str(_etrecord_with_program(tmp_path, program))]) == 0
    info = json.loads(capsys.readouterr().out)
    assert [m["nodes"] for m in info["methods"] if m["name"] == "forward"] == [0]


# -- properties -----------------------------------------------------------------------------------------


@cache
def _model_symbolicator() -> Symbolicator:
    (sym,) = open_artifact(str(MODEL))
    return sym


@given(profiler_traces())
def test_any_profiler_trace_maps_only_events_that_run_a_node_op(events: list[dict[str, Any]]) -> None:
    sym = _model_symbolicator()
    trace = annotate_chrome({"traceEvents": events}, [sym])
    ops = [aten_name(sym.doc.node(k).target) for k in range(len(sym.doc))]  # type: ignore[arg-type]
    expected_next: dict[Any, int] = {}
    for before, after in zip(events, trace["traceEvents"], strict=True):
        args = after.get("args") or {}
        if "node" not in args:
            assert after == before  # not matched: copied unchanged
            continue
        assert {k: v for k, v in after.items() if k != "args"} == {k: v for k, v in before.items() if k != "args"}
        assert args["fx_mapping"] == "op order"
        if not args.get("fx_nested"):
            k = expected_next.get(after["tid"], 0)
            assert args["node"] == sym.doc.node(k).name  # graph order, thread by thread, call after call
            assert after["name"] == ops[k]
            expected_next[after["tid"]] = (k + 1) % len(ops)


@given(st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=8), st.integers(0, 5000))
def test_damaged_debug_etdump_is_an_answer_or_a_tracepack_error(edits: list[tuple[int, int]], cut: int) -> None:
    data = bytearray((DATA / "model_debug.etdp").read_bytes())
    for at, value in edits:
        if data:
            data[at % len(data)] = value
    damaged = bytes(data[: max(cut, 12)])
    damaged = damaged[:8] + b"ED00" + damaged[12:]
    with contextlib.suppress(TracepackError):
        dump = read_etdump(damaged, source="damaged.etdp")
        describe_executorch(damaged, source="damaged.etdp")
        for run in dump.runs:
            for d in run.debug:
                debug_value(d)


def test_the_runtimes_delegate_messages_are_symbolicated(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The format strings are libexecutorch's (ExecuTorch 1.5.1), filled in as the runtime would."""
    log = tmp_path / "device.log"
    log.write_text(
        "[method.cpp:1400] CALL_DELEGATE execute failed at instruction 3: 0x23\n"
        "[method.cpp:1390] DELEGATE_CALL index 7 >= num delegates 3 at instruction 5\n"
        "[method.cpp:1500] Instruction execution limit (10000000) exceeded at chain 0, instruction 1. "
        "Possible infinite loop detected.\n"
    )
    assert main(["symbolicate", str(DELEGATE), str(log)]) == 0
    out = capsys.readouterr().out
    for instruction, handles in ((3, "6, 7, 8"), (5, "10, 11"), (1, "2, 3, 4")):
        assert f"instruction 0:{instruction}: aten.linear.default (delegate call to XnnpackBackend) " in out
        assert f"(debug handles {handles})" in out
    assert "node aten_linear_default_1 (aten.linear.default):" in out
