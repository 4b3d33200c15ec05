"""``codecs.choose``: what ``convert`` writes for a torch input, given each candidate's file size."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracepack.codecs import CHOICE_MARGIN, SMALL_FILE, TORCH_CANDIDATES, choose


def test_a_faster_codec_within_the_margin_wins() -> None:
    # files over SMALL_FILE: a faster codec's within 5% of the smallest is kept
    assert choose({"columnar": 9300, "msgpack": 8570, "flatbuffers-columns": 8300}) == "msgpack"
    assert choose({"columnar": 20500, "msgpack": 21700, "flatbuffers-columns": 18850}) == "flatbuffers-columns"
    assert choose({"columnar": 23670, "msgpack": 30200, "flatbuffers-columns": 23900}) == "columnar"
    assert choose({"columnar": 10000, "msgpack": 10500, "flatbuffers-columns": 10000}) == "msgpack"  # at the margin
    assert choose({"columnar": 10000, "msgpack": 10501, "flatbuffers-columns": 10000}) == "columnar"


def test_small_files_take_the_smallest() -> None:
    # the 8-node ladder model: MessagePack 834 B, the column layout 805 B
    assert choose({"columnar": 937, "msgpack": 834, "flatbuffers-columns": 805}) == "flatbuffers-columns"
    assert choose({"columnar": 100, "msgpack": 101, "flatbuffers-columns": 100}) == "columnar"  # first smallest
    assert choose({"columnar": 100, "msgpack": 100, "flatbuffers-columns": 99}) == "flatbuffers-columns"
    # the boundary: the smallest file at SMALL_FILE bytes is still small; one byte more is not
    assert choose({"msgpack": SMALL_FILE + 1, "columnar": SMALL_FILE}) == "columnar"
    assert choose({"msgpack": SMALL_FILE + 2, "columnar": SMALL_FILE + 1}) == "msgpack"


def test_one_candidate_and_none() -> None:
    assert choose({"flatbuffers-columns": 7}, ("flatbuffers-columns",)) == "flatbuffers-columns"
    assert choose({"json": 7, "columnar": 9}) == "columnar"  # only the order's codecs are weighed
    with pytest.raises(ValueError, match="no size"):
        choose({"json": 7})


@given(st.fixed_dictionaries({c: st.integers(1, 10**7) for c in TORCH_CANDIDATES}))
def test_the_choice_is_within_the_margin_and_no_faster_codec_was(sizes: dict[str, int]) -> None:
    chosen = choose(sizes)
    smallest = min(sizes.values())
    margin = CHOICE_MARGIN if smallest > SMALL_FILE else 0
    assert sizes[chosen] <= smallest * (1 + margin)
    for faster in TORCH_CANDIDATES[: TORCH_CANDIDATES.index(chosen)]:
        assert sizes[faster] > smallest * (1 + margin)
    if sizes[chosen] > smallest:
        assert any(sizes[c] == smallest for c in TORCH_CANDIDATES[TORCH_CANDIDATES.index(chosen) + 1 :])
