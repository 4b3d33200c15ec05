"""Damaged and hostile inputs: the C++ reader refuses each with one line, exit 2, the class, place and
message the Python reader gives, and never crashes (tests/cpp/test_asan.py runs the same under ASan/UBSan).

Three kinds: the container damaged (truncations, bit flips, header fields, with the header checksum made
right again so each defect is the one checked); payloads changed byte by byte and packed again with a
correct checksum, so that the decoders meet them (MessagePack, JSON, FlatBuffers); crafted vectors
(nesting past the depth budget, declared sizes past the budgets, dictionaries).
"""

from __future__ import annotations

import random
import struct
import zlib
from functools import cache
from pathlib import Path

import pytest

import tracepack
from tests.cpp import harness
from tracepack import container

SAMPLE = harness.REPO / "src" / "tracepack" / "data" / "sample" / "model.json"
CODECS = ("json", "msgpack", "flatbuffers-rows", "columnar", "flatbuffers-columns")


@cache
def _doc() -> tracepack.Document:
    return tracepack.load(SAMPLE)


@cache
def _file(codec: str, compression: str = "none", zdict: str | None = None) -> bytes:
    return tracepack.dumps(_doc(), codec=codec, compression=compression, zstd_dict=zdict)


def _rehead(data: bytes, **fields: int) -> bytes:
    """``data`` with header fields replaced and the header checksum made right."""
    names = (
        "magic",
        "cver",
        "hsize",
        "major",
        "minor",
        "codec",
        "comp",
        "flags",
        "dict",
        "plen",
        "rlen",
        "pcrc",
        "hcrc",
    )
    values = dict(zip(names, struct.unpack_from("<8sHHHHBBHIQQII", data), strict=True))
    values.update(fields)
    head = struct.pack("<8sHHHHBBHIQQII", *(values[n] for n in names))
    head = head[:44] + struct.pack("<I", zlib.crc32(head[:44]))
    return head + data[48:]


def _repack(payload: bytes, codec: str, version: tuple[int, int] = (1, 2)) -> bytes:
    return container.pack(payload, schema_version=version, codec=codec)


def _check(cpp_bin: Path, tmp_path: Path, name: str, data: bytes, *, message: bool = True) -> harness.Outcome:
    path = tmp_path / name
    path.write_bytes(data)
    return harness.compare(cpp_bin, path, message=message)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("compression", [("none", None), ("zstd", None), ("zstd", "torch-export-7")])
