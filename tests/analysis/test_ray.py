"""The zoo job on Ray (local mode, 2 CPUs, a capped object store): the same files and rows as the local
pool's, read back by DuckDB; incremental runs; failures. Ray is the ``ray`` extra, which ``make test``
installs."""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.analysis.test_zoo import PT2S, _all_rows, _files, _sql
from tracepack.analysis.dataset import COLUMNS
from tracepack.analysis.zoo import export_tables
from tracepack.cli import main

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    ray = pytest.importorskip("ray")

#: Ray's object store capped for the tests (the machine is shared; the job passes Parquet bytes through it).
OBJECT_STORE = 128 << 20


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ray.init(
            num_cpus=2,
            object_store_memory=OBJECT_STORE,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture
def zoo(tmp_path: Path) -> list[str]:
    folder = tmp_path / "zoo"
    folder.mkdir()
    out = []
    for path in PT2S:
        shutil.copyfile(path, folder / path.name)
        out.append(str(folder / path.name))
    (folder / "bad.pt2").write_bytes(b"junk")
    return out


@pytest.mark.filterwarnings("ignore")
def test_ray_writes_the_local_pools_files_and_rows(local_ray: Any, zoo: list[str], tmp_path: Path) -> None:
    bad = str(Path(zoo[0]).with_name("bad.pt2"))
    by_ray = export_tables([*zoo, bad], tmp_path / "ray", engine="ray")
    by_pool = export_tables([*zoo, bad], tmp_path / "pool", jobs=2)
    assert (by_ray.converted, by_ray.unchanged) == (by_pool.converted, by_pool.unchanged) == (len(zoo), 0)
    assert [o.model for o in by_ray.failed] == [o.model for o in by_pool.failed] == [bad]
    assert by_ray.failed[0].error == by_pool.failed[0].error
    assert set(_files(tmp_path / "ray")) == set(_files(tmp_path / "pool"))  # the same files
    ray_rows, pool_rows = _all_rows(tmp_path / "ray"), _all_rows(tmp_path / "pool")
    assert ray_rows == pool_rows  # row for row, every table
    assert sum(len(rows) for rows in ray_rows.values()) > 1000
    assert by_ray.rows == by_pool.rows == {name: len(ray_rows[name]) for name in COLUMNS}


@pytest.mark.filterwarnings("ignore")
def test_ray_runs_are_incremental_and_the_cli_takes_engine_ray(
    local_ray: Any, zoo: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tables"
    assert main(["export", *zoo[:-1], "-o", str(out), "--engine", "ray"]) == 0
    assert f"({len(zoo) - 1} converted, 0 unchanged, 0 dropped)" in capsys.readouterr().out
    before = _files(out)
    assert main(["export", *zoo, "-o", str(out), "--engine", "ray"]) == 0
    assert f"(1 converted, {len(zoo) - 1} unchanged, 0 dropped)" in capsys.readouterr().out
    after = _files(out)
    assert {k: v for k, v in after.items() if k in before} == before
    assert len(after) == len(before) + len(COLUMNS)
    assert _sql(out, "SELECT count(*) FROM models") == [(len(zoo),)]
