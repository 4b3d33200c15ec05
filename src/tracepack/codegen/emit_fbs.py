"""Stage 3c: the FlatBuffers schema (``.fbs``) of one version.

Every struct becomes a ``table`` (tables can evolve; FlatBuffers structs
cannot), with explicit ``(id: N)`` attributes. FlatBuffers gives a union field
two ids (its hidden ``_type`` field takes the first), so ids are computed here
from our field positions; appending fields keeps every earlier id. A
``list[Union]`` becomes a vector of a one-field wrapper table
(``<Union>Box``), which every FlatBuffers language supports.
"""

from __future__ import annotations

from tracepack.codegen.emit_python import header_lines
from tracepack.codegen.model import Field, Schema, TypeRef

__all__ = ["FBS_SCALARS", "emit_fbs", "fbs_field_ids", "fbs_namespace"]

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


def fbs_namespace(schema: Schema) -> str:
    """One namespace for every version, so ``flatc --conform`` compares like with like."""
    return schema.name


def _fbs_type(t: TypeRef, schema: Schema) -> str:
    if t.kind == "list":
        assert t.item is not None
        if t.item.kind == "union":
            return f"[{t.item.name}Box]"
        return f"[{_fbs_type(t.item, schema)}]"
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


def _default(f: Field, schema: Schema) -> str:
    if not f.has_default or f.type.kind not in ("scalar", "enum"):
        return ""
    if f.type.kind == "enum":
        return f" = {f.default}"
    if isinstance(f.default, bool):
        return " = true" if f.default else " = false"
    return f" = {f.default}"


def _comment(text: str, indent: str = "") -> list[str]:
    return [f"{indent}/// {ln}".rstrip() for ln in text.strip().splitlines()]


def emit_fbs(schema: Schema) -> dict[str, str]:
    """Return ``{relative path: text}`` of the ``.fbs`` file."""
    out = [*header_lines(schema, comment="//"), ""]
    out += _comment(schema.doc)
    out += [f"namespace {fbs_namespace(schema)};", ""]
    for e in schema.enums.values():
        base = FBS_SCALARS[e.type]
        out += _comment(e.doc)
        out.append(f"enum {e.name} : {base} {{")
        for v in e.values:
            out += _comment(v.doc, "  ")
            out.append(f"  {v.name} = {v.value},")
        out += ["}", ""]
    for s in schema.structs.values():
        out += _comment(s.doc)
        out.append(f"table {s.name} {{")
        ids = fbs_field_ids(s.fields)
        for f in s.fields:
            out += _comment(f.doc, "  ")
            attrs = [f"id: {ids[f.name]}"]
            if f.deprecated:
                attrs.append("deprecated")
            out.append(f"  {f.name}:{_fbs_type(f.type, schema)}{_default(f, schema)} ({', '.join(attrs)});")
        out += ["}", ""]
    for u in schema.unions.values():
        out += _comment(u.doc)
        out.append(f"union {u.name} {{")
        for var in u.variants:
            out += _comment(var.doc, "  ")
            out.append(f"  {var.type} = {var.id},")
        out += ["}", ""]
        out += _comment(f"A {u.name} in a table, so that vectors of them work in every language.")
        out += [f"table {u.name}Box {{", f"  value:{u.name} (id: 1);", "}", ""]
    out += [
        f"root_type {schema.root};",
        f'file_identifier "{schema.file_identifier}";',
        'file_extension "tpk";',
        "",
    ]
    return {f"fbs/tracepack-{schema.version}.fbs": "\n".join(out)}
