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
import math
import re
from collections.abc import Sequence
from typing import Any, TypeGuard

from tracepack.errors import InputError, LegacyFormatError, NotFoundError, UsageError
from tracepack.runtime.logs import NUMBER_DIGITS
from tracepack.runtime.symbols import HandleAnswer, NodeAnswer, Symbolicator, op_name, pick
from tracepack.traces import parse_stack_trace

__all__ = [
    "annotate_chrome",
    "read_chrome_trace",
    "annotate_etdump",
    "annotated",
    "module_summary",
    "nothing_annotated",
    "render_summary",
    "runtime_ids",
    "source_of",
]

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


def _annotation(handles: Sequence[HandleAnswer], op: str = "", frames_trace: str | None = None) -> dict[str, Any]:
    if not handles:
        if not frames_trace:
            return {"op": op}
        # a .pte's instruction: the stack the emitter kept (emit_stacktrace=True), no module path
        source, frames = source_of(frames_trace)
        return {"op": op, "source": source, "stack": frames}
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
    allocations: list[dict[str, Any]] = []
    for tid, run in enumerate(etdump.runs):
        events.append(
            {"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": run.name or f"run {tid}"}}
        )
        for ev in run.events:
            args: dict[str, Any] = {"chain": ev.chain, "instruction_id": ev.instruction}
            delegated = ev.delegate_id != -1 or bool(ev.delegate_name)
            name = ev.name
            if delegated:
                delegate_id: int | str = ev.delegate_id if ev.delegate_id != -1 else ev.delegate_name
                args["delegate_debug_id"] = delegate_id
                name = name or str(delegate_id)  # as Inspector names a delegated event
            if ev.chain >= 0 and ev.instruction >= 0:  # framework events carry chain -1
                try:
                    answer = sym.instruction(ev.chain, ev.instruction)
                except NotFoundError:
                    args["unresolved"] = True
                else:
                    if answer.delegate:
                        args["delegate_backend"] = answer.delegate
                    if delegated:
                        # An op inside a delegate: its own handles come from the delegate's map, as
                        # Inspector finds them; the call's handles are context, not the op's.
                        own = sym.delegate_handles(ev.instruction, delegate_id)
                        args["delegate_call_debug_handles"] = [h.handle for h in answer.handles]
                        if own is not None:
                            args.update(_annotation(tuple(sym.handle(h) for h in own), ""))
                    else:
                        args.update(_annotation(answer.handles, answer.op, answer.frames_trace))
            events.append(
                {
                    "name": name,
                    "cat": "executorch",
                    "ph": "X",
                    "pid": 0,
                    "tid": tid,
                    "ts": ev.start * scale,
                    "dur": max(ev.end - ev.start, 0) * scale,
                    "args": args,
                }
            )
        events.extend(_debug_events(run, tid, scale, sym))
        if run.allocations:
            per: dict[str, list[int]] = {}
            for a in run.allocations:
                row = per.setdefault(a.allocator, [0, 0])
                row[0] += 1
                row[1] += a.size
            allocations.append(
                {"run": tid, "allocators": {k: {"allocations": n, "bytes": b} for k, (n, b) in per.items()}}
            )
    other: dict[str, Any] = {"annotated_by": "tracepack"}
    if allocations:
        # Allocation events carry an allocator and a size only (no time, no instruction): a total per
        # allocator is all they say.
        other["allocations"] = allocations
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def debug_value(ev: Any) -> dict[str, Any]:
    """What a debug event logged, as JSON: the kind, each tensor's dtype/sizes/strides/offset into the
    run's debug buffer (the data itself is there, not in the ETDump), or the scalar."""
    out: dict[str, Any] = {"kind": ev.kind}
    if ev.tensors:
        out["tensors"] = [
            {"dtype": t.dtype, "sizes": list(t.sizes), "strides": list(t.strides), "offset": t.offset}
            for t in ev.tensors
        ]
    if ev.scalar is not None:
        out["value"] = ev.scalar
    if ev.output is not None:
        out["method_output"] = ev.output
    return out


