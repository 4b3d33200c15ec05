"""Hypothesis: any document, in every codec the C++ reader decodes, prints as ``tracepack cat`` prints it.

The documents come from tests/strategies.py (every argument kind, deep shared stacks, unicode, line numbers
up to 2**63-1, TorchScript sources and debug handles); floats get their own strategy, every double the
canonical JSON must write as Python's repr() does (spec §11.1), NaN and the infinities included.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

import tracepack
from tests.cpp import harness
from tests.strategies import documents
from tracepack import DocumentBuilder, Tensor

CODECS = ("json", "msgpack", "flatbuffers-rows", "columnar", "flatbuffers-columns")


def _each_codec(cpp_bin: Path, tmp: Path, doc: tracepack.Document) -> None:
    for codec in CODECS:
        for compression in ("none", "zstd"):
            out = tmp / f"{codec}-{compression}.tpk"
            out.write_bytes(tracepack.dumps(doc, codec=codec, compression=compression))
            assert harness.compare(cpp_bin, out).code == 0, out.name


@given(doc=documents(max_nodes=12))
def test_any_document(cpp_bin: Path, tmp_path_factory: object, doc: tracepack.Document) -> None:
    tmp = tmp_path_factory.mktemp("doc")  # type: ignore[attr-defined]
    _each_codec(cpp_bin, tmp, doc)


@given(
    floats=st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.floats(width=32), min_size=1, max_size=40),
    ints=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=8),
)
def test_any_float(cpp_bin: Path, tmp_path_factory: object, floats: list[float], ints: list[int]) -> None:
    b = DocumentBuilder(producer="floats")
    b.add_node("n", "aten.f", inputs=[("xs", floats), ("x", floats[0]), ("ns", ints)], outputs=[Tensor("n")])
    for i, x in enumerate(floats[:10]):
        b.add_node(f"n{i}", "aten.g", inputs=[("x", x)], outputs=[Tensor(f"n{i}")])
    tmp = tmp_path_factory.mktemp("floats")  # type: ignore[attr-defined]
    _each_codec(cpp_bin, tmp, b.build())
