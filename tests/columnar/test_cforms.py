"""The C loops of the ``forms`` encoding (``tracepack.codecs._cforms``) against the Python ones and the
documented encoding: the same lists, the same strings (canonical, so equal, hashed and sized alike), the
same refusals, and never a crash on lists no writer made."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tracepack
from tests.columnar.forms_spec import forms_columns, reference_forms
from tracepack.codecs import _cforms, columnar
from tracepack.errors import DecodeError
from tracepack.torch.export.model_json import export_model_json, import_model_json
from tracepack.versions import CURRENT

LIMIT = columnar._FORM_NUMBER_LIMIT
AFFIX_MAX = columnar._FORM_AFFIX_MAX


def _model_json(path: Path) -> bytes | None:
    with zipfile.ZipFile(path) as archive:
        names = [n for n in archive.namelist() if "/models/" in n and n.endswith(".json")]
        return archive.read(names[0]) if len(names) == 1 else None


def _read(n: int, forms: list[Any]) -> list[str] | str:
    """The reader's answer for a forms column of ``n`` rows: its strings, or its one-line error."""
    reader = columnar._Reader({}, 1 << 40, None)
    try:
        return reader.forms("$.t[]", n, msgspec.Raw(msgspec.msgpack.encode(forms)))
    except DecodeError as exc:
        return str(exc)


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
    out = _cforms.unforms(*forms, len(values), LIMIT, AFFIX_MAX)
    assert out == values
    # canonical strings: the same representation as the ones written (an f-string's)
    assert [sys.getsizeof(s) for s in out] == [sys.getsizeof(s) for s in values]
    assert [hash(s) for s in out] == [hash(s) for s in values]


_any_int = st.one_of(st.integers(-3, 70), st.integers(-(2**63), 2**63 - 1), st.sampled_from([LIMIT - 1, LIMIT]))
_literal = st.sampled_from(["", "x", "add_", "é", "\u3000", "\U0001f600", ";method_descriptor.mul", "p" * 250])


@given(forms_columns(max_size=40), st.data())
def test_the_c_reader_refuses_exactly_what_the_python_checks_refuse(values: list[str], data: st.DataObject) -> None:
    """A forms column damaged anywhere (a step, a literal index, a residual, a literal, a list cut short):
    the C reader gives the Python loop's strings, or refuses (None) where the Python checks raise; the
    reader then says what the Python checks say."""
    forms = reference_forms(values)
    if forms is None:
        return
    n = len(values)
    for _ in range(data.draw(st.integers(1, 3))):
        part = data.draw(st.integers(0, 4))
        if not forms[part]:
            continue
        i = data.draw(st.integers(0, len(forms[part]) - 1))
        if part == 0:
            forms[0][i] = data.draw(_literal)
        elif data.draw(st.booleans()):
            forms[part][i] = data.draw(_any_int)
        else:
            del forms[part][i]
    n = data.draw(st.sampled_from([n, max(0, n - 1), n + 1]))
    with columnar.python_loops():
        expected = _read(n, forms)
    assert _read(n, forms) == expected  # the codec with the C reader: the same strings or the same error
    try:
        decoded = columnar._FORMS_DECODER.decode(msgspec.msgpack.encode(forms))
    except msgspec.ValidationError:
        return  # refused by the decoder before either loop runs
    literals, steps, prefixes, suffixes, residuals = decoded
    lengths = len(steps) == len(prefixes) == len(suffixes) == len(residuals) and len(literals) >= n
    got = _cforms.unforms(literals, steps, prefixes, suffixes, residuals, n, LIMIT, AFFIX_MAX)
    if isinstance(expected, str):
        assert got is None, expected
    else:
        assert got == expected
        assert lengths


