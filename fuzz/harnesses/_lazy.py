"""Shared by the ``lazy_*`` harnesses: :func:`tracepack.open` on one FlatBuffers layout.

The input is a whole ``.tpk``; the custom mutator mutates it and then (nine times in ten) makes the
header consistent again, so mutants reach the lazy reader's structural checks instead of stopping at
the checksum. The file is opened with and without the checksum; every node's answers are read, and
where the eager reader (:func:`tracepack.loads`) accepts the same bytes the answers must be its
answers, and a lookup by name must find the node the eager reader finds (or, for a name several nodes
share, another node of that name: spec §5.4 allows it when the side index is damaged)."""

from __future__ import annotations

import inspect
from typing import Any

from fuzz.common import Finding, answers, contract, lazy_answers, mutate_tpk, scratch_file


def read(data: bytes) -> None:
    import tracepack

    path = scratch_file("lazy.tpk", data)
    eager = contract(lambda: tracepack.loads(data, source="m.tpk"))
    want = None if eager is None else contract(lambda: answers(eager))
    names = [] if want is None else [eager.node(i).name for i in range(len(eager))]
    for checksum in (True, False):

        def lazily(checksum: bool = checksum) -> Any:
            with tracepack.open(path, checksum=checksum) as lz:
                return lazy_answers(lz), {name: lz.node(name).index for name in names}

        got = contract(lazily)
        if got is None or want is None:
            continue
        said, found = got
        if repr(said) != repr(want):  # reprs: a NaN argument is equal to itself only that way
            first = next((i for i, (a, b) in enumerate(zip(said, want, strict=False)) if repr(a) != repr(b)), None)
            if first is None:
                raise Finding(f"the lazy reader answers for {len(said) // 2} nodes, the eager one for {len(want) // 2}")
            raise Finding(f"lazy answers differ from the eager reader's: {said[first]!r} vs {want[first]!r}")
        for name, index in found.items():
            if eager.node(name).index == index:
                continue
            # spec §5.4: with a damaged side index, a name several nodes share may lead to another of them
            if names.count(name) < 2 or names[index] != name:
                raise Finding(f"lazy lookup of {name!r} finds node {index}, the eager reader {eager.node(name).index}")


def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
    return mutate_tpk(data, max_size, seed, 0.9)


def seeds(codec: str, golden: str) -> list[tuple[str, bytes]]:
    import tracepack
    from fuzz.common import ROOT, conformance_vectors, sample_doc

    out = [
        (f"golden-{p.parent.name}-{p.name}", p.read_bytes())
        for p in sorted((ROOT / "tests/golden").glob(f"*/{golden}"))
    ]
    out += conformance_vectors("fbrows" if codec == "flatbuffers-rows" else "fbcols")
    out.append(("dynamic", tracepack.dumps(sample_doc(), codec=codec, compression="none")))
    out.append(("cond", tracepack.dumps(sample_doc("cond"), codec=codec, compression="none")))
    if "block_checksums" in inspect.signature(tracepack.dumps).parameters:  # container flag bit 0
        for name in ("dynamic", "cond"):
            for blocks in (True, False):
                data = tracepack.dumps(sample_doc(name), codec=codec, compression="none", block_checksums=blocks)
                out.append((f"{name}-blocks-{blocks}", data))
    return out
