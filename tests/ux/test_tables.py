"""``tracepack export --format parquet``: tables queried with DuckDB, against what torch wrote."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.ux.helpers import TORCH_DATA
from tracepack.cli import main
from tracepack.io.zip import open_archive

CORPUS = TORCH_DATA / "corpus"
PT2S = sorted(CORPUS.glob("*.pt2"))


def _torch_programs() -> dict[str, list[dict[str, Any]]]:
    """Each corpus .pt2's main-graph nodes, read from the model.json torch wrote into it."""
    out = {}
    for path in PT2S:
        with open_archive(path.read_bytes(), source=str(path)) as archive:
            member = next(n for n in archive.names() if re.search(r"/models/[^/]+\.json$", n))
            program = json.loads(archive.read(member))
        out[str(path)] = program["graph_module"]["graph"]["nodes"]
    return out


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tables")
    assert main(["export", "--format", "parquet", *map(str, PT2S), "-o", str(folder)]) == 0
    return folder


def _sql(folder: Path, query: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect()
    for name in ("models", "nodes", "traces", "frames", "modules"):
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{folder / name / '*.parquet'}')")
    return con.execute(query).fetchall()


def _nested_nodes(value: Any) -> int:
    """How many nodes the subgraphs (torch.cond branches and the like) inside ``value`` hold."""
    if isinstance(value, dict):
        graph = value.get("graph")
        own = graph.get("nodes", []) if isinstance(graph, dict) else []
        return len(own) + sum(_nested_nodes(v) for v in value.values())
    if isinstance(value, list):
        return sum(_nested_nodes(v) for v in value)
    return 0


def test_one_row_per_node_with_torchs_names_and_ops(tables: Path) -> None:
    programs = _torch_programs()
    rows = _sql(tables, "SELECT model, name, op FROM nodes WHERE name NOT LIKE '%/%' ORDER BY model, index")
    expected = sorted(((m, n["name"], n["target"]) for m, nodes in programs.items() for n in nodes), key=lambda r: r[0])
    assert sorted(rows, key=lambda r: r[0]) == expected
    # subgraph nodes come too, named by their path (cond/true_graph_0/linear_1)
    nested = dict(_sql(tables, "SELECT model, count(*) FROM nodes WHERE name LIKE '%/%' GROUP BY model"))
    assert nested == {m: k for m, nodes in programs.items() if (k := sum(_nested_nodes(n["inputs"]) for n in nodes))}
    counts = dict(_sql(tables, "SELECT model, nodes FROM models"))
    assert counts == {m: len(nodes) + nested.get(m, 0) for m, nodes in programs.items()}


def test_cross_model_query_lines_that_make_the_most_nodes(tables: Path) -> None:
    # Every frame of every node's stack, counted per (file, line): which source lines make most nodes
    # (main graphs: torch's model.json keeps subgraph nodes inside their parent node).
    got = _sql(
        tables,
        "SELECT f.file, f.line, count(*) AS n FROM nodes JOIN frames f USING (model, trace) "
        "WHERE nodes.name NOT LIKE '%/%' GROUP BY ALL ORDER BY n DESC, f.file, f.line",
    )
    want: Counter[tuple[str, int]] = Counter()
    for nodes in _torch_programs().values():
        for n in nodes:
            text = n.get("metadata", {}).get("stack_trace") or ""
            want.update((f, int(line)) for f, line in re.findall(r'File "([^"]+)", line (\d+)', text))
    assert {(f, line): n for f, line, n in got} == dict(want)
    assert got[0][2] == max(want.values())


def test_traces_render_torchs_strings_and_modules_join(tables: Path) -> None:
    programs = _torch_programs()
    texts = {
        (m, n["name"]): n["metadata"]["stack_trace"]
        for m, nodes in programs.items()
        for n in nodes
        if n.get("metadata", {}).get("stack_trace")
    }
    rows = _sql(
        tables,
        "SELECT n.model, n.name, t.text FROM nodes n JOIN traces t USING (model, trace) WHERE n.name NOT LIKE '%/%'",
    )
    assert {(m, name): text for m, name, text in rows} == texts
    paths = _sql(
        tables,
        "SELECT n.model, n.name, m.path FROM nodes n JOIN modules m ON n.model = m.model AND n.module = m.module",
    )
    for m, name, path in paths:
        theirs = next(x for x in programs[m] if x["name"] == name)["metadata"]["nn_module_stack"]
        assert f",{path}," in theirs


def test_export_replaces_tables_of_version_1_only_with_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The 1.0 layout: one file per table for every model (what export wrote before the dataset).
    old = tmp_path / "tables"
    old.mkdir()
    (old / "nodes.parquet").write_bytes(b"PAR1")
    assert main(["export", str(PT2S[0]), "-o", str(old)]) == 2
    err = capsys.readouterr().err
    assert "tables of version 1.0" in err
    assert "pass -f/--force" in err
    assert main(["export", str(PT2S[0]), "-o", str(old), "-f"]) == 0
    assert not (old / "nodes.parquet").exists()
    assert _sql(old, "SELECT count(*) FROM models") == [(1,)]
