"""FlatBuffers: lazy, random-access reading against a full decode, on a ~100k-node graph.

The document is the bundled torch.export sample (``tracepack/data/sample/model.json``)
"stacked": its nodes repeated with renamed names and values, each repetition in its
own block of the module hierarchy (``blocks.0`` -> ``blocks.<r>``), so traces are
shared the way a deep model's layers share them, and every node has a debug handle.

Figures:

* (a) open a ``.tpk`` + render one node's stack trace, against a full decode of the same
  file (``tracepack.load``); target >= 100x faster;
* (b) memory held by a lazy open, against the file size: traced Python allocations
  (tracemalloc) and the process's RSS growth, both stated; target <= 1.05x of the file (the
  reader holds one verified private copy of the file, so that it cannot change under it);
* (c) a full decode through FlatBuffers, against MessagePack (no target: FlatBuffers trades
  decode-everything speed for lazy access);
* (d) the verifier: what ``tracepack.open`` checks up front, and a checked node lookup, against
  a full linear verification (decode + validate) of the same file;
* (e) block checksums, on an 8,680-node torch.export model (``benchmarks.corpus.stacked_model_json``)
  in both FlatBuffers layouts: a verified lazy open + one node's stack trace against a full decode
  (``tracepack.load``) of the same file, target >= 100x, with block checksums (each block a lookup
  reads verified) and without (the whole payload's CRC-32 on open); open alone and one trace on an
  open document; the bytes a lookup verifies against the file; and (f) the lookup with blocks of
  4 to 64 KiB (how the block size was chosen). CPU time of this process (``time.process_time``):
  the machine may be shared, and other processes' load does not count.
"""

from __future__ import annotations

import gc
import os
import resource
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import tracepack
from benchmarks.report import Figure, Report, best_time
from tracepack.builder import DocumentBuilder, Generic, SymInt, Tensor

__all__ = ["run", "stacked_document"]

SAMPLE = Path(tracepack.__file__).parent / "data" / "sample" / "model.json"
NODES = 100_000


def _rename(v: Any, suffix: str) -> Any:
    """A resolved argument (``NodeView.inputs``) back as builder input, with values renamed."""
    if isinstance(v, dict) and len(v) == 1:
        ((k, x),) = v.items()
        if k == "tensor":
            return Tensor(f"{x}{suffix}")
        if k == "sym_int":
            return SymInt(x)
        return Generic(k, x)
    if isinstance(v, list) and v and all(isinstance(i, dict) and set(i) == {"tensor"} for i in v):
        return [Tensor(f"{i['tensor']}{suffix}") for i in v]
    return v


