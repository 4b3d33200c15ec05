"""Legacy string parsers: exact round trips, and an honest None for what they cannot represent."""

from __future__ import annotations

import traceback

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import frame_keys, stack_strings
from tracepack.traces import (
    STYLE_PYTHON,
    STYLE_STRIPPED,
    FrameKey,
    ModuleKey,
    parse_module_hierarchy,
    parse_nn_module_stack,
    parse_stack_trace,
    render_frames,
    render_module_hierarchy,
    render_nn_module_stack,
)


@given(text=stack_strings())
def test_stack_strings_round_trip(text: str) -> None:
    parsed = parse_stack_trace(text)
    assert parsed is not None
    frames, style = parsed
    assert render_frames(frames, style) == text


@given(text=st.text(max_size=200))
def test_any_text_either_round_trips_or_is_refused(text: str) -> None:
    parsed = parse_stack_trace(text)
    if parsed is not None:
        assert render_frames(*parsed) == text


def _no_recursion(frames: list[FrameKey]) -> bool:
    """format_list folds 4+ identical frames into a "[Previous line repeated ...]" note."""
    # CPython counts a repeat by file, line number and function only.
    keys = [(f.file, f.line, f.name) for f in frames]
    return all(len({keys[i + k] for k in range(4)}) > 1 for i in range(len(keys) - 3))


@given(frames=st.lists(frame_keys(), min_size=1, max_size=6).filter(_no_recursion))
def test_python_style_matches_traceback_format_list(frames: list[FrameKey]) -> None:
    summaries = [traceback.FrameSummary(f.file, f.line, f.name, line=f.text) for f in frames]
    expected = "".join(traceback.format_list(summaries))
    plain = [f._replace(col=-1, end_col=-1) for f in frames]
    assert render_frames(plain, STYLE_PYTHON) == expected
    assert render_frames(plain, STYLE_STRIPPED) == expected.strip()


def test_torch_stack_trace_form() -> None:
    text = 'File "/p/m.py", line 17, in forward\n    x = b(x)\n  File "/p/m.py", line 9, in b\n    return y'
    parsed = parse_stack_trace(text)
    assert parsed is not None
    frames, style = parsed
    assert style == STYLE_STRIPPED
    assert frames == [FrameKey("/p/m.py", 17, "forward", "x = b(x)"), FrameKey("/p/m.py", 9, "b", "return y")]


def test_recursion_notes_are_kept() -> None:
    frame = traceback.FrameSummary("m.py", 3, "f", line="return f(x)")
    text = "".join(traceback.format_list([frame] * 6))
    assert "[Previous line repeated 3 more times]" in text
    parsed = parse_stack_trace(text)
    assert parsed is not None
    assert render_frames(*parsed) == text


def test_caret_lines_are_kept_as_annotations() -> None:
    text = '  File "m.py", line 3, in f\n    return a + b\n           ~~^~~\n'
    parsed = parse_stack_trace(text)
    assert parsed is not None
    assert parsed[0][0].annotation == "           ~~^~~\n"
    assert render_frames(*parsed) == text


@pytest.mark.parametrize(
    "text",
    [
        "not a trace",
        'File "m.py", line x, in f',
        '  File "m.py", line 3, in f\n    code',  # python style must end with a newline
        '  File "m.py", line 99999999999999999999999, in f\n',  # beyond i64
    ],
)
def test_unrepresentable_traces_are_refused(text: str) -> None:
    assert parse_stack_trace(text) is None


_key = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,12}", fullmatch=True)
_path = st.text(alphabet=st.characters(blacklist_characters=";", blacklist_categories=("Cs",)), max_size=20)
_type = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,20}", fullmatch=True)


@given(entries=st.lists(st.builds(ModuleKey, _key, _path, _type, method=st.just("")), min_size=1, max_size=5))
def test_nn_module_stack_round_trip(entries: list[ModuleKey]) -> None:
    text = render_nn_module_stack(entries)
    assert parse_nn_module_stack(text) == entries
    assert render_nn_module_stack(parse_nn_module_stack(text) or []) == text


def test_nn_module_stack_with_commas_in_the_path() -> None:
    text = "L__self__,,M;L__self___a,L['self'].a[0, 1],torch.nn.Linear"
    entries = parse_nn_module_stack(text)
    assert entries is not None
    assert entries[1] == ModuleKey("L__self___a", "L['self'].a[0, 1]", "torch.nn.Linear")


@pytest.mark.parametrize("text", ["", "nocomma", "a,b;c"])
def test_bad_nn_module_stacks_are_refused(text: str) -> None:
    assert parse_nn_module_stack(text) is None


_ident = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True)


@given(entries=st.lists(st.builds(ModuleKey, _ident, st.just(""), _ident, _ident), min_size=1, max_size=6))
def test_module_hierarchy_round_trip(entries: list[ModuleKey]) -> None:
    text = render_module_hierarchy(entries)
    assert parse_module_hierarchy(text) == entries


def test_module_hierarchy_real_example() -> None:
    text = (
        "TOP(ResNet)::forward.SELF(ResNet)::_forward_impl.layer1(Sequential)::forward."
        "0(BasicBlock)::forward.conv1(Conv2d)::forward"
    )
    entries = parse_module_hierarchy(text)
    assert entries is not None
    assert [e.key for e in entries] == ["TOP", "SELF", "layer1", "0", "conv1"]
    assert render_module_hierarchy(entries) == text
