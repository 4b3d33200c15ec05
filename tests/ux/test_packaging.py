"""Packaging metadata: ranges not pins, an SPDX license with its text, typed packages, schemas findable.

The built wheel itself is checked by ``make smoke`` (scripts/smoke_wheel.py), which CI runs.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.ux.helpers import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _requirements() -> list[str]:
    reqs = list(PROJECT["dependencies"])
    for items in PROJECT["optional-dependencies"].values():
        reqs += items
    return reqs


def test_no_exact_pins() -> None:
    pinned = [r for r in _requirements() if re.search(r"===?\s*[0-9]", r)]
    assert pinned == []
    unbounded = [r for r in _requirements() if not re.search(r"[<>~]=?", r) and not r.startswith("tracepack[")]
    assert unbounded == [], "every requirement says which versions work"


def test_flatbuffers_is_for_the_tests_only() -> None:
    assert not any(r.startswith("flatbuffers") for r in PROJECT["dependencies"])
    assert any(r.startswith("flatbuffers") for r in PROJECT["optional-dependencies"]["test"])
    # and nothing in the package imports it (tracepack reads FlatBuffers itself)
    for path in (ROOT / "src" / "tracepack").rglob("*.py"):
        assert not re.search(r"^\s*(import flatbuffers|from flatbuffers)", path.read_text(), re.M), path


def test_spdx_license_with_its_text() -> None:
    assert PROJECT["license"] == "BSD-3-Clause"
    assert PROJECT["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License\n\nCopyright (c) 2026, the tracepack authors\n")
    assert "Neither the name of the copyright holder" in text
    assert any(c.startswith("Typing :: Typed") for c in PROJECT["classifiers"])


def test_both_packages_are_typed() -> None:
    assert (ROOT / "src" / "tracepack" / "py.typed").exists()
    assert (ROOT / "generated" / "python" / "tracepack_generated" / "py.typed").exists()


def test_schema_files_are_found_from_the_package() -> None:
    from tracepack.resources import fbs_dir, jsonschema_dir, schema_dir

    assert schema_dir() == ROOT / "schema"
    assert (fbs_dir() / "tracepack-1.1.fbs").exists()
    assert (jsonschema_dir() / "tracepack-1.1.schema.json").exists()


def test_schema_check_all_needs_no_folder(capsys: object) -> None:
    from tracepack.cli import main

    assert main(["schema", "check", "--all"]) == 0


def test_readme_is_the_long_description() -> None:
    assert PROJECT["readme"] == "README.md"
    assert Path(ROOT / "MANIFEST.in").read_text().count("graft tests") == 1
