"""Helpers that generated code calls (``tracepack_generated.*.validate``).

They do the bulk work at C speed (``min``/``max`` over whole columns) and only
walk element by element to name the exact place once something is wrong. The
signatures are a stable contract with generated code: change them only
together with the generator.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from operator import ge

from tracepack.errors import IntegrityError

__all__ = [
    "check_column",
    "child",
    "check_nested_refs",
    "check_refs",
    "check_reserved_row",
    "check_string_table",
    "check_trie",
]


def child(at: str, parents: int, field: str) -> str:
    """Path pattern of the items of list ``field`` in ``parents`` rows found at ``at``.

    Under a single row the item index is exact (``$.graph.nodes[{}]``); under many, the
    items of all rows are checked together and the path says ``*``.
    """
    if parents == 1:
        return f"{at.format(0) if '{}' in at else at}.{field}[{{}}]"
    return f"{at.format('*')}.{field}[*]"


def check_string_table(strings: Sequence[str], where: str) -> None:
    """The string table is never empty and starts with ``""``."""
    if not strings or strings[0] != "":
        got = "an empty table" if not strings else f"{strings[0]!r}"
        raise IntegrityError(f"string 0 is {got}", where=where + "[0]", expected='""')


def check_column(column: Sequence[object], rows: int, sparse: bool, where: str) -> None:
    """A column has one entry per row (or none, if it is sparse)."""
    if len(column) != rows and not (sparse and not column):
        raise IntegrityError(
            f"column has {len(column)} entries but the table has {rows} rows",
            where=where,
            expected=f"{rows} entries" + (" or none" if sparse else ""),
        )


def check_reserved_row(rows: int, where: str) -> None:
    """Tables that references point into keep row 0 as the empty entry."""
    if rows < 1:
        raise IntegrityError("table has no rows", where=where, expected="row 0, the reserved empty entry")


def check_refs(values: Sequence[int], size: int, null: int, where: str) -> None:
    """Every value indexes a table of ``size`` rows, or is a sentinel in ``[null, -1]``.

    ``where`` may hold ``{}``, replaced with the index of the first bad value.
    """
    if not values:
        return
    lo, hi = min(values), max(values)
    if lo >= null and hi < size:
        return
    for i, v in enumerate(values):
        if not null <= v < size:
            _bad_ref(v, size, null, where.format(i))


def check_nested_refs(values: Sequence[Sequence[int]], size: int, null: int, at: str, field: str) -> None:
    """Like :func:`check_refs`, over one list per row; ``at`` holds ``{}`` for the row index."""
    flat = list(chain.from_iterable(values))
    if not flat or (min(flat) >= null and max(flat) < size):
        return
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            if not null <= v < size:
                _bad_ref(v, size, null, f"{at.format(i)}.{field}[{j}]")


def _bad_ref(value: int, size: int, null: int, where: str) -> None:
    expected = f"an index below {size}" + (f" or a sentinel down to {null}" if null < 0 else "")
    raise IntegrityError(f"reference {value} is out of range", where=where, expected=expected)


def check_trie(parent: Sequence[int], where: str) -> None:
    """``parent[0] == 0`` and ``parent[i] < i``: parents come first, so there is no cycle."""
    if not parent:
        return
    if parent[0] != 0:
        raise IntegrityError(f"root row has parent {parent[0]}", where=f"{where}[0]", expected="0")
    # map(ge, parent[i], i) is True where a row does not point strictly backwards.
    if any(map(ge, parent[1:], range(1, len(parent)))) or min(parent) < 0:
        for i in range(1, len(parent)):
            if not 0 <= parent[i] < i:
                raise IntegrityError(
                    f"row {i} has parent {parent[i]}, which is not an earlier row (a cycle or a forward reference)",
                    where=f"{where}[{i}]",
                    expected=f"a parent below {i}",
                )
