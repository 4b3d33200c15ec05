"""Render a lite-interpreter debug handle the way torch's mobile runtime prints it.

When an operator fails in a TorchScript lite-interpreter program (``.ptl`` saved
with ``_save_mobile_debug_info=True``), torch's ``MobileDebugTable`` turns the
failing instruction's debug handle into two things it appends to the error:

* the module hierarchy, ``top(ScriptNet)::<unknown>.block0(ScriptBlock)::forward.
  gate(Gate)::forward.aten::mul`` -- the root scope ``top`` with the program's
  type, the caller ``<unknown>``, then per inlined call ``.instance(Type)::
  function``, and the node's name last;
* the TorchScript traceback, ``Traceback of TorchScript (most recent call
  last):`` with one ``File "...", line N, in fn`` entry per call site and the
  source lines around it, the range underlined with ``~`` and ``<--- HERE``.

With the debug maps stripped from the file it prints ``Debug info for
handle(s): debug_handles:{N}, was not found.`` instead; a host-side reader that
has the maps (or a tracepack document made from them) turns ``N`` back into
the text above. :func:`render_debug_string` does that, byte for byte as the
release that wrote the file renders it (checked against every release's own
error text in ``tests/data/torch/releases/``). tracepack's own module form,
``TOP(ScriptNet)::forward.block0(ScriptBlock)::forward...``, is
``render_module_hierarchy(..., style="tracepack")``.

Nothing is unpickled: the debug members are read with tracepack's data-only
pickle reader, and the program's type name is the first class global named in
``data.pkl`` (its opcodes are scanned, never run).
"""

from __future__ import annotations

import pickletools
from collections.abc import Iterable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tracepack.errors import LegacyFormatError, UsageError
from tracepack.io.zip import Archive
from tracepack.torch.torchscript.debug_pkl import (
    CallstackDebugMap,
    DebugPkl,
    MobileDebugHandles,
    parse_callstack_debug_map,
    parse_debug_pkl,
    parse_mobile_debug_handles,
)

__all__ = [
    "CallFrame",
    "HandleInfo",
    "LiteDebugTable",
    "SourceRange",
    "not_found_message",
    "render_debug_string",
    "render_module_hierarchy",
    "render_traceback",
]

#: Lines of context torch prints around a highlighted range (``SourceRange::CONTEXT``).
CONTEXT = 3

Style = Literal["torch", "tracepack"]


@dataclass(frozen=True, slots=True)
class SourceRange:
    """``text[start:end]``, where ``text`` is a source starting at line ``starting_line`` of
    ``filename`` (``None``: a source without a file name, which prints no location)."""

    text: str
    filename: str | None
    starting_line: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class CallFrame:
    """One inlined call: through module ``module`` (``(type_name, instance_name)``, ``None`` for a
    free function), at ``call_site`` in its caller, into ``function_name``."""

    module: tuple[str, str] | None
    call_site: SourceRange | None
    function_name: str


@dataclass(frozen=True, slots=True)
class HandleInfo:
    """What a debug handle stands for: the node and its range, under its inlined calls."""

    handle: int
    node_name: str
    node_range: SourceRange | None
    calls: tuple[CallFrame, ...] = ()


