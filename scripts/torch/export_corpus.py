"""Export a corpus of real models with torch 2.13 for tracepack's torch tests and benchmarks.

Run with a Python that has ``torch==2.13.0`` (tracepack itself never needs torch)::

    python scripts/torch/export_corpus.py OUT_DIR [NAME ...] [--list]

Every model is exported with torch's own APIs and written to ``OUT_DIR``:

==================  ================================================================================
``transformer``     4 pre-norm transformer blocks (attention, gated MLP, helper chain): non-strict
``transformer_strict``  the same with ``strict=True`` (TorchDynamo traces with carets, ``from_node``)
``cnn``             a small ResNet (conv, batch norm, residual blocks, pooling, classifier head)
``cond``            data-dependent control flow with ``torch.cond`` (nested true/false graphs)
``dynamic``         dynamic batch and sequence sizes (``torch.export.Dim``; symbolic shapes)
``helpers``         helper functions calling each other 12 deep, ``strict=True`` (every frame kept)
``mid``             a 32-block transformer: about 1,000 nodes
``big``             a 320-block transformer: more than 10,000 nodes
``size_N[_dyn]``    the size ladder of the benchmark (``bench_torch.py``): the transformer with
                    :data:`SIZES` blocks (about 10, 30, 60, 130, 450, 1k and 10k nodes), with
                    static shapes and, ``_dyn``, dynamic batch and sequence sizes
==================  ================================================================================

each as ``<name>.pt2`` (``torch.export.save``), and the TorchScript archives
``cnn_script.pt`` (``torch.jit.script``, string-table ``debug_pkl``),
``cnn_script_legacy.pt`` (legacy ``debug_pkl``), ``transformer_traced.pt``
(``torch.jit.trace``) and ``transformer_lite.ptl`` (lite interpreter with
mobile debug info), plus ``manifest.json`` (name, file, kind, node count).

As for the committed samples (``_sample_common.py``), every machine path in the
programs and debug pickles is replaced by a neutral one before writing, and
``torch.export.load`` / ``torch.jit.load`` must read each file back. The
``tests/data/torch/corpus/`` folder holds the small ones (``--small`` writes just
those); the tests and ``benchmarks/bench_torch.py`` export ``big`` themselves.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import tempfile
import time
import warnings
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from _sample_common import REPO_ROOT, PathRewriter, check_clean, copy_zip, machine_prefixes
from torch import nn
from torch.export import Dim

annotate_fn = getattr(torch.fx.traceback, "annotate_fn", None)  # older torch: none (helpers unmarked)

sys.path[:0] = [str(REPO_ROOT / "src"), str(REPO_ROOT / "generated" / "python")]

from tracepack.torch.torchscript.debug_pkl import parse_debug_pkl, write_debug_pkl  # noqa: E402 - after sys.path

#: The models small enough to commit (each well under 300 kB).
SMALL = ("transformer", "transformer_strict", "cnn", "cond", "dynamic", "helpers")

# -- transformer ------------------------------------------------------------------------------


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def _gated(x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    return _gelu_tanh(x) * torch.sigmoid(gate)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    scores = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    return torch.softmax(scores, dim=-1) @ v


@contextlib.contextmanager
def _annotated() -> Iterator[None]:
    """Register the helpers with ``annotate_fn`` while exporting: non-strict export then keeps their
    frames in stack traces (it keeps only ``forward`` frames otherwise). TorchScript, which cannot
    compile the wrappers, sees the plain functions."""
    plain = {name: globals()[name] for name in ("_gelu_tanh", "_gated", "_attend")}
    try:
        for name, fn in plain.items() if annotate_fn is not None else ():
            globals()[name] = annotate_fn({"region": name.strip("_")})(fn)
        yield
    finally:
        globals().update(plain)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        qkv = self.qkv(x).reshape(batch, seq, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        out = _attend(qkv[0], qkv[1], qkv[2])
        return self.proj(out.transpose(1, 2).reshape(batch, seq, dim))


class GatedMLP(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(2 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        value, gate = self.up(x).chunk(2, dim=-1)
        return self.down(_gated(value, gate))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = GatedMLP(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Transformer(nn.Module):
    def __init__(self, layers: int, dim: int = 16, heads: int = 2, vocab: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.Sequential(*(Block(dim, heads) for _ in range(layers)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.blocks(self.embed(tokens))))


# -- CNN ------------------------------------------------------------------------------------


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class SmallResNet(nn.Module):
    def __init__(self, width: int = 4, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.layer1 = nn.Sequential(BasicBlock(width, width, 1), BasicBlock(width, width, 1))
        self.layer2 = nn.Sequential(BasicBlock(width, 2 * width, 2), BasicBlock(2 * width, 2 * width, 1))
        self.layer3 = nn.Sequential(BasicBlock(2 * width, 4 * width, 2), BasicBlock(4 * width, 4 * width, 1))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4 * width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer3(self.layer2(self.layer1(self.stem(x))))
        return self.fc(torch.flatten(self.pool(x), 1))


# -- control flow -----------------------------------------------------------------------------


class Branchy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Linear(8, 8)
        self.positive = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
        self.negative = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.encoder(x)

        def when_positive(h: torch.Tensor) -> torch.Tensor:
            return self.positive(h) * 2.0

        def when_negative(h: torch.Tensor) -> torch.Tensor:
            return torch.sigmoid(self.negative(h)) - 1.0

        out = torch.cond(h.sum() > 0, when_positive, when_negative, (h,))
        return out + h


# -- dynamic shapes -----------------------------------------------------------------------------


class Pooler(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Block(16, 2)
        self.score = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.block(x)
        weights = torch.softmax(self.score(h).squeeze(-1), dim=-1)
        return (weights.unsqueeze(-1) * h).sum(dim=1) / x.shape[1]


# -- deep helper chains -----------------------------------------------------------------------


def _h12(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x) + x.mean(dim=-1, keepdim=True)


def _h11(x: torch.Tensor) -> torch.Tensor:
    return _h12(x * 1.5)


def _h10(x: torch.Tensor) -> torch.Tensor:
    return _h11(x - 0.25)


def _h9(x: torch.Tensor) -> torch.Tensor:
    return _h10(torch.relu(x))


def _h8(x: torch.Tensor) -> torch.Tensor:
    return _h9(x) * torch.sigmoid(x)


def _h7(x: torch.Tensor) -> torch.Tensor:
    return _h8(x + 1.0)


def _h6(x: torch.Tensor) -> torch.Tensor:
    return _h7(x.flip(-1))


def _h5(x: torch.Tensor) -> torch.Tensor:
    return _h6(x) + _h9(x)


def _h4(x: torch.Tensor) -> torch.Tensor:
    return _h5(x / 3.0)


def _h3(x: torch.Tensor) -> torch.Tensor:
    return _h4(x.clamp(-2.0, 2.0))


def _h2(x: torch.Tensor) -> torch.Tensor:
    return _h3(x) - _h10(x)


def _h1(x: torch.Tensor) -> torch.Tensor:
    return _h2(x.exp().log1p())


class Helpers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(8, 8)
        self.out = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(_h1(self.inp(x)))


# -- export -----------------------------------------------------------------------------------


def _tokens(batch: int, seq: int) -> torch.Tensor:
    return torch.randint(0, 32, (batch, seq))


def exported(name: str) -> Any:
    """``torch.export.export`` of the corpus model ``name`` (deterministic weights)."""
    with _annotated():
        return _export(name)


def _export(name: str) -> Any:
    torch.manual_seed(0)
    if name in ("transformer", "transformer_strict"):
        return torch.export.export(Transformer(4).eval(), (_tokens(2, 8),), strict=name.endswith("strict"))
    if name in LADDER:
        return _ladder(name)
    if name == "big":
        return torch.export.export(Transformer(320, dim=8, heads=2).eval(), (_tokens(1, 4),))
    if name == "mid":
        return torch.export.export(Transformer(32, dim=8, heads=2).eval(), (_tokens(1, 4),))
    if name == "cnn":
        return torch.export.export(SmallResNet().eval(), (torch.randn(1, 3, 16, 16),))
    if name == "cond":
        return torch.export.export(Branchy().eval(), (torch.randn(4, 8),))
    if name == "dynamic":
        batch, seq = Dim("batch", min=1, max=64), Dim("seq", min=2, max=512)
        return torch.export.export(Pooler().eval(), (torch.randn(3, 7, 16),), dynamic_shapes={"x": {0: batch, 1: seq}})
    if name == "helpers":
        return torch.export.export(Helpers().eval(), (torch.randn(2, 8),), strict=True)
    raise SystemExit(f"unknown corpus model {name!r}")


#: The benchmark's size ladder: name -> (blocks, width), about 10, 30, 60, 130, 450, 1k, 10k nodes.
SIZES: dict[str, tuple[int, int]] = {
    "size_10": (0, 16),  # Tiny, not a transformer
    "size_30": (1, 16),
    "size_60": (2, 16),
    "size_130": (4, 16),
    "size_450": (14, 16),
    "size_1k": (32, 16),
    "size_10k": (320, 8),
}
LADDER = tuple(n for name in SIZES for n in (name, f"{name}_dyn"))


class Tiny(nn.Module):
    """The ladder's smallest rung (about 10 nodes): embedding, one residual MLP, a head."""

    def __init__(self, dim: int = 16, vocab: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 2 * dim)
        self.down = nn.Linear(2 * dim, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        x = x + self.down(torch.relu(self.up(self.norm(x))))
        return torch.log_softmax(self.head(x), dim=-1)


def _ladder(name: str) -> Any:
    blocks, width = SIZES[name.removesuffix("_dyn")]
    # Seeds and input shapes differ from the corpus entries above (and the dictionary's training
    # models are other architectures altogether: dictionary_models.py).
    torch.manual_seed(7 + blocks)
    model = (Transformer(blocks, dim=width, heads=2) if blocks else Tiny(width)).eval()
    tokens = torch.randint(0, 32, (3, 6))
    if not name.endswith("_dyn"):
        return torch.export.export(model, (tokens,))
    batch, seq = Dim("batch", min=1, max=128), Dim("seq", min=2, max=1024)
    return torch.export.export(model, (tokens,), dynamic_shapes={"tokens": {0: batch, 1: seq}})


EXPORTS = (*SMALL, "mid", "big")


def _scripted(name: str) -> tuple[Any, bool, bool]:
    """(module, string-table debug_pkl, lite) for a TorchScript corpus entry."""
    torch.manual_seed(0)
    if name in ("cnn_script", "cnn_script_legacy"):
        return torch.jit.script(SmallResNet().eval()), name == "cnn_script", False
    if name == "transformer_traced":
        return torch.jit.trace(Transformer(2).eval(), (_tokens(1, 8),), check_trace=False), True, False
    if name == "transformer_lite":
        return torch.jit.script(Transformer(2).eval()), True, True
    raise SystemExit(f"unknown corpus model {name!r}")


SCRIPTS = {"cnn_script": ".pt", "cnn_script_legacy": ".pt", "transformer_traced": ".pt", "transformer_lite": ".ptl"}


def _save_script(module: Any, path: Path, string_table: bool, lite: bool) -> None:
    torch._C._set_should_use_format_with_string_table(string_table)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if lite:
                module._save_for_lite_interpreter(str(path), _save_mobile_debug_info=True)
            else:
                torch.jit.save(module, str(path))
    finally:
        torch._C._set_should_use_format_with_string_table(True)


def _neutral_debug_pkl(name: str, raw: bytes, rewriter: PathRewriter) -> bytes:
    parsed = parse_debug_pkl(raw, source=name)
    rows = [
        dataclasses.replace(
            row, text=rewriter.text(row.text), filename=None if row.filename is None else rewriter.text(row.filename)
        )
        for row in parsed.rows
    ]
    return write_debug_pkl(rows, parsed.form, sources=parsed.sources)


def _is_program(member: str) -> bool:
    """The program of either archive layout: ``<top>/models/<model>.json`` (torch 2.8+) or the flat
    ``serialized_exported_program.json`` (torch 2.6 and 2.7)."""
    return ("/models/" in member and member.endswith(".json")) or member == "serialized_exported_program.json"


def write_export(name: str, out: Path, work: Path, rewriter: PathRewriter) -> dict[str, Any]:
    start = time.perf_counter()
    program = exported(name)
    raw_path = work / f"{name}.pt2"
    torch.export.save(program, raw_path)
    with zipfile.ZipFile(raw_path) as archive:
        (member,) = [n for n in archive.namelist() if _is_program(n)]
        raw = archive.read(member)
    clean = rewriter.bytes(raw)
    check_clean(f"{name} model.json", clean)
    if json.dumps(json.loads(clean)).encode() != clean:
        raise SystemExit(f"{name}: model.json is not in json.dumps' encoding")
    dst = out / f"{name}.pt2"
    copy_zip(raw_path, dst, {member: clean})
    check_clean(dst.name, dst.read_bytes())
    torch.export.load(dst)
    nodes = len(json.loads(clean)["graph_module"]["graph"]["nodes"])
    took = time.perf_counter() - start
    print(f"[{dst.name}] {nodes} nodes, model.json {len(clean)} bytes, {dst.stat().st_size} bytes ({took:.1f} s)")
    return {"name": name, "file": dst.name, "kind": "pt2", "nodes": nodes, "model_json_bytes": len(clean)}


def write_script(name: str, out: Path, work: Path, rewriter: PathRewriter) -> dict[str, Any]:
    module, string_table, lite = _scripted(name)
    raw_path = work / f"{name}{SCRIPTS[name]}"
    _save_script(module, raw_path, string_table, lite)
    replace: dict[str, bytes] = {}
    with zipfile.ZipFile(raw_path) as archive:
        for member in archive.namelist():
            if member.endswith(".debug_pkl") and "/code/" in member:
                replace[member] = _neutral_debug_pkl(member, archive.read(member), rewriter)
    dst = out / raw_path.name
    copy_zip(raw_path, dst, replace)
    check_clean(dst.name, dst.read_bytes())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.jit.load(str(dst))
    print(f"[{dst.name}] {len(replace)} debug_pkl files, {dst.stat().st_size} bytes")
    return {"name": name, "file": dst.name, "kind": "torchscript", "debug_pkls": len(replace)}


def export_corpus(out: Path, names: list[str]) -> list[dict[str, Any]]:
    """Write the named corpus entries to ``out``; return their manifest rows."""
    out.mkdir(parents=True, exist_ok=True)
    rewriter = PathRewriter(machine_prefixes(Path(torch.__file__).resolve().parent.parent))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            writer: Callable[..., dict[str, Any]] = write_script if name in SCRIPTS else write_export
            rows.append(writer(name, out, Path(tmp), rewriter))
    manifest = out / "manifest.json"
    old = json.loads(manifest.read_text()) if manifest.exists() else []
    merged = {r["name"]: r for r in old} | {r["name"]: r for r in rows}
    manifest.write_text(json.dumps(sorted(merged.values(), key=lambda r: r["name"]), indent=1) + "\n")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to write the corpus to")
    parser.add_argument("names", nargs="*", help=f"entries to write (default: all of {[*EXPORTS, *SCRIPTS]})")
    parser.add_argument("--small", action="store_true", help="only the entries small enough to commit")
    args = parser.parse_args()
    if torch.__version__.split("+")[0] != "2.13.0":
        print(f"warning: the corpus is documented for torch 2.13.0, this is {torch.__version__}")
    names = args.names or ([*SMALL, *SCRIPTS] if args.small else [*EXPORTS, *SCRIPTS])
    export_corpus(args.out, names)


if __name__ == "__main__":
    main()
