"""Shared inputs for the usability tests: the bundled torch.export sample, as torch wrote it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
SAMPLE_DIR = ROOT / "src" / "tracepack" / "data" / "sample"
MODEL_JSON = SAMPLE_DIR / "model.json"
PT2 = SAMPLE_DIR / "tiny_transformer.pt2"
TORCH_DATA = ROOT / "tests" / "data" / "torch"


def torch_nodes() -> list[dict[str, Any]]:
    """The sample's nodes as torch itself wrote them into model.json (the reference, not tracepack's reading)."""
    program = json.loads(MODEL_JSON.read_bytes())
    nodes: list[dict[str, Any]] = program["graph_module"]["graph"]["nodes"]
    return nodes


def torch_frames(node: dict[str, Any]) -> list[tuple[str, int]]:
    """(file, line) of every frame in torch's own ``stack_trace`` string, read with a regex."""
    text = node.get("metadata", {}).get("stack_trace") or ""
    return [(f, int(n)) for f, n in re.findall(r'File "([^"]+)", line (\d+)', text)]


def torch_module_path(node: dict[str, Any]) -> str:
    """The innermost module path in torch's ``nn_module_stack`` string (``key,path,type;...``)."""
    text = node.get("metadata", {}).get("nn_module_stack") or ""
    paths = [entry.split(",")[1] for entry in text.split(";") if entry]
    return next((p for p in reversed(paths) if p), "")
