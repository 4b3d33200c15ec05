"""torch.export ``model.json`` export (:func:`~tracepack.torch.export.model_json.export_model_json`) of a
``.tpk`` document whose schema is valid but whose torch extensions (``torch.export/program``,
``torch.export/nodes``, dtypes, devices, symbolic shapes) anyone could have written.

The input is one byte choosing the codec (JSON or MessagePack: the extensions' own JSON text mutates
well in either) and the payload; the document is read as :func:`tracepack.loads` reads it, then
exported as ``tracepack expand`` does."""

from __future__ import annotations

from typing import Final

from fuzz.common import contract

TARGETS: Final = (
    "tracepack.torch.export.model_json",
    "tracepack.torch.export.values",
)
DICT: Final = "model_json.dict"
_CODECS: Final = ("json", "msgpack")


def test_one_input(data: bytes) -> None:
    import tracepack
    from tracepack import container
    from tracepack.io import limits
    from tracepack.torch.export.model_json import export_model_json
    from tracepack.versions import CURRENT

    if not data:
        return
    tpk = container.pack(data[1:], schema_version=CURRENT, codec=_CODECS[data[0] % 2])
    doc = contract(lambda: tracepack.loads(tpk, source="m.tpk"))
    if doc is None:
        return
    with limits.rendering():
        contract(lambda: export_model_json(doc))


def seeds() -> list[tuple[str, bytes]]:
    import tracepack
    from fuzz.common import sample_doc

    out = []
    for name in ("dynamic", "cond"):
        for i, codec in enumerate(_CODECS):
            out.append(
                (
                    f"{name}-{codec}",
                    bytes([i]) + tracepack.dumps(sample_doc(name), codec=codec, compression="none")[48:],
                )
            )
    return out
