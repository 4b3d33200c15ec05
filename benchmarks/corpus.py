"""Benchmark corpora built from the bundled real torch.export sample.

``stacked_model_json(copies)`` stacks the sample's transformer blocks the way a
deeper model of the same code would look: every copy of a node keeps its stack
trace (same source lines), gets its own name and tensor names, and its module
path moves to its own layers (``blocks.0`` -> ``blocks.14`` in copy 7), so module stacks
grow with depth while stack traces repeat.
"""

from __future__ import annotations

import json
import re
from functools import cache, partial
from typing import Any

from tracepack.demo import sample_model_json
from tracepack.traces import FrameKey

__all__ = ["stacked_model_json", "synthetic_stacks"]

_BLOCK = re.compile(r"blocks([._])(\d+)")
_BLOCKS_IN_SAMPLE = 2


def _move_block(match: re.Match[str], layer: int) -> str:
    return f"blocks{match.group(1)}{layer * _BLOCKS_IN_SAMPLE + int(match.group(2))}"


def _rename_args(value: Any, suffix: str) -> Any:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "name" and isinstance(v, str) and set(value) == {"name"}:
                out[k] = v + suffix
            else:
                out[k] = _rename_args(v, suffix)
        return out
    if isinstance(value, list):
        return [_rename_args(v, suffix) for v in value]
    return value


@cache
def stacked_model_json(copies: int) -> bytes:
    """The sample with its nodes repeated ``copies`` times as deeper layers."""
    model = json.loads(sample_model_json())
    graph = model["graph_module"]["graph"]
    nodes, values = graph["nodes"], graph["tensor_values"]
    new_nodes, new_values = [], {}
    for k in range(copies):
        suffix = f"_L{k}" if k else ""
        for node in nodes:
            n = _rename_args(node, suffix)
            n["name"] = node["name"] + suffix
            meta = dict(node["metadata"])
            if "nn_module_stack" in meta:
                meta["nn_module_stack"] = _BLOCK.sub(partial(_move_block, layer=k), meta["nn_module_stack"])
            n["metadata"] = meta
            new_nodes.append(n)
        for name, v in values.items():
            new_values[name + suffix] = v
    graph["nodes"], graph["tensor_values"] = new_nodes, new_values
    return json.dumps(model).encode()


def synthetic_stacks(distinct: int, depth: int, *, files: int = 20) -> list[list[FrameKey]]:
    """``distinct`` call stacks of ``depth`` frames that share their outer callers, like real code."""
    stacks = []
    for i in range(distinct):
        frames = [FrameKey("/home/user/project/train.py", 10, "main", "model(batch)")]
        for d in range(1, depth):
            # Outer frames are shared by many stacks, inner ones by few.
            branch = i // max(1, distinct // (2 ** min(d, 12)))
            f = f"/home/user/project/pkg/mod{(branch + d) % files}.py"
            frames.append(FrameKey(f, 20 + 3 * d + branch % 50, f"layer_{d}_{branch % 97}", f"x = self.op{d}(x)"))
        stacks.append(frames)
    return stacks
