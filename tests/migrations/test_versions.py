"""Which versions a build writes and reads: releases only, never a draft."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tracepack import model as m
from tracepack.codegen.check import load_schemas
from tracepack.codegen.emit_python import emit_package_index
from tracepack.errors import VersionError
from tracepack.versions import CURRENT, RELEASED, VERSIONS, current_version, generated, reader_version

REPO = Path(__file__).resolve().parents[2]


def _index(schemas: list[object]) -> dict[str, object]:
    namespace: dict[str, object] = {}
    exec(emit_package_index(schemas), namespace)  # type: ignore[arg-type]
    return namespace


def test_current_is_the_newest_release_and_the_model() -> None:
    schemas = {(s.major, s.minor): s for s in load_schemas(REPO / "schema")}
    assert max(RELEASED) == CURRENT
    assert schemas[CURRENT].status == "released"
    assert m.CURRENT_VERSION == CURRENT, "src/tracepack/model.py must import the newest released version"
    assert set(RELEASED) == {v for v, s in schemas.items() if s.status == "released"}
    assert set(VERSIONS) == set(schemas)


def test_a_draft_gets_code_but_is_never_current() -> None:
    """`make generate` writes a draft's package, but writers stay on the newest release."""
    schemas = [s for s in load_schemas(REPO / "schema") if s.status == "released"]
    last = schemas[-1]
    draft = dataclasses.replace(last, minor=last.minor + 1, status="draft")
    index = _index([*schemas, draft])
    versions, released = index["VERSIONS"], index["RELEASED"]
    assert versions == (*((s.major, s.minor) for s in schemas), (draft.major, draft.minor))
    assert (draft.major, draft.minor) not in released  # type: ignore[operator]
    assert current_version(released) == (last.major, last.minor)  # type: ignore[arg-type]
    # A file that declares the draft's version reads as a newer minor of the newest release.
    assert reader_version((draft.major, draft.minor), released=released) == (last.major, last.minor)  # type: ignore[arg-type]


def test_no_release_is_an_error() -> None:
    with pytest.raises(VersionError, match="no released schema version"):
        current_version(())


@pytest.mark.parametrize("version", [(1, 7), (1, 99)])
def test_newer_minor_reads_with_the_newest_known_minor(version: tuple[int, int]) -> None:
    assert reader_version(version) == max(v for v in RELEASED if v[0] == version[0])


@pytest.mark.parametrize("version", [(2, 0), (0, 9), (7, 1)])
def test_unknown_major_is_refused_naming_both_versions(version: tuple[int, int]) -> None:
    with pytest.raises(VersionError) as info:
        reader_version(version, source="x.tpk")
    text = str(info.value)
    assert f"schema version {version[0]}.{version[1]} is not readable" in text
    assert f"this build writes {CURRENT[0]}.{CURRENT[1]}" in text


def test_every_release_has_generated_code() -> None:
    for version in RELEASED:
        assert version == generated(version).SCHEMA_VERSION
    with pytest.raises(VersionError, match="no generated code"):
        generated((9, 9))
