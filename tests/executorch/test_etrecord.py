"""ETRecord import against ExecuTorch's own answers (tests/data/executorch/manifest.json)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

import tracepack
from tracepack.errors import InputError, LegacyFormatError, NotFoundError
from tracepack.runtime.symbols import Symbolicator
from tracepack.torch.executorch.etrecord import import_etrecord, read_etrecord, recompute_handles, stored_handles
from tracepack.traces import parse_nn_module_stack

from .helpers import ETRECORD, manifest


@pytest.fixture(scope="module")
def forward() -> tracepack.Document:
    return import_etrecord(ETRECORD.read_bytes(), source="model.etrecord")["forward"]


def _inspector_nn_module_stack(value: dict[str, list[str]] | None) -> list[tuple[str, str, str]] | None:
    return None if value is None else [(k, v[0], v[1]) for k, v in value.items()]


def _ours(text: str | None) -> list[tuple[str, str, str]] | None:
    if text is None:
        return None
    entries = parse_nn_module_stack(text)
    assert entries is not None
    return [(e.key, e.path, e.type) for e in entries]


def test_one_document_per_method_with_the_handle_table_filled(forward: tracepack.Document) -> None:
    rec = read_etrecord(ETRECORD.read_bytes())
    assert list(rec.programs) == ["forward"]
    assert rec.debug_handle_map["forward"] == {k: [v] for k, v in manifest()["debug_handle_map"]["forward"].items()}
    handles = sorted({h for hs in rec.debug_handle_map["forward"].values() for h in hs})
    assert forward.raw.debug_handles.handle == handles
    for h in handles:
        assert forward.debug_handle(h).op.startswith("executorch.exir.dialects.edge.ops.aten.")


def test_recomputed_handles_equal_executorchs(forward: tracepack.Document) -> None:
    """from_node -> greatest ancestor -> numbered in order, against ExecuTorch's stored handles."""
    theirs = manifest()["edge_debug_handles"]["forward"]
    names = [n.name for n in forward.nodes()]
    recomputed = recompute_handles(forward)
    stored = stored_handles(forward)
    assert len(recomputed) == len(forward) == len(stored)
    assert {names[i]: h for i, h in recomputed.items()} == {n: theirs[n] for n in names}
    assert stored == recomputed


def test_recomputing_everywhere_gives_the_same_table(forward: tracepack.Document) -> None:
    again = import_etrecord(ETRECORD.read_bytes(), recompute=True)["forward"]
    handles = forward.raw.debug_handles.handle
    assert again.raw.debug_handles.handle == handles
    assert [again.debug_handle(h) for h in handles] == [forward.debug_handle(h) for h in handles]


def test_handles_are_stored_once_and_come_back_in_the_metadata(forward: tracepack.Document) -> None:
    """ExecuTorch's per-node `debug_handle` strings are kept as integers beside the handle table; the
    node metadata and model.json have them back in place."""
    from tracepack.torch.executorch.etrecord import restore_debug_handles

    assert "debug_handle" not in forward.node(0).meta
    restored = restore_debug_handles(forward)
    names = {n.name: n.meta for n in restored.nodes()}
    theirs = manifest()["edge_debug_handles"]["forward"]
    assert {k: int(m["debug_handle"]) for k, m in names.items()} == {k: theirs[k] for k in names}
    assert list(names["aten_embedding_default"]) == [
        "stack_trace",
        "nn_module_stack",
        "torch_fn",
        "debug_handle",
        "from_node",
    ]


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
def test_every_instruction_answers_as_inspector_does(forward: tracepack.Document, tmp_path: Path, lazy: bool) -> None:
    doc: object = forward
    if lazy:
        path = tmp_path / "forward.tpk"
        tracepack.dump(forward, path, codec="flatbuffers", compression="none")
        doc = tracepack.open(path)
    sym = Symbolicator(doc)  # type: ignore[arg-type]
    rows = manifest()["instructions"]["forward"]
    assert rows
    for instr, want in rows.items():
        got = sym.instruction(0, int(instr))
        assert [h.handle for h in got.handles] == want["handles"]
        nodes = [n for h in got.handles for n in h.nodes]
        # Inspector's operator graph names a node `<name>_`; it keeps the fx stack_trace and the
        # nn_module_stack (as a dict) of every node with the handle.
        assert [n.name + "_" for n in nodes] == [n["name"] for n in want["nodes"]]
        assert [n.op for n in nodes] == [n["op"] for n in want["nodes"]]
        assert [n.stack_trace for n in nodes] == [n["stack_trace"] for n in want["nodes"]]
        assert [_ours(n.nn_module_stack) for n in nodes] == [
            _inspector_nn_module_stack(n["nn_module_stack"]) for n in want["nodes"]
        ]
    with pytest.raises(NotFoundError):
        sym.instruction(0, 10_000)
    with pytest.raises(NotFoundError):
        sym.handle(10_000)


