"""``schema/RELEASED.sha256``: every released schema is locked, and unchanged."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tracepack.codegen.check import load_schemas
from tracepack.errors import SchemaError
from tracepack.schema_check import LOCK_FILE, check_lock, parse_lock

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schema"


def test_released_schemas_match_the_lock() -> None:
    entries = parse_lock((SCHEMA_DIR / LOCK_FILE).read_text(encoding="utf-8"), source=f"schema/{LOCK_FILE}")
    schemas = load_schemas(SCHEMA_DIR)
    released = {Path(s.source).name: s for s in schemas if s.status == "released"}
    assert released, "schema/ has no released schema"
    assert {e.file for e in entries} == set(released)
    for e in entries:
        digest = hashlib.sha256((SCHEMA_DIR / e.file).read_bytes()).hexdigest()
        assert digest == e.sha256, (
            f"schema/{e.file} changed after its release; restore its released bytes "
            f"(`git log -p -- schema/{e.file}` shows the change)"
        )
        assert f"{e.version[0]}.{e.version[1]}" == released[e.file].version
    assert check_lock(entries, {Path(s.source).name: s for s in schemas}, lock=f"schema/{LOCK_FILE}") == ([], [])


def test_lock_lines_are_in_release_order() -> None:
    entries = parse_lock((SCHEMA_DIR / LOCK_FILE).read_text(encoding="utf-8"), source=LOCK_FILE)
    assert [e.version for e in entries] == sorted(e.version for e in entries)


def test_parse_lock_skips_comments_and_blank_lines() -> None:
    sha = "ab" * 32
    entries = parse_lock(
        f"# header\n\n1.0 {sha} tracepack-1.0.toml\n  # note\n2.0 {sha} tracepack-2.0.toml\n", source="L"
    )
    assert [(e.version, e.file, e.line) for e in entries] == [
        ((1, 0), "tracepack-1.0.toml", 3),
        ((2, 0), "tracepack-2.0.toml", 5),
    ]


@pytest.mark.parametrize(
    "line",
    [
        "1.0 tracepack-1.0.toml",
        f"1.0 {'AB' * 32} tracepack-1.0.toml",
        f"v1.0 {'ab' * 32} tracepack-1.0.toml",
        f"1.0 {'ab' * 32} other.toml",
        f"1.0  {'ab' * 32} tracepack-1.0.toml",
    ],
)
def test_parse_lock_rejects_malformed_lines(line: str) -> None:
    with pytest.raises(SchemaError, match=r"^L: line 2: malformed lock line"):
        parse_lock(f"# header\n{line}\n", source="L")
