"""Lazy, random-access reading of an uncompressed FlatBuffers ``.tpk``: ``tracepack.open(path)``.

Both FlatBuffers layouts are read: rows (codec ``flatbuffers-rows``, id 2: a table per node) and columns
(``flatbuffers-columns``, id 4, what ``--codec flatbuffers`` writes:
:class:`tracepack.codecs.fbcolumns.RandomAccess`, one typed vector per field path, node ``i``'s fields
element ``i`` of theirs), with the same answers.

>>> with tracepack.open("model.tpk") as doc:           # reads + checks the file; decodes nothing
...     print(doc.node("linear_3").stack_trace)        # binary search by name, one trace rendered
...     print(doc.debug_handle(1234).stack_trace)      # binary search over the sorted handles

Answers are the strings :class:`tracepack.Document` gives, byte for byte: the same
render functions (:mod:`tracepack.traces`), the same rules for lifted metadata, and
the same caching (one rendered string per distinct stack and style, per module path,
per ``from_node`` list).

A file is read with the generated code of its own schema version (what
:func:`tracepack.versions.reader_version` picks), nothing is migrated up front, and every
answer is the one :func:`tracepack.load` gives after migrating to the current version:
users see one model. A table or column the file's version does not have reads as empty
(``table_sizes()`` reports the current model's tables, 0 rows for those), a 1.0 node has
no ``from_node`` provenance, and :attr:`LazyNode.raw` is the node migrated to the current
model, by the registered migrations, exactly as ``tracepack.load`` migrates it.

What it hands out is verified, and the file cannot change what it answers. A file with block
checksums (container flag bit 0, what writers write for uncompressed FlatBuffers; spec §1.5) is
read a block at a time (:mod:`tracepack.io.blocks`): opening reads the header and the block table,
and each block a lookup needs is read into private memory with ``os.pread`` and its CRC-32 checked
before any of its bytes is used, then kept; a lookup reads O(log nodes) blocks, whatever the file's
size (on an 8,680-node file 33 of 256 blocks in the row layout, 20 of 61 in the column layout, ``make
bench`` figure (e)). A file truncated or rewritten while open gives the answers it gave before or a
one-line ContainerError naming the byte or block, never a mix of old and new bytes and never SIGBUS
(no file is memory-mapped). A file without block checksums (older writers, ``--no-block-checksums``)
is read once into private memory (a snapshot) and its payload CRC-32 checked on open, one pass at
memory speed; ``checksum=False`` (a trusted file) does that without any CRC.

Nothing is trusted. Opening checks the container header, the payload length, the root
and every table header and column length (a few hundred bytes, whatever the document's
size); every later access checks what it touches: each offset and vector in bounds,
each vtable sane, each reference below its table's row count (the schema's ``ref``
facts, generated into ``fbcodec.REFS``), each trie step strictly backwards and each
provenance child below its parent (so a walk always ends), each ``from_node`` list no
larger, expanded, than the file could describe (so shared provenance rows cannot make
one rendering explode). A hostile file raises :class:`~tracepack.errors.DecodeError` or
:class:`~tracepack.errors.IntegrityError` naming the place -- never IndexError, a
wrong answer or a hang. :meth:`LazyDocument.verify` is the one-time linear pass
(checksum, full decode and validation) for when every byte must be vouched for.

Name lookups use the side index the FlatBuffers codec writes (node indices sorted by
name); a file without one (another FlatBuffers producer) gets a name table built by
one scan on the first lookup. A lookup result is always checked against the name
asked for, so a damaged index can at worst miss, never return a different node.
"""

from __future__ import annotations

import builtins
import os
import struct
import weakref
import zlib
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from functools import cache
from itertools import accumulate
from types import ModuleType, SimpleNamespace, TracebackType
from typing import TYPE_CHECKING, Any, Final, overload

import msgspec

from tracepack import interned_json
from tracepack.codecs import _fbrt as rt
from tracepack.container import (
    BLOCK_TABLE_HEAD,
    HEADER_SIZE,
    ContainerHeader,
    check_block_table_head,
    read_block_table,
    read_header,
)
from tracepack.document import FROM_NODE_KEY, DebugHandle, resolve_argument
from tracepack.errors import (
    ContainerError,
    DecodeError,
    IntegrityError,
    NotFoundError,
    TracepackError,
    UsageError,
    did_you_mean,
)
from tracepack.io.blocks import BlockFile, BlockView
from tracepack.traces import (
    STYLE_STRIPPED,
    FrameKey,
    ModuleKey,
    ModuleRendering,
    Provenance,
    ProvenanceRenderer,
    charge_rendered,
    render_frames_checked,
)

if TYPE_CHECKING:
    from tracepack.codecs import fbcolumns

__all__ = ["LAZY_CODECS", "LazyDocument", "LazyNode", "open", "trace"]

_CONVERT_HINT: Final = "convert it with `tracepack convert FILE OUT.tpk --codec flatbuffers --compression none`"
#: The codecs :func:`open` reads: the FlatBuffers row layout (id 2) and column layout (id 4).
LAZY_CODECS: Final = ("flatbuffers-rows", "flatbuffers-columns")


@cache
def _stack_styles(version: tuple[int, int]) -> frozenset[int]:
    """The values of enum StackStyle in ``version``'s generated model (loaded with its codec already)."""
    from tracepack.versions import generated

    return frozenset(int(s) for s in generated(version).model.StackStyle)


@cache
def _ref_targets(fb: ModuleType) -> frozenset[str]:
    """The tables a version's references point into (once per version, not per table opened)."""
    return frozenset(ref for ref, _, _ in fb.REFS.values())


# Errors that only a malformed buffer can cause once the explicit checks are done.
_MALFORMED = (rt.Bad, struct.error, IndexError, ValueError, OverflowError, UnicodeDecodeError)
_NO_ROWS: Final[list[int]] = []
_U32: Final = struct.Struct("<I")
#: A column or vector of the file: a plain typed view of a snapshot, or one that verifies its blocks.
Column = memoryview | BlockView


@cache
def _current_fb() -> ModuleType:
    from tracepack.codecs.flatbuffers import codec_module
    from tracepack.versions import CURRENT

    return codec_module(CURRENT)


@cache
def _empty_document(version: tuple[int, int]) -> Any:
    """An empty document in ``version``'s model: the frame a single node is migrated in."""
    from tracepack import migrations
    from tracepack.builder import DocumentBuilder
    from tracepack.versions import CURRENT

    return migrations.downgrade(DocumentBuilder().build_raw(), CURRENT, version)


def _upgrade_node(node: Any, version: tuple[int, int]) -> Any:
    """A node of ``version``'s model in the current model, as ``tracepack.load`` migrates it.

    The registered migrations run on a document that holds just this node (a few microseconds:
    nodes migrate on their own, every table is shared, not copied).
    """
    from tracepack import migrations
    from tracepack.versions import CURRENT

    if version == CURRENT:
        return node
    frame = _empty_document(version)
    doc = msgspec.structs.replace(frame, graph=msgspec.structs.replace(frame.graph, nodes=[node]))
    return migrations.upgrade(doc, version, CURRENT).graph.nodes[0]


