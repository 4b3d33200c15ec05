"""torch archives <-> tracepack: ``.pt2`` programs and TorchScript ``.pt``/``.ptl`` debug info.

:func:`import_archive` reads a zip torch wrote (never unpickling anything):

``.pt2`` (``torch.export.save``)
    the program ``<top>/models/<name>.json`` (``model`` when there are several),
    imported with :func:`tracepack.torch.export.model_json.import_model_json`. An
    archive packed by ``tracepack pack`` is unpacked first, so the document has
    every node's debug strings back.

TorchScript (``torch.jit.save``, ``_save_for_lite_interpreter``)
    every ``code/**.py.debug_pkl`` becomes source texts (interned line by line),
    source ranges and one :class:`DebugFile` per code file, rows in file order;
    the lite interpreter's ``callstack_debug_map.pkl`` and
    ``mobile_debug_handles.pkl`` become debug handles: the inlined call stack is
    a stack-trie entry (one frame per call site, plus the instruction's own
    range, as the mobile runtime prints them) and the module instances a
    module-trie path ``TOP(C)::forward.blocks(Sequential)::forward...``; what torch's
    own text for a handle needs beyond that goes into the ``torchscript/mobile-render``
    extension (:mod:`tracepack.torch.torchscript.mobile_render`).

:func:`expand_archive` is the way back: it rewrites the original archive with
every ``debug_pkl`` regenerated from the document (in its original layout, or
the one asked for), or, for a ``.pt2``, with the program written back from the
document. The result is loadable by ``torch.jit.load`` / ``torch.export.load``.
"""

from __future__ import annotations

import io
import os
import re
from bisect import bisect_right
from collections.abc import Sequence
from typing import IO, Any

from tracepack import model as m
from tracepack.builder import DocumentBuilder
from tracepack.document import Document, json_value
from tracepack.errors import LegacyFormatError, UsageError
from tracepack.io.zip import Archive, ArchiveWriter, open_archive
from tracepack.torch.export import layouts
from tracepack.torch.export import model_json as export_json
from tracepack.torch.torchscript.debug_pkl import (
    CallstackDebugMap,
    DebugPkl,
    DebugPklForm,
    InlinedCallStack,
    MobileDebugHandles,
    SourceRangeRow,
    parse_callstack_debug_map,
    parse_debug_pkl,
    parse_mobile_debug_handles,
    write_debug_pkl,
)
from tracepack.traces import FrameKey, ModuleKey

__all__ = [
    "TORCHSCRIPT_EXTENSION",
    "archive_kind",
    "expand_archive",
    "expand_archive_file",
    "import_archive",
    "import_torchscript",
]

TORCHSCRIPT_EXTENSION = "torchscript/archive"
_DEBUG_SUFFIX = ".debug_pkl"
_MODEL_JSON = re.compile(r"models/([^/]+)\.json")
_FORMATS = {"legacy": DebugPklForm.LEGACY, "table": DebugPklForm.STRING_TABLE}


def archive_kind(archive: Archive) -> str:
    """``"pt2"`` or ``"torchscript"``; a LegacyFormatError for any other zip."""
    rel = {archive.relative(n) for n in archive.names()}
    if layouts.layout_of(archive) is not None:
        return "pt2"
    if archive.top is not None:
        if "archive_format" in rel or any(_MODEL_JSON.fullmatch(r) for r in rel):
            return "pt2"
        if "data.pkl" in rel or "bytecode.pkl" in rel or any(r.startswith("code/") for r in rel):
            return "torchscript"
    raise LegacyFormatError(
        "a zip archive, but not one torch wrote",
        source=archive.source,
        expected=(
            "a .pt2 (<name>/models/<model>.json or serialized_exported_program.json)"
            " or a TorchScript archive (<name>/code/..., <name>/data.pkl)"
        ),
    )


def import_archive_file(path: str | os.PathLike[str], *, source: str | None = None) -> Document:
    """:func:`import_archive` of the file at ``path`` without reading it into memory: only the
    members that hold the program or debug info are read (weights never are)."""
    from tracepack.io.zip import open_archive_file

    name = source or os.fspath(path)
    with open_archive_file(path, source=name) as archive:
        if "ETRECORD_V0" not in archive.names():
            if archive_kind(archive) == "pt2":
                from tracepack.torch import pt2

                member, model_json = pt2.read_program(archive)
                return export_json.import_model_json(model_json, source=f"{name}:{member}")
            return import_torchscript(archive)
    from tracepack.io.files import read_input

    return import_archive(name, read_input(path))  # an ETRecord: small, read whole


