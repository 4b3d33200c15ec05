"""The .fbs emitter and the flatc checks of ``python -m tracepack.codegen check``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tracepack.codegen.check import check_flatc, load_schemas, render_all
from tracepack.codegen.emit_fbs import emit_fbs, fbs_field_ids
from tracepack.codegen.model import load_schema_text
from tracepack.errors import SchemaError

SCHEMA = Path("schema/tracepack-1.0.toml")


def _next_version(tmp_path: Path, extra: str) -> list[object]:
    text = SCHEMA.read_text(encoding="utf-8")
    (tmp_path / "tracepack-1.0.toml").write_text(text, encoding="utf-8")
    new = text.replace('version = "1.0"', 'version = "1.1"', 1).replace('status = "released"', 'status = "draft"', 1)
    (tmp_path / "tracepack-1.1.toml").write_text(new + extra, encoding="utf-8")
    return load_schemas(tmp_path)  # type: ignore[return-value]


def test_current_schemas_compile_for_cpp_and_conform() -> None:
    schemas = load_schemas("schema")
    check_flatc(schemas, render_all(schemas))


def test_appending_fields_conforms(tmp_path: Path) -> None:
    schemas = _next_version(
        tmp_path,
        '\n[structs.Graph.fields.node_order]\nid = 5\ntype = "list[u32]"\ndefault = []\ndoc = "Nodes by name."\n'
        '\n[unions.Argument.variants.complex]\nid = 14\ntype = "ArgComplex"\ndoc = "A complex."\n'
        '\n[structs.ArgComplex]\ndoc = "A complex number."\n\n[structs.ArgComplex.fields.re]\nid = 0\ntype = "f64"\n'
        'doc = "Real part."\n',
    )
    check_flatc(schemas, render_all(schemas))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            '  stack:uint = 0 (id: 4, tracepack_ref: "stacks");',
            '  stack:long = 0 (id: 4, tracepack_ref: "stacks");',
            "types differ for field: tracepack.Node.stack",
        ),
        ("  extensions:[Extension] (id: 12);", "", "field deleted: tracepack.Document.extensions"),
        ("  python = 0,", "  python = 2,", "values differ for enum: python"),
    ],
)
def test_breaking_changes_do_not_conform(tmp_path: Path, old: str, new: str, message: str) -> None:
    schemas = _next_version(tmp_path, "")
    files = render_all(schemas)  # type: ignore[arg-type]
    assert old in files["fbs/tracepack-1.1.fbs"]
    files["fbs/tracepack-1.1.fbs"] = files["fbs/tracepack-1.1.fbs"].replace(old, new)
    with pytest.raises(
        SchemaError, match=f"flatc --conform: fbs/tracepack-1.1.fbs is not a compatible evolution.*{message}"
    ):
        check_flatc(schemas, files)  # type: ignore[arg-type]


def test_union_fields_take_two_ids_and_unions_come_first() -> None:
    schema = load_schemas("schema")[-1]
    text = emit_fbs(schema)[f"fbs/tracepack-{schema.version}.fbs"]
    ids = fbs_field_ids(schema.structs["NamedArgument"].fields)
    assert ids == {"name": 0, "arg": 2, "kind": 3}
    assert "arg:Argument (id: 2, required);" in text
    assert text.index("union Argument") < text.index("table NamedArgument")
    # Required non-scalars are marked; defaults and scalars are not.
    assert "strings:[string] (id: 1, required);" in text
    assert re.search(r"stack:uint = 0 \(id: 4, tracepack_ref: \"stacks\"\);", text)
    assert "table SideIndex" in text


def test_names_the_fbs_needs_are_reserved() -> None:
    text = SCHEMA.read_text(encoding="utf-8") + '\n[structs.ArgumentBox]\ndoc = "Taken."\n'
    with pytest.raises(SchemaError, match="ArgumentBox is taken"):
        emit_fbs(load_schema_text(text, source="x.toml"))


def test_references_keep_their_table() -> None:
    """Every `ref` of the schema is in the .fbs as an attribute, so readers generated from it alone (and
    FlatBuffers Verifiers written for it) know which table each index must stay inside."""
    schemas = load_schemas("schema")
    files = render_all(schemas)
    for schema in schemas:
        text = files[f"fbs/tracepack-{schema.version}.fbs"]
        assert 'attribute "tracepack_ref";' in text
        for s in schema.structs.values():
            for f in s.fields:
                if f.ref is None:
                    continue
                line = next(
                    ln
                    for ln in text.splitlines()
                    if ln.startswith(f"  {f.name}:") and "(id: " in ln and _in_table(text, ln, s.name)
                )
                assert f'tracepack_ref: "{f.ref}"' in line, (s.name, f.name)
                assert ("tracepack_trie" in line) == f.trie
                assert (f"tracepack_null: {f.null}" in line) == (f.null is not None)


def _in_table(text: str, line: str, table: str) -> bool:
    """Whether ``line`` is a field of ``table`` in the .fbs ``text``."""
    start = text.index(f"table {table} {{")
    return line in text[start : text.index("\n}", start)]
