"""Find nodes: by name, op, module path or source line (``tracepack nodes``).

Works on any reader that has ``nodes()`` yielding node views with ``name``, ``target``, ``frames`` and a
module path (:class:`~tracepack.Document` and :class:`~tracepack.lazy.LazyDocument`)::

    from tracepack.query import NodeFilter, find_nodes
    for row in find_nodes(doc, NodeFilter(op="linear", source="model.py:42")):
        print(row.name, row.source)

The filters, all optional and combined with *and*:

``op``
    the node's target, as dotted words, spelled as any torch tool prints it: ``linear`` matches
    ``torch.ops.aten.linear.default``, and so do ``aten.linear``, the full name, the profiler's
    ``aten::linear`` and ``aten::linear.default``; ``lin`` does not (:mod:`tracepack.analysis.ops`).
``module``
    a module path (``blocks.0.attn``, as in ``nn_module_stack`` and ``named_modules()``): nodes made
    inside that module or any submodule of it. ``""`` is the root, which every node is in.
``source``
    ``FILE`` or ``FILE:LINE``: nodes with a frame in that file (and at that line) anywhere in their
    stack, so a helper's line finds every node it made. ``FILE`` matches a path equal to it or ending in
    ``/FILE``.
``match``
    a regular expression searched for in the node's name.

A TorchScript or mobile (lite-interpreter) file has no graph nodes: its rows are its **debug handles**
(:class:`HandleView`, what the runtime names in ``debug_handles:{N}``), each with its op
(``aten::linear``), module path and source line, filtered the same way (``--op linear``,
``aten.linear`` and ``aten::linear`` all match ``aten::linear``); the row's name is the handle number.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tracepack.errors import UsageError
from tracepack.traces import FrameKey, ModuleKey

__all__ = [
    "HandleView",
    "NodeFilter",
    "NodeRow",
    "find_nodes",
    "handle_views",
    "is_library_file",
    "module_path",
    "node_row",
    "parse_source",
    "rows_of",
]


class _Reader(Protocol):
    def nodes(self) -> Iterator[Any]: ...


def parse_source(text: str) -> tuple[str, int | None]:
    """``FILE[:LINE]`` -> ``(file, line or None)``; a UsageError when LINE is not a number."""
    file, colon, line = text.rpartition(":")
    if not colon:
        return text, None
    if not line.isdigit():
        if file and not line:
            raise UsageError(f"source {text!r} has an empty line number", where="--source", expected="FILE[:LINE]")
        return text, None  # a colon inside the path (a Windows drive, a URL): no line number
    return file, int(line)


def _file_matches(path: str, file: str) -> bool:
    return path == file or path.endswith("/" + file.lstrip("/"))


def module_path(keys: Sequence[ModuleKey]) -> str:
    """The dotted module path (``blocks.0.attn``) of a module-trie path, ``""`` for the root."""
    for key in reversed(keys):
        if key.path:
            return key.path
    return ""


@dataclass(frozen=True)
class NodeFilter:
    """Which nodes to keep (every field optional; all given ones must hold)."""

    op: str | None = None
    module: str | None = None
    source: str | None = None
    match: str | None = None

    def __post_init__(self) -> None:
        if self.match is not None:
            try:
                re.compile(self.match)
            except re.error as exc:
                raise UsageError(f"bad regular expression {self.match!r}: {exc}", where="--match") from None
        if self.source is not None:
            parse_source(self.source)

    def _op_matches(self, target: str) -> bool:
        if self.op is None:
            return True
        from tracepack.analysis.ops import op_matches

        return op_matches(self.op, target)

    def _module_matches(self, path: str) -> bool:
        if self.module is None:
            return True
        return self.module in ("", path) or path.startswith(self.module + ".")

    def _source_matches(self, frames: Iterable[FrameKey]) -> bool:
        if self.source is None:
            return True
        file, line = parse_source(self.source)
        return any(_file_matches(f.file, file) and (line is None or f.line == line) for f in frames)

    def __call__(self, node: Any, path: str | None = None) -> bool:
        """Whether ``node`` passes; ``path`` is its module path when the caller already has it."""
        if self.match is not None and re.search(self.match, node.name) is None:
            return False
        if not self._op_matches(node.target):  # a handle's op too: aten::linear
            return False
        if self.module is not None and not self._module_matches(_node_module_path(node) if path is None else path):
            return False
        return self._source_matches(node.frames)


@dataclass(frozen=True)
class NodeRow:
    """One found node, resolved to plain values (what ``tracepack nodes`` prints)."""

    index: int
    name: str
    target: str
    module: str
    module_type: str
    #: the innermost frame: (file, line, function, source text); None when the node has no stack
    source: tuple[str, int, str, str] | None
    #: the innermost frame outside installed libraries (site-packages, dist-packages): the user's line
    user_source: tuple[str, int, str, str] | None
    stack_depth: int
    #: the debug handle, for a TorchScript or mobile file's row (its ``name`` is the number); None for a node
    handle: int | None = None

    def as_json(self) -> dict[str, Any]:
        src = self.source
        out = {
            "index": self.index,
            "name": self.name,
            "target": self.target,
            "module": self.module,
            "module_type": self.module_type,
            "source": _frame_json(src),
            "user_source": _frame_json(self.user_source),
            "stack_depth": self.stack_depth,
        }
        if self.handle is not None:
            out["handle"] = self.handle
        return out


def _frame_json(f: tuple[str, int, str, str] | None) -> dict[str, Any] | None:
    return None if f is None else {"file": f[0], "line": f[1], "function": f[2], "text": f[3]}


_LIBRARY_DIRS = ("/site-packages/", "/dist-packages/", "\\site-packages\\")


def is_library_file(path: str) -> bool:
    """Whether ``path`` is in an installed package (``site-packages``), not the user's own code."""
    return any(d in path for d in _LIBRARY_DIRS)


