"""Turn what only hostile input can make a parser do into one-line :class:`InputError` s.

JSON, MessagePack and TOML are parsed by C or library code that recurses once per level of
nesting and converts integers of any length; on input nested thousands deep, or an integer of
thousands of digits, they would raise ``RecursionError`` or ``ValueError`` deep inside, which a
caller would see as an internal error. Every entry point that parses user input runs under
:func:`reading`, which holds the parse to two budgets of :mod:`tracepack.io.limits` and reports
going past them as the input's fault, naming it and the budget::

    with guard.reading(source, DecodeError):
        value = json.loads(data)

* ``max_depth`` (default 1,000 levels; real documents nest a few dozen): the parse runs with the
  interpreter's recursion limit set to the frames in use plus ``max_depth`` (the parsers count
  one level of nesting against it, in C as in Python), so nesting past it is refused;
* ``max_int_digits`` (default 4,300, Python's own limit): the longest integer converted from
  text; the parse runs with ``sys.set_int_max_str_digits`` set to it (at least 640, Python's
  floor).

Both settings are the interpreter's, not the thread's: raising them changes them for the duration
of the parse for every thread. A ``max_depth`` past about 20,000 needs more C stack than a
thread's default: run such a parse in a thread made after ``threading.stack_size(256 << 20)``.
Every schema field holds a 64-bit integer at most, which the decoders and model.json validation
check.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from tracepack.errors import InputError
from tracepack.io import limits

__all__ = ["reading"]

#: Frames the parse itself may add before it reaches the input's first level (library wrappers).
_MARGIN = 64


def _frames() -> int:
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]
    return depth


@contextlib.contextmanager
def reading(source: str | None, error: type[InputError], where: str | None = None) -> Iterator[None]:
    """Run a parse of ``source`` within the ``max_depth`` and ``max_int_digits`` budgets: nesting
    and integers past them become ``error``."""
    budget = limits.current()
    old_depth = sys.getrecursionlimit()
    old_digits = sys.get_int_max_str_digits()
    digits = max(budget.max_int_digits, 640)
    try:
        sys.setrecursionlimit(_frames() + budget.max_depth + _MARGIN)
        if digits != old_digits:
            sys.set_int_max_str_digits(digits)
        yield
    except RecursionError:
        raise error(
            f"nested more than {budget.max_depth:,} levels deep (hostile or damaged input?)",
            source=source,
            where=where,
            expected=f"shallower nesting, {limits.hint('max_depth')}",
        ) from None
    except ValueError as exc:
        if isinstance(exc, InputError) or "integer string conversion" not in str(exc):
            raise
        raise error(
            f"an integer of more than {digits:,} digits",
            source=source,
            where=where,
            expected=f"a 64-bit integer, {limits.hint('max_int_digits')}",
        ) from None
    finally:
        sys.setrecursionlimit(old_depth)
        if digits != old_digits:
            sys.set_int_max_str_digits(old_digits)
