"""The zoo job on Ray: Ray Data over the inputs, tracepack in Ray's workers, the files written by a Ray Datasink.

``tracepack export --engine ray [--address ADDR]`` and ``export_tables(..., engine="ray")``
(:mod:`tracepack.analysis.zoo`) come here after the driver has opened the dataset, taken its lock and
decided what each input's model already holds. The job is::

    ray.data.from_items(tasks)                      # one row per input: source, model, known hash
      .map(convert_row)                             # in a worker: hash, skip or make the tables
      .write_datasink(TablesDatasink(output))       # in a worker: each program's files, models last

so the inputs are read where the workers run (each node reads the paths or URLs itself: a shared
folder, or anything fsspec reads, ``s3://`` and the like) and Ray writes the dataset, the same
files :func:`tracepack.analysis.job.run_task` writes in the local pool (the same functions make
them). The output folder must be one every node sees (a shared file system). Every node needs
tracepack (``pip install 'tracepack[ray]'``, or a ``runtime_env``).

Ray is optional (the ``ray`` extra): nothing imports it until a Ray job runs, and without it
``--engine ray`` says in one line how to install it.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from typing import Any

from tracepack.analysis.job import Options, Outcome, Task, is_url
from tracepack.errors import UsageError

__all__ = ["INSTALL", "require_ray", "run_ray"]

INSTALL = "pip install 'tracepack[ray]'"
_TABLE_COLUMNS = ("nodes", "traces", "frames", "modules", "models")


def require_ray() -> Any:
    """The ``ray`` module with Ray Data, or a one-line UsageError saying how to install it."""
    try:
        ray = importlib.import_module("ray")
        importlib.import_module("ray.data")
    except ImportError:
        raise UsageError(f"--engine ray needs Ray Data: {INSTALL}", where="export") from None
    return ray


def convert_row(row: dict[str, Any], options: Options) -> dict[str, Any]:
    """One input, in a Ray worker: its outcome (JSON) and, when converted, each table's Parquet bytes."""
    from tracepack.analysis.dataset import parquet_bytes
    from tracepack.analysis.job import convert

    task = Task(str(row["source"]), str(row["model"]), row.get("known") or None)
    outcome, tables = convert(task, options)
    out: dict[str, Any] = {"outcome": json.dumps(asdict(outcome))}
    for name in _TABLE_COLUMNS:
        out[name] = b"" if tables is None else parquet_bytes(tables[name])
    return out


def _write_rows(rows: Iterable[dict[str, Any]], options: Options) -> list[str]:
    """Write each converted input's files (models last); the outcomes, as JSON."""
    from pathlib import Path

    from tracepack.analysis.dataset import WRITE_ORDER
    from tracepack.io.files import write_atomic

    root = Path(options.output)
    done = []
    for row in rows:
        outcome = Outcome(**json.loads(row["outcome"]))
        if outcome.status == "converted" and outcome.key is not None:
            try:
                for name in WRITE_ORDER:
                    (root / name).mkdir(exist_ok=True)
                    write_atomic(root / name / f"{outcome.key}.parquet", bytes(row[name]), durable=options.durable)
            except Exception as exc:  # one line, the others go on
                outcome.status, outcome.error = "failed", f"{options.output}: cannot write: {exc}"
        done.append(json.dumps(asdict(outcome)))
    return done


def _datasink(options: Options) -> Any:
    """A Ray Datasink that writes the programs' files where its write tasks run."""
    datasink_base = importlib.import_module("ray.data").Datasink

    class TablesDatasink(datasink_base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            self.outcomes: list[str] = []

        def write(self, blocks: Iterable[Any], ctx: Any) -> list[str]:
            out: list[str] = []
            for block in blocks:
                out += _write_rows(block.to_pylist(), options)
            return out

        def on_write_complete(self, write_result: Any) -> None:
            for returned in write_result.write_returns:
                self.outcomes += returned

        def get_name(self) -> str:
            return "TracepackTables"

    return TablesDatasink()


def run_ray(
    tasks: list[Task], options: Options, *, address: str | None = None, init: dict[str, Any] | None = None
) -> Iterator[Outcome]:
    """Run ``tasks`` as a Ray Data job (connecting to ``address``, or starting a local Ray when None and
    Ray is not running yet); the outcomes when it is done."""
    ray = require_ray()
    started = False
    if not ray.is_initialized():
        kwargs = {"address": address, "log_to_driver": False, **(init or {})}
        try:
            ray.init(**kwargs)
        except ConnectionError as exc:
            raise UsageError(f"cannot reach the Ray cluster: {exc}", where="--address") from None
        started = True
    try:
        if not tasks:
            return
        # local paths made absolute: a worker's working folder is not the driver's
        items = [
            {"source": t.source if is_url(t.source) else os.path.abspath(t.source), "model": t.model}
            | {"known": t.known or ""}
            for t in tasks
        ]
        blocks = min(len(items), 1024)
        ds = ray.data.from_items(items, override_num_blocks=blocks)
        ds = ds.map(convert_row, fn_kwargs={"options": options})
        sink = _datasink(options)
        ds.write_datasink(sink)
        for text in sink.outcomes:
            yield Outcome(**json.loads(text))
    finally:
        if started:
            ray.shutdown()
