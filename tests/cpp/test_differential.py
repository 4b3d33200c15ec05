"""Every committed torch sample, converted with every codec the C++ reader decodes and every compression:
``tracepack-cpp cat`` prints what ``tracepack cat`` prints, byte for byte.

The samples are the repository's own exports (tests/data/torch/corpus, the bundled sample), TorchScript
files, and what each torch release from 2.1 to 2.15 wrote (tests/data/torch/releases): graphs from 8 to a
few hundred nodes, torch.export and TorchScript documents, every schema feature they use. The reference
is the Python reader on the same bytes.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

import tracepack
from tests.cpp import harness
from tracepack.document import Document
from tracepack.formats import sniff

DATA = harness.REPO / "tests" / "data" / "torch"
SAMPLE = harness.REPO / "src" / "tracepack" / "data" / "sample"
#: every codec.
CODECS = ("json", "msgpack", "flatbuffers-rows", "columnar", "flatbuffers-columns")
#: (compression, zstd dictionary): none, zstd alone, zstd with the built-in dictionary torch documents get.
COMPRESSIONS = (("none", None), ("zstd", None), ("zstd", "torch-export-7"))


def _samples() -> list[str]:
    found = []
    for path in [*DATA.rglob("*"), *SAMPLE.iterdir()]:
        torch_file = path.suffix in (".pt2", ".pt", ".ptl")
        if torch_file or (path.suffix == ".json" and sniff(path.read_bytes()[: 1 << 20]) == "model.json"):
            found.append(path)
    return sorted(p.relative_to(harness.REPO).as_posix() for p in found)


SAMPLES = _samples()


@cache
def _document(rel: str) -> Document:
    return tracepack.load(harness.REPO / rel)


def test_the_samples_are_there() -> None:
    assert len(SAMPLES) >= 100
    kinds = {Path(s).suffix for s in SAMPLES}
    assert kinds == {".pt2", ".pt", ".ptl", ".json"}


@pytest.mark.parametrize("rel", SAMPLES)
def test_sample_in_every_codec_and_compression(cpp_bin: Path, rel: str, tmp_path: Path) -> None:
    doc = _document(rel)
    for codec in CODECS:
        for compression, zdict in COMPRESSIONS:
            out = tmp_path / f"{codec}-{compression}-{zdict}.tpk"
            out.write_bytes(tracepack.dumps(doc, codec=codec, compression=compression, zstd_dict=zdict))
            assert harness.compare(cpp_bin, out).code == 0, out.name


@pytest.mark.parametrize("version", [(1, 0), (1, 1)])
@pytest.mark.parametrize("codec", CODECS)
def test_older_versions_are_migrated(cpp_bin: Path, tmp_path: Path, version: tuple[int, int], codec: str) -> None:
    """A document written as an older release reads as the current one, as tracepack.load migrates it."""
    written = 0
    for rel in SAMPLES[:: max(1, len(SAMPLES) // 12)]:
        try:
            data = tracepack.dumps(_document(rel), codec=codec, compression="zstd", version=version)
        except tracepack.errors.VersionError:
            continue  # the document holds what that version cannot (provenance, typed signature)
        out = tmp_path / f"{Path(rel).stem}.tpk"
        out.write_bytes(data)
        assert harness.compare(cpp_bin, out).code == 0, rel
        written += 1
    assert written >= 3
