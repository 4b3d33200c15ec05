"""The delta-coded columns of the executorch/method extension: round trips and damaged input."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracepack.errors import DecodeError
from tracepack.runtime.symbols import decode_groups, encode_groups

groups = st.dictionaries(st.integers(0, 2**40), st.lists(st.integers(-(2**40), 2**40), max_size=5), max_size=40)


@given(groups)
def test_round_trip_through_json(value: dict[int, list[int]]) -> None:
    encoded = json.loads(json.dumps(encode_groups(value)))
    assert decode_groups(encoded, "$") == {k: value[k] for k in sorted(value)}


@given(groups)
def test_the_first_form_is_still_read(value: dict[int, list[int]]) -> None:
    old = json.loads(json.dumps({str(k): v for k, v in value.items()}))
    assert decode_groups(old, "$") == value


@pytest.mark.parametrize(
    "bad",
    [
        {"keys": [1, 1]},
        {"keys": [1], "values": [1, 2]},
        {"keys": [1, 1], "values": [1, 2], "counts": [1]},
        {"keys": [1], "values": [1], "counts": [-1]},
        {"keys": "x", "values": []},
        {"3": ["x"]},
        [1, 2],
    ],
)
def test_damaged_columns_are_a_decode_error(bad: object) -> None:
    with pytest.raises(DecodeError, match="malformed executorch/method"):
        decode_groups(bad, "$.x")
