"""The tracepack code generator: ``schema/*.toml`` -> ``generated/``.

The pipeline has one module per stage, each importing only the ones before it:

``parse``
    reads a schema file (TOML) into raw records, checking it against the
    schema-of-the-schema (:mod:`tracepack.codegen.parse`);
``model``
    resolves names and types into the intermediate model (IR) that every
    emitter and the compatibility checker work on, and enforces the
    language's rules (:mod:`tracepack.codegen.model`);
``emit_python`` / ``emit_jsonschema`` / ``emit_fbs``
    render the IR as msgspec Structs, converters and validators, a JSON
    Schema, and a FlatBuffers schema;
``check``
    regenerates in memory and compares with what is checked in.

Run it with ``python -m tracepack.codegen generate`` (``make generate``) or
``python -m tracepack.codegen check`` (``make check``).
"""

from tracepack.codegen.model import Schema, load_schema, load_schema_text

__all__ = ["Schema", "load_schema", "load_schema_text"]
