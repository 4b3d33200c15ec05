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
