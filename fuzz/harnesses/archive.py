"""Archive import without torch (:func:`tracepack.torch.archives.import_archive`): a torch.export
``.pt2`` (either layout, packed or not) or a TorchScript ``.pt``/``.ptl`` (its data-only pickles,
debug pickles and mobile maps) into a Document; every answer of every node read, and an accepted
document must encode and decode again."""

from __future__ import annotations

from typing import Final

from fuzz.common import Finding, answers, contract, small_archives, zip_mutator

TARGETS: Final = (
    "tracepack.torch.archives",
    "tracepack.torch.pt2",
    "tracepack.torch.torchscript",
    "tracepack.torch.export.model_json",
)
DICT: Final = "zip.dict"
custom_mutator = zip_mutator


def test_one_input(data: bytes) -> None:
    import tracepack
    from tracepack.torch import archives

    doc = contract(lambda: archives.import_archive("m.pt2", data))
    if doc is None:
        return
    said = contract(lambda: answers(doc))
    encoded = tracepack.dumps(doc, compression="none")
    again = tracepack.loads(encoded, source="again.tpk")  # bytes and reprs: a NaN equals itself only so
    if tracepack.dumps(again, compression="none") != encoded or (
        said is not None and repr(answers(again)) != repr(said)
    ):
        raise Finding("an imported archive does not survive an encode and decode")


def seeds() -> list[tuple[str, bytes]]:
    from tracepack.torch import pt2

    out = small_archives()
    out.append(("2.13-dynamic-packed.pt2", pt2.pack_pt2(out[0][1], source="dynamic.pt2")))
    return out
