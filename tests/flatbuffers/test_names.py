"""What the FlatBuffers codec names mean (issue 10): ``flatbuffers`` writes the column layout (id 4),
``flatbuffers-rows`` the row layout (id 2), ``flatbuffers-columns`` is the column layout's own name;
readers go by the header's id, and print each id by one name.

The references are a .pt2 a torch release wrote (its model.json, byte for byte) and the golden files
builds before the rename wrote (id 2 under ``flatbuffers``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracepack
from tests.releases.samples import files, path
from tracepack import container
from tracepack.cli import main
from tracepack.codecs import ALIASES, CODEC_IDS, CODECS, WRITE_NAMES, codec_by_id, codec_by_name, resolve
from tracepack.errors import UsageError
from tracepack.torch.archives import import_archive
from tracepack.torch.export.model_json import export_model_json

GOLDEN = Path(__file__).parent.parent / "golden"
#: One archive a torch release wrote, and its model.json as torch wrote it.
VERSION, NAME = files("export")[0]
#: What each name writes: (header id, the name the id prints as).
WRITES = {
    "flatbuffers": (4, "flatbuffers-columns"),
    "flatbuffers-columns": (4, "flatbuffers-columns"),
    "flatbuffers-rows": (2, "flatbuffers-rows"),
}


def _torch_model_json() -> bytes:
    from tracepack.io.zip import open_archive
    from tracepack.torch import pt2

    with open_archive(path(VERSION, NAME).read_bytes(), source=NAME) as archive:
        _, raw = pt2.read_program(archive)
    return raw


def test_every_id_has_one_name_and_aliases_name_a_codec() -> None:
    assert CODEC_IDS == {0: "json", 1: "msgpack", 2: "flatbuffers-rows", 3: "columnar", 4: "flatbuffers-columns"}
    assert ALIASES == {"flatbuffers": "flatbuffers-columns"}
    assert set(WRITE_NAMES) == set(CODECS) | set(ALIASES)
    assert not set(ALIASES) & set(CODECS)  # a printed name never means two layouts


@pytest.mark.parametrize(("name", "written"), WRITES.items())
def test_name_resolution(name: str, written: tuple[int, str]) -> None:
    cid, module = codec_by_name(name)
    assert (cid, resolve(name)) == written
    assert codec_by_id(cid) == (written[1], module)
    assert module.__name__ == ("tracepack.codecs.fbcolumns" if cid == 4 else "tracepack.codecs.flatbuffers")


def test_unknown_names_are_refused_listing_every_name() -> None:
    with pytest.raises(UsageError, match="unknown codec 'flatbuffer'") as err:
        resolve("flatbuffer")
    assert "flatbuffers (= flatbuffers-columns)" in str(err.value)
    assert "flatbuffers-rows" in str(err.value)


def test_pack_takes_the_payloads_own_codec_not_the_alias() -> None:
    # "flatbuffers" once named the row layout: an encoded payload under it is refused, never relabelled.
    with pytest.raises(UsageError, match="pack takes the payload's own codec"):
        container.pack(b"", schema_version=(1, 0), codec="flatbuffers")


@pytest.fixture(scope="module")
def doc() -> tracepack.Document:
    return import_archive(NAME, path(VERSION, NAME).read_bytes())


@pytest.mark.parametrize(("name", "written"), WRITES.items())
def test_dumps_writes_the_named_layout(doc: tracepack.Document, name: str, written: tuple[int, str]) -> None:
    data = tracepack.dumps(doc, codec=name, compression="none")
    assert data[16] == written[0]
    assert container.read_header(data).codec == written[1]
    assert data == tracepack.dumps(doc, codec=written[1], compression="none")  # the alias: the same bytes
    back = tracepack.loads(data)
    assert back == doc
    assert export_model_json(back) == _torch_model_json()


@pytest.mark.parametrize(("name", "written"), WRITES.items())
@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_cli_convert_writes_the_named_layout(  # noqa: PLR0917 (fixtures and parameters)
    doc: tracepack.Document,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    written: tuple[int, str],
    compression: str,
) -> None:
    src, out = path(VERSION, NAME), tmp_path / "m.tpk"
    assert main(["convert", str(src), str(out), "--codec", name, "--compression", compression, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["codec"] == written[1]
    data = out.read_bytes()
    assert data[16] == written[0]
    back = tracepack.load(out)
    assert back == doc
    assert export_model_json(back) == _torch_model_json()
    assert main(["inspect", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith(f"  codec {written[1]}, compression {compression}")
    out_json = tmp_path / "model.json"
    assert main(["expand", str(out), str(out_json)]) == 0
    assert out_json.read_bytes() == _torch_model_json()
    if compression == "none":  # both layouts read lazily, with the same answers
        with tracepack.open(out) as lz:
            assert [n.stack_trace for n in lz.nodes()] == [n.stack_trace for n in doc.nodes()]


def test_cli_refuses_an_unknown_codec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = path(VERSION, NAME)
    assert main(["convert", str(src), str(tmp_path / "m.tpk"), "--codec", "flatbuffer"]) == 2
    err = capsys.readouterr().err
    assert "flatbuffers-rows" in err
    assert "Traceback" not in err
    assert not (tmp_path / "m.tpk").exists()


@pytest.mark.parametrize(("file", "cid", "name"), [("flatbuffers", 2, "flatbuffers-rows"),
                                                   ("flatbuffers-columns", 4, "flatbuffers-columns")])  # fmt: skip
def test_files_written_before_the_rename_read_by_their_id(
    capsys: pytest.CaptureFixture[str], file: str, cid: int, name: str
) -> None:
    # Golden files of every release: flatbuffers.tpk was written by `--codec flatbuffers` when it meant rows.
    for folder in sorted(p for p in GOLDEN.iterdir() if p.is_dir()):
        tpk = folder / f"{file}.tpk"
        data = tpk.read_bytes()
        assert data[16] == cid
        assert container.read_header(data).codec == name
        assert main(["inspect", str(tpk)]) == 0
        assert f"  codec {name}, compression none" in capsys.readouterr().out.splitlines()
        assert tracepack.load(tpk) == tracepack.load(folder / "json.tpk")
