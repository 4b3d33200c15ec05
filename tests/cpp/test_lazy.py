"""The C++ lazy reader: ``tracepack-cpp trace FILE NODE...`` prints what ``tracepack trace`` prints.

(Files of other codecs and compressions are read whole, as the Python CLI reads them; a sample of them
is compared the same way.)

Every committed torch sample and every valid conformance vector, converted to both FlatBuffers layouts
uncompressed (with block checksums, as convert writes them, and without), and the conformance suite's
own uncompressed FlatBuffers vectors as committed (schema 1.0, 1.1 and 1.2 files): every node, by
index and by name, in the text and the ``--json`` forms, byte for byte. The reference is the Python
command line (``tracepack.cli.main``, run in this process on the same file). Damaged, hostile and
mutated files: the C++ reader refuses what the Python lazy reader refuses, with the same exit code and
error class, and never crashes (spec §9.5 lets a lazy reader name another place for a defect).
"""

from __future__ import annotations

import io
import json
import random
import subprocess
from contextlib import redirect_stderr, redirect_stdout
from functools import cache
from pathlib import Path

import pytest

import tracepack
from tests.cpp import harness
from tests.cpp.test_differential import SAMPLES
from tracepack import container
from tracepack.cli import main as tracepack_main
from tracepack.document import Document

VECTORS = harness.REPO / "conformance" / "vectors"
LAYOUTS = ("flatbuffers-rows", "flatbuffers-columns")


def _valid_sources() -> list[str]:
    """One readable file per valid conformance vector folder (uncompressed, or zstd without a user dict)."""
    found = []
    for folder in sorted((VECTORS / "valid").iterdir()):
        for name in ("json-none.tpk", "msgpack-none.tpk", "fbrows-none.tpk", "fbcols-none.tpk", "columnar-none.tpk"):
            if (folder / name).is_file():
                found.append((folder / name).relative_to(harness.REPO).as_posix())
                break
    return found


VALID = _valid_sources()


def _lazy_vectors(kind: str) -> list[str]:
    out = []
    for path in sorted((VECTORS / kind).rglob("*.tpk")):
        head = path.read_bytes()[: container.HEADER_SIZE]
        try:
            h = container.read_header(head)
        except tracepack.errors.TracepackError:
            if kind == "invalid":
                out.append(path.relative_to(harness.REPO).as_posix())
            continue
        if h.codec in LAYOUTS and h.compression == "none":
            out.append(path.relative_to(harness.REPO).as_posix())
    return out


@cache
def _document(rel: str) -> Document:
    return tracepack.load(harness.REPO / rel)


