"""Stage 1: read a schema file and check it against the schema-of-the-schema.

A schema file is TOML. Its shape is declared here as msgspec Structs, so a
misspelt key or a wrong type is reported with its exact place, e.g.
``schema/tracepack-1.0.toml: $.structs.Node.fields.name.id: Expected `int`, got `str```.
Meaning (do names resolve, are ids contiguous...) is checked by :mod:`model`.
"""

from __future__ import annotations

import sys
from typing import Literal, TypeVar

import msgspec

from tracepack.errors import SchemaError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]

__all__ = ["RawEnum", "RawField", "RawSchema", "RawStruct", "RawUnion", "parse_schema_text"]


class RawMeta(msgspec.Struct, forbid_unknown_fields=True):
    """``[schema]``: the schema's identity."""

    name: str
    version: str
    status: Literal["released", "draft"]
    root: str
    file_identifier: str
    doc: str


class RawField(msgspec.Struct, forbid_unknown_fields=True):
    """``[structs.S.fields.F]``."""

    id: int
    type: str
    doc: str
    default: bool | int | float | str | list[None] | None = None
    optional: bool = False
    ref: str | None = None
    null: int | None = None
    trie: bool = False
    sparse: bool = False
    pool: bool = False
    deprecated: bool = False


class RawStruct(msgspec.Struct, forbid_unknown_fields=True):
    """``[structs.S]``."""

    doc: str
    fields: dict[str, RawField] = {}
    table: bool = False


class RawEnumValue(msgspec.Struct, forbid_unknown_fields=True):
    """``[enums.E.values.V]``."""

    value: int
    doc: str
    deprecated: bool = False


class RawEnum(msgspec.Struct, forbid_unknown_fields=True):
    """``[enums.E]``."""

    doc: str
    type: Literal["u8", "u16", "u32"]
    values: dict[str, RawEnumValue]


class RawVariant(msgspec.Struct, forbid_unknown_fields=True):
    """``[unions.U.variants.V]``."""

    id: int
    type: str
    doc: str
    deprecated: bool = False


class RawUnion(msgspec.Struct, forbid_unknown_fields=True):
    """``[unions.U]``."""

    doc: str
    variants: dict[str, RawVariant]


class RawSchema(msgspec.Struct, forbid_unknown_fields=True):
    """A whole schema file."""

    schema: RawMeta
    structs: dict[str, RawStruct]
    enums: dict[str, RawEnum] = {}
    unions: dict[str, RawUnion] = {}


def parse_schema_text(text: str, *, source: str) -> RawSchema:
    """Parse TOML ``text`` into a :class:`RawSchema`; ``source`` names it in errors."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SchemaError(f"not valid TOML: {exc}", source=source) from None
    from tracepack.io.guard import check_depth

    check_depth(data, source, SchemaError)  # exact for a lowered max_depth too (a table is a level)
    # Check the nested tables one by one first, so an error names the exact struct and field
    # (msgspec itself spells dictionary keys as `[...]`).
    for group, item_key, item_type in (("structs", "fields", RawField), ("enums", "values", RawEnumValue)):
        for name, table in _items(data.get(group)):
            for member, value in _items(table.get(item_key) if isinstance(table, dict) else None):
                _convert(value, item_type, source, f"$.{group}.{name}.{item_key}.{member}")
    for name, table in _items(data.get("unions")):
        for member, value in _items(table.get("variants") if isinstance(table, dict) else None):
            _convert(value, RawVariant, source, f"$.unions.{name}.variants.{member}")
    return _convert(data, RawSchema, source, "$")


def _items(value: object) -> list[tuple[str, object]]:
    return list(value.items()) if isinstance(value, dict) else []


_T = TypeVar("_T")


def _convert(value: object, kind: type[_T], source: str, where: str) -> _T:
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        message, _, path = str(exc).rpartition(" - at ")
        if not message:
            message, path = str(exc), "$"
        place = where + path.strip("`")[1:]
        raise SchemaError(message, source=source, where=place) from None
