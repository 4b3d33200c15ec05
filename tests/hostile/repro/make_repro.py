"""Write the minimal reproducers of this folder: ``python -m tests.hostile.repro.make_repro``.

Each file is named ``<surface>--<what>.<ext>``; :mod:`tests.hostile.test_repro` runs it through
that surface of :mod:`tests.hostile.surfaces` and expects it refused with one clear line.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
import zlib
from pathlib import Path

import zstandard

import tracepack
from tracepack import container

HERE = Path(__file__).parent
ROOT = HERE.parents[2]


def _tpk(payload: bytes, *, codec: str = "msgpack", raw_length: int | None = None, compressed: bool = True) -> bytes:
    stored = zstandard.ZstdCompressor(level=19).compress(payload) if compressed else payload
    head = bytearray(
        container.pack(b"", schema_version=(1, 1), codec=codec, compression="zstd" if compressed else "none")
    )
    raw = len(payload) if raw_length is None else raw_length
    struct.pack_into("<QQI", head, 24, len(stored), raw, zlib.crc32(stored))
    struct.pack_into("<I", head, 44, zlib.crc32(bytes(head[:44])))
    return bytes(head[:48]) + stored


def _memo_bomb() -> bytes:
    out = bytearray(b"\x80\x02K\x01\x85q\x00")  # (1,) in memo 0
    for level in range(1, 6):  # each level: a tuple of 100 references to the level below
        out += b"(" + (b"h" + bytes([level - 1])) * 100 + b"tq" + bytes([level])
    return bytes(out + b".")  # ~1 KB standing for 10**10 objects


def _model_json_variant(change: str) -> bytes:
    obj = json.loads((ROOT / "src/tracepack/data/sample/model.json").read_bytes())
    node = obj["graph_module"]["graph"]["nodes"][0]
    if change == "surrogate":
        node["name"] = node["name"] + "\ud800"
    elif change == "null-node":
        obj["graph_module"]["graph"]["nodes"] = [None]
    elif change == "int-over-64-bits":
        values = obj["graph_module"]["graph"]["tensor_values"]
        values[next(iter(values))]["dtype"] = 2**70
    elif change == "layout-dict":
        values = obj["graph_module"]["graph"]["tensor_values"]
        first = next(iter(values))
        values[first]["layout"] = {}
    return json.dumps(obj).encode("ascii")


def _bzip2_bomb() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_BZIP2) as z:
        for name, data in (
            ("m/data/0", bytes(256 << 20)),
            ("m/archive_format", b"pt2"),
            ("m/models/model.json", (ROOT / "src/tracepack/data/sample/model.json").read_bytes()),
        ):
            z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data, zipfile.ZIP_BZIP2)
    return buf.getvalue()


def _changed_letter() -> bytes:
    doc = tracepack.loads((ROOT / "tests/golden/1.1/json.tpk").read_bytes())
    # As written when the hole was found: no block table (spec §1.5), the whole-payload CRC-32 only.
    data = bytearray(tracepack.dumps(doc, codec="flatbuffers-rows", compression="none", block_checksums=False))
    at = data.index(b".py")
    data[at + 1] ^= 0x20  # ".py" -> ".Py": the checksum no longer matches
    return bytes(data)


def _zip_version_25_5() -> bytes:
    """A zip whose central directory asks for "version 25.5" to extract (zipfile: NotImplementedError)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(zipfile.ZipInfo("m/data.pkl", date_time=(1980, 1, 1, 0, 0, 0)), b"\x80\x02N.")
    data = bytearray(buf.getvalue())
    central = data.rindex(b"PK\x01\x02")
    struct.pack_into("<H", data, central + 6, 255)  # version needed to extract: 25.5
    return bytes(data)


def files() -> dict[str, bytes]:
    return {
        "tpk--header-declares-4-gib.tpk": _tpk(b"\x90", raw_length=(4 << 30) - 1),
        "tpk--zstd-frame-ratio-bomb.tpk": _tpk(bytes(200 << 20)),
        "tpk--msgpack-nested-100k-deep.tpk": _tpk(b"\x91" * 100_000 + b"\xc0"),
        "tpk--json-nested-100k-deep.tpk": _tpk(b"[" * 100_000 + b"]" * 100_000, codec="json"),
        "lazy--one-changed-letter.tpk": _changed_letter(),
        "pickle--memo-shared-tuples.pkl": _memo_bomb(),
        "schema--toml-nested-3000-deep.toml": b"a = " + b"[" * 3000 + b"]" * 3000 + b"\n",
        "schema--toml-4301-digit-integer.toml": b"a = " + b"9" * 4301 + b"\n",
        "model_json--lone-surrogate.json": _model_json_variant("surrogate"),
        "model_json--nodes-null.json": _model_json_variant("null-node"),
        "model_json--int-over-64-bits.json": _model_json_variant("int-over-64-bits"),
        "archive--bzip2-zip-bomb.pt2": _bzip2_bomb(),
        "archive--zip-version-25-5.pt": _zip_version_25_5(),
        "archive--member-with-empty-name.pt2": _empty_member_name(),
        "model_json--empty-expr-str.json": _empty_expr_str(),
    }


def _empty_member_name() -> bytes:
    """The bundled .pt2 plus a member whose name is empty (zipfile's is_dir() raised IndexError)."""
    buf = io.BytesIO()
    with (
        zipfile.ZipFile(ROOT / "src/tracepack/data/sample/tiny_transformer.pt2") as src,
        zipfile.ZipFile(buf, "w") as z,
    ):
        for info in src.infolist():
            z.writestr(info, src.read(info))
        z.writestr(zipfile.ZipInfo("", date_time=(1980, 1, 1, 0, 0, 0)), b"x")
    return buf.getvalue()


def _empty_expr_str() -> bytes:
    """A dynamic program whose first symbolic size has the expression ``""``: it was accepted and
    came back as ``{"as_int": -1}`` (an empty expression interns as string 0, read as "none")."""
    with zipfile.ZipFile(ROOT / "tests/data/torch/corpus/dynamic.pt2") as z:
        data = z.read("dynamic/models/model.json")
    at = data.index(b'{"as_expr": {"expr_str": "') + len(b'{"as_expr": {"expr_str": "')
    end = data.index(b'"', at)
    return data[:at] + data[end:]


def main() -> None:
    for name, data in files().items():
        (HERE / name).write_bytes(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