def test_inspector_events_get_the_same_handles_and_stacks(forward: tracepack.Document) -> None:
    sym = Symbolicator(forward)
    checked = 0
    for ev in manifest()["inspector_events"]:
        if not ev["stack_traces"]:
            continue
        got = sym.instruction(0, ev["instruction_id"])
        want = ev["debug_handles"] if isinstance(ev["debug_handles"], list) else [ev["debug_handles"]]
        assert [h.handle for h in got.handles] == want
        assert {n.name + "_": n.stack_trace for h in got.handles for n in h.nodes} == ev["stack_traces"]
        assert [n.op for h in got.handles for n in h.nodes] == ev["op_types"]
        checked += 1
    assert checked == 28  # every operator event of both blocks (14 instructions, native_call + OPERATOR_CALL)


def test_convert_keeps_the_handle_table_through_every_codec(forward: tracepack.Document) -> None:
    for codec in ("json", "msgpack", "flatbuffers-rows", "columnar", "flatbuffers-columns"):
        back = tracepack.loads(tracepack.dumps(forward, codec=codec))
        assert back.raw.debug_handles == forward.raw.debug_handles
        assert back.extension("executorch/method") == forward.extension("executorch/method")


def _zip(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return out.getvalue()


def test_bad_etrecords_are_one_line_errors() -> None:
    good = {n: zipfile.ZipFile(ETRECORD).read(n) for n in zipfile.ZipFile(ETRECORD).namelist()}
    with pytest.raises(LegacyFormatError, match="not an ETRecord"):
        read_etrecord(_zip({"x": b"1"}), source="x.zip")
    with pytest.raises(LegacyFormatError, match="no edge-dialect program"):
        read_etrecord(_zip({"ETRECORD_V0": b""}), source="r")
    with pytest.raises(LegacyFormatError, match=r"debug_handle_map.*not valid JSON"):
        read_etrecord(_zip({**good, "debug_handle_map": b"{"}), source="r")
    with pytest.raises(LegacyFormatError, match="entry 'x'"):
        read_etrecord(_zip({**good, "debug_handle_map": b'{"forward": {"x": 1}}'}), source="r")
    with pytest.raises(InputError, match="no method 'nope'"):
        import_etrecord(ETRECORD.read_bytes(), methods=["nope"])
    with pytest.raises(InputError):
        import_etrecord(_zip({**good, "edge_dialect_exported_program/forward": b"[1]"}))


def test_the_edge_program_comes_back_byte_for_byte(forward: tracepack.Document) -> None:
    """Nothing of ExecuTorch's program JSON is lost on the way into the document."""
    from tracepack.torch.export.model_json import export_model_json

    member = zipfile.ZipFile(ETRECORD).read("edge_dialect_exported_program/forward")
    assert export_model_json(forward) == member
    assert export_model_json(tracepack.loads(tracepack.dumps(forward, codec="columnar"))) == member


def test_every_method_of_a_multi_method_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One document per method; a log's instruction is answered in the method asked for."""
    from tracepack.cli import main

    src = zipfile.ZipFile(ETRECORD)
    members = {n: src.read(n) for n in src.namelist()}
    members["edge_dialect_exported_program/decode"] = members["edge_dialect_exported_program/forward"]
    members["debug_handle_map"] = b'{"forward": {"0": 1}, "decode": {"0": 3}}'
    path = tmp_path / "two.etrecord"
    path.write_bytes(_zip(members))
    docs = import_etrecord(path.read_bytes())
    assert list(docs) == ["forward", "decode"]
    assert Symbolicator(docs["decode"]).instruction(0, 0).handles[0].handle == 3
    assert main(["symbolicate", str(path), "--instruction", "0:0", "--method", "decode", "--json"]) == 0
    (ref,) = json.loads(capsys.readouterr().out)["references"]
    assert ref["answers"][0]["method"] == "decode"
    assert ref["answers"][0]["handles"][0]["handle"] == 3
    assert main(["symbolicate", str(path), "--instruction", "0:0", "--method", "nope"]) == 2
