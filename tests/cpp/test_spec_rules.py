"""Rules the specification added when it was written (spec/), each with one vector whose expected answer is
written out here, and compared with the Python reader's too."""

from __future__ import annotations

import struct
from functools import cache
from pathlib import Path

import msgspec

import tracepack
from tests.cpp import harness
from tracepack import container
from tracepack.codecs import _fbrt

SAMPLE = harness.REPO / "src" / "tracepack" / "data" / "sample" / "model.json"


@cache
def _payload(codec: str) -> bytes:
    return tracepack.dumps(tracepack.load(SAMPLE), codec=codec, compression="none")[48:]


def _run(cpp_bin: Path, tmp_path: Path, payload: bytes, codec: str) -> harness.Outcome:
    path = tmp_path / "rule.tpk"
    path.write_bytes(container.pack(payload, schema_version=(1, 2), codec=codec))
    harness.compare(cpp_bin, path)
    return harness.run(cpp_bin, path, json_errors=True)


def test_flatbuffers_string_without_its_nul(cpp_bin: Path, tmp_path: Path) -> None:
    """spec §5.1: a string is its length, its bytes, then a NUL."""
    payload = bytearray(_payload("flatbuffers-rows"))
    r = _fbrt.Reader(payload)
    from tracepack.codecs.flatbuffers import codec_module

    spec = codec_module((1, 2)).SPECS["Document"]
    fields = r.fields(r.root(b"TPK1"), spec)
    strings = r.tables(fields[spec.slots["strings"]])
    at = strings[5]
    size = struct.unpack_from("<I", payload, at)[0]
    payload[at + 4 + size] = 0x41
    got = _run(cpp_bin, tmp_path, bytes(payload), "flatbuffers-rows")
    assert (got.error, got.place) == ("DecodeError", "$.strings[5]")
    assert got.line.endswith(f"$.strings[5]: string at byte {at} has no NUL after it")


def test_json_repeated_name(cpp_bin: Path, tmp_path: Path) -> None:
    """spec §3.3: an object names each member once (the first object to end with a repeat, its first repeat)."""
    payload = _payload("json").replace(b'{"header":', b'{"zz":{"b":1,"a":[{"c":1,"c":2}],"a":2},"header":', 1)
    got = _run(cpp_bin, tmp_path, payload, "json")
    assert (got.error, got.place) == ("DecodeError", "payload")
    assert got.line.endswith("payload: an object has the name 'c' twice; expected each name once")


def test_json_repeated_field(cpp_bin: Path, tmp_path: Path) -> None:
    payload = _payload("json").replace(b'"nodes":[{"name":', b'"nodes":[{"name":1,"name":', 1)
    got = _run(cpp_bin, tmp_path, payload, "json")
    assert got.line.endswith("payload: an object has the name 'name' twice; expected each name once")


def test_json_text_is_utf8_throughout(cpp_bin: Path, tmp_path: Path) -> None:
    """spec §3.3: the bytes of an ignored member are UTF-8 too."""
    payload = _payload("json")
    bad = payload.replace(b'{"header":', b'{"zz":"\xff","header":', 1)
    got = _run(cpp_bin, tmp_path, bad, "json")
    assert (got.error, got.place) == ("DecodeError", "payload")
    assert got.line.endswith("payload: not valid UTF-8 at byte 7 (invalid start byte)")


def test_debug_handles_strictly_ascending(cpp_bin: Path, tmp_path: Path) -> None:
    """spec §9.4.2 D6: readers find a handle by binary search."""
    doc = msgspec.msgpack.decode(_payload("msgpack"))
    doc[9] = [[0, 7, 7], [0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]]
    got = _run(cpp_bin, tmp_path, msgspec.msgpack.encode(doc), "msgpack")
    assert (got.error, got.place) == ("IntegrityError", "$.debug_handles.handle[2]")
    assert "debug handle 7 follows 7; expected handles strictly ascending" in got.line


def test_bytes_of_no_format(cpp_bin: Path, tmp_path: Path) -> None:
    """spec §1.3: bytes that are no container (nor another format the reference reads) are a ContainerError."""
    path = tmp_path / "x.bin"
    for data in (b"", b"hello world", b"\x28\xb5\x2f\xfd\x00", b"\x89TP"):
        path.write_bytes(data)
        got = harness.run(cpp_bin, path, json_errors=True)
        assert (got.error, got.place) == ("ContainerError", "byte 0"), data
        harness.compare(cpp_bin, path)