@dataclass(slots=True)
class LiteDebugTable:
    """The debug handles of one lite-interpreter program.

    ``top_type`` is the program's TorchScript type (``__torch__.models.ScriptNet``);
    ``known_types`` the class types the file defines (a module whose type the runtime
    cannot find prints ``instance(full.type.name)``); ``owners`` maps a handle to the
    function whose bytecode holds it (``__torch__.models.ScriptNet.forward``)."""

    top_type: str
    handles: MutableMapping[int, HandleInfo] = field(default_factory=dict)
    known_types: frozenset[str] | None = None
    owners: dict[int, str] = field(default_factory=dict)

    @classmethod
    def from_members(
        cls,
        *,
        top_type: str,
        debug_pkls: Iterable[DebugPkl],
        callstack_debug_map: CallstackDebugMap,
        mobile_debug_handles: MobileDebugHandles | None = None,
        known_types: Iterable[str] | None = None,
    ) -> LiteDebugTable:
        """Build the table the way ``MobileDebugTable`` does: source ranges by tag from every
        ``debug_pkl`` (the first row of a tag wins), then one entry per callstack row."""
        ranges: dict[int, SourceRange] = {}
        for pkl in debug_pkls:
            for r in pkl.rows:
                if r.tag not in ranges:
                    ranges[r.tag] = SourceRange(r.text, r.filename, r.starting_line, r.start, r.end)
        table = cls(top_type, known_types=None if known_types is None else frozenset(known_types))
        for row in callstack_debug_map.rows:
            calls: list[CallFrame] = []
            for frame in row.callstack.frames() if row.callstack is not None else ():
                module = None if frame.module is None else (frame.module.type_name, frame.module.instance_name)
                calls.append(CallFrame(module, ranges.get(frame.source_range_tag), frame.function_name))
            info = HandleInfo(row.debug_handle, row.node_name, ranges.get(row.source_range_tag), tuple(calls))
            table.handles.setdefault(row.debug_handle, info)
        if mobile_debug_handles is not None:
            for function in mobile_debug_handles.functions:
                for handle in function.handles:
                    table.owners.setdefault(handle, function.name)
        return table

    @classmethod
    def from_archive(cls, data: bytes | bytearray | memoryview, *, source: str = "<bytes>") -> LiteDebugTable:
        """Read a ``.ptl`` (or any TorchScript zip with ``callstack_debug_map.pkl``)."""
        archive = Archive(data, source=source)
        pkls: list[DebugPkl] = []
        cmap: CallstackDebugMap | None = None
        handles: MobileDebugHandles | None = None
        top_type: str | None = None
        types: set[str] = set()
        for name in archive.names():
            rel = archive.relative(name)
            where = f"{source}:{rel}"
            if rel.endswith(".debug_pkl") and rel != "delegated_backends.debug_pkl":
                pkls.append(parse_debug_pkl(archive.read(name), source=where))
            elif rel == "callstack_debug_map.pkl":
                cmap = parse_callstack_debug_map(archive.read(name), source=where)
            elif rel == "mobile_debug_handles.pkl":
                handles = parse_mobile_debug_handles(archive.read(name), source=where)
            elif rel == "data.pkl":
                found = class_globals(archive.read(name), source=where)
                if found:
                    top_type = found[0]
                types.update(found)
        if cmap is None:
            raise LegacyFormatError(
                "no callstack_debug_map.pkl: the file was saved without mobile debug info",
                source=source,
                expected="_save_for_lite_interpreter(..., _save_mobile_debug_info=True)",
            )
        if top_type is None:
            raise LegacyFormatError("data.pkl names no module type", source=source, expected="a TorchScript module")
        return cls.from_members(
            top_type=top_type,
            debug_pkls=pkls,
            callstack_debug_map=cmap,
            mobile_debug_handles=handles,
            known_types=types,
        )

    def info(self, handle: int) -> HandleInfo:
        found = self.handles.get(handle)
        if found is None:
            raise UsageError(f"debug handle {handle} is not in the program's callstack_debug_map")
        return found


def class_globals(data: bytes, *, source: str = "<data.pkl>") -> list[str]:
    """The ``module.Class`` names a TorchScript pickle refers to, in order (opcodes are only read)."""
    out: list[str] = []
    try:
        for op, arg, _ in pickletools.genops(data):
            if op.name == "GLOBAL" and isinstance(arg, str):
                module, _, name = arg.partition(" ")
                qualified = f"{module}.{name}"
                if module.startswith("__torch__") and qualified not in out:
                    out.append(qualified)
    except (ValueError, EOFError, UnicodeDecodeError) as exc:
        raise LegacyFormatError(f"not a pickle: {exc}", source=source) from None
    return out


def _short(type_name: str) -> str:
    return type_name[type_name.rfind(".") + 1 :]


def _module_entry(table: LiteDebugTable, module: tuple[str, str] | None) -> str:
    """``instance(Type)`` as torch's ``get_module_info`` prints it."""
    if module is None:
        return "UNKNOWN_INSTANCE(UNKNOWN_TYPE)"
    type_name, instance = module
    if table.known_types is not None and type_name not in table.known_types:
        # The runtime could not find the class: the name keeps the full type (callstack deserializer).
        return f"{instance}({type_name})"
    return f"{instance or 'UNKNOWN_INSTANCE'}({_short(type_name) or 'UNKNOWN_TYPE'})"


def not_found_message(handles: Sequence[int]) -> str:
    """torch's text for handles missing from the maps (digits of several handles run together)."""
    return "Debug info for handle(s): debug_handles:{" + "".join(str(h) for h in handles) + "}, was not found."


def render_module_hierarchy(table: LiteDebugTable, handles: int | Sequence[int], *, style: Style = "torch") -> str:
    """The module hierarchy of the failing instruction(s) (``handles``: innermost last, as torch
    collects them for delegated calls; one int for the usual case).

    ``style="torch"``: ``top(M)::<unknown>.sub(T)::forward.aten::op``, as the lite interpreter
    prints it; ``style="tracepack"``: ``TOP(M)::forward.sub(T)::forward``, the module path
    without the operator, with the owning method of the program in place of ``<unknown>``.
    """
    chain = [handles] if isinstance(handles, int) else list(handles)
    infos = [table.info(h) for h in reversed(chain)]
    if style == "tracepack":
        owner = table.owners.get(chain[-1], "")
        method = owner.rpartition(".")[2] if owner else "forward"
        parts = [f"TOP({_short(table.top_type)})::{method}"]
        for info in infos:
            for call in info.calls:
                if call.module is None:
                    parts.append(f"UNKNOWN_INSTANCE(UNKNOWN_TYPE)::{call.function_name}")
                else:
                    parts.append(f"{call.module[1]}({_short(call.module[0])})::{call.function_name}")
        return ".".join(parts)
    if style != "torch":
        raise UsageError(f"unknown hierarchy style {style!r}: expected 'torch' or 'tracepack'")
    out = f"top({_short(table.top_type)})::<unknown>"
    for info in infos:
        for call in info.calls:
            out += "." + _module_entry(table, call.module) + "::" + call.function_name
    return out + "." + infos[-1].node_name