def import_archive(path: str, data: bytes) -> Document:
    """Read a ``.pt2`` or TorchScript archive (the bytes of the file at ``path``) into a Document."""
    with open_archive(data, source=path) as archive:
        if "ETRECORD_V0" in archive.names():  # ExecuTorch's ETRecord: the forward method (or the only one)
            from tracepack.torch.executorch.etrecord import import_etrecord, read_etrecord

            methods = list(read_etrecord(data, source=path).programs)
            chosen = "forward" if "forward" in methods else methods[0]
            return import_etrecord(data, source=path, methods=[chosen])[chosen]
        if archive_kind(archive) == "pt2":
            from tracepack.torch import pt2

            name, model_json = pt2.read_program(archive)
            return export_json.import_model_json(model_json, source=f"{path}:{name}")
        return import_torchscript(archive)


# -- TorchScript ---------------------------------------------------------------------------


def _read_debug_members(
    archive: Archive,
) -> tuple[dict[str, DebugPkl], CallstackDebugMap | None, MobileDebugHandles | None, str | None]:
    pkls: dict[str, DebugPkl] = {}
    cmap: CallstackDebugMap | None = None
    handles: MobileDebugHandles | None = None
    version: str | None = None
    for name in archive.names():
        rel = archive.relative(name)
        where = f"{archive.source}:{rel}"
        if rel.startswith("code/") and rel.endswith(_DEBUG_SUFFIX):
            pkls[rel] = parse_debug_pkl(archive.read(name), source=where)
        elif rel == "callstack_debug_map.pkl":
            cmap = parse_callstack_debug_map(archive.read(name), source=where)
        elif rel == "mobile_debug_handles.pkl":
            handles = parse_mobile_debug_handles(archive.read(name), source=where)
        elif rel == "version":
            version = archive.read(name, limit=64).decode("ascii", "replace").strip()
    return pkls, cmap, handles, version


