"""Schema 1.2: interned extension JSON, the program's signature and module call graph as tables, and the
1.1 <-> 1.2 migration (upgrades add nothing; downgrades put everything back into the program's JSON)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tracepack_generated import v1_1, v1_2

import tracepack
from tests.migrations.strategies import documents_1_1, json_values, module_call_entries, signatures
from tests.releases.samples import files, path
from tracepack import DecodeError, VersionError, interned_json, migrations, program_tables
from tracepack.io.zip import open_archive
from tracepack.migrations import v1_1_to_v1_2 as step
from tracepack.torch import pt2
from tracepack.torch.export.model_json import export_model_json, import_model_json

pytestmark = pytest.mark.skipif(tracepack.versions.CURRENT < (1, 2), reason="written for schema 1.2")


def _model_json(version: str, name: str) -> bytes:
    with open_archive(path(version, name).read_bytes(), source=name) as archive:
        return pt2.read_program(archive)[1]


#: A real program torch 2.13 wrote (no torch needed to read it).
_PROGRAM = json.loads(_model_json("2.13", "mlp.pt2"))


class _Interner:
    def __init__(self) -> None:
        self.strings = [""]
        self.ids = {"": 0}

    def __call__(self, s: str) -> int:
        if s not in self.ids:
            self.ids[s] = len(self.strings)
            self.strings.append(s)
        return self.ids[s]


@given(json_values)
def test_interned_json_gives_the_text_back(value: Any) -> None:
    text = json.dumps(value)
    intern = _Interner()
    parts = interned_json.split(text, intern)
    assert parts is not None
    template, refs = parts
    assert interned_json.fill(template, refs, intern.strings) == text
    # Every string value went into the string table; the template has none left but "".
    assert all(s == "" for s in _strings_of(json.loads(template)))
    assert [intern.strings[i] for i in refs] == _strings_of(value)


def _strings_of(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings_of(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings_of(v)]
    return []


@given(json_values)
def test_interned_json_keeps_text_json_dumps_would_not_write(value: Any) -> None:
    compact = json.dumps(value, separators=(",", ":"))
    parts = interned_json.split(compact, _Interner())
    assert (parts is None) == (compact != json.dumps(value))
    assert interned_json.split(compact + " x", _Interner()) is None


def test_a_template_whose_refs_do_not_match_is_a_one_line_error() -> None:
    with pytest.raises(DecodeError, match=r"2 string values but 3 refs"):
        interned_json.fill('["", {"a": ""}]', [1, 1, 1], ["", "x"], where="$.extensions[4]")
    with pytest.raises(DecodeError, match=r"more string values than its 1 refs"):
        interned_json.fill('["", ""]', [1], ["", "x"])
    with pytest.raises(DecodeError, match=r"ref 9 is outside the string table") as info:
        interned_json.fill('[""]', [9], ["", "x"], where="$.extensions[1]")
    assert info.value.where == "$.extensions[1].refs[0]"
    with pytest.raises(DecodeError, match="not JSON"):
        interned_json.fill("[", [], [""])


@given(signatures(), st.lists(module_call_entries(), max_size=5))
def test_signature_and_module_call_tables_give_the_json_back(sig: dict[str, Any], calls: list[Any]) -> None:
    intern = _Interner()
    table = program_tables.signature_table(intern, sig)
    assert table is not None
    assert json.dumps(program_tables.signature_json(intern.strings, table)) == json.dumps(
        {"input_specs": sig["input_specs"], "output_specs": sig["output_specs"]}
    )
    typed = sum(1 for j in table.json if j == 0)
    assert typed == sum(1 for x in [*sig["input_specs"], *sig["output_specs"]] if program_tables._spec_row(x))
    mc = program_tables.module_call_table(intern, calls)
    assert mc is not None
    assert json.dumps(program_tables.module_calls_json(intern.strings, mc)) == json.dumps(calls)


def test_torch_specs_are_typed_and_odd_ones_kept_whole() -> None:
    intern = _Interner()
    sig = {
        "input_specs": [
            {"parameter": {"arg": {"name": "p_w"}, "parameter_name": "w"}},
            {"buffer": {"arg": {"name": "b"}, "buffer_name": "b", "persistent": True}},
            {"user_input": {"arg": {"as_tensor": {"name": "x"}}}},
            {"user_input": {"arg": {"as_int": 3}}},
            {"custom_obj": {"arg": {"name": "c", "class_fqn": "q"}, "custom_obj_name": "c"}},
        ],
        "output_specs": [{"user_output": {"arg": {"as_tensor": {"name": "y"}}}}],
    }
    table = program_tables.signature_table(intern, sig)
    assert table is not None
    assert [bool(j) for j in table.json] == [False, False, False, True, True, False]
    assert table.output == [False] * 5 + [True]
    assert table.persistent[:2] == [0, 2]
    assert [intern.strings[i] for i in table.arg[:3]] == ["p_w", "b", "x"]
    assert program_tables.signature_table(intern, {"input_specs": []}) is None
    assert program_tables.module_call_table(intern, {"fqn": ""}) is None


def _program_with(sig: dict[str, Any], calls: list[Any]) -> bytes:
    program = json.loads(json.dumps(_PROGRAM))
    program["graph_module"]["signature"] = sig
    program["graph_module"]["module_call_graph"] = calls
    return json.dumps(program).encode("ascii")


@given(signatures(), st.lists(module_call_entries(), max_size=4))
def test_a_1_2_program_goes_down_to_1_1_and_back_byte_for_byte(sig: dict[str, Any], calls: list[Any]) -> None:
    data = _program_with(sig, calls)
    doc = import_model_json(data)
    raw = doc.raw
    assert raw.signature is not None
    assert raw.module_calls is not None
    assert all(not e.json for e in raw.extensions if e.template)
    down = migrations.downgrade(raw, (1, 2), (1, 1))
    assert isinstance(down, v1_1.model.Document)
    v1_1.validate.validate(down)
    # A 1.1 reader sees the whole program in its JSON, as 1.1 writers wrote it.
    program = json.loads(next(e.json for e in down.extensions if e.name == program_tables.PROGRAM_EXTENSION))
    assert json.dumps(program["graph_module"]["signature"]) == json.dumps(sig)
    assert program["graph_module"]["module_call_graph"] == calls
    up = migrations.upgrade(down, (1, 1), (1, 2))
    assert up.signature is None
    assert all(not e.template for e in up.extensions)
    assert export_model_json(tracepack.Document(up)) == data
    assert export_model_json(doc) == data


@pytest.mark.parametrize(("version", "name"), files("export"))
def test_every_release_file_comes_back_written_as_1_1_and_as_1_2(version: str, name: str) -> None:
    """What torch releases wrote, typed in 1.2, and written as 1.1 (the tables back in the program's JSON)."""
    data = _model_json(version, name)
    doc = import_model_json(data)
    gm = json.loads(data)["graph_module"]
    assert (doc.raw.signature is not None) == ("input_specs" in gm["signature"])  # torch 2.1: older form, as JSON
    assert (doc.raw.module_calls is not None) == ("module_call_graph" in gm)
    for codec in ("msgpack", "columnar"):
        as_1_1 = tracepack.dumps(doc, codec=codec, version=(1, 1))
        assert export_model_json(tracepack.loads(as_1_1)) == data
        assert export_model_json(tracepack.loads(tracepack.dumps(doc, codec=codec))) == data


@given(documents_1_1())
def test_1_1_documents_upgrade_and_downgrade_back_equal(raw: Any) -> None:
    up = step.upgrade(raw)
    assert isinstance(up, v1_2.model.Document)
    assert up.signature is None
    assert up.module_calls is None
    assert step.downgrade(up) == raw


def test_downgrade_refuses_what_does_not_fill_in() -> None:
    doc = import_model_json(_model_json("2.13", "mlp.pt2"))
    at = next(i for i, e in enumerate(doc.raw.extensions) if e.template)
    broken = list(doc.raw.extensions)
    broken[at] = msgspec.structs.replace(broken[at], refs=broken[at].refs[:-1])
    raw = msgspec.structs.replace(doc.raw, extensions=broken)
    with pytest.raises(VersionError, match="does not fill in") as info:
        migrations.downgrade(raw, (1, 2), (1, 1))
    assert info.value.where == f"$.extensions[{at}].refs"
    # Tables without a program to go into.
    bare = msgspec.structs.replace(doc.raw, extensions=[])
    with pytest.raises(VersionError, match="without a program"):
        migrations.downgrade(bare, (1, 2), (1, 1))


def test_an_unknown_argument_form_is_a_one_line_error() -> None:
    doc = import_model_json(_model_json("2.13", "mlp.pt2"))
    assert doc.raw.signature is not None
    doc.raw.signature.arg_form[0] = 7
    with pytest.raises(DecodeError, match="unknown argument form 7") as info:
        export_model_json(doc)
    assert info.value.where == "$.signature.arg_form[0]"


def test_the_lazy_reader_fills_interned_extensions_in(tmp_path: Path) -> None:
    doc = import_model_json(_model_json("2.13", "mlp.pt2"))
    assert any(e.template for e in doc.raw.extensions)
    out = tmp_path / "mlp.tpk"
    tracepack.dump(doc, out, codec="flatbuffers", compression="none")
    lazy = tracepack.open(out)
    for e in doc.raw.extensions:
        text = lazy.extension(e.name)
        assert text == doc.extension(e.name)
        assert text is not None
        json.loads(text)
    assert lazy.extension("no such extension") is None


def test_a_1_1_reader_refuses_the_program_instead_of_misreading_it() -> None:
    """What a 1.1 build sees of a 1.2 torch file (newer minors are read with the newest known model): the
    program's extension has no JSON text, which is not JSON, so its torch export fails loudly; the
    signature is not there to be lost silently."""
    doc = import_model_json(_model_json("2.13", "mlp.pt2"))
    seen = msgspec.msgpack.decode(msgspec.msgpack.encode(doc.raw), type=v1_1.model.Document)
    program = next(e for e in seen.extensions if e.name == program_tables.PROGRAM_EXTENSION)
    assert program.json == ""
    with pytest.raises(DecodeError):
        tracepack.document.json_value(program.json, "$.extensions[0].json")


def test_inspect_shows_the_new_tables_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tracepack.cli import main

    src, out = tmp_path / "model.json", tmp_path / "m.tpk"
    src.write_bytes(_model_json("2.13", "mlp.pt2"))
    assert main(["convert", str(src), str(out), "--codec", "columnar"]) == 0
    capsys.readouterr()
    assert main(["inspect", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    columns = {f"{c['table']}.{c['column']}": c for c in info["columns"]}
    for name in ("signature.arg[]", "signature.target[]", "module_calls.fqn[]", "extensions.[].template"):
        assert columns[name]["compressed_bytes"] > 0, name
    assert info["compressed_bytes"]["signature"] > 0