def open(path: str | os.PathLike[str], *, checksum: bool = True) -> LazyDocument:
    """Open an uncompressed FlatBuffers ``.tpk`` for lazy, random access.

    Nothing unverified is handed out. With block checksums (spec §1.5; what writers write for these
    files), each block is read when first needed and its CRC-32 checked before any of its bytes is
    used; without, the file is read once into private memory and its payload CRC-32 checked on open.
    Changing or truncating the file later cannot make an answer wrong, or crash the reader.
    ``checksum=False`` (a trusted file) reads the file whole without checking any CRC; every
    structural check stays on. Close the document (or use ``with``) to free the file and memory.
    """
    return LazyDocument(path, checksum=checksum)


def trace(path: str | os.PathLike[str], node: str | int) -> str | None:
    """The stack trace of one node (by name, or by index), or None when it has none."""
    with LazyDocument(path) as doc:
        return doc.node(node).stack_trace


@cache
def _added_columns(version: tuple[int, int]) -> tuple[tuple[str, str, str], ...]:
    """``(table, column, struct code)`` of each column the current model has and ``version``'s lacks."""
    from tracepack.codecs.flatbuffers import codec_module

    old, new = codec_module(version), _current_fb()
    out = []
    for name, (struct_name, _row, _optional) in new.TABLES.items():
        have = old.COLUMNS[old.TABLES[name][0]] if name in old.TABLES else {}
        out += [(name, col, code) for col, (code, _role) in new.COLUMNS[struct_name].items() if col not in have]
    return tuple(out)


class _Strings(Sequence[str]):
    """The string table, read on demand (``doc.strings[i]``)."""

    __slots__ = ("_doc",)

    def __init__(self, doc: LazyDocument) -> None:
        self._doc = doc

    def __len__(self) -> int:
        return self._doc._rows["strings"]

    def __getitem__(self, i: Any) -> Any:
        n = len(self)
        if isinstance(i, slice):
            return [self._doc._string(j, f"$.strings[{j}]") for j in range(*i.indices(n))]
        if not -n <= i < n:
            raise IndexError(f"string index {i} out of range ({n} strings)")  # the Sequence protocol
        i %= n
        return self._doc._string(i, f"$.strings[{i}]")

    def __iter__(self) -> Iterator[str]:
        return (self._doc._string(i, f"$.strings[{i}]") for i in range(len(self)))


class _CheckedStrings:
    """The string table as arguments index it: an index out of range is an IntegrityError at ``where``."""

    __slots__ = ("_doc", "_where")

    def __init__(self, doc: LazyDocument, where: str) -> None:
        self._doc = doc
        self._where = where

    def __getitem__(self, i: int) -> str:
        return self._doc._string(i, self._where)


class _Tables(dict[str, Any]):
    """A document's tables (columns or row counts) by name, each read when first asked for: a missing
    name calls the loader (which fills this dict, or raises KeyError for a name that is no table)."""

    __slots__ = ("_load",)

    def __init__(self, load: weakref.WeakMethod[Any]) -> None:
        super().__init__()
        self._load = load

    def __missing__(self, name: str) -> Any:
        load = self._load()
        if load is None:
            raise KeyError(name)
        load(name)
        return dict.__getitem__(self, name)


class _Provenance:
    """A document's provenance table, ready to render: what ``LazyDocument`` builds on first use."""

    __slots__ = ("children", "refs", "renderer", "sizes", "starts")

    def __init__(
        self,
        renderer: ProvenanceRenderer,
        children: memoryview,
        starts: list[int],
        refs: list[tuple[str, memoryview, str, int]],
    ) -> None:
        self.renderer = renderer
        self.children = children
        #: Where each row's children start in ``children`` (one more entry than rows).
        self.starts = starts
        #: ``(column, view, table it indexes, lowest sentinel)`` of each reference column but ``children``.
        self.refs = refs
        #: Checked rows -> how many entries each expands to (capped just above the file's limit).
        self.sizes: dict[int, int] = {}


