"""Find runtime handle references in text and rewrite them into module paths and Python stacks.

Recognised references (each a regular expression over one line):

``KernelCall failed at instruction C:I in operator OP: 0xERR``
    ExecuTorch's runtime (``method.cpp``) when a kernel fails; ``C`` is the chain, ``I`` the
    instruction; the method is not printed (``--method`` picks it, default ``forward``). Other
    ``... failed at instruction [C:]I`` messages (delegate calls) are read the same way.
``... num delegates N at instruction I``, ``... exceeded at chain C, instruction I``
    the runtime's other messages that name an instruction (a bad delegate index, the instruction limit).
``debug_handles:{N[, M...]}``
    the TorchScript lite interpreter when the file on the device has no debug maps
    (``Debug info for handle(s): debug_handles:{43}, was not found.``).

Like ``ndk-stack``, every input line is kept, in order; a line with a reference is followed by what
it stands for, indented (``--style torch``, the default, prints stacks and module paths the way torch
and ExecuTorch's Inspector print them; ``--style tracepack`` prints tracepack's forms). A mobile
``debug_handles:{N}`` line is replaced by what the lite interpreter prints when the debug maps are
present (``Module hierarchy:...`` and the TorchScript traceback), where a renderer of that form is
installed. References the artifact does not know are left as they are and reported as unresolved.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tracepack.errors import NotFoundError, UsageError
from tracepack.runtime.symbols import HandleAnswer, InstructionAnswer, Symbolicator, pick
from tracepack.traces import parse_stack_trace, render_frames

__all__ = ["Reference", "find_references", "render_handle", "render_instruction", "symbolicate_lines"]

INSTRUCTION_RE = re.compile(r"failed at instruction (?:(\d+):)?(\d+)(?: in operator (\S+?):?(?=\s|$))?")
#: The runtime's other messages that name an instruction (libexecutorch's format strings):
#: ``DELEGATE_CALL index %u >= num delegates %zu at instruction %zu`` and
#: ``Instruction execution limit (%zu) exceeded at chain %zu, instruction %zu``.
OTHER_INSTRUCTION_RE = re.compile(r"num delegates \d+ at instruction (\d+)|exceeded at chain (\d+), instruction (\d+)")
MOBILE_RE = re.compile(r"debug_handles:\{(\d+(?:\s*,\s*\d+)*)\}")
#: The whole sentence the lite interpreter prints for handles missing from the file's maps.
MOBILE_NOT_FOUND = "Debug info for handle(s): debug_handles:{%s}, was not found."
STYLES = ("torch", "tracepack")


@dataclass(frozen=True)
class Reference:
    """A handle reference found in a line."""

    line: int
    start: int
    end: int
    kind: str
    """``instruction`` or ``handle``."""
    chain: int = 0
    instruction: int = 0
    handles: tuple[int, ...] = ()
    op: str = ""


#: The most digits a chain, instruction or handle number has (a 64-bit size_t: 20); a longer run of digits
#: in a log is no reference, and is left as it is (converting it could cost quadratic time).
NUMBER_DIGITS = 20


def _fits(*groups: str | None) -> bool:
    return all(g is None or len(g) <= NUMBER_DIGITS for g in groups)


def find_references(line: str, number: int = 0) -> list[Reference]:
    """Every reference in one line, left to right (a number of more than :data:`NUMBER_DIGITS` digits
    makes none)."""
    out = []
    for m in INSTRUCTION_RE.finditer(line):
        if not _fits(m.group(1), m.group(2)):
            continue
        chain = int(m.group(1)) if m.group(1) is not None else 0
        out.append(Reference(number, m.start(), m.end(), "instruction", chain, int(m.group(2)), (), m.group(3) or ""))
    for m in OTHER_INSTRUCTION_RE.finditer(line):
        if not _fits(*m.groups()):
            continue
        chain = int(m.group(2)) if m.group(2) is not None else 0
        instruction = int(m.group(1) if m.group(1) is not None else m.group(3))
        out.append(Reference(number, m.start(), m.end(), "instruction", chain, instruction))
    for m in MOBILE_RE.finditer(line):
        items = re.split(r"\s*,\s*", m.group(1))
        if not _fits(*items):
            continue
        out.append(Reference(number, m.start(), m.end(), "handle", handles=tuple(map(int, items))))
    out.sort(key=lambda r: r.start)
    return out


def _indent(text: str, pad: str) -> list[str]:
    return [pad + ln if ln else ln for ln in text.splitlines()]


def _traceback(stack: str | None, style: str) -> str:
    """A stack in the form asked for: as stored (torch), or ``traceback.format_list``'s (tracepack)."""
    if not stack:
        return ""
    if style == "tracepack":
        parsed = parse_stack_trace(stack)
        if parsed is not None:
            return render_frames(parsed[0], 0).rstrip("\n")
    return stack


