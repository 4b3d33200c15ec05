"""Budgets for everything an input can amplify: one place, documented defaults, raisable by the caller.

Every reader in tracepack takes its caps from :func:`current`. The defaults are far above what real
exported graphs need and far below what would exhaust a workstation; a caller who trusts an input
raises them for a block of code::

    from tracepack.io import limits

    with limits.raised(max_decompressed=16 << 30, max_pickle_objects=100_000_000):
        doc = tracepack.load("huge.tpk")

The settings live in a :class:`contextvars.ContextVar`, so threads and asyncio tasks each see the
budget their caller set. An input over a budget raises :class:`~tracepack.errors.InputError` (a
:class:`~tracepack.errors.ContainerError`, :class:`~tracepack.errors.DecodeError` or
:class:`~tracepack.errors.LegacyFormatError`, by surface) naming the budget and how to raise it.

========================  =============  ==============================================================
budget                    default        what it caps
========================  =============  ==============================================================
max_decompressed          4 GiB          a ``.tpk`` payload after zstd; a zip member read into memory
                                         (graph, debug and JSON members; weights are streamed, never
                                         read whole)
max_ratio                 1000           decompressed / compressed size of a zstd frame or a
                                         compressed zip member, once the output passes ``ratio_floor``
ratio_floor               64 MiB         output below this size is never refused for its ratio (small
                                         documents compress very well and cost nothing)
max_pickle_objects        10,000,000     objects a data-only pickle builds, every memo reuse of a list,
                                         tuple or dict counted again with its items (what a caller
                                         walking the result would visit)
max_input                 16 GiB         bytes of one input file read into memory
max_rendered              256 MiB        characters of one rendered stack trace (``trace``, ``expand``,
                                         ``node.stack_trace``): shared frame and string rows can
                                         describe text far larger than the file
========================  =============  ==============================================================

Nesting and integer size have no knob here: JSON, MessagePack and TOML nesting is bounded by the
interpreter's recursion limit and integers in text by Python's 4,300-digit limit, both turned into
InputErrors by :mod:`tracepack.io.guard`; the data-only pickle reader has its own
``PickleLimits.max_depth`` and ``max_int_bytes``; every schema field holds at most 64 bits.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final

__all__ = ["DEFAULT", "Limits", "current", "hint", "raised", "ratio_exceeded"]


@dataclass(frozen=True, slots=True)
class Limits:
    """One set of budgets (see the module docstring for what each caps)."""

    max_decompressed: int = 4 << 30
    max_ratio: int = 1000
    ratio_floor: int = 64 << 20
    max_pickle_objects: int = 10_000_000
    max_input: int = 16 << 30
    max_rendered: int = 256 << 20

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"limit {f.name} must be a positive integer, not {value!r}")


#: The budgets in force unless a caller raises them.
DEFAULT: Final = Limits()
_CURRENT: ContextVar[Limits] = ContextVar("tracepack_limits", default=DEFAULT)


def current() -> Limits:
    """The budgets in force in this thread / task."""
    return _CURRENT.get()


@contextlib.contextmanager
def raised(**changes: int) -> Iterator[Limits]:
    """Run a block with some budgets changed (``limits.raised(max_depth=10_000)``)."""
    new = dataclasses.replace(_CURRENT.get(), **changes)
    token = _CURRENT.set(new)
    try:
        yield new
    finally:
        _CURRENT.reset(token)


def ratio_exceeded(out_size: int, in_size: int, limits: Limits | None = None) -> bool:
    """Whether ``out_size`` bytes made from ``in_size`` compressed bytes break the ratio budget."""
    lim = limits or current()
    return out_size > lim.ratio_floor and out_size > lim.max_ratio * max(in_size, 1)


def hint(name: str) -> str:
    """How to raise the budget ``name`` (the tail of an over-budget error message)."""
    return f"or raise tracepack.io.limits {name} (with limits.raised({name}=...))"