def _debug_events(run: Any, tid: int, scale: float, sym: Symbolicator) -> list[dict[str, Any]]:
    """The run's debug events (intermediate outputs) as instant events where their instruction ended.

    A debug event has no time of its own: the runtime logs an instruction's output right after the
    instruction, so it is placed at the end of that instruction's last profile event (the run's end for
    the method's outputs, chain -1), annotated like the instruction."""
    if not run.debug:
        return []
    ends: dict[int, int] = {}
    last = 0
    for ev in run.events:
        last = max(last, ev.end)
        if ev.chain >= 0 and ev.instruction >= 0:
            ends[ev.instruction] = max(ends.get(ev.instruction, 0), ev.end)
    out = []
    for d in run.debug:
        args: dict[str, Any] = {"chain": d.chain, "instruction_id": d.instruction, **debug_value(d)}
        if d.delegate_id != -1 or d.delegate_name:
            args["delegate_debug_id"] = d.delegate_id if d.delegate_id != -1 else d.delegate_name
        at = last
        if d.chain >= 0 and d.instruction >= 0:
            at = ends.get(d.instruction, last)
            try:
                answer = sym.instruction(d.chain, d.instruction)
            except NotFoundError:
                args["unresolved"] = True
            else:
                args.update(_annotation(answer.handles, answer.op, answer.frames_trace))
        name = d.name or ("method output" if d.output else f"output of instruction {d.instruction}")
        out.append(
            {"name": name, "cat": "executorch.debug", "ph": "i", "s": "t", "pid": 0, "tid": tid, "ts": at * scale,
             "args": args}
        )  # fmt: skip
    return out


def _event_handle(args: dict[str, Any]) -> int | None:
    for key in _HANDLE_KEYS:
        v = args.get(key)
        if type(v) is int or (isinstance(v, str) and v.isascii() and v.isdigit() and len(v) <= NUMBER_DIGITS):
            return int(v)
    return None


_MARKER = re.compile(rf"## ([0-9]{{1,{NUMBER_DIGITS}}}|.+\.py) ##")


def aten_name(target: str) -> str:
    """A node target as the profiler names the op: ``torch.ops.aten.linear.default`` -> ``aten::linear``."""
    from tracepack.analysis.ops import profiler_name

    return profiler_name(op_name(target))


def _node_annotation(sym: Symbolicator, index: int, how: str) -> dict[str, Any]:
    n = sym.doc.node(index)
    node = NodeAnswer(n.name, op_name(n.target), n.stack_trace, n.module_stack)
    source, frames = source_of(node.stack_trace)
    return {
        "node": node.name,
        "op": node.op,
        "module_path": node.module_path,
        "module_type": node.module_type,
        "nn_module_stack": node.nn_module_stack,
        "source": source,
        "stack": frames,
        "stack_trace": node.stack_trace,
        "fx_mapping": how,
    }


def _span(ev: dict[str, Any]) -> tuple[float, float] | None:
    """A complete event's (start, end) in microseconds, or None (another phase, or a time that is not a
    finite number a float holds)."""
    ts, dur = _finite(ev.get("ts")), _finite(ev.get("dur"))
    if ev.get("ph") != "X" or ts is None or dur is None:
        return None
    return ts, ts + dur


def _thread(ev: dict[str, Any]) -> Any:
    """The (pid, tid) an event runs on, as a dict key (an object or list there is the user's odd file)."""
    key = (ev.get("pid"), ev.get("tid"))
    try:
        hash(key)
    except TypeError:
        return repr(key)
    return key


def _by_thread(events: list[dict[str, Any]]) -> dict[Any, list[int]]:
    """Complete events' indices per (pid, tid), in time order, outer events before the ones they hold."""
    threads: dict[Any, list[int]] = {}
    for i, ev in enumerate(events):
        if _span(ev) is not None and ev.get("cat") in ("cpu_op", "user_annotation", None):
            threads.setdefault(_thread(ev), []).append(i)
    for ixs in threads.values():
        ixs.sort(key=lambda i: (_span(events[i])[0], -_span(events[i])[1]))  # type: ignore[index]
    return threads


