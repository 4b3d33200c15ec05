"""Tensor values of every release's form: typed, and spelled back byte for byte."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.releases.samples import files, path, readback
from tests.releases.strategies import FORMS, hint_tables, hints, old_module_stacks, sym_int_lists, typed_values
from tracepack.model import ArgGeneric
from tracepack.torch.archives import import_archive
from tracepack.torch.export.model_json import _argument_json, _argument_json_2, _compact_sym_ints
from tracepack.torch.export.upgrade import _module_stack_v1
from tracepack.torch.export.values import (
    ValueForm,
    decode_value,
    derivable_hints,
    derive_hint,
    detect_form,
    encode_value,
    known_hints,
)

EXPORTS = files("export")
#: torch's dtype names -> torch.export's ScalarType names.
TORCH_DTYPES = {
    "float32": "FLOAT",
    "float64": "DOUBLE",
    "int64": "LONG",
    "int32": "INT",
    "bool": "BOOL",
    "float16": "HALF",
}


@pytest.mark.parametrize(("version", "name"), EXPORTS)
def test_every_value_is_typed(version: str, name: str) -> None:
    doc = import_archive(name, path(version, name).read_bytes())
    values = doc.raw.graph.values
    assert values
    assert [doc.strings[v.name] for v in values if v.json] == []


@pytest.mark.parametrize(("version", "name"), EXPORTS)
def test_values_are_what_the_release_loaded(version: str, name: str) -> None:
    """dtype and concrete sizes of each node's value equal what the release's fake tensors held."""
    doc = import_archive(name, path(version, name).read_bytes())
    by_name: dict[str, Any] = {}
    for v in doc.raw.graph.values:  # the main graph's values come first, nested graphs' after
        by_name.setdefault(doc.strings[v.name], v)
    checked = 0
    for node in readback(version)["files"][name]["nodes"]:
        val = node.get("val")
        value = by_name.get(node["name"])
        if val is None or "dtype" not in val or value is None:
            continue
        assert doc.strings[value.dtype] == TORCH_DTYPES[val["dtype"]]
        dims = [
            d if sym == 0 else None
            for d, sym in zip(value.shape, value.sym_shape or [0] * len(value.shape), strict=True)
        ]
        assert [d for d in dims if d is not None] == [int(s) for s in val["shape"] if s.isdigit()]
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("version", sorted({v for v, n in EXPORTS if n == "dynamic.pt2"}))
def test_symbolic_sizes_are_typed(version: str) -> None:
    doc = import_archive("dynamic.pt2", path(version, "dynamic.pt2").read_bytes())
    symbolic = [v for v in doc.raw.graph.values if v.sym_shape]
    assert symbolic, "the dynamic-batch program has symbolic sizes"
    assert all(not v.json for v in symbolic)


@given(data=st.data(), form=FORMS)
def test_value_forms_round_trip(data: st.DataObject, form: ValueForm) -> None:
    form = replace(form, hints=data.draw(hints(form)))
    typed = data.draw(typed_values(form))
    spelled = encode_value(typed, form)
    json.dumps(spelled, allow_nan=False)
    decoded = decode_value(spelled, form)
    assert decoded is not None
    assert decoded[0] == typed
    assert encode_value(decoded[0], form) == spelled
    assert detect_form({"v": spelled}).to_json().get("wrapped", False) == form.wrapped


@given(entries=old_module_stacks())
def test_torch_2_1_module_stacks_become_todays(entries: list[tuple[str, str, str]]) -> None:
    old = ";".join(f"{k}:(L['self']{'.' + p if p else ''},{t})" for k, p, t in entries)
    assert _module_stack_v1(old) == ";".join(f"{k},{p},{t}" for k, p, t in entries)


def _spell(form: ValueForm, exprs: list[str]) -> list[Any]:
    typed = {
        "dtype": "FLOAT",
        "shape": exprs,
        "strides": [1] * len(exprs),
        "device": "cpu",
        "requires_grad": False,
        "storage_offset": 0,
        "layout": "",
    }
    return [x["as_expr"]["hint"] for x in encode_value(typed, form)["sizes"]]


@given(table=hint_tables(), data=st.data())
def test_derived_hints_spell_every_hint_back(table: dict[str, Any], data: st.DataObject) -> None:
    """A table without its derivable hints spells every expression's hint as the full table does,
    also when the reader knows some hints anyway (the program's ``sym_int_values``: agreeing with
    the table or not)."""
    known = data.draw(
        st.dictionaries(st.sampled_from(list(table)), st.integers(0, 9).map(lambda n: {"as_int": n}), max_size=3)
    )
    reduced = derivable_hints(table, known)
    exprs = list(table)
    full = _spell(ValueForm(hints=dict(table)), exprs)
    assert full == [table[e] for e in exprs]
    if reduced is None:
        return
    assert len(reduced) < len(table)
    assert list(reduced) == [e for e in table if e in reduced]
    assert all(reduced[e] == table[e] for e in reduced)
    assert _spell(ValueForm(hints={**known, **reduced}, derived=True), exprs) == full
    # what a build without derivation would have written: the dropped hints null, so it must refuse
    assert _spell(ValueForm(hints=dict(reduced)), exprs) != full


def test_known_hints_of_sym_int_values() -> None:
    s0 = "Symbol('s0', positive=True, integer=True)"
    values = {
        "sym_size_int": {"as_expr": {"expr_str": s0, "hint": {"as_int": 3}}},
        "other": {"as_expr": {"expr_str": "Symbol('s1')", "hint": None}},
        "int": {"as_int": 4},
        "odd": [1],
    }
    assert known_hints(values) == {s0: {"as_int": 3}}
    assert known_hints([]) == {}


def test_derive_hint_evaluates_srepr() -> None:
    s27 = "Symbol('s27', positive=True, integer=True)"
    hints = {s27: {"as_int": 6}}
    assert derive_hint(f"Mul(Integer(16), {s27})", hints) == 96
    assert derive_hint(f"Mul(Integer(2), Pow({s27}, Integer(2)))", hints) == 72
    assert derive_hint(f"Add({s27}, Integer(-1))", hints) == 5
    assert derive_hint(f"FloorDiv({s27}, Integer(4))", hints) == 1
    assert derive_hint(f"Mod({s27}, Integer(4))", hints) == 2
    assert derive_hint("Symbol('s1', positive=True, integer=True)", hints) is None  # no hint for s1
    assert derive_hint(f"Max({s27}, Integer(2))", hints) is None  # not evaluated
    assert derive_hint(f"Mul(Integer(16), {s27}", hints) is None  # unbalanced
    assert derive_hint(f"Mul(Integer(16), {s27}) ", hints) is None  # trailing text
    assert derive_hint(f"FloorDiv({s27}, Integer(0))", hints) is None
    assert derive_hint("Pow(Integer(2), Integer(99))", hints) is None  # past 62 bits
    assert derive_hint("Mul(" * 100 + "Integer(1)" + ", Integer(1))" * 100, hints) is None  # too deep


@given(items=sym_int_lists)
def test_compact_sym_ints_round_trip(items: list[Any]) -> None:
    """Layout 2's ``as_sym_ints`` list spells torch's argument back exactly, or is not used."""
    arg = {"as_sym_ints": items}
    compact = _compact_sym_ints(arg)
    plain = all(
        len(x) == 1 and (("as_int" in x and type(x["as_int"]) is int) or ("as_name" in x and type(x["as_name"]) is str))
        for x in items
    )
    assert (compact is not None) == plain
    if compact is None:
        return
    strings = ["", "as_sym_ints", json.dumps(compact)]
    stored = ArgGeneric(1, 2)
    assert json.dumps(_argument_json_2(strings, stored)) == json.dumps(arg)
    assert _argument_json(strings, stored) != arg or not items  # a build without layout 2 misspells it
