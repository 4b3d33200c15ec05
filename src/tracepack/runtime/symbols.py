"""Debug handles and instructions answered from a document: op, module path, Python stack, nodes.

A :class:`Symbolicator` wraps one document, eager (:class:`tracepack.Document`) or lazy
(:func:`tracepack.open` on an uncompressed FlatBuffers ``.tpk``: nothing is decoded up front, a handle
is a binary search over the handle column plus the rows it refers to). What a document can answer
depends on where it came from:

ExecuTorch ETRecord (one document per method)
    handles (the table rows), instructions (``executorch/method``: instruction id -> handles) and
    the nodes behind each handle, as ExecuTorch's Inspector lists them;
ExecuTorch ``.pte`` (emitted with ``emit_stacktrace=True``)
    instructions ``C:I``: operator and emitted frames, no module path;
TorchScript lite-interpreter archives (mobile debug info)
    handles: op, module hierarchy, inlined call stack, source range; and torch's own text for a handle
    (``Module hierarchy:top(M)::<unknown>...`` and the TorchScript traceback) from the archive's
    ``torchscript/mobile-render`` extension, so a ``.tpk`` alone renders it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

from tracepack.errors import DecodeError, NotFoundError, TracepackError, UsageError
from tracepack.traces import parse_nn_module_stack

__all__ = [
    "METHOD_EXTENSION",
    "decode_groups",
    "encode_groups",
    "HandleAnswer",
    "InstructionAnswer",
    "NodeAnswer",
    "Symbolicator",
    "op_name",
]

METHOD_EXTENSION = "executorch/method"
#: A TorchScript archive's document: its archive facts, and what torch's mobile text needs.
TORCHSCRIPT_EXTENSION = "torchscript/archive"
RENDER_EXTENSION = "torchscript/mobile-render"
_OP_PREFIXES = ("executorch.exir.dialects.edge.ops.", "torch.ops.")


class _Doc(Protocol):  # what Document and LazyDocument both offer
    def node(self, key: str | int) -> Any: ...
    def debug_handle(self, handle: int) -> Any: ...
    def extension(self, name: str) -> str | None: ...
    def __len__(self) -> int: ...


def _deltas(values: list[int]) -> list[int]:
    return [b - a for a, b in zip([0, *values], values, strict=False)]


def _undelta(values: list[int]) -> list[int]:
    out, acc = [], 0
    for v in values:
        acc += v
        out.append(acc)
    return out


def encode_groups(groups: dict[int, list[int]]) -> dict[str, list[int]]:
    """``{key: [values]}`` (keys ascending) as delta-coded columns, compact in JSON and after zstd:
    ``keys`` and ``values`` delta-coded, ``counts`` (values per key) left out when every count is 1."""
    keys = sorted(groups)
    counts = [len(groups[k]) for k in keys]
    values = [v for k in keys for v in groups[k]]
    out = {"keys": _deltas(keys), "values": _deltas(values)}
    if any(c != 1 for c in counts):
        out["counts"] = counts
    return out


def decode_groups(obj: Any, where: str) -> dict[int, list[int]]:
    """:func:`encode_groups`' columns back as ``{key: [values]}``; DecodeError when they do not fit.

    Also reads the first form the extension had (``{"<key>": [values]}``, written by builds of
    2026-11-23 before the columns), so those files stay readable."""
    if isinstance(obj, dict) and all(isinstance(k, str) and k.isdigit() for k in obj):
        try:
            return {int(k): [int(v) for v in vs] for k, vs in obj.items()}
        except (TypeError, ValueError) as exc:
            raise DecodeError(f"malformed {METHOD_EXTENSION} extension ({exc})", where=where) from None
    try:
        keys, values = _undelta(obj["keys"]), _undelta(obj["values"])
        counts = obj.get("counts") or [1] * len(keys)
        if len(counts) != len(keys) or sum(counts) != len(values) or min(counts, default=0) < 0:
            raise ValueError("counts do not match")
        out: dict[int, list[int]] = {}
        pos = 0
        for k, c in zip(keys, counts, strict=True):
            out[int(k)] = [int(v) for v in values[pos : pos + c]]
            pos += c
        return out
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DecodeError(f"malformed {METHOD_EXTENSION} extension ({exc})", where=where) from None


def op_name(target: str) -> str:
    """A node target as ExecuTorch's Inspector names ops: ``aten.relu.default`` (dialect prefix dropped)."""
    for prefix in _OP_PREFIXES:
        if target.startswith(prefix):
            return target[len(prefix) :]
    return target


