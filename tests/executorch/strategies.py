"""Hypothesis strategies for runtime log text: the reference forms the runtimes print, in noise."""

from __future__ import annotations

from hypothesis import strategies as st

__all__ = ["Reference", "log_lines", "noise"]

#: Text that holds no reference (no "instruction", no "debug_handles:{").
noise = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cs",), blacklist_characters="\n\r{}\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
    ),
    max_size=30,
).filter(lambda t: "instruction" not in t and "debug_handles" not in t)

_ops = st.sampled_from(["aten::embedding.out", "aten::add.out", "aten::_softmax.out", "my_ns::op"])

Reference = tuple[str, int, int, tuple[int, ...]]  # kind, chain, instruction, handles


@st.composite
def log_lines(draw: st.DrawFn) -> tuple[str, list[Reference]]:
    """A line with 0-3 references among noise, and the references it holds, left to right."""
    parts: list[str] = [draw(noise)]
    refs: list[Reference] = []
    for _ in range(draw(st.integers(0, 3))):
        if draw(st.booleans()):
            chain, instr = draw(st.integers(0, 9)), draw(st.integers(0, 2**31))
            op = draw(_ops)
            err = draw(st.integers(0, 255))
            parts.append(
                f"[method.cpp:1483] KernelCall failed at instruction {chain}:{instr} in operator {op}: 0x{err:x}"
            )
            refs.append(("instruction", chain, instr, ()))
        else:
            hs = tuple(draw(st.lists(st.integers(0, 2**40), min_size=1, max_size=3)))
            parts.append("Debug info for handle(s): debug_handles:{" + ", ".join(map(str, hs)) + "}, was not found.")
            refs.append(("handle", 0, 0, hs))
        parts.append(" " + draw(noise))
    return "".join(parts), refs


#: Op names a profiler prints for the profile sample's nodes, and others it prints around them.
PROFILE_OPS = ["aten::embedding", "aten::linear", "aten::relu", "aten::add", "aten::layer_norm", "aten::softmax"]
OTHER_OPS = ["aten::empty", "aten::view", "aten::addmm", "aten::copy_", "my::op"]


@st.composite
def profiler_traces(draw: st.DrawFn) -> list[dict[str, object]]:
    """Chrome-trace event lists as torch.profiler writes them: complete events on a few threads, each
    top-level op possibly holding child ops, with names from the sample model's ops and others."""
    events: list[dict[str, object]] = []
    ts = 0.0
    for _ in range(draw(st.integers(0, 30))):
        name = draw(st.sampled_from(PROFILE_OPS + OTHER_OPS))
        dur = float(draw(st.integers(2, 50)))
        tid = draw(st.sampled_from([1, 1, 2]))
        events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
                       "args": {"Ev Idx": len(events)}})  # fmt: skip
        for k in range(draw(st.integers(0, 2))):
            child = draw(st.sampled_from(OTHER_OPS + PROFILE_OPS))
            events.append({"ph": "X", "cat": "cpu_op", "name": child, "pid": 1, "tid": tid, "ts": ts + 1 + k,
                           "dur": 0.5, "args": {"Ev Idx": len(events)}})  # fmt: skip
        ts += dur + draw(st.integers(0, 3))
    if draw(st.booleans()):
        events.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}})
    return events
