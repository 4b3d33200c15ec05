"""``tracepack inspect`` shows bytes and compressed bytes per table and column (issue 10)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
import zstandard
from hypothesis import given, settings

import tracepack
from tests.strategies import documents
from tracepack import dictionaries
from tracepack.cli import main
from tracepack.codecs import columnar
from tracepack.container import HEADER_SIZE
from tracepack.demo import sample_model_json
from tracepack.sizes import column_sizes, table_sizes
from tracepack.versions import CURRENT


def _inspect(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    code = main(["inspect", str(path), *extra])
    return code, capsys.readouterr().out


def test_columnar_file_lists_its_own_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, tpk = tmp_path / "model.json", tmp_path / "m.tpk"
    src.write_bytes(sample_model_json())
    assert main(["convert", str(src), str(tpk), "--codec", "columnar", "--level", "19"]) == 0
    capsys.readouterr()
    code, out = _inspect(tpk, capsys, "--json")
    assert code == 0
    info = json.loads(out)
    # The reference: the payload itself, decompressed by zstd with the shipped dictionary, read by msgspec.
    data = tpk.read_bytes()
    plain = zstandard.ZstdDecompressor(dict_data=dictionaries.get()).decompress(data[HEADER_SIZE:])
    numbered = msgspec.msgpack.decode(plain)["columns"]
    assert all(type(k) is int for k in numbered)  # columnar layout 2: columns by their paths' numbers
    paths = columnar.path_numbers()[0]
    stored = {paths[k]: column for k, column in numbered.items()}
    listed = {("$." + c["table"] + ("" if c["column"].startswith(("[", "#", "<")) else ".") + c["column"]): c
              for c in info["columns"]}  # fmt: skip
    assert set(listed) == set(stored)
    for path, column in stored.items():
        assert listed[path]["bytes"] == len(msgspec.msgpack.encode(column))
        assert 0 <= listed[path]["compressed_bytes"] <= listed[path]["bytes"] + 16
    strings = [c["compressed_bytes"] for path, c in listed.items() if path.startswith(("$.strings[", "$.strings#"))]
    assert info["compressed_bytes"]["strings"] == sum(strings)
    # Compressed columns add up to about the file's payload (each alone costs a little more).
    total = sum(info["compressed_bytes"].values())
    assert info["payload_bytes"] * 0.8 < total < info["payload_bytes"] * 3
    code, out = _inspect(tpk, capsys, "--columns")
    assert code == 0
    assert "zstd-19" in out
    assert "strings.[]" in out


@settings(max_examples=10)
@given(documents())
def test_every_codec_accounts_for_every_table(doc: tracepack.Document) -> None:
    for codec in ("msgpack", "json", "flatbuffers-rows", "columnar", "flatbuffers-columns"):
        columns = column_sizes(doc.raw, codec, CURRENT)
        tables = table_sizes(columns)
        assert set(tables) <= set(doc.raw.__struct_fields__)
        assert sum(raw for raw, _ in tables.values()) == sum(c.raw_bytes for c in columns)
        assert all(c.compressed_bytes >= 0 for c in columns)
        if codec not in ("columnar", "flatbuffers-columns"):  # every table, even empty ones
            assert set(tables) == set(doc.raw.__struct_fields__)


def test_flatbuffers_file_lists_flatbuffers_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A FlatBuffers file's columns are its FlatBuffers objects, not a MessagePack stand-in: checked
    against the buffer as FlatBuffers' own Python code (flatc's) reads it."""
    from tracepack_generated.v1_1.fb import tables as fb  # flatc's reader of the file's version

    from tracepack.codecs.flatbuffers import split

    src, tpk = tmp_path / "model.json", tmp_path / "m.tpk"
    src.write_bytes(sample_model_json())
    assert main(["convert", str(src), str(tpk), "--codec", "flatbuffers-rows", "--to-version", "1.1"]) == 0
    capsys.readouterr()
    code, out = _inspect(tpk, capsys, "--json")
    assert code == 0
    info = json.loads(out)
    assert info["schema_version"] == "1.1"
    data = tpk.read_bytes()
    body, _ = split(zstandard.ZstdDecompressor(dict_data=dictionaries.get()).decompress(data[HEADER_SIZE:]))
    root = fb.Document.GetRootAs(bytes(body), 0)
    by_name = {f"{c['table']}.{c['column']}": c for c in info["columns"]}
    # Numeric columns: a uint32 count, then the elements (plus at most 7 bytes of alignment).
    lines = root.Lines()
    for column, count, size in [
        ("lines.line", lines.LineLength(), 8),
        ("lines.text", lines.TextLength(), 4),
        ("stacks.parent", root.Stacks().ParentLength(), 4),
        ("modules.type", root.Modules().TypeLength(), 4),
    ]:
        assert count > 0
        assert 4 + count * size <= by_name[column]["bytes"] <= 4 + count * size + 7, column
    # The string table: an offset per string, each string a count, its UTF-8 bytes and a NUL.
    texts = [root.Strings(i) for i in range(root.StringsLength())]
    least = 4 + sum(4 + 4 + len(t) + 1 for t in texts)
    assert least <= by_name["strings."]["bytes"] <= least + 3 * len(texts) + 8
    assert info["bytes"]["strings"] == by_name["strings."]["bytes"]
    # Every table and column together: the document buffer (vtables and shared tables aside).
    total = sum(info["bytes"].values())
    assert 0.9 * len(body) < total < 1.1 * len(body)
    assert all(0 <= c["compressed_bytes"] <= c["bytes"] + 16 for c in info["columns"])
    code, out = _inspect(tpk, capsys, "--columns")
    assert code == 0
    assert "columns (FlatBuffers)" in out
    assert "graph.nodes" in out


