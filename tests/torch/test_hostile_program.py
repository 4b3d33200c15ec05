"""Crafted programs through the torch side (issue 24): every cause of the issue's 65 unhandled
exceptions, each one line naming the file and the place now. torch.export.load, the reference,
refuses the same programs (with its own tracebacks) or loads them as tracepack.torch.load does."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.torch.conftest import CORPUS, PACKAGE_LAYOUT, READS_PACKAGE, TORCH_MARKS, TORCH_VERSION
from tracepack.cli import main
from tracepack.errors import DecodeError, LegacyFormatError

torch = pytest.importorskip("torch")
import tracepack  # noqa: E402
import tracepack.torch as tt  # noqa: E402 - needs torch
from tracepack import model as m  # noqa: E402
from tracepack.document import Document  # noqa: E402
from tracepack.torch import pt2  # noqa: E402
from tracepack.torch.export.model_json import _extension, export_model_json, import_model_json  # noqa: E402

pytestmark = TORCH_MARKS

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "src/tracepack/data/sample/tiny_transformer.pt2"
PROGRAM = "tiny_transformer/models/model.json"


def _program(path: Path = SAMPLE) -> tuple[str, Any]:
    with zipfile.ZipFile(path) as z:
        name = next(n for n in z.namelist() if n.endswith("models/model.json"))
        return name, json.loads(z.read(name))


def _with_program(tmp_path: Path, text: bytes, src: Path = SAMPLE) -> Path:
    """``src`` with its program member replaced by ``text``."""
    name, _ = _program(src)
    out = io.BytesIO()
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(out, "w") as w:
        for info in z.infolist():
            w.writestr(info, text if info.filename == name else z.read(info))
    path = tmp_path / "crafted.pt2"
    path.write_bytes(out.getvalue())
    return path


def _edited(tmp_path: Path, edit: Callable[[Any], None], src: Path = SAMPLE) -> Path:
    _, program = _program(src)
    edit(program)
    return _with_program(tmp_path, json.dumps(program).encode(), src)


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text
    return text


# -- torch's own errors inside tracepack.torch.load -----------------------------------------------------


@READS_PACKAGE.mark  # torch.export.load of the sample, a <name>/models/ archive, is the reference
def test_a_target_that_is_not_an_operator_names_the_nodes_target(tmp_path: Path) -> None:
    path = _edited(tmp_path, lambda p: p["graph_module"]["graph"]["nodes"][3].update(target="os.system"))
    with pytest.raises(RuntimeError, match="error when deserializing"):
        torch.export.load(path)  # the reference refuses it too (its SerializeError logged as a warning)
    with pytest.raises(LegacyFormatError) as err:
        tt.load(path)
    text = _one_line(err.value)
    assert text.startswith(f"{path}:{PROGRAM}: $.graph_module.graph.nodes[3].target: torch cannot load the program: ")
    assert "failed to resolve os.system to an operator" in text


@READS_PACKAGE.mark  # torch.export.load of the sample, a <name>/models/ archive, is the reference
def test_a_broken_node_names_the_node(tmp_path: Path) -> None:
    def edit(p: Any) -> None:
        p["graph_module"]["graph"]["nodes"][3]["inputs"][0]["arg"] = {"as_tensor": {"name": "no_such_value"}}

    path = _edited(tmp_path, edit)
    with pytest.raises(RuntimeError, match="error when deserializing"):
        torch.export.load(path)
    with pytest.raises(LegacyFormatError) as err:
        tt.load(path)
    assert _one_line(err.value).startswith(f"{path}:{PROGRAM}: $.graph_module.graph.nodes[3]: ")
    assert "KeyError: 'no_such_value'" in str(err.value)


@PACKAGE_LAYOUT.mark  # loads the sample, a <name>/models/ archive
def test_a_broken_node_in_a_nested_graph_names_its_path(tmp_path: Path) -> None:
    src = CORPUS / "cond.pt2"

    def edit(p: Any) -> None:
        branch = p["graph_module"]["graph"]["nodes"][3]["inputs"][1]["arg"]["as_graph"]["graph"]
        branch["nodes"][0]["target"] = "os.system"

    path = _edited(tmp_path, edit, src)
    with pytest.raises(LegacyFormatError) as err:
        tt.load(path)
    where = "$.graph_module.graph.nodes[3].inputs[1].arg.as_graph.graph.nodes[0].target"
    assert f": {where}: torch cannot load the program: " in _one_line(err.value)


def _tensor_value(p: Any, name: str = "p_embed_bias") -> Any:
    return p["graph_module"]["graph"]["tensor_values"][name]


#: torch's errors outside any node (found by the torch_load fuzz harness: a tensor value torch cannot
#: make, a tree spec it cannot read, a signature its verifier refuses) -> the place named, what torch
#: said, and what torch.export.load (the reference) raises on the same archive.
ELSEWHERE: dict[str, tuple[Callable[[Any], None], str, str, type[Exception], str]] = {
    "device not a device": (
        lambda p: _tensor_value(p)["device"].update(type="nodevice"),
        '$.graph_module.graph.tensor_values["p_embed_bias"]',
        "RuntimeError: Expected one of cpu",
        RuntimeError,
        "error when deserializing",  # torch logs its RuntimeError as a warning and raises this one
    ),
    "strides longer than sizes": (
        lambda p: _tensor_value(p)["strides"].append({"as_int": 1}),
        '$.graph_module.graph.tensor_values["p_embed_bias"]',
        "RuntimeError: dimensionality of sizes (1) must match dimensionality of strides (2)",
        RuntimeError,
        "error when deserializing",
    ),
    "integer that requires grad": (
        lambda p: _tensor_value(p).update(dtype=4),
        '$.graph_module.graph.tensor_values["p_embed_bias"]',
        "RuntimeError: only Tensors of floating point dtype can require gradients",
        RuntimeError,
        "error when deserializing",
    ),
    "input with no value": (
        lambda p: p["graph_module"]["graph"]["inputs"][1]["as_tensor"].update(name="p_no_such"),
        "$.graph_module.graph",
        "KeyError: 'p_no_such'",
        KeyError,
        "p_no_such",
    ),
    "tree spec of another protocol": (
        lambda p: p["graph_module"]["module_call_graph"][0]["signature"].update(in_spec='[0, {"type": null}]'),
        "$.graph_module.module_call_graph[0].signature",
        "ValueError: Unknown protocol 0",
        ValueError,
        "Unknown protocol 0",
    ),
    "input spec naming no node": (
        lambda p: p["graph_module"]["signature"]["input_specs"][0]["parameter"]["arg"].update(name="p_other"),
        "$.graph_module.signature",
        "SpecViolationError: Input spec name p_other does not match node name p_embed_weight",
        torch._export.verifier.SpecViolationError,
        "Input spec name p_other does not match",
    ),
}


@READS_PACKAGE.mark  # torch.export.load of the sample, a <name>/models/ archive, is the reference
@pytest.mark.parametrize("case", sorted(ELSEWHERE))
def test_torchs_errors_outside_nodes_name_the_part_it_was_reading(case: str, tmp_path: Path) -> None:
    edit, where, said, reference, reference_said = ELSEWHERE[case]
    path = _edited(tmp_path, edit)
    with pytest.raises(reference, match=reference_said):
        torch.export.load(path)  # the reference refuses it too
    with pytest.raises(LegacyFormatError) as err:
        tt.load(path)
    text = _one_line(err.value)
    assert text.startswith(f"{path}:{PROGRAM}: {where}: torch cannot load the program: {said}"), text


# -- parsers: depth, digits, UTF-8 -------------------------------------------------------------------


def _first_as_int(text: str, replacement: str) -> bytes:
    at = text.index('{"as_int": ')
    end = text.index("}", at) + 1
    return (text[:at] + replacement + text[end:]).encode()


@PACKAGE_LAYOUT.mark  # loads the sample, a <name>/models/ archive
def test_an_argument_nested_990_deep_is_within_the_budget(tmp_path: Path) -> None:
    """990 arrays deep (the issue's RecursionError in pack and load) sits just under the max_depth
    budget: pack takes it and gives it back byte for byte; torch's schema refuses the argument."""
    _, program = _program()
    text = _first_as_int(json.dumps(program), "[" * 990 + "]" * 990)
    path = _with_program(tmp_path, text)
    with pytest.raises(LegacyFormatError) as err:
        tt.load(path)
    assert _one_line(err.value).startswith(f"{path}:{PROGRAM}: $.graph_module.graph.nodes[")
    assert "does not match torch's export schema" in str(err.value)
    pt2.pack_pt2_file(path, tmp_path / "packed.pt2")
    pt2.unpack_pt2_file(tmp_path / "packed.pt2", tmp_path / "back.pt2")
    with zipfile.ZipFile(tmp_path / "back.pt2") as z:
        assert z.read(PROGRAM) == text


@PACKAGE_LAYOUT.mark  # loads the sample, a <name>/models/ archive
@pytest.mark.parametrize("depth", [1_500, 100_000])
def test_an_argument_nested_past_the_budget_is_refused_at_it(tmp_path: Path, depth: int) -> None:
    _, program = _program()
    text = _first_as_int(json.dumps(program), "[" * depth + "]" * depth)
    path = _with_program(tmp_path, text)
    for load in (lambda: tt.load(path), lambda: pt2.pack_pt2_file(path, tmp_path / "packed.pt2")):
        with pytest.raises(LegacyFormatError) as err:
            load()
        line = _one_line(err.value)
        head = f"{path}:{PROGRAM}: byte "
        assert line.startswith(head), line
        at = int(line[len(head) :].split(":", 1)[0])
        start = text.index(b"[" * 10)
        assert start < at < start + depth  # the bracket where the nesting passes the budget
        assert "nested more than 1,000 levels deep" in line
    assert not (tmp_path / "packed.pt2").exists()


@READS_PACKAGE.mark  # torch.export.load of the sample, a <name>/models/ archive, is the reference
def test_from_node_nested_100000_deep_is_refused_at_the_budget(tmp_path: Path) -> None:
    """``from_node`` is JSON text torch parses when it loads the program: nested 100,000 deep, torch's
    parse runs out of recursion (torch.export.load too, from 2.12: 2.10 never parses it); tracepack.torch.load names the node's entry
    and the budget. Importing and packing keep the text as it is, byte for byte."""
    _, program = _program(CORPUS / "helpers.pt2")
    nodes = program["graph_module"]["graph"]["nodes"]
    nodes[0]["metadata"]["from_node"] = "[" * 100_000 + "]" * 100_000
    text = json.dumps(program).encode()
    assert export_model_json(import_model_json(text, source="m.json")) == text
    path = _with_program(tmp_path, text, CORPUS / "helpers.pt2")
    if TORCH_VERSION is None or TORCH_VERSION >= (2, 12):  # torch parses from_node as it loads
        with pytest.raises(RuntimeError, match="error when deserializing"):
            torch.export.load(path)
        with pytest.raises(LegacyFormatError) as err:
            tt.load(path)
        where = "$.graph_module.graph.nodes[0].metadata.from_node"
        assert f": {where}: nested more than 1,000 levels deep" in _one_line(err.value)
    else:  # torch 2.10 never parses from_node: both load the program, the text untouched
        torch.export.load(path)
        tt.load(path)
    packed = pt2.pack_pt2(path.read_bytes(), source="m.pt2")
    with zipfile.ZipFile(io.BytesIO(pt2.unpack_pt2(packed, source="p.pt2"))) as z:
        assert z.read(_program(CORPUS / "helpers.pt2")[0]) == text


@PACKAGE_LAYOUT.mark  # loads the sample, a <name>/models/ archive
def test_an_integer_of_5000_digits_is_refused_by_tracepack_not_python(tmp_path: Path) -> None:
    _, program = _program()
    text = _first_as_int(json.dumps(program), '{"as_int": ' + "9" * 5000 + "}")
    path = _with_program(tmp_path, text)
    for load in (
        lambda: tt.load(path),
        lambda: pt2.pack_pt2_file(path, tmp_path / "packed.pt2"),
        lambda: import_model_json(text, source=f"{path}:{PROGRAM}"),
    ):
        with pytest.raises(LegacyFormatError) as err:
            load()
        line = _one_line(err.value)
        assert line.startswith(
            f"{path}:{PROGRAM}: byte {text.index(b'9' * 5000)}: an integer of more than 4,300 digits"
        )
        assert "--limit max_int_digits=N" in line


@PACKAGE_LAYOUT.mark  # loads the sample, a <name>/models/ archive
def test_invalid_utf8_names_the_byte(tmp_path: Path) -> None:
    _, program = _program()
    text = json.dumps(program).encode()
    at = text.index(b'"stack_trace": "') + len(b'"stack_trace": "')
    path = _with_program(tmp_path, text[:at] + b"\xff" + text[at:])
    with pytest.raises(LegacyFormatError) as err:
        tt.load(path)
    assert _one_line(err.value) == f"{path}:{PROGRAM}: byte {at}: not UTF-8 text"


@READS_PACKAGE.mark  # torch.export.load of the sample, a <name>/models/ archive, is the reference
def test_a_lone_surrogate_in_a_stack_trace_stays_in_the_packed_program(tmp_path: Path) -> None:
    """JSON allows ``\\ud800`` and torch writes it; no UTF-8 holds it, so pack leaves that one string in
    the program (everything else moves): the archive comes back byte for byte, and torch.load gives
    the string torch.export.load gives. convert refuses it in one line (a document's strings are UTF-8)."""
    _, program = _program()
    program["graph_module"]["graph"]["nodes"][3]["metadata"]["stack_trace"] += "\ud800"
    text = json.dumps(program).encode()
    path = _with_program(tmp_path, text)
    packed = tmp_path / "packed.pt2"
    pt2.pack_pt2_file(path, packed)
    with zipfile.ZipFile(packed) as z:
        kept = json.loads(z.read(PROGRAM))["graph_module"]["graph"]["nodes"]
    assert "\ud800" in kept[3]["metadata"]["stack_trace"]
    assert all("stack_trace" not in n["metadata"] for i, n in enumerate(kept) if i != 3)  # the rest moved
    back = tmp_path / "back.pt2"
    pt2.unpack_pt2_file(packed, back)
    with zipfile.ZipFile(back) as z:
        assert z.read(PROGRAM) == text
    want = [n.meta.get("stack_trace") for n in torch.export.load(path).graph.nodes]
    assert [n.meta.get("stack_trace") for n in tt.load(packed).graph.nodes] == want
    out = tmp_path / "out.tpk"
    assert main(["convert", str(path), str(out)]) == 2
    assert not out.exists()


def test_the_version_probe_of_an_old_archive_holds_the_budget(tmp_path: Path) -> None:
    """torch 2.5's flat archive (upgraded by tracepack.torch.load): the probe that reads its
    schema_version and the upgrade both parse within the budget."""
    src = ROOT / "tests/data/torch/releases/2.5/cond.pt2"
    with zipfile.ZipFile(src) as z:
        program = json.loads(z.read("serialized_exported_program.json"))
    deep = json.dumps(program).replace('"nodes": [', '"nodes": [' + "[" * 100_000 + "]" * 100_000 + ", ", 1)
    out = io.BytesIO()
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(out, "w") as w:
        for info in z.infolist():
            name = info.filename
            w.writestr(info, deep.encode() if name == "serialized_exported_program.json" else z.read(info))
    path = tmp_path / "old.pt2"
    path.write_bytes(out.getvalue())
    with pytest.raises(LegacyFormatError, match="nested more than 1,000 levels deep") as err:
        tt.load(path)
    assert _one_line(err.value).startswith(f"{path}:serialized_exported_program.json: byte ")


# -- crafted extensions through the exporter ------------------------------------------------------------


def _sample_doc() -> Document:
    return import_model_json(_program()[1] and json.dumps(_program()[1]).encode(), source="model.json")


def _with_extension(doc: Document, name: str, value: Any) -> Document:
    raw = tracepack.loads(tracepack.dumps(doc)).raw
    at = next(i for i, e in enumerate(raw.extensions) if e.name.startswith(name))
    raw.extensions[at] = m.Extension(raw.extensions[at].name, json.dumps(value))
    return Document(raw)


def _with_value(doc: Document, field: str, value: Any) -> Document:
    raw = tracepack.loads(tracepack.dumps(doc)).raw
    if isinstance(value, str):
        raw.strings.append(value)
        value = len(raw.strings) - 1
    setattr(raw.graph.values[0], field, value)
    return Document(raw)


def _layout(doc: Document) -> Any:
    return _extension(doc, "torch.export/nodes", "torch.export/nodes-2")[0]


CRAFTED: dict[str, tuple[Callable[[Document], Document], str]] = {
    "a dtype that is not a dtype": (
        lambda d: _with_value(d, "dtype", "NOTADTYPE"),
        "$.graph.values[0].dtype: dtype 'NOTADTYPE' is not a torch export dtype",
    ),
    "device cpu:x": (lambda d: _with_value(d, "device", "cpu:x"), "$.graph.values[0].device: device 'cpu:x'"),
    "sym_shape longer than shape": (
        lambda d: _with_value(d, "sym_shape", [0, 0, 0]),
        "$.graph.values[0].sym_shape: 3 symbolic shape entries for 2 shape entries",
    ),
    "nodes layout {}": (
        lambda d: _with_extension(d, "torch.export/nodes", {}),
        "$.extensions[1] (torch.export/nodes) $: has no keys",
    ),
    "nodes layout []": (
        lambda d: _with_extension(d, "torch.export/nodes", []),
        "$.extensions[1] (torch.export/nodes) $: is an empty array",
    ),
    "keys an int": (
        lambda d: _with_extension(d, "torch.export/nodes", {**_layout(d), "keys": 3}),
        "$.extensions[1] (torch.export/nodes) $.keys: is an integer (3)",
    ),
    "whole a list": (
        lambda d: _with_extension(d, "torch.export/nodes", {**_layout(d), "whole": []}),
        "$.extensions[1] (torch.export/nodes) $.whole: is an empty array",
    ),
    "program []": (
        lambda d: _with_extension(d, "torch.export/program", []),
        "$.extensions[0] (torch.export/program) $: is an empty array",
    ),
    "program without graph_module": (
        lambda d: _with_extension(d, "torch.export/program", {"schema_version": {"major": 8, "minor": 20}}),
        "$.extensions[0] (torch.export/program) $: has no graph_module",
    ),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_the_exporter_checks_each_extension_it_reads(case: str, tmp_path: Path) -> None:
    craft, where = CRAFTED[case]
    doc = craft(_sample_doc())
    for export in (lambda: export_model_json(doc), lambda: tt.from_document(doc)):
        with pytest.raises(DecodeError) as err:
            export()
        assert _one_line(err.value).startswith(where), str(err.value)
    src, out = tmp_path / "crafted.tpk", tmp_path / "model.json"
    src.write_bytes(tracepack.dumps(doc))
    err_text = io.StringIO()
    from contextlib import redirect_stderr

    with redirect_stderr(err_text):
        assert main(["expand", str(src), str(out)]) == 2
    assert err_text.getvalue() == f"tracepack: {src}: {_one_line(_raised(doc))}\n"
    assert not out.exists()


def _raised(doc: Document) -> BaseException:
    try:
        export_model_json(doc)
    except DecodeError as exc:
        return exc
    raise AssertionError("not refused")


def test_a_sample_document_still_round_trips_through_the_checks() -> None:
    _, program = _program()
    text = json.dumps(program).encode()
    doc = import_model_json(text, source="model.json")
    assert export_model_json(doc) == text
    assert export_model_json(tracepack.loads(tracepack.dumps(doc, codec="flatbuffers"))) == text


def test_the_upgrade_of_an_old_archive_names_the_file(tmp_path: Path) -> None:
    """A torch 2.1 program with a backward signature (the campaign gave it one of every JSON type):
    the upgrade refuses it, naming the file and the member, for tracepack.torch.load and upgrade."""
    src = ROOT / "tests/data/torch/releases/2.1/dynamic.pt2"
    with zipfile.ZipFile(src) as z:
        program = json.loads(z.read("serialized_exported_program.json"))
    program["graph_module"]["signature"]["backward_signature"] = "x"
    out = io.BytesIO()
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(out, "w") as w:
        for info in z.infolist():
            body = json.dumps(program).encode() if info.filename == "serialized_exported_program.json" else z.read(info)
            w.writestr(info, body)
    path = tmp_path / "old.pt2"
    path.write_bytes(out.getvalue())
    want = f"{path}:serialized_exported_program.json: $.graph_module.signature.backward_signature: "
    with pytest.raises(LegacyFormatError) as err:
        tt.load(path)
    assert _one_line(err.value).startswith(want)
    assert main(["upgrade", str(path), str(tmp_path / "new.pt2")]) == 2
    assert not (tmp_path / "new.pt2").exists()
