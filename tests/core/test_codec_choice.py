"""``codecs.choose``: what ``convert`` writes for a torch input, given each candidate's file size."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracepack.codecs import CHOICE_MARGIN, TORCH_CANDIDATES, choose


def test_a_faster_codec_within_the_margin_wins() -> None:
    # the 8-node ladder model: MessagePack 857 B, the column layout 830 B (3.3% smaller)
    assert choose({"columnar": 930, "msgpack": 857, "flatbuffers-columns": 830}) == "msgpack"
    # 35 nodes: the column layout 8% smaller than columnar, MessagePack far behind
    assert choose({"columnar": 2050, "msgpack": 2170, "flatbuffers-columns": 1885}) == "flatbuffers-columns"
    assert choose({"columnar": 2367, "msgpack": 3020, "flatbuffers-columns": 2390}) == "columnar"
    assert choose({"columnar": 100, "msgpack": 105, "flatbuffers-columns": 100}) == "msgpack"  # at the margin
    assert choose({"columnar": 100, "msgpack": 106, "flatbuffers-columns": 100}) == "columnar"


def test_one_candidate_and_none() -> None:
    assert choose({"flatbuffers-columns": 7}, ("flatbuffers-columns",)) == "flatbuffers-columns"
    assert choose({"json": 7, "columnar": 9}) == "columnar"  # only the order's codecs are weighed
    with pytest.raises(ValueError, match="no size"):
        choose({"json": 7})


@given(st.fixed_dictionaries({c: st.integers(1, 10**7) for c in TORCH_CANDIDATES}))
def test_the_choice_is_within_the_margin_and_no_faster_codec_was(sizes: dict[str, int]) -> None:
    chosen = choose(sizes)
    smallest = min(sizes.values())
    assert sizes[chosen] <= smallest * (1 + CHOICE_MARGIN)
    for faster in TORCH_CANDIDATES[: TORCH_CANDIDATES.index(chosen)]:
        assert sizes[faster] > smallest * (1 + CHOICE_MARGIN)
    if sizes[chosen] > smallest:
        assert any(sizes[c] == smallest for c in TORCH_CANDIDATES[TORCH_CANDIDATES.index(chosen) + 1 :])
