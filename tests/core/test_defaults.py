"""What users get without options: ``codecs.encode_best`` (codec, level, dictionary), as ``tracepack convert``,
``tracepack pack`` and ``tracepack.torch.save`` all write it.

The reference for the bytes is zstd itself (``zstandard`` with the shipped dictionary file at the chosen
level), and for the choice the documented rule applied to every candidate compressed at its own level
(no trial pass).
"""

from __future__ import annotations

import io
import json
import zipfile
from importlib import resources
from pathlib import Path

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

import tracepack
from tracepack import codecs, dictionaries
from tracepack.codecs import LEVELS, TORCH_CANDIDATES, choose, encode_best, level_for
from tracepack.container import HEADER_SIZE, read_header
from tracepack.torch.export.model_json import import_model_json
from tracepack.torch.pt2 import pack_program

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "torch" / "corpus"
SAMPLE = ROOT / "src" / "tracepack" / "data" / "sample" / "model.json"


def _model_json(path: Path) -> bytes:
    if path.suffix == ".json":
        return path.read_bytes()
    with zipfile.ZipFile(path) as archive:
        (member,) = [n for n in archive.namelist() if "/models/" in n and n.endswith(".json")]
        return archive.read(member)


PROGRAMS = [SAMPLE, *sorted(CORPUS.glob("*.pt2"))]


def _shipped(name: str) -> zstandard.ZstdCompressionDict:
    spec = next(d for d in dictionaries.BUILTIN if d.name == name)
    raw = resources.files("tracepack.data.zstd").joinpath(spec.file).read_bytes()
    return zstandard.ZstdCompressionDict(raw, dict_type=zstandard.DICT_TYPE_FULLDICT)


def test_the_level_table() -> None:
    assert level_for(0) == 19
    assert level_for(1 << 20) == 19
    assert level_for((1 << 20) + 1) == 9
    assert level_for(16 << 20) == 9
    assert level_for((16 << 20) + 1) == 3
    assert level_for(1 << 40) == 3
    limits = [limit for limit, _ in LEVELS]
    assert limits == sorted(limits)
    assert [lvl for _, lvl in LEVELS] == sorted((lvl for _, lvl in LEVELS), reverse=True)  # bigger: cheaper


@given(st.integers(0, 1 << 40), st.integers(0, 1 << 40))
def test_a_bigger_payload_never_gets_a_higher_level(a: int, b: int) -> None:
    small, big = sorted((a, b))
    assert level_for(big) <= level_for(small)


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_encode_best_is_the_rule_over_every_candidate_at_its_level(path: Path) -> None:
    doc = import_model_json(_model_json(path))
    got = encode_best(doc)
    zdict = _shipped(dictionaries.DEFAULT)
    # the reference: every candidate, uncompressed by tracepack, compressed by zstd at its documented level
    files = {}
    for codec in TORCH_CANDIDATES:
        plain = tracepack.dumps(doc, codec=codec, compression="none", block_checksums=False)
        level = level_for(len(plain) - HEADER_SIZE)
        files[codec] = (level, zstandard.ZstdCompressor(level=level, dict_data=zdict).compress(plain[HEADER_SIZE:]))
    expected = choose({c: len(z) + HEADER_SIZE for c, (_, z) in files.items()})
    assert got.codec == expected
    assert got.level == files[expected][0] == 19  # every corpus program is well under 1 MiB
    assert got.data[HEADER_SIZE:] == files[expected][1]
    header = read_header(got.data)
    assert (header.codec, header.compression, header.dict_id) == (got.codec, "zstd", dictionaries.TRAINING.dict_id)
    assert tracepack.loads(got.data) == doc


def test_the_trial_pass_only_drops_what_could_not_win(monkeypatch: pytest.MonkeyPatch) -> None:
    # with no trial margin every candidate is compressed at its level: the same choice and bytes
    for path in PROGRAMS:
        doc = import_model_json(_model_json(path))
        pruned = encode_best(doc)
        monkeypatch.setattr(codecs, "TRIAL_MARGIN", 1e9)
        full = encode_best(doc)
        monkeypatch.undo()
        assert pruned == full, path.name


@settings(max_examples=30, deadline=None)
@given(level=st.integers(1, 22), codec=st.sampled_from(["json", "msgpack", "columnar", "flatbuffers-rows"]))
def test_given_options_are_kept(level: int, codec: str) -> None:
    doc = tracepack.load(SAMPLE)
    got = encode_best(doc, codecs=[codec], level=level, zstd_dict=None)
    assert (got.codec, got.level, got.dict_id) == (codec, level, 0)
    plain = tracepack.dumps(doc, codec=codec, compression="none", block_checksums=False)[HEADER_SIZE:]
    assert got.data[HEADER_SIZE:] == zstandard.ZstdCompressor(level=level).compress(plain)


def test_uncompressed_and_older_versions() -> None:
    doc = tracepack.load(SAMPLE)
    got = encode_best(doc, compression="none")
    assert got.level == 0
    assert got.describe() == f"{got.codec}, none"
    assert got.data == tracepack.dumps(doc, codec=got.codec, compression="none")
    old = encode_best(doc, version=(1, 1))
    assert read_header(old.data).schema_version == (1, 1)
    assert tracepack.loads(old.data) == tracepack.loads(tracepack.dumps(doc, codec=old.codec, version=(1, 1)))
    with pytest.raises(tracepack.UsageError, match="needs compression='zstd'"):
        encode_best(doc, compression="none", zstd_dict=dictionaries.DEFAULT)
    with pytest.raises(tracepack.UsageError, match="no codec"):
        encode_best(doc, codecs=[])


def test_describe_says_what_was_chosen() -> None:
    doc = tracepack.load(SAMPLE)
    got = encode_best(doc)
    name = dictionaries.TRAINING.name
    assert got.describe() == f"{got.codec}, zstd -19, dictionary {dictionaries.TRAINING.dict_id} ({name})"
    assert encode_best(doc, zstd_dict=None, level=5).describe() == f"{got.codec}, zstd -5"


def test_convert_prints_and_reports_its_choice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tracepack.cli import main

    out = tmp_path / "m.tpk"
    assert main(["convert", str(SAMPLE), str(out)]) == 0
    expected = encode_best(import_model_json(SAMPLE.read_bytes()))
    assert out.read_bytes() == expected.data
    assert capsys.readouterr().out.strip() == f"wrote {out}: {len(expected.data)} bytes ({expected.describe()})"
    assert main(["convert", str(SAMPLE), str(out), "-f", "--json", "--level", "3"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["codec"], info["level"], info["zstd_dict_id"]) == (
        encode_best(tracepack.load(SAMPLE), level=3).codec,
        3,
        dictionaries.TRAINING.dict_id,
    )


def test_pack_and_save_write_their_member_as_convert_would() -> None:
    data = SAMPLE.read_bytes()
    _, member = pack_program(data, source="model.json")
    doc = tracepack.loads(member)
    assert member == encode_best(doc).data
    assert read_header(member).dict_id == dictionaries.TRAINING.dict_id


@pytest.mark.torch
def test_torch_save_member_is_encode_best(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    import tracepack.torch as tt
    from tracepack.torch import pt2

    # Exported here, by the installed torch: the committed corpus is 2.13's, which torch before 2.8 cannot load.
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()).eval()
    ep = torch.export.export(net, (torch.randn(1, 3, 8, 8),))
    buf = io.BytesIO()
    tt.save(ep, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as z:
        (name,) = [n for n in z.namelist() if pt2.MEMBER_DIR in n and n.endswith(".tpk")]
        member = z.read(name)
    assert member == encode_best(tracepack.loads(member)).data
