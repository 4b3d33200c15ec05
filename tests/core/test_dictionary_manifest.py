"""The built-in dictionaries' manifest (spec §8.2) is what other readers use to find them: it must list
exactly tracepack.dictionaries.BUILTIN, and the files it names as shipped must be those bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import zstandard

from tracepack import dictionaries

ZSTD = Path(dictionaries.__file__).resolve().parent / "data" / "zstd"
FIX = (
    "write it again: .venv/bin/python -c 'from tracepack import dictionaries; "
    'print(dictionaries.manifest(), end="")\' > src/tracepack/data/zstd/MANIFEST.tsv'
)


def _rows() -> list[list[str]]:
    lines = (ZSTD / dictionaries.MANIFEST_FILE).read_text(encoding="utf-8").splitlines()
    rows = [line.split("\t") for line in lines if not line.startswith("#")]
    assert rows[0] == ["id", "name", "file", "sha256", "status"]
    return rows[1:]


def test_manifest_lists_every_builtin_dictionary() -> None:
    """A dictionary added to BUILTIN (a retrained one) fails here until its line is in the manifest."""
    text = (ZSTD / dictionaries.MANIFEST_FILE).read_text(encoding="utf-8")
    expected = dictionaries.manifest()
    missing = [line for line in expected.splitlines() if line not in text.splitlines()]
    assert text == expected, f"MANIFEST.tsv differs from dictionaries.BUILTIN (missing: {missing}); {FIX}"


def test_manifest_files_are_the_shipped_bytes() -> None:
    """Independent of BUILTIN's code: each shipped line's file has that sha256 and zstd dictionary id;
    a withdrawn one's file is not in the package."""
    rows = _rows()
    assert len({r[0] for r in rows}) == len({r[1] for r in rows}) == len(rows)
    for dict_id, name, file, sha256, status in rows:
        path = ZSTD / file
        if status == "withdrawn":
            assert not path.exists(), f"{name} is withdrawn: its file is not shipped"
            continue
        assert status == "shipped", name
        data = path.read_bytes()
        assert hashlib.sha256(data).hexdigest() == sha256, name
        assert zstandard.ZstdCompressionDict(data).dict_id() == int(dict_id), name
        assert 32768 <= int(dict_id) < 2**31, name  # zstd's range for dictionaries anyone may assign
