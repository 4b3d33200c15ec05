"""Stage 3c: the FlatBuffers schema (``.fbs``) of one version.

Every struct becomes a ``table`` (tables can evolve; FlatBuffers structs
cannot), with explicit ``(id: N)`` attributes. FlatBuffers gives a union field
two ids (its hidden ``_type`` field takes the first), so ids are computed here
from our field positions; appending fields keeps every earlier id. A
``list[Union]`` becomes a vector of a one-field wrapper table
(``<Union>Box``), which every FlatBuffers language supports.

Evolution follows the schema's own rules, which are FlatBuffers' rules: fields
are only appended, a removed field stays as ``deprecated``, ids are never
reused. ``python -m tracepack.codegen check`` runs ``flatc --conform`` against
the previous version to prove it.

Layout choices that flatc enforces:

* unions are declared before the tables that use them (a forward reference to
  a union is not resolved as one);
* fields without a default that are not scalars are ``(required)``, so
  FlatBuffers' own verifiers (C++, Rust, ...) reject buffers that lack them;
* one namespace for every version, so ``flatc --conform`` compares like with
  like;
* what FlatBuffers has no word for is kept as attributes, declared at the top:
  ``tracepack_ref: "TABLE"`` on a field that indexes a root table (``ref``),
  ``tracepack_null: N`` for its lowest sentinel, ``tracepack_trie`` on a trie's
  parent column, so that a reader generated from the ``.fbs`` alone (or a
  Verifier written for it) knows which table each reference must stay inside.

One table is FlatBuffers-only and not part of the tracepack schema:
``SideIndex`` (:data:`SIDE_INDEX`), the root of a small second buffer that the
FlatBuffers codec writes after the document buffer (lookup indexes for lazy,
random-access readers; see :mod:`tracepack.codecs.flatbuffers`).
"""

from __future__ import annotations

from tracepack.codegen.emit_python import header_lines
from tracepack.codegen.model import Field, Schema, TypeRef
from tracepack.errors import SchemaError

__all__ = [
    "FBS_SCALARS",
    "REF_ATTRIBUTES",
    "SIDE_INDEX",
    "SIDE_INDEX_IDENTIFIER",
    "box_name",
    "emit_fbs",
    "fbs_field_ids",
    "fbs_namespace",
    "fbs_path",
]

FBS_SCALARS = {
    "bool": "bool",
    "u8": "ubyte",
    "u16": "ushort",
    "u32": "uint",
    "u64": "ulong",
    "i8": "byte",
    "i16": "short",
    "i32": "int",
    "i64": "long",
    "f32": "float",
    "f64": "double",
}

#: The attributes the ``.fbs`` declares for what the schema says of references (``ref``, ``null``, ``trie``).
REF_ATTRIBUTES = ("tracepack_ref", "tracepack_null", "tracepack_trie")

#: The FlatBuffers-only side table (root of the index buffer written after the document).
SIDE_INDEX = "SideIndex"
#: The side buffer's file identifier.
SIDE_INDEX_IDENTIFIER = "TPKI"


def fbs_namespace(schema: Schema) -> str:
    """One namespace for every version, so ``flatc --conform`` compares like with like."""
    return schema.name


def fbs_path(schema: Schema) -> str:
    """Path of the version's ``.fbs`` file, relative to ``generated/``."""
    return f"fbs/tracepack-{schema.version}.fbs"


def box_name(union: str) -> str:
    """The wrapper table that puts a union in a vector."""
    return f"{union}Box"


def _fbs_type(t: TypeRef, where: str) -> str:
    if t.kind == "list":
        assert t.item is not None
        if t.item.kind == "union":
            return f"[{box_name(t.item.name)}]"
        if t.item.kind == "bytes":
            raise SchemaError("list[bytes] has no FlatBuffers form (no vectors of vectors)", where=where)
        return f"[{_fbs_type(t.item, where)}]"
    if t.kind == "scalar":
        return FBS_SCALARS[t.name]
    if t.kind == "str":
        return "string"
    if t.kind == "bytes":
        return "[ubyte]"
    return t.name


def fbs_field_ids(fields: tuple[Field, ...]) -> dict[str, int]:
    """FlatBuffers id of each field: a union field takes two (``_type`` first)."""
    out: dict[str, int] = {}
    next_id = 0
    for f in fields:
        if f.type.kind == "union":
            next_id += 1
        out[f.name] = next_id
        next_id += 1
    return out


