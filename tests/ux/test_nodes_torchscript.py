"""``tracepack nodes`` of TorchScript and mobile (lite-interpreter) files: one row per debug handle (op, module
path, source line), filtered as export programs' nodes are, against what torch wrote and printed:

* the mobile runtime's own error text for a handle (``mobile_error.txt``, printed by torch's lite
  interpreter when the sample was made);
* the archive's ``callstack_debug_map.pkl`` rows and ``debug_pkl`` source ranges as torch pickled them
  (``torchscript_expected.json``, the tables of the archive itself, not tracepack's document).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import tracepack
from tracepack.cli import main
from tracepack.query import HandleView, NodeFilter, find_nodes

ROOT = Path(__file__).resolve().parents[2]
LITE = ROOT / "tests" / "data" / "torch" / "lite_debug.ptl"
MOBILE = ROOT / "tests" / "data" / "executorch" / "mobile.ptl"
SCRIPT = ROOT / "tests" / "data" / "torch" / "script_string_table.pt"


def _expected() -> dict[str, Any]:
    value: dict[str, Any] = json.loads((ROOT / "tests" / "data" / "torch" / "torchscript_expected.json").read_text())
    return value["lite_debug.ptl"]


def _line_of(tags: dict[int, tuple[str, int, str, int]], tag: int) -> tuple[str, int] | None:
    found = tags.get(tag)
    if found is None:
        return None
    file, start_line, text, start = found
    return file, start_line + text[:start].count("\n")


def test_every_handle_is_a_row_with_the_archives_op_module_and_line() -> None:
    exp = _expected()
    tags: dict[int, tuple[str, int, str, int]] = {}
    for member, table in exp.items():
        if member.endswith(".debug_pkl"):
            for _offset, text, file, start_line, start, _end, tag in table["rows"]:
                if tag:
                    tags[tag] = (file, start_line, table["texts"][text], start)
    rows = {r.handle: r for r in find_nodes(tracepack.load(LITE))}
    cs_rows = exp["callstack_debug_map.pkl"]["rows"]
    assert sorted(rows) == sorted(r[0] for r in cs_rows)
    assert len(rows) == 174
    own = 0
    for handle, tag, op, frames in cs_rows:
        row = rows[handle]
        assert (row.name, row.target) == (str(handle), op)
        # the module path: the instance names of the inlined call stack's module frames
        assert row.module == ".".join(f[0][1] for f in frames if f[0]), handle
        # the line: the node's own source range, or (none recorded) the innermost call's
        want = _line_of(tags, tag)
        own += want is not None
        if want is None and frames:
            want = _line_of(tags, frames[-1][1])
        got = None if row.source is None else (row.source[0], row.source[1])
        assert got == want, handle
    assert own > 50


def test_a_handle_is_what_the_mobile_runtime_printed_for_it() -> None:
    text = (ROOT / "tests" / "data" / "executorch" / "mobile_error.txt").read_text()
    hierarchy = re.search(r"Module hierarchy:(\S+)", text)
    assert hierarchy is not None
    op = hierarchy.group(1).rsplit(".", 1)[1]  # ...::embedding.aten::embedding
    modules = [part.split("(")[0] for part in hierarchy.group(1).split(".")[1:-1]]
    module = ".".join(m for m in modules if m != "UNKNOWN_INSTANCE")
    frames = re.findall(r'File "([^"]+)", line (\d+)', text)
    # the stripped copy of the same program failed at handle 5 (the runtime said debug_handles:{5})
    (row,) = find_nodes(tracepack.load(MOBILE), NodeFilter(match="^5$"))
    assert (row.target, row.module, row.module_type) == (op, module, "Embedding")
    assert row.source is not None
    assert row.user_source is not None
    assert (row.source[0], str(row.source[1])) == frames[-1]  # functional.py, torch.embedding
    assert (row.user_source[0], str(row.user_source[1])) == frames[0]  # the model's own line


@pytest.mark.parametrize("spelling", ["linear", "aten.linear", "aten::linear"])
def test_op_filter_spellings(spelling: str) -> None:
    doc = tracepack.load(LITE)
    got = [r.handle for r in find_nodes(doc, NodeFilter(op=spelling))]
    assert got == [r.handle for r in find_nodes(doc) if r.target == "aten::linear"]
    assert len(got) == 10


def test_module_source_and_match_filters() -> None:
    doc = tracepack.load(LITE)
    every = list(find_nodes(doc))
    inside = list(find_nodes(doc, NodeFilter(module="blocks.1")))
    assert inside == [r for r in every if r.module == "blocks.1" or r.module.startswith("blocks.1.")]
    assert 0 < len(inside) < len(every)
    line = list(find_nodes(doc, NodeFilter(source="export_torchscript_sample.py:67")))
    assert line  # the helper's line: every handle with a frame there
    views = {v.handle: v for v in _views(doc)}
    for r in line:
        assert any(f.file.endswith("export_torchscript_sample.py") and f.line == 67 for f in views[r.handle].frames)
    assert [r.handle for r in find_nodes(doc, NodeFilter(match="^1[0-9]$"))] == list(range(10, 20))
    assert list(find_nodes(doc, NodeFilter(op="tanh", module="blocks.0"))) == [
        r for r in every if r.target == "aten::tanh" and r.module.startswith("blocks.0")
    ]


def _views(doc: tracepack.Document) -> list[HandleView]:
    from tracepack.query import handle_views

    return list(handle_views(doc))


def test_the_command_lists_and_filters_with_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nodes", str(LITE), "--op", "aten::tanh", "--module", "blocks.1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines
    for line in lines:
        handle, op, module, where = line.split("\t")
        assert op == "aten::tanh"
        assert module.startswith("blocks.1")
        assert where.endswith("export_torchscript_sample.py:67")
        assert handle.isdigit()
    assert main(["nodes", str(LITE), "--op", "tanh", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["handle"] for r in rows] == [int(r["name"]) for r in rows]
    assert {r["target"] for r in rows} == {"aten::tanh"}
    # an op the file does not have: nothing listed, a hint on stderr
    assert main(["nodes", str(LITE), "--op", "lineer"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"tracepack: {LITE}: no op 'lineer' (did you mean 'linear'?)\n"


def test_a_torchscript_archive_without_handles_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nodes", str(SCRIPT)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "no graph nodes and no debug handles" in captured.err
    assert captured.err.count("\n") == 1


def test_export_programs_rows_have_no_handle() -> None:
    doc = tracepack.load(ROOT / "src" / "tracepack" / "data" / "sample" / "model.json")
    row = next(find_nodes(doc))
    assert row.handle is None
    assert "handle" not in row.as_json()
