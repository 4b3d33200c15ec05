"""torch's own lite-interpreter text for a debug handle, from a ``.tpk`` alone (no ``.ptl``).

The reference is what torch printed: every release in ``tests/data/torch/releases/`` ran its lite
interpreter on bad inputs with the debug maps in the file (``with_debug_maps``: ``Module hierarchy:...``
and the TorchScript traceback) and with them stripped (``maps_stripped``: ``debug_handles:{N}, was not
found.``); the ExecuTorch samples hold the same pair for ``mobile.ptl``. Only the ``.tpk`` converted from
the full file is given to tracepack, in a directory of its own.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import msgspec
import pytest
from hypothesis import given

import tracepack
from tests.executorch.helpers import DATA as EXECUTORCH_DATA
from tests.executorch.helpers import MOBILE, manifest
from tests.releases.samples import NOT_FOUND, lite_errors, path, readback
from tests.torchscript.strategies import lite_tables
from tracepack import Document, DocumentBuilder
from tracepack.cli import main
from tracepack.errors import DecodeError
from tracepack.runtime.artifacts import open_artifact
from tracepack.runtime.logs import symbolicate_lines
from tracepack.torch.archives import import_archive
from tracepack.torch.torchscript.mobile_render import (
    RENDER_EXTENSION,
    decode_table,
    encode_table,
    lite_table_from_document,
)
from tracepack.torch.torchscript.render import LiteDebugTable, SourceRange

CASES = lite_errors()
TORCH_DATA = Path(__file__).resolve().parent.parent / "data" / "torch"
#: Every mobile sample in the repository: each release's lite.ptl, ExecuTorch's, the TorchScript one.
SAMPLES = [path(v, "lite.ptl") for v in sorted({v for v, _ in CASES})] + [MOBILE, TORCH_DATA / "lite_debug.ptl"]
FORMS = [("flatbuffers", "none"), ("msgpack", "zstd"), ("json", "none")]


@cache
def document(ptl: Path) -> Document:
    return import_archive(str(ptl), ptl.read_bytes())


def tpk(tmp_path: Path, ptl: Path, codec: str = "flatbuffers", compression: str = "none") -> Path:
    """The .tpk of ``ptl``, alone in a directory of its own."""
    out = tmp_path / codec / "model.tpk"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(tracepack.dumps(document(ptl), codec=codec, compression=compression))
    assert sorted(p.name for p in out.parent.iterdir()) == ["model.tpk"]
    return out


@pytest.mark.parametrize(("version", "name"), CASES)
def test_torchs_text_from_the_tpk_alone(tmp_path: Path, version: str, name: str) -> None:
    error = readback(version)["files"]["lite.ptl"]["errors"][name]
    assert NOT_FOUND.search(error["maps_stripped"]) is not None
    for codec, compression in FORMS:
        syms = open_artifact(str(tpk(tmp_path, path(version, "lite.ptl"), codec, compression)))
        assert syms[0].lite_table is None  # nothing but the document: read from its extension
        out = "\n".join(symbolicate_lines(error["maps_stripped"].split("\n"), syms))
        assert out == error["with_debug_maps"], (codec, compression)


def test_executorch_mobile_sample_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stripped = EXECUTORCH_DATA / manifest()["mobile"]["mobile_stripped.ptl"]["error_file"]
    full = (EXECUTORCH_DATA / manifest()["mobile"]["mobile.ptl"]["error_file"]).read_text()
    model = tmp_path / "model.tpk"
    assert main(["convert", str(MOBILE), str(model), "--codec", "flatbuffers", "--compression", "none"]) == 0
    capsys.readouterr()
    assert main(["symbolicate", str(model), str(stripped)]) == 0
    assert capsys.readouterr().out == full + "\n"
    assert main(["symbolicate", str(model), "--handle", "5"]) == 0
    head, _, text = capsys.readouterr().out.partition("\n")
    assert head == "debug handle 5: aten::embedding"
    assert text.startswith("Module hierarchy:top(TinyLM)::<unknown>.embed(Embedding)::forward.")
    assert text in full + "\n"  # torch's own lines, as it printed them
    assert main(["symbolicate", str(model), "--handle", "5", "--json"]) == 0
    (answer,) = json.loads(capsys.readouterr().out)["references"][0]["answers"]
    assert answer["runtime_text"] in full
    assert answer["runtime_hierarchy"] == (
        "top(TinyLM)::<unknown>.embed(Embedding)::forward.UNKNOWN_INSTANCE(UNKNOWN_TYPE)::embedding.aten::embedding"
    )
    assert answer["runtime_note"] is None


@pytest.mark.parametrize("ptl", SAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_handle_as_from_the_ptl(tmp_path: Path, ptl: Path) -> None:
    """Every handle of every sample: the table kept in the .tpk is the one read from the full file
    (whose rendering the release tests compare with torch's own text)."""
    want = LiteDebugTable.from_archive(ptl.read_bytes(), source=str(ptl))
    with tracepack.open(tpk(tmp_path, ptl)) as lazy:
        got = lite_table_from_document(lazy)  # decoded handle by handle, while the file is open
        assert got is not None
        assert sorted(got.handles) == sorted(want.handles)
        assert got.handles[max(want.handles)] == want.handles[max(want.handles)]
        assert max(want.handles) + 1 not in got.handles
        assert got == want
    assert len(want.handles) >= 90
    loaded = tracepack.loads(tpk(tmp_path, ptl, "msgpack", "zstd").read_bytes())
    assert lite_table_from_document(loaded) == want


def without_extension(doc: Document) -> Document:
    raw = doc.raw
    return Document(msgspec.structs.replace(raw, extensions=[e for e in raw.extensions if e.name != RENDER_EXTENSION]))


def test_an_older_tpk_renders_tracepacks_form_and_says_how(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A .tpk converted before the extension existed: tracepack's own form, and a note on the exact one."""
    stripped = EXECUTORCH_DATA / manifest()["mobile"]["mobile_stripped.ptl"]["error_file"]
    old = tmp_path / "old.tpk"
    old.write_bytes(tracepack.dumps(without_extension(document(MOBILE)), codec="flatbuffers", compression="none"))
    assert main(["symbolicate", str(old), str(stripped)]) == 0
    out = capsys.readouterr().out
    assert "debug_handles:{5}, was not found." in out
    assert "Module hierarchy:TOP(TinyLM)::forward.embed(Embedding)::forward" in out
    assert "Traceback of TorchScript" not in out
    assert "note: this .tpk predates torch's exact text" in out
    assert "tracepack convert app.ptl app.tpk" in out
    assert main(["symbolicate", str(old), "--handle", "5", "--style", "tracepack"]) == 0
    assert "note:" not in capsys.readouterr().out


def test_sizes_are_small() -> None:
    """What the extension adds to a .tpk after zstd -19 (docs/symbolicate.md quotes these figures)."""
    for ptl in SAMPLES:
        doc = document(ptl)
        with_ext = len(tracepack.dumps(doc, codec="flatbuffers", compression="zstd", level=19))
        without = len(tracepack.dumps(without_extension(doc), codec="flatbuffers", compression="zstd", level=19))
        assert 0 < with_ext - without <= 600, (ptl, with_ext, without)


def test_a_malformed_extension_is_one_line_naming_the_place() -> None:
    doc = document(MOBILE)
    value = json.loads(doc.extension(RENDER_EXTENSION) or "")
    from tracepack.torch.torchscript import mobile_render

    reader = mobile_render._range_reader(doc)
    full = lite_table_from_document(doc)
    assert full is not None
    assert full.owners  # the owners come from the torchscript/archive extension
    assert decode_table(value, reader) == LiteDebugTable(full.top_type, full.handles, full.known_types)
    for mutate, match in [
        (lambda v: v["handles"]["call"].__setitem__(0, 10**6), r"\.handles\[0\]: .*no call"),
        (lambda v: v["calls"]["range"].__setitem__(0, 10**6), r"\.calls\[0\]: .*no source range"),
        (lambda v: v["calls"]["parent"].__setitem__(0, 5), r"\.calls\[0\]: .*not an earlier call"),
        (lambda v: v.__setitem__("names", [1]), r"\.names: .*list of strings"),
        (lambda v: v.__setitem__("format", 9), r"\.format"),
        (lambda v: v["handles"].__setitem__("node", []), r"\.handles: .*different lengths"),
    ]:
        bad = json.loads(json.dumps(value))
        mutate(bad)
        with pytest.raises(DecodeError, match=match) as info:
            decode_table(bad, reader)
        assert "\n" not in str(info.value)


# -- the encoding, on arbitrary tables --------------------------------------------------------------


@given(lite_tables())
def test_encode_decode_round_trip(table: LiteDebugTable) -> None:
    """Ranges interned as rows of a table, the value through JSON text, and back: the same table."""
    rows: dict[SourceRange, int] = {}
    value = encode_table(table, lambda r: rows.setdefault(r, len(rows)))
    by_row = list(rows)
    back = decode_table(json.loads(json.dumps(value)), lambda i: by_row[i])
    assert back == table
    assert all(type(v) is int for col in value["handles"].values() for v in col)


@given(lite_tables())
def test_round_trip_through_a_document(table: LiteDebugTable) -> None:
    """Ranges interned into a document's own range table, the document through a codec and back."""
    b = DocumentBuilder(producer="torch.jit")
    b.add_extension(
        RENDER_EXTENSION,
        encode_table(table, lambda r: b.source_range(b.source(r.text, r.filename, r.starting_line), r.start, r.end)),
    )
    doc = tracepack.loads(tracepack.dumps(b.build(), codec="msgpack"))
    assert lite_table_from_document(doc) == table


def test_kept_through_older_schema_versions_and_every_codec() -> None:
    """The extension's range rows stay valid through a downgrade to schema 1.0 and back."""
    doc = document(MOBILE)
    want = LiteDebugTable.from_archive(MOBILE.read_bytes(), source=str(MOBILE))
    for codec in ("json", "msgpack", "flatbuffers-rows", "columnar", "flatbuffers-columns"):
        back = tracepack.loads(tracepack.dumps(doc, codec=codec, version=(1, 0)))
        assert lite_table_from_document(back) == want, codec


def test_a_tampered_extension_is_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = document(MOBILE)
    value = json.loads(doc.extension(RENDER_EXTENSION) or "")
    value["calls"]["range"] = [10**6 for _ in value["calls"]["range"]]
    raw = doc.raw
    exts = [
        msgspec.structs.replace(e, json=json.dumps(value)) if e.name == RENDER_EXTENSION else e for e in raw.extensions
    ]
    bad = tmp_path / "bad.tpk"
    bad.write_bytes(tracepack.dumps(Document(msgspec.structs.replace(raw, extensions=exts)), codec="flatbuffers"))
    assert main(["symbolicate", str(bad), "--handle", "5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"tracepack: {bad}: $.extensions[torchscript/mobile-render].calls[")
    assert "no source range 999999 in the document" in err


def test_lazy_decoding_checks_each_handle_when_asked() -> None:
    """A document's table decodes a handle on first use: a bad row fails then, naming its place."""
    doc = document(MOBILE)
    value = json.loads(doc.extension(RENDER_EXTENSION) or "")
    value["handles"]["call"][-1] = 10**6
    from tracepack.torch.torchscript import mobile_render

    table = decode_table(value, mobile_render._range_reader(doc), lazy=True)
    first, last = min(table.handles), max(table.handles)
    assert len(table.handles) == len(value["handles"]["handle"])
    assert table.handles[first].handle == first
    with pytest.raises(DecodeError, match=rf"\.handles\[{len(table.handles) - 1}\]: .*no call 1000000"):
        table.handles[last]
    with pytest.raises(KeyError):
        table.handles[last + 1]


def test_a_chain_too_deep_is_refused_not_expanded() -> None:
    """A hostile extension with a 10k-deep call chain under each of many handles: refused per handle."""
    from tracepack.torch.torchscript.mobile_render import MAX_CALL_DEPTH

    n = MAX_CALL_DEPTH + 10
    value = {
        "format": 1,
        "names": ["__torch__.M", "forward", "aten::mul"],
        "known": 1,
        "top": 0,
        "calls": {
            "parent": list(range(n)),
            "type": [0] * n,
            "instance": [0] * n,
            "range": [0] * n,
            "function": [1] * n,
        },
        "handles": {"handle": [1] * 100, "node": [2] * 100, "range": [0] * 100, "call": [n] * 100},
    }
    table = decode_table(value, lambda i: SourceRange("", None, 0, 0, 0), lazy=True)
    with pytest.raises(DecodeError, match=rf"\.handles\[0\]: .*deeper than {MAX_CALL_DEPTH} calls"):
        table.handles[1]
    value["handles"]["call"] = [MAX_CALL_DEPTH] * 100
    assert len(decode_table(value, lambda i: SourceRange("", None, 0, 0, 0)).handles[1].calls) == MAX_CALL_DEPTH


def _with_data_pkl(tmp_path: Path, data: bytes | None) -> Path:
    """The mobile sample with its data.pkl replaced by ``data`` (left out when None)."""
    import zipfile

    out = tmp_path / "damaged.ptl"
    with zipfile.ZipFile(MOBILE) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            if info.filename.endswith("/data.pkl"):
                if data is None:
                    continue
                dst.writestr(info, data)
            else:
                dst.writestr(info, src.read(info))
    return out


@pytest.mark.parametrize(
    ("data", "reason"),
    [(b"\x80\x02not a pickle", "its data.pkl could not be read"), (None, "it has no data.pkl")],
    ids=["unreadable", "missing"],
)
def test_a_ptl_whose_data_pkl_cannot_be_read_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes | None, reason: str
) -> None:
    """Not "predates": the .tpk is current, what is missing is the archive's data.pkl."""
    ptl = _with_data_pkl(tmp_path, data)
    model = tmp_path / "model.tpk"
    assert main(["convert", str(ptl), str(model), "--codec", "flatbuffers", "--compression", "none"]) == 0
    for artifact in (model, ptl):
        capsys.readouterr()
        assert main(["symbolicate", str(artifact), "--handle", "5"]) == 0
        out = capsys.readouterr().out
        assert "Module hierarchy:TOP(TinyLM)::forward.embed(Embedding)::forward" in out  # tracepack's form
        assert f"note: torch's exact text is not available: when the archive was imported, {reason}" in out
        assert "predates" not in out
        assert main(["symbolicate", str(artifact), "--handle", "5", "--json"]) == 0
        (answer,) = json.loads(capsys.readouterr().out)["references"][0]["answers"]
        assert answer["runtime_text"] is None
        assert reason in answer["runtime_note"]
