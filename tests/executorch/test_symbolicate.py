"""`tracepack symbolicate` and `annotate`: logs, stdin, --json, lazy .tpk, profiles; against ExecuTorch's
Inspector and torch's own error text."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracepack.cli import main
from tracepack.runtime.artifacts import open_artifact
from tracepack.runtime.logs import NUMBER_DIGITS, find_references, symbolicate_lines
from tracepack.runtime.profile import module_summary, source_of

from .helpers import DATA, ETDUMP, ETRECORD, FRAMEWORK_EVENTS, LOG, MOBILE, PTE, manifest
from .strategies import Reference, log_lines


@given(log_lines())
def test_every_reference_is_found_where_it_is(case: tuple[str, list[Reference]]) -> None:
    line, want = case
    got = [(r.kind, r.chain, r.instruction, r.handles) for r in find_references(line)]
    assert got == want


@given(log_lines())
def test_lines_without_a_known_reference_pass_through_unchanged(case: tuple[str, list[Reference]]) -> None:
    line, refs = case
    syms = open_artifact(str(ETRECORD))
    out = list(symbolicate_lines([line], syms))
    assert out[0] == line  # the original line always comes first
    if not refs:
        assert out == [line]


def test_the_runtime_log_becomes_the_python_stack(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["symbolicate", str(ETRECORD), str(LOG)]) == 0
    out = capsys.readouterr().out
    log = LOG.read_text().splitlines()
    lines = out.splitlines()
    assert [ln for ln in lines if ln in log] == log  # every log line kept, in order
    node = manifest()["instructions"]["forward"]["0"]["nodes"][0]
    assert "debug handle 1: aten.embedding.default in embed (torch.nn.modules.sparse.Embedding)" in out
    for frame_line in node["stack_trace"].splitlines():
        assert frame_line.strip() in out


def test_stdin_json_and_a_lazy_tpk_give_the_same_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tpk = tmp_path / "forward.tpk"
    assert main(["convert", str(ETRECORD), str(tpk), "--codec", "flatbuffers", "--compression", "none"]) == 0
    capsys.readouterr()
    answers = []
    for artifact in (str(ETRECORD), str(tpk)):
        monkeypatch.setattr("sys.stdin", io.StringIO(LOG.read_text()))
        assert main(["symbolicate", artifact, "-", "--json"]) == 0
        answers.append(json.loads(capsys.readouterr().out)["references"])
    assert answers[0] == answers[1]
    (ref,) = answers[0]
    assert ref["kind"] == "instruction"
    (instr,) = ref["answers"]
    assert [h["handle"] for h in instr["handles"]] == [manifest()["debug_handle_map"]["forward"]["0"]]
    assert (
        instr["handles"][0]["nodes"][0]["stack_trace"]
        == manifest()["instructions"]["forward"]["0"]["nodes"][0]["stack_trace"]
    )


def test_handle_and_instruction_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["symbolicate", str(ETRECORD), "--handle", "3", "--instruction", "0:8", "--json"]) == 0
    refs = json.loads(capsys.readouterr().out)["references"]
    assert refs[0]["answers"][0]["handle"] == 3
    assert refs[0]["answers"][0]["module_path"] == "blocks.0"
    assert [h["handle"] for h in refs[1]["answers"][0]["handles"]] == [7]
    assert refs[1]["answers"][0]["handles"][0]["module_path"] == "blocks.1"


def test_the_pte_alone_answers_with_its_emitted_frames(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["symbolicate", str(PTE), str(LOG), "--style", "tracepack"]) == 0
    out = capsys.readouterr().out
    frames = manifest()["pte"]["instructions"][0]["frames"]
    for file, line, name, text in frames:
        assert f'File "{file}", line {line}, in {name}\n' in out.replace("\n        ", "\n").replace(
            "      File", "File"
        )
        assert text in out


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["symbolicate", str(ETRECORD), "--handle", "999"]) == 2
    assert main(["symbolicate", str(ETRECORD), "--instruction", "x:y"]) == 2
    assert main(["symbolicate", str(tmp_path / "missing.tpk"), "--handle", "1"]) == 2
    (tmp_path / "junk").write_bytes(b"\x00junk")
    assert main(["symbolicate", str(tmp_path / "junk"), "--handle", "1"]) == 2
    assert main(["annotate", str(ETDUMP), "--with", str(ETRECORD)]) == 2
    assert main(["annotate", str(LOG), "--with", str(ETRECORD), "-o", str(tmp_path / "o.json")]) == 2
    assert not (tmp_path / "o.json").exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 6
    assert all(line.startswith("tracepack: ") for line in err)


def test_unknown_references_are_reported_not_guessed(capsys: pytest.CaptureFixture[str]) -> None:
    text = "KernelCall failed at instruction 0:77 in operator aten::add.out: 0x12"
    out = list(symbolicate_lines([text], open_artifact(str(ETRECORD))))
    assert out == [text, "  -> unresolved: no instruction 0:77 in the debug_handle_map of 'forward'"]


def test_annotated_etdump_matches_inspector(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "trace.json"
    assert main(["annotate", str(ETDUMP), "--with", str(ETRECORD), "-o", str(out), "--by", "module"]) == 0
    table = capsys.readouterr().out
    trace = json.loads(out.read_text())
    ops = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["name"] not in FRAMEWORK_EVENTS]
    want = [e for e in manifest()["inspector_events"] if e["name"] not in FRAMEWORK_EVENTS]
    assert len(ops) == len(want) == 28
    for got, w in zip(ops, want, strict=True):
        assert got["name"] == w["name"]
        assert got["args"]["debug_handles"] == (
            [w["debug_handles"]] if isinstance(w["debug_handles"], int) else w["debug_handles"]
        )
        assert round(got["dur"] / 1000, 6) == round(w["times"][0], 6)  # microseconds vs Inspector's ms
        stack = next(iter(w["stack_traces"].values()))
        assert got["args"]["source"] == source_of(stack)[0]
        path = next(iter(w["module_hierarchy"].values()))
        assert got["args"]["module_path"] == list(path.values())[-1][0]
    rows = module_summary(trace)
    assert {r[0] for r in rows} == {
        "embed",
        "blocks.0",
        "blocks.0.fc",
        "blocks.0.norm",
        "blocks.1",
        "blocks.1.fc",
        "blocks.1.norm",
        "head",
        "(top level)",
    }
    assert sum(r[2] for r in rows) == 14  # one native_call_* event per instruction
    assert table.splitlines()[0].split()[:3] == ["module", "type", "events"]
    assert "blocks.0.fc" in table


def test_annotate_a_chrome_trace_with_handles(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A torch.profiler-style trace whose events carry a debug handle (mobile/edge profilers do)."""
    trace = {
        "traceEvents": [
            {"name": "aten::relu", "ph": "X", "ts": 0, "dur": 5, "pid": 1, "tid": 1, "args": {"Debug handle": 3}},
            {"name": "aten::addmm", "ph": "X", "ts": 5, "dur": 7, "pid": 1, "tid": 1, "args": {"instruction_id": 12}},
            {"name": "other", "ph": "X", "ts": 12, "dur": 1, "pid": 1, "tid": 1, "args": {}},
        ]
    }
    src = tmp_path / "trace.json"
    src.write_text(json.dumps(trace))
    out = tmp_path / "annotated.json"
    assert main(["annotate", str(src), "--with", str(ETRECORD), "-o", str(out)]) == 0
    events = json.loads(out.read_text())["traceEvents"]
    assert events[0]["args"]["module_path"] == "blocks.0"
    assert events[0]["args"]["source"] == "/home/user/project/tinylm.py:12"
    assert events[1]["args"]["module_path"] == "head"
    assert events[2] == trace["traceEvents"][2]