def fx_node_map(events: list[dict[str, Any]], sym: Symbolicator) -> dict[int, tuple[int, str, bool]]:
    """Event index -> (node index in the document, how it was found, nested in another op of the node).

    Three keys, the first that the trace has:

    ``node_name``
        torch's own ``map_recorded_events_to_aten_ops_with_stack_trace`` ran on the trace (it needs the
        process that ran the model) and wrote each event's fx node name into ``args``;
    ``node marker``
        the module ran with ``torch.fx.experimental._config.enrich_profiler_metadata`` on: its generated
        code records ``## <i> ##`` around node ``i`` of the module's graph (inside ``## <file>.py ##``).
        ``ExportedProgram.module()`` puts ``get_attr`` and input nodes (and a ``_guards_fn`` call) before
        the graph's ops and keeps their order, so the last marker index is the document's last node; the
        mapping is used only when every marker's first op is its node's op;
    ``op order``
        a plain trace: the outermost op events of each thread, in time order, are matched to the
        document's nodes in graph order by op name (``aten::linear`` is ``aten.linear.default``, any
        spelling of :mod:`tracepack.analysis.ops`),
        starting over after the last node (one model call after another). An event whose op is not the
        next node's is left alone; ops that are not ATen calls (``getitem``) have no event to match.
    """
    from tracepack.analysis.ops import same_op

    n_nodes = len(sym.doc)
    names: dict[str, int | None] = {}
    out: dict[int, tuple[int, str, bool]] = {}
    for i, ev in enumerate(events):
        args = ev.get("args")
        if isinstance(args, dict) and isinstance(args.get("node_name"), str):
            name = args["node_name"]
            if name not in names:
                try:
                    names[name] = int(sym.doc.node(name).index)
                except (NotFoundError, UsageError):
                    names[name] = None
            found = names[name]
            if found is not None:
                out[i] = (found, "node_name", False)
    if out:
        return out
    targets = [aten_name(sym.doc.node(k).target) for k in range(n_nodes)]
    threads = _by_thread(events)
    markers = {
        i: m.group(1)
        for ixs in threads.values()
        for i in ixs
        if (m := _MARKER.fullmatch(str(events[i].get("name", "")))) is not None
    }
    node_marks = {i: int(v) for i, v in markers.items() if v.isdigit()}
    if node_marks:
        last = max(node_marks.values())
        first_op: dict[int, str] = {}
        for ixs in threads.values():
            open_marks: list[tuple[int, float]] = []
            for i in ixs:
                start, end = _span(events[i])  # type: ignore[misc]
                while open_marks and open_marks[-1][1] < start:
                    open_marks.pop()
                if i in node_marks:
                    open_marks.append((i, end))
                elif i not in markers and open_marks:
                    mark = open_marks[-1][0]
                    k = n_nodes - 1 - (last - node_marks[mark])
                    nested = mark in first_op
                    first_op.setdefault(mark, str(events[i].get("name", "")))
                    if 0 <= k < n_nodes:
                        out[i] = (k, "node marker", nested)
        for mark, index in node_marks.items():
            k = n_nodes - 1 - (last - index)
            if 0 <= k < n_nodes:
                out[mark] = (k, "node marker", False)
        checked = [
            same_op(targets[k], first_op[mark])
            for mark, index in node_marks.items()
            if mark in first_op and 0 <= (k := n_nodes - 1 - (last - index)) < n_nodes
        ]
        agree = bool(checked) and all(checked)  # markers with no op inside prove nothing
        if agree:
            return {i: (k, how, nested or i not in node_marks) for i, (k, how, nested) in out.items()}
        out = {}
    for ixs in threads.values():
        k, end_of_open = 0, -1.0
        last_match: int | None = None
        for i in ixs:
            start, end = _span(events[i])  # type: ignore[misc]
            if i in markers or not n_nodes:
                continue
            if start < end_of_open:  # inside an op already matched or skipped: not a node's own call
                if out.get(i) is None and last_match is not None:
                    out[i] = (last_match, "op order", True)
                continue
            end_of_open = end
            last_match = None
            if same_op(str(events[i].get("name", "")), targets[k]):
                out[i] = (k, "op order", False)
                last_match = k
                k = (k + 1) % n_nodes
    return out


