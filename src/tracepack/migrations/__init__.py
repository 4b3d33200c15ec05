"""Migrations between released schema versions.

One module per step (``v1_0_to_v1_1.py``, ...), each converting the typed
model of one version into the next (``upgrade``) and, where no information
is lost, back (``downgrade``). :data:`STEPS` finds them by their names (so a
release adds a module and nothing else); :func:`upgrade` and :func:`downgrade`
chain them. ``tracepack schema release`` writes the module of a release that
only adds, complete (:mod:`tracepack.migrations._additive`).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable
from typing import Any

from tracepack.errors import VersionError

__all__ = ["STEPS", "downgrade", "upgrade"]

_STEP_MODULE = re.compile(r"^v(\d+)_(\d+)_to_v(\d+)_(\d+)$")


def _steps() -> dict[tuple[tuple[int, int], tuple[int, int]], tuple[Callable[[Any], Any], Callable[[Any], Any]]]:
    """Every ``vA_B_to_vC_D`` module of this package (``tracepack schema release`` writes them)."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        m = _STEP_MODULE.match(info.name)
        if m is not None:
            a, b, c, d = map(int, m.groups())
            found.append((((a, b), (c, d)), info.name))
    out = {}
    for key, name in sorted(found):
        module = importlib.import_module(f"{__name__}.{name}")
        if (tuple(module.FROM), tuple(module.TO)) != key:
            raise VersionError(f"migration {name} declares {module.FROM} -> {module.TO}, not what its name says")
        out[key] = (module.upgrade, module.downgrade)
    return out


#: ``(from, to) -> (upgrade, downgrade)``, in release order: one module per step, found by name.
STEPS: dict[tuple[tuple[int, int], tuple[int, int]], tuple[Callable[[Any], Any], Callable[[Any], Any]]] = _steps()


def upgrade(raw: Any, version: tuple[int, int], target: tuple[int, int]) -> Any:
    """Migrate a document of ``version`` up to ``target``, one registered step at a time."""
    while version != target:
        step = next(((a, b) for (a, b) in STEPS if a == version), None)
        if step is None:
            raise VersionError(f"no migration from schema {version[0]}.{version[1]} towards {target[0]}.{target[1]}")
        raw = STEPS[step][0](raw)
        version = step[1]
    return raw


def downgrade(raw: Any, version: tuple[int, int], target: tuple[int, int]) -> Any:
    """Migrate a document of ``version`` down to ``target``; refuse where information would be lost."""
    if target > version:
        raise VersionError(
            f"cannot write schema {target[0]}.{target[1]}: this build writes {version[0]}.{version[1]} "
            "and the releases before it",
            where="version",
            expected=f"a released version up to {version[0]}.{version[1]}",
        )
    while version != target:
        step = next(((a, b) for (a, b) in STEPS if b == version), None)
        if step is None:
            raise VersionError(f"no migration from schema {version[0]}.{version[1]} down to {target[0]}.{target[1]}")
        raw = STEPS[step][1](raw)
        version = step[0]
    return raw
