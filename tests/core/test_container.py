"""Bad input: every damaged container gets a one-line error naming the file and the problem."""

from __future__ import annotations

import struct
import zlib

import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

import tracepack
from tests.strategies import documents
from tracepack import DocumentBuilder, TracepackError, VersionError
from tracepack.container import HEADER_SIZE, MAGIC


def _doc() -> tracepack.Document:
    b = DocumentBuilder()
    b.add_node("relu", "aten.relu", stack_trace=[("m.py", 3, "forward", "return relu(x)")], module_stack="L,,M")
    return b.build()


def _reheader(data: bytes, **fields: int) -> bytes:
    """Patch header fields and fix the header checksum, as a careful attacker would."""
    offsets = {"container_version": (8, "<H"), "schema_major": (12, "<H"), "codec": (16, "<B")}
    offsets |= {"compression": (17, "<B"), "flags": (18, "<H"), "raw_length": (32, "<Q"), "payload_length": (24, "<Q")}
    buf = bytearray(data)
    for name, value in fields.items():
        off, fmt = offsets[name]
        struct.pack_into(fmt, buf, off, value)
    struct.pack_into("<I", buf, 44, zlib.crc32(bytes(buf[:44])))
    return bytes(buf)


def _error(data: bytes, **kw: object) -> str:
    with pytest.raises(TracepackError) as info:
        tracepack.loads(data, source="m.tpk", **kw)  # type: ignore[arg-type]
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith("m.tpk: ")
    return text


def test_empty_file() -> None:
    assert _error(b"") == "m.tpk: byte 0: file is empty; expected the tracepack magic \\x89TPK\\r\\n\\x1a\\n"


def test_wrong_magic_names_what_it_is() -> None:
    assert "a zip archive" in _error(b"PK\x03\x04" + bytes(100))
    assert "JSON text" in _error(b'{"graph_module": {}}' + bytes(40))


def test_every_truncation_is_a_clear_error() -> None:
    data = tracepack.dumps(_doc(), compression="zstd")
    for n in range(len(data)):
        text = _error(data[:n])
        assert any(word in text for word in ("truncated", "empty", "not a tracepack")), text


def test_trailing_bytes() -> None:
    data = tracepack.dumps(_doc())
    assert "unexpected bytes after the payload" in _error(data + b"x")


def test_corrupted_payload_fails_the_checksum() -> None:
    data = bytearray(tracepack.dumps(_doc(), compression="none"))
    data[HEADER_SIZE + 5] ^= 0x40
    assert "payload checksum mismatch" in _error(bytes(data))


def test_corrupted_header_fails_its_checksum() -> None:
    data = bytearray(tracepack.dumps(_doc()))
    data[13] ^= 1
    assert "header checksum mismatch" in _error(bytes(data))


def test_unknown_versions() -> None:
    data = tracepack.dumps(_doc())
    with pytest.raises(VersionError, match="container version 9"):
        tracepack.loads(_reheader(data, container_version=9))
    with pytest.raises(VersionError, match=r"schema version 7\.\d+ is not readable by this build"):
        tracepack.loads(_reheader(data, schema_major=7))


def test_unknown_codec_and_compression() -> None:
    data = tracepack.dumps(_doc())
    assert "unknown codec id 9" in _error(_reheader(data, codec=9))
    assert "unknown compression id 5" in _error(_reheader(data, compression=5))
    assert "unknown flags 0x2" in _error(_reheader(data, flags=2))  # bit 0 is block checksums (test_blocks.py)
    assert "unknown flags 0x8001" in _error(_reheader(data, flags=0x8001))


def test_decompression_bomb_is_refused_before_decompressing() -> None:
    data = tracepack.dumps(_doc(), compression="zstd")
    text = _error(_reheader(data, raw_length=1 << 40))
    assert "exceeds the limit" in text
    assert "decompression bomb" in text
    small = tracepack.dumps(_doc(), compression="zstd")
    assert "exceeds the limit of 10 bytes" in _error(small, max_size=10)


def test_lying_raw_length_is_caught() -> None:
    data = tracepack.dumps(_doc(), compression="zstd")
    raw = struct.unpack_from("<Q", data, 32)[0]
    assert "decompresses to more than" in _error(_reheader(data, raw_length=raw - 1))
    assert "decompresses to" in _error(_reheader(data, raw_length=raw + 1))


def test_zstd_dictionary_must_be_given() -> None:
    samples = [tracepack.dumps(_doc(), compression="none") for _ in range(20)]
    zdict = zstandard.train_dictionary(1024, [s * 3 for s in samples] * 10)
    data = tracepack.dumps(_doc(), compression="zstd", zstd_dict=zdict)
    assert f"compressed with zstd dictionary {zdict.dict_id()}" in _error(data)
    assert tracepack.loads(data, zstd_dict=zdict) == _doc()


def test_references_out_of_range_name_the_place() -> None:
    doc = _doc()
    doc.raw.graph.nodes[0].module = 50
    data = tracepack.dumps(doc)
    assert _error(data) == "m.tpk: $.graph.nodes[0].module: reference 50 is out of range; expected an index below 2"


def test_trie_cycle_in_a_file() -> None:
    b = DocumentBuilder()
    b.add_node("n", "t", stack_trace=[("m.py", 1, "f", ""), ("m.py", 2, "g", "")])
    doc = b.build()
    doc.raw.stacks.parent[1] = 2
    assert "m.tpk: $.stacks.parent[1]: row 1 has parent 2" in _error(tracepack.dumps(doc))


def test_schema_violations_name_the_field() -> None:
    doc = _doc()
    doc.raw.frames.line[1] = -3  # not a u32
    data = tracepack.dumps(doc, codec="msgpack", compression="none")
    assert _error(data) == "m.tpk: $.frames.line[1]: Expected `int` >= 0"
    data = tracepack.dumps(doc, codec="json", compression="none")
    assert _error(data) == "m.tpk: $.frames.line[1]: Expected `int` >= 0"


@pytest.mark.parametrize("codec", ["json", "msgpack"])
@given(doc=documents(max_nodes=5), data=st.data())
def test_random_damage_only_raises_tracepack_errors(codec: str, doc: tracepack.Document, data: st.DataObject) -> None:
    blob = bytearray(tracepack.dumps(doc, codec=codec, compression="none"))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(HEADER_SIZE, len(blob) - 1))
        blob[pos] ^= 1 << data.draw(st.integers(0, 7))
    # Fix the checksum so the damage reaches the decoder and the validator.
    fixed = bytes(blob[:40]) + struct.pack("<I", zlib.crc32(blob[HEADER_SIZE:])) + bytes(blob[44:])
    fixed = fixed[:44] + struct.pack("<I", zlib.crc32(fixed[:44])) + fixed[48:]
    try:
        back = tracepack.loads(fixed)
    except TracepackError as exc:
        message = str(exc)
        assert "\n" not in message
        return
    # What decodes is a validated document: every node renders, or says why not in our own terms.
    for node in back.nodes():
        try:
            _ = node.stack_trace, node.module_stack, node.meta, node.inputs, node.outputs
        except TracepackError as exc:
            message = str(exc)
            assert "\n" not in message


def test_write_is_atomic(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "out.tpk"  # type: ignore[operator]
    tracepack.dump(_doc(), path)
    before = path.read_bytes()
    with pytest.raises(TracepackError):
        tracepack.dump(_doc(), path, codec="nope")
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == ["out.tpk"]  # no temporary file left behind


def test_magic_constant() -> None:
    assert MAGIC == b"\x89TPK\r\n\x1a\n"
    assert HEADER_SIZE == 48
