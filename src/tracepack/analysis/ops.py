"""Operators as people spell them, copied from torch tools, and the one match every command uses.

The same ATen operator is printed many ways:

==========================================================  ==========================================
spelling                                                    printed by
==========================================================  ==========================================
``torch.ops.aten.linear.default``                           torch.export's ``model.json`` targets, fx
``aten.linear.default``                                     ``str(torch.ops.aten.linear.default)``
``<OpOverload(op='aten.linear', overload='default')>``      ``repr`` of an overload (``OpOverloadPacket``
                                                            without the overload)
``aten::linear``                                            torch.profiler (key averages, Chrome traces),
                                                            the lite interpreter, ``graph`` dumps
``aten::add.Tensor``                                        ``torch.jit.export_opnames``, mobile op lists
``aten::add.Tensor(Tensor self, Tensor other, ...) -> T``   a schema, as errors and ``_schema`` print it
``<EdgeOpOverload: aten.linear.default>: schema = ...``     ExecuTorch's edge dialect
``linear``                                                  people
==========================================================  ==========================================

:func:`op_words` turns each into dotted words (``aten``, ``linear``, ``default``); a spelling matches
an op when its words appear, in order and next to each other, among the op's words
(:func:`op_matches`): ``linear``, ``aten::linear``, ``aten.linear`` and ``aten::linear.default`` all
match ``torch.ops.aten.linear.default``; ``lin`` and ``aten::linear_backward`` do not.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["op_matches", "op_words", "profiler_name", "same_op"]

_OVERLOAD_REPR = re.compile(r"<OpOverload(?:Packet)?\(op='([^']*)'(?:, overload='([^']*)')?\)>")
_EDGE_REPR = re.compile(r"<EdgeOpOverload: ([^>]*)>")


@lru_cache(maxsize=4096)
def op_words(spelling: str) -> tuple[str, ...]:
    """The dotted words of an op, however it is spelled (see the module's table): ``aten::add.Tensor``,
    ``torch.ops.aten.add.Tensor`` -> ``("aten", "add", "Tensor")`` and ``("torch", "ops", "aten", "add",
    "Tensor")``; the namespace separator ``::`` is a dot, and a schema's argument list is dropped."""
    text = spelling.strip()
    m = _OVERLOAD_REPR.fullmatch(text)
    if m is not None:
        text = m.group(1) + (f".{m.group(2)}" if m.group(2) else "")
    else:
        m = _EDGE_REPR.match(text)
        if m is not None:
            text = m.group(1)
    text = text.split("(", 1)[0].strip()  # a schema: name(arguments) -> returns
    return tuple(w for w in text.replace("::", ".").split(".") if w)


def _within(want: tuple[str, ...], have: tuple[str, ...]) -> bool:
    n = len(want)
    return bool(n) and any(have[i : i + n] == want for i in range(len(have) - n + 1))


def op_matches(spelling: str, target: str) -> bool:
    """Whether ``spelling`` (any form of the table) names the op ``target`` (any form too)."""
    return _within(op_words(spelling), op_words(target))


def _core(words: tuple[str, ...]) -> tuple[str, ...]:
    """``(namespace, name)`` or ``(name,)``: the words without ``torch.ops`` and the overload."""
    if words[:2] == ("torch", "ops"):
        words = words[2:]
    return words[:2] if len(words) >= 2 else words


def same_op(a: str, b: str) -> bool:
    """Whether two spellings name the same operator, its overload aside when either leaves it out:
    ``aten::linear`` and ``torch.ops.aten.linear.default``; ``aten::add.Tensor`` and
    ``aten.add.Tensor``, not ``aten.add.Scalar``; ``linear`` and ``aten::linear``."""
    wa, wb = op_words(a), op_words(b)
    if wa[:2] == ("torch", "ops"):
        wa = wa[2:]
    if wb[:2] == ("torch", "ops"):
        wb = wb[2:]
    if not wa or not wb:
        return False
    short, long_ = (wa, wb) if len(wa) <= len(wb) else (wb, wa)
    if len(short) == 1:  # a bare name: the other's name
        return short[0] == (long_[1] if len(long_) >= 2 else long_[0])
    return long_[: len(short)] == short


def profiler_name(target: str) -> str:
    """The op as torch.profiler names it: ``torch.ops.aten.linear.default`` -> ``aten::linear``; a
    target that is not an operator (``_operator.getitem``) as it is."""
    words = op_words(target)
    core = _core(words)
    if words[:2] == ("torch", "ops") and len(core) == 2:
        return f"{core[0]}::{core[1]}"
    if len(words) == 3 and words[0] in ("aten", "prims", "quantized_decomposed"):
        return f"{words[0]}::{words[1]}"
    return target
