"""Core targets (issue: tracepack core): interning size, typed decode, memory, builder throughput."""

from __future__ import annotations

import gc
import json
import time
import traceback

import tracepack
from benchmarks.corpus import stacked_model_json, synthetic_stacks
from benchmarks.report import Figure, Report, best_time, peak_memory
from tracepack import baseline
from tracepack.stats import debug_info_bytes, legacy_debug_bytes
from tracepack.torch.export.model_json import import_model_json
from tracepack.traces import render_frames

SECTION = "core"


def _size(report: Report) -> None:
    data = stacked_model_json(150)  # 10,500 nodes
    model = json.loads(data)
    doc = import_model_json(data)
    legacy, interned = legacy_debug_bytes(model), debug_info_bytes(doc)
    report.add(
        Figure(SECTION, f"debug info, {len(doc)} nodes: interned vs one string per node", interned, legacy, "B",
               target=1 / 20, higher_is_better=False, note="uncompressed MessagePack")
    )  # fmt: skip
    whole = len(tracepack.dumps(doc, codec="msgpack", compression="none"))
    report.add(Figure(SECTION, "whole document (msgpack) vs model.json", whole, len(data), "B", higher_is_better=False))


def _decode(report: Report) -> None:
    data = stacked_model_json(40)  # 2,800 nodes
    doc = import_model_json(data)
    blob = tracepack.dumps(doc, codec="msgpack", compression="none")
    t_legacy = best_time(lambda: baseline.decode_model_json(data), repeat=3, min_time=0.5)
    t_tp = best_time(lambda: tracepack.loads(blob), repeat=5)
    report.add(
        Figure(SECTION, f"decode {len(doc)} nodes to typed objects (+validation)", t_tp, t_legacy, "s", target=20,
               note="vs json.loads + reflective dataclasses")
    )  # fmt: skip
    t_json = best_time(lambda: tracepack.loads(tracepack.dumps(doc, codec="json", compression="none")), repeat=3)
    report.add(Figure(SECTION, "  the same through the JSON codec", t_json, t_legacy, "s"))


def _memory(report: Report) -> None:
    n_nodes, n_stacks = 100_000, 1_000
    stacks = synthetic_stacks(n_stacks, 10)
    b = tracepack.DocumentBuilder()
    for i in range(n_nodes):
        b.add_node(f"op_{i}", "aten.add", stack_trace=stacks[i % n_stacks])
    blob = tracepack.dumps(b.build(), compression="none")
    legacy_text = json.dumps(
        [{"name": f"op_{i}", "stack_trace": render_frames(stacks[i % n_stacks], 1)} for i in range(n_nodes)]
    ).encode()
    del b
    gc.collect()

    def load_and_render() -> tuple[tracepack.Document, list[str | None]]:
        doc = tracepack.loads(blob)
        traces = [n.stack_trace for n in doc.nodes()]
        return doc, traces

    peak_tp, (doc, traces) = peak_memory(load_and_render)
    distinct_objects = len({id(t) for t in traces})
    peak_legacy, legacy = peak_memory(lambda: json.loads(legacy_text))
    report.add(
        Figure(SECTION, f"memory: {n_nodes // 1000}k nodes, {n_stacks} stacks, all traces rendered", peak_tp,
               peak_legacy, "B", target=0.3, higher_is_better=False,
               note="tracemalloc peak vs json.loads of per-node strings")
    )  # fmt: skip
    strings = doc.raw.strings
    unique = len(set(strings)) == len(strings)
    report.add(
        Figure(SECTION, "rendered trace objects per distinct stack", distinct_objects, n_stacks, "objs",
               target=1.0, higher_is_better=False, note=f"{len(strings)} table strings, all distinct: {unique}")
    )  # fmt: skip
    del legacy


def _builder(report: Report) -> None:
    n_nodes, n_stacks = 100_000, 1_000
    stacks = [[(f.file, f.line, f.name, f.text) for f in s] for s in synthetic_stacks(n_stacks, 10)]
    # Producers hand over a fresh list per node, like a tracer does.
    per_node = [list(stacks[i % n_stacks]) for i in range(n_nodes)]
    names = [f"op_{i}" for i in range(n_nodes)]

    def build() -> None:
        b = tracepack.DocumentBuilder()
        add = b.add_node
        for name, frames in zip(names, per_node, strict=True):
            add(name, "aten.add", stack_trace=frames)
        b.build()

    t_build = best_time(build, repeat=3, min_time=0.0, clock=time.process_time)
    summaries = [traceback.StackSummary.from_list(s) for s in stacks]

    def legacy() -> None:
        out = []
        for i, name in enumerate(names):
            out.append({"name": name, "stack_trace": "".join(summaries[i % n_stacks].format()).strip()})

    t_legacy = best_time(legacy, repeat=3, min_time=0.0, clock=time.process_time)
    rate = n_nodes / t_build
    report.add(
        Figure(SECTION, f"builder: {rate / 1000:.0f}k nodes/s, 10-frame stacks", t_build / n_nodes, 1 / 200_000, "s",
               target=1.0, note="CPU time, vs the 200k nodes/s target (5 us/node)")
    )  # fmt: skip
    report.add(
        Figure(SECTION, "builder vs formatting one legacy string per node", t_build, t_legacy, "s",
               note="traceback.StackSummary.format per node")
    )  # fmt: skip


def run(report: Report) -> None:
    start = time.perf_counter()
    # The builder first: after the memory figure has allocated and freed ~250 MB, the same build takes
    # 20-35% more CPU time in this process (the allocator's state, not the builder's work).
    _builder(report)
    _size(report)
    _decode(report)
    _memory(report)
    print(f"(core section took {time.perf_counter() - start:.1f} s)")
