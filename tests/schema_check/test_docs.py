"""docs/schema-rules.md lists every rule with the bump and codecs the checker uses."""

from __future__ import annotations

import re
from pathlib import Path

from tracepack.schema_check import RULES

DOC = Path(__file__).resolve().parents[2] / "docs" / "schema-rules.md"
_ROW = re.compile(r"^\| `([A-Z_]+)` \| (\w+) \| ([^|]+) \|")


def test_rule_table_matches_the_checker() -> None:
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = _ROW.match(line)
        if m:
            breaks = () if m.group(3).strip() == "—" else tuple(c.strip() for c in m.group(3).split(","))
            rows[m.group(1)] = (m.group(2), breaks)
    assert rows == {r.id: (r.bump, r.breaks) for r in RULES.values()}


_CODEC_ROW = re.compile(r"^\| ([A-Z_]+) \| (\w+)" + r" \| (breaks|ok)" * 5 + r" \|$")


def test_per_codec_table_matches_the_checker() -> None:
    from tracepack.schema_check import CODECS

    header = "| rule | bump | " + " | ".join(CODECS) + " |"
    assert header in DOC.read_text(encoding="utf-8").splitlines()
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = _CODEC_ROW.match(line)
        if m:
            rows[m.group(1)] = (
                m.group(2),
                tuple(c for c, cell in zip(CODECS, m.groups()[2:], strict=True) if cell == "breaks"),
            )
    assert rows == {r.id: (r.bump, r.breaks) for r in RULES.values()}


def test_schema_language_reference_covers_every_key() -> None:
    """docs/schema-language.md documents every key a schema file may have."""
    from tracepack.codegen.parse import RawEnum, RawEnumValue, RawField, RawMeta, RawStruct, RawUnion, RawVariant

    text = (DOC.parent / "schema-language.md").read_text(encoding="utf-8")
    for raw in (RawMeta, RawField, RawStruct, RawEnum, RawEnumValue, RawUnion, RawVariant):
        for key in raw.__struct_fields__:
            assert f"`{key}" in text or f"{key} =" in text or f".{key}." in text, (raw.__name__, key)
