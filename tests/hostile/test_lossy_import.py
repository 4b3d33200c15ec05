"""A model.json whose field has the wrong JSON type is refused in one line or kept verbatim, never
changed (issue 24: ``graph.tensor_values`` set to ``0`` imported and came back as ``{}``).

Every field of torch's model.json schema a 2.13 program holds (the campaign's ``type`` class, found
by walking the program with the generated ``torch_schema`` types), given each other JSON type and
deleted, through the importer and back, in memory and through MessagePack and the column layout."""

from __future__ import annotations

import json

import pytest

import tracepack
from tests.hostile import crafted
from tracepack.errors import InputError, LegacyFormatError
from tracepack.torch.export.model_json import export_model_json, import_model_json

SEED = crafted.seed_by_name("2.13/dynamic")


def _round_trip_or_refused(data: bytes) -> str:
    try:
        doc = import_model_json(data, source="m.json")
    except InputError as exc:
        refusal = str(exc)
        assert "\n" not in refusal
        return "refused"
    assert export_model_json(doc) == data
    for codec in ("msgpack", "flatbuffers-columns"):
        assert export_model_json(tracepack.loads(tracepack.dumps(doc, codec=codec))) == data, codec
    return "accepted"


@pytest.mark.parametrize("value", [0, 1.5, "x", [], True, [None]])
def test_tensor_values_of_another_type_come_back_as_they_were(value: object) -> None:
    program = SEED.obj
    program["graph_module"]["graph"]["tensor_values"] = value
    data = json.dumps(program).encode()
    assert _round_trip_or_refused(data) == "accepted"


def test_a_null_tensor_value_is_refused_naming_it() -> None:
    program = SEED.obj
    name = next(iter(program["graph_module"]["graph"]["tensor_values"]))
    program["graph_module"]["graph"]["tensor_values"][name] = None
    with pytest.raises(LegacyFormatError) as err:
        import_model_json(json.dumps(program).encode(), source="m.json")
    assert str(err.value) == (
        f'm.json: $.graph_module.graph.tensor_values["{name}"]: a tensor value is null; '
        "expected a tensor value (torch's TensorMeta, an object)"
    )


def test_every_field_with_every_other_type() -> None:
    outcomes = {"accepted": 0, "refused": 0}
    fields = set()
    for case in crafted.cases("full", ("type",)):
        if case.seed != SEED.name:
            continue
        outcomes[_round_trip_or_refused(case.data)] += 1
        fields.add(case.field)
    assert outcomes["accepted"] > 500
    assert outcomes["refused"] > 0
    reached = fields & crafted.schema_fields()
    assert len(reached) > 100, sorted(reached)  # of the 157 fields and union members a model.json can hold
