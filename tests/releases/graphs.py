"""The graph of a program as torch.export.load shows it, computed from what tracepack read."""

from __future__ import annotations

import json
import re
from typing import Any

from tracepack.document import Document


def shown_target(target: str) -> str:
    """A serialized target as torch prints the loaded node's (``torch.ops.`` / ``torch._ops.`` dropped)."""
    for prefix in ("torch.ops.", "torch._ops."):
        target = target.removeprefix(prefix)
    return target


def _member(arg: Any) -> tuple[str, Any]:
    """The member a serialized union sets (schemas 1-2 write every member, null but one)."""
    ((kind, value),) = ((k, v) for k, v in arg.items() if v is not None)
    return kind, value


def _getitems(raw: dict[str, Any]) -> list[str]:
    """The names of the getitem nodes torch adds after ``raw`` (several outputs, or a tuple)."""
    outputs = [_member(o) for o in raw["outputs"]]
    if len(outputs) == 1:
        kind, value = outputs[0]
        if kind == "as_tensors":
            return [t["name"] for t in value]
        if kind == "as_tensor" and raw.get("is_hop_single_tensor_return") is False:
            return [value["name"]]
        return []
    return [value["name"] for kind, value in outputs if kind == "as_tensor"]


def _used(graph: dict[str, Any]) -> set[str]:
    """Every value name the graph's nodes or outputs refer to."""
    text = json.dumps([[n["inputs"] for n in graph["nodes"]], graph["outputs"]])
    return set(re.findall(r'"(?:name|as_name)": "([^"]*)"', text))


def tracepack_graph(
    doc: Document, program: dict[str, Any], prefix: str = "", *, drop_unused: bool = False
) -> list[tuple[str, str]]:
    """``(name, target)`` of every call the graph ``prefix`` holds once torch loads it: the
    document's nodes (named by tracepack) and the getitem nodes torch adds for several outputs
    (``drop_unused``: only the used ones, as torch 2.3+ shows a loaded graph)."""
    by_name = {}
    for i in range(len(doc)):
        node = doc.node(i)
        name = node.name
        if name.startswith(prefix) and "/" not in name[len(prefix) :]:
            by_name[name] = node
    graph = program["graph_module"]["graph"]
    for part in filter(None, prefix.split("/")[:-1][1::2]):
        graph = next(
            a["arg"]["as_graph"]["graph"]
            for n in graph["nodes"]
            for a in n["inputs"]
            if type(a["arg"]) is dict and (a["arg"].get("as_graph") or {}).get("name") == part
        )
    ours = [doc.node(i) for i in range(len(doc)) if doc.node(i).name in by_name]
    assert len(ours) == len(graph["nodes"]), "tracepack's nodes are the program's nodes"
    out = []
    for node, raw in zip(ours, graph["nodes"], strict=True):
        out.append((node.name[len(prefix) :], shown_target(raw["target"])))
        used = _used(graph) if drop_unused else None
        out.extend((g, "_operator.getitem") for g in _getitems(raw) if used is None or g in used)
    return out


def torch_graph(nodes: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(name, target)`` of every call_function node torch showed."""
    return [(n["name"], shown_target(n["target"])) for n in nodes if n["op"] == "call_function"]
