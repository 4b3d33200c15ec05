"""``tracepack nodes`` of mobile files against torch's own lite interpreter: the operators it lists for the
module (``torch.jit.mobile._export_operator_list``) and what it prints when an op fails."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tracepack
from tests.torch.conftest import CORPUS, ROOT, TORCH_MARKS
from tracepack.query import NodeFilter, find_nodes

torch = pytest.importorskip("torch")

pytestmark = TORCH_MARKS

LITE_FILES = [
    ROOT / "tests" / "data" / "torch" / "lite_debug.ptl",
    ROOT / "tests" / "data" / "executorch" / "mobile.ptl",
    CORPUS / "transformer_lite.ptl",
]


@pytest.mark.parametrize("path", LITE_FILES, ids=lambda p: p.name)
def test_the_ops_are_the_lite_interpreters(path: Path) -> None:
    from torch.jit.mobile import _export_operator_list, _load_for_lite_interpreter

    theirs = {op.split(".")[0] for op in _export_operator_list(_load_for_lite_interpreter(str(path)))}
    ours = {r.target for r in find_nodes(tracepack.load(path)) if r.target.startswith("aten::")}
    assert ours == theirs


def test_a_failing_op_is_a_row_with_the_runtimes_module_and_line() -> None:
    from torch.jit.mobile import _load_for_lite_interpreter

    path = ROOT / "tests" / "data" / "torch" / "lite_debug.ptl"
    module = _load_for_lite_interpreter(str(path))
    with pytest.raises(RuntimeError) as info:
        module(torch.randn(2, 3, 5))  # the first linear expects 4 features
    text = str(info.value)
    hierarchy = re.search(r"Module hierarchy:(\S+)", text)
    assert hierarchy is not None
    *parts, op = hierarchy.group(1).split(".")
    path_parts = [p.split("(")[0] for p in parts[1:] if not p.startswith("UNKNOWN_INSTANCE")]
    frames = re.findall(r'File "([^"]+)", line (\d+)', text)
    rows = list(
        find_nodes(
            tracepack.load(path),
            NodeFilter(op=op, module=".".join(path_parts), source=f"{frames[-1][0]}:{frames[-1][1]}"),
        )
    )
    assert rows
    for row in rows:
        assert (row.target, row.module) == (op, ".".join(path_parts))
        assert row.source is not None
        assert (row.source[0], str(row.source[1])) == frames[-1]
        assert row.user_source is not None
        assert (row.user_source[0], str(row.user_source[1])) == frames[0]