def test_truncations(cpp_bin: Path, tmp_path: Path, codec: str, compression: tuple[str, str | None]) -> None:
    data = _file(codec, *compression)
    cuts = sorted({*range(0, 60), *range(60, len(data), max(1, len(data) // 25)), len(data) - 1})
    for n in cuts:
        assert _check(cpp_bin, tmp_path, f"cut{n}.tpk", data[:n]).code == 2


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("compression", [("none", None), ("zstd", "torch-export-7")])
def test_bit_flips(cpp_bin: Path, tmp_path: Path, codec: str, compression: tuple[str, str | None]) -> None:
    data = _file(codec, *compression)
    rng = random.Random(f"{codec}{compression}")
    for k in range(40):
        at = rng.randrange(len(data)) if k >= 8 else rng.randrange(48)
        bad = bytearray(data)
        bad[at] ^= 1 << rng.randrange(8)
        assert _check(cpp_bin, tmp_path, f"flip{k}.tpk", bytes(bad)).code == 2


HEADER_CASES: dict[str, dict[str, int | str]] = {
    "container version 2": {"cver": 2},
    "header size 40": {"hsize": 40},
    "header size 56": {"hsize": 56},
    "codec 5": {"codec": 5},
    "codec 200": {"codec": 200},
    "compression 2": {"comp": 2},
    "flags 2": {"flags": 2},
    "flags 3": {"flags": 3},
    "block checksum flag toggled": {"flags": "^1"},
    "flags 0x8000": {"flags": 0x8000},
    "raw length without compression": {"rlen": 7},
    "payload length + 1": {"plen": "+1"},
    "payload length - 1": {"plen": "-1"},
    "payload crc": {"pcrc": 1},
    "schema 2.0": {"major": 2, "minor": 0},
    "schema 0.9": {"major": 0, "minor": 9},
    "schema 1.3 in a 1.2 payload": {"minor": 3},
    "schema 1.1 in a 1.2 payload": {"minor": 1},
}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("case", sorted(HEADER_CASES))
def test_header_fields(cpp_bin: Path, tmp_path: Path, codec: str, case: str) -> None:
    data = _file(codec)
    plen = struct.unpack_from("<Q", data, 24)[0]
    flags = struct.unpack_from("<H", data, 18)[0]
    fields = {
        k: (flags ^ 1 if v == "^1" else plen + int(v)) if isinstance(v, str) else v
        for k, v in HEADER_CASES[case].items()
    }
    if "plen" in fields:
        fields["rlen"] = fields["plen"]
    assert _check(cpp_bin, tmp_path, "head.tpk", _rehead(data, **fields)).code == 2


@pytest.mark.parametrize("codec", ["json", "msgpack"])
@pytest.mark.parametrize("defect", [None, "enum", "tag", "type"])
def test_newer_minor(cpp_bin: Path, tmp_path: Path, codec: str, defect: str | None) -> None:
    """A file of schema 1.3 (a newer minor): read with the 1.2 model, what 1.3 added skipped (spec §10.3); a
    value 1.2 does not know is refused with the note that says so."""
    import msgspec

    payload = _file(codec)[48:]
    if codec == "msgpack":
        doc = msgspec.msgpack.decode(payload)
        doc[0][1] = [1, 3]
        doc.append({"added in 1.3": [1, [2, [3]]]})  # a trailing field of the root
        node = doc[10][3][0]
        defaults = [0, 0, [], [], 0, 1, 0, [], [], [], -1]  # Node's fields at their defaults (1.2)
        node.extend(defaults[len(node) :])
        node.append("a new field")
        if defect == "enum":
            node[5] = 7
        elif defect == "tag":
            doc[10][3][1][2][0][1] = [99]
        elif defect == "type":
            node[0] = "x"
        data = msgspec.msgpack.encode(doc)
    else:
        doc = msgspec.json.decode(payload)
        doc["header"]["version"]["minor"] = 3
        doc["added"] = {"in": [1.5, {"x": None}]}
        node = doc["graph"]["nodes"][0]
        node["new_field"] = "a new field"
        if defect == "enum":
            node["stack_style"] = "compact"
        elif defect == "tag":
            doc["graph"]["nodes"][1]["inputs"][0]["arg"] = {"kind": "complex", "re": 1}
        elif defect == "type":
            node["name"] = "x"
        data = msgspec.json.encode(doc)
    got = _check(cpp_bin, tmp_path, "newer.tpk", _repack(data, codec, (1, 3)))
    assert got.code == (0 if defect is None else 2)
    if defect is not None:
        assert "newer than 1.2" in got.line


@pytest.mark.parametrize(
    "case",
    [
        "unknown dictionary",
        "withdrawn dictionary",
        "other dictionary",
        "ratio",
        "size limit",
        "more",
        "less",
        "not zstd",
    ],
)
def test_compression(cpp_bin: Path, tmp_path: Path, case: str) -> None:
    data = _file("msgpack", "zstd", "torch-export-7")
    plen, rlen = struct.unpack_from("<QQ", data, 24)
    fields: dict[str, int] = {
        "unknown dictionary": {"dict": 12345},
        "withdrawn dictionary": {"dict": 0x54504B04},
        "other dictionary": {"dict": 0x54504B01},
        "ratio": {"rlen": 1000 * plen + (64 << 20)},
        "size limit": {"rlen": (4 << 30) + 1},
        "more": {"rlen": rlen - 3},
        "less": {"rlen": rlen + 3},
        "not zstd": {},
    }[case]
    if case == "not zstd":
        payload = b"\x01\x02\x03\x04" + data[52:]
        data = data[:48] + payload
        fields = {"pcrc": zlib.crc32(payload)}
    assert _check(cpp_bin, tmp_path, "z.tpk", _rehead(data, **fields)).code == 2


def _mutants(payload: bytes, seed: str, count: int) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        p = bytearray(payload)
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            at = rng.randrange(len(p))
            op = rng.randrange(4)
            if op == 0:
                p[at] = rng.randrange(256)
            elif op == 1:
                p[at] ^= 1 << rng.randrange(8)
            elif op == 2:
                del p[at : at + rng.randrange(1, 4)]
            else:
                p[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4)))
        out.append(bytes(p))
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_payload_mutants(cpp_bin: Path, tmp_path: Path, codec: str) -> None:
    """Payloads changed and packed again with a correct checksum: the decoders meet the damage."""
    payload = _file(codec)[48:]
    outcomes = {0: 0, 2: 0}
    for k, mutant in enumerate(_mutants(payload, codec, 150)):
        got = _check(cpp_bin, tmp_path, f"m{k}.tpk", _repack(mutant, codec))
        outcomes[got.code] += 1
    assert outcomes[2] >= 50, outcomes  # most mutants are refused; the others print the same document


def test_error_format_json_is_the_protocol(cpp_bin: Path, tmp_path: Path) -> None:
    """``--error-format json`` (spec §12.2): one line, ``json.dumps({"error": CLASS, "place": PLACE, "message":
    LINE})`` with the Python CLI's message (the text line without ``tracepack: ``), exit 2."""
    import json
    import subprocess

    data = _file("msgpack")
    cases = {
        "cut ü.tpk": data[:100],
        "flip.tpk": data[:60] + bytes([data[60] ^ 1]) + data[61:],
        "head.tpk": _rehead(data, codec=9),
        "noplace.tpk": b"",
    }
    for name, bad in cases.items():
        path = tmp_path / name
        path.write_bytes(bad)
        want = harness.reference(path)
        done = subprocess.run(
            [str(cpp_bin), "cat", "--error-format", "json", str(path)], capture_output=True, check=False
        )
        assert done.returncode == 2
        line = json.dumps({"error": want.error, "place": want.place, "message": want.line.removeprefix("tracepack: ")})
        assert done.stderr.decode() == line + "\n"