def read_chrome_trace(data: bytes, *, source: str = "<trace>") -> Any:
    """A Chrome trace's JSON (``tracepack annotate``'s input when it is not an ETDump), within the
    ``max_depth`` and ``max_int_digits`` budgets; text that is not JSON is a LegacyFormatError."""
    from tracepack.io.guard import parse_json

    try:
        return parse_json(lambda: json.loads(data), data, source, LegacyFormatError)
    except InputError:
        raise  # nested or numbered past the budgets: said with the byte offset
    except (ValueError, UnicodeDecodeError):
        raise LegacyFormatError(
            "not a profile tracepack reads", source=source, expected="an ExecuTorch ETDump or a Chrome trace (JSON)"
        ) from None


def annotate_chrome(
    trace: Any, symbolicators: Sequence[Symbolicator], *, method: str | None = None, source: str = "<trace>"
) -> dict[str, Any]:
    """A torch.profiler Chrome trace with its op events annotated (others kept as they are).

    Events carrying a debug handle or an ExecuTorch instruction id are answered from the artifact's
    handle table; the op events of an exported program's run are matched to its graph nodes
    (:func:`fx_node_map`) and carry the node's module path, source line and stack."""
    if isinstance(trace, list):
        trace = {"traceEvents": trace}
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise LegacyFormatError("not a Chrome trace", source=source, expected='a JSON object with a "traceEvents" list')
    sym = pick(symbolicators, method)
    for i, event in enumerate(trace["traceEvents"]):
        if not isinstance(event, dict):
            raise LegacyFormatError("an event is not a JSON object", source=source, where=f"$.traceEvents[{i}]")
    events: list[dict[str, Any]] = trace["traceEvents"]
    fx = fx_node_map(events, sym) if sym.kind == "handles" and len(sym.doc) else {}
    cache: dict[tuple[int, str], dict[str, Any]] = {}
    out = []
    for i, event in enumerate(events):
        ev = event
        args = ev.get("args")
        answers: tuple[HandleAnswer, ...] | None = None
        if isinstance(args, dict):
            handle = _event_handle(args)
            instr = args.get("instruction_id")
            op, frames_trace = "", None
            try:
                if handle is not None:
                    answers = (sym.handle(handle),)
                elif _index(instr) and _index(chain := args.get("chain", 0) or 0):
                    a = sym.instruction(chain, instr)
                    answers, op, frames_trace = a.handles, a.op, a.frames_trace
            except NotFoundError:
                ev = {**ev, "args": {**args, "unresolved": True}}
            else:
                if answers is not None:
                    ev = {**ev, "args": {**args, **_annotation(answers, op, frames_trace)}}
        found = fx.get(i)
        if found is not None and answers is None and isinstance(ev.get("args"), (dict, type(None))):
            k, how, nested = found
            note = cache.get((k, how))
            if note is None:
                note = cache[(k, how)] = _node_annotation(sym, k, how)
            extra = {**note, "fx_nested": True} if nested else note
            ev = {**ev, "args": {**(ev.get("args") or {}), **extra}}
        out.append(ev)
    return {**trace, "traceEvents": out}


def runtime_ids(trace: Any) -> int:
    """How many events of a Chrome trace carry a debug handle or an ExecuTorch instruction id (0 for an
    eager torch.profiler trace, which is matched to graph nodes instead)."""
    events = trace.get("traceEvents") if isinstance(trace, dict) else trace
    n = 0
    for ev in events if isinstance(events, list) else ():
        args = ev.get("args") if isinstance(ev, dict) else None
        if isinstance(args, dict) and (_event_handle(args) is not None or isinstance(args.get("instruction_id"), int)):
            n += 1
    return n


