""".pte and ETDump read through flatc's generated code, against ExecuTorch's own view of the same files."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracepack.errors import InputError, TracepackError
from tracepack.formats import read_document
from tracepack.runtime.symbols import Symbolicator
from tracepack.torch.executorch.etdump import read_etdump
from tracepack.torch.executorch.pte import pte_document, read_pte
from tracepack.traces import FrameKey, render_frames

from .helpers import ETDUMP, PTE, manifest


def test_pte_instructions_equal_executorchs_program() -> None:
    """Kind, operator and every emitted frame of every instruction, as ExecuTorch's deserializer saw them."""
    program = read_pte(PTE.read_bytes(), source="model.pte")
    want = manifest()["pte"]
    meth = program.method(None)
    assert meth.name == want["method"]
    assert len(meth.instructions) == len(want["instructions"]) == 14
    for got, w in zip(meth.instructions, want["instructions"], strict=True):
        assert (got.chain, got.instruction, got.kind) == (w["chain"], w["instruction"], w["kind"])
        assert got.op == (w["op"] or "")
        assert [[f.file, f.line, f.name, f.text] for f in got.frames or ()] == w["frames"]


def test_the_runtime_names_the_op_as_the_pte_does() -> None:
    """The KernelCall failure the portable runtime printed names the operator the .pte holds there."""
    meth = read_pte(PTE.read_bytes()).method("forward")
    line = next(ln for ln in manifest()["kernel_failure"] if "KernelCall failed" in ln)
    assert f"instruction 0:0 in operator {meth.instructions[0].op}:" in line


def test_pte_document_answers_instructions_with_their_frames() -> None:
    doc = pte_document(read_pte(PTE.read_bytes()))
    sym = Symbolicator(doc)
    for w in manifest()["pte"]["instructions"]:
        a = sym.instruction(w["chain"], w["instruction"])
        assert a.op == (w["op"] or w["kind"])
        frames = [FrameKey(*f) for f in w["frames"]]
        assert a.frames_trace == render_frames(frames, 1)
    assert read_document(PTE.read_bytes()) == doc  # convert reads .pte too


def test_etdump_events_equal_inspectors() -> None:
    """Every profile event, in order, with Inspector's name, instruction id and duration (ms)."""
    dump = read_etdump(ETDUMP.read_bytes(), source="model.etdp")
    events = [e for run in dump.runs for e in run.events]
    want = manifest()["inspector_events"]
    assert sorted((e.name, e.instruction if e.chain >= 0 else 0) for e in events) == sorted(
        (w["name"], w["instruction_id"]) for w in want
    )
    by_key = {(w["name"], w["instruction_id"], round(w["times"][0], 6)) for w in want}
    for e in events:
        key = (e.name, e.instruction if e.chain >= 0 else 0, round((e.end - e.start) / 1e6, 6))
        assert key in by_key


def test_wrong_files_are_refused_with_what_they_are() -> None:
    with pytest.raises(InputError, match="no ExecuTorch program identifier"):
        read_pte(b"\0" * 64, source="x.pte")
    with pytest.raises(InputError, match="no ETDump identifier"):
        read_etdump(PTE.read_bytes(), source="x.etdp")
    with pytest.raises(InputError, match=r"ETDump.*annotate"):
        read_document(ETDUMP.read_bytes(), source="x.etdp")


def _mutate(data: bytes, edits: list[tuple[int, int]], cut: int) -> bytes:
    buf = bytearray(data)
    for pos, value in edits:
        buf[pos % len(buf)] = value
    return bytes(buf[: max(12, len(buf) - cut)])


@given(st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=8), st.integers(0, 4000))
def test_damaged_pte_is_an_answer_or_a_tracepack_error(edits: list[tuple[int, int]], cut: int) -> None:
    data = _mutate(PTE.read_bytes(), edits, cut)
    data = data[:4] + b"ET12" + data[8:]
    with contextlib.suppress(TracepackError):
        read_pte(data, source="damaged.pte")


@given(st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=8), st.integers(0, 1000))
def test_damaged_etdump_is_an_answer_or_a_tracepack_error(edits: list[tuple[int, int]], cut: int) -> None:
    data = _mutate(ETDUMP.read_bytes(), edits, cut)
    data = data[:8] + b"ED00" + data[12:]
    with contextlib.suppress(TracepackError):
        read_etdump(data, source="damaged.etdp")
