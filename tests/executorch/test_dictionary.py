"""The built-in ExecuTorch zstd dictionary: shipped and pinned, picked for ETRecords, trained on other models."""

from __future__ import annotations

import itertools
import json
import struct
import zipfile
from importlib import resources
from pathlib import Path

import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

import tracepack
from tests.executorch.helpers import DATA, ETRECORD
from tracepack import dictionaries
from tracepack.cli import main
from tracepack.container import HEADER_SIZE, read_header
from tracepack.torch.executorch.etrecord import EDGE_PREFIX, import_etrecord

SPEC = next(d for d in dictionaries.BUILTIN if d.name == dictionaries.EXECUTORCH)
RECORDS = [ETRECORD, DATA / "delegate.etrecord"]


def _dictionary() -> bytes:
    return resources.files("tracepack.data.zstd").joinpath(SPEC.file).read_bytes()


def test_executorch_dictionary_is_builtin_and_separate_from_the_torch_one() -> None:
    assert dictionaries.EXECUTORCH_TRAINING is SPEC
    assert dictionaries.TRAINING.name.startswith("torch-export-")  # the torch trainer still writes its own
    assert SPEC.dict_id not in {d.dict_id for d in dictionaries.BUILTIN if d is not SPEC}
    assert zstandard.ZstdCompressionDict(_dictionary()).dict_id() == SPEC.dict_id
    assert dictionaries.by_id(SPEC.dict_id) is dictionaries.get(SPEC.name)


def _source_lines() -> set[str]:
    """The samples' own source lines (frames outside site-packages) in their edge programs' stack traces."""
    out: set[str] = set()
    for path in RECORDS:
        with zipfile.ZipFile(path) as z:
            for name in z.namelist():
                if not name.startswith(EDGE_PREFIX) or name.endswith(("_state_dict", "_constants", "_example_inputs")):
                    continue
                for node in json.loads(z.read(name))["graph_module"]["graph"]["nodes"]:
                    trace = node["metadata"].get("stack_trace", "")
                    lines = trace.splitlines()
                    for where, text in itertools.pairwise(lines):
                        if where.lstrip().startswith("File ") and "site-packages" not in where:
                            out.add(text.strip())
    return out


def test_no_source_line_of_the_samples_is_in_the_dictionary() -> None:
    """The dictionary is trained on other models than the samples and the benchmark (which scales the
    sample): none of their own code may be in it, or the size figures would measure memorisation."""
    lines = _source_lines()
    assert len(lines) >= 6  # the sample model's forward lines are found at all
    data = _dictionary()
    assert [line for line in sorted(lines) if line.encode() in data] == []
    # while what every edge program shares is there: ExecuTorch's edge op namespace, torch's frames
    assert b"executorch.exir.dialects.edge.ops.aten." in data
    assert b"torch/nn/modules/linear.py" in data


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.name)
def test_an_etrecord_is_written_with_it_and_reads_back(path: Path, tmp_path: Path) -> None:
    src, out = path, tmp_path / "m.tpk"
    assert main(["convert", str(src), str(out), "--level", "19"]) == 0
    data = out.read_bytes()
    assert struct.unpack_from("<I", data, 20)[0] == SPEC.dict_id
    doc = import_etrecord(src.read_bytes())["forward"]
    assert dictionaries.default_for(doc) == SPEC.name
    assert tracepack.loads(data) == doc
    # The payload is a standard zstd frame naming the dictionary: zstd itself decodes it with the file.
    payload = zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(_dictionary())).decompress(
        data[HEADER_SIZE:]
    )
    plain = tracepack.dumps(doc, codec=read_header(data).codec, compression="none", block_checksums=False)
    assert payload == plain[HEADER_SIZE:]
    # Smaller than with the torch.export dictionary, and than zstd -19 of the program JSON itself.
    torch_dict = min(
        len(tracepack.dumps(doc, codec=c, level=19, zstd_dict=dictionaries.DEFAULT)) for c in ("msgpack", "columnar")
    )
    with zipfile.ZipFile(src) as z:
        program = z.read(EDGE_PREFIX + "forward")
    assert len(data) < 0.9 * torch_dict
    assert len(data) < 0.6 * len(zstandard.ZstdCompressor(level=19).compress(program))


def test_torch_documents_keep_the_torch_dictionary() -> None:
    doc = tracepack.DocumentBuilder().build()
    assert dictionaries.default_for(doc) == dictionaries.DEFAULT
    assert dictionaries.default_for(object()) == dictionaries.DEFAULT


@given(st.binary(max_size=64))
def test_any_payload_round_trips_through_the_dictionary(blob: bytes) -> None:
    zdict = dictionaries.get(dictionaries.EXECUTORCH)
    frame = zstandard.ZstdCompressor(level=19, dict_data=zdict).compress(blob)
    assert zstandard.ZstdDecompressor(dict_data=zdict).decompress(frame) == blob
    assert zstandard.get_frame_parameters(frame).dict_id == SPEC.dict_id
