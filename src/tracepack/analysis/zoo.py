"""The zoo job: the tables of many programs into an incremental dataset, on every core or on Ray.

::

    from tracepack.analysis.zoo import export_tables

    summary = export_tables(["zoo/*.pt2"], "tables", jobs=8)            # this machine, every core
    summary = export_tables(["s3://hub/zoo/*.pt2"], "tables", engine="ray", address="auto")
    summary.converted, summary.unchanged, summary.dropped, summary.failed

A run (``tracepack export --format parquet``):

1. opens the dataset (:mod:`tracepack.analysis.dataset`; made if missing), takes its lock and removes
   the files of programs a stopped run left uncommitted;
2. drops what it is told to (``drop``: model names; ``prune``: every model not among the inputs);
3. hands every input to a worker, with the content hash the dataset holds for its model name: a
   worker hashes the input and, when the hash is the same, does nothing else; otherwise it makes the
   program's tables and writes its files (the program's previous files, under the same model name,
   are dropped once the new ones are committed);
4. records the index. Failing inputs are reported one line each, and the rest go on.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from tracepack.analysis.dataset import COLUMNS, Dataset, Part
from tracepack.analysis.job import Options, Outcome, Task, expand_inputs, is_url
from tracepack.errors import UsageError, did_you_mean

__all__ = ["ENGINES", "Summary", "export_tables", "model_name"]

ENGINES = ("local", "ray")


@dataclass
class Summary:
    """What a run did; ``rows`` counts the whole dataset's rows per table after it."""

    output: str
    models: int = 0
    converted: int = 0
    unchanged: int = 0
    dropped: int = 0
    failed: list[Outcome] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    recovered: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "folder": self.output,
            "models": self.models,
            "converted": self.converted,
            "unchanged": self.unchanged,
            "dropped": self.dropped,
            "failed": [{"model": o.model, "error": o.error} for o in self.failed],
            "tables": {k: {"rows": n} for k, n in self.rows.items()},
        }


def model_name(source: str) -> str:
    """The name a program's rows carry: the path or URL as given."""
    return source


def _tasks(sources: Sequence[str], parts: dict[str, Part]) -> list[Task]:
    by_model = {p.model: p.program for p in parts.values()}
    tasks = []
    seen: set[str] = set()
    for source in sources:
        if source == "-":
            raise UsageError("- (standard input) cannot be exported; give files", where="export")
        model = model_name(source)
        if model in seen:
            raise UsageError(f"model {model!r} is given twice", where="export")
        seen.add(model)
        tasks.append(Task(source, model, by_model.get(model)))
    return tasks


def _limits() -> dict[str, int]:
    from tracepack.io import limits

    return dataclasses.asdict(limits.current())


def export_tables(
    inputs: Iterable[str],
    output: str | os.PathLike[str],
    *,
    jobs: int | None = None,
    engine: str = "local",
    address: str | None = None,
    drop: Sequence[str] = (),
    prune: bool = False,
    replace: bool = False,
    durable: bool = False,
    zstd_dict: str | None = None,
    progress: Callable[[Iterable[Outcome], int], Iterable[Outcome]] | None = None,
    on_outcome: Callable[[Outcome], None] | None = None,
    ray_options: dict[str, Any] | None = None,
) -> Summary:
    """Bring the dataset at ``output`` up to date with ``inputs`` (paths, URLs, glob patterns).

    ``jobs``: worker processes of the local engine (default every core); ``engine="ray"`` runs the
    inputs as a Ray Data job instead (``address``: the cluster, as ``ray.init`` takes it; None starts a
    local one; ``ray_options``: more ``ray.init`` arguments). ``drop``: model names to remove; ``prune``:
    remove every model not among ``inputs``; ``replace``: start afresh (every program converted again,
    and 1.0 tables replaced). ``progress`` wraps the stream of outcomes (a progress bar);
    ``on_outcome`` sees each as it arrives."""
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}{did_you_mean(engine, ENGINES)}", where="--engine")
    if engine == "ray":
        from tracepack.analysis.ray_engine import require_ray

        require_ray()
    sources = expand_inputs(list(inputs))
    out_text = os.fspath(output)
    if is_url(out_text):
        raise UsageError("the dataset is written to a folder", source=out_text, expected="a local or shared folder")
    dataset = Dataset.open(output, create=True, replace=replace, durable=durable)
    summary = Summary(out_text)
    with dataset.locked():
        summary.recovered = len(dataset.recover())
        parts = dataset.parts()
        if replace and parts:
            dataset.drop(parts)
            parts = {}
        dataset.upgrade_metadata(durable=durable)
        names = {p.model: k for k, p in parts.items()}
        unknown = [m for m in drop if m not in names]
        if unknown:
            raise UsageError(
                f"no model {unknown[0]!r} in the dataset{did_you_mean(unknown[0], list(names))}", where="--drop"
            )
        tasks = _tasks(sources, parts)
        gone = {names[m] for m in drop}
        if prune:
            wanted = {t.model for t in tasks}
            gone |= {k for k, p in parts.items() if p.model not in wanted}
        summary.dropped = dataset.drop(sorted(gone))
        for key in gone:
            parts.pop(key, None)
        options = Options(str(Path(output).resolve()), durable=durable, zstd_dict=zstd_dict, limits=_limits())
        if engine == "ray":
            from tracepack.analysis.ray_engine import run_ray

            stream: Iterable[Outcome] = run_ray(tasks, options, address=address, init=ray_options or {})
        else:
            stream = _run_local(tasks, options, jobs)
        if progress is not None:
            stream = progress(stream, len(tasks))
        by_model = {p.model: k for k, p in parts.items()}
        try:
            for outcome in stream:
                if on_outcome is not None:
                    on_outcome(outcome)
                if outcome.status == "failed":
                    summary.failed.append(outcome)
                    continue
                assert outcome.key is not None
                assert outcome.program is not None
                if outcome.status == "unchanged":
                    summary.unchanged += 1
                    continue
                summary.converted += 1
                old = by_model.get(outcome.model)
                if old is not None and old != outcome.key:  # the model's file changed: its old program goes
                    dataset.drop([old])
                    parts.pop(old, None)
                parts[outcome.key] = Part(outcome.key, outcome.model, outcome.program, dict(outcome.rows))
                by_model[outcome.model] = outcome.key
        finally:
            dataset.save_index(parts, durable=durable)
    summary.models = len(parts)
    summary.rows = {name: sum(p.rows.get(name, 0) for p in parts.values()) for name in COLUMNS}
    return summary


def _run_local(tasks: list[Task], options: Options, jobs: int | None) -> Iterable[Outcome]:
    from tracepack.analysis import pool
    from tracepack.analysis.job import run_task

    jobs = max(1, min(pool.default_jobs() if jobs is None else jobs, len(tasks)))  # no pool for one input
    for task, result in pool.run(partial(run_task, options=options), tasks, jobs=jobs):
        if isinstance(result, pool.WorkerDied):
            yield Outcome(task.model, task.source, "failed", error=f"{task.model}: {result}")
        else:
            yield result
