"""The ``forms`` encoding of string columns: numbered strings as prefix + predicted number + suffix."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tracepack
from tests.columnar.forms_spec import forms_columns, reference_forms, split_form
from tests.columnar.helpers import pack, payload_of, unforms
from tests.strategies import documents
from tracepack.codecs import columnar
from tracepack.errors import DecodeError
from tracepack.versions import CURRENT

pytestmark = pytest.mark.usefixtures("forms_impl")  # every test with the C loops and with the Python ones

_bases = st.sampled_from(["add", "mul", "linear", "L__self__blocks.", "p_blocks_", "x", "", "a1b", "é"])
_tails = st.sampled_from(["", ";method_descriptor.add", ".attn", "_attn_qkv_weight", "0", "x y"])
_numbered = st.builds(
    lambda a, n, b: f"{a}{n}{b}", _bases, st.one_of(st.integers(0, 40), st.integers(0, 10**19)), _tails
)
_strings = st.lists(st.one_of(_numbered, st.text(max_size=12), st.sampled_from(["007", "1", "01", "٣", "a 1"])))


@given(_strings)
def test_forms_round_trip_any_strings(values: list[str]) -> None:
    forms = columnar._forms(values)
    if forms is None:
        assert not any(columnar._FORM.fullmatch(s) for s in values if len(s) <= columnar._FORM_AFFIX_MAX)
        return
    assert unforms("$.t[]", forms, len(values)) == values
    assert sum(1 for s in forms[0][: len(values)] if s) <= len(values)


@given(documents())
def test_documents_round_trip_whatever_the_encoding(doc: tracepack.Document) -> None:
    data = tracepack.dumps(doc, codec="columnar", compression="none")
    assert tracepack.loads(data) == doc


def test_torch_like_names_become_small_repeating_numbers() -> None:
    names = [f"{op}_{i}" if i else op for i in range(40) for op in ("add", "mul", "linear")]
    names += [f"{op}_{i + 1};method_descriptor.{op}" for i in range(40) for op in ("add", "mul")]
    forms = columnar._forms(names)
    assert forms is not None
    _, steps, _, _, residuals = forms
    assert set(residuals) <= {0, 1}  # predicted: one more than the last with the same prefix and suffix
    assert set(steps[1:]) == {1}
    b = tracepack.DocumentBuilder()
    for n in names:
        b.string(n)
    doc = b.build()
    encoding, _ = payload_of(doc.raw, CURRENT)["columns"]["$.strings[]"]
    assert encoding == columnar.FORMS  # chosen: zstd makes it smaller than plain
    assert tracepack.loads(tracepack.dumps(doc, codec="columnar")) == doc


def _damaged(change: Any) -> str:
    b = tracepack.DocumentBuilder()
    for i in range(40):
        b.string(f"node_{i}")
    payload = payload_of(b.build().raw, CURRENT)
    encoding, forms = payload["columns"]["$.strings[]"]
    assert encoding == columnar.FORMS
    payload["columns"]["$.strings[]"] = [encoding, change(forms)]
    with pytest.raises(DecodeError) as info:
        tracepack.loads(pack(payload, CURRENT), source="m.tpk")
    text = str(info.value)
    assert "\n" not in text
    assert "$.strings[]" in text
    return text


def _set(forms: Any, part: int, index: int, value: Any) -> Any:
    forms[part][index] = value
    return forms


def test_hostile_forms_are_one_line_errors_naming_the_column() -> None:
    assert "not a forms column" in _damaged(lambda f: f[:3])
    assert "differ in length" in _damaged(lambda f: [f[0], f[1], f[2], f[3], f[4][:-1]])
    assert "rows ascending" in _damaged(lambda f: _set(f, 1, 2, 0))
    assert "rows ascending" in _damaged(lambda f: _set(f, 1, 0, 10**6))
    assert "refers to literals" in _damaged(lambda f: _set(f, 2, 0, 10**6))
    assert "refers to literals" in _damaged(lambda f: _set(f, 3, 1, f[1][0]))  # a form's row, not a literal
    assert "has number" in _damaged(lambda f: _set(f, 4, 0, -5))
    assert "has number" in _damaged(lambda f: _set(f, 4, 0, 10**18))
    assert "also holds a literal" in _damaged(lambda f: _set(f, 0, f[1][0], "x"))
    assert "too long" in _damaged(lambda f: _set(f, 0, f[2][0], "p" * 300))
    assert "at least" in _damaged(lambda f: [[], *f[1:]])


def test_an_unknown_encoding_is_still_refused() -> None:
    b = tracepack.DocumentBuilder()
    b.string("x")
    payload = payload_of(b.build().raw, CURRENT)
    payload["columns"]["$.strings[]"] = ["zigzag", msgspec.msgpack.decode(msgspec.msgpack.encode(["", "x"]))]
    with pytest.raises(DecodeError, match="unknown column encoding 'zigzag'"):
        tracepack.loads(pack(payload, CURRENT))


def test_plain_strings_writes_what_builds_before_forms_wrote() -> None:
    b = tracepack.DocumentBuilder()
    for i in range(40):
        b.string(f"node_{i}")
    doc = b.build()
    with columnar.plain_strings():
        before = payload_of(doc.raw, CURRENT)["columns"]["$.strings[]"]
    assert before == [columnar.PLAIN, doc.raw.strings]
    assert payload_of(doc.raw, CURRENT)["columns"]["$.strings[]"][0] == columnar.FORMS


@given(forms_columns())
def test_the_writer_gives_what_the_documented_encoding_gives(values: list[str]) -> None:
    expected = reference_forms(values)
    assert columnar._forms(values) == expected
    if expected is not None:
        assert unforms("$.t[]", expected, len(values)) == values


def test_split_form_follows_the_documented_clauses() -> None:
    assert split_form("add_7") == ("add_", 7, "")
    assert split_form("mul_126;method_descriptor.mul") == ("mul_", 126, ";method_descriptor.mul")
    assert split_form("blocks.3.attn") == ("blocks.", 3, ".attn")
    assert split_form("a0123b") == ("a0", 123, "b")  # no leading zero
    assert split_form("a000") == ("a00", 0, "")
    assert split_form("x" + "1" * 20) == ("x11", 10**18 // 9, "")  # at most 18 digits
    assert split_form("٣") is None  # ASCII digits only
    assert split_form("add 7") is None
    assert split_form("p" * 251 + "123456") is None  # more than 256 characters
    assert split_form("p" * 250 + "123456") == ("p" * 250, 123456, "")


_TRANSFORMER_STRINGS = Path(__file__).resolve().parents[1] / "data" / "columnar" / "transformer_strings.json"
#: sha256 of the ``$.strings[]`` column written for the strings of ``tests/data/torch/corpus/transformer.pt2``
#: (saved in tests/data/columnar): the bytes written since the forms encoding, which files and the
#: dictionary torch-export-3 hold. A change of the writer must keep them.
_TRANSFORMER_COLUMN = "615b80a29522bfeda93501b62b5630b4801b35acd30f935849e4ccea1f163aa5"


def test_a_real_string_table_is_written_as_before() -> None:
    strings = json.loads(_TRANSFORMER_STRINGS.read_text(encoding="utf-8"))
    assert len(strings) > 500
    w = columnar._Writer()
    w.put("$.strings[]", strings, strings=True)
    encoding, data = w.columns["$.strings[]"]
    assert encoding == columnar.FORMS
    assert hashlib.sha256(bytes(data)).hexdigest() == _TRANSFORMER_COLUMN
    assert msgspec.msgpack.decode(bytes(data)) == reference_forms(strings)
    assert unforms("$.strings[]", reference_forms(strings), len(strings)) == strings


@given(forms_columns(max_size=300))
def test_the_writer_tries_forms_when_half_a_sample_is_numbered(values: list[str]) -> None:
    sample = values[:: max(1, len(values) // 64)]
    numbered = sum(1 for s in sample if split_form(s) is not None)
    assert columnar._mostly_numbered(values) == (2 * numbered >= len(sample))


def test_a_column_of_few_numbered_strings_stays_plain() -> None:
    words = ["FLOAT", "cpu", "LONG", "strided", "weight"]
    values = [f"{w}_{k}" for k in range(20) for w in words[:2]] + [f"{w} of {k}" for k in range(30) for w in words]
    assert not columnar._mostly_numbered(values)
    w = columnar._Writer()
    w.put("$.strings[]", values, strings=True)
    assert w.columns["$.strings[]"][0] == columnar.PLAIN
    assert columnar._mostly_numbered(values[:40])  # the numbered ones alone are tried, and pay
    w.put("$.t[]", values[:40], strings=True)
    assert w.columns["$.t[]"][0] == columnar.FORMS


def test_numbers_at_the_limit_and_stepping_back() -> None:
    top = columnar._FORM_NUMBER_LIMIT - 1
    # [literals, row steps, prefixes, suffixes, residuals]: rows 0 and 1 are forms of literal 2 ("x").
    assert unforms("$.t[]", [["", "", "x"], [0, 1], [2, 2], [2, 2], [top, -top - 1]], 2) == [f"x{top}x", "x0x"]
    assert unforms("$.t[]", [["", "x"], [0], [1], [1], [top]], 1) == [f"x{top}x"]  # the residuals' sum at the limit
    with pytest.raises(DecodeError, match="form 1 has number"):
        unforms("$.t[]", [["", "", "x"], [0, 1], [2, 2], [2, 2], [top, 1]], 2)
    with pytest.raises(DecodeError, match="form 0 has number"):
        unforms("$.t[]", [["", "x"], [0], [1], [1], [top + 1]], 1)
    with pytest.raises(DecodeError, match="form 1 has number -1"):
        unforms("$.t[]", [["", "", "x"], [0, 1], [2, 2], [2, 2], [3, -5]], 2)


@given(forms_columns(max_size=300))
def test_the_writer_takes_forms_without_comparing_when_three_fifths_are_numbered(values: list[str]) -> None:
    sample = values[:: max(1, len(values) // 64)]
    numbered = sum(1 for s in sample if split_form(s) is not None)
    assert columnar._numbered(values) == (numbered, len(sample))
    w = columnar._Writer()
    w.put("$.t[]", values, strings=True)
    encoding = w.columns["$.t[]"][0] if values else None
    if len(values) >= columnar._FORMS_MIN_ROWS and 5 * numbered >= 3 * len(sample):
        assert encoding == columnar.FORMS
    elif len(values) >= columnar._FORMS_MIN_ROWS and 2 * numbered >= len(sample):
        plain = msgspec.msgpack.encode(values)
        forms = msgspec.msgpack.encode(reference_forms(values))
        smaller = len(columnar._ZSTD.compress(forms)) < len(columnar._ZSTD.compress(plain))
        assert encoding == (columnar.FORMS if smaller else columnar.PLAIN)
    elif values:
        assert encoding == columnar.PLAIN


def test_a_torch_string_table_past_three_fifths_is_far_smaller_as_forms() -> None:
    """Where three fifths of the sample are numbered, the trial compressions are skipped: on a torch
    string table of that kind (the committed transformer's, 79% numbered) the trial picked forms too,
    by far (zstd: forms 18% smaller)."""
    strings = json.loads(_TRANSFORMER_STRINGS.read_text(encoding="utf-8"))
    numbered, sampled = columnar._numbered(strings)
    assert 5 * numbered >= 3 * sampled
    plain = msgspec.msgpack.encode(strings)
    forms = msgspec.msgpack.encode(reference_forms(strings))
    assert len(columnar._ZSTD.compress(forms)) < 0.9 * len(columnar._ZSTD.compress(plain))
