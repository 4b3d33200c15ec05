"""The built-in zstd dictionaries (spec §8.2, §8.3): the C++ reader finds every one by its id in the header,
from the folder's MANIFEST.tsv or, in a folder without one, from its compiled-in list, which is
tracepack.dictionaries.BUILTIN."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import tracepack
from tests.cpp import harness
from tracepack import dictionaries

SAMPLE = harness.REPO / "src" / "tracepack" / "data" / "sample" / "model.json"
FOLDER = harness.REPO / "src" / "tracepack" / "data" / "zstd"


def _file(dict_id: int, tmp_path: Path) -> Path:
    """A msgpack file compressed with built-in dictionary ``dict_id`` (or, for a withdrawn one, naming it)."""
    import struct
    import zlib

    doc = tracepack.load(SAMPLE)
    spec = next(d for d in dictionaries.BUILTIN if d.dict_id == dict_id)
    name = spec.name if not spec.withdrawn else dictionaries.DEFAULT
    data = bytearray(tracepack.dumps(doc, codec="msgpack", compression="zstd", zstd_dict=name))
    struct.pack_into("<I", data, 20, dict_id)
    struct.pack_into("<I", data, 44, zlib.crc32(bytes(data[:44])))
    path = tmp_path / f"{spec.name}.tpk"
    path.write_bytes(bytes(data))
    return path


def test_compiled_list_is_builtin() -> None:
    source = (harness.REPO / "cpp" / "src" / "dictionaries.cpp").read_text(encoding="utf-8")
    rows = re.findall(r'\{"([a-z0-9-]+)", (0x[0-9A-F]+), "([0-9a-f]{64})",\s*"([^"]*)"\}', source)
    compiled = [(name, int(i, 16), sha, why) for name, i, sha, why in rows]
    assert compiled == [(d.name, d.dict_id, d.sha256, d.withdrawn) for d in dictionaries.BUILTIN]


@pytest.mark.parametrize("spec", dictionaries.BUILTIN, ids=lambda d: d.name)
def test_every_builtin_dictionary(cpp_bin: Path, tmp_path: Path, spec: dictionaries.DictionarySpec) -> None:
    got = harness.compare(cpp_bin, _file(spec.dict_id, tmp_path))
    assert got.code == (2 if spec.withdrawn else 0)


def _manifest_folder(tmp_path: Path, edit: dict[str, str]) -> Path:
    """A copy of the dictionaries' folder with a MANIFEST.tsv (spec §8.2), lines changed by ``edit``."""
    folder = tmp_path / "zstd"
    folder.mkdir()
    for path in FOLDER.glob("*.dict"):
        shutil.copy(path, folder / path.name)
    lines = [
        "# a test manifest",
        "id\tname\tfile\tsha256\tstatus",
        *[
            f"{d.dict_id}\t{d.name}\t{d.file}\t{d.sha256}\t{'withdrawn' if d.withdrawn else 'shipped'}"
            for d in dictionaries.BUILTIN
        ],
    ]
    text = "\n".join(lines) + "\n"
    for old, new in edit.items():
        text = text.replace(old, new)
    (folder / "MANIFEST.tsv").write_text(text, encoding="utf-8")
    return folder


def test_manifest(cpp_bin: Path, tmp_path: Path) -> None:
    path = _file(dictionaries.get().dict_id(), tmp_path)
    want = harness.reference(path)
    folder = _manifest_folder(tmp_path, {})
    done = subprocess.run([str(cpp_bin), "cat", "--dict-dir", str(folder), str(path)], capture_output=True, check=False)
    assert (done.returncode, done.stdout) == (0, want.stdout)
    # the environment variable names the folder too
    env = {"TRACEPACK_ZSTD_DICT_DIR": str(folder)}
    assert harness.run(cpp_bin, path, env=env).stdout == want.stdout


def _default_line() -> tuple[str, str, str]:
    """The default dictionary's id, file name and sha256, as the test manifest lists them."""
    d = next(d for d in dictionaries.BUILTIN if d.name == dictionaries.DEFAULT)
    return str(d.dict_id), d.file, d.sha256


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("sha256", "is damaged (checksum mismatch)"),
        ("file", "is missing from this install"),
        ("status", "was withdrawn before any release; no build ships it"),
        ("id", "which this install does not have"),
        ("columns", "line 2 is not the column names"),
        ("malformed", "is malformed"),
    ],
)
def test_manifest_refusals(cpp_bin: Path, tmp_path: Path, case: str, expected: str) -> None:
    """The default dictionary's line of the manifest changed: the C++ reader refuses as §8.2 says."""
    ident, file, sha = _default_line()
    edit = {
        "sha256": {f"{file}\t{sha}": f"{file}\t00000{sha[5:]}"},
        "file": {f"\t{file}\t": f"\t{file}.missing\t"},
        "status": {f"{file}\t{sha}\tshipped": f"{file}\t{sha}\twithdrawn"},
        "id": {f"{ident}\t": "1414548299\t"},
        "columns": {"id\tname": "identifier\tname"},
        "malformed": {f"{sha}\tshipped\n": f"{sha}\tmaybe\n"},
    }[case]
    path = _file(dictionaries.get().dict_id(), tmp_path)
    folder = _manifest_folder(tmp_path, edit)
    env = {"TRACEPACK_ZSTD_DICT_DIR": str(folder)}
    got = harness.run(cpp_bin, path, json_errors=True, env=env)
    assert got.code == 2
    assert got.error == "ContainerError"
    assert expected in got.line
