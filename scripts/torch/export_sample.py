"""Export a tiny transformer with torch.export and write tracepack's bundled sample.

Run with a Python that has ``torch==2.13.0`` (tracepack itself never needs torch)::

    python scripts/torch/export_sample.py

It writes

* ``src/tracepack/data/sample/tiny_transformer.pt2`` - the ``torch.export.save``
  archive, and
* ``src/tracepack/data/sample/model.json`` - its ``models/model.json`` member,

plus, with ``--strict`` (default: also done), the ``model.json`` of the same
model exported with ``strict=True`` (TorchDynamo) to
``tests/data/torch/export_strict_model.json``, whose stack traces have another
layout (see ``docs/torch-formats.md``).

The bytes are torch's own except for one thing: every machine path inside
(the checkout, the virtualenv, the temp and home dirs) is replaced by a
neutral prefix (``/home/user/project/``, ``/home/user/.venv/lib/pythonX.Y/
site-packages/`` ...), byte for byte, in the JSON text and in the rewritten
archive member. The script prints every replacement, checks that
``json.dumps(json.loads(b), allow_nan=False)`` gives back the bytes, that
``torch.export.load`` reads the rewritten archive, and that no machine path
(a prefix of ``_sample_common.FORBIDDEN``: temp dir, work tree, root's home) is left.

The model has nested modules, an ``nn.Sequential`` of blocks, and helper
functions calling each other three deep (kept in the traces by
``torch.fx.traceback.annotate_fn``), so that stack traces are deep and share
their callers. One source line carries a non-ASCII comment, which the
JSON holds as a ``\\u`` escape (torch writes with ``ensure_ascii=True``).
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import zipfile
from pathlib import Path

import torch
from _sample_common import REPO_ROOT, PathRewriter, check_clean, machine_prefixes, rewrite_zip
from torch import nn
from torch.fx.traceback import annotate_fn

DIM = 16
HEADS = 2
FF = 32
SEQ = 6

# -- helper functions: a call chain three deep, shared by every block ----------------
#
# Non-strict export keeps only the frames of functions named ``forward`` in a
# node's stack trace, plus the functions registered with ``annotate_fn``
# (torch.fx.proxy._filter_traceback_frames); the decorators below keep the
# helper chain visible. Under strict=True they also fill ``metadata["custom"]``.


@annotate_fn({"region": "gelu"})
def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    inner = 0.7978845608 * (x + 0.044715 * x * x * x)
    return 0.5 * x * (1.0 + torch.tanh(inner))  # ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))


@annotate_fn({"region": "activation"})
def _activation(x: torch.Tensor) -> torch.Tensor:
    return _gelu_tanh(x)


@annotate_fn({"region": "gate"})
def _gated(x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    return _activation(x) * torch.sigmoid(gate)


def _split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    batch, seq, dim = x.shape
    return x.reshape(batch, seq, heads, dim // heads).transpose(1, 2)


def _merge_heads(x: torch.Tensor) -> torch.Tensor:
    batch, heads, seq, head_dim = x.shape
    return x.transpose(1, 2).reshape(batch, seq, heads * head_dim)


@annotate_fn({"region": "scores"})
def _scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))


@annotate_fn({"region": "attention"})
def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    weights = torch.softmax(_scores(q, k), dim=-1)
    return weights @ v


# -- modules ------------------------------------------------------------------------


class SelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        out = _attend(_split_heads(q, HEADS), _split_heads(k, HEADS), _split_heads(v, HEADS))
        return self.proj(_merge_heads(out))


class GatedActivation(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        value, gate = x.chunk(2, dim=-1)
        return _gated(value, gate)


class FeedForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(DIM, 2 * FF), GatedActivation(), nn.Linear(FF, DIM))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(DIM)
        self.attn = SelfAttention()
        self.norm2 = nn.LayerNorm(DIM)
        self.ff = FeedForward()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.ff(self.norm2(x))


class TinyTransformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(8, DIM)
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(DIM, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.embed(x)))


# -- export -------------------------------------------------------------------------


def export(strict: bool, workdir: Path, name: str) -> tuple[Path, str]:
    """Export the model; return the archive path and its ``models/*.json`` member name."""
    torch.manual_seed(0)
    model = TinyTransformer().eval()
    example = (torch.randn(1, SEQ, 8),)
    program = torch.export.export(model, example, strict=strict)
    path = workdir / f"{name}.pt2"
    torch.export.save(program, path)
    with zipfile.ZipFile(path) as archive:
        members = [n for n in archive.namelist() if "/models/" in n and n.endswith(".json")]
    if len(members) != 1:
        raise SystemExit(f"expected one models/*.json in {path}, found {members}")
    return path, members[0]


def check_reencode(label: str, raw: bytes) -> None:
    again = json.dumps(json.loads(raw), allow_nan=False).encode("utf-8")
    if again != raw:
        raise SystemExit(f"{label}: json.dumps(json.loads(...)) does not give back the bytes")
    print(f"[{label}] json.dumps(json.loads(b), allow_nan=False) reproduces all {len(raw)} bytes")


def summarize(label: str, raw: bytes) -> None:
    doc = json.loads(raw)
    nodes = doc["graph_module"]["graph"]["nodes"]
    orders = sorted({tuple(n["metadata"]) for n in nodes})
    depth = max(n["metadata"].get("stack_trace", "").count('File "') for n in nodes)
    print(
        f"[{label}] schema {doc['schema_version']}, {len(nodes)} nodes, "
        f"{len(doc['graph_module']['graph']['inputs'])} graph inputs, deepest stack {depth} frames"
    )
    for order in orders:
        print(f"[{label}]   metadata keys: {', '.join(order)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=REPO_ROOT / "src" / "tracepack" / "data" / "sample",
        help="directory for tiny_transformer.pt2 and model.json",
    )
    parser.add_argument(
        "--strict-out",
        type=Path,
        default=REPO_ROOT / "tests" / "data" / "torch" / "export_strict_model.json",
        help="where the strict=True model.json goes",
    )
    parser.add_argument("--no-strict", action="store_true", help="skip the strict=True export")
    args = parser.parse_args()
    if torch.__version__.split("+")[0] != "2.13.0":
        print(f"warning: samples are documented for torch 2.13.0, this is {torch.__version__}")

    rewriter = PathRewriter(machine_prefixes(Path(torch.__file__).resolve().parent.parent))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        path, member = export(False, work, "tiny_transformer")
        with zipfile.ZipFile(path) as archive:
            raw = archive.read(member)
            for info in archive.infolist():
                if info.filename != member and info.filename.endswith(".json"):
                    check_clean(info.filename, archive.read(info.filename))
        check_reencode("torch's model.json", raw)
        clean = rewriter.bytes(raw)
        rewriter.report("model.json")
        check_clean("model.json", clean)
        check_reencode("rewritten model.json", clean)
        summarize("model.json", clean)

        args.out.mkdir(parents=True, exist_ok=True)
        pt2 = args.out / "tiny_transformer.pt2"
        rewrite_zip(path, pt2, {member: clean})
        (args.out / "model.json").write_bytes(clean)
        check_clean(str(pt2), pt2.read_bytes())
        loaded = torch.export.load(pt2)
        with zipfile.ZipFile(pt2) as archive:
            assert archive.read(member) == clean
        print(f"[{pt2.name}] torch.export.load OK: {len(loaded.graph.nodes)} fx nodes")
        for out in (pt2, args.out / "model.json"):
            print(f"wrote {out.relative_to(REPO_ROOT)} ({out.stat().st_size} bytes)")

        if not args.no_strict:
            path, member = export(True, work, "tiny_transformer_strict")
            with zipfile.ZipFile(path) as archive:
                raw = archive.read(member)
            check_reencode("torch's strict model.json", raw)
            clean = rewriter.bytes(raw)
            rewriter.report("strict model.json")
            check_clean("strict model.json", clean)
            check_reencode("rewritten strict model.json", clean)
            summarize("strict model.json", clean)
            args.strict_out.parent.mkdir(parents=True, exist_ok=True)
            args.strict_out.write_bytes(clean)
            print(f"wrote {args.strict_out.relative_to(REPO_ROOT)} ({args.strict_out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
