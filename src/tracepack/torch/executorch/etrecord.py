"""ExecuTorch's ETRecord (a zip written by ``generate_etrecord``) -> one tracepack Document per method.

An ETRecord holds, as members of a zip (stored, not compressed):

``edge_dialect_exported_program/<method>``
    the method's edge-dialect program as torch.export JSON (schema 5.4, written by ExecuTorch's own
    copy of torch's serializer), every node with ``debug_handle``, ``stack_trace``,
    ``nn_module_stack`` and ``from_node`` in its metadata; ``..._state_dict``, ``..._constants`` and
    ``..._example_inputs`` beside it are pickled weights, never read here;
``exported_program``
    the ATen program the edge program was lowered from (same layout);
``debug_handle_map``
    JSON ``{method: {instruction id: handle or [handles]}}``: what the emitter recorded per instruction;
``delegate_map``, ``instruction_id_to_num_outs_map``, ``export_graph_id``
    JSON as well; ``ETRECORD_V0`` marks the file.

Each method's program is imported with the torch.export importer (stacks, module paths and
``from_node`` provenance interned), and its **debug-handle table** is filled: one row per handle with
the stack, module path and op of the first node that carries it. A node's handle is the one ExecuTorch
stored in its metadata; a node without one gets it recomputed the way ExecuTorch's
``DebugHandleGeneratorPass`` numbers them (:func:`recompute_handles`). The instruction map, the handle
-> nodes map and the delegate map go into the ``executorch/method`` extension, which
:mod:`tracepack.runtime` reads to answer "instruction C:I" and "handle N". Nothing here needs torch
or ExecuTorch installed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

import msgspec

from tracepack import model as m
from tracepack.document import Document
from tracepack.errors import DecodeError, LegacyFormatError, UsageError
from tracepack.io.zip import Archive, open_archive
from tracepack.runtime.symbols import decode_groups, encode_groups
from tracepack.traces import Provenance

__all__ = [
    "EDGE_PREFIX",
    "ETRECORD_MARKER",
    "METHOD_EXTENSION",
    "ETRecord",
    "import_etrecord",
    "is_etrecord",
    "read_etrecord",
    "recompute_handles",
    "restore_debug_handles",
    "stored_handles",
    "with_handles",
]

ETRECORD_MARKER = "ETRECORD_V0"
EDGE_PREFIX = "edge_dialect_exported_program/"
#: The extension a method's document keeps its instruction and handle maps in (JSON).
METHOD_EXTENSION = "executorch/method"
_WEIGHT_SUFFIXES = ("_state_dict", "_constants", "_example_inputs")
#: Targets that are not operators (Inspector's operator graph skips them).
_NOT_OPERATORS = frozenset({"_operator.getitem", "operator.getitem", "executorch.exir.memory.alloc", "memory.alloc"})


class ETRecord(NamedTuple):
    """The parts of an ETRecord tracepack reads (program JSON as bytes; weights are never read)."""

    programs: dict[str, bytes]
    """Edge-dialect program JSON per method, in file order."""
    exported_program: bytes | None
    debug_handle_map: dict[str, dict[str, list[int]]]
    """Per method: instruction id (as the JSON key, a decimal string) -> debug handles."""
    delegate_map: dict[str, Any]
    num_outs: dict[str, Any]
    export_graph_id: int | None


def is_etrecord(names: Sequence[str]) -> bool:
    """Whether a zip with these member names is an ETRecord."""
    return ETRECORD_MARKER in names


def _json_member(archive: Archive, name: str) -> Any:
    from tracepack.io.guard import parse_json

    where = f"{archive.source}:{name}"
    data = archive.read(name)
    try:  # nesting and integers held to the max_depth and max_int_digits budgets
        return parse_json(lambda: json.loads(data), data, where, LegacyFormatError)
    except json.JSONDecodeError as exc:
        raise LegacyFormatError(f"not valid JSON: {exc.msg}", source=where, where=f"character {exc.pos}") from None
    except UnicodeDecodeError as exc:
        raise LegacyFormatError("not UTF-8 text", source=where, where=f"byte {exc.start}") from None


def _handle_map(value: Any, source: str) -> dict[str, dict[str, list[int]]]:
    """``debug_handle_map`` checked and normalised: every value a list of ints."""
    expected = "{method: {instruction id: handle or [handles]}}"
    if type(value) is not dict:
        raise LegacyFormatError("debug_handle_map is not a JSON object", source=source, expected=expected)
    out: dict[str, dict[str, list[int]]] = {}
    for method, table in value.items():
        if type(table) is not dict:
            raise LegacyFormatError("not a JSON object", source=source, where=f"$.{method}", expected=expected)
        rows: dict[str, list[int]] = {}
        for instr, handles in table.items():
            hs = [handles] if type(handles) is int else handles
            if not (instr.isdigit() and type(hs) is list and all(type(h) is int for h in hs)):
                raise LegacyFormatError(
                    f"entry {instr!r}: {handles!r:.60}", source=source, where=f"$.{method}", expected=expected
                )
            rows[instr] = hs
        out[method] = rows
    return out


def read_etrecord(data: bytes | bytearray | memoryview, *, source: str = "<etrecord>") -> ETRecord:
    """The members of an ETRecord tracepack uses; LegacyFormatError names what is wrong."""
    with open_archive(data, source=source) as archive:
        names = archive.names()
        if not is_etrecord(names):
            raise LegacyFormatError(
                "a zip archive, but not an ETRecord", source=source, expected=f"a member named {ETRECORD_MARKER}"
            )
        programs: dict[str, bytes] = {}
        for name in names:
            if name.startswith(EDGE_PREFIX) and not name.endswith(_WEIGHT_SUFFIXES):
                programs[name[len(EDGE_PREFIX) :]] = archive.read(name)
        if "edge_dialect_exported_program" in names:  # the older layout: one program, for "forward"
            programs.setdefault("forward", archive.read("edge_dialect_exported_program"))
        if not programs:
            raise LegacyFormatError(
                "the ETRecord has no edge-dialect program",
                source=source,
                expected=f"members {EDGE_PREFIX}<method>",
            )
        handle_map = (
            _handle_map(_json_member(archive, "debug_handle_map"), f"{source}:debug_handle_map")
            if "debug_handle_map" in names
            else {}
        )
        delegate = _json_member(archive, "delegate_map") if "delegate_map" in names else {}
        num_outs = (
            _json_member(archive, "instruction_id_to_num_outs_map") if "instruction_id_to_num_outs_map" in names else {}
        )
        graph_id = _json_member(archive, "export_graph_id") if "export_graph_id" in names else None
        exported = archive.read("exported_program") if "exported_program" in names else None
    return ETRecord(
        programs,
        exported,
        handle_map,
        delegate if type(delegate) is dict else {},
        num_outs if type(num_outs) is dict else {},
        graph_id if type(graph_id) is int else None,
    )


# -- debug handles --------------------------------------------------------------------------------


def _greatest_ancestor(sources: Sequence[Provenance]) -> tuple[str, int] | None:
    """ExecuTorch's ``get_greatest_ancestor_node_identifier``: the last NodeSource, then its last, ..."""
    if not sources:
        return None
    p = sources[-1]
    while p.from_node:
        p = p.from_node[-1]
    return (p.name, p.graph_id)


