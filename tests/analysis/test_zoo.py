"""The zoo job and its dataset: incremental runs, drops, failures, crashes, versions, readers.

References: torch's own ``model.json`` inside each ``.pt2`` (read with zipfile and json, not tracepack),
the files on disk (their names, inodes and sizes), DuckDB, pyarrow, pandas and Polars reading the
folder, and a clean export for the rows a killed run must come back to.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.ux.helpers import TORCH_DATA
from tracepack.analysis import pool
from tracepack.analysis.dataset import COLUMNS, LOCK, METADATA, TABLES_VERSION, Dataset, part_key, read_table
from tracepack.analysis.job import Options, Task, run_task
from tracepack.analysis.zoo import export_tables
from tracepack.cli import main

CORPUS = TORCH_DATA / "corpus"
PT2S = sorted(CORPUS.glob("*.pt2"))


def _sql(folder: Path, query: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect()
    for name in COLUMNS:
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{folder / name / '*.parquet'}')")
    return con.execute(query).fetchall()


def _all_rows(folder: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {name: sorted(_sql(folder, f"SELECT * FROM {name}"), key=repr) for name in COLUMNS}


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    """Every data file: (inode, mtime) by path."""
    return {
        str(p.relative_to(folder)): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in folder.rglob("*.parquet")
        if not p.name.startswith((".", "_"))
    }


def _zoo(tmp_path: Path, n: int = len(PT2S)) -> list[Path]:
    zoo = tmp_path / "zoo"
    zoo.mkdir(exist_ok=True)
    out = []
    for path in PT2S[:n]:
        shutil.copyfile(path, zoo / path.name)
        out.append(zoo / path.name)
    return out


def _torch_ops(path: Path) -> Counter[str]:
    """The ops of a .pt2's main graph, from the model.json torch wrote (subgraphs aside)."""
    with zipfile.ZipFile(path) as z:
        member = next(n for n in z.namelist() if "/models/" in n and n.endswith(".json"))
        nodes = json.loads(z.read(member))["graph_module"]["graph"]["nodes"]
    return Counter(n["target"] for n in nodes)