def _node_module_path(node: Any) -> str:
    return module_path(node.modules)


class HandleView:
    """One debug handle of a TorchScript or mobile document, as :func:`find_nodes` lists it: ``name`` is the
    handle number, ``target`` its op (``aten::linear``), ``frames`` its inlined call stack (outermost first)
    and ``modules`` its module path (``TOP(M)::forward.blocks(Sequential)::forward...``)."""

    __slots__ = ("_doc", "handle", "index")

    def __init__(self, doc: Any, index: int) -> None:
        self._doc = doc
        self.index = index
        self.handle: int = doc.raw.debug_handles.handle[index]

    @property
    def name(self) -> str:
        return str(self.handle)

    @property
    def target(self) -> str:
        return str(self._doc.raw.strings[self._doc.raw.debug_handles.op[self.index]])

    @property
    def frames(self) -> list[FrameKey]:
        frames: list[FrameKey] = self._doc.frames(self._doc.raw.debug_handles.stack[self.index])
        return frames

    @property
    def modules(self) -> list[ModuleKey]:
        modules: list[ModuleKey] = self._doc.modules(self._doc.raw.debug_handles.module[self.index])
        return modules


def handle_views(doc: Any) -> Iterator[HandleView]:
    """Every debug handle of ``doc`` (an eager :class:`~tracepack.Document`), by handle."""
    raw = getattr(doc, "raw", None)
    table = getattr(raw, "debug_handles", None)
    return (HandleView(doc, i) for i in range(len(table.handle) if table is not None else 0))


def rows_of(doc: Any) -> Iterator[Any]:
    """What ``tracepack nodes`` lists of ``doc``: its graph nodes, or, for a TorchScript or mobile file (no
    graph nodes), its debug handles."""
    return doc.nodes() if len(doc) or getattr(doc, "raw", None) is None else handle_views(doc)


def node_row(node: Any) -> NodeRow:
    """A node (or :class:`HandleView`) as a :class:`NodeRow`."""
    keys: list[ModuleKey] = node.modules
    frames = node.frames
    last = frames[-1] if frames else None
    user = next((f for f in reversed(frames) if not is_library_file(f.file)), None)
    return NodeRow(
        index=node.index,
        name=node.name,
        target=node.target,
        module=module_path(keys),
        module_type=next((k.type for k in reversed(keys) if k.path), keys[-1].type if keys else ""),
        source=None if last is None else (last.file, last.line, last.name, last.text),
        user_source=None if user is None else (user.file, user.line, user.name, user.text),
        stack_depth=len(frames),
        handle=node.handle if isinstance(node, HandleView) else None,
    )


def find_nodes(doc: _Reader, where: NodeFilter | None = None) -> Iterator[NodeRow]:
    """The nodes of ``doc`` that pass ``where`` (all of them without one), in graph order; for a TorchScript
    or mobile file, its debug handles (:func:`rows_of`)."""
    for node in rows_of(doc):
        if where is None:
            yield node_row(node)
            continue
        row = node_row(node) if where.module is not None else None
        if where(node, None if row is None else row.module):
            yield node_row(node) if row is None else row
