"""The ``.tpk`` container: ``read_header`` and ``unpack`` (checksums, sizes, zstd, dictionaries).

Half the mutants have their header made consistent again (lengths, CRCs), so the fuzzer gets past
the checksums into the zstd and dictionary paths."""

from __future__ import annotations

import inspect
from typing import Final

from fuzz.common import ROOT, Finding, conformance_vectors, contract, mutate_tpk

TARGETS: Final = ("tracepack.container", "tracepack.dictionaries")
DICT: Final = "tpk.dict"


def test_one_input(data: bytes) -> None:
    from tracepack import container

    header = contract(lambda: container.read_header(data, source="m.tpk"))
    got = contract(lambda: container.unpack(data, source="m.tpk"))
    if got is not None:
        head, payload = got
        if header is None or head != header:
            raise Finding("unpack accepted a header read_header refuses or reads otherwise")
        if len(payload) != head.raw_length:
            raise Finding(f"unpack gave {len(payload)} bytes, the header says {head.raw_length}")


def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
    return mutate_tpk(data, max_size, seed, 0.5)


def seeds() -> list[tuple[str, bytes]]:
    import tracepack
    from fuzz.common import sample_doc

    out = [
        (f"golden-{p.parent.name}-{p.name}", p.read_bytes()) for p in sorted((ROOT / "tests/golden").glob("*/*.tpk"))
    ]
    doc = sample_doc()
    for comp in ("none", "zstd"):
        out.append((f"dynamic-msgpack-{comp}", tracepack.dumps(doc, codec="msgpack", compression=comp)))
    out.append(("dynamic-dict", tracepack.dumps(doc, codec="msgpack", compression="zstd", zstd_dict="torch-export-7")))
    out += conformance_vectors("container", "versions")
    if "block_checksums" in inspect.signature(tracepack.dumps).parameters:  # container flag bit 0
        for comp in ("none", "zstd"):
            data = tracepack.dumps(doc, codec="flatbuffers", compression=comp, block_checksums=True)
            out.append((f"dynamic-blocks-{comp}", data))
    return out