def test_every_core_then_nothing_to_do_then_one_model_more(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = _zoo(tmp_path)
    out = tmp_path / "tables"
    assert main(["export", *map(str, inputs[:-1]), "-o", str(out), "-j", "2"]) == 0
    assert f"({len(inputs) - 1} converted, 0 unchanged, 0 dropped)" in capsys.readouterr().out
    # the rows are torch's: every main-graph node of every model.json, with its op
    got = _sql(out, "SELECT model, op, count(*) FROM nodes WHERE name NOT LIKE '%/%' GROUP BY ALL")
    assert {(m, op): n for m, op, n in got} == {(str(p), op): n for p in inputs[:-1] for op, n in _torch_ops(p).items()}
    programs = dict(_sql(out, "SELECT model, program FROM models"))
    assert programs == {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in inputs[:-1]}
    before, rows = _files(out), _all_rows(out)
    assert len(before) == len(COLUMNS) * (len(inputs) - 1)  # one file per program and table

    assert main(["export", *map(str, inputs[:-1]), "-o", str(out), "-j", "2"]) == 0
    assert f"(0 converted, {len(inputs) - 1} unchanged, 0 dropped)" in capsys.readouterr().out
    assert _files(out) == before  # not one file rewritten
    assert _all_rows(out) == rows

    assert main(["export", *map(str, inputs), "-o", str(out)]) == 0
    assert f"(1 converted, {len(inputs) - 1} unchanged, 0 dropped)" in capsys.readouterr().out
    after = _files(out)
    assert {k: v for k, v in after.items() if k in before} == before
    key = part_key(str(inputs[-1]), hashlib.sha256(inputs[-1].read_bytes()).hexdigest())
    assert set(after) - set(before) == {f"{name}/{key}.parquet" for name in COLUMNS}


def test_a_changed_file_replaces_its_program_and_drop_and_prune_remove(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = _zoo(tmp_path, 3)
    out = tmp_path / "tables"
    assert main(["export", *map(str, inputs), "-o", str(out)]) == 0
    shutil.copyfile(PT2S[-1], inputs[0])  # same name, other content
    assert main(["export", *map(str, inputs), "-o", str(out)]) == 0
    assert "(1 converted, 2 unchanged, 0 dropped)" in capsys.readouterr().out
    assert _sql(out, f"SELECT count(*) FROM models WHERE model = '{inputs[0]}'") == [(1,)]
    assert _sql(out, f"SELECT DISTINCT program FROM nodes WHERE model = '{inputs[0]}'") == [
        (hashlib.sha256(PT2S[-1].read_bytes()).hexdigest(),)
    ]
    assert len(_files(out)) == 3 * len(COLUMNS)  # the old program's files are gone

    assert main(["export", "-o", str(out), "--drop", str(inputs[1])]) == 0
    assert "(0 converted, 0 unchanged, 1 dropped)" in capsys.readouterr().out
    assert sorted(m for (m,) in _sql(out, "SELECT model FROM models")) == sorted(map(str, [inputs[0], inputs[2]]))
    assert _sql(out, f"SELECT count(*) FROM nodes WHERE model = '{inputs[1]}'") == [(0,)]
    assert len(_files(out)) == 2 * len(COLUMNS)

    assert main(["export", "-o", str(out), "--drop", str(inputs[1])[:-1]]) == 2
    err = capsys.readouterr().err
    assert "no model" in err
    assert f"did you mean '{inputs[0]}'" in err or f"did you mean '{inputs[2]}'" in err

    assert main(["export", str(inputs[2]), "-o", str(out), "--prune"]) == 0
    assert "(0 converted, 1 unchanged, 1 dropped)" in capsys.readouterr().out
    assert _sql(out, "SELECT model FROM models") == [(str(inputs[2]),)]


def test_failing_inputs_are_one_line_each_and_the_rest_go_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = _zoo(tmp_path, 2)
    junk = tmp_path / "zoo" / "junk.pt2"
    junk.write_bytes(b"PK\x03\x04 not really a zip")
    folder = tmp_path / "zoo" / "folder.pt2"
    folder.mkdir()
    out = tmp_path / "tables"
    assert main(["export", str(junk), *map(str, inputs), str(folder), "-o", str(out), "-j", "2"]) == 3
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 2
    assert all(line.startswith("tracepack: ") for line in lines)
    assert {line.split(":")[1].strip() for line in lines} == {str(junk), str(folder)}
    assert "(2 converted, 0 unchanged, 0 dropped, 2 failed)" in captured.out
    assert sorted(m for (m,) in _sql(out, "SELECT model FROM models")) == sorted(map(str, inputs))


def test_convert_and_pack_of_many_inputs_go_on_past_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = _zoo(tmp_path, 3)
    bad = tmp_path / "zoo" / "bad.pt2"
    bad.write_bytes(b"junk")
    for command, suffix in (("convert", ".tpk"), ("pack", ".pt2")):
        out = tmp_path / command
        out.mkdir()
        assert main([command, str(bad), *map(str, inputs), str(out), "-j", "2", "--json"]) == 3
        captured = capsys.readouterr()
        assert captured.err.count("\n") == 1
        assert str(bad) in captured.err
        written = json.loads(captured.out)
        assert [Path(r["input"]).name for r in written] == [p.name for p in inputs]  # input order
        for r in written:
            assert Path(r["output"]).stat().st_size == r["bytes"]
            assert Path(r["output"]).suffix == suffix
    import tracepack

    for p in inputs:  # what the pool wrote reads back as what one convert writes
        assert tracepack.load(tmp_path / "convert" / (p.stem + ".tpk")) == tracepack.load(p)


def _die_on_bad(item: int) -> int:
    if item == 3:
        os._exit(9)
    return item * 2


def test_a_worker_that_dies_fails_only_its_input() -> None:
    results = dict(pool.run(_die_on_bad, range(8), jobs=2, recycle=2))
    assert isinstance(results.pop(3), pool.WorkerDied)
    assert results == {i: i * 2 for i in range(8) if i != 3}


def test_pool_workers_are_recycled_and_each_result_comes_once() -> None:
    got = list(pool.run(_pid_of, range(12), jobs=2, recycle=3))
    assert sorted(i for i, _ in got) == list(range(12))
    assert len({pid for _, pid in got}) >= 4  # 12 inputs, 3 per worker


def _pid_of(_: int) -> int:
    return os.getpid()


def test_a_killed_run_never_leaves_a_dataset_a_rerun_trusts(tmp_path: Path) -> None:
    """kill -9 an export at several moments; each rerun must give exactly the clean export's rows."""
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    inputs = []
    for i in range(12):  # 12 models: copies of the corpus under their own names
        dst = zoo / f"m{i:02d}.pt2"
        shutil.copyfile(PT2S[i % len(PT2S)], dst)
        inputs.append(str(dst))
    clean = tmp_path / "clean"
    assert main(["export", *inputs, "-o", str(clean), "-j", "1"]) == 0
    want = _all_rows(clean)
    for delay in (0.4, 0.9, 1.5):
        out = tmp_path / f"killed-{delay}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "tracepack", "export", *inputs, "-o", str(out), "-j", "1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if out.exists():
            ds = Dataset.open(out)
            committed = set(ds.parts())
            for name in COLUMNS:  # no file of any table is half-written: each reads whole
                for p in (out / name).glob("*.parquet"):
                    duckdb.sql(f"SELECT count(*) FROM '{p}'").fetchall()
            assert all((out / "models" / f"{k}.parquet").exists() for k in committed)
        assert main(["export", *inputs, "-o", str(out), "-j", "2"]) == 0
        assert _all_rows(out) == want, delay


def test_read_table_gives_the_committed_programs_in_this_versions_columns(tmp_path: Path) -> None:
    inputs = _zoo(tmp_path, 2)
    out = tmp_path / "tables"
    export_tables(list(map(str, inputs)), out, jobs=1)
    nodes = read_table(out, "nodes")
    assert nodes.column_names == [c for c, _ in COLUMNS["nodes"]]
    assert nodes.num_rows == _sql(out, "SELECT count(*) FROM nodes")[0][0]
    # an orphan file (a program whose models file never came) is not read, and the next run removes it
    orphan = out / "nodes" / ("0" * 32 + ".parquet")
    shutil.copyfile(next((out / "nodes").glob("*.parquet")), orphan)
    assert read_table(out, "nodes").num_rows == nodes.num_rows
    summary = export_tables(list(map(str, inputs)), out, jobs=1)
    assert (summary.recovered, summary.unchanged) == (1, 2)
    assert not orphan.exists()


def _set_version(folder: Path, version: str) -> None:
    meta = json.loads((folder / METADATA).read_text())
    meta["version"] = version
    (folder / METADATA).write_text(json.dumps(meta))


def test_versions_a_reader_and_a_writer_accept_and_refuse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = _zoo(tmp_path, 2)
    out = tmp_path / "tables"
    assert main(["export", str(inputs[0]), "-o", str(out)]) == 0
    assert json.loads((out / METADATA).read_text())["version"] == "2.0" == f"{TABLES_VERSION[0]}.{TABLES_VERSION[1]}"
    import pyarrow.parquet as pq

    for p in out.rglob("*.parquet"):
        assert pq.read_schema(p).metadata[b"tracepack.tables_version"] == b"2.0"
    # a newer minor: readable (its extra column left alone), not writable
    _set_version(out, "2.1")
    assert read_table(out, "models").num_rows == 1
    assert main(["export", str(inputs[1]), "-o", str(out)]) == 2
    assert "tables version 2.1 was written by a newer tracepack" in capsys.readouterr().err
    # another major: refused by both, naming both versions
    _set_version(out, "3.0")
    with pytest.raises(Exception, match=r"tables version 3.0 is newer than this tracepack's 2.0"):
        read_table(out, "models")
    assert main(["export", str(inputs[1]), "-o", str(out)]) == 2
    assert "upgrade tracepack" in capsys.readouterr().err
    assert main(["export", str(inputs[1]), "-o", str(out), "-f"]) == 2  # -f does not replace a newer major's
    # an older major: refused, and -f replaces it
    _set_version(out, "1.5")
    assert main(["export", str(inputs[1]), "-o", str(out)]) == 2
    assert "export it again with -f" in capsys.readouterr().err
    assert main(["export", str(inputs[1]), "-o", str(out), "-f"]) == 0
    assert _sql(out, "SELECT model FROM models") == [(str(inputs[1]),)]
    assert json.loads((out / METADATA).read_text())["version"] == "2.0"


def test_one_writer_at_a_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = _zoo(tmp_path, 1)
    out = tmp_path / "tables"
    assert main(["export", str(inputs[0]), "-o", str(out)]) == 0
    fd = os.open(out / LOCK, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert main(["export", str(inputs[0]), "-o", str(out)]) == 2
        assert "another tracepack export is writing this dataset" in capsys.readouterr().err
    finally:
        os.close(fd)


def test_globs_urls_and_files_from(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = _zoo(tmp_path, 3)
    listing = tmp_path / "list.txt"
    listing.write_text(f"{inputs[2]}\n\n")
    out = tmp_path / "tables"
    pattern = str(tmp_path / "zoo" / "c*.pt2")
    url = f"file://{inputs[0]}"  # a URL fsspec reads: its own model name, the same program
    assert main(["export", pattern, url, "--files-from", str(listing), "-o", str(out), "-j", "2"]) == 0
    models = sorted(m for (m,) in _sql(out, "SELECT model FROM models"))
    globbed = sorted(str(p) for p in (tmp_path / "zoo").glob("c*.pt2"))
    assert len(globbed) == 2
    assert models == sorted([*globbed, str(inputs[2]), url])
    assert len({p for (p,) in _sql(out, "SELECT program FROM models")}) == 3
    assert main(["export", str(tmp_path / "zoo" / "nothing*.pt2"), "-o", str(out)]) == 2
    assert "matches no file" in capsys.readouterr().err


def test_the_same_rows_in_duckdb_pyarrow_pandas_and_polars(tmp_path: Path) -> None:
    import pandas
    import polars
    import pyarrow.dataset

    inputs = _zoo(tmp_path, 4)
    out = tmp_path / "tables"
    export_tables(list(map(str, inputs)), out)
    for name in COLUMNS:
        cols = [c for c, _ in COLUMNS[name]]
        want = sorted(_sql(out, f"SELECT {', '.join(cols)} FROM {name}"), key=repr)
        frames = {
            "pyarrow": pyarrow.dataset.dataset(out / name).to_table().to_pylist(),
            "pandas": pandas.read_parquet(out / name).astype(object).to_dict("records"),
            "polars": polars.read_parquet(str(out / name / "*.parquet")).to_dicts(),
        }
        for reader, records in frames.items():
            rows = [tuple(None if _isnan(r[c]) else r[c] for c in cols) for r in records]
            assert sorted(rows, key=repr) == want, (name, reader)


def _isnan(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def test_the_workers_function_is_the_whole_job_for_one_input(tmp_path: Path) -> None:
    out = tmp_path / "tables"
    Dataset.open(out, create=True)
    options = Options(str(out))
    first = run_task(Task(str(PT2S[0]), "m"), options)
    assert first.status == "converted"
    assert first.rows["models"] == 1
    assert first.max_rss_kib is not None
    again = run_task(Task(str(PT2S[0]), "m", known=first.program), options)
    assert (again.status, again.rows) == ("unchanged", {})
    assert again.seconds < first.seconds


def test_without_ray_engine_ray_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = _zoo(tmp_path, 1)
    for name in [m for m in sys.modules if m == "ray" or m.startswith("ray.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails, as where it is not installed
    out = tmp_path / "tables"
    assert main(["export", str(inputs[0]), "-o", str(out), "--engine", "ray"]) == 2
    err = capsys.readouterr().err
    assert err == "tracepack: export: --engine ray needs Ray Data: pip install 'tracepack[ray]'\n"
    assert not out.exists()  # nothing done
    assert main(["export", str(inputs[0]), "-o", str(out), "--address", "auto"]) == 2
    assert "--address is for --engine ray" in capsys.readouterr().err
    assert main(["export", str(inputs[0]), "-o", str(out)]) == 0  # the local engine needs no Ray


def test_damaged_metadata_is_one_line_and_a_damaged_index_is_rebuilt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The index is a cache: nested past the stack, it is rebuilt from the files (the same rows come back);
    the tables' metadata is not: it is refused in one line with the byte offset. Both ran out of recursion
    (internal error) before."""
    inputs = _zoo(tmp_path, 2)
    out = tmp_path / "tables"
    assert main(["export", str(inputs[0]), "-o", str(out)]) == 0
    rows = _all_rows(out)
    index = out / "_tracepack_index.json"
    assert index.is_file()
    index.write_text("[" * 100_000 + "]" * 100_000)
    capsys.readouterr()
    assert main(["export", str(inputs[0]), "-o", str(out)]) == 0
    assert "1 unchanged" in capsys.readouterr().out
    assert _all_rows(out) == rows
    (out / METADATA).write_text('{"a": ' * 100_000 + "1" + "}" * 100_000)
    assert main(["export", str(inputs[1]), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"tracepack: {out / METADATA}: byte 6000: nested more than 1,000 levels deep (hostile or damaged input?); "
        "expected shallower nesting, or raise the max_depth budget (command line: --limit max_depth=N; Python: "
        "limits.raised(max_depth=...))\n"
    )
