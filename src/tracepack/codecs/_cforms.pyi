"""The columnar codec's ``forms`` loops in C (``_cforms.c``); ``columnar._forms_py`` is the reference."""

from typing import Any

def forms(values: list[str], affix_max: int, /) -> list[Any] | None: ...
def numbered(values: list[str], affix_max: int, /) -> int: ...
def unforms(
    literals: list[str],
    steps: list[int],
    prefixes: list[int],
    suffixes: list[int],
    residuals: list[int],
    n: int,
    limit: int,
    affix_max: int,
    /,
) -> list[str] | None: ...