def _bfs_order(doc: Document) -> list[int]:
    """Node indices in the order ExecuTorch visits them: the top graph, then nested graphs level by level."""
    names = [n.name for n in doc.nodes()]
    return sorted(range(len(names)), key=lambda i: names[i].count("/"))


def recompute_handles(doc: Document) -> dict[int, int]:
    """Debug handles as ExecuTorch's ``DebugHandleGeneratorPass`` numbers them, from ``from_node``.

    Visiting nodes in graph order, a node's handle is 1 + the number of distinct greatest ancestors
    seen before its own (its ``from_node`` list's last entry, followed through each last entry to
    the root): nodes lowered from one ATen node share its handle. ``{node index: handle}``; nodes
    without provenance get none.
    """
    seen: dict[tuple[str, int], int] = {}
    out: dict[int, int] = {}
    for i in _bfs_order(doc):
        key = _greatest_ancestor(doc.provenance(doc.raw.graph.nodes[i].from_node))
        if key is None:
            continue
        out[i] = seen.setdefault(key, len(seen) + 1)
    return out


def stored_handles(doc: Document) -> dict[int, int]:
    """The ``debug_handle`` each node's metadata holds (ExecuTorch's own), ``{node index: handle}``."""
    lifted = _lifted(doc)
    if lifted is not None:
        return lifted[0]
    s = doc.raw.strings
    key = {i for i, text in enumerate(s) if text == "debug_handle"}
    out: dict[int, int] = {}
    if not key:
        return out
    for i, node in enumerate(doc.raw.graph.nodes):
        for k, v in zip(node.meta_keys, node.meta_values, strict=True):
            if k in key and v >= 0 and s[v].isdigit():
                out[i] = int(s[v])
    return out