def annotated(trace: dict[str, Any]) -> int:
    """How many events of an annotated trace carry a module path or a source line (what ``annotate``
    reports; a ``.pte``'s instructions have a source line and no module path)."""
    return sum(
        1
        for e in trace.get("traceEvents", [])
        if isinstance(args := e.get("args"), dict) and ("module_path" in args or "source" in args)
    )


def nothing_annotated(trace: dict[str, Any], sym: Symbolicator, *, profile: str, artifact: str, etdump: bool) -> str:
    """Why an annotation of ``profile`` with ``artifact`` annotated no event, in one line."""
    events = trace.get("traceEvents", [])
    ids = runtime_ids(trace)
    if etdump:
        ops = sum(
            1 for e in events if min((a := e.get("args") or {}).get("chain", -1), a.get("instruction_id", -1)) >= 0
        )
        if not ops:
            return f"nothing annotated: {profile} has no operator event (an instruction id) to look up"
        if sym.kind == "pte":
            return (
                f"nothing annotated: {artifact} has no stack for the {ops} instruction events of {profile} (emitted "
                "without emit_stacktrace=True, or another program): annotate it with the program's ETRecord"
            )
        return (
            f"nothing annotated: none of the {ops} instruction events of {profile} is in the debug_handle_map of "
            f"{artifact} (method {sym.method or '?'!r}): is it the ETRecord of the program that ran?"
        )
    if ids:
        return (
            f"nothing annotated: none of the {ids} debug handles or instruction ids of {profile} is in {artifact}: "
            "is it the artifact of the program that ran?"
        )
    if sym.kind != "handles":
        return (
            f"nothing annotated: {profile} is an eager torch.profiler trace (no debug handle or instruction id in "
            f"its {len(events)} events), which is matched to an exported program's nodes, and {artifact} holds "
            "none: annotate it with the .pt2, or an ETRecord that keeps its exported_program"
        )
    ops = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", None))
    return (
        f"nothing annotated: none of the {ops} op events of {profile} runs the {len(sym.doc)} nodes of "
        f"{artifact} in their order: is it a profile of this program?"
    )


def _index(value: Any) -> TypeGuard[int]:
    """Whether ``value`` is a chain or instruction number: an int (not a bool) >= 0."""
    return type(value) is int and value >= 0


def _finite(value: Any) -> float | None:
    """A JSON number as a finite float, or None (not a number, a bool, NaN, infinite, past a float's range)."""
    if type(value) not in (int, float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer past a float's range
        return None
    return number if math.isfinite(number) else None


def module_summary(trace: dict[str, Any]) -> list[tuple[str, str, int, float]]:
    """``(module path, module type, events, total microseconds)`` per module, most time first.

    Counts the annotated complete events; ExecuTorch's ``OPERATOR_CALL`` wrapper events are left out
    (they time the same instruction as the ``native_call_*`` event inside them). An event's ``dur`` that is
    not a finite number (a profile is the user's file) counts the event and no time; one whose module path
    or type is not a string was not annotated by tracepack, and is left out.
    """
    totals: dict[tuple[str, str], list[float]] = {}
    for ev in trace.get("traceEvents", []):
        args = ev.get("args") if isinstance(ev, dict) else None
        if (
            not isinstance(args, dict)
            or ev.get("ph") != "X"
            or not isinstance(path := args.get("module_path"), str)
            or not isinstance(kind := args.get("module_type") or "", str)
            or ev.get("name") == "OPERATOR_CALL"
            or args.get("fx_nested")  # an op inside a node's own event: its time is already counted
        ):
            continue
        key = (path or "(top level)", kind)
        row = totals.setdefault(key, [0, 0.0])
        row[0] += 1
        row[1] += _finite(ev.get("dur", 0)) or 0.0
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
