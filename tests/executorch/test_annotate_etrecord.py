"""``tracepack annotate`` of an eager torch.profiler trace with an ETRecord: the ETRecord keeps the ATen
program ``to_edge`` lowered (``exported_program``), so its events are matched to that program's nodes as
with the ``.pt2`` (checked against what torch itself mapped each event to when the samples were made); and a
run that annotates nothing fails with one line saying why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tracepack.cli import main
from tracepack.runtime.artifacts import open_exported_program
from tracepack.runtime.profile import source_of

from .helpers import DATA

ETRECORD = DATA / "model.etrecord"
PT2 = DATA / "profile_model.pt2"
PTE = DATA / "model.pte"
TRACE = DATA / "profile_trace.json"
PLAIN = DATA / "profile_trace_plain.json"
ETDUMP = DATA / "model.etdp"


def _annotate(tmp_path: Path, profile: Path, artifact: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    out = tmp_path / f"{profile.stem}.{artifact.suffix[1:]}.json"
    assert main(["annotate", str(profile), "--with", str(artifact), "-o", str(out)]) == 0
    value: dict[str, Any] = json.loads(out.read_text())
    n = sum(1 for e in value["traceEvents"] if {"module_path", "source"} & set(e.get("args") or {}))
    assert capsys.readouterr().err == f"wrote {out}: {len(value['traceEvents'])} events, {n} annotated\n"
    assert n > 0
    return value


def test_the_etrecord_keeps_the_aten_program() -> None:
    sym = open_exported_program(str(ETRECORD))
    assert sym is not None
    assert sym.kind == "handles"  # the ATen program's nodes, not an edge method
    nodes = json.loads((DATA / "profile_manifest.json").read_text())["nodes"]
    assert [sym.doc.node(i).name for i in range(len(sym.doc))] == list(nodes)  # type: ignore[arg-type]
    assert open_exported_program(str(PT2)) is None  # not an ETRecord
    assert open_exported_program(str(PTE)) is None


def test_an_eager_trace_is_annotated_from_the_etrecord_as_torch_mapped_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _annotate(tmp_path, TRACE, ETRECORD, capsys)
    manifest = json.loads((DATA / "profile_manifest.json").read_text())
    torch_says = manifest["torch_event_nodes"]  # map_recorded_events_to_aten_ops_with_stack_trace, run by torch
    by_index = {e["args"]["Ev Idx"]: e for e in trace["traceEvents"] if "Ev Idx" in (e.get("args") or {})}
    assert len(torch_says) >= 60
    for idx, want in torch_says.items():
        args = by_index[int(idx)]["args"]
        assert (args["node"], args["stack_trace"]) == (want["node_name"], want["stack_trace"])
        assert args["source"] == source_of(manifest["nodes"][want["node_name"]]["stack_trace"])[0]
    # and exactly what the .pt2 of the same program gives
    assert trace == _annotate(tmp_path, TRACE, PT2, capsys)


def test_a_plain_trace_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _annotate(tmp_path, PLAIN, ETRECORD, capsys)
    assert trace == _annotate(tmp_path, PLAIN, PT2, capsys)
    assert {(e.get("args") or {}).get("fx_mapping") for e in trace["traceEvents"]} >= {"op order"}


def test_a_pte_annotates_an_etdump_with_its_emitted_stacks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from_pte = _annotate(tmp_path, ETDUMP, PTE, capsys)["traceEvents"]
    from_etrecord = _annotate(tmp_path, ETDUMP, ETRECORD, capsys)["traceEvents"]
    assert len(from_pte) == len(from_etrecord)
    compared = 0
    for a, b in zip(from_pte, from_etrecord, strict=True):
        if "source" in (a.get("args") or {}):
            # the stack the emitter kept and the ETRecord's node stack name the same line of the model
            assert a["args"]["source"] == b["args"]["source"], a["name"]
            compared += 1
    assert compared >= 10


def _refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], profile: Path, artifact: Path) -> str:
    out = tmp_path / "out.json"
    assert main(["annotate", str(profile), "--with", str(artifact), "-o", str(out), "--by", "module"]) == 2
    captured = capsys.readouterr()
    assert not out.exists()
    assert captured.out == ""  # no table either
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("tracepack: nothing annotated: ")
    return captured.err


def test_an_eager_trace_with_an_artifact_without_its_program(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _refused(tmp_path, capsys, TRACE, PTE)
    assert "eager torch.profiler trace" in err
    assert "annotate it with the .pt2, or an ETRecord" in err


def test_handles_that_the_artifact_does_not_have(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "handles.json"
    events = [
        {"ph": "X", "name": "op", "pid": 0, "tid": 0, "ts": i, "dur": 1, "args": {"debug_handle": 90000 + i}}
        for i in range(3)
    ]
    src.write_text(json.dumps({"traceEvents": events}))
    err = _refused(tmp_path, capsys, src, ETRECORD)
    assert "none of the 3 debug handles or instruction ids" in err
