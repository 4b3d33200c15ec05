"""The ``forms`` encoding as its documentation states it, written plainly (no regular expression), and
hypothesis strategies for string columns that exercise each clause of it.

The codec's writer (``columnar._forms``) must give exactly what :func:`reference_forms` gives: the
encoded bytes of a column are a function of its strings, so files written before stay the same
and dictionaries trained on them stay valid.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import strategies as st

__all__ = ["forms_columns", "reference_forms", "split_form"]

#: The longest string that can be a form, and the most digits of its number.
LONGEST = 256
DIGITS = 18


def _digit(c: str) -> bool:
    return "0" <= c <= "9"


def split_form(s: str) -> tuple[str, int, str] | None:
    """``(prefix, number, suffix)`` of a numbered string, or None.

    A string without whitespace, of at most 256 characters, with an ASCII digit: its number is the
    longest tail of its last run of digits that is written canonically (no leading zero) with at most
    18 digits; ``"0"`` when that run ends in zeros only.
    """
    if len(s) > LONGEST or any(c.isspace() for c in s):
        return None
    end = len(s)
    while end and not _digit(s[end - 1]):
        end -= 1
    if not end:
        return None
    start = end
    while start and _digit(s[start - 1]):
        start -= 1
    first = max(start, end - DIGITS)
    while first < end - 1 and s[first] == "0":
        first += 1
    return s[:first], int(s[first:end]), s[end:]


def reference_forms(values: list[str]) -> list[Any] | None:
    """``[literals, row steps, prefixes, suffixes, residuals]`` of a string column, or None when no
    string is numbered: every row's literal first ("" for a numbered string); then, per numbered
    string in row order, the literal of its prefix and of its suffix (the first row holding that
    string as a literal, else appended after the rows in the order first needed, prefix before
    suffix), and its number minus one more than the last number with the same prefix and suffix
    (-1 before the first)."""
    literals = list(values)
    first_row: dict[str, int] = {}
    numbered: list[tuple[int, tuple[str, int, str]]] = []
    for row, s in enumerate(values):
        parts = split_form(s)
        if parts is None:
            first_row.setdefault(s, row)
        else:
            literals[row] = ""
            numbered.append((row, parts))
    if not numbered:
        return None

    def literal(text: str) -> int:
        if text not in first_row:
            first_row[text] = len(literals)
            literals.append(text)
        return first_row[text]

    prefixes: list[int] = []
    suffixes: list[int] = []
    residuals: list[int] = []
    last: dict[tuple[int, int], int] = {}
    for _, (prefix, number, suffix) in numbered:
        p = literal(prefix)
        q = literal(suffix)
        residuals.append(number - (last.get((p, q), -1) + 1))
        last[p, q] = number
        prefixes.append(p)
        suffixes.append(q)
    rows = [row for row, _ in numbered]
    steps = [rows[0]] + [b - a for a, b in itertools.pairwise(rows)]
    return [literals, steps, prefixes, suffixes, residuals]


_affixes = st.sampled_from(
    ["", "add_", "mul_", "L__self__blocks.", "p_blocks_", "a1b", "é", "x0", "٣", ";method_descriptor.add", ".attn",
     "_attn_qkv_weight", "x y", "\u3000", "\x1c", "a\nb", "\x85", "-", "__getitem___"]
)  # fmt: skip
_numbers = st.one_of(
    st.integers(0, 40).map(str),
    st.integers(0, 10**19).map(str),
    st.from_regex(r"0{1,3}[0-9]{0,22}", fullmatch=True),  # leading zeros, runs longer than 18 digits
)
_numbered = st.builds(lambda a, n, b: a + n + b, _affixes, _numbers, _affixes)
_long = st.builds(lambda a, n: "p" * a + n, st.integers(230, 260), _numbers)  # around the 256-character limit


def forms_columns(max_size: int = 40) -> st.SearchStrategy[list[str]]:
    """String columns: numbered strings (torch-like and not), their affixes as literals, duplicates,
    whitespace of every kind, Unicode digits, long strings and runs of digits."""
    one = st.one_of(_numbered, _affixes, _long, st.text(max_size=12), st.sampled_from(["007", "1", "01", "0", "00"]))
    return st.lists(one, max_size=max_size)
