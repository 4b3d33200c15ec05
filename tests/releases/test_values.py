"""Tensor values of every release's form: typed, and spelled back byte for byte."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.releases.samples import files, path, readback
from tests.releases.strategies import FORMS, hints, old_module_stacks, typed_values
from tracepack.torch.archives import import_archive
from tracepack.torch.export.upgrade import _module_stack_v1
from tracepack.torch.export.values import ValueForm, decode_value, detect_form, encode_value

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
