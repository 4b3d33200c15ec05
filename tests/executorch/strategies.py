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
