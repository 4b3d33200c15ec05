"""Legacy debug strings <-> structured form, exactly.

Three legacy forms are parsed and rendered here:

* stack traces, as ``traceback.format_list`` writes them (style ``python``)
  or stripped of surrounding whitespace, as torch.fx stores ``node.stack_trace``
  (style ``stripped``);
* torch.export ``nn_module_stack`` strings: ``key,path,type`` entries joined
  by ``;``;
* TorchScript module hierarchies: ``TOP(C)::forward.A0(A)::forward``.

Every parser is checked by rendering its result and comparing with the input:
a string that does not come back byte for byte is reported as not
representable (``None``), and callers keep it verbatim. That makes the
structured form lossless by construction, whatever odd input arrives.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

__all__ = [
    "STYLE_PYTHON",
    "STYLE_STRIPPED",
    "FrameKey",
    "ModuleKey",
    "parse_module_hierarchy",
    "parse_nn_module_stack",
    "parse_stack_trace",
    "render_frames",
    "render_module_hierarchy",
    "render_nn_module_stack",
]

STYLE_PYTHON = 0
STYLE_STRIPPED = 1

_I64_MAX = 2**63 - 1


class FrameKey(NamedTuple):
    """A frame as interned: everything that makes two frames different."""

    file: str
    line: int
    name: str
    text: str = ""
    col: int = -1
    end_col: int = -1
    annotation: str = ""


class ModuleKey(NamedTuple):
    """One level of a module hierarchy."""

    key: str
    path: str
    type: str
    method: str = ""


_FILE_LINE = re.compile(r'  File "(.*)", line (0|[1-9][0-9]*), in (.*)\n')


def render_frame(f: FrameKey) -> str:
    """One frame as ``traceback.format_list`` writes it (plus its annotation)."""
    head = f'  File "{f.file}", line {f.line}, in {f.name}\n'
    if f.text:
        head += f"    {f.text}\n"
    return head + f.annotation


def render_frames(frames: Iterable[FrameKey], style: int = STYLE_PYTHON) -> str:
    """Frames, outermost first, as a legacy stack trace string."""
    text = "".join(map(render_frame, frames))
    return text.strip() if style == STYLE_STRIPPED else text


def _parse_python(text: str) -> list[FrameKey] | None:
    frames: list[FrameKey] = []
    pos, end = 0, len(text)
    while pos < end:
        m = _FILE_LINE.match(text, pos)
        if m is None:
            return None
        file, line, name = m.group(1), int(m.group(2)), m.group(3)
        if line > _I64_MAX:
            return None
        pos = m.end()
        code = ""
        if text.startswith("    ", pos) and not text.startswith("  File ", pos):
            nl = text.find("\n", pos)
            if nl < 0:
                return None
            code = text[pos + 4 : nl]
            pos = nl + 1
        ann_start = pos
        while pos < end and not text.startswith("  File ", pos):
            nl = text.find("\n", pos)
            if nl < 0:
                return None
            pos = nl + 1
        frames.append(FrameKey(file, line, name, code, -1, -1, text[ann_start:pos]))
    return frames


def parse_stack_trace(text: str) -> tuple[list[FrameKey], int] | None:
    """Parse a legacy stack trace into frames (outermost first) and the style that renders it.

    Returns ``None`` when no style renders the frames back into exactly ``text``.
    """
    frames = _parse_python(text)
    if frames is not None and render_frames(frames, STYLE_PYTHON) == text:
        return frames, STYLE_PYTHON
    if text and text == text.strip():
        # torch.fx strips the whole string: put back the two spaces before the first
        # "File" and the final newline, then check that stripping gives the input again.
        frames = _parse_python("  " + text + "\n")
        if frames is not None and frames and render_frames(frames, STYLE_STRIPPED) == text:
            return frames, STYLE_STRIPPED
    return None


def render_nn_module_stack(entries: Iterable[ModuleKey]) -> str:
    """``key,path,type`` entries joined by ``;`` (torch.export's ``nn_module_stack``)."""
    return ";".join(f"{e.key},{e.path},{e.type}" for e in entries)


def parse_nn_module_stack(text: str) -> list[ModuleKey] | None:
    """Parse an ``nn_module_stack`` string, outermost module first; ``None`` if not exact.

    The key never holds a comma and the type never does either, so the path is what lies
    between the first and the last comma of an entry, commas and all.
    """
    entries = []
    for part in text.split(";"):
        first, last = part.find(","), part.rfind(",")
        if first < 0 or first == last:
            return None
        entries.append(ModuleKey(part[:first], part[first + 1 : last], part[last + 1 :]))
    return entries if render_nn_module_stack(entries) == text else None


_HIER_ENTRY = re.compile(r"([^.()]*)\(([^()]*)\)::([^.()]*)")


def render_module_hierarchy(entries: Sequence[ModuleKey]) -> str:
    """TorchScript's ``TOP(C)::forward.A0(A)::forward`` form (``::method`` only where one is known)."""
    return ".".join(f"{e.key}({e.type})::{e.method}" if e.method else f"{e.key}({e.type})" for e in entries)


def parse_module_hierarchy(text: str) -> list[ModuleKey] | None:
    """Parse a TorchScript module hierarchy string; ``None`` if not exact."""
    entries = []
    pos = 0
    while True:
        m = _HIER_ENTRY.match(text, pos)
        if m is None:
            return None
        entries.append(ModuleKey(m.group(1), "", m.group(2), m.group(3)))
        pos = m.end()
        if pos == len(text):
            break
        if text[pos] != ".":
            return None
        pos += 1
    return entries if render_module_hierarchy(entries) == text else None