class _SourceLines:
    """Line numbers and line texts of one source text, for frames pointing into it."""

    __slots__ = ("starts", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    def at(self, offset: int) -> tuple[int, str]:
        """0-based line index of character ``offset`` and that line, stripped."""
        i = max(0, bisect_right(self.starts, max(offset, 0)) - 1)
        end = self.starts[i + 1] if i + 1 < len(self.starts) else len(self.text)
        return i, self.text[self.starts[i] : end].strip()


def import_torchscript(archive: Archive) -> Document:
    """A TorchScript archive's debug info as a Document (see the module docstring)."""
    pkls, cmap, handles, version = _read_debug_members(archive)
    b = DocumentBuilder(producer="torch.jit", producer_version="" if version is None else version)
    b.add_metadata("torchscript/archive", archive.top or "")
    if version is not None:
        b.add_metadata("torchscript/version", version)
    # tag -> (range row, text, file, starting line, start): tags are unique archive-wide.
    by_tag: dict[int, tuple[int, str, str | None, int, int]] = {}
    # torch writes equal sources twice when they were two objects; interning merges them, so
    # the file's own source numbering is kept where it differs from the interned one.
    numbering: dict[str, list[int]] = {}
    for rel, pkl in pkls.items():
        rows = []
        interned: list[int] = []
        for row in pkl.rows:
            src = b.source(row.text, row.filename, row.starting_line)
            rng = b.source_range(src, row.start, row.end)
            rows.append((row.byte_offset, rng, row.tag))
            interned.append(src)
            by_tag.setdefault(row.tag, (rng, row.text, row.filename, row.starting_line, row.start))
        path = rel.removesuffix(_DEBUG_SUFFIX)
        if _first_use_numbers(interned) != list(pkl.sources):
            numbering[path] = list(pkl.sources)
        b.add_debug_file(path, rows, legacy=pkl.form is DebugPklForm.LEGACY)
    types: set[str] = set()
    no_render = None
    if cmap is not None:
        _add_debug_handles(b, cmap, handles, by_tag, types)
        from tracepack.torch.torchscript.mobile_render import add_render_extension

        no_render = add_render_extension(b, archive, pkls.values(), cmap, handles)  # torch's exact text
    ext: dict[str, Any] = {"top": archive.top}
    if no_render is not None:
        ext["no_mobile_render"] = no_render  # why torch's exact text cannot be given (symbolicate says so)
    if handles is not None:
        ext["bytecode_version"] = handles.bytecode_version
        ext["functions"] = [[f.name, list(f.handles)] for f in handles.functions]
    if types:
        ext["types"] = sorted(types)
    if numbering:
        ext["sources"] = numbering
    b.add_extension(TORCHSCRIPT_EXTENSION, ext)
    return b.build()


def _first_use_numbers(ids: Sequence[int]) -> list[int]:
    """``ids`` renumbered 0, 1, 2... in order of first use."""
    seen: dict[int, int] = {}
    return [seen.setdefault(i, len(seen)) for i in ids]


def _short_type(qualname: str) -> str:
    return qualname.rsplit(".", 1)[-1]


def _add_debug_handles(
    b: DocumentBuilder,
    cmap: CallstackDebugMap,
    handles: MobileDebugHandles | None,
    by_tag: dict[int, tuple[int, str, str | None, int, int]],
    types: set[str],
) -> None:
    # Which function each handle belongs to: its root class and method.
    owner: dict[int, str] = {}
    if handles is not None:
        for fn in handles.functions:
            for h in fn.handles:
                owner.setdefault(h, fn.name)
    lines: dict[str, _SourceLines] = {}

    def frame(tag: int, function: str) -> FrameKey | None:
        found = by_tag.get(tag)
        if found is None or not (found[1] or found[2]):
            return None  # no range (-1), or the empty range (tag 0)
        _, text, file, first_line, start = found
        src = lines.get(text)
        if src is None:
            src = lines[text] = _SourceLines(text)
        index, code = src.at(start)
        return FrameKey(file or "", first_line + index, function, code)

    seen: set[int] = set()
    for row in cmap.rows:
        if row.debug_handle in seen:
            raise LegacyFormatError(f"debug handle {row.debug_handle} appears twice", where="callstack_debug_map.pkl")
        seen.add(row.debug_handle)
        qualname = owner.get(row.debug_handle, "")
        root_type, _, method = qualname.rpartition(".")
        modules = [ModuleKey("TOP", "", _short_type(root_type), method)]
        if root_type:
            types.add(root_type)
        frames: list[FrameKey | None] = []
        caller = method
        path = ""
        calls: Sequence[InlinedCallStack] = row.callstack.frames() if row.callstack is not None else ()
        for call in calls:
            frames.append(frame(call.source_range_tag, caller))
            caller = call.function_name
            if call.module is None:
                modules.append(ModuleKey("UNKNOWN_INSTANCE", "", "UNKNOWN_TYPE", caller))
            else:
                path = f"{path}.{call.module.instance_name}" if path else call.module.instance_name
                types.add(call.module.type_name)
                modules.append(ModuleKey(call.module.instance_name, path, _short_type(call.module.type_name), caller))
        frames.append(frame(row.source_range_tag, caller))
        found = by_tag.get(row.source_range_tag)
        b.add_debug_handle(
            row.debug_handle,
            stack=b.stack_of_frames(f for f in frames if f is not None),
            module=b.module(modules),
            op=row.node_name,
            source_range=0 if found is None else found[0],
        )


# -- back to archives -------------------------------------------------------------------------


def _debug_rows(doc: Document, entry: m.DebugFile) -> tuple[list[SourceRangeRow], list[int]]:
    r = doc.raw
    s = r.strings
    texts: dict[int, str] = {}
    rows: list[SourceRangeRow] = []
    sources: list[int] = []
    for offset, rng, tag in zip(entry.byte_offset, entry.range, entry.tag, strict=True):
        src = r.ranges.source[rng]
        text = texts.get(src)
        if text is None:
            text = texts[src] = doc.source_text(src)
        file = r.sources.file[src]
        rows.append(
            SourceRangeRow(
                offset,
                text,
                None if file < 0 else s[file],
                r.sources.start_line[src],
                r.ranges.start[rng],
                r.ranges.end[rng],
                tag,
            )
        )
        sources.append(src)
    return rows, sources


def debug_pkl_bytes(doc: Document, entry: m.DebugFile, form: DebugPklForm | None = None) -> bytes:
    """One code file's ``debug_pkl`` regenerated from the document (``form``: the original's by default)."""
    rows, sources = _debug_rows(doc, entry)
    numbering = torchscript_info(doc).get("sources")
    kept = numbering.get(entry.path) if isinstance(numbering, dict) else None
    if isinstance(kept, list) and len(kept) == len(rows) and all(type(i) is int for i in kept):
        # The file's own source objects, where equal sources were written twice: only rows
        # with equal sources may share a number.
        first: dict[int, int] = {}
        if all(first.setdefault(n, src) == src for n, src in zip(kept, sources, strict=True)):
            sources = kept
    if form is None:
        form = DebugPklForm.LEGACY if entry.format == m.DebugFormat.LEGACY else DebugPklForm.STRING_TABLE
    return write_debug_pkl(rows, form, sources=sources)


def expand_archive(doc: Document, original_path: str | os.PathLike[str], debug_format: str | None = None) -> bytes:
    """The original archive at ``original_path`` rebuilt around ``doc``: TorchScript ``debug_pkl``
    members regenerated (``debug_format`` ``"legacy"``/``"table"``, default: each file's own), or
    a ``.pt2`` program written back byte for byte. Returns the new archive's bytes
    (:func:`expand_archive_file` writes them to a file, streaming the weights)."""
    out = io.BytesIO()
    _expand_to(doc, original_path, out, debug_format)
    return out.getvalue()


def expand_archive_file(
    doc: Document,
    original_path: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    debug_format: str | None = None,
    *,
    overwrite: bool = True,
    durable: bool = False,
) -> int:
    """:func:`expand_archive` into the file ``dst`` (written atomically; synced to disk when
    ``durable``); returns its size.

    Only the program or the debug members are built in memory; every other member (the
    weights) is copied raw from ``original_path``, so memory follows the graph, not the weights."""
    from tracepack.io.files import atomic_output

    with atomic_output(dst, overwrite=overwrite, durable=durable) as f:
        _expand_to(doc, original_path, f, debug_format)
        return f.tell()


def _expand_to(doc: Document, original_path: str | os.PathLike[str], out: IO[bytes], debug_format: str | None) -> None:
    source = os.fspath(original_path)
    if debug_format is not None and debug_format not in _FORMATS:
        raise UsageError(f"debug format {debug_format!r}", where="--debug-format", expected="legacy or table")
    from tracepack.io import limits
    from tracepack.io.zip import open_archive_file

    with limits.rendering(), open_archive_file(source) as archive:
        if archive_kind(archive) == "pt2":
            if debug_format is not None:
                raise UsageError("--debug-format applies to TorchScript archives only", where="--debug-format")
            from tracepack.torch import pt2

            pt2.replace_program_to(archive, export_json.export_model_json(doc), out)
            return
        _expand_torchscript(doc, archive, None if debug_format is None else _FORMATS[debug_format], out)


def _expand_torchscript(doc: Document, archive: Archive, form: DebugPklForm | None, out: IO[bytes]) -> None:
    files = {f.path + _DEBUG_SUFFIX: f for f in doc.raw.debug_files}
    if not files:
        raise UsageError("the document holds no TorchScript debug info: it was not converted from a .pt/.ptl")
    wanted = {archive.relative(n) for n in archive.names() if archive.relative(n).startswith("code/")}
    wanted = {n for n in wanted if n.endswith(_DEBUG_SUFFIX)}
    if set(files) != wanted:
        missing = sorted(wanted - set(files)) or sorted(set(files) - wanted)
        raise UsageError(
            f"the document and the archive hold different code files (e.g. {missing[0]!r})",
            where="--archive",
            expected="the archive the document was converted from",
        )
    with ArchiveWriter(out) as w:
        for member in archive.members:
            entry = files.get(archive.relative(member.name))
            if entry is None:
                w.copy(archive, member.name, member)  # code, constants, weights: raw, streamed
            else:
                w.add(member, debug_pkl_bytes(doc, entry, form))


def torchscript_info(doc: Document) -> dict[str, Any]:
    """The archive facts kept at import (top folder, functions' debug handles, full type names)."""
    for i, e in enumerate(doc.raw.extensions):
        if e.name == TORCHSCRIPT_EXTENSION:
            value = json_value(e.json, f"$.extensions[{i}].json")
            return value if isinstance(value, dict) else {}
    return {}
