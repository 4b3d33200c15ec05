"""``tracepack inspect`` of ExecuTorch files: what an ETRecord, a ``.pte`` or an ETDump holds, in brief.

Each summary is a JSON-able dict (``--json``) and a few lines of text. The readers are the ones
``symbolicate`` uses (looked up by module name, no torch or ExecuTorch needed); a damaged file is the
readers' one-line error.
"""

from __future__ import annotations

import importlib
import json
from collections import Counter
from typing import Any

__all__ = ["describe_executorch", "render_description"]

_ETRECORD = "tracepack.torch.executorch.etrecord"
_PTE = "tracepack.torch.executorch.pte"
_ETDUMP = "tracepack.torch.executorch.etdump"
_TOP = 5


def describe_executorch(data: bytes, *, source: str) -> dict[str, Any] | None:
    """A summary of an ETRecord, ``.pte`` or ETDump; None for any other file."""
    etdump = importlib.import_module(_ETDUMP)
    if etdump.is_etdump(data):
        return _etdump(etdump.read_etdump(data, source=source), source, len(data))
    pte = importlib.import_module(_PTE)
    if pte.is_pte(data):
        return _pte(pte.read_pte(data, source=source), source, len(data))
    if data[:4] == b"PK\x03\x04":
        from tracepack.io.zip import open_archive

        with open_archive(data, source=source) as archive:
            names = archive.names()
            sizes = {n: archive.info(n).file_size for n in names}
        etr = importlib.import_module(_ETRECORD)
        if etr.is_etrecord(names):
            return _etrecord(etr, data, source, names, sizes)
    return None


def _etdump(dump: Any, source: str, size: int) -> dict[str, Any]:
    runs = []
    for run in dump.runs:
        ops = [e for e in run.events if e.chain >= 0 and e.instruction >= 0]
        framework = [e for e in run.events if not (e.chain >= 0 and e.instruction >= 0)]
        delegated = [e for e in run.events if e.delegate_id != -1 or e.delegate_name]
        times: dict[str, list[int]] = {}
        for e in run.events:
            name = e.name or (e.delegate_name or str(e.delegate_id))
            row = times.setdefault(name, [0, 0])
            row[0] += 1
            row[1] += max(e.end - e.start, 0)
        top = sorted(times.items(), key=lambda kv: -kv[1][1])[:_TOP]
        per_allocator: dict[str, list[int]] = {}
        for a in run.allocations:
            row = per_allocator.setdefault(a.allocator, [0, 0])
            row[0] += 1
            row[1] += a.size
        runs.append(
            {
                "name": run.name,
                "bundled_input_index": run.bundled_input_index,
                "profile_events": len(run.events),
                "operator_events": len(ops),
                "framework_events": len(framework),
                "delegated_events": len(delegated),
                "instructions": len({e.instruction for e in ops}),
                "top_events": [{"name": n, "count": c, "ticks": t} for n, (c, t) in top],
                "debug_events": run.debug_events,
                "debug_values": dict(Counter(d.kind for d in run.debug)),
                "debug_tensors": sum(len(d.tensors) for d in run.debug),
                "allocation_events": run.allocation_events,
                "allocators": {k: {"allocations": n, "bytes": b} for k, (n, b) in per_allocator.items()},
            }
        )
    return {"file": source, "kind": "etdump", "file_bytes": size, "version": dump.version, "runs": runs}


def _pte(program: Any, source: str, size: int) -> dict[str, Any]:
    methods = []
    for m in program.methods:
        kinds = Counter(i.kind for i in m.instructions)
        ops = Counter(i.op for i in m.instructions if i.kind == "KernelCall")
        methods.append(
            {
                "name": m.name,
                "chains": len({i.chain for i in m.instructions}),
                "instructions": len(m.instructions),
                "instruction_kinds": dict(kinds),
                "operators": len(m.operators),
                "top_operators": [{"op": o, "calls": n} for o, n in ops.most_common(_TOP)],
                "delegates": sorted({i.op for i in m.instructions if i.kind == "DelegateCall"}),
                "stack_traces": any(i.frames is not None for i in m.instructions),
            }
        )
    return {"file": source, "kind": "pte", "file_bytes": size, "version": program.version, "methods": methods}


def _graph(program: bytes, where: str) -> dict[str, Any]:
    """The ``graph_module.graph`` object of a method's program (``{}`` where the program has none), the
    JSON parsed within the depth and integer budgets; text that is not JSON is refused naming the member."""
    from tracepack.errors import LegacyFormatError
    from tracepack.io.guard import parse_json

    try:
        value = parse_json(lambda: json.loads(program), program, where, LegacyFormatError)
    except json.JSONDecodeError as exc:
        raise LegacyFormatError(f"not valid JSON: {exc.msg}", source=where, where=f"character {exc.pos}") from None
    except UnicodeDecodeError as exc:
        raise LegacyFormatError("not UTF-8 text", source=where, where=f"byte {exc.start}") from None
    module = value.get("graph_module") if isinstance(value, dict) else None
    graph = module.get("graph") if isinstance(module, dict) else None
    return graph if isinstance(graph, dict) else {}