@cache
def stacked_document(nodes: int = NODES) -> tracepack.Document:
    """The sample's nodes repeated until ``nodes`` nodes (renamed per repetition, one block each)."""
    from tracepack.torch.export.model_json import import_model_json

    sample = import_model_json(SAMPLE.read_bytes(), source=SAMPLE.name)
    b = DocumentBuilder(producer="tracepack-bench")
    base = list(sample.nodes())
    handle = 0
    for r in range(-(-nodes // len(base))):
        suffix = f"@{r}" if r else ""
        for n in base:
            if handle == nodes:
                break
            meta = dict(n.meta)
            if "nn_module_stack" in meta:
                meta["nn_module_stack"] = meta["nn_module_stack"].replace("blocks.0", f"blocks.{r}")
            b.add_node(
                f"{n.name}{suffix}",
                n.target,
                inputs=[(k, _rename(v, suffix)) for k, v in n.inputs],
                outputs=[_rename(v, suffix) for v in n.outputs],
                meta=meta,
            )
            b.add_debug_handle(handle, stack=b.stack_of_frames(n.frames), op=f"{n.name}{suffix}")
            handle += 1
    b.set_graph(name="stacked", inputs=[Tensor("x")], outputs=[Tensor(f"{base[-1].name}@{r}")])
    return b.build()


def _rss() -> int:
    """Resident set size now, in bytes (Linux /proc; else the peak from getrusage)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # pragma: no cover - not Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run(report: Report) -> None:
    doc = stacked_document()
    names = [n.name for n in doc.nodes()]
    target = names[len(names) * 2 // 3]
    with tempfile.TemporaryDirectory(prefix="tracepack-bench-") as tmp:
        fb = Path(tmp) / "graph-fb.tpk"
        mp = Path(tmp) / "graph-mp.tpk"
        t0 = time.perf_counter()
        fb_size = tracepack.dump(doc, fb, codec="flatbuffers-rows", compression="none")
        enc_fb = time.perf_counter() - t0
        t0 = time.perf_counter()
        tracepack.dump(doc, mp, codec="msgpack", compression="none")
        enc_mp = time.perf_counter() - t0
        print(
            f"  document: {len(doc)} nodes, {len(doc.strings)} strings; flatbuffers-rows {fb_size / 1e6:.1f} MB "
            f"(encoded in {enc_fb:.2f} s), msgpack {mp.stat().st_size / 1e6:.1f} MB (in {enc_mp:.2f} s)"
        )
        expected = doc.node(target).stack_trace

        def lazy_trace() -> str | None:
            with tracepack.open(fb) as lazy:
                return lazy.node(target).stack_trace

        def full_trace() -> str | None:
            return tracepack.load(fb).node(target).stack_trace

        assert lazy_trace() == expected == full_trace()
        t_lazy = best_time(lazy_trace, repeat=5, min_time=0.2)
        t_full = best_time(full_trace, repeat=3, min_time=0.5)
        report.add(
            Figure(
                "flatbuffers",
                "(a) open + one node's stack trace vs full decode",
                t_lazy,
                t_full,
                "s",
                target=100,
                note="tracepack.open(path).node(name).stack_trace vs tracepack.load(path)",
            )
        )
        _column_layout(report, doc, Path(tmp) / "graph-fbc.tpk", target=target, expected=expected)
        _block_checksums(report, Path(tmp))

        _newest_layout(report, doc, fb, target=target, expected=expected)

        # (b) memory of a lazy open: Python allocations and RSS growth, against the file size.
        gc.collect()
        rss0 = _rss()
        tracemalloc.start()
        lazy = tracepack.open(fb)
        trace = lazy.node(target).stack_trace
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss = _rss() - rss0
        assert trace == expected
        lazy.close()
        report.add(
            Figure(
                "flatbuffers",
                "(b) lazy open + one trace: peak traced memory vs file",
                peak,
                fb_size,
                "B",
                target=1.05,
                higher_is_better=False,
                note="tracemalloc peak: the blocks read (block checksums) or the verified snapshot, + the answer",
            )
        )
        report.add(
            Figure(
                "flatbuffers",
                "(b) lazy open + one trace: RSS growth vs file",
                max(rss, 0),
                fb_size,
                "B",
                target=1.05,
                higher_is_better=False,
                note="private memory: the verified blocks read (no file mapped: nothing changes, or SIGBUS, under it)",
            )
        )

        # (c) full decode through each codec (payload to typed model, validation included).
        t_fb = best_time(lambda: tracepack.load(fb), repeat=3, min_time=0.5)
        t_mp = best_time(lambda: tracepack.load(mp), repeat=3, min_time=0.5)
        report.add(
            Figure(
                "flatbuffers",
                "(c) full decode: flatbuffers-rows vs msgpack",
                t_fb,
                t_mp,
                "s",
                note="tracepack.load of the same document; ratio < 1 means slower than msgpack",
            )
        )

        # (d) the verifier: checks at open and per lookup, against a full linear verification.
        def open_only() -> None:
            tracepack.open(fb).close()

        def lookup() -> str:
            return lazy2.node(target).name

        t_open = best_time(open_only, repeat=5, min_time=0.2)
        lazy2 = tracepack.open(fb)
        t_lookup = best_time(lookup, repeat=5, min_time=0.2)
        t_verify = best_time(lambda: tracepack.open(fb).verify(), repeat=3, min_time=0.5)
        lazy2.close()
        report.add(
            Figure(
                "flatbuffers",
                "(d) verifier: open (header, root, tables) vs full verify",
                t_open,
                t_verify,
                "s",
                note="open checks O(tables); each access checks what it touches",
            )
        )
        report.add(
            Figure(
                "flatbuffers",
                "(d) verifier: checked node lookup by name vs full verify",
                t_lookup,
                t_verify,
                "s",
                note="binary search over the side index, every offset bounds-checked",
            )
        )


def _column_layout(report: Report, doc: tracepack.Document, path: Path, *, target: str, expected: str | None) -> None:
    """(a) again in the FlatBuffers column layout (codec id 4): a lazy lookup against a full decode of
    the same file, and its size against the row layout's."""
    tracepack.dump(doc, path, codec="flatbuffers-columns", compression="none")

    def lazy_trace() -> str | None:
        with tracepack.open(path) as lazy:
            return lazy.node(target).stack_trace

    def full_trace() -> str | None:
        return tracepack.load(path).node(target).stack_trace

    assert lazy_trace() == expected == full_trace()
    t_lazy = best_time(lazy_trace, repeat=5, min_time=0.2)
    t_full = best_time(full_trace, repeat=3, min_time=0.5)
    report.add(
        Figure("flatbuffers", "(a) column layout: open + one node's stack trace vs full decode", t_lazy, t_full, "s",
               target=100, note=f"flatbuffers-columns, {path.stat().st_size / 1e6:.1f} MB")
    )  # fmt: skip


def _newest_layout(report: Report, doc: tracepack.Document, fb: Path, *, target: str, expected: str | None) -> None:
    """(a) again with the newest schema version's layout (1.2 on: each table its own vtable), when it
    is newer than the file written above: a lazy lookup against a full decode of that file, and the
    full decode against the one above (the same document; the newer model's added fields at defaults)."""
    from benchmarks.bench_sizes import raw_in
    from tracepack import container
    from tracepack.codecs import flatbuffers as fbc
    from tracepack.versions import CURRENT, VERSIONS

    newest = max(VERSIONS)
    if newest <= CURRENT:
        return
    raw = raw_in(doc.raw, newest)
    path = fb.with_name("graph-fb-newest.tpk")
    path.write_bytes(container.pack(fbc.encode(raw, newest), schema_version=newest, codec="flatbuffers-rows"))

    def lazy_trace() -> str | None:
        with tracepack.open(path) as lazy:
            return lazy.node(target).stack_trace

    def full_decode() -> Any:
        return fbc.decode(container.unpack(path.read_bytes())[1], newest)

    def full_decode_old() -> Any:
        return fbc.decode(container.unpack(fb.read_bytes())[1], CURRENT)

    assert lazy_trace() == expected
    t_lazy = best_time(lazy_trace, repeat=5, min_time=0.2)
    t_full = best_time(full_decode, repeat=3, min_time=0.5)
    t_full_old = best_time(full_decode_old, repeat=3, min_time=0.5)
    label = f"{newest[0]}.{newest[1]}"
    report.add(
        Figure("flatbuffers", f"(a) {label} layout: open + one node's stack trace vs full decode", t_lazy, t_full,
               "s", target=100, note=f"{path.stat().st_size / 1e6:.1f} MB; read with the newest released model")
    )  # fmt: skip
    report.add(
        Figure("flatbuffers", f"(a) {label} layout: full decode vs the {CURRENT[0]}.{CURRENT[1]} file's", t_full,
               t_full_old, "s", target=1 / 1.2, note="the FlatBuffers payload decoded to the model, both files")
    )  # fmt: skip


#: Copies of the bundled sample's nodes in the (e) model: 8,680 nodes.
BLOCK_COPIES = 124


def _block_checksums(report: Report, folder: Path) -> None:
    """(e) and (f): verified lazy lookups with and without block checksums, against a full decode."""
    from benchmarks.corpus import stacked_model_json
    from tracepack.torch.export.model_json import import_model_json

    doc = import_model_json(stacked_model_json(BLOCK_COPIES), source="stacked.json")
    for layout in ("flatbuffers-rows", "flatbuffers-columns"):
        _blocks_in(report, doc, layout, folder)


def _blocks_in(report: Report, doc: tracepack.Document, layout: str, folder: Path) -> None:
    from tracepack import container

    clock = time.process_time
    name = doc.node(len(doc) * 2 // 3).name
    short = layout.removeprefix("flatbuffers-")
    plain = folder / f"{short}-plain.tpk"
    tracepack.dump(doc, plain, codec=layout, compression="none", block_checksums=False)
    payload = plain.read_bytes()[container.HEADER_SIZE :]

    def with_blocks(size: int) -> Path:
        path = folder / f"{short}-{size}.tpk"
        data = container.pack(payload, schema_version=doc.version, codec=layout, block_checksums=True, block_size=size)
        path.write_bytes(data)
        return path

    def lookup(path: Path) -> Callable[[], str | None]:
        def run() -> str | None:
            with tracepack.open(path) as lazy:
                return lazy.node(name).stack_trace

        return run

    blocks = with_blocks(container.BLOCK_SIZE)
    assert blocks.read_bytes() == tracepack.dumps(doc, codec=layout, compression="none")  # what writers write
    expected = doc.node(name).stack_trace
    assert lookup(blocks)() == expected == lookup(plain)() == tracepack.load(blocks).node(name).stack_trace
    t_full = best_time(lambda: tracepack.load(blocks), repeat=3, min_time=0.5, clock=clock)
    t_blocks = best_time(lookup(blocks), repeat=7, min_time=0.3, clock=clock)
    t_plain = best_time(lookup(plain), repeat=7, min_time=0.3, clock=clock)
    t_open = best_time(lambda: tracepack.open(blocks).close(), repeat=7, min_time=0.3, clock=clock)
    t_open_plain = best_time(lambda: tracepack.open(plain).close(), repeat=7, min_time=0.3, clock=clock)
    t_trace = _after_open(blocks, name, clock)
    size = blocks.stat().st_size
    read, count = _blocks_read(blocks, name)
    label = f"(e) {short}, {len(doc)} nodes"
    kib = container.BLOCK_SIZE // 1024
    report.add(
        Figure(
            "flatbuffers",
            f"{label}: open + one trace, block checksums",
            t_blocks,
            t_full,
            "s",
            target=100,
            note=f"verified lazy lookup vs tracepack.load, {size / 1e6:.2f} MB, {read} of {count} blocks "
            f"of {kib} KiB read and verified; CPU time",
        )
    )
    report.add(
        Figure(
            "flatbuffers",
            f"{label}: open + one trace, whole-file CRC",
            t_plain,
            t_full,
            "s",
            note="without block checksums: the file read and its CRC-32 checked on open (before)",
        )
    )
    report.add(
        Figure(
            "flatbuffers",
            f"{label}: open alone, block checksums",
            t_open,
            t_full,
            "s",
            note=f"header, block table, root, directory; with the whole-file CRC {t_open_plain * 1e3:.2f} ms",
        )
    )
    report.add(
        Figure(
            "flatbuffers",
            f"{label}: one trace on an open file, blocks",
            t_trace,
            t_full,
            "s",
            note="the first lookup after open: its blocks read and verified then",
        )
    )
    report.add(
        Figure(
            "flatbuffers",
            f"{label}: bytes verified by open + one trace",
            read * container.BLOCK_SIZE,
            size,
            "B",
            target=0.5,
            higher_is_better=False,
            note="whole blocks read vs the file; a lookup reads O(log nodes) blocks",
        )
    )
    # (f) the block size: the same lookup with blocks of 4 to 64 KiB.
    for k in (4, 8, 16, 32, 64):
        path = with_blocks(k << 10)
        t = best_time(lookup(path), repeat=5, min_time=0.2, clock=clock)
        n = _blocks_read(path, name)[0]
        report.add(Figure("flatbuffers", f"(f) {short}: open + one trace, {k} KiB blocks", t, t_full, "s",
                          note=f"{n} blocks, {n * k} KiB verified"))  # fmt: skip


def _blocks_read(path: Path, name: str) -> tuple[int, int]:
    """Blocks an open + one trace reads, of the file's blocks."""
    with tracepack.open(path) as lazy:
        lazy.node(name).stack_trace  # noqa: B018 - what it reads is the figure
        assert lazy._blocks is not None
        return lazy._blocks.reads, len(lazy._blocks.ok)


def _after_open(path: Path, name: str, clock: Callable[[], float]) -> float:
    """The best time of one node's stack trace on a document just opened (the open is not timed)."""
    best = float("inf")
    for _ in range(200):
        with tracepack.open(path) as lazy:
            start = clock()
            lazy.node(name).stack_trace  # noqa: B018
            best = min(best, clock() - start)
    return best