def _entries(table: LiteDebugTable, chain: Sequence[int]) -> list[tuple[str, SourceRange | None]]:
    """The traceback entries, ``(function name, range)``, outermost first."""
    entries: list[tuple[str, SourceRange | None]] = []
    caller = "<unknown>"
    for info in (table.info(h) for h in reversed(chain)):
        name = caller
        for call in info.calls:
            entries.append((name, call.call_site))
            name = call.function_name
        entries.append((name, info.node_range))
    return entries


def render_traceback(table: LiteDebugTable, handles: int | Sequence[int]) -> str:
    """``Traceback of TorchScript (most recent call last):`` and its entries, as torch prints them."""
    chain = [handles] if isinstance(handles, int) else list(handles)
    parts = ["Traceback of TorchScript (most recent call last):\n"]
    for name, rng in _entries(table, chain):
        if rng is not None:
            parts.append(_print_with_context(rng, name))
    return "".join(parts)


def render_debug_string(table: LiteDebugTable, handles: int | Sequence[int]) -> str:
    """The whole text torch appends to the error: ``Module hierarchy:...`` and the traceback, or
    the not-found line when a handle is missing (as torch does)."""
    chain = [handles] if isinstance(handles, int) else list(handles)
    if any(h not in table.handles for h in chain):
        return not_found_message(chain)
    return "Module hierarchy:" + render_module_hierarchy(table, chain) + "\n" + render_traceback(table, chain)


# -- SourceRange::print_with_context -----------------------------------------------------------------


def _print_with_context(rng: SourceRange, funcname: str, context: int = CONTEXT) -> str:
    """torch's ``SourceRange::print_with_context(out, CONTEXT, highlight=true, funcname)``, on the
    UTF-8 bytes of the source as torch works (offsets are byte offsets)."""
    text = rng.text.encode("utf-8", "surrogatepass")
    size = len(text)
    nl, sp = 10, 32
    start = rng.start

    def at(i: int) -> int:
        return text[i] if i < size else 0  # std::string's operator[] at size() gives '\0'

    if rng.end - start == size:
        return rng.text  # the whole source: printed as is
    range_end = min(size, rng.end)
    if start > size:
        return ""
    begin_line = start
    while begin_line > 0 and text[begin_line - 1] != nl:
        begin_line -= 1
    end_line = range_end
    while end_line < size and text[end_line] != nl:
        end_line += 1
    begin_context = begin_line
    seen = 0
    while begin_context > 0:
        if text[begin_context - 1] == nl:
            seen += 1
        if seen >= context:
            break
        begin_context -= 1
    end_context = end_line
    seen = 0
    while end_context < size:
        if text[end_context] == nl:
            seen += 1
        if seen >= context:
            break
        end_context += 1
    out = bytearray()
    if rng.filename is not None:
        lineno = text.count(b"\n", 0, start)
        out += f'  File "{rng.filename}", line {rng.starting_line + lineno}'.encode()
        if funcname:
            out += f", in {funcname}".encode()
        out += b"\n"
    out += text[begin_context:start]
    line_start = start
    line_end = start
    while line_start < range_end:
        while line_end < size and text[line_end] != nl:
            line_end += 1
        actual = text[line_start : line_end + 1]
        out += actual
        if not actual.endswith(b"\n"):
            out += b"\n"
        highlight_begin = line_start
        while highlight_begin > 0 and text[highlight_begin - 1] != nl:
            highlight_begin -= 1
        highlight_end = line_start
        while highlight_end < range_end and text[highlight_end] != nl:
            highlight_end += 1
        empty = 0
        for i in range(highlight_begin, highlight_end):
            if text[i] == sp or i < line_start:
                empty += 1
            else:
                break
        marked = highlight_end - highlight_begin - empty
        if marked > 0:
            more_lines = any(at(i) not in (nl, sp) for i in range(line_end, range_end + 1))
            out += b" " * empty + b"~" * marked
            out += b"\n" if more_lines and line_end != range_end else b" <--- HERE\n"
        line_end += 1
        line_start = line_end
    if line_end <= size:
        tail = text[line_end:end_context]
        out += tail
        if tail and not tail.endswith(b"\n"):
            out += b"\n"
    return out.decode("utf-8", "surrogatepass")
