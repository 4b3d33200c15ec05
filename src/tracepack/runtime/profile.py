"""Profiles annotated with where each op came from, as Chrome/Perfetto traces, and per-module summaries.

Inputs:

ExecuTorch ETDump
    every profile event of every run becomes a complete event (``"ph": "X"``, microseconds, one track
    per run); an event with an instruction id (operator calls) gets, from the artifact: the op, the
    debug handles, the module path and type, the source ``file:line`` (the innermost frame of the
    user's code, outside site-packages) and the whole stack. ETDump times are the runtime's ticks,
    nanoseconds by default (``--time-unit`` says otherwise).
torch.profiler Chrome traces (``{"traceEvents": [...]}``)
    events whose ``args`` carry a debug handle (``Debug handle``, ``debug_handle``) or an ExecuTorch
    instruction id (``instruction_id``) are annotated the same way; every other event is kept as is.

Annotations go into each event's ``args`` (``module_path``, ``module_type``, ``source``, ``op``,
``debug_handles``, ``stack``), which Perfetto and chrome://tracing show on selection.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tracepack.errors import InputError, NotFoundError
from tracepack.runtime.symbols import HandleAnswer, Symbolicator, pick
from tracepack.traces import parse_stack_trace

__all__ = ["annotate_chrome", "annotate_etdump", "module_summary", "render_summary", "source_of"]

_HANDLE_KEYS = ("Debug handle", "debug_handle", "Debug Handle", "debug handle")
_UNITS = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def source_of(stack: str | None) -> tuple[str, list[str]]:
    """The innermost frame of the user's code (outside site-packages) as ``file:line``, and every frame."""
    if not stack:
        return "", []
    parsed = parse_stack_trace(stack)
    if parsed is None:
        return "", []
    frames = [f"{f.file}:{f.line}" for f in parsed[0]]
    own = [f"{f.file}:{f.line}" for f in parsed[0] if "site-packages" not in f.file and "dist-packages" not in f.file]
    return (own[-1] if own else frames[-1] if frames else ""), frames


def _annotation(handles: Sequence[HandleAnswer], op: str = "") -> dict[str, Any]:
    if not handles:
        return {"op": op}
    first = handles[0]
    stack = first.nodes[0].stack_trace if first.nodes else first.stack_trace
    source, frames = source_of(stack)
    return {
        "op": first.op or op,
        "debug_handles": [h.handle for h in handles],
        "module_path": first.module_path,
        "module_type": first.module_type,
        "module_hierarchy": first.module_hierarchy,
        "source": source,
        "stack": frames,
    }


def annotate_etdump(
    etdump: Any, symbolicators: Sequence[Symbolicator], *, method: str | None = None, time_unit: str = "ns"
) -> dict[str, Any]:
    """A Chrome trace of an ETDump (:class:`tracepack.torch.executorch.etdump.ETDump`), annotated."""
    scale = _UNITS[time_unit]
    sym = pick(symbolicators, method)
    events: list[dict[str, Any]] = []
    for tid, run in enumerate(etdump.runs):
        events.append(
            {"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": run.name or f"run {tid}"}}
        )
        for ev in run.events:
            args: dict[str, Any] = {"chain": ev.chain, "instruction_id": ev.instruction}
            if ev.delegate_id != -1 or ev.delegate_name:
                args["delegate_debug_id"] = ev.delegate_name or ev.delegate_id
            if ev.chain >= 0 and ev.instruction >= 0:  # framework events carry chain -1
                try:
                    answer = sym.instruction(ev.chain, ev.instruction)
                except NotFoundError:
                    args["unresolved"] = True
                else:
                    args.update(_annotation(answer.handles, answer.op))
            events.append(
                {
                    "name": ev.name,
                    "cat": "executorch",
                    "ph": "X",
                    "pid": 0,
                    "tid": tid,
                    "ts": ev.start * scale,
                    "dur": max(ev.end - ev.start, 0) * scale,
                    "args": args,
                }
            )
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"annotated_by": "tracepack"}}


def _event_handle(args: dict[str, Any]) -> int | None:
    for key in _HANDLE_KEYS:
        v = args.get(key)
        if isinstance(v, int) or (isinstance(v, str) and v.isdigit()):
            return int(v)
    return None


def annotate_chrome(
    trace: Any, symbolicators: Sequence[Symbolicator], *, method: str | None = None, source: str = "<trace>"
) -> dict[str, Any]:
    """A torch.profiler Chrome trace with its handle-carrying events annotated (others kept as they are)."""
    if isinstance(trace, list):
        trace = {"traceEvents": trace}
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise InputError("not a Chrome trace", source=source, expected='a JSON object with a "traceEvents" list')
    sym = pick(symbolicators, method)
    out = []
    for i, event in enumerate(trace["traceEvents"]):
        ev = event
        if not isinstance(ev, dict):
            raise InputError("an event is not a JSON object", source=source, where=f"$.traceEvents[{i}]")
        args = ev.get("args")
        if isinstance(args, dict):
            handle = _event_handle(args)
            instr = args.get("instruction_id")
            answers: tuple[HandleAnswer, ...] | None = None
            op = ""
            try:
                if handle is not None:
                    answers = (sym.handle(handle),)
                elif isinstance(instr, int) and instr >= 0:
                    a = sym.instruction(int(args.get("chain", 0) or 0), instr)
                    answers, op = a.handles, a.op
            except NotFoundError:
                ev = {**ev, "args": {**args, "unresolved": True}}
            else:
                if answers is not None:
                    ev = {**ev, "args": {**args, **_annotation(answers, op)}}
        out.append(ev)
    return {**trace, "traceEvents": out}


def module_summary(trace: dict[str, Any]) -> list[tuple[str, str, int, float]]:
    """``(module path, module type, events, total microseconds)`` per module, most time first.

    Counts the annotated complete events; ExecuTorch's ``OPERATOR_CALL`` wrapper events are left out
    (they time the same instruction as the ``native_call_*`` event inside them).
    """
    totals: dict[tuple[str, str], list[float]] = {}
    for ev in trace.get("traceEvents", []):
        args = ev.get("args") or {}
        if ev.get("ph") != "X" or "module_path" not in args or ev.get("name") == "OPERATOR_CALL":
            continue
        key = (args.get("module_path") or "(top level)", args.get("module_type") or "")
        row = totals.setdefault(key, [0, 0.0])
        row[0] += 1
        row[1] += float(ev.get("dur", 0))
    rows = [(k[0], k[1], int(v[0]), v[1]) for k, v in totals.items()]
    rows.sort(key=lambda r: (-r[3], r[0]))
    return rows


def render_summary(rows: list[tuple[str, str, int, float]]) -> str:
    """The per-module table, as text."""
    total = sum(r[3] for r in rows) or 1.0
    head = ("module", "type", "events", "time (ms)", "share")
    body = [(p, t, str(n), f"{us / 1000:.4f}", f"{100 * us / total:.1f}%") for p, t, n, us in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    lines = [
        "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in (head, *body)
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def dumps(trace: dict[str, Any]) -> str:
    return json.dumps(trace, separators=(",", ":"))
