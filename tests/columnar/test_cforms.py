"""The C loops of the ``forms`` encoding (``tracepack.codecs._cforms``) against the Python ones and the
documented encoding: the same lists, the same strings (canonical, so equal, hashed and sized alike), the
same first number out of range, and never a crash on lists no writer made."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tracepack
from tests.columnar.forms_spec import forms_columns, reference_forms
from tracepack.codecs import _cforms, columnar
from tracepack.versions import CURRENT

LIMIT = columnar._FORM_NUMBER_LIMIT
AFFIX_MAX = columnar._FORM_AFFIX_MAX


def _python_rebuild(
    n: int, literals: list[str], rows: list[int], forms: tuple[list[int], list[int], list[int]]
) -> tuple[list[str], int]:
    """The reader's loop as columnar.py writes it plainly: the strings, and the first form whose number is
    out of 0..LIMIT-1 (-1 when none)."""
    out = literals[:n]
    last: dict[tuple[int, int], int] = {}
    prefixes, suffixes, residuals = forms
    for j, (row, p, q, residual) in enumerate(zip(rows, prefixes, suffixes, residuals, strict=True)):
        number = last.get((p, q), -1) + 1 + residual
        if not 0 <= number < LIMIT:
            return out, j
        last[p, q] = number
        out[row] = f"{literals[p]}{number}{literals[q]}"
    return out, -1


@given(forms_columns(max_size=60))
def test_the_c_writer_gives_the_documented_encoding(values: list[str]) -> None:
    expected = reference_forms(values)
    assert _cforms.forms(values, AFFIX_MAX) == expected
    assert columnar._forms_py(values) == expected


@given(st.lists(st.text(max_size=30), max_size=20))
def test_the_c_split_is_the_regular_expression_on_any_text(values: list[str]) -> None:
    """Any code point (every kind of Unicode whitespace and digit): a string is a form exactly when the
    codec's regular expression matches it, split where it splits."""
    got = _cforms.forms(values, AFFIX_MAX)
    assert got == columnar._forms_py(values)
    for s in values:
        one = _cforms.forms([s], AFFIX_MAX)
        m = columnar._FORM.fullmatch(s) if len(s) <= AFFIX_MAX else None
        assert (one is None) == (m is None), s
        if one is not None and m is not None:
            literals, _, (p,), (q,), (residual,) = one
            assert (literals[p], residual, literals[q]) == (m[1], int(m[2]), m[3])


@given(st.lists(st.text(max_size=8), max_size=10), st.integers(0, 12))
def test_the_affix_limit(values: list[str], affix_max: int) -> None:
    got = _cforms.forms(values, affix_max)
    kept = [s if len(s) <= affix_max else None for s in values]
    if got is None:
        assert not any(s is not None and columnar._FORM.fullmatch(s) for s in kept)
        return
    literals = got[0]
    for row, s in enumerate(values):
        if len(s) > affix_max:
            assert literals[row] == s  # too long to be a form: its own literal


@given(forms_columns(max_size=60))
def test_the_c_reader_rebuilds_every_column(values: list[str]) -> None:
    forms = reference_forms(values)
    if forms is None:
        return
    literals, steps, prefixes, suffixes, residuals = forms
    rows = list(itertools.accumulate(steps))
    out = literals[: len(values)]
    assert _cforms.rebuild(out, literals, rows, prefixes, suffixes, residuals, LIMIT) == -1
    assert out == values
    # canonical strings: the same representation as the ones written (an f-string's)
    assert [sys.getsizeof(s) for s in out] == [sys.getsizeof(s) for s in values]
    assert [hash(s) for s in out] == [hash(s) for s in values]


_literal = st.sampled_from(["", "x", "add_", "é", "\u3000", "\U0001f600", ";method_descriptor.mul"])


