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
max_rendered              256 MiB        characters of rendered text (stack traces, module paths,
                                         ``from_node`` provenance): each one is measured before it is
                                         built (shared frame, module and string rows can describe text
                                         far larger than the file), and inside :func:`rendering` (one
                                         ``expand``, ``trace`` or other CLI command, one
                                         ``expand_archive``) all the text handed out counts against
                                         one total, so a million nodes sharing one large trace are
                                         refused too
max_depth                 1,000          levels of nesting in JSON, MessagePack and TOML input
                                         (``model.json``, ``.tpk`` payloads, schema files); real
                                         documents nest a few dozen (see :mod:`tracepack.io.guard`)
max_int_digits            4,300          digits of one integer in text (Python's own default limit;
                                         at least 640 applies); every schema field holds at most
                                         64 bits, which the decoders check after parsing
========================  =============  ==============================================================

The data-only pickle reader has its own ``PickleLimits.max_depth`` and ``max_int_bytes``.

On the command line every command takes ``--limit NAME=VALUE`` (repeatable) for the same
budgets: ``tracepack convert huge.tpk out.json --limit max_decompressed=16G --limit max_depth=5000``.
A value is a whole number, ``_`` allowed between digits, with an optional binary suffix ``K``,
``M``, ``G`` or ``T`` (x1024 each, ``KiB``/``KB`` spelled out too). :func:`parse_setting` reads one.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final

__all__ = [
    "DEFAULT",
    "NAMES",
    "Limits",
    "current",
    "hint",
    "parse_setting",
    "parse_value",
    "raised",
    "ratio_exceeded",
    "rendered",
    "rendering",
]


@dataclass(frozen=True, slots=True)
class Limits:
    """One set of budgets (see the module docstring for what each caps)."""

    max_decompressed: int = 4 << 30
    max_ratio: int = 1000
    ratio_floor: int = 64 << 20
    max_pickle_objects: int = 10_000_000
    max_input: int = 16 << 30
    max_rendered: int = 256 << 20
    max_depth: int = 1000
    max_int_digits: int = 4300

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"limit {f.name} must be a positive integer, not {value!r}")


#: The budgets in force unless a caller raises them.
DEFAULT: Final = Limits()
#: Every budget's name, as ``--limit NAME=VALUE`` and :func:`raised` take it.
NAMES: Final = tuple(f.name for f in dataclasses.fields(Limits))
_SUFFIXES: Final = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}
_CURRENT: ContextVar[Limits] = ContextVar("tracepack_limits", default=DEFAULT)
#: Characters rendered so far in the current :func:`rendering` call (a one-item list), or None.
_RENDERED: ContextVar[list[int] | None] = ContextVar("tracepack_rendered", default=None)


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
    """How to raise the budget ``name`` (the tail of an over-budget error message): the command
    line's flag and the Python call."""
    return f"or raise the {name} budget (command line: --limit {name}=N; Python: limits.raised({name}=...))"


def parse_value(text: str) -> int:
    """A budget's value: ``16G``, ``512M``, ``1_000_000``, ``64KiB`` (binary suffixes, x1024 each)."""
    word = text.strip().replace("_", "")
    upper = word.upper().removesuffix("IB").removesuffix("B") if word[-1:].isalpha() else word
    digits, suffix = (upper[:-1], upper[-1]) if upper[-1:].isalpha() else (upper, "")
    if not digits.isdigit() or not digits.isascii() or suffix not in _SUFFIXES or len(digits) > 30:
        raise ValueError(f"{text!r} is not a size: a whole number with an optional K, M, G or T suffix (x1024)")
    value = int(digits) << _SUFFIXES[suffix]
    if value < 1:
        raise ValueError(f"{text!r}: a budget is at least 1")
    return value


def parse_setting(text: str) -> tuple[str, int]:
    """``NAME=VALUE`` (``--limit``'s argument) as a budget name and its value; ``-`` in the name
    reads as ``_`` and the ``max_`` prefix may be left out. A ValueError says what is wrong."""
    name, sep, value = text.partition("=")
    key = name.strip().replace("-", "_")
    if key not in NAMES and f"max_{key}" in NAMES:
        key = f"max_{key}"
    if not sep or key not in NAMES:
        from tracepack.errors import did_you_mean

        raise ValueError(
            f"{name if sep else text!r} is not a budget{did_you_mean(key, NAMES)}; "
            f"expected NAME=VALUE, NAME one of {', '.join(NAMES)}"
        )
    return key, parse_value(value)


@contextlib.contextmanager
def rendering() -> Iterator[None]:
    """One call (a CLI command, an ``expand``): all text rendered inside counts against one
    ``max_rendered`` total. A call inside another shares the outer one's total."""
    if _RENDERED.get() is not None:
        yield
        return
    token = _RENDERED.set([0])
    try:
        yield
    finally:
        _RENDERED.reset(token)


def rendered(size: int) -> int | None:
    """Count ``size`` more characters handed out in the current :func:`rendering` call: the
    call's total so far, or None outside one."""
    tally = _RENDERED.get()
    if tally is None:
        return None
    tally[0] += size
    return tally[0]