def test_mobile_stripped_error_becomes_what_torch_prints_with_its_maps(capsys: pytest.CaptureFixture[str]) -> None:
    """The stripped device's "debug_handles:{5}, was not found." becomes, byte for byte, what the lite
    interpreter printed for the same failure when the file had its debug maps."""
    stripped = DATA / manifest()["mobile"]["mobile_stripped.ptl"]["error_file"]
    full = (DATA / manifest()["mobile"]["mobile.ptl"]["error_file"]).read_text()
    assert manifest()["mobile"]["mobile_stripped.ptl"]["handles"] == [5]
    assert main(["symbolicate", str(MOBILE), str(stripped)]) == 0
    assert capsys.readouterr().out == full + "\n"
    # tracepack's own form keeps the line and explains the handle below it.
    assert main(["symbolicate", str(MOBILE), str(stripped), "--style", "tracepack"]) == 0
    out = capsys.readouterr().out
    assert "debug_handles:{5}, was not found." in out
    assert "Module hierarchy:TOP(TinyLM)::forward.embed(Embedding)::forward" in out
    frame = re.compile(r'File "([^"]+)", line (\d+)')
    assert frame.findall(out) == frame.findall(full)


def test_recomputed_handles_for_a_plain_exported_program(capsys: pytest.CaptureFixture[str]) -> None:
    """A torch.export .pt2 (torch 2.13, with from_node) has no handles: symbolicate numbers them as
    ExecuTorch would (one per greatest ancestor, in graph order) and answers them."""
    from tracepack.formats import read_document
    from tracepack.torch.executorch.etrecord import recompute_handles

    pt2 = DATA.parent / "torch" / "corpus" / "transformer_strict.pt2"
    doc = read_document(pt2.read_bytes())
    assert not doc.raw.debug_handles.handle
    assert doc.raw.provenance is not None
    handles = recompute_handles(doc)
    (sym,) = open_artifact(str(pt2))
    assert sym.doc.raw.debug_handles.handle == sorted(set(handles.values()))  # type: ignore[attr-defined]
    assert handles[0] == 1
    first = doc.node(min(i for i, h in handles.items() if h == 2))
    answer = sym.handle(2)
    assert answer.nodes[0].name == first.name
    assert answer.nodes[0].stack_trace == first.stack_trace
    assert main(["symbolicate", str(pt2), "--handle", "2"]) == 0
    assert first.name in capsys.readouterr().out