@given(
    st.lists(_literal, min_size=1, max_size=6),
    st.lists(
        st.tuples(
            st.integers(0, 5),
            st.integers(0, 5),
            st.one_of(st.integers(-3, 3), st.integers(-(2**63), 2**63 - 1), st.sampled_from([LIMIT - 1, LIMIT])),
        ),
        max_size=12,
    ),
)
def test_the_c_reader_stops_at_the_first_number_out_of_range(literals: list[str], forms: list[Any]) -> None:
    width = len(literals)
    forms = [(p % width, q % width, r) for p, q, r in forms]
    n = len(forms)
    rows = list(range(n))
    literals = [""] * n + literals
    prefixes = [p + n for p, _, _ in forms]
    suffixes = [q + n for _, q, _ in forms]
    residuals = [r for _, _, r in forms]
    out = literals[:n]
    bad = _cforms.rebuild(out, literals, rows, prefixes, suffixes, residuals, LIMIT)
    expected, expected_bad = _python_rebuild(n, literals, rows, (prefixes, suffixes, residuals))
    assert bad == expected_bad
    if bad < 0:
        assert out == expected


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (([""], ["", "x"], [1], [1], [1], [0], LIMIT), IndexError),  # row past the column
        (([""], ["", "x"], [0], [2], [1], [0], LIMIT), IndexError),  # prefix past the literals
        (([""], ["", "x"], [0], [1], [-1], [0], LIMIT), IndexError),
        (([""], ["", "x"], [0], [1], [1], [0, 0], LIMIT), ValueError),  # lists of different lengths
        (([""], ["", 3], [0], [1], [1], [0], LIMIT), TypeError),  # a literal that is not a str
        (([""], ["", "x"], [0], [1], [1], ["0"], LIMIT), TypeError),
        (([""], ["", "x"], [0], [1], [1], [2**64], LIMIT), OverflowError),
        (([""], ["", "x"], [0], [1], [1], [0], 0), ValueError),  # a limit the loop cannot keep
        (([""], ["", "x"], [0], [1], [1], [0], 2**63), OverflowError),
        (((""), ["", "x"], [0], [1], [1], [0], LIMIT), TypeError),  # not lists
    ],
)
def test_the_c_reader_refuses_lists_no_writer_made(args: tuple[Any, ...], error: type[Exception]) -> None:
    with pytest.raises(error):
        _cforms.rebuild(*args)


def test_the_c_writer_refuses_what_is_not_a_list_of_strings() -> None:
    with pytest.raises(TypeError):
        _cforms.forms(("a1",), AFFIX_MAX)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="row 1"):
        _cforms.forms(["a1", b"a2"], AFFIX_MAX)  # type: ignore[list-item]
    assert columnar._forms(("a1", "a2")) == columnar._forms_py(["a1", "a2"])  # the codec's wrapper takes any sequence


def test_the_codec_uses_the_c_loops_and_the_pure_python_build_writes_the_same_bytes() -> None:
    """TRACEPACK_PURE_PYTHON=1 (and an install without the compiled module) runs the Python loops; the
    files are the same byte for byte."""
    assert columnar._cforms is _cforms
    b = tracepack.DocumentBuilder()
    for i in range(200):
        b.string(f"add_{i};method_descriptor.add")
        b.string(f"blocks.{i // 7}.attn")
    data = tracepack.dumps(b.build(), codec="columnar", compression="none")
    script = (
        "import sys, tracepack\n"
        "from tracepack.codecs import columnar\n"
        "assert columnar._cforms is None\n"
        "b = tracepack.DocumentBuilder()\n"
        "for i in range(200):\n"
        "    b.string(f'add_{i};method_descriptor.add')\n"
        "    b.string(f'blocks.{i // 7}.attn')\n"
        "data = tracepack.dumps(b.build(), codec='columnar', compression='none')\n"
        "assert tracepack.loads(data) == b.build()\n"
        "sys.stdout.buffer.write(data)\n"
    )
    env = {**os.environ, "TRACEPACK_PURE_PYTHON": "1"}
    pure = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, check=True).stdout
    assert pure == data
    assert tracepack.loads(data) == b.build()
    assert columnar.decode(columnar.encode(b.build().raw, CURRENT), CURRENT) == b.build().raw
