"""Stage 3b: a JSON Schema (draft 2020-12) of the JSON codec's documents.

Written from the IR, so other languages can validate or generate types for
tracepack's JSON form without Python.
"""

from __future__ import annotations

import json
from typing import Any

from tracepack.codegen.emit_python import header_lines, json_float
from tracepack.codegen.model import INT_RANGES, Schema, TypeRef

__all__ = ["emit_jsonschema"]


def _type(t: TypeRef) -> dict[str, Any]:
    if t.kind == "list":
        assert t.item is not None
        return {"type": "array", "items": _type(t.item)}
    if t.kind == "scalar":
        if t.name in INT_RANGES:
            lo, hi = INT_RANGES[t.name]
            return {"type": "integer", "minimum": lo, "maximum": hi}
        if t.name == "bool":
            return {"type": "boolean"}
        # JSON has no NaN or infinities: the JSON codec writes them as these names.
        return {"anyOf": [{"type": "number"}, {"enum": ["NaN", "Infinity", "-Infinity"]}]}
    if t.kind == "str":
        return {"type": "string"}
    if t.kind == "bytes":
        return {"type": "string", "contentEncoding": "base64"}
    return {"$ref": f"#/$defs/{t.name}"}


def emit_jsonschema(schema: Schema) -> dict[str, str]:
    """Return ``{relative path: text}`` of the JSON Schema file."""
    defs: dict[str, Any] = {}
    for e in schema.enums.values():
        defs[e.name] = {"description": e.doc, "enum": [v.name for v in e.values]}
    for s in schema.structs.values():
        props: dict[str, Any] = {}
        required = []
        if s.variant_of is not None:
            props["kind"] = {"const": s.variant_of[1]}
            required.append("kind")
        for f in s.fields:
            prop = _type(f.type)
            if f.optional:
                prop = {"anyOf": [prop, {"type": "null"}]}
            prop["description"] = f.doc
            if f.has_default:
                is_float = f.type.kind == "scalar" and f.type.name in ("f32", "f64")
                prop["default"] = json_float(f.default) if is_float else f.default
            props[f.name] = prop
            if f.required:
                required.append(f.name)
        defs[s.name] = {"description": s.doc, "type": "object", "properties": props, "required": required}
    for u in schema.unions.values():
        defs[u.name] = {"description": u.doc, "oneOf": [{"$ref": f"#/$defs/{v.type}"} for v in u.variants]}
    doc = {
        "$comment": " ".join(line.lstrip("# ") for line in header_lines(schema)),
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"tracepack-{schema.version}.schema.json",
        "title": f"tracepack {schema.version} (JSON codec)",
        "description": schema.doc,
        "$ref": f"#/$defs/{schema.root}",
        "$defs": defs,
    }
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    return {f"jsonschema/tracepack-{schema.version}.schema.json": text}