@dataclass(frozen=True)
class NodeAnswer:
    """One graph node behind a handle (what Inspector's ``Event.stack_traces`` etc. hold per node)."""

    name: str
    op: str
    stack_trace: str | None
    nn_module_stack: str | None

    @property
    def module_path(self) -> str:
        """The innermost module's attribute path (``blocks.0.fc``), empty at the top."""
        entries = parse_nn_module_stack(self.nn_module_stack or "") if self.nn_module_stack else None
        return entries[-1].path if entries else ""

    @property
    def module_type(self) -> str:
        entries = parse_nn_module_stack(self.nn_module_stack or "") if self.nn_module_stack else None
        return entries[-1].type if entries else ""


@dataclass(frozen=True)
class HandleAnswer:
    handle: int
    op: str
    stack_trace: str
    """The handle's Python stack as its producer wrote it (fx ``stack_trace``; mobile: inlined frames)."""
    module_hierarchy: str
    """tracepack's TorchScript-style form of the module path (``TOP(M)::forward...``)."""
    nodes: tuple[NodeAnswer, ...] = ()
    source_range: tuple[str, int, int] | None = None
    runtime_hierarchy: str | None = None
    """The hierarchy exactly as the torch runtime prints it (mobile ``top(M)::<unknown>...``), when known."""
    runtime_text: str | None = None
    """What the runtime prints for the handle with its debug maps present (mobile: ``Module hierarchy:...``
    and the TorchScript traceback), when known."""
    runtime_note: str | None = None
    """Why ``runtime_text`` is unknown for a TorchScript archive's handle, and how to get it."""

    @property
    def module_path(self) -> str:
        return self.nodes[0].module_path if self.nodes else ""

    @property
    def module_type(self) -> str:
        return self.nodes[0].module_type if self.nodes else ""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["module_path"] = self.module_path
        out["module_type"] = self.module_type
        out["nodes"] = [{**asdict(n), "module_path": n.module_path} for n in self.nodes]
        return out


@dataclass(frozen=True)
class InstructionAnswer:
    method: str
    chain: int
    instruction: int
    op: str = ""
    frames_trace: str | None = None
    """The stack the ``.pte`` emitted for the instruction (when read from one)."""
    handles: tuple[HandleAnswer, ...] = field(default=())
    delegate: str = ""
    """The backend of a delegate call (``XnnpackBackend``), from the ETRecord's ``delegate_map``."""

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "chain": self.chain,
            "instruction": self.instruction,
            "op": self.op,
            "delegate": self.delegate,
            "frames_trace": self.frames_trace,
            "handles": [h.to_json() for h in self.handles],
        }


