"""The C++ emitter on every construct of the schema language: the generated code compiles (warnings as errors),
and the C++ names stay clear of the language's keywords. The released schemas' code is built by ``make cpp``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cpp import harness
from tracepack.codegen.emit_cpp import additive_step, cpp_name, emit_cpp, emit_cpp_versions
from tracepack.codegen.model import load_schema_text
from tracepack.errors import SchemaError

EVERY_CONSTRUCT = """
[schema]
name = "every"
version = "3.1"
status = "released"
root = "Doc"
file_identifier = "EVRY"
doc = "Every construct of the schema language."

[enums.Mode]
doc = "An enum of a wider type."
type = "u16"
[enums.Mode.values.int]
value = 300
doc = "A keyword as a value name."
[enums.Mode.values.off]
value = 0
doc = "Off."
[enums.Mode.values.on]
value = 3
doc = "On (a gap)."

[structs.Leaf]
doc = "A struct with one field of every scalar type."
[structs.Leaf.fields.u8]
id = 0
type = "u8"
doc = "u8."
[structs.Leaf.fields.u16]
id = 1
type = "u16"
doc = "u16."
[structs.Leaf.fields.u64]
id = 2
type = "u64"
default = 18446744073709551615
doc = "u64 at its largest."
[structs.Leaf.fields.i8]
id = 3
type = "i8"
default = -128
doc = "i8."
[structs.Leaf.fields.i16]
id = 4
type = "i16"
default = 0
doc = "i16."
[structs.Leaf.fields.i64]
id = 5
type = "i64"
default = -9223372036854775808
doc = "i64 at its smallest."
[structs.Leaf.fields.f32]
id = 6
type = "f32"
default = 0.5
doc = "f32."
[structs.Leaf.fields.float]
id = 7
type = "f64"
default = nan
doc = "A keyword as a field name, a NaN default."
[structs.Leaf.fields.default]
id = 8
type = "bool"
default = true
doc = "Another keyword."
[structs.Leaf.fields.text]
id = 9
type = "str"
default = "d\\u00e9j\\u00e0 \\"vu\\"\\n"
doc = "A string default that needs escapes."
[structs.Leaf.fields.blob]
id = 10
type = "u8"
default = 0
doc = "A byte."
[structs.Leaf.fields.mode]
id = 11
type = "Mode"
default = "on"
doc = "An enum with a default."
[structs.Leaf.fields.modes]
id = 12
type = "list[Mode]"
default = []
doc = "A list of enums."
[structs.Leaf.fields.flags]
id = 13
type = "list[bool]"
default = []
doc = "A list of booleans."
[structs.Leaf.fields.old]
id = 14
type = "list[u32]"
default = []
deprecated = true
doc = "A deprecated field."

[structs.VarA]
doc = "A variant with no fields."
[structs.VarB]
doc = "A variant with a leaf."
[structs.VarB.fields.leaf]
id = 0
type = "Leaf"
doc = "A nested struct."

[unions.Pick]
doc = "A union."
[unions.Pick.variants.a]
id = 1
type = "VarA"
doc = "A."
[unions.Pick.variants.b]
id = 7
type = "VarB"
doc = "B, with a gap in the ids."

[structs.Rows]
doc = "A table."
table = true
[structs.Rows.fields.parent]
id = 0
type = "list[u32]"
ref = "rows"
trie = true
doc = "A trie."
[structs.Rows.fields.name]
id = 1
type = "list[i64]"
ref = "strings"
null = -3
doc = "References with sentinels."
[structs.Rows.fields.extra]
id = 2
type = "list[u16]"
default = []
sparse = true
doc = "A sparse column."
[structs.Rows.fields.pool]
id = 3
type = "list[u32]"
ref = "strings"
default = []
pool = true
doc = "A pool."

[structs.Doc]
doc = "The root."
[structs.Doc.fields.strings]
id = 0
type = "list[str]"
doc = "Strings."
[structs.Doc.fields.rows]
id = 1
type = "Rows"
doc = "A table."
[structs.Doc.fields.pick]
id = 2
type = "Pick"
doc = "A required union."
[structs.Doc.fields.picks]
id = 3
type = "list[Pick]"
default = []
doc = "A list of unions."
[structs.Doc.fields.maybe]
id = 4
type = "Pick"
optional = true
doc = "An optional union."
[structs.Doc.fields.leaf]
id = 5
type = "Leaf"
optional = true
doc = "An optional struct."
[structs.Doc.fields.leaves]
id = 6
type = "list[Leaf]"
default = []
doc = "A list of structs."
[structs.Doc.fields.more]
id = 7
type = "list[Rows]"
default = []
doc = "A list of tables."
"""


def test_every_construct_compiles(tmp_path: Path) -> None:
    schema = load_schema_text(EVERY_CONSTRUCT, source="every-3.1.toml")
    files = emit_cpp(schema)
    for rel, text in files.items():
        path = tmp_path / rel.removeprefix("cpp/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert "std::uint64_t u64 = 18446744073709551615ULL;" in files["cpp/tracepack/v3_1/document.hpp"]
    assert "bool default_ = true;" in files["cpp/tracepack/v3_1/document.hpp"]
    assert "int_ = 300," in files["cpp/tracepack/v3_1/document.hpp"]
    for rel in files:
        if not rel.endswith(".cpp"):
            continue
        done = subprocess.run(
            ["g++", "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Wpedantic", "-Wshadow", "-Werror",
             f"-I{harness.REPO / 'cpp' / 'include'}", f"-I{tmp_path}", str(tmp_path / rel.removeprefix("cpp/"))],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"{rel}:\n{done.stderr[:3000]}"


def test_versions_and_additive_steps(tmp_path: Path) -> None:
    old = load_schema_text(EVERY_CONSTRUCT, source="every-3.1.toml")
    added = '\n[structs.Leaf.fields.late]\nid = 15\ntype = "u32"\ndefault = 7\ndoc = "Added in 3.2."\n'
    new = load_schema_text(EVERY_CONSTRUCT.replace('"3.1"', '"3.2"') + added, source="every-3.2.toml")
    assert additive_step(old, new) == []
    retyped = EVERY_CONSTRUCT.replace('"3.1"', '"3.2"').replace(
        'type = "u16"\ndoc = "u16."', 'type = "u32"\ndoc = "u16."'
    )
    assert additive_step(old, load_schema_text(retyped, source="every-3.2.toml")) == ["Leaf.u16 changed"]
    files = {**emit_cpp(old), **emit_cpp(new), **emit_cpp_versions([old, new])}
    assert "upgrade_v3_1_to_v3_2" in files["cpp/tracepack/versions.cpp"]
    assert "y.late" not in files["cpp/tracepack/versions.cpp"]  # added fields keep their defaults


def test_bytes_fields_are_refused_until_they_are_read() -> None:
    text = EVERY_CONSTRUCT.replace(
        'type = "u8"\ndefault = 0\ndoc = "A byte."', 'type = "bytes"\ndefault = ""\ndoc = "Bytes."'
    )
    with pytest.raises(SchemaError, match="does not decode `bytes` fields yet"):
        emit_cpp(load_schema_text(text, source="every-3.1.toml"))


def test_cpp_names() -> None:
    assert [cpp_name(n) for n in ("int", "float", "class", "name", "type", "default", "errno")] == [
        "int_", "float_", "class_", "name", "type", "default_", "errno_",
    ]  # fmt: skip
