"""A pytest plugin that puts tracepack in the loop of PyTorch's own export tests.

Loaded with ``-p dropin_plugin`` (this folder on ``PYTHONPATH``) before the tests are collected, so
the names test modules import (``from torch.export import load, save``) are the patched ones:

* ``torch.export.save(ep, f, ...)`` writes what torch writes, then ``tracepack pack`` of it
  (:func:`tracepack.torch.pt2.pack_pt2`) to ``f``;
* ``torch.export.load(f, ...)`` is ``tracepack.torch.load(f, ...)``.

``TRACEPACK_DROPIN`` chooses: ``off`` (torch as it is: the baseline), ``on`` (the default: load
refuses what it must not run, as users get it) or ``trust`` (``trust_pickles=True``: loads everything
torch loads). ``TRACEPACK_DROPIN_REPORT`` names a JSON file that gets every test's outcome (a
failure whose error is tracepack's ``UnsafePickleError`` is ``refused``);
``TRACEPACK_DROPIN_SAMPLE=test_export.py:10`` keeps every 10th test of that file (in collection order).
``scripts/torch/dropin_suite.py`` runs the passes and compares them.
"""

from __future__ import annotations

import functools
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

MODE = os.environ.get("TRACEPACK_DROPIN", "on")
if MODE not in ("off", "on", "trust"):
    raise pytest.UsageError(f"TRACEPACK_DROPIN={MODE!r}: expected off, on or trust")

#: Calls that went through tracepack in this session (a pass that patched nothing measured nothing).
CALLS = {"save": 0, "load": 0}


def _patch() -> None:
    import torch

    import tracepack.torch as tt
    from tracepack.torch import pt2

    torch_save = torch.export.save

    @functools.wraps(torch_save)
    def save(ep: Any, f: Any, **kwargs: Any) -> None:
        CALLS["save"] += 1
        if isinstance(f, (str, os.PathLike)):
            # torch names the archive's top folder after the file (a stream gets "archive"): write
            # where torch writes, then pack that file
            torch_save(ep, f, **kwargs)
            Path(f).write_bytes(pt2.pack_pt2(Path(f).read_bytes(), source=str(f)))
            return
        buf = io.BytesIO()
        torch_save(ep, buf, **kwargs)
        f.write(pt2.pack_pt2(buf.getvalue(), source="<torch.export.save>"))

    @functools.wraps(torch.export.load)
    def load(f: Any, **kwargs: Any) -> Any:
        CALLS["load"] += 1
        return tt.load(f, trust_pickles=MODE == "trust", **kwargs)

    torch.export.save = save
    torch.export.load = load


if MODE != "off":
    _patch()


_OUTCOMES: dict[str, str] = {}


def _sample() -> dict[str, int]:
    out: dict[str, int] = {}
    for part in filter(None, os.environ.get("TRACEPACK_DROPIN_SAMPLE", "").split(",")):
        name, _, every = part.partition(":")
        out[name] = int(every or "1")
    return out


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    sample = _sample()
    if not sample:
        return
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    seen: dict[str, int] = {}
    for item in items:
        name = Path(str(item.fspath)).name
        every = sample.get(name)
        if every is None:
            kept.append(item)
            continue
        index = seen[name] = seen.get(name, -1) + 1
        (kept if index % every == 0 else dropped).append(item)
    items[:] = kept
    config.hook.pytest_deselected(items=dropped)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        outcome = report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        elif report.failed and "UnsafePickleError" in report.longreprtext:
            outcome = "refused"
        _OUTCOMES[report.nodeid] = outcome


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = os.environ.get("TRACEPACK_DROPIN_REPORT")
    if target:
        Path(target).write_text(json.dumps({"mode": MODE, "calls": CALLS, "outcomes": _OUTCOMES}, indent=1))
