"""The lazy reader renders a module row's hierarchy from its parent's text (the first-answer path of a
symbolicator): equal to rendering the whole path, in any order of rows, at any depth, errors kept."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tracepack
from tests.strategies import BuiltDocument, built_documents
from tracepack.builder import DocumentBuilder
from tracepack.errors import DecodeError
from tracepack.io import limits
from tracepack.traces import ModuleKey, render_module_hierarchy


def _lazy(doc: tracepack.Document, folder: Path) -> tracepack.LazyDocument:
    path = folder / "doc.tpk"
    tracepack.dump(doc, path, codec="flatbuffers", compression="none")
    return tracepack.open(path)


@given(built=built_documents(), data=st.data())
def test_every_row_in_any_order_equals_the_whole_path(built: BuiltDocument, data: st.DataObject) -> None:
    doc = built.doc
    rows = data.draw(st.permutations(range(len(doc.raw.modules.parent))))
    with tempfile.TemporaryDirectory() as tmp, _lazy(doc, Path(tmp)) as lz:
        for row in rows:
            assert lz.module_hierarchy(row) == render_module_hierarchy(doc.modules(row)) == doc.module_hierarchy(row)


def _chain(depth: int) -> tuple[tracepack.Document, int]:
    b = DocumentBuilder()
    row = b.module([ModuleKey(f"m{i}", f"p{i}", f"T{i % 3}", "forward" if i % 2 else "") for i in range(depth)])
    return b.build(), row


@pytest.mark.parametrize("depth", [1, 8, 9, 40])
def test_deep_paths_from_the_root_or_a_rendered_parent(depth: int, tmp_path: Path) -> None:
    doc, row = _chain(depth)
    expected = render_module_hierarchy(doc.modules(row))
    with _lazy(doc, tmp_path) as lz:
        assert lz.module_hierarchy(row) == expected  # deeper than 8 rows: the whole path at once
    with _lazy(doc, tmp_path) as lz:
        for r in range(1, row + 1):  # each from its parent's text
            assert lz.module_hierarchy(r) == render_module_hierarchy(doc.modules(r))


def test_the_rows_rendered_in_one_call_count_against_max_rendered(tmp_path: Path) -> None:
    doc, row = _chain(6)
    text = render_module_hierarchy(doc.modules(row))
    # Six rows rendered in one call build the texts of rows 1..6 (each its parent's and one entry).
    built = sum(len(render_module_hierarchy(doc.modules(r))) for r in range(1, row + 1))
    with _lazy(doc, tmp_path) as lz, limits.raised(max_rendered=built - 1), pytest.raises(DecodeError) as err:
        lz.module_hierarchy(row)
    assert "module path" in str(err.value)
    with _lazy(doc, tmp_path) as lz, limits.raised(max_rendered=built):
        assert lz.module_hierarchy(row) == text
