"""``tracepack pack`` / ``unpack``: a ``.pt2`` whose per-node debug strings live in a tracepack member.

``torch.export.save`` writes every node's ``stack_trace``, ``nn_module_stack``,
``source_fn_stack``, ``torch_fn``, ``custom`` and ``from_node`` strings into
``<top>/models/<name>.json``, one full copy per node. :func:`pack_pt2` moves
the debug-only ones (:data:`DEBUG_KEYS`: ``stack_trace``, ``from_node``) of every
graph, nested ``torch.cond``/``map`` graphs too, into ``<top>/tracepack/<name>.tpk``,
a tracepack document where traces are interned, and keeps in the program what
torch reads after loading (``nn_module_stack``, ``source_fn_stack``, ``torch_fn``,
``custom``); ``strip=True`` (``--strip-all``) moves every metadata string. The
program member is stored deflated (torch's reader inflates it); the rest of the
archive is kept member for member, 64-byte aligned as torch writes it:

* ``torch.export.load`` still loads the packed archive: torch only reads
  ``models/``, ``data/`` and ``extra/`` (whose members must be UTF-8 text, so
  the binary member sits in its own folder); with the defaults the program has
  everything but the stack traces and provenance, so ``torch.export.unflatten``
  works on it;
* :func:`unpack_pt2` merges the metadata back and writes the original
  ``model.json`` byte for byte (``pack`` checks this before writing anything);
* :func:`tracepack.torch.load` loads a packed archive with its metadata back.

The tracepack member's nodes are named after the program's nodes (a nested
graph's nodes as ``<node>/<graph>/<name>``), so ``tracepack trace`` works on it.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator, Sequence
from typing import IO, Any

from tracepack.document import Document
from tracepack.errors import LegacyFormatError, UsageError
from tracepack.io.zip import Archive, Member, open_archive, open_archive_file
from tracepack.torch.export import layouts

__all__ = [
    "DEBUG_KEYS",
    "LAYOUT_EXTENSION",
    "MEMBER_DIR",
    "is_packed",
    "merge_into",
    "pack_pt2",
    "pack_pt2_file",
    "read_program",
    "replace_program",
    "replace_program_to",
    "split_program",
    "unpack_pt2",
    "unpack_pt2_file",
]

#: Folder (below the archive's top folder) of the tracepack members: one ``<model>.tpk`` per program.
MEMBER_DIR = "tracepack/"
LAYOUT_EXTENSION = "tracepack.pt2/layout"
#: No cap of its own: :meth:`~tracepack.io.zip.Archive.read` holds every member to the caller's
#: ``max_decompressed`` budget (kept for callers that still pass it as ``limit``).
MAX_PROGRAM_BYTES = 1 << 62


def _programs(archive: Archive) -> list[tuple[str, str]]:
    """``(member name, model name)`` of every program in the archive, in archive order (both
    layouts: ``<top>/models/<model>.json`` and torch 2.1-2.7's flat zip, see :mod:`.export.layouts`)."""
    return [(p.member, p.model) for p in layouts.programs(archive)]


def _tpk_name(archive: Archive, model: str) -> str:
    return layouts.side_member(archive, MEMBER_DIR, f"{model}.tpk")


def is_packed(archive: Archive) -> bool:
    """Whether ``archive`` holds a tracepack member written by :func:`pack_pt2`."""
    names = set(archive.names())
    return any(_tpk_name(archive, model) in names for _, model in _programs(archive))


def _check_pt2(archive: Archive) -> list[tuple[str, str]]:
    programs = _programs(archive)
    if not programs:
        raise LegacyFormatError(
            "no program in the archive",
            source=archive.source,
            expected="a torch.export .pt2 (<name>/models/<model>.json, or serialized_exported_program.json)",
        )
    return programs


# -- node metadata, in every graph --------------------------------------------------------


def _nested_graphs(value: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Graphs inside a node's inputs (``as_graph`` arguments of torch.cond, map, ...)."""
    if type(value) is dict:
        graph = value.get("graph")
        if type(graph) is dict and type(graph.get("nodes")) is list:
            name = value.get("name")
            yield f"{path}/{name if type(name) is str else 'graph'}", graph
            return
        for v in value.values():
            yield from _nested_graphs(v, path)
    elif type(value) is list:
        for v in value:
            yield from _nested_graphs(v, path)


def _walk(graph: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every node of ``graph`` and of the graphs nested in it: ``(qualified name, node)``, depth first."""
    nodes = graph.get("nodes")
    if type(nodes) is not list:
        return
    for i, node in enumerate(nodes):
        if type(node) is not dict:
            continue
        name = node.get("name")
        qualified = f"{prefix}{name if type(name) is str else f'#{i}'}"
        yield qualified, node
        for sub_path, sub in _nested_graphs(node.get("inputs"), qualified):
            yield from _walk(sub, sub_path + "/")


def _main_graph(program: Any, source: str) -> dict[str, Any]:
    try:
        graph = program["graph_module"]["graph"]
        if type(graph) is not dict:
            raise TypeError
        return graph
    except (KeyError, TypeError):
        raise LegacyFormatError(
            "no graph_module.graph", source=source, where="$.graph_module.graph", expected="a torch.export program"
        ) from None


def _dumps(value: Any) -> bytes:
    """torch's encoding of model.json (``json.dumps`` defaults, ASCII)."""
    return json.dumps(value).encode("ascii")


#: Node metadata that only debugging reads: moved into the tracepack member by default. Everything
#: else stays in model.json, because torch reads it after ``torch.export.load``: ``nn_module_stack``
#: (``torch.export.unflatten``, module hierarchy), ``source_fn_stack`` (pt2e quantizers match
#: partitions by it), ``torch_fn``, ``custom`` (user annotations).
DEBUG_KEYS = ("stack_trace", "from_node")


def _moves(key: str, value: Any, keep: set[str], strip: bool) -> bool:
    return type(value) is str and key not in keep and (strip or key in DEBUG_KEYS)


def pack_program(
    model_json: bytes, *, source: str, keep: Sequence[str] = (), strip: bool = False
) -> tuple[bytes, bytes]:
    """Split a model.json into the program and a ``.tpk`` holding its nodes' debug metadata.

    By default only :data:`DEBUG_KEYS` move; ``strip=True`` moves every string metadata
    value (plain torch then loads a program without module stacks: see docs/torch-load.md).
    Keys in ``keep`` never move.

    Raises :class:`~tracepack.errors.LegacyFormatError` if the file is not in torch's own
    JSON encoding (then the split could not give it back byte for byte).
    """
    from tracepack.codecs import encode_best
    from tracepack.torch.export.model_json import _loads

    program = _loads(model_json, source)
    if type(program) is not dict:
        raise LegacyFormatError("top level is not an object", source=source, where="$")
    if _dumps(program) != model_json:
        raise LegacyFormatError(
            "not in torch's JSON encoding (json.dumps defaults), so it would not come back byte for byte",
            source=source,
        )
    doc = split_program(program, keep=keep, strip=strip, source=source, size=len(model_json))
    stripped = _dumps(program)
    if merge_program(stripped, doc, source=source) != model_json:  # pragma: no cover - a bug if it happens
        raise LegacyFormatError("packing would not give the program back byte for byte", source=source)
    return stripped, encode_best(doc).data


def split_program(
    program: Any, *, keep: Sequence[str] = (), strip: bool = False, source: str, size: int | None = None
) -> Document:
    """Move the nodes' debug metadata out of ``program`` (a parsed model.json, changed in place)
    into the tracepack document :func:`merge_into` puts it back from."""
    from tracepack.builder import DocumentBuilder

    graph = _main_graph(program, source)
    b = DocumentBuilder(producer="tracepack pack")
    if size is not None:
        b.add_metadata("torch.export/model.json bytes", str(size))
    orders: dict[str, list[str]] = {}
    kept_keys = set(keep)
    used: set[str] = set()
    for index, (name, node) in enumerate(_walk(graph)):
        meta = node.get("metadata")
        moved: dict[str, str] = {}
        if type(meta) is dict:
            moved = {k: v for k, v in meta.items() if _moves(k, v, kept_keys, strip)}
            rest = {k: v for k, v in meta.items() if k not in moved}
            if moved and rest and list({**moved, **rest}) != list(meta):
                orders[str(index)] = list(meta)
            node["metadata"] = rest
        unique = name if name not in used else f"{name}#{index}"
        used.add(unique)
        target = node.get("target")
        b.add_node(unique, target if type(target) is str else "", meta=moved)
    b.add_extension(LAYOUT_EXTENSION, {"orders": orders} if orders else {})
    return b.build()


def merge_program(stripped: bytes, doc: Document, *, source: str) -> bytes:
    """The original model.json: ``stripped`` with every node's metadata from ``doc`` put back."""
    from tracepack.torch.export.model_json import _loads

    return _dumps(merge_into(_loads(stripped, source), doc, source=source))


def merge_into(program: Any, doc: Document, *, source: str) -> Any:
    """``program`` (a parsed packed model.json) with every node's metadata from ``doc`` put back, in place."""
    graph = _main_graph(program, source)
    orders: dict[str, list[str]] = {}
    for e in doc.raw.extensions:
        if e.name == LAYOUT_EXTENSION:
            orders = json.loads(e.json).get("orders", {})
    count = 0
    for index, (_, node) in enumerate(_walk(graph)):
        if index >= len(doc):
            count = index + 1
            break
        moved = doc.node(index).meta
        kept = node.get("metadata")
        if type(kept) is not dict:
            if moved:
                raise LegacyFormatError("a node's metadata is not an object", source=source, where=f"node {index}")
            continue
        order = orders.get(str(index))
        if order is None:
            node["metadata"] = {**moved, **kept}
        else:
            node["metadata"] = {k: moved[k] if k in moved else kept[k] for k in order}
        count = index + 1
    if count != len(doc):
        raise LegacyFormatError(
            f"the program has {count} nodes, its tracepack member {len(doc)}",
            source=source,
            expected="the program the member was packed with",
        )
    return program


# -- archives ----------------------------------------------------------------------------------


def _write_packed(archive: Archive, out: IO[bytes], *, keep: Sequence[str], strip: bool) -> None:
    """Write the packed copy of ``archive`` to ``out``: programs rewritten, every other member copied.

    Either layout (torch 2.8+'s aligned one, torch 2.1-2.7's flat one) is written in its own layout
    as a stream: every member but the programs copied raw, never held in memory.
    """
    programs = _check_pt2(archive)
    if is_packed(archive):
        raise UsageError("the archive is already packed", where=archive.source)
    replace: dict[str, bytes] = {}
    extra: dict[str, tuple[str, bytes]] = {}
    for member, model in programs:
        stripped, tpk = pack_program(archive.read(member), source=f"{archive.source}:{member}", keep=keep, strip=strip)
        replace[member] = stripped
        extra[member] = (_tpk_name(archive, model), tpk)
    plan: list[tuple[Member | str, bytes | None]] = []
    for m in archive.members:
        plan.append((m, replace.get(m.name)))  # None: copied raw, never whole in memory
        if m.name in extra:
            plan.append(extra[m.name])
    layouts.rewrite_to(archive, out, plan, deflate=set(replace))


def pack_pt2(data: bytes, *, source: str, keep: Sequence[str] = (), strip: bool = False) -> bytes:
    """A packed copy of the ``.pt2`` archive ``data`` (see the module docstring).

    The program members (``models/*.json``) are stored deflated: torch's reader inflates them.
    :func:`pack_pt2_file` does the same from file to file, streaming the weights.
    """
    out = io.BytesIO()
    with open_archive(data, source=source) as archive:
        _write_packed(archive, out, keep=keep, strip=strip)
    return out.getvalue()


def pack_pt2_file(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    keep: Sequence[str] = (),
    strip: bool = False,
    overwrite: bool = True,
    source: str | None = None,
    durable: bool = False,
) -> tuple[int, int]:
    """:func:`pack_pt2` from file to file, for archives of any size; returns (input, output) bytes.

    Weight members are copied as raw bytes (by the kernel where it can), never read into memory:
    peak memory follows the program (model.json), not the weights. The output is written
    atomically (:func:`tracepack.io.files.atomic_output`: a kill leaves the old file intact) and,
    as ``cp`` and ``torch.export.save``, not synced to disk unless ``durable=True``, which waits for
    the disk before the output takes its name (a power loss then leaves the old file or the new).
    """
    from tracepack.io.files import atomic_output

    with (
        open_archive_file(src, source=source) as archive,
        atomic_output(dst, overwrite=overwrite, durable=durable) as f,
    ):
        _write_packed(archive, f, keep=keep, strip=strip)
        size = f.tell()
    return os.stat(src).st_size, size


def _merged_programs(archive: Archive) -> dict[str, bytes]:
    """Program member name -> the original model.json, for every packed program."""
    import tracepack

    names = set(archive.names())
    out = {}
    for member, model in _check_pt2(archive):
        tpk = _tpk_name(archive, model)
        if tpk not in names:
            continue
        label = f"{archive.source}:{tpk}"
        doc = tracepack.loads(archive.read(tpk), source=label)
        out[member] = merge_program(archive.read(member), doc, source=f"{archive.source}:{member}")
    return out


def _write_unpacked(archive: Archive, out: IO[bytes]) -> None:
    if not is_packed(archive):
        _check_pt2(archive)
        raise UsageError("the archive is not packed (no tracepack member)", where=archive.source)
    merged = _merged_programs(archive)
    drop = {_tpk_name(archive, model) for _, model in _programs(archive)}
    plan: list[tuple[Member | str, bytes | None]] = [
        (m, merged.get(m.name)) for m in archive.members if m.name not in drop
    ]
    layouts.rewrite_to(archive, out, plan)


def unpack_pt2(data: bytes, *, source: str) -> bytes:
    """The archive ``pack_pt2`` was given back: every program's metadata merged, members removed."""
    out = io.BytesIO()
    with open_archive(data, source=source) as archive:
        _write_unpacked(archive, out)
    return out.getvalue()


def unpack_pt2_file(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    overwrite: bool = True,
    source: str | None = None,
    durable: bool = False,
) -> tuple[int, int]:
    """:func:`unpack_pt2` from file to file, streaming the weights; returns (input, output) bytes
    (``durable``: as :func:`pack_pt2_file`)."""
    from tracepack.io.files import atomic_output

    with (
        open_archive_file(src, source=source) as archive,
        atomic_output(dst, overwrite=overwrite, durable=durable) as f,
    ):
        _write_unpacked(archive, f)
        size = f.tell()
    return os.stat(src).st_size, size


def read_program(archive: Archive) -> tuple[str, bytes]:
    """The archive's program (``model``, else the first) as the original model.json bytes."""
    programs = _check_pt2(archive)
    member = next((name for name, model in programs if model == "model"), programs[0][0])
    if is_packed(archive):
        merged = _merged_programs(archive)
        if member in merged:
            return member, merged[member]
    return member, archive.read(member)


def replace_program(archive: Archive, model_json: bytes) -> bytes:
    """The archive with its program (as :func:`read_program` picks it) replaced, unpacked."""
    out = io.BytesIO()
    replace_program_to(archive, model_json, out)
    return out.getvalue()


def replace_program_to(archive: Archive, model_json: bytes, out: IO[bytes]) -> None:
    """:func:`replace_program`, written to ``out``: every other member streamed through raw."""
    member, _ = read_program(archive)
    merged = _merged_programs(archive) if is_packed(archive) else {}
    drop = {_tpk_name(archive, model) for _, model in _programs(archive)}
    plan: list[tuple[Member | str, bytes | None]] = [
        (m, model_json if m.name == member else merged.get(m.name)) for m in archive.members if m.name not in drop
    ]
    layouts.rewrite_to(archive, out, plan)
