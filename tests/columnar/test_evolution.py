"""Schema evolution in the columnar codec: fields by name, enum values and union variants by number.

A column an older file lacks is the field's default in every row; a column a reader does not know
is ignored; an unknown enum value or variant id is a DecodeError naming its column. The last part
checks, on small models, that the codec sets of ``tracepack.schema_check.rules`` are what the codec
really does.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any

import msgspec
import pytest
from hypothesis import given
from tracepack_generated import v1_0, v1_1

import tracepack
from tests.columnar.helpers import pack, payload_of, repack
from tests.golden import make_golden as mg
from tests.migrations.strategies import RichDocument, documents_1_0, rich_documents
from tracepack import DecodeError, migrations, model
from tracepack.codecs import columnar
from tracepack.migrations import v1_0_to_v1_1 as step
from tracepack.schema_check import RULES
from tracepack.versions import CURRENT

#: A newer minor of the current version's major, which no release has reached.
NEWER = (CURRENT[0], CURRENT[1] + 6)
N, C = f"{NEWER[0]}.{NEWER[1]}", f"{CURRENT[0]}.{CURRENT[1]}"


def _as_1_1(raw: Any) -> Any:
    """A document of the current version as schema 1.1 holds it (the same document when 1.1 is current)."""
    return migrations.downgrade(raw, CURRENT, (1, 1))


# -- missing and extra columns -----------------------------------------------------------------------


def test_a_missing_column_is_the_default_in_every_row() -> None:
    doc = mg.build_document()
    payload = payload_of(doc.raw, CURRENT)
    for path in ("$.graph.nodes[].stack_style", "$.graph.nodes[].module", "$.graph.nodes[].meta_keys#len"):
        del payload["columns"][path]
    payload["columns"] = {k: v for k, v in payload["columns"].items() if not k.startswith("$.graph.nodes[].meta_keys")}
    back = columnar.decode(repack(payload), CURRENT)
    assert [n.stack_style for n in back.graph.nodes] == [model.StackStyle.STRIPPED] * len(doc.raw.graph.nodes)
    assert all(n.module == 0 and n.meta_keys == [] for n in back.graph.nodes)
    # One list per row, not one shared list.
    assert len({id(n.meta_keys) for n in back.graph.nodes}) == len(back.graph.nodes)
    assert [n.name for n in back.graph.nodes] == [n.name for n in doc.raw.graph.nodes]


def test_a_missing_optional_is_none() -> None:
    doc = mg.build_document()
    payload = payload_of(doc.raw, CURRENT)
    payload["columns"] = {k: v for k, v in payload["columns"].items() if not k.startswith("$.header.producer")}
    assert columnar.decode(repack(payload), CURRENT).header.producer is None


def test_a_missing_column_without_default_is_an_error() -> None:
    doc = mg.build_document()
    payload = payload_of(doc.raw, CURRENT)
    del payload["columns"]["$.graph.nodes[].name"]
    with pytest.raises(DecodeError) as info:
        columnar.decode(repack(payload), CURRENT, source="m.tpk")
    assert info.value.where == "$.graph.nodes[].name"
    assert str(info.value) == (
        "m.tpk: $.graph.nodes[].name: the column is missing; expected 20 values (the field has no default)"
    )
    # The error names the column that is missing: a list's lengths, a union's variant ids.
    for path in ("$.strings#len", "$.graph.nodes[].inputs[].arg#tag", "$.graph.nodes[].meta_keys[]"):
        payload = payload_of(doc.raw, CURRENT)
        del payload["columns"][path]
        with pytest.raises(DecodeError) as info:
            columnar.decode(repack(payload), CURRENT)
        assert (info.value.where, info.value.problem) == (path, "the column is missing")


def test_columns_of_empty_structs_may_be_missing() -> None:
    """No rows, no columns: an empty graph stores none of its node columns."""
    doc = tracepack.DocumentBuilder().build()
    columns = payload_of(doc.raw, CURRENT)["columns"]
    assert not any(p.startswith("$.graph.nodes[]") for p in columns)
    assert tracepack.loads(pack(payload_of(doc.raw, CURRENT), CURRENT)) == doc


def test_unknown_columns_and_keys_are_ignored() -> None:
    doc = mg.build_document()
    payload = payload_of(doc.raw, CURRENT)
    n = len(doc.raw.graph.nodes)
    payload["columns"]["$.graph.nodes[].weight"] = ["plain", [0.5] * n]
    payload["columns"]["$.added_in_1_7#len"] = ["zigzag-rle", "anything at all"]
    payload["columns"]["$.graph.nodes[].inputs[].arg<99>.name"] = ["plain", [1, 2, 3]]
    payload["written_by"] = {"a newer tracepack": [1, 2]}
    assert tracepack.loads(pack(payload, CURRENT)) == doc


# -- released versions --------------------------------------------------------------------------------


def _without_1_1_additions(raw: Any) -> Any:
    nodes = [msgspec.structs.replace(n, from_node=[], from_node_meta_index=-1) for n in raw.graph.nodes]
    return msgspec.structs.replace(
        raw,
        frames=msgspec.structs.replace(raw.frames, end_line=[]),
        graph=msgspec.structs.replace(raw.graph, nodes=nodes),
        provenance=None,
    )


def test_a_1_0_reader_reads_1_1_columns_ignoring_additions() -> None:
    doc = mg.build_document()
    assert doc.raw.provenance is not None
    old = columnar.decode(columnar.encode(_as_1_1(doc.raw), (1, 1)), (1, 0))
    assert isinstance(old, v1_0.model.Document)
    v1_0.validate.validate(old)
    assert step.upgrade(old) == _without_1_1_additions(_as_1_1(doc.raw))


@given(rich=rich_documents())
def test_a_1_0_reader_reads_any_1_1_document_ignoring_additions(rich: RichDocument) -> None:
    old = columnar.decode(columnar.encode(_as_1_1(rich.doc.raw), (1, 1)), (1, 0))
    v1_0.validate.validate(old)
    assert step.upgrade(old) == _without_1_1_additions(_as_1_1(rich.doc.raw))


@given(raw=documents_1_0())
def test_a_1_1_reader_fills_1_0_files_with_defaults(raw: Any) -> None:
    new = columnar.decode(columnar.encode(raw, (1, 0)), (1, 1))
    assert isinstance(new, v1_1.model.Document)
    assert (new.header.version.major, new.header.version.minor) == (1, 0)  # the file's, as written
    new.header.version = v1_1.model.Version(1, 1)
    assert new == step.upgrade(raw)


def test_a_newer_minor_decodes_with_the_newest_known_minor() -> None:
    doc = mg.build_document()
    payload = payload_of(doc.raw, CURRENT)
    payload["columns"]["$.header.version.minor"] = ["plain", [NEWER[1]]]
    payload["columns"]["$.graph.nodes[].weight"] = ["plain", [0.5] * len(doc.raw.graph.nodes)]
    back = tracepack.loads(pack(payload, NEWER), source=f"from-{N}.tpk")
    assert (back.source_version, back.version) == (NEWER, CURRENT)
    assert back == doc


def test_a_newer_minor_using_an_unknown_variant_is_refused_naming_the_column() -> None:
    doc = mg.build_document()
    payload = payload_of(doc.raw, CURRENT)
    payload["columns"]["$.header.version.minor"] = ["plain", [NEWER[1]]]
    tags = payload["columns"]["$.graph.nodes[].outputs[]#tag"][1]
    tags[0] = 99
    with pytest.raises(DecodeError) as info:
        tracepack.loads(pack(payload, NEWER), source=f"from-{N}.tpk")
    assert info.value.where == "$.graph.nodes[].outputs[]#tag"
    text = str(info.value)
    assert text.startswith(f"from-{N}.tpk: $.graph.nodes[].outputs[]#tag: row 0: Invalid enum value 99 (the file is")
    assert f"(the file is schema {N}, newer than {C}, the newest this build reads" in text


def test_an_unknown_enum_value_names_the_column() -> None:
    doc = mg.build_document()
    payload = payload_of(doc.raw, CURRENT)
    payload["columns"]["$.graph.nodes[].stack_style"][1][3] = 5
    with pytest.raises(DecodeError) as info:
        columnar.decode(repack(payload), CURRENT)
    assert info.value.where == "$.graph.nodes[].stack_style"
    assert info.value.problem == "row 3: Invalid enum value 5"
    assert info.value.expected == "StackStyle values 0 (python), 1 (stripped)"


# -- the rule table, on small models ------------------------------------------------------------------
# Each pair is OLD and NEW versions of one tiny schema; a file written with one is read with the other.


class Color(enum.IntEnum):
    RED = 0
    GREEN = 1


class Colour(enum.IntEnum):  # the same values, renamed
    ROUGE = 0
    VERT = 1


class ColorRenumbered(enum.IntEnum):
    RED = 1
    GREEN = 0


class A(msgspec.Struct, array_like=True, tag=1):
    x: int


class B(msgspec.Struct, array_like=True, tag=2):
    y: str


class A2(msgspec.Struct, array_like=True, tag=1):  # variant renamed (another class), same id
    x: int


class BMoved(msgspec.Struct, array_like=True, tag=3):  # variant id changed
    y: str


def _model(name: str, annotations: dict[str, Any], defaults: dict[str, Any] | None = None, **opts: Any) -> type:
    ns: dict[str, Any] = {"__annotations__": annotations, **(defaults or {})}
    return type(name, (msgspec.Struct,), ns, array_like=True, **opts)


def _u(bits: int) -> Any:
    return Annotated[int, msgspec.Meta(ge=0, le=2**bits - 1)]


_OLD = _model("Doc", {"name": str, "size": _u(8), "color": Color, "arg": A | B, "items": list[int]}, {"items": []})
_ROWS = _model("Rows", {"rows": list[_OLD]})
_DOC = _ROWS([_OLD("a", 200, Color.GREEN, A(5), [1, 2]), _OLD("b", 3, Color.RED, B("z"))])


def _read(new_fields: dict[str, Any], defaults: dict[str, Any] | None = None, data: bytes | None = None) -> Any:
    new = _model("Doc", new_fields, defaults)
    rows = _model("Rows", {"rows": list[new]})
    return columnar.decode_model(columnar.encode_model(_DOC, _ROWS) if data is None else data, rows).rows


def _breaks(rule: str) -> bool:
    return "columnar" in RULES[rule].breaks


def test_field_renamed_breaks() -> None:
    with pytest.raises(DecodeError, match=r"\$\.rows\[\]\.title: the column is missing"):
        _read({"title": str, "size": _u(8), "color": Color, "arg": A | B, "items": list[int]}, {"items": []})
    assert _breaks("FIELD_RENAMED")


def test_field_moved_to_another_id_reads() -> None:
    rows = _read({"items": list[int], "arg": A | B, "color": Color, "size": _u(8), "name": str}, {})
    assert [(r.name, r.size, r.color, r.arg, r.items) for r in rows] == [
        ("a", 200, Color.GREEN, A(5), [1, 2]),
        ("b", 3, Color.RED, B("z"), []),
    ]
    assert not _breaks("FIELD_ID_CHANGED")


def test_field_type_promoted_reads() -> None:
    rows = _read({"name": str, "size": _u(16), "color": Color, "arg": A | B, "items": list[int]}, {"items": []})
    assert [r.size for r in rows] == [200, 3]
    assert not _breaks("FIELD_TYPE_PROMOTED")
    assert not _breaks("ENUM_TYPE_CHANGED")  # enum values are plain integers too


def test_field_default_added_reads_both_ways() -> None:
    """Writers write every column with rows, defaults included: a reader that requires the field finds it."""
    required = _model("Doc", {"name": str, "size": _u(8)})
    defaulted = _model("Doc", {"name": str, "size": _u(8)}, {"size": 3})
    doc = _model("Rows", {"rows": list[defaulted]})([defaulted("b")])  # size at its default
    data = columnar.encode_model(doc, type(doc))
    assert columnar.decode_model(data, _model("Rows", {"rows": list[required]})).rows == [required("b", 3)]
    assert not _breaks("FIELD_DEFAULT_ADDED")
    # Taking the default away again: files of the version before the field was added lack the column.
    older = _model("Doc", {"name": str})
    data = columnar.encode_model(
        _model("Rows", {"rows": list[older]})([older("b")]), _model("Rows", {"rows": list[older]})
    )
    assert columnar.decode_model(data, _model("Rows", {"rows": list[defaulted]})).rows == [defaulted("b", 3)]
    with pytest.raises(DecodeError, match=r"\$\.rows\[\]\.size: the column is missing"):
        columnar.decode_model(data, _model("Rows", {"rows": list[required]}))
    # ... but that is the version before the addition (FIELD_ADDED_WITHOUT_DEFAULT against it, which
    # `check --all` finds: every release against every earlier one); files of the version with the
    # default always hold the column, so taking the default away breaks no columnar reader.
    assert not _breaks("FIELD_DEFAULT_REMOVED")


def test_structs_without_a_column_form_are_refused() -> None:
    kw = _model("Doc", {"name": str}, kw_only=True)
    with pytest.raises(tracepack.SchemaError, match="keyword-only"):
        columnar.encode_model(kw(name="a"), kw)
    with pytest.raises(tracepack.SchemaError, match=r"\$\.kids\[\]: Tree contains itself"):
        columnar.decode_model(b"", Tree)
    mixed = _model("Doc", {"value": int | str})
    with pytest.raises(tracepack.SchemaError, match=r"\$\.value: the columnar codec has no column form"):
        columnar.encode_model(mixed(1), mixed)


class Tree(msgspec.Struct, array_like=True):
    kids: list[Tree] = []


def test_field_added_is_a_default_for_older_files_and_ignored_by_older_readers() -> None:
    rows = _read(
        {"name": str, "size": _u(8), "color": Color, "arg": A | B, "items": list[int], "weight": float},
        {"items": [], "weight": 1.5},
    )
    assert [r.weight for r in rows] == [1.5, 1.5]
    with pytest.raises(DecodeError, match=r"\$\.rows\[\]\.weight: the column is missing"):
        _read({"name": str, "size": _u(8), "color": Color, "arg": A | B, "items": list[int], "weight": float})
    assert _breaks("FIELD_ADDED_WITHOUT_DEFAULT")
    assert not RULES["FIELD_ADDED"].breaks


def test_enum_value_renamed_reads_renumbered_breaks() -> None:
    rows = _read({"name": str, "size": _u(8), "color": Colour, "arg": A | B, "items": list[int]}, {"items": []})
    assert [r.color for r in rows] == [Colour.VERT, Colour.ROUGE]
    assert not _breaks("ENUM_VALUE_RENAMED")
    rows = _read(
        {"name": str, "size": _u(8), "color": ColorRenumbered, "arg": A | B, "items": list[int]}, {"items": []}
    )
    assert [r.color.name for r in rows] == ["RED", "GREEN"]  # silently the other value: a major change
    assert _breaks("ENUM_VALUE_RENUMBERED")


def test_union_variant_renamed_reads_id_changed_breaks() -> None:
    rows = _read({"name": str, "size": _u(8), "color": Color, "arg": A2 | B, "items": list[int]}, {"items": []})
    assert rows[0].arg == A2(5)
    assert not _breaks("UNION_VARIANT_RENAMED")
    with pytest.raises(DecodeError, match=r"\$\.rows\[\]\.arg#tag: row 1: Invalid enum value 2"):
        _read({"name": str, "size": _u(8), "color": Color, "arg": A | BMoved, "items": list[int]}, {"items": []})
    assert _breaks("UNION_VARIANT_ID_CHANGED")


def test_field_made_optional_changes_the_columns() -> None:
    required = _model("Doc", {"name": str, "size": _u(8)})
    optional = _model("Doc", {"name": str, "size": _u(8) | None}, {"size": None})
    data = columnar.encode_model(
        _model("Rows", {"rows": list[required]})([required("a", 7)]), _model("Rows", {"rows": list[required]})
    )
    # `size#present` is not in the older file: every row reads as None, silently: a major change.
    assert columnar.decode_model(data, _model("Rows", {"rows": list[optional]})).rows == [optional("a", None)]
    assert _breaks("FIELD_MADE_OPTIONAL")
    both = _model("Rows", {"rows": list[optional]})([optional("a", 7), optional("b", None)])
    with pytest.raises(DecodeError, match=r"\$\.rows\[\]\.size: the column has 1 values; expected 2, one per row"):
        columnar.decode_model(columnar.encode_model(both, type(both)), _model("Rows", {"rows": list[required]}))
    assert _breaks("FIELD_MADE_REQUIRED")
