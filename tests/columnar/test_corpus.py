"""The real corpus through the columnar codec: torch's model.json comes back byte for byte.

``tests/data/torch/corpus`` holds models exported with torch 2.13; importing them needs no torch.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

import tracepack
from tracepack.torch.archives import debug_pkl_bytes, import_archive
from tracepack.torch.export.model_json import export_model_json

CORPUS = Path(__file__).resolve().parents[1] / "data" / "torch" / "corpus"
PT2 = sorted(p.name for p in CORPUS.glob("*.pt2"))
TORCHSCRIPT = sorted(p.name for p in CORPUS.iterdir() if p.suffix in (".pt", ".ptl"))


def _model_json(path: Path) -> bytes:
    with zipfile.ZipFile(path) as archive:
        (member,) = [n for n in archive.namelist() if "/models/" in n and n.endswith(".json")]
        return archive.read(member)


def test_corpus_is_there() -> None:
    assert len(PT2) >= 5
    assert TORCHSCRIPT


@pytest.mark.parametrize("compression", ["none", "zstd"])
@pytest.mark.parametrize("name", PT2)
def test_model_json_byte_identical_after_columnar(name: str, compression: str) -> None:
    path = CORPUS / name
    original = _model_json(path)
    doc = import_archive(str(path), path.read_bytes())
    back = tracepack.loads(tracepack.dumps(doc, codec="columnar", compression=compression, level=19))
    assert back == doc
    assert export_model_json(back) == original


@pytest.mark.parametrize("name", TORCHSCRIPT)
def test_torchscript_debug_info_after_columnar(name: str) -> None:
    path = CORPUS / name
    doc = import_archive(str(path), path.read_bytes())
    back = tracepack.loads(tracepack.dumps(doc, codec="columnar"))
    assert back == doc
    assert back.raw.debug_files
    for before, after in zip(doc.raw.debug_files, back.raw.debug_files, strict=True):
        assert debug_pkl_bytes(back, after) == debug_pkl_bytes(doc, before)