def _etrecord(etr: Any, data: bytes, source: str, names: list[str], sizes: dict[str, int]) -> dict[str, Any]:
    rec = etr.read_etrecord(data, source=source)
    methods = []
    for method, program in rec.programs.items():
        graph = _graph(program, f"{source}:{etr.EDGE_PREFIX}{method}")
        nodes = graph.get("nodes", [])
        nodes = nodes if isinstance(nodes, list) else []
        targets = Counter(str(n.get("target", "")) for n in nodes if isinstance(n, dict))
        handles = rec.debug_handle_map.get(method, {})
        delegates = rec.delegate_map.get(method, {}) if isinstance(rec.delegate_map.get(method), dict) else {}
        methods.append(
            {
                "name": method,
                "program_json_bytes": len(program),
                "nodes": len(nodes),
                "top_ops": [{"op": t, "nodes": n} for t, n in targets.most_common(_TOP)],
                "instructions": len(handles),
                "debug_handles": len({h for hs in handles.values() for h in hs}),
                "delegate_calls": {
                    i: d.get("name", "") if isinstance(d, dict) else "" for i, d in sorted(delegates.items())
                },
            }
        )
    weights = [n for n in names if n.endswith(("_state_dict", "_constants", "_example_inputs"))]
    return {
        "file": source,
        "kind": "etrecord",
        "file_bytes": len(data),
        "members": len(names),
        "exported_program": rec.exported_program is not None,
        "export_graph_id": rec.export_graph_id,
        "weights_members": weights,
        "weights_bytes": sum(sizes.get(n, 0) for n in weights),
        "methods": methods,
    }


def render_description(info: dict[str, Any]) -> list[str]:
    """The summary as text lines."""
    name, kind = info["file"], info["kind"]
    if kind == "etdump":
        lines = [
            f"{name}: ExecuTorch ETDump v{info['version']}, {info['file_bytes']} bytes, {len(info['runs'])} run(s)"
        ]
        for i, r in enumerate(info["runs"]):
            lines.append(
                f"  run {i} {r['name']!r}: {r['profile_events']} profile events ({r['operator_events']} at "
                f"{r['instructions']} instructions, {r['framework_events']} framework, {r['delegated_events']} "
                f"delegated), {r['debug_events']} debug events, {r['allocation_events']} allocation events"
            )
            if r["debug_values"]:
                kinds = ", ".join(f"{n} {k}" for k, n in sorted(r["debug_values"].items()))
                lines.append(f"    debug values: {kinds}")
            for a, v in r["allocators"].items():
                lines.append(f"    allocator {a}: {v['allocations']} allocations, {v['bytes']} bytes")
            for t in r["top_events"]:
                lines.append(f"    {t['ticks']:>12} ticks  {t['count']:>5}x  {t['name']}")
        return lines
    if kind == "pte":
        lines = [f"{name}: ExecuTorch program (.pte) v{info['version']}, {info['file_bytes']} bytes"]
        for m in info["methods"]:
            kinds = ", ".join(f"{n} {k}" for k, n in sorted(m["instruction_kinds"].items()))
            lines.append(
                f"  method {m['name']}: {m['instructions']} instructions ({kinds}) in {m['chains']} chain(s), "
                f"{m['operators']} operators, stack traces {'emitted' if m['stack_traces'] else 'absent'}"
            )
            if m["delegates"]:
                lines.append(f"    delegates: {', '.join(m['delegates'])}")
            for o in m["top_operators"]:
                lines.append(f"    {o['calls']:>6}x  {o['op']}")
        return lines
    lines = [
        f"{name}: ExecuTorch ETRecord, {info['file_bytes']} bytes, {info['members']} members"
        + (", with the exported program" if info["exported_program"] else "")
    ]
    if info["weights_members"]:
        w = info["weights_bytes"]
        lines.append(f"  weights members (never read): {len(info['weights_members'])}, {w} bytes")
    for m in info["methods"]:
        lines.append(
            f"  method {m['name']}: {m['nodes']} edge nodes ({m['program_json_bytes']} bytes of JSON), "
            f"{m['instructions']} instructions, {m['debug_handles']} debug handles"
        )
        if m["delegate_calls"]:
            calls = ", ".join(f"instruction {i}: {b}" for i, b in m["delegate_calls"].items())
            lines.append(f"    delegate calls: {calls}")
        for t in m["top_ops"]:
            lines.append(f"    {t['nodes']:>6}x  {t['op']}")
    return lines