def render_handle(h: HandleAnswer, style: str = "torch", pad: str = "  ") -> list[str]:
    """The lines that explain one handle."""
    lines = []
    where = f"{h.module_path} ({h.module_type})" if h.module_path or h.module_type else "(top level)"
    if h.nodes:
        lines.append(f"{pad}debug handle {h.handle}: {h.op} in {where}")
        if style == "tracepack":
            lines.append(f"{pad}  module hierarchy: {h.module_hierarchy}")
        else:
            lines.append(f"{pad}  nn_module_stack: {h.nodes[0].nn_module_stack or ''}")
        groups: dict[str | None, list[str]] = {}
        for n in h.nodes:
            groups.setdefault(n.stack_trace, []).append(f"{n.name} ({n.op})")
        for stack, names in groups.items():
            lines.append(f"{pad}  node{'s' if len(names) > 1 else ''} {', '.join(names)}:")
            lines.extend(_indent(_traceback(stack, style), pad + "    "))
        return lines
    lines.append(f"{pad}debug handle {h.handle}: {h.op}")
    if style == "torch" and h.runtime_text:
        # What the lite interpreter prints for the handle with its maps present, as it prints it.
        lines.extend(_indent(h.runtime_text.rstrip("\n"), pad))
        return lines
    hier = h.runtime_hierarchy if style == "torch" and h.runtime_hierarchy else h.module_hierarchy
    lines.append(f"{pad}  Module hierarchy:{hier}")
    if h.source_range is not None:
        file, start, end = h.source_range
        lines.append(f"{pad}  source range: {file or '<unknown>'} bytes {start}-{end}")
    lines.extend(_indent(_traceback(h.stack_trace, style), pad + "  "))
    if style == "torch" and h.runtime_note:
        lines.append(f"{pad}  note: {h.runtime_note}")
    return lines


def render_instruction(a: InstructionAnswer, style: str = "torch", pad: str = "  ") -> list[str]:
    """The lines that explain one instruction."""
    handles = ", ".join(str(h.handle) for h in a.handles)
    call = f" (delegate call to {a.delegate})" if a.delegate else ""
    head = f"{pad}-> {a.method} instruction {a.chain}:{a.instruction}: {a.op}{call}"
    lines = [head + (f" (debug handle{'s' if len(a.handles) > 1 else ''} {handles})" if a.handles else "")]
    if a.frames_trace:
        lines.extend(_indent(_traceback(a.frames_trace, style), pad + "    "))
    for h in a.handles:
        lines.extend(render_handle(h, style, pad + "   "))
    return lines


def _resolve(ref: Reference, syms: Sequence[Symbolicator], method: str | None) -> list[Any]:
    if ref.kind == "instruction":
        return [pick(syms, method).instruction(ref.chain, ref.instruction)]
    sym = pick(syms, method) if len(syms) > 1 else syms[0]
    return [sym.handle(h) for h in ref.handles]


def symbolicate_lines(
    lines: Iterable[str],
    symbolicators: Sequence[Symbolicator],
    *,
    method: str | None = None,
    style: str = "torch",
    records: list[dict[str, Any]] | None = None,
) -> Iterator[str]:
    """Yield the output lines for ``lines`` (without newlines); append a record per reference to ``records``."""
    if style not in STYLES:
        raise UsageError(f"style {style!r}", where="--style", expected=" or ".join(STYLES))
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\n")
        refs = find_references(line, number)
        if not refs:
            yield line
            continue
        # The answers are resolved (and the line rewritten) first; their explanation is rendered only
        # after the line is printed, one answer at a time, so that a line naming many handles is never
        # held as text (the answers are shared with the symbolicator's cache).
        explain: list[str | list[Any]] = []
        for ref in refs:
            try:
                answers = _resolve(ref, symbolicators, method)
            except NotFoundError as exc:
                if records is not None:
                    records.append({"line": number, "text": line[ref.start : ref.end], "error": exc.problem})
                explain.append(f"  -> unresolved: {exc.problem}")
                continue
            if records is not None:
                records.append(
                    {
                        "line": number,
                        "text": line[ref.start : ref.end],
                        "kind": ref.kind,
                        "answers": [a.to_json() for a in answers],
                    }
                )
            if (
                ref.kind == "handle"
                and style == "torch"
                and len(answers) == 1
                and isinstance(answers[0], HandleAnswer)
                and answers[0].runtime_text is not None
            ):
                # What the lite interpreter prints with its debug maps present, in place of "not found".
                sentence = MOBILE_NOT_FOUND % ref.handles[0]
                if sentence in line:
                    line = line.replace(sentence, answers[0].runtime_text)
                    continue
            explain.append(answers)
        yield from line.split("\n")
        for item in explain:
            if isinstance(item, str):
                yield item
                continue
            for a in item:
                yield from render_instruction(a, style) if isinstance(a, InstructionAnswer) else render_handle(a, style)
