"""Hypothesis strategies for tracepack documents.

Documents are built through :class:`tracepack.DocumentBuilder`, so they are
valid by construction; each example also carries the *inputs* it was built
from (legacy strings, frame lists), so tests can check that what comes back
equals what went in.

The shapes that matter are all here: deep stacks that share callers, unique
stacks, unicode file names and source lines, line numbers up to 2**63-1,
empty tables, metadata that can and cannot be lifted, every argument kind,
TorchScript sources and ranges, debug handles.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from tracepack import Document, DocumentBuilder, Generic, SymInt, Tensor
from tracepack.traces import STYLE_PYTHON, STYLE_STRIPPED, FrameKey, ModuleKey, render_frames

__all__ = ["BuiltDocument", "built_documents", "documents", "frame_keys", "stack_strings"]

# Text without the characters that cannot appear inside one traceback line.
_line_text = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cs",), blacklist_characters="\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
    ),
    max_size=40,
)
_identifier = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True)
_file_names = st.one_of(
    st.sampled_from(
        ["/home/user/project/model.py", "/home/user/.venv/lib/python3.11/site-packages/torch/nn/modules/module.py"]
    ),
    _line_text.filter(lambda s: s.strip() == s and s).map(lambda s: f"/home/user/{s}.py"),
)
_line_numbers = st.one_of(st.integers(1, 5000), st.just(0), st.integers(0, 2**63 - 1))


@st.composite
def frame_keys(draw: st.DrawFn) -> FrameKey:
    """One frame: file, line, function, stripped source text, optional columns."""
    text = draw(_line_text).strip()
    has_cols = draw(st.booleans())
    col = draw(st.integers(0, 200)) if has_cols else -1
    end_col = draw(st.integers(col, 400)) if has_cols else -1
    return FrameKey(draw(_file_names), draw(_line_numbers), draw(_identifier), text, col, end_col)


@st.composite
def _frame_pool(draw: st.DrawFn) -> list[FrameKey]:
    return draw(st.lists(frame_keys(), min_size=1, max_size=12))


@st.composite
def stack_strings(draw: st.DrawFn) -> str:
    """A legacy stack trace string, as torch.fx or ``traceback.format_list`` writes it."""
    frames = draw(st.lists(frame_keys(), min_size=1, max_size=8))
    plain = [f._replace(col=-1, end_col=-1) for f in frames]
    style = draw(st.sampled_from([STYLE_PYTHON, STYLE_STRIPPED]))
    return render_frames(plain, style)


_module_entry = st.builds(
    ModuleKey,
    _identifier,
    st.one_of(st.just(""), _line_text.filter(lambda s: ";" not in s)),
    st.one_of(st.just("torch.nn.modules.linear.Linear"), _identifier.map(lambda s: f"__main__.{s}")),
)


@dataclass
class BuiltDocument:
    """A generated document and the inputs it was built from."""

    doc: Document
    #: node name -> the stack_trace string given as metadata (None when none was given).
    stack_traces: dict[str, str | None] = field(default_factory=dict)
    #: node name -> the frames given directly.
    frames: dict[str, list[FrameKey]] = field(default_factory=dict)
    #: node name -> nn_module_stack string given as metadata.
    module_stacks: dict[str, str | None] = field(default_factory=dict)
    #: node name -> the full metadata given, in order.
    meta: dict[str, dict[str, str]] = field(default_factory=dict)
    #: debug handle -> op name.
    handles: dict[int, str] = field(default_factory=dict)
    #: source index -> text.
    sources: dict[int, str] = field(default_factory=dict)


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    _line_text,
)
_arguments = st.one_of(
    _scalars,
    _identifier.map(Tensor),
    _identifier.map(SymInt),
    st.lists(_identifier.map(Tensor), min_size=1, max_size=4),
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=5),
    st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=3),
    st.lists(st.booleans(), min_size=1, max_size=3),
    st.lists(_line_text, min_size=1, max_size=3),
    st.builds(
        Generic,
        _identifier.map(lambda s: f"as_{s}"),
        st.recursive(
            _scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(_identifier, c, max_size=3), max_leaves=6
        ),
    ),
)


@st.composite
def built_documents(draw: st.DrawFn, *, max_nodes: int = 25) -> BuiltDocument:
    """A random document, with the inputs it was built from."""
    b = DocumentBuilder(producer=draw(_identifier), producer_version=draw(_line_text))
    out = BuiltDocument(doc=None)  # type: ignore[arg-type]
    for k, v in draw(st.lists(st.tuples(_line_text, _line_text), max_size=3)):
        b.add_metadata(k, v)
    pool = draw(_frame_pool())
    # A few "call paths" through the pool: stacks drawn from them share prefixes (callers).
    paths = draw(st.lists(st.lists(st.sampled_from(pool), min_size=1, max_size=20), min_size=1, max_size=5))
    modules = draw(st.lists(st.lists(_module_entry, min_size=1, max_size=5), min_size=1, max_size=4))
    n_nodes = draw(st.integers(0, max_nodes))
    for i in range(n_nodes):
        name = f"n{i}_{draw(_identifier)}"
        path = draw(st.sampled_from(paths))
        depth = draw(st.integers(1, len(path)))
        frames = path[:depth]
        kind = draw(st.sampled_from(["meta", "frames", "frame_summaries", "none", "odd"]))
        meta: dict[str, str] = {}
        stack_arg: Any = None
        if kind == "meta":
            plain = [f._replace(col=-1, end_col=-1) for f in frames]
            meta["stack_trace"] = render_frames(plain, draw(st.sampled_from([STYLE_PYTHON, STYLE_STRIPPED])))
        elif kind == "odd":
            meta["stack_trace"] = draw(_line_text)  # usually not a trace: kept verbatim
        elif kind == "frames":
            stack_arg = frames
            out.frames[name] = frames
        elif kind == "frame_summaries":
            stack_arg = traceback.StackSummary.from_list(
                [traceback.FrameSummary(f.file, f.line, f.name, line=f.text) for f in frames]
            )
            out.frames[name] = [f._replace(col=-1, end_col=-1) for f in frames]
        if draw(st.booleans()):
            mod = draw(st.sampled_from(modules))
            meta["nn_module_stack"] = ";".join(
                f"{e.key},{e.path},{e.type}" for e in mod[: draw(st.integers(1, len(mod)))]
            )
        for k, v in draw(st.lists(st.tuples(_identifier, _line_text), max_size=3)):
            meta.setdefault(k, v)
        inputs = [(f"a{j}", a) for j, a in enumerate(draw(st.lists(_arguments, max_size=4)))]
        outputs = draw(st.lists(_arguments, max_size=2))
        b.add_node(name, draw(_identifier), inputs=inputs, outputs=outputs, stack_trace=stack_arg, meta=meta)
        out.stack_traces[name] = meta.get("stack_trace")
        out.module_stacks[name] = meta.get("nn_module_stack")
        out.meta[name] = meta
    for j in range(draw(st.integers(0, 4))):
        b.add_value(
            f"v{j}",
            dtype=draw(st.sampled_from(["float32", "int64", ""])),
            shape=draw(st.lists(st.one_of(st.integers(0, 2**40), st.just("s0"), st.just("2*s1")), max_size=4)),
            device=draw(st.sampled_from(["cpu", "cuda:0", ""])),
            requires_grad=draw(st.booleans()),
        )
    b.set_graph(name=draw(_identifier), inputs=[Tensor("x")], outputs=draw(st.lists(_arguments, max_size=2)))
    texts = draw(st.lists(st.text(max_size=80), max_size=3))
    ranges = []
    for text in texts:
        src = b.source(text, draw(st.one_of(st.none(), _file_names)), draw(st.integers(0, 10_000)))
        out.sources[src] = text
        start = draw(st.integers(0, len(text.encode())))
        ranges.append(b.source_range(src, start, draw(st.integers(start, len(text.encode())))))
    if ranges:
        rows = [
            (draw(st.integers(0, 10_000)), draw(st.sampled_from(ranges)), draw(st.integers(-1, 50))) for _ in range(3)
        ]
        b.add_debug_file("code/__torch__/m.py", rows, legacy=draw(st.booleans()))
    handles = draw(st.lists(st.integers(-(2**63), 2**63 - 1), unique=True, max_size=5))
    for h in handles:
        op = draw(_identifier)
        path = draw(st.sampled_from(paths))
        stack = b.stack_of_frames(path)
        module = b.module(draw(st.sampled_from(modules)))
        b.add_debug_handle(h, stack=stack, module=module, op=op, source_range=draw(st.sampled_from([0, *ranges])))
        out.handles[h] = op
    if draw(st.booleans()):
        b.add_extension("test/extra", draw(st.dictionaries(_identifier, st.integers(), max_size=3)))
    out.doc = b.build()
    return out


def documents(**kwargs: Any) -> st.SearchStrategy[Document]:
    """Random documents (without their inputs)."""
    return built_documents(**kwargs).map(lambda b: b.doc)