def _default(f: Field) -> str:
    if not f.has_default or f.type.kind not in ("scalar", "enum"):
        return ""
    if isinstance(f.default, bool):
        return " = true" if f.default else " = false"
    return f" = {f.default}"


def _required(f: Field) -> bool:
    """A required field that FlatBuffers can mark ``(required)`` (scalars cannot be)."""
    return f.required and f.type.kind not in ("scalar", "enum") and not f.deprecated


def _comment(text: str, indent: str = "") -> list[str]:
    return [f"{indent}/// {ln}".rstrip() for ln in text.strip().splitlines()]


def _check_names(schema: Schema) -> None:
    taken = {*schema.structs, *schema.enums, *schema.unions}
    generated = [box_name(u) for u in schema.unions] + [SIDE_INDEX]
    for name in generated:
        if name in taken:
            raise SchemaError(
                f"the name {name} is taken by the FlatBuffers schema (union boxes and the side index)",
                source=schema.source,
                where=f"$.structs.{name}",
            )


def emit_fbs(schema: Schema) -> dict[str, str]:
    """Return ``{relative path: text}`` of the ``.fbs`` file."""
    _check_names(schema)
    out = [*header_lines(schema, comment="//"), ""]
    out += _comment(schema.doc)
    out += [f"namespace {fbs_namespace(schema)};", ""]
    out += _comment(
        'A field with tracepack_ref: "T" holds indices of rows of the root\'s table T (a list: one per item);\n'
        "tracepack_null: N, negative values down to N are sentinels, not rows; tracepack_trie, the column is\n"
        "a trie's parent: row i's parent is below i. Readers check every such index against T's row count."
    )
    out += [f'attribute "{a}";' for a in REF_ATTRIBUTES] + [""]
    for e in schema.enums.values():
        base = FBS_SCALARS[e.type]
        out += _comment(e.doc)
        out.append(f"enum {e.name} : {base} {{")
        for v in e.values:
            out += _comment(v.doc + (" (deprecated)" if v.deprecated else ""), "  ")
            out.append(f"  {v.name} = {v.value},")
        out += ["}", ""]
    # Unions before the tables that use them: flatc resolves a forward reference as a table.
    for u in schema.unions.values():
        out += _comment(u.doc)
        out.append(f"union {u.name} {{")
        for var in u.variants:
            out += _comment(var.doc + (" (deprecated)" if var.deprecated else ""), "  ")
            out.append(f"  {var.type} = {var.id},")
        out += ["}", ""]
        out += _comment(f"One {u.name} in a table, so that vectors of them work in every language.")
        out += [f"table {box_name(u.name)} {{", f"  value:{u.name} (id: 1, required);", "}", ""]
    for s in schema.structs.values():
        out += _comment(s.doc)
        out.append(f"table {s.name} {{")
        ids = fbs_field_ids(s.fields)
        for f in s.fields:
            out += _comment(f.doc, "  ")
            attrs = [f"id: {ids[f.name]}"]
            if _required(f):
                attrs.append("required")
            if f.deprecated:
                attrs.append("deprecated")
            if f.ref is not None:
                attrs.append(f'tracepack_ref: "{f.ref}"')
            if f.null is not None:
                attrs.append(f"tracepack_null: {f.null}")
            if f.trie:
                attrs.append("tracepack_trie")
            where = f"$.structs.{s.name}.fields.{f.name}"
            out.append(f"  {f.name}:{_fbs_type(f.type, where)}{_default(f)} ({', '.join(attrs)});")
        out += ["}", ""]
    out += _comment(
        f"FlatBuffers only, not part of the {schema.name} schema: the root of a second, small buffer that\n"
        f"the FlatBuffers codec writes after the {schema.root} buffer, with lookup indexes for lazy readers.\n"
        f'It has the file identifier "{SIDE_INDEX_IDENTIFIER}", and the payload ends with 8 bytes: its length '
        f'(uint32) and\n"{SIDE_INDEX_IDENTIFIER}" again. A payload without them has no side index.'
    )
    out += [
        f"table {SIDE_INDEX} {{",
        *_comment("Indices of graph.nodes sorted by name (UTF-8 byte order; equal names: last node first).", "  "),
        "  nodes_by_name:[uint] (id: 0);",
        "}",
        "",
        f"root_type {schema.root};",
        f'file_identifier "{schema.file_identifier}";',
        "",
    ]
    return {fbs_path(schema): "\n".join(out)}