class LazyDocument(ModuleRendering):
    """An open FlatBuffers ``.tpk``: nodes, traces and debug handles on demand, every byte verified."""

    def __init__(self, path: str | os.PathLike[str], *, checksum: bool = True) -> None:
        self.path = os.fspath(path)
        self._views: list[Column] = []
        self._closed = True
        self._stack_cache: dict[tuple[int, int], str] = {}
        self._module_cache: dict[tuple[int, int], str] = {}
        # Module-trie paths already walked, per row: a new row reads one level and reuses its parent's.
        self._module_paths: dict[int, tuple[ModuleKey, ...]] = {0: ()}
        # Strings decoded so far, by index (at most one entry per string of the file).
        self._decoded: dict[int, str] = {}
        self._name_table: dict[bytes, int] | None = None
        # One object for the provenance state: past some 30 attributes CPython's attribute caches stop
        # working for an instance and every access (the open-and-trace path included) gets ~5% slower.
        self._prov: _Provenance | None = None
        self._source_starts: list[int] | None = None
        self._mm: bytes | None = None
        # A file with block checksums (container flag bit 0): the file, read a block at a time.
        self._blocks: BlockFile | None = None
        self._closed = False
        try:
            self._open(checksum)
        except BaseException:
            self.close()
            raise

    # -- opening ------------------------------------------------------------------------------

    @overload
    def _view(self, mv: memoryview) -> memoryview: ...
    @overload
    def _view(self, mv: BlockView) -> BlockView: ...
    def _view(self, mv: Column) -> Column:
        self._views.append(mv)
        return mv

    def _open(self, checksum: bool) -> None:
        from tracepack.codecs.flatbuffers import codec_module
        from tracepack.versions import reader_version

        src = self.path
        fd, size = _open_regular(src)
        try:
            header = read_header(_pread(fd, HEADER_SIZE, 0, src), source=src)
            self._lazy_codec(header)
            if header.block_checksums and checksum:
                # Read and verify a block at a time (tracepack.io.blocks): nothing more up front.
                self._blocks = _block_file(fd, size, header, src)
                fd = -1  # the BlockFile owns it now
                self._payload = self._view(self._blocks.view)
            else:
                # The whole file, once, into private memory, its payload CRC-32 checked: no block
                # table to verify less with, or checksum=False (a trusted file).
                self._mm = _read_whole(fd, size, src)
                whole = self._view(memoryview(self._mm))
                header = read_header(whole[:HEADER_SIZE], source=src)  # as the snapshot has it
                self._lazy_codec(header)
                self._payload = self._check_payload(whole, header, checksum)
        finally:
            if fd >= 0:
                os.close(fd)
        self.container = header
        version = self._version = reader_version(header.schema_version, source=src)
        self.source_version = header.schema_version
        self._fb: ModuleType = codec_module(version)
        body, side = self._split()
        self._views += [body] if side is None else [body, side]
        blocks = self._blocks
        r = self._r = (
            rt.Reader(body, budget=1 << 62) if blocks is None else rt.CheckedReader(body, blocks.need, budget=1 << 62)
        )
        self._cl: fbcolumns.RandomAccess | None = None
        try:
            if header.codec == "flatbuffers-columns":
                self._open_columns(body, header)
            else:
                self._open_tables(r, header)
        except DecodeError as exc:
            raise self._newer(exc) from None
        except _MALFORMED as exc:
            raise self._newer(_decode_error(exc, src, "$")) from None
        self._by_name: Column | None = None
        if side is not None:
            by_name = self._side_index(side, len(body))
            if by_name is not None and len(by_name) == self._node_count:
                self._by_name = self._view(by_name)
            elif by_name is not None:
                by_name.release()

    def _lazy_codec(self, header: ContainerHeader) -> None:
        if header.codec not in LAZY_CODECS or header.compression != "none":
            raise UsageError(
                f"lazy access needs an uncompressed FlatBuffers file, this one is {header.codec} "
                f"with compression {header.compression}; {_CONVERT_HINT}",
                source=self.path,
            )

    def _split(self) -> tuple[memoryview, memoryview | None]:
        """The payload's document buffer and side index (:func:`tracepack.codecs.flatbuffers.split`),
        with the bytes ``split`` reads (the trailer, the side index's identifier) verified first."""
        from tracepack.codecs.flatbuffers import split

        payload, blocks = self._payload, self._blocks
        n = len(payload)
        if blocks is not None and n >= 16:
            blocks.need(n - 8, n)
            start = n - 8 - _U32.unpack_from(payload, n - 8)[0]
            if start >= 8:
                blocks.need(start + 4, start + 8)
        return split(payload)

    def _side_index(self, side: memoryview, at: int) -> Column | None:
        """The side index's ``nodes_by_name`` column (``side`` starts at payload byte ``at``), or None."""
        from tracepack.codecs.flatbuffers import read_side_index, side_index_at

        blocks = self._blocks
        if blocks is None:
            return read_side_index(side)
        found = side_index_at(rt.CheckedReader(side, lambda a, b: blocks.need(at + a, at + b)))
        return None if found is None else blocks.typed(at + found[0], found[1], "I")

    def _check_payload(self, whole: memoryview, header: ContainerHeader, checksum: bool) -> memoryview:
        start = header.header_size
        available = len(whole) - start
        end = start + header.payload_length
        if header.block_checksums and available >= header.payload_length:
            # A block table follows the payload (read whole here only with checksum=False): its
            # layout checked, and its CRCs too unless checksum=False.
            if checksum:
                read_block_table(whole[end:], header, source=self.path)
            else:
                check_block_table_head(
                    whole[end : end + BLOCK_TABLE_HEAD], header, available - header.payload_length, source=self.path
                )
        elif available != header.payload_length:
            what = "truncated payload" if available < header.payload_length else "unexpected bytes after the payload"
            raise ContainerError(
                f"{what}: {max(available, 0)} bytes for a declared {header.payload_length}",
                source=self.path,
                where=f"byte {start}",
                expected=f"{header.payload_length} payload bytes, then the end of the file",
            )
        payload = self._view(whole[start:end])
        if checksum and zlib.crc32(payload) != header.payload_crc32:
            raise ContainerError(
                "payload checksum mismatch: the file is corrupted", source=self.path, where=f"bytes {start}.."
            )
        return payload

    def _open_tables(self, r: rt.Reader, header: ContainerHeader) -> None:
        fb = self._fb
        specs = fb.SPECS
        doc = r.fields(r.root(fb.FILE_IDENTIFIER), specs["Document"])
        dslot = specs["Document"].slots
        # The header: small, decoded whole; it must say what the container says.
        try:
            self.header = fb.DECODERS["Header"](r, rt.need(doc[dslot["header"]]))
        except rt.Bad as exc:
            raise rt.bad(exc, ".header") from None
        self._check_header(header)
        # The string table: its offsets as a zero-copy uint32 view.
        self._string_offsets, self._strings_at = self._u32_vector(r, doc[dslot["strings"]], ".strings")
        self._rows = {"strings": len(self._string_offsets)}
        self._check_strings()
        # Columnar tables: read on first use (a lookup touches four of them), every column a typed view,
        # lengths checked then, once.
        self._table_at = {name: doc[dslot[name]] for name in fb.TABLES}
        self._tables()
        # The graph: node table offsets as a zero-copy view.
        graph = r.fields(rt.need(doc[dslot["graph"]]), specs["Graph"])
        gslot = specs["Graph"].slots
        nodes_at = graph[gslot["nodes"]]
        if nodes_at:
            self._node_offsets, self._nodes_at = self._u32_vector(r, nodes_at, ".graph.nodes")
        else:
            self._node_offsets, self._nodes_at = self._view(memoryview(b"").cast("I")), 0
        self._node_count = len(self._node_offsets)
        self._extensions_at: int = doc[dslot["extensions"]]
        self._extension_cache: dict[str, Any] | None = None
        self._node_spec = specs["Node"]
        self._nslot = self._node_spec.slots

    def _open_columns(self, body: memoryview, header: ContainerHeader) -> None:
        """The FlatBuffers column layout: the directory, the header, each table's columns as views."""
        from tracepack.codecs import fbcolumns

        cl = self._cl = fbcolumns.RandomAccess(body, self._version, self.path, self._blocks)
        self.header = cl.field("header")
        self._check_header(header)
        self._rows = {"strings": cl.string_count}
        self._check_strings()
        self._tables()
        self._node_count = cl.node_count
        self._extension_cache = None
        self._nslot = {}

    def _check_header(self, header: ContainerHeader) -> None:
        if self.header.magic != "tracepack":
            raise DecodeError(
                f"payload magic is {self.header.magic!r}",
                source=self.path,
                where="$.header.magic",
                expected="'tracepack'",
            )
        declared = (self.header.version.major, self.header.version.minor)
        if declared != header.schema_version:
            raise DecodeError(
                f"payload says schema {declared[0]}.{declared[1]}, container header says "
                f"{header.schema_version[0]}.{header.schema_version[1]}",
                source=self.path,
                where="$.header.version",
            )

    def _check_strings(self) -> None:
        if not self._rows["strings"] or self._string(0, "$.strings") != "":
            raise IntegrityError(
                "string 0 is not the empty string", source=self.path, where="$.strings[0]", expected='""'
            )

    def _add_table(self, name: str, cols: dict[str, Column], present: bool) -> None:
        """Check a table's columns against its row count and keep them."""
        fb = self._fb
        struct_name, row_column, _optional = fb.TABLES[name]
        targets = _ref_targets(fb)
        rows = len(cols[row_column])
        for col, (_code, role) in fb.COLUMNS[struct_name].items():
            got = len(cols[col])
            if role != "pool" and got != rows and not (role == "sparse" and got == 0):
                raise IntegrityError(
                    f"column has {got} entries but the table has {rows} rows",
                    source=self.path,
                    where=f"$.{name}.{col}",
                    expected=f"{rows} entries" + (" or none" if role == "sparse" else ""),
                )
        if name in targets and rows < 1 and present:  # an absent optional table: nothing may refer to it
            raise IntegrityError(
                "table has no rows", source=self.path, where=f"$.{name}", expected="row 0, the reserved empty entry"
            )
        self._cols[name] = cols
        self._rows[name] = rows

    def _tables(self) -> None:
        """Make ``_cols`` and ``_rows`` read each table on first use (:meth:`_load_table`)."""
        load = weakref.WeakMethod(self._load_table)  # no cycle: the document is freed when dropped
        cols, rows = _Tables(load), _Tables(load)
        rows.update(self._rows)
        self._cols, self._rows = cols, rows

    def _table_names(self) -> tuple[str, ...]:
        """Every table of the current model (``strings`` aside): the file's, then those it lacks."""
        names = dict.fromkeys(self._fb.TABLES)
        names.update(dict.fromkeys(name for name, _, _ in _added_columns(self._version)))
        return tuple(names)

    def _load_table(self, name: str) -> None:
        """Read table ``name``'s columns (typed views) and check them against its row count."""
        fb = self._fb
        found = fb.TABLES.get(name)
        cols: dict[str, Column] = {}
        present = False
        if found is not None:
            struct_name, _row_column, optional = found
            try:
                if self._cl is not None:
                    cl = self._cl
                    present = cl.present(name) if optional else True
                    for col, (code, _role) in fb.COLUMNS[struct_name].items():
                        view = cl.table_column(name, col) if present else None
                        cols[col] = self._view(view if view is not None else memoryview(b"").cast(code))
                else:
                    r, spec, at = self._r, fb.SPECS[struct_name], self._table_at[name]
                    try:
                        v = None if optional and not at else r.fields(rt.need(at), spec)
                        for col, (code, _role) in fb.COLUMNS[struct_name].items():
                            pos = v[spec.slots[col]] if v is not None else 0
                            cols[col] = (
                                self._typed_vector(r, pos, code) if pos else self._view(memoryview(b"").cast(code))
                            )
                    except rt.Bad as exc:
                        raise rt.bad(exc, f".{name}") from None
                    present = v is not None
            except DecodeError as exc:
                raise self._newer(exc) from None
            except _MALFORMED as exc:
                raise self._newer(_decode_error(exc, self.path, "$")) from None
        elif name not in self._table_names():
            raise KeyError(name)
        # What the current model has and the file's version does not (minor versions only add sparse
        # columns and optional tables, schema rules 1 and 11) reads as empty, as load() migrates it.
        added = {col: code for table, col, code in _added_columns(self._version) if table == name}
        if found is None:
            self._cols[name] = {col: self._view(memoryview(b"").cast(code)) for col, code in added.items()}  # type: ignore[call-overload]
            self._rows[name] = 0
            return
        self._add_table(name, cols, present)
        for col, code in added.items():
            cols[col] = self._view(memoryview(b"").cast(code))  # type: ignore[call-overload]
        blocks = self._blocks
        if blocks is not None:
            # A column within a block's size is verified whole now and read as a plain view after: a
            # lookup reads a block anyway, and then walks it at C speed (stacks, frames, lines, files).
            for col, column in cols.items():
                if isinstance(column, BlockView) and len(column) * column.itemsize <= blocks.size:
                    cols[col] = self._view(column.verified())

    def _u32_vector(self, r: rt.Reader, pos: int, where: str) -> tuple[Column, int]:
        try:
            start, count = r.vector(rt.need(pos), 4)
        except rt.Bad as exc:
            raise rt.bad(exc, where) from None
        if self._blocks is not None:
            return self._view(self._blocks.typed(start, count, "I")), start
        return self._view(r.mv[start : start + 4 * count].cast("I")), start

    def _typed_vector(self, r: rt.Reader, pos: int, code: str) -> Column:
        size = rt.SIZES[code]
        start, count = r.vector(pos, size)
        if code == "?":
            code = "B"
        if self._blocks is not None:
            return self._view(self._blocks.typed(start, count, code))
        return self._view(r.mv[start : start + count * size].cast(code))  # type: ignore[call-overload]

    # -- life cycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the file and release its views. Strings already read stay valid; further access raises
        UsageError."""
        self._closed = True
        for view in reversed(self._views):
            view.release()
        self._views.clear()
        r = getattr(self, "_r", None)
        if r is not None:
            r.release()
        self._mm = None  # the snapshot goes with the last view a caller may still hold
        if self._blocks is not None:
            self._blocks.close()  # the file; its verified blocks go with the last view a caller holds

    def __enter__(self) -> LazyDocument:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _live(self) -> None:
        if self._closed:
            raise UsageError("the document is closed", source=self.path)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self._node_count} nodes, {self._rows['strings']} strings"
        return f"<tracepack.LazyDocument {self.path} ({state})>"

    # -- checked primitives -------------------------------------------------------------------

    def _fail(self, exc: BaseException, where: str) -> TracepackError:
        if isinstance(exc, TracepackError):
            return self._newer(exc.with_source(self.path))
        return self._newer(_decode_error(exc, self.path, where))

    def _newer(self, exc: TracepackError) -> TracepackError:
        """A DecodeError from a file of a newer minor says so, worded as the eager readers word it."""
        from tracepack.versions import from_newer_file

        if isinstance(exc, DecodeError) and self.source_version > self._version:
            return from_newer_file(exc, self.source_version, self._version)
        return exc

    def _ref(self, table: str, value: int, size_of: str, where: str, null: int = 0) -> int:
        if not null <= value < self._rows[size_of]:
            raise IntegrityError(
                f"reference {value} is out of range",
                source=self.path,
                where=where,
                expected=f"an index below {self._rows[size_of]}" + (f" or a sentinel down to {null}" if null else ""),
            )
        return value

    def _string_bytes(self, i: int, where: str) -> memoryview:
        if not 0 <= i < self._rows["strings"]:
            self._ref("strings", i, "strings", where)
        if self._cl is not None:
            return self._cl.raw_bytes("$.strings[]", i)
        r = self._r
        at = self._strings_at + 4 * i + self._string_offsets[i]
        if not 0 <= at <= r.n - 4:
            r.u32(at)  # raises
        blocks = self._blocks
        if blocks is not None:
            blocks.need(at, at + 4)
        size = _U32.unpack_from(r.mv, at)[0]
        if at + 4 + size >= r.n:
            raise rt.Bad(f"string {i} at byte {at} overruns the buffer ({r.n} bytes)")
        if blocks is not None:
            blocks.need(at + 4, at + 5 + size)  # the bytes and the NUL after them
        if r.mv[at + 4 + size]:
            raise rt.Bad(f"string {i} at byte {at} has no NUL after it")
        return r.mv[at + 4 : at + 4 + size]

    def _string(self, i: int, where: str) -> str:
        if self._closed:
            self._live()
        text = self._decoded.get(i)
        if text is not None:
            return text
        try:
            text = self._decoded[i] = str(self._string_bytes(i, where), "utf-8")
        except _MALFORMED as exc:
            raise self._fail(exc, f"$.strings[{i}]") from None
        return text

    @property
    def strings(self) -> Sequence[str]:
        """The string table, read on demand."""
        return _Strings(self)

    def _node_fields(self, i: int) -> list[Any]:
        self._live()
        at = self._nodes_at + 4 * i + self._node_offsets[i]
        try:
            return self._r.fields(at, self._node_spec)
        except _MALFORMED as exc:
            raise self._fail(exc, f"$.graph.nodes[{i}]") from None

    def _column_value(self, i: int, name: str, default: Any = None) -> Any:
        """Field ``name`` of node ``i`` in the column layout."""
        self._live()
        try:
            return self._cl.node_value(i, name, default)  # type: ignore[union-attr]
        except DecodeError as exc:
            raise self._newer(exc) from None
        except _MALFORMED as exc:
            raise self._fail(exc, f"$.graph.nodes[{i}].{name}") from None

    def _column_ints(self, i: int, name: str) -> list[int]:
        """List field ``name`` of node ``i`` in the column layout."""
        self._live()
        try:
            return self._cl.node_ints(i, name)  # type: ignore[union-attr]
        except DecodeError as exc:
            raise self._newer(exc) from None

    def columns(self, table: str) -> dict[str, memoryview]:
        """The columns of a debug-info table (``"stacks"``, ``"frames"``...) as zero-copy typed views.

        Views are valid until :meth:`close`; ``numpy.frombuffer(view, ...)`` wraps one without a copy.
        In a file with block checksums, every block under the table's columns is read and verified first.
        """
        self._live()
        names = self._table_names()
        if table not in names:
            raise UsageError(f"no table {table!r}", where="columns", expected=" or ".join(names))
        return {name: _plain(view) for name, view in self._cols[table].items()}

    # -- nodes ----------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._node_count

    def node(self, key: str | int) -> LazyNode:
        """A node by name or index (negative indices count from the end)."""
        self._live()
        n = self._node_count
        if isinstance(key, int):
            if not -n <= key < n:
                raise NotFoundError(f"node index {key} out of range ({n} nodes)", key=key, where="node")
            return LazyNode(self, key % n if key < 0 else key)
        i = self._find(key.encode("utf-8", "surrogatepass"))
        if i is None:
            hint = did_you_mean(key, (LazyNode(self, j).name for j in range(n)))
            raise NotFoundError(f"no node named {key!r}{hint}", key=key, where="node")
        return LazyNode(self, i)

    def __getitem__(self, key: str | int) -> LazyNode:
        return self.node(key)

    def nodes(self) -> Iterator[LazyNode]:
        """Every node in graph order, each read when it is used."""
        return (LazyNode(self, i) for i in range(self._node_count))

    def __iter__(self) -> Iterator[LazyNode]:
        return self.nodes()

    def _name_of(self, i: int) -> bytes:
        cl = self._cl
        v = self._node_fields(i) if cl is None else None
        try:
            name = cl.node_value(i, "name") if v is None else v[self._nslot["name"]]  # type: ignore[union-attr]
            return bytes(self._string_bytes(name, f"$.graph.nodes[{i}].name"))
        except _MALFORMED as exc:
            raise self._fail(exc, f"$.graph.nodes[{i}].name") from None

    def _find(self, key: bytes) -> int | None:
        """The last node named ``key`` (spec §2.9.5), found with the side index when it leads there; the
        index is derived data (spec §5.4): one that does not (an entry out of range, a wrong order) is
        never an error, the lookup then scans the names, as it does for a file without an index."""
        order = self._by_name
        n = self._node_count
        if order is not None:
            lo, hi = 0, n
            while lo < hi:  # bisect_left; at most log2(n) + 1 rounds
                mid = (lo + hi) // 2
                j = order[mid]
                if j >= n:
                    lo = -1  # a damaged index: scan instead
                    break
                if self._name_of(j) < key:
                    lo = mid + 1
                else:
                    hi = mid
            if 0 <= lo < n:
                j = order[lo]
                if j < n and self._name_of(j) == key:
                    # The column layout: a damaged name column may repeat a name the index does not know
                    # of; the last node of that name is the answer, as in tracepack.Document.
                    return int(j) if self._cl is None else self._cl.last_named_alike(int(j))
        if self._name_table is None:
            self._name_table = {self._name_of(i): i for i in range(n)}
        return self._name_table.get(key)

    # -- debug info -------------------------------------------------------------------------

    def frames(self, stack: int) -> list[FrameKey]:
        """The frames of stack-trie row ``stack``, outermost first."""
        self._live()
        c = self._cols
        st, fr, ln = c["stacks"], c["frames"], c["lines"]
        parent, frame = st["parent"], st["frame"]
        f_line, f_col, f_end, f_ann = fr["line"], fr["col"], fr["end_col"], fr["annotation"]
        f_end_line = fr["end_line"]
        l_file, l_line, l_name, l_text = ln["file"], ln["line"], ln["name"], ln["text"]
        names = c["files"]["name"]
        ref, s = self._ref, self._string
        ref("stacks", stack, "stacks", "stack")
        out = []
        while stack:
            up = parent[stack]
            if up >= stack:
                raise IntegrityError(
                    f"row {stack} has parent {up}, which is not an earlier row (a cycle or a forward reference)",
                    source=self.path,
                    where=f"$.stacks.parent[{stack}]",
                    expected=f"a parent below {stack}",
                )
            fi = ref("frames", frame[stack], "frames", f"$.stacks.frame[{stack}]")
            li = ref("lines", f_line[fi], "lines", f"$.frames.line[{fi}]")
            file = ref("files", l_file[li], "files", f"$.lines.file[{li}]")
            out.append(
                FrameKey(
                    s(names[file], f"$.files.name[{file}]"),
                    l_line[li],
                    s(l_name[li], f"$.lines.name[{li}]"),
                    s(l_text[li], f"$.lines.text[{li}]"),
                    f_col[fi] if f_col else -1,
                    f_end[fi] if f_end else -1,
                    s(f_ann[fi], f"$.frames.annotation[{fi}]") if f_ann else "",
                    f_end_line[fi] if f_end_line else -1,
                )
            )
            stack = up
        out.reverse()
        return out

    def stack_trace(self, stack: int, style: int = STYLE_STRIPPED) -> str:
        """Render stack-trie row ``stack`` as a legacy string (cached per stack and style)."""
        key = (stack, style)
        text = self._stack_cache.get(key)
        if text is None:
            frames = self.frames(stack)
            where = f"$.stacks[{stack}]"
            text = self._stack_cache[key] = render_frames_checked(frames, style, source=self.path, where=where)
        return charge_rendered(text, source=self.path, where=lambda: f"$.stacks[{stack}]")

    def modules(self, module: int) -> list[ModuleKey]:
        """The module-trie path ending at row ``module``, outermost first."""
        self._live()
        t = self._cols["modules"]
        parent, key, path, typ, method = t["parent"], t["key"], t["path"], t["type"], t["method"]
        decoded = self._decoded

        def s(i: int, column: str, row: int) -> str:
            # Decoded strings are answered from the cache; the place is formatted only when needed.
            text = decoded.get(i)
            return text if text is not None else self._string(i, f"$.modules.{column}[{row}]")

        self._ref("modules", module, "modules", "module")
        known = self._module_paths
        out = []
        rows = []
        while module not in known:
            up = parent[module]
            if up >= module:
                raise IntegrityError(
                    f"row {module} has parent {up}, which is not an earlier row (a cycle or a forward reference)",
                    source=self.path,
                    where=f"$.modules.parent[{module}]",
                    expected=f"a parent below {module}",
                )
            out.append(
                ModuleKey(
                    s(key[module], "key", module),
                    s(path[module], "path", module),
                    s(typ[module], "type", module),
                    s(method[module], "method", module) if method else "",
                )
            )
            rows.append(module)
            module = up
        out.reverse()
        walked = known[module] + tuple(out)
        if len(known) < 1 << 16:  # bounded: a hostile file cannot make this cache grow without end
            # The rows walked through are kept too (their siblings then walk one row), for paths of a
            # usual depth: each is a slice of the walk.
            depth = len(walked)
            for j, row in enumerate(rows if len(rows) <= 32 else rows[:1]):
                known[row] = walked[: depth - j]
        return list(walked)

    def _module_row(self, module: int) -> tuple[int, str, str, str]:
        """``(parent, key, type, method)`` of module-trie row ``module`` (the path column is not read):
        what :meth:`module_hierarchy` needs to render a row from its parent's text."""
        self._live()
        t = self._cols["modules"]
        if not 0 <= module < self._rows["modules"]:
            self._ref("modules", module, "modules", "module")
        up = t["parent"][module]
        if up >= module:
            raise IntegrityError(
                f"row {module} has parent {up}, which is not an earlier row (a cycle or a forward reference)",
                source=self.path,
                where=f"$.modules.parent[{module}]",
                expected=f"a parent below {module}",
            )
        decoded, method = self._decoded, t["method"]
        k, ty = t["key"][module], t["type"][module]
        key = decoded.get(k) or self._string(k, f"$.modules.key[{module}]")
        typ = decoded.get(ty) or self._string(ty, f"$.modules.type[{module}]")
        meth = (decoded.get(me := method[module]) or self._string(me, f"$.modules.method[{module}]")) if method else ""
        return up, key, typ, meth

    def source_text(self, source: int) -> str:
        """The full text of TorchScript source ``source``."""
        self._live()
        t = self._cols["sources"]
        self._ref("sources", source, "sources", "source")
        if self._source_starts is None:
            starts = [0]
            for count in t["line_count"]:
                starts.append(starts[-1] + count)
            if starts[-1] != len(t["lines"]):
                raise IntegrityError(
                    f"sources take {starts[-1]} lines but the pool has {len(t['lines'])}",
                    source=self.path,
                    where="$.sources.line_count",
                    expected="line counts that add up to len($.sources.lines)",
                )
            self._source_starts = starts
        lines = t["lines"]
        a, b = self._source_starts[source], self._source_starts[source + 1]
        return "".join(self._string(lines[i], f"$.sources.lines[{i}]") for i in range(a, b))

    def _provenance(self) -> _Provenance:
        """The provenance table's renderer and checks (built on first use: one pass over ``child_count``)."""
        p = self._prov
        if p is None:
            t = self._cols["provenance"]
            starts = list(accumulate(t["child_count"], initial=0))
            if starts[-1] != len(t["children"]):
                raise IntegrityError(
                    f"provenance rows take {starts[-1]} children but the pool has {len(t['children'])}",
                    source=self.path,
                    where="$.provenance.child_count",
                    expected="child counts that add up to len($.provenance.children)",
                )
            # The table's references but `children` (checked for order, which bounds them too).
            refs = [
                (col, t[col], target, null)
                for (struct_name, col), (target, null, _trie) in self._fb.REFS.items()
                if struct_name == "ProvenanceTable" and col != "children"
            ]
            renderer = ProvenanceRenderer(self.strings, SimpleNamespace(**t))
            p = self._prov = _Provenance(renderer, t["children"], starts, refs)
        return p

    def _check_provenance(self, rows: Sequence[int], where: str) -> ProvenanceRenderer:
        """Check what rendering ``rows`` touches, once per row: every row and string reference in
        range (``fbcodec.REFS``), every child below its parent (the walk ends), and the list's size
        expanded (shared rows repeat in the text) bounded by the file's size (no exponential text)."""
        self._live()
        p = self._provenance()
        children, starts, sizes, refs = p.children, p.starts, p.sizes, p.refs
        ref = self._ref
        todo = [ref("provenance", r, "provenance", f"{where}[{j}]") for j, r in enumerate(rows)]
        new: set[int] = set()
        while todo:
            r = todo.pop()
            if r in sizes or r in new:
                continue
            new.add(r)
            for col, column, target, null in refs:
                ref(target, column[r], target, f"$.provenance.{col}[{r}]", null)
            for j in range(starts[r], starts[r + 1]):
                c = children[j]
                if c >= r:
                    raise IntegrityError(
                        f"provenance row {r} has child {c}, which is not an earlier row",
                        source=self.path,
                        where=f"$.provenance.children[{j}]",
                        expected=f"a row below {r}",
                    )
                todo.append(c)
        # Every entry of a legitimate list is text the producer wrote (some 90 bytes each at least):
        # more entries than twice the file's bytes is a hostile DAG of shared rows, not provenance.
        cap = 2 * len(self._payload) + 1024
        for r in sorted(new):  # children first: they are the lower rows
            sizes[r] = min(cap + 1, 1 + sum(sizes[children[j]] for j in range(starts[r], starts[r + 1])))
        if sum(sizes[r] for r in rows) > cap:
            raise IntegrityError(
                f"from_node provenance expands to more than {cap} entries, more than the file can describe",
                source=self.path,
                where=where,
                expected="provenance rows that do not repeat one another exponentially",
            )
        return p.renderer

    def from_node(self, rows: Sequence[int], where: str = "from_node") -> str:
        """Render a ``from_node`` list of provenance rows as torch's JSON text (cached per list)."""
        renderer = self._check_provenance(rows, where)
        try:
            return charge_rendered(renderer.render(rows), source=self.path, where=where)
        except DecodeError:
            raise  # a budget: the message says which
        except _MALFORMED as exc:
            raise self._fail(exc, "$.provenance") from None

    def provenance(self, rows: Sequence[int], where: str = "from_node") -> list[Provenance]:
        """A ``from_node`` list of provenance rows as :class:`~tracepack.traces.Provenance` trees."""
        renderer = self._check_provenance(rows, where)
        try:
            return renderer.entries(rows)
        except _MALFORMED as exc:
            raise self._fail(exc, "$.provenance") from None

    def debug_handle(self, handle: int) -> DebugHandle:
        """Resolve a debug handle (binary search over the sorted handle column)."""
        self._live()
        t = self._cols["debug_handles"]
        handles = t["handle"]
        lo = bisect_left(handles, handle)  # C bisect over the zero-copy column
        if lo == len(handles) or handles[lo] != handle:
            raise NotFoundError(f"no debug handle {handle}", key=handle, where="debug_handle")
        i = lo
        ref, rows = self._ref, self._rows
        rng, stack, module, op = t["range"][i], t["stack"][i], t["module"][i], t["op"][i]
        # The places are formatted only for an error: this is the hot path of a symbolicator.
        if not 0 <= rng < rows["ranges"]:
            ref("ranges", rng, "ranges", f"$.debug_handles.range[{i}]")
        if not 0 <= stack < rows["stacks"]:
            ref("stacks", stack, "stacks", f"$.debug_handles.stack[{i}]")
        if not 0 <= module < rows["modules"]:
            ref("modules", module, "modules", f"$.debug_handles.module[{i}]")
        src = None
        if rng:
            r = self._cols["ranges"]
            source = ref("sources", r["source"][rng], "sources", f"$.ranges.source[{rng}]")
            file = ref("strings", self._cols["sources"]["file"][source], "strings", f"$.sources.file[{source}]", -1)
            src = (self._string(file, f"$.sources.file[{source}]") if file >= 0 else "", r["start"][rng], r["end"][rng])
        op_text = self._decoded.get(op)
        return DebugHandle(
            handle,
            op_text if op_text is not None else self._string(op, f"$.debug_handles.op[{i}]"),
            self.stack_trace(stack),
            self.module_hierarchy(module),
            src,
        )

    def extension(self, name: str) -> str | None:
        """The JSON text of the document's extension ``name`` (the first of that name), or None.

        The extensions are decoded once, on the first call (they are small: producer data kept as JSON).
        """
        self._live()
        if self._extension_cache is None:
            found: dict[str, Any] = {}
            if self._cl is not None:
                try:
                    for ext in self._cl.field("extensions"):
                        found.setdefault(ext.name, ext)
                except _MALFORMED as exc:
                    raise self._fail(exc, "$.extensions") from None
                except DecodeError as exc:
                    raise self._newer(exc) from None
            elif self._extensions_at:
                try:
                    for p in self._r.tables(self._extensions_at):
                        ext = self._fb.DECODERS["Extension"](self._r, p)
                        found.setdefault(ext.name, ext)
                except _MALFORMED as exc:
                    raise self._fail(exc, "$.extensions") from None
            self._extension_cache = found
        ext = self._extension_cache.get(name)
        if ext is None:
            return None
        if getattr(ext, "template", ""):  # schema 1.2: its strings interned
            return interned_json.fill(ext.template, ext.refs, self.strings, where="$.extensions")
        text: str = ext.json
        return text

    def table_sizes(self) -> dict[str, int]:
        """Rows per table of the current model (0 for a table the file's version does not have)."""
        rows = self._rows
        return {"strings": rows["strings"]} | {name: rows[name] for name in self._table_names()}

    # -- whole-document operations ------------------------------------------------------------

    def load(self) -> Any:
        """Decode everything into a :class:`tracepack.Document` (validated)."""
        import tracepack

        self._live()
        blocks = self._blocks
        if blocks is not None:
            # Every block read and verified, then the whole file as the eager reader checks it.
            blocks.need_all()
            return tracepack.loads(blocks.whole(), source=self.path)
        assert self._mm is not None
        with memoryview(self._mm) as whole:
            return tracepack.loads(whole, source=self.path)

    def verify(self) -> None:
        """The one-time linear pass: every block and the payload checksum, full structural decode, every
        reference and trie."""
        self.load()