_NUMBERED = {
    "instruction": "KernelCall failed at instruction 0:{n} in operator aten::add.out: 0x14",
    "chain": "KernelCall failed at instruction {n}:3 in operator aten::add.out: 0x14",
    "delegate": "DELEGATE_CALL index 1 >= num delegates 1 at instruction {n}",
    "limit": "Instruction execution limit (10) exceeded at chain {n}, instruction 2",
    "handle": "Debug info for handle(s): debug_handles:{{4, {n}}}, was not found.",
}


@given(kind=st.sampled_from(sorted(_NUMBERED)), digits=st.integers(1, 6000), seed=st.integers(0, 9))
def test_a_number_longer_than_a_size_t_is_no_reference(kind: str, digits: int, seed: int) -> None:
    """A run of more than 20 digits (past any 64-bit chain, instruction or handle) makes no reference and
    the line passes through; a shorter one is read exactly. Before, 4,301 digits and more leaked Python's
    int-string limit as an internal error."""
    text = str(seed + 1) + "7" * (digits - 1)
    line = _NUMBERED[kind].format(n=text)
    refs = find_references(line)
    if digits > NUMBER_DIGITS:
        assert refs == []
        assert list(symbolicate_lines([line], open_artifact(str(ETRECORD)))) == [line]
        return
    (ref,) = refs
    assert int(text) in (ref.chain, ref.instruction, *ref.handles)


def test_a_log_with_a_100k_digit_instruction_passes_through(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "huge.log"
    line = "KernelCall failed at instruction 0:" + "9" * 100_000
    log.write_text(line + "\n")
    assert main(["symbolicate", str(ETRECORD), str(log)]) == 0
    out = capsys.readouterr()
    assert out.out == line + "\n"
    assert out.err == ""


def test_a_line_of_many_handles_is_explained_one_handle_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The line is printed before any handle is explained, and each explanation is rendered as it is
    printed: memory holds the answers (shared with the symbolicator's cache), never the whole text."""
    from tracepack.runtime import logs

    syms = open_artifact(str(ETRECORD))
    known = []
    for h in range(64):
        try:
            syms[0].handle(h)
        except Exception:
            continue
        known.append(h)
    assert len(known) >= 2
    handles = [known[i % len(known)] for i in range(2_000)]
    line = "E debug_handles:{" + ", ".join(map(str, handles)) + "}"
    rendered = 0
    real = logs.render_handle

    def counting(*args: object, **kwargs: object) -> list[str]:
        nonlocal rendered
        rendered += 1
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(logs, "render_handle", counting)
    out = logs.symbolicate_lines([line], syms)
    assert next(out) == line
    assert rendered == 0
    first = next(out)
    assert rendered == 1
    assert first.startswith("  debug handle ")
    rest = list(out)
    assert rendered == 2_000
    assert [first, *rest] == [ln for h in handles for ln in real(syms[0].handle(h))]