def test_flatbuffers_column_layout_lists_its_typed_vectors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A column-layout file's columns are its own, with the bytes they take in its typed vectors: checked
    against the payload's directory read with FlatBuffers' rules (kind widths times counts)."""
    from tracepack.codecs import _fbrt as rt
    from tracepack.codecs import fbcolumns
    from tracepack.codecs.flatbuffers import split

    src, tpk = tmp_path / "model.json", tmp_path / "m.tpk"
    src.write_bytes(sample_model_json())
    assert main(["convert", str(src), str(tpk), "--codec", "flatbuffers-columns", "--compression", "none"]) == 0
    capsys.readouterr()
    code, out = _inspect(tpk, capsys, "--json")
    assert code == 0
    info = json.loads(out)
    body, _ = split(tpk.read_bytes()[HEADER_SIZE:])
    r = rt.Reader(body)
    v = r.fields(r.root(b"TPKC"), fbcolumns.ROOT_SPEC)
    paths = [p.decode() for p in r.bytes_(v[1]).split(b"\0")[:-1]]
    kinds, counts = r.bytes_(v[2]), r.scalars(v[3], "I")
    listed = {("$." + c["table"] + ("" if c["column"].startswith(("[", "#", "<")) else ".") + c["column"]): c
              for c in info["columns"]}  # fmt: skip
    assert set(listed) == set(paths)
    for path, kind, count in zip(paths, kinds, counts, strict=True):
        if kind < 10:  # numbers: the kind's width per value
            assert listed[path]["bytes"] == rt.SIZES[fbcolumns.KINDS[kind]] * count, path
    assert listed["$.graph.nodes[].name"]["compressed_bytes"] > 0
    assert info["bytes"]["graph"] == sum(c["bytes"] for c in info["columns"] if c["table"] == "graph")
    code, out = _inspect(tpk, capsys, "--columns")
    assert code == 0
    assert "graph.nodes[].name" in out
    with tracepack.open(tpk) as lz:  # and it is the lazily readable layout
        assert lz.node(0).name == tracepack.load(tpk).node(0).name
