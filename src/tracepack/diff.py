"""Compare two graphs node by node (``tracepack diff A B``).

Both sides are :class:`~tracepack.Document` objects, so files of any codec, compression and released
schema version compare (and torch files do, once read): differences are in the graph, never in the
encoding. Nodes are paired one of two ways:

``name`` (the default)
    nodes with the same name are the same node; the others are added or removed.
``structure``
    nodes are paired by what they are, not what they are called: the graph order of (op, module path,
    innermost source function and text) is aligned as ``difflib`` aligns lines, so a re-export that
    renumbers ``linear_3`` to ``linear_4`` shows as a rename, and an inserted node as one added node.
    Where as many nodes stand in place of as many others, each pairs with the one in its place (a
    changed op); otherwise nodes of the same op pair in order. Tensor arguments are compared through
    the renames.

For each pair, these fields are compared: ``op`` (the target), ``args`` (inputs and outputs, resolved),
``module`` (the module path, with each module's type), ``stack`` (the frames: file, line, function,
text). Line numbers count: a node whose source moved shows a ``stack`` change.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from tracepack.document import Document, NodeView
from tracepack.errors import UsageError
from tracepack.query import module_path

__all__ = ["FIELDS", "GraphDiff", "NodeChange", "diff_documents", "format_diff"]

FIELDS = ("op", "args", "module", "stack")
Mode = Literal["name", "structure"]


@dataclass(frozen=True)
class NodeChange:
    """One node present on both sides whose fields differ (or that was renamed, by structure)."""

    a: str
    b: str
    #: field -> (value in A, value in B), as plain JSON values
    fields: dict[str, tuple[Any, Any]]


@dataclass
class GraphDiff:
    """What changed from A to B."""

    mode: str
    nodes_a: int
    nodes_b: int
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[NodeChange] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    unchanged: int = 0

    @property
    def same(self) -> bool:
        return not (self.added or self.removed or self.changed or self.renamed)

    def as_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "same": self.same,
            "nodes": {"a": self.nodes_a, "b": self.nodes_b},
            "added": self.added,
            "removed": self.removed,
            "renamed": [{"a": a, "b": b} for a, b in self.renamed],
            "changed": [
                {"a": c.a, "b": c.b, "fields": {k: {"a": va, "b": vb} for k, (va, vb) in c.fields.items()}}
                for c in self.changed
            ],
            "unchanged": self.unchanged,
        }


def _frames(node: NodeView) -> list[str]:
    return [
        f"{f.file}:{f.line} in {f.name}: {f.text}" if f.text else f"{f.file}:{f.line} in {f.name}" for f in node.frames
    ]


def _module(node: NodeView) -> str:
    keys = node.modules
    path = module_path(keys)
    kind = next((k.type for k in reversed(keys) if k.path), keys[-1].type if keys else "")
    return f"{path} ({kind})" if kind else path


def _rename(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, dict):
        if set(value) == {"tensor"} and isinstance(value["tensor"], str):
            return {"tensor": names.get(value["tensor"], value["tensor"])}
        return {k: _rename(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename(v, names) for v in value]
    return value


def _args(node: NodeView, names: dict[str, str] | None = None) -> dict[str, Any]:
    value = {"inputs": [[k, v] for k, v in node.inputs], "outputs": node.outputs}
    return value if names is None else _rename(value, names)


def _compare(a: NodeView, b: NodeView, names: dict[str, str] | None) -> dict[str, tuple[Any, Any]]:
    out: dict[str, tuple[Any, Any]] = {}
    if a.target != b.target:
        out["op"] = (a.target, b.target)
    args_a, args_b = _args(a, names), _args(b)
    if args_a != args_b:
        out["args"] = (_args(a), args_b)
    mod_a, mod_b = _module(a), _module(b)
    if mod_a != mod_b:
        out["module"] = (mod_a, mod_b)
    if a.frames != b.frames:
        out["stack"] = (_frames(a), _frames(b))
    return out


def _signature(node: NodeView) -> tuple[str, str, str, str]:
    frames = node.frames
    last = frames[-1] if frames else None
    return (
        node.target,
        module_path(node.modules),
        "" if last is None else last.name,
        "" if last is None else last.text,
    )


def _pairs_by_structure(a: Document, b: Document) -> Iterator[tuple[int | None, int | None]]:
    """(index in A, index in B) pairs; None on one side for an added or removed node."""
    sig_a = [_signature(n) for n in a.nodes()]
    sig_b = [_signature(n) for n in b.nodes()]
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, sig_a, sig_b, autojunk=False).get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            # the same nodes, or as many nodes in the same place: each one changed where it stands
            yield from zip(range(i1, i2), range(j1, j2), strict=True)
            continue
        # Inside a changed block, pair nodes of the same op in order; what is left is added or removed.
        ops_a = [sig_a[i][0] for i in range(i1, i2)]
        ops_b = [sig_b[j][0] for j in range(j1, j2)]
        for t2, k1, k2, l1, l2 in difflib.SequenceMatcher(None, ops_a, ops_b, autojunk=False).get_opcodes():
            if t2 == "equal":
                yield from zip(range(i1 + k1, i1 + k2), range(j1 + l1, j1 + l2), strict=True)
            else:
                yield from ((i, None) for i in range(i1 + k1, i1 + k2))
                yield from ((None, j) for j in range(j1 + l1, j1 + l2))


def diff_documents(a: Document, b: Document, *, by: Mode = "name") -> GraphDiff:
    """The node differences from ``a`` to ``b``, pairing nodes by name or by structure."""
    out = GraphDiff(by, len(a), len(b))
    if by == "name":
        names_b = {n.name: n for n in b.nodes()}
        names_a = set()
        for node in a.nodes():
            names_a.add(node.name)
            other = names_b.get(node.name)
            if other is None:
                out.removed.append(node.name)
                continue
            changes = _compare(node, other, None)
            if changes:
                out.changed.append(NodeChange(node.name, node.name, changes))
            else:
                out.unchanged += 1
        out.added = [n for n in names_b if n not in names_a]
        return out
    if by != "structure":
        raise UsageError(f"diff mode {by!r}", where="--by", expected="name or structure")
    pairs = list(_pairs_by_structure(a, b))
    renames = {a.node(i).name: b.node(j).name for i, j in pairs if i is not None and j is not None}
    for i, j in pairs:
        if j is None:
            assert i is not None
            out.removed.append(a.node(i).name)
        elif i is None:
            out.added.append(b.node(j).name)
        else:
            na, nb = a.node(i), b.node(j)
            changes = _compare(na, nb, renames)
            if changes:
                out.changed.append(NodeChange(na.name, nb.name, changes))
            elif na.name != nb.name:
                out.renamed.append((na.name, nb.name))
            else:
                out.unchanged += 1
    return out


def _short(frames: list[str]) -> str:
    return frames[-1] if frames else "(no stack)"


def format_diff(d: GraphDiff, name_a: str, name_b: str) -> list[str]:
    """The human form: one line per added, removed or renamed node, a block per changed node."""
    lines = [f"--- {name_a} ({d.nodes_a} nodes)", f"+++ {name_b} ({d.nodes_b} nodes)"]
    lines += [f"- {n}" for n in d.removed]
    lines += [f"+ {n}" for n in d.added]
    lines += [f"~ {a} -> {b} (renamed)" for a, b in d.renamed]
    for c in d.changed:
        lines.append(f"~ {c.a}" if c.a == c.b else f"~ {c.a} -> {c.b}")
        for key, (va, vb) in c.fields.items():
            if key == "stack":
                depth = next((k for k, (x, y) in enumerate(zip(va, vb, strict=False)) if x != y), min(len(va), len(vb)))
                lines.append(f"    stack: differs from frame {depth} ({len(va)} -> {len(vb)} frames)")
                lines.append(f"      - {_short(va)}")
                lines.append(f"      + {_short(vb)}")
            else:
                lines.append(f"    {key}: {va} -> {vb}")
    summary = (
        f"{len(d.added)} added, {len(d.removed)} removed, {len(d.changed)} changed, "
        f"{len(d.renamed)} renamed, {d.unchanged} unchanged (by {d.mode})"
    )
    lines.append(summary if not d.same else f"no differences: {summary}")
    return lines