def with_handles(
    doc: Document,
    *,
    method: str,
    instructions: dict[str, list[int]] | None = None,
    delegate_map: Any = None,
    num_outs: Any = None,
    recompute: bool = False,
    lifted: tuple[dict[int, int], dict[int, int]] | None = None,
) -> Document:
    """``doc`` with its debug-handle table filled and the ``executorch/method`` extension added.

    ``lifted``: ``({node: handle}, {node: position})`` of ``debug_handle`` metadata entries taken out
    of the program before import (:func:`import_etrecord` does that: the handles are then stored once,
    as integers, and :func:`restore_debug_handles` puts the entries back for ``model.json``).

    Handles are the ones stored in node metadata (ExecuTorch's), or recomputed from ``from_node``
    where a node has none (everywhere with ``recompute=True``). Each handle's row takes the stack,
    module path and op (target) of its first node.
    """
    raw = doc.raw
    stored = {} if recompute else (dict(lifted[0]) if lifted is not None else stored_handles(doc))
    handles = dict(stored)
    recomputed = False
    if recompute or len(stored) < len(raw.graph.nodes):
        for i, h in recompute_handles(doc).items():
            if i not in handles:
                handles[i] = h
                recomputed = True
    # A handle's nodes as ExecuTorch's Inspector lists them: memory.alloc and getitem left out.
    nodes = raw.graph.nodes
    s = raw.strings
    nodes_of: dict[int, list[int]] = {}
    for i in sorted(handles):
        if s[nodes[i].target] not in _NOT_OPERATORS:
            nodes_of.setdefault(handles[i], []).append(i)
    rows = sorted(nodes_of.items())
    table = m.DebugHandleTable(
        handle=[h for h, _ in rows],
        stack=[nodes[ix[0]].stack for _, ix in rows],
        module=[nodes[ix[0]].module for _, ix in rows],
        op=[nodes[ix[0]].target for _, ix in rows],
        range=[0 for _ in rows],
    )
    info = {
        "format": "etrecord",
        "method": method,
        "instructions": encode_groups({int(i): hs for i, hs in (instructions or {}).items()}),
        "handle_nodes": encode_groups(dict(rows)),
        "delegate_map": delegate_map or {},
        "num_outs": num_outs or {},
        "recomputed": recomputed or recompute,
    }
    if lifted is not None:
        info["lifted_debug_handle"] = {
            "handles": encode_groups(_invert(lifted[0])),
            "positions": encode_groups(_invert(lifted[1])),
        }
    ext = m.Extension(METHOD_EXTENSION, json.dumps(info, separators=(",", ":")))
    kept = [e for e in raw.extensions if e.name != METHOD_EXTENSION]
    new = msgspec.structs.replace(raw, debug_handles=table, extensions=[*kept, ext])
    return Document(new, source_version=doc.source_version)


