"""``tracepack.query``: node filters, checked against what torch wrote into the sample's model.json."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tracepack
from tests.ux.helpers import MODEL_JSON, PT2, torch_frames, torch_module_path, torch_nodes
from tracepack.errors import UsageError
from tracepack.query import NodeFilter, find_nodes, parse_source


@pytest.fixture(scope="module")
def doc() -> tracepack.Document:
    return tracepack.load(MODEL_JSON)


def _names(doc: tracepack.Document, f: NodeFilter) -> list[str]:
    return [row.name for row in find_nodes(doc, f)]


def test_no_filter_lists_every_node_in_graph_order(doc: tracepack.Document) -> None:
    assert _names(doc, NodeFilter()) == [n["name"] for n in torch_nodes()]


@pytest.mark.parametrize("op", ["linear", "aten.linear", "torch.ops.aten.linear.default", "mul", "aten.mul.Tensor"])
def test_op_matches_dotted_words_of_the_target(doc: tracepack.Document, op: str) -> None:
    want = op.split(".")
    expected = [
        n["name"]
        for n in torch_nodes()
        if any(n["target"].split(".")[i : i + len(want)] == want for i in range(len(n["target"].split("."))))
    ]
    assert expected, op
    assert _names(doc, NodeFilter(op=op)) == expected


def test_op_is_not_a_substring_match(doc: tracepack.Document) -> None:
    assert _names(doc, NodeFilter(op="lin")) == []


@pytest.mark.parametrize("module", ["blocks.0.attn", "blocks.1", "embed", "blocks.0.ff.net.1"])
def test_module_path_and_its_submodules(doc: tracepack.Document, module: str) -> None:
    expected = [
        n["name"]
        for n in torch_nodes()
        if torch_module_path(n) == module or torch_module_path(n).startswith(module + ".")
    ]
    assert expected, module
    assert _names(doc, NodeFilter(module=module)) == expected


def test_module_prefix_must_end_at_a_dot(doc: tracepack.Document) -> None:
    assert _names(doc, NodeFilter(module="blocks.0.at")) == []
    assert _names(doc, NodeFilter(module="")) == _names(doc, NodeFilter())


@pytest.mark.parametrize(
    ("source", "file", "line"),
    [
        ("export_sample.py:64", "export_sample.py", 64),
        ("export_sample.py", "export_sample.py", None),
        ("torch/nn/modules/linear.py:134", "torch/nn/modules/linear.py", 134),
    ],
)
def test_source_matches_any_frame_of_the_stack(
    doc: tracepack.Document, source: str, file: str, line: int | None
) -> None:
    expected = [
        n["name"]
        for n in torch_nodes()
        if any((f == file or f.endswith("/" + file)) and (line is None or n_ == line) for f, n_ in torch_frames(n))
    ]
    assert expected, source
    assert _names(doc, NodeFilter(source=source)) == expected


def test_match_is_a_regex_search_and_filters_combine(doc: tracepack.Document) -> None:
    expected = [n["name"] for n in torch_nodes() if re.search(r"_[13]$", n["name"]) and "linear" in n["target"]]
    assert expected
    assert _names(doc, NodeFilter(match=r"_[13]$", op="linear")) == expected


def test_rows_carry_the_innermost_frame_and_module(doc: tracepack.Document) -> None:
    rows = {r.name: r for r in find_nodes(doc)}
    for n in torch_nodes():
        frames = torch_frames(n)
        row = rows[n["name"]]
        assert row.module == torch_module_path(n)
        if frames:
            assert row.source is not None
            assert (row.source[0], row.source[1]) == frames[-1]
            assert row.stack_depth == len(frames)
        else:
            assert row.source is None


def test_lazy_reader_finds_the_same(doc: tracepack.Document, tmp_path: object) -> None:
    import pathlib

    assert isinstance(tmp_path, pathlib.Path)
    path = tmp_path / "m.tpk"
    tracepack.dump(doc, path, codec="flatbuffers", compression="none")
    f = NodeFilter(module="blocks.1", source="export_sample.py")
    with tracepack.open(path) as lazy:
        assert [r.as_json() for r in find_nodes(lazy, f)] == [r.as_json() for r in find_nodes(doc, f)]


def test_pt2_reads_directly() -> None:
    assert _names(tracepack.load(PT2), NodeFilter(op="linear")) == _names(
        tracepack.load(MODEL_JSON), NodeFilter(op="linear")
    )


def test_bad_filters_are_usage_errors() -> None:
    with pytest.raises(UsageError, match=r"--match: bad regular expression"):
        NodeFilter(match="(")
    with pytest.raises(UsageError, match="empty line number"):
        NodeFilter(source="model.py:")


@given(
    st.text(st.characters(blacklist_characters=":", blacklist_categories=("Cs",)), min_size=1),
    st.one_of(st.none(), st.integers(0, 10**9)),
)
def test_parse_source_round_trips(file: str, line: int | None) -> None:
    text = file if line is None else f"{file}:{line}"
    assert parse_source(text) == (file, line)


@given(st.text(min_size=1), st.integers(0, 10**6))
def test_parse_source_takes_the_last_colon(path: str, line: int) -> None:
    # a path with colons in it (C:/x.py, a URL) keeps them; the number after the last one is the line
    assert parse_source(f"{path}:{line}") == (path, line)
