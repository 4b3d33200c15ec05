"""The C++ reader built with AddressSanitizer and UndefinedBehaviorSanitizer (``make cpp-asan``) on the golden
files, samples in every codec and compression, and the damaged and hostile vectors of test_damaged.py and
test_hostile.py: no read outside a buffer, no leak, no undefined behaviour (any report exits 86, which the
comparison refuses), and the same answers as the Python reader.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import msgspec

import tracepack
from tests.cpp import harness
from tests.cpp import test_damaged as damaged
from tests.cpp import test_fbcolumns as fbcolumns
from tests.cpp import test_hostile as hostile
from tracepack import container

GOLDEN = harness.REPO / "tests" / "golden"


def _vectors() -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for path in sorted(GOLDEN.glob("*/*.tpk")):
        out.append((f"golden-{path.parent.name}-{path.name}", path.read_bytes()))
    for codec in damaged.CODECS:
        for compression, zdict in (("none", None), ("zstd", None), ("zstd", "torch-export-7")):
            data = damaged._file(codec, compression, zdict)
            out.append((f"{codec}-{compression}-{zdict}.tpk", data))
            for n in sorted({*range(0, 56, 7), *range(56, len(data), max(1, len(data) // 8))}):
                out.append((f"{codec}-{compression}-cut{n}.tpk", data[:n]))
            rng = random.Random(codec + compression)
            for k in range(6):
                flipped = bytearray(data)
                flipped[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
                out.append((f"{codec}-{compression}-flip{k}.tpk", bytes(flipped)))
        payload = damaged._file(codec)[48:]
        for k, mutant in enumerate(damaged._mutants(payload, codec + "asan", 40)):
            out.append((f"{codec}-mutant{k}.tpk", damaged._repack(mutant, codec)))
    json_payload = hostile._payload("json")
    for k, value in enumerate(hostile.JSON_VALUES):
        for where, marker in (("typed", b'"nodes":[{"name":'), ("ignored", b'{"header":')):
            bad = json_payload.replace(marker, marker + value + b',"zz":', 1)
            out.append((f"json-{where}-{k}.tpk", container.pack(bad, schema_version=(1, 2), codec="json")))
    for name, raw in hostile.MP_RAW.items():
        for place, steps in hostile.MP_PLACES.items():
            value = hostile._raw_at(steps, raw)
            out.append((f"mp-{place}-{name}.tpk", container.pack(value, schema_version=(1, 2), codec="msgpack")))
    mp = hostile._payload("msgpack")
    for depth in (1000, 1001, 50_000):
        deep = b"\xdc\x00\x11" + mp[3:] + b"\x91" * (depth - 2) + b"\x90"
        out.append((f"mp-depth{depth}.tpk", container.pack(deep, schema_version=(1, 2), codec="msgpack")))
        deep_json = json_payload.replace(b'{"header":', b'{"zz":' + b"[" * depth + b"]" * depth + b',"header":', 1)
        out.append((f"json-depth{depth}.tpk", container.pack(deep_json, schema_version=(1, 2), codec="json")))
    for case in hostile.COLUMNAR_PAYLOADS:
        data = container.pack(hostile.columnar_payload(case), schema_version=(1, 2), codec="columnar")
        out.append((f"col-payload-{case}.tpk", data))
    for case in hostile.COLUMNS:
        data = container.pack(hostile.columnar_column(case), schema_version=(1, 2), codec="columnar")
        out.append((f"col-column-{case}.tpk", data))
    for case in fbcolumns.CASES:
        data = container.pack(fbcolumns._payload(case), schema_version=(1, 2), codec="flatbuffers-columns")
        out.append((f"fbcol-{case}.tpk", data))
    doc = msgspec.json.decode(json_payload)
    doc["header"]["version"]["minor"] = 3
    newer = container.pack(msgspec.json.encode(doc), schema_version=(1, 3), codec="json")
    out.append(("json-newer.tpk", newer))
    header = damaged._file("msgpack")
    plen = struct.unpack_from("<Q", header, 24)[0]
    for k, fields in enumerate(
        [{"cver": 9}, {"hsize": 1}, {"codec": 9}, {"comp": 9}, {"flags": 2}, {"plen": plen + 9, "rlen": plen + 9}]
    ):
        out.append((f"header{k}.tpk", damaged._rehead(header, **fields)))
    return out


def test_sanitizers_on_every_vector(asan_bin: Path, tmp_path: Path) -> None:
    vectors = _vectors()
    assert len(vectors) >= 500
    codes = {0: 0, 2: 0}
    for name, data in vectors:
        path = tmp_path / name
        path.write_bytes(data)
        codes[harness.compare(asan_bin, path, once=True).code] += 1
    assert codes[0] >= 20, codes
    assert codes[2] >= 400, codes


def test_sanitizers_on_samples(asan_bin: Path, tmp_path: Path) -> None:
    from tests.cpp.test_differential import SAMPLES, _document

    for rel in SAMPLES[:: max(1, len(SAMPLES) // 15)]:
        for codec in damaged.CODECS:
            path = tmp_path / f"{Path(rel).stem}-{codec}.tpk"
            path.write_bytes(
                tracepack.dumps(_document(rel), codec=codec, compression="zstd", zstd_dict="torch-export-7")
            )
            assert harness.compare(asan_bin, path, once=True).code == 0