class LazyNode:
    """One node of a :class:`LazyDocument`, read when first used; the API of :class:`tracepack.NodeView`."""

    __slots__ = ("_doc", "_v", "index")

    def __init__(self, doc: LazyDocument, index: int) -> None:
        self._doc = doc
        self.index = index
        self._v: list[Any] | None = None

    def _fields(self) -> list[Any]:
        if self._v is None:
            self._v = self._doc._node_fields(self.index)
        return self._v

    def _slot(self, name: str) -> Any:
        cl = self._doc._cl
        if cl is not None:
            return self._doc._column_value(self.index, name)
        return self._fields()[self._doc._nslot[name]]

    def _ref(self, field: str, table: str) -> int:
        return self._doc._ref(table, self._slot(field), table, f"$.graph.nodes[{self.index}].{field}")

    def _where(self, field: str) -> str:
        return f"$.graph.nodes[{self.index}].{field}"

    @property
    def name(self) -> str:
        return self._doc._string(self._slot("name"), self._where("name"))

    @property
    def target(self) -> str:
        return self._doc._string(self._slot("target"), self._where("target"))

    @property
    def stack(self) -> int:
        return self._ref("stack", "stacks")

    @property
    def module(self) -> int:
        return self._ref("module", "modules")

    @property
    def stack_style(self) -> int:
        style = int(self._slot("stack_style"))
        # the column layout checks its enums itself; the row layout's is a byte
        if style not in _stack_styles(self._doc._version):
            problem = f"{style} is not a value of enum StackStyle"
            where = self._where("stack_style")
            raise self._doc._newer(DecodeError(problem, source=self._doc.path, where=where))
        return style

    def _meta_columns(self) -> tuple[list[int], list[int]]:
        d = self._doc
        try:
            if d._cl is not None:
                keys, values = d._column_ints(self.index, "meta_keys"), d._column_ints(self.index, "meta_values")
            else:
                keys_at, values_at = self._slot("meta_keys"), self._slot("meta_values")
                keys = d._r.scalars(keys_at, "I") if keys_at else []
                values = d._r.scalars(values_at, "q") if values_at else []
        except _MALFORMED as exc:
            raise d._fail(exc, self._where("meta_keys")) from None
        if len(keys) != len(values):
            raise IntegrityError(
                f"{len(keys)} metadata keys but {len(values)} values",
                source=d.path,
                where=self._where("meta_values"),
                expected="one value per key",
            )
        return keys, values

    def _literal(self, key: str) -> str | None:
        d = self._doc
        for j, (k, v) in enumerate(zip(*self._meta_columns(), strict=True)):
            if d._string(k, self._where(f"meta_keys[{j}]")) == key and v >= 0:
                return d._string(v, self._where(f"meta_values[{j}]"))
        return None

    def _from_node_rows(self) -> list[int]:
        """The node's ``from_node`` provenance rows (none in a file of a version without them)."""
        d = self._doc
        if d._cl is not None:
            return d._column_ints(self.index, "from_node")
        slot = d._nslot.get("from_node")
        at = self._fields()[slot] if slot is not None else 0
        try:
            return d._r.scalars(at, "I") if at else _NO_ROWS
        except _MALFORMED as exc:
            raise d._fail(exc, self._where("from_node")) from None

    def _lifted_at(self, keys: list[int]) -> int:
        """``from_node_meta_index``, checked against the metadata's length (-1: none lifted)."""
        if self._doc._cl is not None:
            at: int = self._doc._column_value(self.index, "from_node_meta_index", -1)
        else:
            slot = self._doc._nslot.get("from_node_meta_index")
            at = self._fields()[slot] if slot is not None else -1
        if not -1 <= at <= len(keys):
            raise IntegrityError(
                f"from_node_meta_index {at} is outside the metadata ({len(keys)} keys)",
                source=self._doc.path,
                where=self._where("from_node_meta_index"),
                expected=f"-1, or 0..{len(keys)} with no `from_node` key among meta_keys",
            )
        return at

    def _both_from_nodes(self) -> IntegrityError:
        return IntegrityError(
            "the metadata has a `from_node` key and a lifted `from_node` (from_node_meta_index)",
            source=self._doc.path,
            where=self._where("from_node_meta_index"),
            expected="-1, or no `from_node` key among meta_keys",
        )

    @property
    def from_node(self) -> str | None:
        """The legacy ``from_node`` metadata string (torch's JSON text), or ``None`` when the node has none."""
        d = self._doc
        keys = self._meta_columns()[0]
        rows, at = self._from_node_rows(), self._lifted_at(keys)
        if rows or at >= 0:
            if at >= 0 and any(
                d._string(k, self._where(f"meta_keys[{j}]")) == FROM_NODE_KEY for j, k in enumerate(keys)
            ):
                raise self._both_from_nodes()
            return d.from_node(rows, self._where("from_node"))
        return self._literal(FROM_NODE_KEY)

    @property
    def provenance(self) -> list[Provenance]:
        """The node's interned ``from_node`` provenance as NodeSource trees (empty when it has none)."""
        return self._doc.provenance(self._from_node_rows(), self._where("from_node"))

    @property
    def stack_trace(self) -> str | None:
        """The legacy ``stack_trace`` string, or ``None`` when the node has none."""
        stack = self.stack
        if stack:
            return self._doc.stack_trace(stack, self.stack_style)
        lit = self._literal("stack_trace")
        if lit is not None:
            return lit
        return self._doc.stack_trace(0, self.stack_style) if -1 in self._meta_columns()[1] else None

    @property
    def module_stack(self) -> str | None:
        """The legacy ``nn_module_stack`` string, or ``None`` when the node has none."""
        module = self.module
        if module:
            return self._doc.module_stack(module)
        lit = self._literal("nn_module_stack")
        if lit is not None:
            return lit
        return "" if -2 in self._meta_columns()[1] else None

    @property
    def module_hierarchy(self) -> str:
        """The module path in TorchScript's ``TOP(C)::forward.A0(A)::forward`` form."""
        return self._doc.module_hierarchy(self.module)

    @property
    def frames(self) -> list[FrameKey]:
        return self._doc.frames(self.stack)

    @property
    def modules(self) -> list[ModuleKey]:
        """The module-trie path of the node, outermost module first (empty at the root)."""
        return self._doc.modules(self.module)

    @property
    def meta(self) -> dict[str, str]:
        """All metadata in the producer's order, lifted values rendered back."""
        d = self._doc
        out = {}
        keys, values = self._meta_columns()
        at = self._lifted_at(keys)
        for j, (k, v) in enumerate(zip(keys, values, strict=True)):
            if j == at:
                out[FROM_NODE_KEY] = d.from_node(self._from_node_rows(), self._where("from_node"))
            key = d._string(k, self._where(f"meta_keys[{j}]"))
            if at >= 0 and key == FROM_NODE_KEY:
                raise self._both_from_nodes()
            if v >= 0:
                out[key] = d._string(v, self._where(f"meta_values[{j}]"))
            elif v == -1:
                out[key] = d.stack_trace(self.stack, self.stack_style)
            elif v == -2:
                out[key] = d.module_stack(self.module)
            else:
                d._ref("strings", v, "strings", self._where(f"meta_values[{j}]"), -2)
        if at == len(keys):
            out[FROM_NODE_KEY] = d.from_node(self._from_node_rows(), self._where("from_node"))
        return out

    def _stored(self) -> Any:
        """The node decoded whole, in the model of the file's version."""
        d = self._doc
        d._live()
        try:
            if d._cl is not None:
                return d._cl.node(self.index)
            at = d._nodes_at + 4 * self.index + d._node_offsets[self.index]
            return d._fb.DECODERS["Node"](d._r, at)
        except DecodeError as exc:
            raise d._newer(exc) from None
        except _MALFORMED as exc:
            raise d._fail(exc, self._where("")[:-1]) from None

    @property
    def raw(self) -> Any:
        """The node as the *current* model's ``Node`` (inputs and outputs decoded), equal to
        ``tracepack.load(path).node(i).raw``: a node of an older file is migrated on its own, by the
        registered migrations (1.0 -> 1.1 only adds ``from_node=[]``, ``from_node_meta_index=-1``)."""
        return _upgrade_node(self._stored(), self._doc._version)

    @property
    def inputs(self) -> list[tuple[str, Any]]:
        s = _CheckedStrings(self._doc, self._where("inputs"))
        return [(s[a.name], resolve_argument(s, a.arg)) for a in self._stored().inputs]  # type: ignore[arg-type]

    @property
    def outputs(self) -> list[Any]:
        s = _CheckedStrings(self._doc, self._where("outputs"))
        return [resolve_argument(s, a) for a in self._stored().outputs]  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"<node {self.name} = {self.target}>"


