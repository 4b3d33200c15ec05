"""Commands over many inputs (``convert SRC... DIR``, ``pack SRC... DIR``): every core, one line per failure.

:func:`run_many` hands each ``(input, output)`` pair to a worker (:mod:`tracepack.analysis.pool`,
``-j N``, default every core), prints what each wrote as it finishes (completion order; ``--json``: one
list in input order at the end), and says in one line on standard error what went wrong with each input
that failed; the others go on, and the exit code is :data:`~tracepack.cli._common.EXIT_PARTIAL` (3).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

from tracepack.cli._common import EXIT_OK, EXIT_PARTIAL, jobs_option, print_json, progress
from tracepack.errors import TracepackError

__all__ = ["run_many"]

#: A worker's answer: ("ok", info, text) or ("failed", error line, "").
Answer = tuple[str, Any, str]


def _limits() -> dict[str, int]:
    from tracepack.io import limits

    return dataclasses.asdict(limits.current())


def _guarded(
    pair: tuple[int, str, str], fn: Callable[..., tuple[dict[str, Any], str]], args: Any, budgets: Any
) -> Answer:
    """Run ``fn(src, dst, args)`` in a worker, under the run's budgets, without bars; errors as one line."""
    from tracepack.io import limits

    _, src, dst = pair
    bars = os.environ.get("TRACEPACK_PROGRESS")
    os.environ["TRACEPACK_PROGRESS"] = "0"  # one bar: the caller's
    try:
        with limits.raised(**budgets), limits.rendering():
            info, text = fn(src, dst, args)
    except TracepackError as exc:
        return "failed", str(exc.with_source(src)), ""
    except OSError as exc:
        return "failed", f"{src}: {exc.strerror or exc}", ""
    except MemoryError:
        return "failed", f"{src}: out of memory", ""
    except Exception as exc:  # one line per input, never a traceback; the others go on
        text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
        return "failed", f"{src}: internal error: {text} (please report this)", ""
    finally:
        if bars is None:
            os.environ.pop("TRACEPACK_PROGRESS", None)
        else:
            os.environ["TRACEPACK_PROGRESS"] = bars
    return "ok", info, text


def run_many(
    pairs: list[tuple[str, str]],
    fn: Callable[[str, str, argparse.Namespace], tuple[dict[str, Any], str]],
    args: argparse.Namespace,
    *,
    desc: str,
) -> int:
    """Run ``fn(src, dst, args) -> (info, line)`` over ``pairs``; ``fn`` must be a module-level function."""
    from tracepack.analysis import pool

    work = partial(_guarded, fn=fn, args=args, budgets=_limits())
    items = [(i, src, dst) for i, (src, dst) in enumerate(pairs)]
    infos: dict[int, Any] = {}
    failed = 0
    jobs = min(jobs_option(args) or pool.default_jobs(), len(items))
    for item, answer in progress(pool.run(work, items, jobs=jobs), total=len(items), desc=desc):
        status, info, text = ("failed", f"{item[1]}: {answer}", "") if isinstance(answer, pool.WorkerDied) else answer
        if status == "failed":
            failed += 1
            print(f"tracepack: {info}", file=sys.stderr)
            continue
        infos[item[0]] = info
        if not args.json:
            print(text, flush=True)
    if args.json:
        print_json([infos[i] for i in sorted(infos)])
    return EXIT_PARTIAL if failed else EXIT_OK