@given(st.lists(_any_int, max_size=6), st.lists(_any_int, max_size=6), st.lists(_any_int, max_size=6))
def test_the_c_reader_takes_any_integers(steps: list[int], prefixes: list[int], residuals: list[int]) -> None:
    """Lists no decoder made (negative or huge indices, lengths that differ): refused, never a crash."""
    literals = ["", "", "x", "y"]
    got = _cforms.unforms(literals, steps, prefixes, list(prefixes), residuals, 2, LIMIT, AFFIX_MAX)
    assert got is None or (len(got) == 2 and all(isinstance(s, str) for s in got))


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("", [0], [1], [1], [0], 1, LIMIT, AFFIX_MAX), TypeError),  # not lists
        ((["", "x"], [0], [1], [1], (0,), 1, LIMIT, AFFIX_MAX), TypeError),
        ((["", "x"], [0], [1], [1], [0], -1, LIMIT, AFFIX_MAX), ValueError),  # a row count below 0
        ((["", "x"], [0], [1], [1], [0], 1, 0, AFFIX_MAX), ValueError),  # a limit the loop cannot keep
        ((["", "x"], [0], [1], [1], [0], 1, 2**63, AFFIX_MAX), OverflowError),
        ((["", "x"], [0], [1], [1], [0], 1, LIMIT), TypeError),  # an argument short
    ],
)
def test_the_c_reader_refuses_calls_no_reader_makes(args: tuple[Any, ...], error: type[Exception]) -> None:
    with pytest.raises(error):
        _cforms.unforms(*args)


def test_the_c_reader_refuses_what_a_writer_never_writes() -> None:
    ok = (["", "x"], [0], [1], [1], [0])
    assert _cforms.unforms(*ok, 1, LIMIT, AFFIX_MAX) == ["x0x"]
    assert _cforms.unforms(["", 3], [0], [1], [1], [0], 1, LIMIT, AFFIX_MAX) is None  # a literal not a str
    assert _cforms.unforms(["", "x"], [0], [1], [1], ["0"], 1, LIMIT, AFFIX_MAX) is None
    assert _cforms.unforms(["", "x"], [0], [1], [1], [2**64], 1, LIMIT, AFFIX_MAX) is None
    assert _cforms.unforms(["", "x"], [0], [1], [1], [LIMIT], 1, LIMIT, AFFIX_MAX) is None  # number out of range
    assert _cforms.unforms(["", "x"], [1], [1], [1], [0], 1, LIMIT, AFFIX_MAX) is None  # row past the column
    assert _cforms.unforms(["", "x"], [0], [0], [1], [0], 1, LIMIT, AFFIX_MAX) is None  # a form's row as prefix
    assert _cforms.unforms(["", "x"], [0], [1], [1], [0], 1, LIMIT, 1) is None  # affixes too long together
    assert _cforms.unforms(["y", "x"], [0], [1], [1], [0], 1, LIMIT, AFFIX_MAX) is None  # row holds a literal


def test_the_c_writer_refuses_what_is_not_a_list_of_strings() -> None:
    with pytest.raises(TypeError):
        _cforms.forms(("a1",), AFFIX_MAX)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="row 1"):
        _cforms.forms(["a1", b"a2"], AFFIX_MAX)  # type: ignore[list-item]
    assert columnar._forms(("a1", "a2")) == columnar._forms_py(["a1", "a2"])  # the codec's wrapper takes any sequence

    class Name(str):
        __slots__ = ()

    names = [Name(f"add_{i}") for i in range(20)]
    with pytest.raises(TypeError, match="row 0"):
        _cforms.forms(names, AFFIX_MAX)  # exact str only: a subclass's methods could run Python code
    assert columnar._forms(names) == reference_forms([str(s) for s in names])  # the wrapper: the Python loops
    assert columnar._numbered(names) == (20, 20)


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


_TORCH_DATA = Path(__file__).resolve().parents[1] / "data" / "torch"
#: Archives real torch releases wrote (2.8 on keep model.json under models/) and the 2.13 corpus.
_TORCH_FILES = sorted(
    p for p in [*_TORCH_DATA.glob("releases/*/*.pt2"), *_TORCH_DATA.glob("corpus/*.pt2")] if _model_json(p) is not None
)


@pytest.mark.parametrize("path", _TORCH_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_torch_files_write_the_same_bytes_and_come_back_as_torch_wrote_them(path: Path) -> None:
    """On model.json files real torch releases wrote: the C and the Python loops write the same columnar
    bytes, and each reads back torch's model.json byte for byte."""
    original = _model_json(path)
    assert original is not None
    doc = import_model_json(original)
    data = tracepack.dumps(doc, codec="columnar", compression="none")
    with columnar.python_loops():
        assert tracepack.dumps(doc, codec="columnar", compression="none") == data
        assert export_model_json(tracepack.loads(data)) == original
    assert export_model_json(tracepack.loads(data)) == original