class Symbolicator:
    """Answers for one document (one ExecuTorch method, or one TorchScript archive)."""

    def __init__(self, doc: _Doc, *, source: str = "<document>", lite_table: Any = None) -> None:
        self.doc = doc
        self.source = source
        #: A TorchScript lite-interpreter program's debug table
        #: (:class:`tracepack.torch.torchscript.render.LiteDebugTable`), to render as torch does.
        self.lite_table = lite_table
        self._info: dict[str, Any] | None = None
        self._handle_cache: dict[int, HandleAnswer] = {}
        self._instructions: dict[int, list[int]] | None = None
        self._handle_nodes: dict[int, list[int]] | None = None
        self._lite_looked = False

    @property
    def info(self) -> dict[str, Any]:
        """The ``executorch/method`` extension (empty for other documents), parsed once."""
        if self._info is None:
            text = self.doc.extension(METHOD_EXTENSION)
            if text is None:
                self._info = {}
            else:
                from tracepack.document import json_value

                try:  # guarded: nesting and integers within the budgets
                    value = json_value(text, f"$.extensions ({METHOD_EXTENSION})")
                except DecodeError as exc:
                    raise exc.with_source(self.source) from None
                self._info = value if type(value) is dict else {}
        return self._info

    @property
    def instructions(self) -> dict[int, list[int]]:
        """ExecuTorch's ``debug_handle_map`` of the method: instruction id -> debug handles."""
        if self._instructions is None:
            obj = self.info.get("instructions")
            try:
                self._instructions = decode_groups(obj, "$.instructions") if obj else {}
            except DecodeError as exc:  # the artifact is what is wrong: name it
                raise exc.with_source(self.source) from None
        return self._instructions

    @property
    def handle_nodes(self) -> dict[int, list[int]]:
        """Debug handle -> the indices of the graph nodes behind it."""
        if self._handle_nodes is None:
            obj = self.info.get("handle_nodes")
            try:
                self._handle_nodes = decode_groups(obj, "$.handle_nodes") if obj else {}
            except DecodeError as exc:  # the artifact is what is wrong: name it
                raise exc.with_source(self.source) from None
        return self._handle_nodes

    @property
    def method(self) -> str:
        return str(self.info.get("method", ""))

    @property
    def kind(self) -> str:
        """``etrecord``, ``pte`` or ``handles`` (a document with a debug-handle table only)."""
        return str(self.info.get("format", "handles"))

    def _node(self, index: int) -> NodeAnswer:
        if not 0 <= index < len(self.doc):  # the method extension's handle_nodes names a node that is not there
            raise DecodeError(
                f"malformed {METHOD_EXTENSION} extension (node {index} of {len(self.doc)})",
                source=self.source,
                where="$.handle_nodes",
                expected=f"node indices below {len(self.doc)}",
            )
        n = self.doc.node(index)
        return NodeAnswer(n.name, op_name(n.target), n.stack_trace, n.module_stack)

    def handle(self, handle: int) -> HandleAnswer:
        """What ``handle`` stands for; NotFoundError when the document has no such handle."""
        found = self._handle_cache.get(handle)
        if found is not None:
            return found
        try:
            row = self.doc.debug_handle(handle)
        except UsageError:
            raise NotFoundError(f"no debug handle {handle}", source=self.source) from None
        nodes: tuple[NodeAnswer, ...] = ()
        ix = self.handle_nodes.get(handle)
        if ix:
            nodes = tuple(self._node(i) for i in ix)
        answer = HandleAnswer(
            handle,
            op_name(row.op),
            row.stack_trace,
            row.module_hierarchy,
            nodes,
            row.source_range,
            *self._runtime(handle),
        )
        if answer.runtime_text is None and self.runtime_note is not None:
            answer = replace(answer, runtime_note=self.runtime_note)
        self._handle_cache[handle] = answer
        return answer

    def _lite(self) -> Any:
        """The lite-interpreter table: given, or kept in the document (``torchscript/mobile-render``)."""
        if self.lite_table is None and not self._lite_looked:
            self._lite_looked = True
            if self.doc.extension(RENDER_EXTENSION) is not None:
                import importlib

                mobile = importlib.import_module("tracepack.torch.torchscript.mobile_render")
                try:
                    self.lite_table = mobile.lite_table_from_document(self.doc)
                except TracepackError as exc:
                    raise exc.with_source(self.source) from None
        return self.lite_table

    @property
    def runtime_note(self) -> str | None:
        """For a TorchScript archive's document that cannot print torch's own text: how to get it."""
        archive = self.doc.extension(TORCHSCRIPT_EXTENSION)
        if self._lite() is not None or archive is None:
            return None
        from tracepack.document import json_value

        try:
            value = json_value(archive, f"$.extensions ({TORCHSCRIPT_EXTENSION})")
        except DecodeError as exc:
            raise exc.with_source(self.source) from None
        reason = value.get("no_mobile_render") if type(value) is dict else None
        if isinstance(reason, str):
            return (
                f"torch's exact text is not available: when the archive was imported, {reason}; "
                "shown in tracepack's form instead"
            )
        return (
            "this .tpk predates torch's exact text (no torchscript/mobile-render extension): convert the "
            "full .ptl again (tracepack convert app.ptl app.tpk) or symbolicate with the .ptl"
        )

    def _runtime(self, handle: int) -> tuple[str | None, str | None]:
        """The mobile runtime's own hierarchy and debug text for ``handle`` (renderer of tracepack.torch)."""
        table = self._lite()
        if table is None or handle not in table.handles:
            return None, None
        import importlib

        render = importlib.import_module("tracepack.torch.torchscript.render")
        try:  # a document's table decodes each handle when first asked for
            return (
                render.render_module_hierarchy(table, handle),
                render.render_debug_string(table, handle),
            )
        except TracepackError as exc:
            raise exc.with_source(self.source) from None

    def _delegates(self) -> dict[str, Any]:
        value = self.info.get("delegate_map")
        return value if isinstance(value, dict) else {}

    def delegate_handles(self, instruction: int, delegate_id: int | str) -> list[int] | None:
        """The debug handles of one op inside a delegate call, from the ETRecord's ``delegate_map`` as
        ExecuTorch's Inspector finds them: the call's ``delegate_map`` keyed by the event's delegate debug
        id (as is, as text, then a key contained in it); None when the backend recorded no such entry
        (XNNPACK in ExecuTorch 1.5.1 records none: its per-op events have no handles)."""
        entry = self._delegates().get(str(instruction))
        inner = entry.get("delegate_map") if isinstance(entry, dict) else None
        if not isinstance(inner, dict):
            return None
        found = inner.get(delegate_id) if isinstance(delegate_id, str) else None
        if found is None:
            found = inner.get(str(delegate_id))
        if found is None:
            for key, value in inner.items():
                if key in str(delegate_id):
                    found = value
        if found is None:
            return None
        return [int(h) for h in (found if isinstance(found, list) else [found])]

    def instruction(self, chain: int, instruction: int) -> InstructionAnswer:
        """What instruction ``chain:instruction`` of this method ran; NotFoundError when unknown."""
        info = self.info
        if info.get("format") == "pte":
            i = info.get("instruction_nodes", {}).get(f"{chain}:{instruction}")
            if i is None:
                raise NotFoundError(
                    f"no instruction {chain}:{instruction} in method {self.method!r}", source=self.source
                )
            n = self.doc.node(i)
            return InstructionAnswer(self.method, chain, instruction, n.target, n.stack_trace)
        if info.get("format") == "etrecord":
            # ExecuTorch's debug_handle_map is keyed by instruction id alone (chains are not used).
            handles = self.instructions.get(instruction)
            if handles is None:
                raise NotFoundError(
                    f"no instruction {chain}:{instruction} in the debug_handle_map of {self.method!r}",
                    source=self.source,
                )
            answers = tuple(self.handle(h) for h in handles)
            op = answers[0].op if answers else ""
            entry = self._delegates().get(str(instruction))
            backend = str(entry.get("name", "")) if isinstance(entry, dict) else ""
            return InstructionAnswer(self.method, chain, instruction, op, None, answers, backend)
        raise UsageError(
            "this document has no instruction map (it is not from an ExecuTorch ETRecord or .pte)",
            source=self.source,
        )


def pick(symbolicators: Sequence[Symbolicator], method: str | None) -> Symbolicator:
    """The symbolicator of ``method`` (None: the only one, else ``forward``)."""
    if method is None:
        if len(symbolicators) == 1:
            return symbolicators[0]
        method = "forward"
    for s in symbolicators:
        if s.method == method:
            return s
    raise UsageError(
        f"no method {method!r}", where="--method", expected=f"one of {', '.join(s.method for s in symbolicators)}"
    )
