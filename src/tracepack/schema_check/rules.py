"""The rule table: every kind of schema change the checker knows, per codec.

A rule has a stable id, the version bump it needs and the codecs it breaks.
The bump is the worst the change does to any codec, because one version
number covers every codec:

``none``
    nothing a reader or writer can observe (documentation);
``minor``
    older readers read newer files of the same major (skipping what they do
    not know, failing loudly only on a new enum value or union variant they
    meet) and newer readers read older files (filling in defaults);
``major``
    some codec, or validation, misreads or rejects files across the change;
    safe only because readers refuse majors they do not know and each
    released version keeps its own decoder plus a migration;
``forbidden``
    the change gives bytes that are already written a different meaning
    under the same name or id; no version number fixes that, because tools
    that read one codec without the tracepack version (``flatc``, ``jq``,
    readers in other languages) would silently misread old files.

Codecs identify things differently, which is why a rule can break one codec
and not another: the JSON codec keys fields, enum values and union variants
by **name**; MessagePack uses a field's **position** (its ``id``), enum
**values** and variant **ids**; the FlatBuffers row layout (``flatbuffers-rows``,
codec id 2) uses explicit field ids (a union
field takes two, see :func:`tracepack.codegen.emit_fbs.fbs_field_ids`), fixed
scalar **widths**, enum values and variant ids. The columnar codec keys
fields by **name** (a column per field path, like JSON) but enum **values**
and variant **ids** by number (like MessagePack), and writes every column
that has rows, defaults included (unlike JSON and FlatBuffers, which omit
defaults). The FlatBuffers column layout (``flatbuffers-columns``) stores the
columnar codec's columns, by the same paths, so it finds things as columnar
does, but it leaves out a field whose **every row** holds its default (a
reader fills in its own): the default rules concern it as they do JSON, with
no exception for floats or zeros; and an enum value that is only ever a
field's default is still written where a column mixes it with other values.
The whole table, with worked examples, is ``docs/schema-rules.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["BUMP_ORDER", "CODECS", "RULES", "Bump", "Codec", "Rule", "worst"]

Bump = Literal["none", "minor", "major", "forbidden"]
Codec = Literal["json", "msgpack", "flatbuffers-rows", "columnar", "flatbuffers-columns"]

#: Every codec of the format, in the order findings list them.
CODECS: Final[tuple[Codec, ...]] = ("json", "msgpack", "flatbuffers-rows", "columnar", "flatbuffers-columns")
#: Bumps from least to most severe.
BUMP_ORDER: Final[tuple[Bump, ...]] = ("none", "minor", "major", "forbidden")

_ALL = CODECS
_NONE: tuple[Codec, ...] = ()
_JSON: tuple[Codec, ...] = ("json",)
#: Codecs that key fields by name: JSON, and the column codecs (one column per field path).
_FIELD_NAMES: tuple[Codec, ...] = ("json", "columnar", "flatbuffers-columns")
#: Codecs that find fields by position or id.
_POSITIONAL: tuple[Codec, ...] = ("msgpack", "flatbuffers-rows")
#: Codecs that store enum values and union variants by number.
_NUMBERS: tuple[Codec, ...] = ("msgpack", "flatbuffers-rows", "columnar", "flatbuffers-columns")
#: Codecs that omit fields at their default when writing: JSON, and FlatBuffers for everything but
#: floats (which it always writes, so NaN payloads and -0.0 survive). MessagePack structs are
#: array-like, every field written; columnar writes every column that has rows. The FlatBuffers
#: column layout leaves out a field whose every row holds its default, floats included.
_OMIT_DEFAULTS: tuple[Codec, ...] = ("json", "flatbuffers-rows", "flatbuffers-columns")
#: The column codecs: one column per path, shredded by the same plan.
_COLUMNS: tuple[Codec, ...] = ("columnar", "flatbuffers-columns")
_FB: tuple[Codec, ...] = ("flatbuffers-rows",)


@dataclass(frozen=True)
class Rule:
    """One kind of change: its id, bump, the codecs it breaks and what it means."""

    id: str
    bump: Bump
    breaks: tuple[Codec, ...]
    summary: str


def _rules(*rules: Rule) -> dict[str, Rule]:
    return {r.id: r for r in rules}


#: Every rule, by id. Ids are stable: tests, CI logs and docs refer to them.
RULES: Final[dict[str, Rule]] = _rules(
    # -- the schema itself ------------------------------------------------------------------------
    Rule(
        "SCHEMA_NAME_CHANGED",
        "minor",
        _NONE,
        "the schema name changed: it names generated code (the FlatBuffers namespace), never bytes on the wire",
    ),
    Rule("ROOT_CHANGED", "major", _ALL, "the root type changed: every reader decodes a different type"),
    Rule("FILE_IDENTIFIER_CHANGED", "major", _FB, "the FlatBuffers file identifier changed: readers reject the buffer"),
    # -- types ------------------------------------------------------------------------------------
    Rule("STRUCT_ADDED", "minor", _NONE, "a struct was added"),
    Rule(
        "STRUCT_REMOVED",
        "minor",
        _NONE,
        "a struct was removed: only generated code changes (what held it changed too, and is a finding of its own)",
    ),
    Rule(
        "STRUCT_RENAMED",
        "minor",
        _NONE,
        "a struct type was renamed (every use follows it): no codec writes type names, only generated code changes",
    ),
    Rule("ENUM_RENAMED", "minor", _NONE, "an enum type was renamed (every use follows it): no codec writes type names"),
    Rule(
        "UNION_RENAMED", "minor", _NONE, "a union type was renamed (every use follows it): no codec writes type names"
    ),
    Rule(
        "STRUCT_BECAME_VARIANT",
        "major",
        ("msgpack", *_COLUMNS),
        "a struct used as a plain field became a union variant: MessagePack writes a variant's id before its "
        "fields everywhere, so its plain values change layout (the column codecs too where a field holds it "
        "optionally)",
    ),
    Rule(
        "STRUCT_NO_LONGER_VARIANT",
        "major",
        ("msgpack", *_COLUMNS),
        "a struct used as a plain field stopped being a union variant: MessagePack stops writing the variant id "
        "before its fields",
    ),
    Rule("ENUM_ADDED", "minor", _NONE, "an enum was added"),
    Rule(
        "ENUM_REMOVED",
        "minor",
        _NONE,
        "an enum was removed: only generated code changes (what held it changed too, and is a finding of its own)",
    ),
    Rule("UNION_ADDED", "minor", _NONE, "a union was added"),
    Rule(
        "UNION_REMOVED",
        "minor",
        _NONE,
        "a union was removed: only generated code changes (what held it changed too, and is a finding of its own)",
    ),
    # -- fields -----------------------------------------------------------------------------------
    Rule("FIELD_ADDED", "minor", _NONE, "a field with a default (or optional) was appended"),
    Rule("FIELD_ADDED_WITHOUT_DEFAULT", "major", _ALL, "a required field was added: files written before lack it"),
    Rule(
        "COLUMN_ADDED_NOT_SPARSE",
        "major",
        _ALL,
        "a list column was added to a table without `sparse = true`: older tables have rows but no values in it",
    ),
    Rule(
        "FIELD_REMOVED",
        "major",
        _ALL,
        "a field was removed (deprecate it instead): older readers miss a required one; one with a default "
        "or optional breaks no codec, but its id and name are retired for good",
    ),
    Rule(
        "FIELD_RENAMED",
        "major",
        _FIELD_NAMES,
        "a field kept its id and type but changed its name: JSON and the column codecs key by name",
    ),
    Rule("FIELD_ID_CHANGED", "major", _POSITIONAL, "a field moved to another id: positional codecs read by id"),
    Rule(
        "FIELD_FB_ID_CHANGED",
        "major",
        _FB,
        "a field's FlatBuffers id moved (a field before it became or stopped being a union)",
    ),
    Rule("FIELD_ID_REUSED", "forbidden", _ALL, "an id now holds a different field (other name and type)"),
    Rule("FIELD_DEPRECATED_REUSED", "forbidden", _ALL, "the id of a deprecated field now holds another field"),
    Rule(
        "FIELD_NAME_REUSED",
        "forbidden",
        _ALL,
        "the name of a field removed in an earlier release is back with another type: JSON (and the column codecs, "
        "when the type keeps its shape: value, list, struct or union) read old files' values under that name "
        "(MessagePack and FlatBuffers too when the id is the same)",
    ),
    Rule(
        "FIELD_TYPE_PROMOTED",
        "major",
        _FB,
        "a field's type was widened (u8->u16->u32->u64, i8->...->i64, uN->iM with M>N, f32->f64): "
        "JSON and MessagePack read old values, FlatBuffers stores a fixed width",
    ),
    Rule("FIELD_TYPE_CHANGED", "major", _ALL, "a field's type changed"),
    Rule(
        "FIELD_DEFAULT_CHANGED",
        "forbidden",
        _OMIT_DEFAULTS,
        "a field's default changed: codecs that omit a value equal to the default (JSON; FlatBuffers, except "
        "floats; the FlatBuffers column layout where every row holds it) would read old files' omitted "
        "values as the new default",
    ),
    Rule(
        "FIELD_DEFAULT_ADDED",
        "major",
        _OMIT_DEFAULTS,
        "a required field got a default: writers that omit defaults (JSON; FlatBuffers, except floats and zero "
        "defaults; the FlatBuffers column layout where every row holds it) leave out what older readers require",
    ),
    Rule(
        "FIELD_DEFAULT_REMOVED",
        "major",
        _OMIT_DEFAULTS,
        "a field lost its default: files of codecs that omitted it (JSON; FlatBuffers, except floats and zero "
        "defaults; the FlatBuffers column layout where every row holds it) no longer decode",
    ),
    Rule("FIELD_MADE_OPTIONAL", "major", _ALL, "a required field became optional: older readers reject null"),
    Rule("FIELD_MADE_REQUIRED", "major", _ALL, "an optional field became required: files without it no longer decode"),
    Rule("FIELD_DEPRECATED", "minor", _NONE, "a field with a default was deprecated"),
    Rule(
        "REQUIRED_FIELD_DEPRECATED",
        "major",
        _FB,
        "a required field was deprecated: FlatBuffers writers stop writing it, older readers need it",
    ),
    Rule("FIELD_UNDEPRECATED", "minor", _NONE, "a deprecated field with a default is in use again"),
    Rule(
        "REQUIRED_FIELD_UNDEPRECATED",
        "major",
        _FB,
        "a deprecated required field is in use again: FlatBuffers files written meanwhile lack it",
    ),
    Rule(
        "CONSTRAINT_TIGHTENED",
        "major",
        _ALL,
        "a ref/null/trie/table/sparse constraint was tightened: files written before may fail validation",
    ),
    Rule(
        "CONSTRAINT_LOOSENED",
        "major",
        _ALL,
        "a ref/null/trie/table/sparse constraint was loosened: older readers reject what newer writers may write",
    ),
    Rule(
        "CONSTRAINT_CHANGED", "major", _ALL, "a ref target or a pool column changed: the same numbers mean other things"
    ),
    # -- enums ------------------------------------------------------------------------------------
    Rule("ENUM_TYPE_CHANGED", "major", _FB, "an enum's integer type changed: FlatBuffers stores a fixed width"),
    Rule("ENUM_VALUE_ADDED", "minor", _NONE, "an enum value was added"),
    Rule("ENUM_VALUE_REMOVED", "major", _ALL, "an enum value was removed (deprecate it instead)"),
    Rule(
        "ENUM_VALUE_RENAMED",
        "major",
        _JSON,
        "an enum value kept its number but changed its name: JSON writes names (unless the value is only ever "
        "a default, which JSON omits)",
    ),
    Rule(
        "ENUM_VALUE_RENUMBERED",
        "major",
        _NUMBERS,
        "an enum value changed its number: binary codecs write numbers (FlatBuffers omits a default: not when "
        "the value is only ever a default)",
    ),
    Rule(
        "ENUM_VALUE_NUMBER_REUSED",
        "forbidden",
        _ALL,
        "the number of an enum value removed in an earlier release now names another value: binary files "
        "written before read as the new value, JSON files name a value that is gone",
    ),
    Rule(
        "ENUM_VALUE_NAME_REUSED",
        "forbidden",
        _NUMBERS,
        "the name of an enum value removed in an earlier release is back with another number: binary files "
        "written before hold the old number",
    ),
    Rule("ENUM_VALUE_DEPRECATED_REUSED", "forbidden", _ALL, "the number of a deprecated enum value now names another"),
    Rule("ENUM_VALUE_DEPRECATED", "minor", _NONE, "an enum value was deprecated"),
    Rule("ENUM_VALUE_UNDEPRECATED", "minor", _NONE, "a deprecated enum value is in use again"),
    # -- unions -----------------------------------------------------------------------------------
    Rule("UNION_VARIANT_ADDED", "minor", _NONE, "a union variant was added"),
    Rule("UNION_VARIANT_REMOVED", "major", _ALL, "a union variant was removed (deprecate it instead)"),
    Rule(
        "UNION_VARIANT_RENAMED",
        "major",
        _JSON,
        "a variant kept its id and type but changed its name: JSON tags by name",
    ),
    Rule("UNION_VARIANT_ID_CHANGED", "major", _NUMBERS, "a variant changed its id: binary codecs tag by id"),
    Rule("UNION_VARIANT_TYPE_CHANGED", "major", _ALL, "a variant kept its name and id but holds another struct"),
    Rule(
        "UNION_VARIANT_ID_REUSED", "forbidden", _ALL, "a variant id now holds a different variant (other name and type)"
    ),
    Rule("UNION_VARIANT_DEPRECATED_REUSED", "forbidden", _ALL, "the id of a deprecated variant now holds another"),
    Rule("UNION_VARIANT_DEPRECATED", "minor", _NONE, "a union variant was deprecated"),
    Rule("UNION_VARIANT_UNDEPRECATED", "minor", _NONE, "a deprecated union variant is in use again"),
)


def worst(bumps: list[Bump] | tuple[Bump, ...]) -> Bump:
    """The most severe of ``bumps`` (``none`` for no bumps)."""
    return max(bumps, key=BUMP_ORDER.index, default="none")
