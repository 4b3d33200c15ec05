"""Turn what only hostile input can make a parser do into one-line :class:`InputError` s.

JSON, MessagePack and TOML are parsed by C or library code that recurses once per level of
nesting and converts integers of any length; on input nested thousands deep, or an integer of
thousands of digits, they raise ``RecursionError`` or ``ValueError`` (Python's 4,300-digit
limit) deep inside, which a caller would see as an internal error. Every entry point that parses
user input runs under :func:`reading`, which reports those as the input's fault, naming it::

    with guard.reading(source, DecodeError):
        value = json.loads(data)

Depth is therefore bounded by the interpreter's recursion limit (about 1,000 levels; real
documents nest a few dozen) and integers by 4,300 digits in text; every schema field holds a
64-bit integer at most, which the decoders and model.json validation check.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from tracepack.errors import InputError

__all__ = ["reading"]


@contextlib.contextmanager
def reading(source: str | None, error: type[InputError], where: str | None = None) -> Iterator[None]:
    """Run a parse of ``source``: runaway nesting and giant integers become ``error``."""
    try:
        yield
    except RecursionError:
        raise error(
            "nested too deeply to read (thousands of levels: hostile or damaged input?)",
            source=source,
            where=where,
            expected="nesting of at most a few hundred levels",
        ) from None
    except ValueError as exc:
        if isinstance(exc, InputError) or "integer string conversion" not in str(exc):
            raise
        raise error(
            "an integer of more than 4,300 digits", source=source, where=where, expected="a 64-bit integer"
        ) from None
