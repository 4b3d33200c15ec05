"""Shared by the ``codec_*`` harnesses: one codec's decoder, reached without a container in the way.

The input is one byte choosing the schema version (of the released ones) and then the payload; the
harness wraps it in a container with that codec (so no checksum stands between a mutant and the
decoder) and reads it as :func:`tracepack.loads` does: decode, validate, migrate, every answer of
every node. An accepted document must survive a re-encode with the same codec."""

from __future__ import annotations

from typing import Any

from fuzz.common import Finding, answers, contract


def versions() -> tuple[tuple[int, int], ...]:
    from tracepack.versions import RELEASED

    return tuple(RELEASED)


def read(codec: str, data: bytes) -> None:
    import tracepack
    from tracepack import container

    if not data:
        return
    released = versions()
    version = released[data[0] % len(released)]
    tpk = container.pack(data[1:], schema_version=version, codec=codec)

    def load() -> Any:
        doc = tracepack.loads(tpk, source="m.tpk")
        return doc, answers(doc)

    got = contract(load)
    if got is None:
        return
    doc, said = got
    # compared as bytes and reprs: a NaN the document holds is equal to itself only that way
    encoded = tracepack.dumps(doc, codec=codec, compression="none")
    again = tracepack.loads(encoded, source="again.tpk")
    if tracepack.dumps(again, codec=codec, compression="none") != encoded:
        raise Finding(f"an accepted {codec} document does not survive a re-encode")
    if repr(answers(again)) != repr(said):
        raise Finding(f"an accepted {codec} document answers differently after a re-encode")


def seeds(codec: str) -> list[tuple[str, bytes]]:
    """The payloads of the golden files and of the small sample graph, in every released version."""
    import tracepack
    from fuzz.common import ROOT, conformance_vectors, sample_doc
    from tracepack.container import unpack
    from tracepack.errors import InputError

    released = versions()
    out = []
    for p in sorted((ROOT / "tests/golden").glob("*/*.tpk")):
        head, payload = unpack(p.read_bytes())
        if head.codec == codec:
            out.append((f"golden-{p.parent.name}-{p.name}", bytes([released.index(head.schema_version)]) + payload))
    for name, data in conformance_vectors("*"):  # the conformance suite's payloads in this codec, damaged ones too
        try:
            head, payload = unpack(data)
        except InputError:
            continue
        if head.codec == codec and head.schema_version in released:
            out.append((name, bytes([released.index(head.schema_version)]) + bytes(payload)))
    doc = sample_doc()
    for i, version in enumerate(released):
        data = tracepack.dumps(doc, codec=codec, compression="none", version=version)
        out.append((f"dynamic-{version[0]}.{version[1]}", bytes([i]) + data[48:]))
    return out
