"""``tracepack.diff``: edits made to torch's own model.json show up as exactly those differences."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

import tracepack
from tests.strategies import documents
from tests.ux.helpers import MODEL_JSON, PT2
from tracepack.diff import diff_documents, format_diff
from tracepack.errors import UsageError
from tracepack.torch.export.model_json import import_model_json


def _program() -> dict[str, Any]:
    program: dict[str, Any] = json.loads(MODEL_JSON.read_bytes())
    return program


def _doc(program: dict[str, Any]) -> tracepack.Document:
    return import_model_json(json.dumps(program).encode())


def _nodes(program: dict[str, Any]) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = program["graph_module"]["graph"]["nodes"]
    return nodes


def test_the_same_graph_across_formats_codecs_and_versions(tmp_path: Path) -> None:
    base = tracepack.load(MODEL_JSON)
    others = [tracepack.load(PT2)]
    for codec in ("json", "msgpack", "flatbuffers-rows", "columnar", "flatbuffers-columns"):
        for version in ((1, 0), (1, 1)):
            path = tmp_path / f"m-{codec}-{version[1]}.tpk"
            try:
                tracepack.dump(base, path, codec=codec, version=version)
            except tracepack.VersionError:
                continue  # lossy downgrade refused: nothing to compare
            others.append(tracepack.load(path))
    assert len(others) > 4
    for other in others:
        d = diff_documents(base, other)
        assert d.same, format_diff(d, "a", "b")
        assert d.unchanged == len(base) == 70


def test_op_args_module_and_stack_changes_by_name() -> None:
    a = _program()
    b = copy.deepcopy(a)
    nodes = _nodes(b)
    nodes[3]["target"] = "torch.ops.aten.split.Tensor"
    nodes[5]["inputs"][1]["arg"] = {"as_int": 7}
    meta = nodes[7]["metadata"]
    meta["nn_module_stack"] = meta["nn_module_stack"].replace("blocks.0", "blocks.9")
    trace = nodes[9]["metadata"]["stack_trace"]
    nodes[9]["metadata"]["stack_trace"] = trace.replace(", line ", ", line 1", 1)
    d = diff_documents(_doc(a), _doc(b))
    changed = {c.a: set(c.fields) for c in d.changed}
    assert changed == {
        nodes[3]["name"]: {"op"},
        nodes[5]["name"]: {"args"},
        nodes[7]["name"]: {"module"},
        nodes[9]["name"]: {"stack"},
    }
    assert not d.added
    assert not d.removed
    assert d.unchanged == 66
    assert d.changed[0].fields["op"] == ("torch.ops.aten.chunk.default", "torch.ops.aten.split.Tensor")
    text = "\n".join(format_diff(d, "a", "b"))
    assert "op: torch.ops.aten.chunk.default -> torch.ops.aten.split.Tensor" in text
    assert "0 added, 0 removed, 4 changed, 0 renamed, 66 unchanged (by name)" in text


def test_added_and_removed_by_name() -> None:
    a = _program()
    b = copy.deepcopy(a)
    removed = _nodes(b).pop(10)
    extra = copy.deepcopy(_nodes(b)[0])
    extra["name"] = "extra_node"
    _nodes(b).append(extra)
    d = diff_documents(_doc(a), _doc(b))
    assert d.removed == [removed["name"]]
    assert d.added == ["extra_node"]
    back = diff_documents(_doc(b), _doc(a))
    assert back.added == [removed["name"]]
    assert back.removed == ["extra_node"]


def _rename_all(program: dict[str, Any], suffix: str) -> dict[str, Any]:
    """Every node and tensor name gets ``suffix``, as a re-export that renumbers everything would."""
    text = json.dumps(program)
    for n in _nodes(program):
        text = text.replace(f'"{n["name"]}"', f'"{n["name"]}{suffix}"')
    renamed: dict[str, Any] = json.loads(text)
    return renamed


def test_renames_by_structure() -> None:
    a = _program()
    b = _rename_all(copy.deepcopy(a), "_r")
    by_name = diff_documents(_doc(a), _doc(b))
    assert len(by_name.added) == len(by_name.removed) == 70
    by_structure = diff_documents(_doc(a), _doc(b), by="structure")
    assert not by_structure.changed, by_structure.changed[:2]
    assert len(by_structure.renamed) == 70
    assert by_structure.renamed[0] == (_nodes(a)[0]["name"], _nodes(a)[0]["name"] + "_r")


def test_an_inserted_node_by_structure() -> None:
    a = _program()
    b = copy.deepcopy(a)
    extra = copy.deepcopy(_nodes(b)[20])
    extra["name"] = "inserted"
    extra["target"] = "torch.ops.aten.relu.default"
    _nodes(b).insert(21, extra)
    d = diff_documents(_doc(a), _doc(b), by="structure")
    assert d.added == ["inserted"]
    assert not d.removed
    assert not d.changed
    assert not d.renamed
    assert d.unchanged == 70


def test_json_form_and_bad_mode() -> None:
    a = _program()
    b = copy.deepcopy(a)
    _nodes(b)[3]["target"] = "torch.ops.aten.split.Tensor"
    out = diff_documents(_doc(a), _doc(b)).as_json()
    assert json.loads(json.dumps(out)) == out
    assert out["changed"] == [
        {
            "a": "chunk",
            "b": "chunk",
            "fields": {"op": {"a": "torch.ops.aten.chunk.default", "b": "torch.ops.aten.split.Tensor"}},
        }
    ]
    with pytest.raises(UsageError, match="--by"):
        diff_documents(_doc(a), _doc(b), by="color")  # type: ignore[arg-type]


@given(documents(max_nodes=8), documents(max_nodes=8))
def test_diff_laws(a: tracepack.Document, b: tracepack.Document) -> None:
    # a graph against itself, or its copy through any codec: no differences
    copy_a = tracepack.loads(tracepack.dumps(a, compression="none"))
    for by in ("name", "structure"):
        same = diff_documents(a, copy_a, by=by)  # type: ignore[arg-type]
        assert same.same
        assert same.unchanged == len(a)
    # A -> B is B -> A turned around
    ab, ba = diff_documents(a, b), diff_documents(b, a)
    assert ab.added == [n for n in (x.name for x in b.nodes()) if n in set(ba.removed)]
    assert sorted(ab.removed) == sorted(ba.added)
    assert [c.a for c in ab.changed] == [c.a for c in ba.changed if c.a in {x.a for x in ab.changed}]
    assert {c.a: {k: (v[1], v[0]) for k, v in c.fields.items()} for c in ab.changed} == {
        c.a: dict(c.fields) for c in ba.changed
    }
    # every node of A is accounted for once, and of B
    assert ab.unchanged + len(ab.changed) + len(ab.removed) == len(a)
    assert ab.unchanged + len(ab.changed) + len(ab.added) == len(b)
    sb = diff_documents(a, b, by="structure")
    assert sb.unchanged + len(sb.changed) + len(sb.renamed) + len(sb.removed) == len(a)
    assert sb.unchanged + len(sb.changed) + len(sb.renamed) + len(sb.added) == len(b)
