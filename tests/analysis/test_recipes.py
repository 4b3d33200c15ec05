"""The recipes of docs/tables.md (run there as shown by tests/readme), here against references tracepack did
not compute: torch's own ``model.json`` inside each ``.pt2`` (read with zipfile and json), the files
``tracepack pack`` writes (their sizes on disk), and ``tracepack.diff`` for the diff of two versions."""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.analysis.test_zoo import PT2S, _sql
from tracepack.analysis.zoo import export_tables
from tracepack.cli import main

SAMPLE = Path(__file__).resolve().parents[2] / "src" / "tracepack" / "data" / "sample" / "model.json"


def _program(path: Path) -> dict[str, Any]:
    if path.suffix == ".json":
        value: dict[str, Any] = json.loads(path.read_bytes())
        return value
    with zipfile.ZipFile(path) as z:
        member = next(n for n in z.namelist() if "/models/" in n and n.endswith(".json"))
        value = json.loads(z.read(member))
        return value


def _nodes(path: Path) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = _program(path)["graph_module"]["graph"]["nodes"]
    return nodes


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    folder = tmp_path_factory.mktemp("recipes")
    inputs = []
    for p in PT2S:
        shutil.copyfile(p, folder / p.name)
        inputs.append(folder / p.name)
    shutil.copyfile(SAMPLE, folder / "v1.json")
    text = SAMPLE.read_text()
    # version 2 of the model: one op changed, one node renamed (removed + added), one moved to another line
    text = text.replace("aten.chunk.default", "aten.split.Tensor", 1)
    text = text.replace('"linear_9"', '"linear_99"')
    text = text.replace('export_sample.py", line 64,', 'export_sample.py", line 65,', 1)
    (folder / "v2.json").write_text(text)
    inputs += [folder / "v1.json", folder / "v2.json"]
    export_tables(list(map(str, inputs)), folder / "tables", jobs=2)
    return folder / "tables", inputs


def test_operator_histogram_across_models(store: tuple[Path, list[Path]]) -> None:
    tables, inputs = store
    got = dict(_sql(tables, "SELECT op, count(*) FROM nodes WHERE name NOT LIKE '%/%' GROUP BY op"))
    want = Counter(n["target"] for p in inputs for n in _nodes(p))
    assert got == dict(want)
    per_model = _sql(tables, "SELECT op_name, count(DISTINCT model) FROM nodes WHERE name NOT LIKE '%/%' GROUP BY 1")
    want_models: Counter[str] = Counter()
    for p in inputs:
        want_models.update({re.sub(r"^torch\.ops\.(\w+)\.(\w+)(\.\w+)?$", r"\1::\2", n["target"]) for n in _nodes(p)})
    assert dict(per_model) == dict(want_models)


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def test_nodes_per_source_line_and_per_module(store: tuple[Path, list[Path]]) -> None:
    tables, inputs = store
    got = _sql(tables, "SELECT model, file, line, count(*) FROM nodes WHERE name NOT LIKE '%/%' GROUP BY ALL")
    want: Counter[tuple[str, Any, Any]] = Counter()
    modules: Counter[tuple[str, str]] = Counter()
    for p in inputs:
        for n in _nodes(p):
            meta = n.get("metadata", {})
            frames = [f for f in _FRAME.findall(meta.get("stack_trace") or "") if "site-packages" not in f[0]]
            want[(str(p), frames[-1][0], int(frames[-1][1])) if frames else (str(p), None, None)] += 1
            stack = meta.get("nn_module_stack")
            # torch's nn_module_stack: "key,path,type;..." (innermost last); the root's path is empty
            path = [e.split(",")[1] for e in stack.split(";") if e.split(",")[1]] if stack else []
            modules[(str(p), path[-1] if path else "")] += 1
    assert {(m, f, line): c for m, f, line, c in got} == dict(want)
    by_module = _sql(tables, "SELECT model, module_path, count(*) FROM nodes WHERE name NOT LIKE '%/%' GROUP BY ALL")
    assert {(m, path): c for m, path, c in by_module} == dict(modules)


def test_models_that_use_an_operator(store: tuple[Path, list[Path]]) -> None:
    tables, inputs = store
    for spelled, target in (
        ("aten::conv2d", "torch.ops.aten.conv2d.default"),
        ("aten::linear", "torch.ops.aten.linear.default"),
    ):
        got = {m for (m,) in _sql(tables, f"SELECT DISTINCT model FROM nodes WHERE op_name = '{spelled}'")}
        assert got == {str(p) for p in inputs if any(n["target"] == target for n in _nodes(p))}
        assert got


def test_size_saved_by_pack_is_what_pack_writes(store: tuple[Path, list[Path]], tmp_path: Path) -> None:
    tables, inputs = store
    got = {m: (b, pb) for m, b, pb in _sql(tables, "SELECT model, bytes, packed_bytes FROM models")}
    for p in inputs:
        if p.suffix != ".pt2":
            assert got[str(p)] == (p.stat().st_size, None)
            continue
        out = tmp_path / p.name
        assert main(["pack", str(p), str(out)]) == 0
        assert got[str(p)] == (p.stat().st_size, out.stat().st_size)


def test_a_diff_of_two_versions_agrees_with_tracepack_diff(store: tuple[Path, list[Path]]) -> None:
    import tracepack
    from tracepack.diff import diff_documents

    tables, inputs = store
    v1, v2 = (str(p) for p in inputs[-2:])
    rows = _sql(
        tables,
        f"""WITH a AS (SELECT name, op, module_path, file, line FROM nodes WHERE model = '{v1}'),
                 b AS (SELECT name, op, module_path, file, line FROM nodes WHERE model = '{v2}')
            SELECT name, CASE WHEN a.op IS NULL THEN 'added' WHEN b.op IS NULL THEN 'removed' ELSE 'changed' END
            FROM a FULL JOIN b USING (name)
            WHERE (a.op, a.module_path, a.file, a.line) IS DISTINCT FROM (b.op, b.module_path, b.file, b.line)""",
    )
    d = diff_documents(tracepack.load(inputs[-2]), tracepack.load(inputs[-1]))
    assert sorted(n for n, c in rows if c == "added") == sorted(d.added) == ["linear_99"]
    assert sorted(n for n, c in rows if c == "removed") == sorted(d.removed) == ["linear_9"]
    changed = sorted(n for n, c in rows if c == "changed")
    assert "chunk" in changed
    assert set(changed) <= {c.a for c in d.changed}