def _invert(mapping: dict[int, int]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for k in sorted(mapping):
        out.setdefault(mapping[k], []).append(k)
    return out


def _lifted(doc: Document) -> tuple[dict[int, int], dict[int, int]] | None:
    """``({node: handle}, {node: metadata position})`` of a document whose handles were lifted."""
    from tracepack.document import json_value

    text = doc.extension(METHOD_EXTENSION)
    if text is None:
        return None
    where = f"$.extensions ({METHOD_EXTENSION})"
    value = json_value(text, where)
    lift = value.get("lifted_debug_handle") if type(value) is dict else None
    if not lift:
        return None
    if type(lift) is not dict or "handles" not in lift or "positions" not in lift:
        raise DecodeError(
            "malformed lifted_debug_handle", where=f"{where} $.lifted_debug_handle", expected="{handles, positions}"
        )
    groups = decode_groups(lift["handles"], f"{where} $.lifted_debug_handle.handles")
    handles = {i: h for h, ix in groups.items() for i in ix}
    groups = decode_groups(lift["positions"], f"{where} $.lifted_debug_handle.positions")
    at = {i: p for p, ix in groups.items() for i in ix}
    nodes = doc.raw.graph.nodes
    for i in handles:
        if not 0 <= i < len(nodes) or i not in at or not 0 <= at[i] <= len(nodes[i].meta_keys) + 1:
            raise DecodeError(
                f"a lifted debug handle for node {i} without a place in its metadata",
                where=f"{where} $.lifted_debug_handle",
                expected=f"a handle and its metadata position for nodes below {len(nodes)}",
            )
    return handles, at


def _lift(program: bytes) -> tuple[bytes, dict[int, int], dict[int, int]] | None:
    """The program JSON without its nodes' ``debug_handle`` metadata, ``{node: handle}`` and
    ``{node: position of the entry in the metadata}``; None when there is nothing to lift."""
    from tracepack.io.guard import parse_json

    try:  # what does not parse within the budgets is left to the import, which says why
        obj = parse_json(lambda: json.loads(program), program, None, LegacyFormatError)
        nodes = obj["graph_module"]["graph"]["nodes"]
    except (LegacyFormatError, ValueError, KeyError, TypeError):
        return None
    if type(nodes) is not list:
        return None
    handles: dict[int, int] = {}
    at: dict[int, int] = {}
    for i, n in enumerate(nodes):
        meta = n.get("metadata") if type(n) is dict else None
        if type(meta) is not dict or "debug_handle" not in meta:
            continue
        v = meta["debug_handle"]
        if type(v) is not str or not v.isdigit() or str(int(v)) != v:
            return None
        at[i] = list(meta).index("debug_handle")
        handles[i] = int(v)
        del meta["debug_handle"]
    if not handles:
        return None
    return json.dumps(obj).encode(), handles, at


def restore_debug_handles(doc: Document) -> Document:
    """``doc`` with lifted ``debug_handle`` metadata entries back in place (for ``model.json``); as is
    when nothing was lifted."""
    lifted = _lifted(doc)
    if lifted is None:
        return doc
    handles, at = lifted
    raw = doc.raw
    strings = list(raw.strings)
    index: dict[str, int] = {}

    def sid(text: str) -> int:
        if not index:
            index.update((t, i) for i, t in enumerate(strings))
        found = index.get(text)
        if found is None:
            found = index[text] = len(strings)
            strings.append(text)
        return found

    key = sid("debug_handle")
    nodes = list(raw.graph.nodes)
    for i, h in handles.items():
        n = nodes[i]
        # The metadata in JSON order: entries, with the lifted from_node (None) where it goes.
        tokens: list[tuple[int, int] | None] = list(zip(n.meta_keys, n.meta_values, strict=True))
        if n.from_node_meta_index >= 0:
            tokens.insert(n.from_node_meta_index, None)
        tokens.insert(at[i], (key, sid(str(h))))
        fni = tokens.index(None) if None in tokens else -1
        entries = [t for t in tokens if t is not None]
        nodes[i] = msgspec.structs.replace(
            n, meta_keys=[k for k, _ in entries], meta_values=[v for _, v in entries], from_node_meta_index=fni
        )
    new = msgspec.structs.replace(raw, strings=strings, graph=msgspec.structs.replace(raw.graph, nodes=nodes))
    return Document(new, source_version=doc.source_version)


def import_etrecord(
    data: bytes | bytearray | memoryview,
    *,
    source: str = "<etrecord>",
    methods: Sequence[str] | None = None,
    recompute: bool = False,
) -> dict[str, Document]:
    """An ETRecord as ``{method: Document}`` (every method, or those asked for), handle tables filled."""
    from tracepack.torch.export.model_json import export_model_json, import_model_json

    rec = read_etrecord(data, source=source)
    wanted = list(rec.programs) if methods is None else list(methods)
    for name in wanted:
        if name not in rec.programs:
            raise UsageError(
                f"the ETRecord has no method {name!r}",
                source=source,
                expected=f"one of {', '.join(rec.programs)}",
            )
    out: dict[str, Document] = {}
    for name in wanted:
        program, where = rec.programs[name], f"{source}:{EDGE_PREFIX}{name}"
        options: dict[str, Any] = {
            "method": name,
            "instructions": rec.debug_handle_map.get(name, {}),
            "delegate_map": rec.delegate_map.get(name),
            "num_outs": rec.num_outs.get(name),
            "recompute": recompute,
        }
        lifted = None if recompute else _lift(program)
        if lifted is not None:
            # The handles stored once, as integers (not one string per node); kept only when the
            # program still comes back byte for byte.
            text, handles, at = lifted
            doc = import_model_json(text, source=where, group_strings=False)
            if len(doc) == len(handles) or len(doc) >= max(handles) + 1:
                candidate = with_handles(doc, lifted=(handles, at), **options)
                if export_model_json(restore_debug_handles(candidate)) == bytes(program):
                    out[name] = candidate
                    continue
        out[name] = with_handles(import_model_json(program, source=where, group_strings=False), **options)
    return out
