"""Hypothesis strategies for lite-interpreter debug tables (what torch's mobile runtime renders from)."""

from __future__ import annotations

from hypothesis import strategies as st

from tracepack.torch.torchscript.render import CallFrame, HandleInfo, LiteDebugTable, SourceRange

__all__ = ["lite_tables", "source_ranges"]

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
_names = st.one_of(
    st.sampled_from(["__torch__.M", "__torch__.torch.nn.modules.linear.Linear", "forward", "aten::mul", "", "0"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12),
)


@st.composite
def source_ranges(draw: st.DrawFn) -> SourceRange:
    """A byte range of a source text, in a file or not (the range may run past the text, as torch allows)."""
    text = draw(_text)
    size = len(text.encode())
    start = draw(st.integers(0, size + 2))
    return SourceRange(
        text,
        draw(st.one_of(st.none(), _names)),
        draw(st.integers(0, 2**40)),
        start,
        draw(st.integers(start, size + 4)),
    )


@st.composite
def lite_tables(draw: st.DrawFn) -> LiteDebugTable:
    """A table whose handles share call prefixes, ranges and names, with and without known types."""
    ranges = draw(st.lists(source_ranges(), min_size=1, max_size=4))
    pick_range = st.one_of(st.none(), st.sampled_from(ranges))
    modules = st.one_of(st.none(), st.tuples(_names, _names))
    frames = st.builds(CallFrame, modules, pick_range, _names)
    shared = draw(st.lists(frames, max_size=3))
    known = draw(st.one_of(st.none(), st.frozensets(_names, max_size=4)))
    table = LiteDebugTable(draw(_names), known_types=known)
    for handle in draw(st.sets(st.integers(0, 2**40), max_size=6)):
        calls = shared[: draw(st.integers(0, len(shared)))] + draw(st.lists(frames, max_size=2))
        table.handles[handle] = HandleInfo(handle, draw(_names), draw(pick_range), tuple(calls))
    return table
