"""Built-in zstd dictionaries: shipped, found by the header's id, refused by name when missing."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
import zipfile
import zlib
from importlib import resources
from pathlib import Path

import pytest
import zstandard
from hypothesis import given

import tracepack
from tests.core.test_committed_data import MACHINE_PATH
from tests.strategies import documents
from tracepack import ContainerError, dictionaries
from tracepack.codecs import choose
from tracepack.container import HEADER_SIZE
from tracepack.torch.export.model_json import import_model_json

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "torch" / "corpus"


def _with_dict_id(data: bytes, dict_id: int) -> bytes:
    buf = bytearray(data)
    struct.pack_into("<I", buf, 20, dict_id)
    struct.pack_into("<I", buf, 44, zlib.crc32(bytes(buf[:44])))
    return bytes(buf)


def test_every_builtin_ships_with_its_checksum_and_id() -> None:
    assert len({d.name for d in dictionaries.BUILTIN}) == len(dictionaries.BUILTIN)
    for spec in dictionaries.SHIPPED:
        data = resources.files("tracepack.data.zstd").joinpath(spec.file).read_bytes()
        assert hashlib.sha256(data).hexdigest() == spec.sha256
        # A real zstd dictionary: zstd's own parser reads the id from its header.
        assert zstandard.ZstdCompressionDict(data, dict_type=zstandard.DICT_TYPE_FULLDICT).dict_id() == spec.dict_id
        assert 32768 <= spec.dict_id < 2**31  # zstd's range for unregistered dictionaries
    assert len({d.dict_id for d in dictionaries.BUILTIN}) == len(dictionaries.BUILTIN)


@given(documents())
def test_builtin_dictionary_round_trips_without_a_file(doc: tracepack.Document) -> None:
    data = tracepack.dumps(doc, codec="msgpack", compression="zstd", level=19, zstd_dict=dictionaries.DEFAULT)
    assert struct.unpack_from("<I", data, 20)[0] == dictionaries.TRAINING.dict_id
    assert tracepack.loads(data) == doc


@pytest.mark.parametrize("name", [d.name for d in dictionaries.SHIPPED])
def test_every_shipped_dictionary_still_reads(name: str) -> None:
    doc = import_model_json(_model_json(CORPUS / "dynamic.pt2"))
    data = tracepack.dumps(doc, codec="columnar", level=19, zstd_dict=name)
    assert struct.unpack_from("<I", data, 20)[0] == next(d.dict_id for d in dictionaries.BUILTIN if d.name == name)
    assert tracepack.loads(data) == doc


def test_payload_is_a_plain_zstd_frame_with_the_dictionary() -> None:
    """zstd itself (not tracepack) decodes the payload with the shipped dictionary file."""
    doc = import_model_json(_model_json(CORPUS / "cond.pt2"))
    data = tracepack.dumps(doc, codec="columnar", compression="zstd", level=19, zstd_dict=dictionaries.DEFAULT)
    payload = data[HEADER_SIZE:]
    assert zstandard.get_frame_parameters(payload).dict_id == dictionaries.TRAINING.dict_id
    raw = zstandard.ZstdCompressionDict(
        resources.files("tracepack.data.zstd").joinpath(dictionaries.TRAINING.file).read_bytes()
    )
    plain = zstandard.ZstdDecompressor(dict_data=raw).decompress(payload)
    assert plain == tracepack.dumps(doc, codec="columnar", compression="none")[HEADER_SIZE:]
    with pytest.raises(zstandard.ZstdError):
        zstandard.ZstdDecompressor().decompress(payload)  # without it, zstd refuses too


def test_missing_dictionary_is_one_line_naming_it() -> None:
    data = tracepack.dumps(tracepack.DocumentBuilder().build(), compression="zstd", zstd_dict=dictionaries.DEFAULT)
    bad = _with_dict_id(data, 0x54504BFF)
    with pytest.raises(ContainerError) as info:
        tracepack.loads(bad, source="m.tpk")
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith("m.tpk: header byte 20: compressed with zstd dictionary 1414548479, which this install")
    assert dictionaries.known() in text


WITHDRAWN = [d for d in dictionaries.BUILTIN if d.withdrawn]


def test_withdrawn_dictionaries_are_not_shipped_and_keep_their_ids() -> None:
    assert WITHDRAWN, "this build withdrew torch-export-4/-5 and executorch-edge-1"
    shipped = {d.dict_id for d in dictionaries.SHIPPED}
    files = {p.name for p in resources.files("tracepack.data.zstd").iterdir()}
    for spec in WITHDRAWN:
        assert spec.dict_id not in shipped
        assert spec.file not in files  # not in the package
        assert spec.name not in dictionaries.known()
    assert dictionaries.TRAINING not in WITHDRAWN
    assert dictionaries.EXECUTORCH_TRAINING not in WITHDRAWN


@pytest.mark.parametrize("spec", WITHDRAWN, ids=lambda d: d.name)
def test_file_naming_a_withdrawn_dictionary_is_refused_in_one_line(spec: dictionaries.DictionarySpec) -> None:
    data = tracepack.dumps(tracepack.DocumentBuilder().build(), compression="zstd", zstd_dict=dictionaries.DEFAULT)
    with pytest.raises(ContainerError) as info:
        tracepack.loads(_with_dict_id(data, spec.dict_id), source="m.tpk")
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(f"m.tpk: header byte 20: zstd dictionary {spec.name} (id {spec.dict_id}) was withdrawn")
    with pytest.raises(tracepack.UsageError, match=f"no built-in zstd dictionary '{spec.name}'"):
        tracepack.dumps(tracepack.DocumentBuilder().build(), zstd_dict=spec.name)


def test_cli_missing_dictionary_exits_2_with_one_line(tmp_path: Path) -> None:
    data = tracepack.dumps(tracepack.DocumentBuilder().build(), compression="zstd", zstd_dict=dictionaries.DEFAULT)
    path = tmp_path / "m.tpk"
    path.write_bytes(_with_dict_id(data, 0x54504BFF))
    cmd = [sys.executable, "-m", "tracepack", "inspect", str(path)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "zstd dictionary 1414548479" in done.stderr


def test_unknown_builtin_name_is_a_usage_error() -> None:
    with pytest.raises(tracepack.UsageError, match="no built-in zstd dictionary 'nope'"):
        tracepack.dumps(tracepack.DocumentBuilder().build(), zstd_dict="nope")


def _model_json(path: Path) -> bytes:
    with zipfile.ZipFile(path) as archive:
        (member,) = [n for n in archive.namelist() if "/models/" in n and n.endswith(".json")]
        return archive.read(member)


def test_training_set_holds_no_benchmark_model_source() -> None:
    """The dictionary is trained on other models (scripts/torch/dictionary_models.py) than the
    benchmark's (export_corpus.py): no source line of the benchmark models' own code is in it."""
    data = resources.files("tracepack.data.zstd").joinpath(dictionaries.TRAINING.file).read_bytes()
    checked = 0
    for path in sorted(CORPUS.glob("*.pt2")):
        doc = import_model_json(_model_json(path))
        r = doc.raw
        for row in range(1, len(r.lines.file)):
            if r.strings[r.files.name[r.lines.file[row]]].endswith("export_corpus.py"):
                text = r.strings[r.lines.text[row]]
                if len(text) >= 12:
                    checked += 1
                    assert text.encode() not in data, text
    assert checked > 20
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    assert manifest  # the corpus the benchmark reads


@pytest.mark.parametrize("name", ["cond.pt2", "transformer.pt2"])
def test_convert_torch_default_is_the_smallest_with_the_builtin_dictionary(name: str, tmp_path: Path) -> None:
    from tracepack.cli import main
    from tracepack.container import read_header

    src = tmp_path / "model.json"
    src.write_bytes(_model_json(CORPUS / name))
    out, plain, back = tmp_path / "m.tpk", tmp_path / "plain.tpk", tmp_path / "back.json"
    assert main(["convert", str(src), str(out), "--level", "19"]) == 0
    header = read_header(out.read_bytes())
    assert header.dict_id == dictionaries.TRAINING.dict_id
    doc = import_model_json(src.read_bytes())
    sizes = {
        codec: len(tracepack.dumps(doc, codec=codec, level=19, zstd_dict=dictionaries.DEFAULT))
        for codec in ("columnar", "msgpack", "flatbuffers-columns")
    }
    # the smallest, or a faster codec's file within 5% of it (codecs.choose)
    assert header.codec == choose(sizes)
    assert out.stat().st_size == sizes[header.codec] <= min(sizes.values()) * 1.05
    # Smaller than the same codec without the dictionary, and zstd -19 of model.json is the yardstick.
    assert main(["convert", str(src), str(plain), "--level", "19", "--zstd-dict", "none"]) == 0
    assert read_header(plain.read_bytes()).dict_id == 0
    assert out.stat().st_size < plain.stat().st_size
    assert main(["expand", str(out), str(back)]) == 0
    assert back.read_bytes() == src.read_bytes()
    # A .tpk input keeps MessagePack and no dictionary unless asked.
    again = tmp_path / "again.tpk"
    assert main(["convert", str(out), str(again)]) == 0
    assert read_header(again.read_bytes()).codec == "msgpack"
    assert read_header(again.read_bytes()).dict_id == 0


@pytest.mark.parametrize("level", [1, 3, 9, 15, 19])
@pytest.mark.parametrize("name", ["helpers.pt2", "transformer_strict.pt2", "cnn.pt2"])
def test_prepared_builtin_writes_the_same_bytes_as_zstd(level: int, name: str) -> None:
    """The prepared copies of a built-in dictionary change speed, not bytes: every codec's payload is
    compressed as zstd compresses it with the dictionary file (a copy prepared for the level alone, as builds
    before issue 26 used, wrote other and often larger frames)."""
    doc = import_model_json(_model_json(CORPUS / name))
    raw = resources.files("tracepack.data.zstd").joinpath(dictionaries.TRAINING.file).read_bytes()
    fresh = zstandard.ZstdCompressionDict(raw, dict_type=zstandard.DICT_TYPE_FULLDICT)
    for codec in ("msgpack", "columnar", "flatbuffers-columns", "json"):
        data = tracepack.dumps(doc, codec=codec, level=level, zstd_dict=dictionaries.DEFAULT)
        plain = tracepack.dumps(doc, codec=codec, compression="none", block_checksums=False)[HEADER_SIZE:]
        assert data[HEADER_SIZE:] == zstandard.ZstdCompressor(level=level, dict_data=fresh).compress(plain), codec
    other = dictionaries.compressor(fresh, level, 100)  # not a built-in object: used as given
    assert other.compress(b"x" * 100) == zstandard.ZstdCompressor(level=level, dict_data=fresh).compress(b"x" * 100)


@pytest.mark.parametrize("spec", [d for d in dictionaries.SHIPPED if d.inputs], ids=str)
def test_recorded_training_inputs_hash_as_the_spec_says(spec: dictionaries.DictionarySpec) -> None:
    """What CI checks without torch besides `make dictionary-check`: each recorded dictionary's inputs (the
    default's among them), read with the standard library's tar and zstd (not tracepack), hash as recorded,
    and the record as pinned; a dictionary with third-party programs starts with its base's programs."""
    import io
    import tarfile

    assert dictionaries.TRAINING.inputs, "the default dictionary records its training inputs"
    record = ROOT / spec.inputs
    assert hashlib.sha256(record.read_bytes()).hexdigest() == spec.inputs_sha256
    corpus = record.with_name(f"{spec.name}.tar.zst")
    raw = zstandard.ZstdDecompressor().decompress(corpus.read_bytes(), max_output_size=1 << 28)
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        files = [(m.name, tar.extractfile(m).read()) for m in tar.getmembers()]  # type: ignore[union-attr]
    lines = record.read_text(encoding="utf-8").splitlines()
    assert [f"{hashlib.sha256(data).hexdigest()}  {name}" for name, data in files] == lines
    for name, data in files:
        assert json.loads(data)["graph_module"]["graph"]["nodes"], name  # torch.export programs
        assert not MACHINE_PATH.search(data), name  # machine paths neutralised (the exporters' one rule)
    # the training models' names are dictionary_models.MODELS, in order
    models = (ROOT / "scripts" / "torch" / "dictionary_models.py").read_text(encoding="utf-8")
    order = [
        line.split('"')[1] for line in models.split("MODELS: tuple")[1].splitlines() if line.strip().startswith('("')
    ]
    names = [name.removesuffix(".json") for name, _ in files]
    if not spec.third_party:
        assert names == order
        return
    base = next(d for d in dictionaries.BUILTIN if d.name == spec.base)
    base_lines = (ROOT / base.inputs).read_text(encoding="utf-8").splitlines()
    assert lines[: len(base_lines)] == base_lines, f"{spec.name} starts with {spec.base}'s programs, unchanged"
    assert names[: len(order)] == order
    extra = names[len(order) :]
    assert extra, "third-party programs come after the project's own"
    assert not set(extra) & set(order)


def test_only_the_recorded_dictionaries_claim_reproducibility() -> None:
    recorded = [d.name for d in dictionaries.BUILTIN if d.inputs]
    assert dictionaries.DEFAULT in recorded
    for spec in dictionaries.BUILTIN:
        assert bool(spec.inputs) == bool(spec.inputs_sha256), spec.name
