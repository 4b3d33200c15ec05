"""``tracepack demo``: the main job on the bundled real sample.

Converts the bundled torch.export ``model.json`` (a small transformer exported
with torch 2.13) into tracepack with every codec, checks that the legacy file
comes back byte for byte, and prints size and speed against the legacy form,
measured in this process.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

import zstandard

import tracepack
from tracepack import baseline, dictionaries
from tracepack.stats import debug_info_bytes, legacy_debug_bytes

__all__ = ["run_demo", "sample_model_json"]


def sample_model_json() -> bytes:
    """The bundled sample's ``model.json`` bytes."""
    return resources.files("tracepack.data").joinpath("sample/model.json").read_bytes()


def _best(fn: Callable[[], Any], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        gc.collect()
        n, start = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed > 0.05:
                break
        best = min(best, elapsed / n)
    return best


def _codecs() -> list[str]:
    """Every registered codec this build has."""
    import importlib.util

    from tracepack.codecs import CODECS

    return [name for name, (_, module) in CODECS.items() if importlib.util.find_spec(module) is not None]


def run_demo(*, quick: bool = False) -> int:
    from tracepack.torch.export import model_json as export_json  # the core imports torch's package lazily

    rounds = 3 if quick else 7
    data = sample_model_json()
    model = json.loads(data)
    nodes = model["graph_module"]["graph"]["nodes"]
    doc = export_json.import_model_json(data, source="sample/model.json")
    restored = export_json.export_model_json(tracepack.loads(tracepack.dumps(doc)))
    if restored != data:
        print("demo: the sample did not come back byte for byte")
        return 1

    v = model["schema_version"]
    print(
        f"tracepack demo: bundled torch.export sample ({len(nodes)} nodes, torch {model.get('torch_version')}, "
        f"model.json schema {v['major']}.{v['minor']})\n"
    )
    zstd19 = len(zstandard.ZstdCompressor(level=19).compress(data))
    print(f"{'size':<52}{'bytes':>10}   vs model.json")
    rows = [("model.json (legacy)", len(data)), ("model.json + zstd -19", zstd19)]
    encoded: dict[str, bytes] = {}
    # Each codec raw, with zstd -19 alone (what `zstd -19 model.json` gets), and with the built-in
    # dictionary trained on torch.export output (what `tracepack convert` writes by default).
    variants = (("none", None, ""), ("zstd", None, " + zstd -19"), ("zstd", dictionaries.DEFAULT, " + zstd -19 + dict"))
    for codec in _codecs():
        for comp, zdict, suffix in variants:
            blob = tracepack.dumps(doc, codec=codec, compression=comp, level=19, zstd_dict=zdict)
            encoded[f"{codec}/{comp}" + ("/dict" if zdict else "")] = blob
            rows.append((f"tracepack {codec}{suffix}", len(blob)))
    for label, size in rows:
        print(f"{label:<52}{size:>10,}   {size / len(data):6.3f}x")
    legacy_dbg, interned_dbg = legacy_debug_bytes(model), debug_info_bytes(doc)
    print(
        f"\ndebug info: per-node strings {legacy_dbg:,} bytes -> interned tables {interned_dbg:,} bytes "
        f"({legacy_dbg / interned_dbg:.1f}x smaller)"
    )
    sizes = doc.table_sizes()
    print(
        f"  {len(nodes)} nodes share {sizes['stacks'] - 1} stacks of {sizes['frames'] - 1} frames "
        f"in {sizes['files'] - 1} files; {sizes['modules'] - 1} module paths; {sizes['strings']} strings"
    )

    t_legacy = _best(lambda: baseline.decode_model_json(data), rounds)
    blob = encoded["msgpack/none"]
    t_tp = _best(lambda: tracepack.loads(blob), rounds)
    t_tp_zstd = _best(lambda: tracepack.loads(encoded["msgpack/zstd"]), rounds)
    t_json = _best(lambda: json.loads(data), rounds)

    def render_all() -> None:
        d = tracepack.loads(blob)
        for n in d.nodes():
            _ = n.stack_trace, n.module_stack

    t_render = _best(render_all, rounds)
    print(f"\n{'speed (best of ' + str(rounds) + ')':<52}{'time':>10}   vs legacy decode")
    for label, t in (
        ("legacy: json.loads + dataclasses", t_legacy),
        ("  (json.loads alone)", t_json),
        ("tracepack msgpack -> typed, validated doc", t_tp),
        ("tracepack msgpack + zstd -> typed doc", t_tp_zstd),
        ("tracepack load + render every node's traces", t_render),
    ):
        print(f"{label:<52}{t * 1e3:>8.3f}ms   {t_legacy / t:6.1f}x faster")
    print("\nmodel.json restored from tracepack byte for byte: yes")
    first = next(n for n in doc.nodes() if n.stack_trace)
    print(f"\nexample: node {first.name!r} ({first.target}), stack_trace as torch wrote it:")
    print(first.stack_trace)
    print(f"nn_module_stack: {first.module_stack}")
    return 0