def _open_regular(path: str) -> tuple[int, int]:
    """An open descriptor of the regular file ``path`` and its size; a FIFO, device or folder is
    refused before anything blocks (:func:`tracepack.io.files.open_regular`)."""
    from tracepack.io.files import open_regular

    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
    except OSError as exc:
        os.close(fd)
        raise UsageError(f"cannot read: {exc.strerror}", source=path) from None
    return fd, size


def _pread(fd: int, n: int, offset: int, path: str) -> bytes:
    try:
        if hasattr(os, "pread"):
            return os.pread(fd, n, offset)
        os.lseek(fd, offset, os.SEEK_SET)  # pragma: no cover - no pread (Windows)
        return os.read(fd, n)  # pragma: no cover
    except OSError as exc:
        raise UsageError(f"cannot read: {exc.strerror}", source=path) from None


def _read_whole(fd: int, size: int, path: str) -> bytes:
    """The whole file (of ``size`` bytes at open), read into private anonymous memory.

    Why not map the file itself: a file truncated (or rewritten shorter) while it is mapped turns
    the next access to a lost page into SIGBUS, which kills the process. A private copy cannot
    change under the reader and costs one read at memory speed (the CRC pass reads every byte
    anyway); it is an immutable ``bytes``, released with the last view on :meth:`close`.
    """
    try:
        with builtins.open(fd, "rb", closefd=False) as f:
            f.seek(0)
            data = f.read(size + 1)  # one more: a file that grew since fstat is refused, not cut
    except OSError as exc:
        raise UsageError(f"cannot read: {exc.strerror}", source=path) from None
    if len(data) != size:
        raise ContainerError(
            f"the file changed while it was read: {len(data)} bytes, {size} expected",
            source=path,
            where=f"byte {min(len(data), size)}",
        )
    return data


