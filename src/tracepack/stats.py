"""Measurements shared by ``tracepack demo`` and the benchmarks."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from tracepack.document import Document

__all__ = ["debug_info_bytes", "legacy_debug_bytes"]


def legacy_debug_bytes(model: Any) -> int:
    """Bytes of per-node ``stack_trace`` and ``nn_module_stack`` strings in a model.json (as JSON)."""
    total = 0
    for node in model["graph_module"]["graph"]["nodes"]:
        meta = node.get("metadata", {})
        for key in ("stack_trace", "nn_module_stack"):
            if key in meta:
                total += len(json.dumps(meta[key])) + len(json.dumps(key)) + 2
    return total


def debug_info_bytes(doc: Document) -> int:
    """MessagePack bytes of a document's interned trace tables, the strings only they use, and the
    per-node references (stack, style, module, and the placeholder metadata entries)."""
    r = doc.raw
    used: set[int] = set(r.files.name)
    used.update(r.lines.name, r.lines.text, r.frames.annotation)
    used.update(r.modules.key, r.modules.path, r.modules.type, r.modules.method)
    enc = msgspec.msgpack.encode
    tables = sum(len(enc(t)) for t in (r.files, r.lines, r.frames, r.stacks, r.modules))
    strings = sum(len(enc(r.strings[i])) for i in used)
    per_node = 0
    for n in r.graph.nodes:
        per_node += len(enc([n.stack, n.stack_style, n.module]))
        per_node += sum(len(enc(v)) + len(enc(k)) for k, v in zip(n.meta_keys, n.meta_values, strict=True) if v < 0)
    return tables + strings + per_node
