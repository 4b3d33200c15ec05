"""The differential suite's sample generator (tests/schema_check/differential.py) builds valid
documents only, including for the changes ``make schema-fuzz`` found it could not: each case
here is one such change, checked end to end (samples validate; the checker's verdict per codec
is what the codecs do)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.schema_check.differential import CODECS, DEFAULT_SEEDS, SEEDS, cross_check, sample
from tests.schema_check.mutations import (
    Chain,
    Mutation,
    base_schema,
    new_field,
    retired,
    set_field,
    set_fields,
    set_struct,
    valid,
)
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


@pytest.mark.parametrize("target", ["modules", "strings"])
def test_a_reference_into_another_table_means_other_rows(target: str) -> None:
    """``ref`` changed: the numbers read back equal, but point at rows of another table. The
    expected value follows what a reference means (its row), so every codec breaks, as the checker says."""
    s0 = base_schema()
    s, f = _field(s0, "DebugHandleTable", "stack")
    m = valid(
        mutation(s0, set_field(s0, s, f, replace(f, ref=target)), ("CONSTRAINT_CHANGED", "DebugHandleTable.stack"))
    )
    assert m is not None
    assert cross_check(m.old, m.new, m.identity).broken == set(CODECS)
    _agrees(m)


def test_a_column_pooled_or_not_means_other_rows() -> None:
    s0 = base_schema()
    s, f = _field(s0, "DebugHandleTable", "stack")
    m = valid(
        mutation(s0, set_field(s0, s, f, replace(f, pool=True)), ("CONSTRAINT_CHANGED", "DebugHandleTable.stack"))
    )
    assert m is not None
    _agrees(m)


def test_an_empty_pool_shows_a_default_added_to_it() -> None:
    """``SourceTable.lines`` (a pool) given the default ``[]``: writers that omit defaults (JSON)
    leave an empty pool out, which older readers require; the samples hold an empty pool (seed 3)."""
    s0 = base_schema()
    s, f = _field(s0, "SourceTable", "lines")
    assert f.pool
    assert not f.has_default
    g = replace(f, has_default=True, default=[])
    m = valid(mutation(s0, set_field(s0, s, f, g), ("FIELD_DEFAULT_ADDED", "SourceTable.lines")))
    assert m is not None
    assert "json" in cross_check(m.old, m.new, m.identity).broken
    _agrees(m)
    assert sample(m.new, 3).sources.lines == []


def test_a_plain_struct_may_hold_lists_of_other_lengths() -> None:
    """``ModuleCallTable`` no longer a table: its writers may write columns of different lengths,
    which older readers (checking one length) refuse; the samples do."""
    s0 = base_schema()
    s = s0.structs["ModuleCallTable"]
    m = valid(mutation(s0, set_struct(s0, replace(s, table=False)), ("CONSTRAINT_LOOSENED", "ModuleCallTable")))
    assert m is not None
    assert cross_check(m.old, m.new, m.identity).broken == set(CODECS)
    _agrees(m)


@pytest.mark.parametrize("kind", ["u32", "i64", "f64"])
def test_a_name_retired_then_reused_is_another_field(kind: str) -> None:
    """``Version.minor`` removed in a release, then back (same name and id) as a wider integer with a
    default: the old files' minor is not the new field's, so reading it (MessagePack by id, JSON and
    the column codecs by name) reads something else, as the checker says."""
    s0 = base_schema()
    s, gone = _field(s0, "Version", "minor")
    middle = set_fields(s0, s, [f for f in s.fields if f is not gone])
    default = {"u32": 0, "i64": -1, "f64": 0.5}[kind]
    again = new_field("minor", gone.id, TypeRef("scalar", kind), default=default)
    new = set_fields(s0, s, [*(f for f in s.fields if f is not gone), again])
    m = valid(Chain(s0, new, frozenset({("FIELD_NAME_REUSED", "Version.minor")}), retired("Version", "minor"), middle))
    assert m is not None
    _agrees(m)
    assert {"json", "msgpack", "columnar"} <= cross_check(m.old, m.new, m.identity).broken


@pytest.mark.parametrize(
    ("struct", "name", "kind"),
    [("FrameTable", "line", "u8"), ("DebugHandleTable", "stack", "u16"), ("DebugHandleTable", "stack", "i16")],
)
def test_a_narrowed_reference_into_a_table_shows(struct: str, name: str, kind: str) -> None:
    """A reference into a table narrowed to 8 or 16 bits: seed 3 gives the target table more rows
    than the narrow type counts (and the referring table rows), so old files hold references the
    new reader cannot, as the checker says (FIELD_TYPE_CHANGED breaks every codec)."""
    s0 = base_schema()
    s, f = _field(s0, struct, name)
    g = replace(f, type=TypeRef("list", "list", TypeRef("scalar", kind)))
    m = valid(mutation(s0, set_field(s0, s, f, g), ("FIELD_TYPE_CHANGED", f"{struct}.{name}")))
    assert m is not None
    assert cross_check(m.old, m.new, m.identity).broken == set(CODECS)
    _agrees(m)


@pytest.mark.parametrize(("kind", "default"), [("u32", 0), ("str", "")])
def test_a_name_reused_with_another_shape_leaves_the_column_codecs_alone(kind: str, default: object) -> None:
    """``Header.metadata`` (a list of KeyValue) retired, then its name back as a value: JSON reads the
    old list under the name and fails, but the column codecs key values by path (``P#len``/``P[]``
    against ``P``), so the new field reads its default from old files: they do not break."""
    s0 = base_schema()
    s, gone = _field(s0, "Header", "metadata")
    middle = set_fields(s0, s, [f for f in s.fields if f is not gone])
    t = TypeRef("str", "str") if kind == "str" else TypeRef("scalar", kind)
    again = new_field("metadata", gone.id, t, default=default)
    new = set_fields(s0, s, [*(f for f in s.fields if f is not gone), again])
    m = valid(
        Chain(s0, new, frozenset({("FIELD_NAME_REUSED", "Header.metadata")}), retired("Header", "metadata"), middle)
    )
    assert m is not None
    broken = cross_check(m.old, m.new, m.identity).broken
    assert "json" in broken
    assert not {"columnar", "flatbuffers-columns"} & broken
    _agrees(m)
    assert any(f.rule == "FIELD_NAME_REUSED" and f.bump == "forbidden" for f in findings_of(m))


def test_a_table_of_one_column_breaks_nothing() -> None:
    """``Header`` made a table: its one list (``metadata``) is the row count and no other column
    must match it, so older files stay valid in every codec; the checker says no codec breaks."""
    s0 = base_schema()
    s = s0.structs["Header"]
    m = valid(mutation(s0, set_struct(s0, replace(s, table=True)), ("CONSTRAINT_TIGHTENED", "Header")))
    assert m is not None
    assert len(m.new.structs["Header"].columns) == 1
    _agrees(m)
    assert cross_check(m.old, m.new, m.identity).broken == set()
    (finding,) = [f for f in findings_of(m) if f.rule == "CONSTRAINT_TIGHTENED"]
    assert finding.breaks == ()