def _block_file(fd: int, size: int, header: ContainerHeader, path: str) -> BlockFile:
    """The file as a :class:`~tracepack.io.blocks.BlockFile`: its length and block table checked
    (the table's head, then the whole table and its CRC-32), no payload byte read."""
    at = header.block_table_at
    if size < at:
        raise ContainerError(
            f"truncated payload: {max(size - header.header_size, 0)} of {header.payload_length} bytes",
            source=path,
            where=f"byte {header.header_size}",
            expected=f"{header.payload_length} payload bytes",
        )
    head = _pread(fd, BLOCK_TABLE_HEAD, at, path)
    table_size = check_block_table_head(head, header, size - at, source=path)
    data = _pread(fd, table_size, at, path)
    if len(data) != table_size:
        raise ContainerError(
            f"the file changed while it was read: {len(data)} of {table_size} block table bytes",
            source=path,
            where=f"byte {at + len(data)}",
        )
    table = read_block_table(data, header, source=path)
    raw_header = _pread(fd, header.header_size, 0, path)
    return BlockFile(fd, path, header, table, raw_header=raw_header, raw_table=data)


def _plain(view: Column) -> memoryview:
    """A column as a plain ``memoryview`` (a :class:`~tracepack.io.blocks.BlockView`: verified first)."""
    return view if isinstance(view, memoryview) else view.verified()


def _decode_error(exc: BaseException, source: str, where: str) -> DecodeError:
    if isinstance(exc, rt.Bad):
        place = exc.where()
        return DecodeError(exc.problem, source=source, where=where + place[1:] if where != "$" else place)
    return DecodeError(rt.bad(exc, "").problem, source=source, where=where)