def _python(args: list[str]) -> tuple[int, bytes, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = tracepack_main(args)
    return code, out.getvalue().encode(), err.getvalue()


def _cpp(binary: Path, args: list[str]) -> tuple[int, bytes, str]:
    done = subprocess.run([str(binary), *args], capture_output=True, check=False, timeout=300)
    return done.returncode, done.stdout, done.stderr.decode("utf-8", "replace")


def _error_class(binary: Path, args: list[str]) -> str:
    code, _, err = _cpp(binary, ["trace", "--error-format", "json", *args])
    assert code == 2, err
    return str(json.loads(err)["error"])


def _python_class(args: list[str]) -> str:
    code, _, err = _python(["trace", "--error-format", "json", *args])
    assert code == 2, err
    return str(json.loads(err.splitlines()[-1])["error"])


def _same(
    binary: Path, path: Path, keys: list[str], *, message: bool = False, damaged: bool = False
) -> tuple[int, bytes]:
    """C++ and Python agree on ``trace PATH KEYS`` in both forms; returns Python's exit code and text.

    ``damaged``: a file known to be damaged, which the C++ reader may refuse where the Python lazy reader
    still answers (spec §7.4 asks a reader to check the blob and text vectors whole when it first needs a
    value of them; §9.5 lets a lazy reader answer about what it did not read): then a DecodeError or
    IntegrityError is required (also where Python names another class: its name lookup reads fewer
    columns than the C++ reader's scan does)."""
    result = (0, b"")
    for form in ([], ["--json"]):
        args = [*form, str(path), *keys]
        want = _python(["trace", *args])
        got = _cpp(binary, ["trace", *args])
        assert got[0] in (0, 2), f"{path} {keys[:3]}: C++ exit {got[0]}: {got[2]}"
        if damaged and got[0] == 2 and (want[0] == 0 or _error_class(binary, args) != _python_class(args)):
            assert _error_class(binary, args) in ("DecodeError", "IntegrityError", "ContainerError"), got[2]
            continue
        assert got[0] == want[0], f"{path} {keys[:3]}: C++ exit {got[0]}, Python {want[0]}\n{got[2]}\n{want[2]}"
        if want[0] == 0:
            assert got[1] == want[1], f"{path} {keys[:3]} {form}: output differs from tracepack trace"
            assert got[2] == ""
        else:
            assert got[1] == b"", "output on failure"
            assert len(got[2].splitlines()) == 1, got[2]
            assert got[2].startswith("tracepack: "), got[2]
            assert _error_class(binary, args) == _python_class(args), f"{path}: {got[2]} / {want[2]}"
            if message:
                assert got[2] == want[2]
        result = (want[0], want[1])
    return result


def _every_node(binary: Path, path: Path) -> int:
    """Every node by index (one command) and by name (one command): the same bytes. Returns the count."""
    whole = tracepack.load(path)
    n = len(whole)
    names = [whole.node(i).name for i in range(n)]
    if n == 0:
        _same(binary, path, ["#0"])
        return 0
    code, _ = _same(binary, path, [f"#{i}" for i in range(n)])
    assert code == 0
    # By name: every distinct name once (a name finds the last node of that name); names that look
    # like options or indices are left to the index pass.
    usable = sorted({name for name in names if not name.startswith("-") and not name.startswith("#")})
    for start in range(0, len(usable), 400):
        code, _ = _same(binary, path, usable[start : start + 400])
        assert code == 0
    return n


@pytest.mark.parametrize("rel", SAMPLES + VALID)
def test_every_node_of_every_sample_in_both_layouts(cpp_bin: Path, rel: str, tmp_path: Path) -> None:
    doc = _document(rel)
    for layout in LAYOUTS:
        for blocks in (True, False):
            out = tmp_path / f"{layout}-{blocks}.tpk"
            out.write_bytes(tracepack.dumps(doc, codec=layout, compression="none", block_checksums=blocks))
            _every_node(cpp_bin, out)


@pytest.mark.parametrize("rel", SAMPLES[::4])
def test_every_node_of_files_read_whole(cpp_bin: Path, rel: str, tmp_path: Path) -> None:
    """Files ``trace`` does not read lazily (other codecs, zstd with the built-in dictionary, compressed
    FlatBuffers) are read whole, as the Python CLI reads them: the same bytes for every node."""
    doc = _document(rel)
    for codec, compression, zdict in (
        ("json", "none", None),
        ("msgpack", "zstd", "torch-export-7"),
        ("columnar", "zstd", "torch-export-7"),
        ("flatbuffers-rows", "zstd", None),
    ):
        out = tmp_path / f"{codec}-{compression}.tpk"
        out.write_bytes(tracepack.dumps(doc, codec=codec, compression=compression, zstd_dict=zdict))
        _every_node(cpp_bin, out)


@pytest.mark.parametrize("rel", _lazy_vectors("valid"))
def test_committed_flatbuffers_vectors(cpp_bin: Path, rel: str) -> None:
    """The conformance suite's uncompressed FlatBuffers files as committed (older schema versions too)."""
    _every_node(cpp_bin, harness.REPO / rel)


@pytest.mark.parametrize("version", [(1, 0), (1, 1)])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_older_versions(cpp_bin: Path, tmp_path: Path, version: tuple[int, int], layout: str) -> None:
    written = 0
    for rel in SAMPLES[:: max(1, len(SAMPLES) // 12)]:
        try:
            data = tracepack.dumps(_document(rel), codec=layout, compression="none", version=version)
        except tracepack.errors.VersionError:
            continue
        out = tmp_path / f"{Path(rel).stem}.tpk"
        out.write_bytes(data)
        assert _every_node(cpp_bin, out) >= 0
        written += 1
    assert written >= 3


@pytest.mark.parametrize("rel", _lazy_vectors("invalid"))
def test_damaged_vectors(cpp_bin: Path, rel: str) -> None:
    """Every damaged or hostile vector a lazy reader opens: the C++ reader does what the Python one does
    (first node, a name, the last node), same exit code and class, never a crash."""
    path = harness.REPO / rel
    for keys in (["#0"], ["x"], ["#99999"]):
        _same(cpp_bin, path, keys, damaged=True)


def test_not_found_and_usage(cpp_bin: Path, tmp_path: Path) -> None:
    doc = _document(SAMPLES[0])
    out = tmp_path / "s.tpk"
    out.write_bytes(tracepack.dumps(doc, codec="flatbuffers-columns", compression="none"))
    n = len(doc)
    for keys in ([f"#{n}"], ["#-1"], ["#000"], [f"#{'9' * 30}"], ["#0", f"#{n}"]):
        _same(cpp_bin, out, keys)


def _mutants(data: bytes, seed: str, count: int) -> list[bytes]:
    """The payload changed (bytes set, flipped, runs zeroed), repacked with a correct CRC-32 and no block
    table, so that the decoding checks, not the checksum, meet each defect."""
    h = container.read_header(data[: container.HEADER_SIZE])
    payload = data[h.header_size : h.header_size + h.payload_length]
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        p = bytearray(payload)
        for _ in range(rng.choice((1, 1, 2, 4))):
            at = rng.randrange(len(p))
            how = rng.random()
            if how < 0.4:
                p[at] = rng.randrange(256)
            elif how < 0.7:
                p[at] ^= 1 << rng.randrange(8)
            else:
                p[at : at + 4] = bytes(min(4, len(p) - at))
        out.append(container.pack(bytes(p), schema_version=h.schema_version, codec=h.codec, block_checksums=False))
    return out


def test_damaged_vectors_under_sanitizers(asan_bin: Path) -> None:
    """ASan and UBSan (make cpp-asan): every damaged vector a lazy reader opens, three lookups, no report."""
    for rel in _lazy_vectors("invalid"):
        for form in ([], ["--json"]):
            code, _, err = _cpp_env(asan_bin, ["trace", *form, str(harness.REPO / rel), "#0", "x", "#99999"])
            assert code in (0, 2), f"{rel}: exit {code}: {err[-2000:]}"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_mutants_under_sanitizers(asan_bin: Path, tmp_path: Path, layout: str) -> None:
    doc = _document(SAMPLES[0])
    data = tracepack.dumps(doc, codec=layout, compression="none", block_checksums=False)
    for k, mutant in enumerate(_mutants(data, "asan-" + layout, 60)):
        path = tmp_path / f"m{k}.tpk"
        path.write_bytes(mutant)
        code, _, err = _cpp_env(asan_bin, ["trace", str(path), "#0", f"#{len(doc) - 1}", doc.node(0).name])
        assert code in (0, 2), f"mutant {k}: exit {code}: {err[-2000:]}"


def _cpp_env(binary: Path, args: list[str]) -> tuple[int, bytes, str]:
    import os

    done = subprocess.run(
        [str(binary), *args], capture_output=True, check=False, timeout=300, env={**os.environ, **harness.SANITIZER_ENV}
    )
    return done.returncode, done.stdout, done.stderr.decode("utf-8", "replace")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_payload_mutants(cpp_bin: Path, tmp_path: Path, layout: str) -> None:
    """300 mutants of a sample per layout, three lookups each: the same exit code and class as the
    Python lazy reader, the same bytes when both answer, never a crash."""
    doc = _document(SAMPLES[0])
    data = tracepack.dumps(doc, codec=layout, compression="none", block_checksums=False)
    last = f"#{len(doc) - 1}"
    name = doc.node(len(doc) - 1).name
    for k, mutant in enumerate(_mutants(data, layout, 300)):
        path = tmp_path / f"m{k}.tpk"
        path.write_bytes(mutant)
        _same(cpp_bin, path, ["#0", last, name], damaged=True)


def test_block_checksums_are_checked_lazily(cpp_bin: Path, tmp_path: Path) -> None:
    """A block changed after writing: a lookup that reads it is refused as the Python reader refuses it
    (ContainerError at the block's bytes, same message); one that does not read it still answers."""
    doc = _document(SAMPLES[0])
    data = bytearray(tracepack.dumps(doc, codec="flatbuffers-rows", compression="none", block_checksums=True))
    h = container.read_header(bytes(data[: container.HEADER_SIZE]))
    assert h.block_checksums
    for at in range(h.header_size, h.header_size + h.payload_length, 4099):
        bad = bytearray(data)
        bad[at] ^= 0x40
        path = tmp_path / f"b{at}.tpk"
        path.write_bytes(bad)
        _same(cpp_bin, path, ["#0"], message=True)
