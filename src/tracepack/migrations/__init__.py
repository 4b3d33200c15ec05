"""Migrations between released schema versions.

One module per step (``v1_0_to_v1_1.py``, ...), each converting the typed
model of one version into the next (``upgrade``) and, where no information
is lost, back (``downgrade``). :data:`STEPS` registers them in one place;
:func:`upgrade` and :func:`downgrade` chain them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracepack.errors import VersionError
from tracepack.migrations import v1_0_to_v1_1

__all__ = ["STEPS", "downgrade", "upgrade"]

#: ``(from, to) -> (upgrade, downgrade)``, in release order.
STEPS: dict[tuple[tuple[int, int], tuple[int, int]], tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    (v1_0_to_v1_1.FROM, v1_0_to_v1_1.TO): (v1_0_to_v1_1.upgrade, v1_0_to_v1_1.downgrade),
}


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
