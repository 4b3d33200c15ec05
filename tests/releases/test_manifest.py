"""The committed release samples are the ones the manifest lists, byte for byte, and name no machine path."""

from __future__ import annotations

import hashlib

import pytest

from tests.releases.samples import MANIFEST, RELEASES_DIR, VERSIONS, readback


def test_every_release_folder_is_in_the_manifest() -> None:
    folders = sorted(p.name for p in RELEASES_DIR.iterdir() if p.is_dir())
    assert sorted(VERSIONS) == folders


@pytest.mark.parametrize("version", VERSIONS)
def test_files_match_the_manifest(version: str) -> None:
    listed = MANIFEST["releases"][version]["files"]
    present = {p.name: p for p in (RELEASES_DIR / version).iterdir()}
    assert sorted(present) == sorted(listed), "run `make release-samples` (or build_all.py --manifest-only)"
    for name, entry in listed.items():
        data = present[name].read_bytes()
        assert len(data) == entry["bytes"]
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], name


@pytest.mark.parametrize("version", VERSIONS)
def test_readback_names_the_writing_release(version: str) -> None:
    record = readback(version)
    assert record["release"] == version
    assert record["torch"].startswith(version + ".")
    assert MANIFEST["releases"][version]["schema_version"] == record["schema_version"]
