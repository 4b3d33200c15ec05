"""The differential suite's sample generator (tests/schema_check/differential.py) builds valid
documents only, including for the changes ``make schema-fuzz`` found it could not: each case
here is one such change, checked end to end (samples validate; the checker's verdict per codec
is what the codecs do)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.schema_check.differential import CODECS, DEFAULT_SEEDS, SEEDS, cross_check, sample
from tests.schema_check.mutations import Mutation, base_schema, set_field, valid
from tests.schema_check.mutations import _m as mutation
from tests.schema_check.test_rules import findings_of
from tracepack.codegen.model import Field, Schema, Struct, TypeRef


def _field(schema: Schema, struct: str, name: str) -> tuple[Struct, Field]:
    s = schema.structs[struct]
    return s, next(f for f in s.fields if f.name == name)


def _agrees(m: Mutation) -> None:
    for seed in SEEDS:
        sample(m.new, seed)  # validates, or raises IntegrityError
    for seed in DEFAULT_SEEDS:
        sample(m.new, seed, defaults=True)
    said = {c for f in findings_of(m) for c in f.breaks}
    real = cross_check(m.old, m.new, m.identity)
    for codec in CODECS:
        assert (codec in said) == (codec in real.broken), (codec, said, real.why)


def test_a_reference_default_left_without_its_null_is_not_sampled() -> None:
    """A plain integer whose default is -1 made a reference (no null sentinel): a document holding
    the default is invalid under the new schema, so its writers cannot write it."""
    s0 = base_schema()
    s, f = _field(s0, "Node", "from_node_meta_index")
    assert f.ref is None
    assert f.default == -1
    m = valid(
        mutation(
            s0, set_field(s0, s, f, replace(f, ref="strings")), ("CONSTRAINT_TIGHTENED", "Node.from_node_meta_index")
        )
    )
    assert m is not None
    _agrees(m)


@pytest.mark.parametrize("kind", ["u8", "u32", "i64"])
def test_a_reference_column_turned_scalar_holds_a_row(kind: str) -> None:
    """A table's reference column changed to one integer (not a list): it still refers to a row."""
    s0 = base_schema()
    s, f = _field(s0, "DebugHandleTable", "stack")
    assert f.ref is not None
    m = valid(
        mutation(
            s0,
            set_field(s0, s, f, replace(f, type=TypeRef("scalar", kind))),
            ("FIELD_TYPE_CHANGED", "DebugHandleTable.stack"),
        )
    )
    assert m is not None
    _agrees(m)


def test_references_into_a_deprecated_table_are_left_empty() -> None:
    """``Document.provenance`` deprecated: writers leave it out, so no node refers to a row of it
    (``Node.from_node`` is an empty list)."""
    s0 = base_schema()
    s, f = _field(s0, "Document", "provenance")
    assert f.optional
    m = valid(
        mutation(s0, set_field(s0, s, f, replace(f, deprecated=True)), ("FIELD_DEPRECATED", "Document.provenance"))
    )
    assert m is not None
    _agrees(m)
    for seed in SEEDS:
        doc = sample(m.new, seed)
        assert doc.provenance is None
        assert all(node.from_node == [] for node in doc.graph.nodes)
