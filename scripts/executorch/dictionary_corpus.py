"""Make the training corpus of the built-in ExecuTorch zstd dictionary (run by hand, with executorch).

Needs torch 2.13.0 and executorch 1.5.1 (the environment of ``make_samples.py``, not the project's, not
CI)::

    make executorch-dictionary ET_VENV=../et-venv

Each model of ``scripts/torch/dictionary_models.py`` (the torch dictionary's training models: MLPs, VGG-style
conv nets, an unrolled GRU, MLP-Mixers, torch's TransformerEncoder, a small U-Net), plus the fourteen of
:data:`EXTRA_SOURCE` below (an embedding bag, a 1-d conv tagger, a GLU mixer, a hand-written attention head,
a 1-d conv audio classifier, a pre-norm residual stack over embeddings, a depthwise-separable conv block, an
unrolled LSTM, a two-expert router, token and position embeddings with attention, an autoencoder, residual
conv blocks, max-pooled word embeddings, RMS-norm SwiGLU layers: edge programs with embeddings and other
ops), is exported, lowered with ``to_edge`` and ``to_executorch`` (and, up to :data:`DELEGATE_MAX_NODES`
edge nodes, once more with the XNNPACK partitioner, so that delegate maps are seen), and its ETRecord
written to the corpus folder
(``.bench/executorch-dictionary-corpus``) with only the members tracepack reads (the pickled weights are
dropped). None of them is the model of the committed samples or of the benchmark (``tinylm.py`` of
``make_samples.py``); ``tests/executorch/test_dictionary.py`` checks that no source line of it is in the
dictionary.

As in ``make_samples.py``, the export runs from ``/home/user/project`` (a link to a temporary folder
holding the models' source and a link to the environment), so the recorded paths are the ones an
ExecuTorch user's project has, with nothing to rewrite; memory addresses a strict export records (module
keys, graph ids) are numbered in order of appearance, as ``train_dictionary.py`` does. The dictionary
itself is trained from this folder by ``scripts/executorch/train_dictionary.py`` in the project's own
environment (``make executorch-dictionary`` runs both).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / ".bench" / "executorch-dictionary-corpus"
PROJECT = Path("/home/user/project")
#: ETRecord members kept (everything tracepack reads; weights are pickles it never reads).
_KEEP_SUFFIXES = ("_state_dict", "_constants", "_example_inputs")
#: A model whose edge program has at most this many nodes is lowered a second time, with the XNNPACK
#: partitioner (delegate calls and their maps in the ETRecord); ``--no-delegate`` leaves those out. (Up to
#: 100 nodes: the delegated variants of the larger models made the committed samples compress worse.)
DELEGATE_MAX_NODES = 100

EXTRA_SOURCE = '''\
import torch
from torch import nn


class BagClassifier(nn.Module):
    """Mean of token embeddings, two dense layers."""

    def __init__(self, vocab: int = 40, width: int = 10) -> None:
        super().__init__()
        self.table = nn.Embedding(vocab, width)
        self.hidden = nn.Linear(width, width)
        self.logits = nn.Linear(width, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pooled = self.table(ids).mean(dim=1)
        return torch.log_softmax(self.logits(torch.tanh(self.hidden(pooled))), dim=-1)


class ConvTagger(nn.Module):
    """Embeddings, a 1-d convolution over the sequence, a tag per position."""

    def __init__(self, vocab: int = 30, width: int = 8, tags: int = 5) -> None:
        super().__init__()
        self.vocab_embedding = nn.Embedding(vocab, width)
        self.context = nn.Conv1d(width, width, kernel_size=3, padding=1)
        self.norm = nn.LayerNorm(width)
        self.tagger = nn.Linear(width, tags)

    def forward(self, seq: torch.Tensor) -> torch.Tensor:
        e = self.vocab_embedding(seq)
        c = torch.relu(self.context(e.transpose(1, 2))).transpose(1, 2)
        return torch.softmax(self.tagger(self.norm(e + c)), dim=-1)


class GatedMixer(nn.Module):
    """A GLU-gated projection with a skip connection and a norm, mean-pooled into classes."""

    def __init__(self, width: int = 12) -> None:
        super().__init__()
        self.widen = nn.Linear(width, 2 * width)
        self.narrow = nn.Linear(width, width)
        self.post_norm = nn.LayerNorm(width)
        self.classes = nn.Linear(width, 3)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        gated = nn.functional.glu(self.widen(feats), dim=-1)
        return self.classes(self.post_norm(feats + self.narrow(gated)).mean(dim=1))


class HandAttention(nn.Module):
    """One attention head written out: projections, scaled scores, softmax, weighted values."""

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.query = nn.Linear(width, width)
        self.key = nn.Linear(width, width)
        self.value = nn.Linear(width, width)
        self.mix = nn.Linear(width, width)
        self.scale = width**-0.5

    def forward(self, items: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(self.query(items), self.key(items).transpose(-2, -1)) * self.scale
        return self.mix(torch.matmul(torch.softmax(scores, dim=-1), self.value(items)))


class AudioNet(nn.Module):
    """1-d convolutions, batch norm and pooling over a waveform, then a linear classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.front = nn.Sequential(nn.Conv1d(1, 4, 5, stride=2), nn.BatchNorm1d(4), nn.ReLU(), nn.MaxPool1d(2))
        self.back = nn.Sequential(nn.Conv1d(4, 8, 3), nn.BatchNorm1d(8), nn.ReLU(), nn.AdaptiveAvgPool1d(1))
        self.fc = nn.Linear(8, 6)

    def forward(self, wave: torch.Tensor) -> torch.Tensor:
        return self.fc(self.back(self.front(wave)).flatten(1))


class PreNormStack(nn.Module):
    """Token embeddings through pre-norm residual MLP layers (GELU), tied to a vocabulary projection."""

    def __init__(self, vocab: int = 24, width: int = 6, depth: int = 3) -> None:
        super().__init__()
        self.lookup = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(
            nn.ModuleDict(
                {"ln": nn.LayerNorm(width), "up": nn.Linear(width, 2 * width), "down": nn.Linear(2 * width, width)}
            )
            for _ in range(depth)
        )
        self.to_vocab = nn.Linear(width, vocab)

    def forward(self, chars: torch.Tensor) -> torch.Tensor:
        h = self.lookup(chars)
        for layer in self.layers:
            h = h + layer["down"](nn.functional.gelu(layer["up"](layer["ln"](h))))
        return torch.log_softmax(self.to_vocab(h), dim=-1)


class SeparableConv(nn.Module):
    """Depthwise and pointwise convolutions (a MobileNet-style block), hard-swish, global pooling."""

    def __init__(self, chans: int = 6) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, chans, 3, padding=1)
        self.depthwise = nn.Conv2d(chans, chans, 3, padding=1, groups=chans)
        self.pointwise = nn.Conv2d(chans, 2 * chans, 1)
        self.bn = nn.BatchNorm2d(2 * chans)
        self.head = nn.Linear(2 * chans, 4)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        z = nn.functional.hardswish(self.bn(self.pointwise(self.depthwise(self.stem(pixels)))))
        return self.head(z.mean(dim=(2, 3)))


class LSTMUnrolled(nn.Module):
    """An LSTM cell written out by hand, unrolled over a fixed number of steps."""

    def __init__(self, steps: int = 3, size: int = 5) -> None:
        super().__init__()
        self.steps = steps
        self.input_map = nn.Linear(size, 4 * size)
        self.state_map = nn.Linear(size, 4 * size, bias=False)

    def forward(self, series: torch.Tensor) -> torch.Tensor:
        hx = torch.zeros_like(series[:, 0])
        cx = torch.zeros_like(series[:, 0])
        for t in range(self.steps):
            i, f, g, o = (self.input_map(series[:, t]) + self.state_map(hx)).chunk(4, dim=-1)
            cx = torch.sigmoid(f) * cx + torch.sigmoid(i) * torch.tanh(g)
            hx = torch.sigmoid(o) * torch.tanh(cx)
        return hx


class TwoExperts(nn.Module):
    """A softmax router mixing two expert MLPs."""

    def __init__(self, width: int = 10) -> None:
        super().__init__()
        self.router = nn.Linear(width, 2)
        self.expert_a = nn.Sequential(nn.Linear(width, width), nn.SiLU())
        self.expert_b = nn.Sequential(nn.Linear(width, width), nn.Tanh())

    def forward(self, x_in: torch.Tensor) -> torch.Tensor:
        weights = torch.softmax(self.router(x_in), dim=-1)
        return weights[..., :1] * self.expert_a(x_in) + weights[..., 1:] * self.expert_b(x_in)


class PositionalEncoder(nn.Module):
    """Token and position embeddings, a norm, one hand-written attention head and a feed-forward layer."""

    def __init__(self, vocab: int = 20, width: int = 8, length: int = 6) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(length, width)
        self.norm_in = nn.LayerNorm(width)
        self.head = HandAttention(width)
        self.norm_ff = nn.LayerNorm(width)
        self.ff = nn.Sequential(nn.Linear(width, 3 * width), nn.GELU(), nn.Linear(3 * width, width))
        self.register_buffer("positions", torch.arange(length))

    def forward(self, text: torch.Tensor) -> torch.Tensor:
        h = self.norm_in(self.tok(text) + self.pos(self.positions))
        h = h + self.head(h)
        return h + self.ff(self.norm_ff(h))


class AutoEncoder(nn.Module):
    """An encoder and a decoder of dense layers, sigmoid output."""

    def __init__(self, size: int = 16, code: int = 4) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(size, 8), nn.ReLU(), nn.Linear(8, code))
        self.decoder = nn.Sequential(nn.Linear(code, 8), nn.ReLU(), nn.Linear(8, size), nn.Sigmoid())

    def forward(self, sample: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(sample))


class BasicBlockNet(nn.Module):
    """A stem and two residual basic blocks (conv, batch norm, ReLU, conv, batch norm, skip)."""

    def __init__(self, chans: int = 4) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, chans, 3, padding=1), nn.BatchNorm2d(chans), nn.ReLU())
        self.blocks = nn.ModuleList(
            nn.Sequential(
                nn.Conv2d(chans, chans, 3, padding=1),
                nn.BatchNorm2d(chans),
                nn.ReLU(),
                nn.Conv2d(chans, chans, 3, padding=1),
                nn.BatchNorm2d(chans),
            )
            for _ in range(2)
        )
        self.logits = nn.Linear(chans, 10)

    def forward(self, digits: torch.Tensor) -> torch.Tensor:
        z = self.stem(digits)
        for block in self.blocks:
            z = torch.relu(z + block(z))
        return self.logits(torch.flatten(nn.functional.adaptive_avg_pool2d(z, 1), 1))


class MaxPoolText(nn.Module):
    """Word embeddings max-pooled over the sentence, dropout, a dense layer and a softmax."""

    def __init__(self, words: int = 50, width: int = 7) -> None:
        super().__init__()
        self.words = nn.Embedding(words, width)
        self.drop = nn.Dropout(0.2)
        self.dense = nn.Linear(width, 3)

    def forward(self, sentence: torch.Tensor) -> torch.Tensor:
        pooled = self.words(sentence).max(dim=1).values
        return torch.softmax(self.dense(self.drop(pooled)), dim=-1)


class RMSSwiGLU(nn.Module):
    """Hand-written RMS norms and SwiGLU feed-forward layers with residual connections."""

    def __init__(self, width: int = 8, depth: int = 2) -> None:
        super().__init__()
        self.scales = nn.ParameterList(nn.Parameter(torch.ones(width)) for _ in range(depth))
        self.gates = nn.ModuleList(nn.Linear(width, 2 * width, bias=False) for _ in range(depth))
        self.values = nn.ModuleList(nn.Linear(width, 2 * width, bias=False) for _ in range(depth))
        self.outs = nn.ModuleList(nn.Linear(2 * width, width, bias=False) for _ in range(depth))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        for scale, gate, value, out in zip(self.scales, self.gates, self.values, self.outs, strict=True):
            normed = hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + 1e-6) * scale
            hidden = hidden + out(nn.functional.silu(gate(normed)) * value(normed))
        return hidden
'''

_OBJECT_ID = re.compile(rb"(?<![0-9.])[1-9][0-9]{12,15}(?![0-9.])")
_ADDRESS = re.compile(rb"0x[0-9a-f]{9,16}\b")


def _stable_ids(data: bytes, ids: dict[bytes, bytes], addresses: dict[bytes, bytes]) -> bytes:
    data = _OBJECT_ID.sub(lambda m: ids.setdefault(m.group(), b"%d" % (140000000000000 + len(ids))), data)
    return _ADDRESS.sub(lambda m: addresses.setdefault(m.group(), b"0x%x" % (0x7F0000000000 + len(addresses))), data)


def _models() -> list[tuple[str, Any]]:
    import torch
    from dictionary_models import MODELS  # type: ignore[import-not-found]  # copied into the project folder
    from et_extra_models import (  # type: ignore[import-not-found]
        AudioNet,
        AutoEncoder,
        BagClassifier,
        BasicBlockNet,
        ConvTagger,
        GatedMixer,
        HandAttention,
        LSTMUnrolled,
        MaxPoolText,
        PositionalEncoder,
        PreNormStack,
        RMSSwiGLU,
        SeparableConv,
        TwoExperts,
    )
    from torch.export import Dim

    def bag() -> tuple[Any, ...]:
        return BagClassifier(), (torch.randint(0, 40, (3, 7)),), None, False

    def tagger() -> tuple[Any, ...]:
        return ConvTagger(), (torch.randint(0, 30, (2, 9)),), {"seq": {0: Dim("b", min=1, max=64)}}, False

    def extra(cls: Any, make_input: Any, shapes: Any = None) -> Any:
        return lambda: (cls(), (make_input(),), shapes, False)  # built after the seed is set

    return [
        *MODELS,
        ("bag", bag),
        ("tagger_dyn", tagger),
        ("gated", extra(GatedMixer, lambda: torch.randn(2, 5, 12))),
        ("attention", extra(HandAttention, lambda: torch.randn(3, 6, 8))),
        ("audio", extra(AudioNet, lambda: torch.randn(2, 1, 64))),
        ("prenorm_dyn", extra(PreNormStack, lambda: torch.randint(0, 24, (2, 7)), {"chars": {0: Dim("b", max=32)}})),
        ("separable", extra(SeparableConv, lambda: torch.randn(2, 3, 12, 12))),
        ("lstm", extra(LSTMUnrolled, lambda: torch.randn(2, 3, 5))),
        ("experts_dyn", extra(TwoExperts, lambda: torch.randn(4, 10), {"x_in": {0: Dim("n", max=64)}})),
        ("positional", extra(PositionalEncoder, lambda: torch.randint(0, 20, (2, 6)))),
        ("autoencoder", extra(AutoEncoder, lambda: torch.rand(3, 16))),
        ("basicblocks", extra(BasicBlockNet, lambda: torch.randn(2, 1, 8, 8))),
        ("maxpool_text", extra(MaxPoolText, lambda: torch.randint(0, 50, (2, 9)))),
        ("rms_swiglu", extra(RMSSwiGLU, lambda: torch.randn(2, 5, 8))),
    ]


def _nodes(record: Path) -> int:
    """Edge nodes of a corpus ETRecord."""
    import json

    with zipfile.ZipFile(record) as z:
        return sum(
            len(json.loads(z.read(n))["graph_module"]["graph"]["nodes"])
            for n in z.namelist()
            if n.startswith("edge_dialect_exported_program/")
        )


def _record(path: Path, out: Path) -> int:
    """Copy the ETRecord's JSON members (no weights) to ``out``, addresses numbered; its edge node count."""
    import json

    ids: dict[bytes, bytes] = {}
    addresses: dict[bytes, bytes] = {}
    nodes = 0
    with zipfile.ZipFile(path) as z, zipfile.ZipFile(out, "w") as w:
        for info in z.infolist():
            if info.filename.endswith(_KEEP_SUFFIXES):
                continue
            data = _stable_ids(z.read(info), ids, addresses)
            if info.filename.startswith("edge_dialect_exported_program/"):
                nodes += len(json.loads(data)["graph_module"]["graph"]["nodes"])
            w.writestr(zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return nodes


def inside(out: Path, *, delegate: bool = True) -> None:
    import warnings

    import torch
    from executorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower

    out.mkdir(parents=True, exist_ok=True)
    for name, build in _models():
        torch.manual_seed(1234)
        module, args, shapes, strict = build()
        plain_nodes = 0
        for label, delegated in [(name, False), (name + "_xnnpack", True)]:
            if delegated and not (delegate and 0 < plain_nodes <= DELEGATE_MAX_NODES):
                continue
            target = out / f"{label}.etrecord"
            if target.exists():
                plain_nodes = plain_nodes or _nodes(target)
                continue
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ep = torch.export.export(module.eval(), args, dynamic_shapes=shapes, strict=strict)
                    if delegated:
                        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

                        edge = to_edge_transform_and_lower(
                            ep, partitioner=[XnnpackPartitioner()], generate_etrecord=True
                        )
                    else:
                        edge = to_edge(ep, generate_etrecord=True)
                    et = edge.to_executorch(ExecutorchBackendConfig(emit_stacktrace=False))
                    with tempfile.TemporaryDirectory() as tmp:
                        raw = Path(tmp) / "r.etrecord"
                        et.get_etrecord().save(str(raw))
                        nodes = _record(raw, target)
                        plain_nodes = plain_nodes or nodes
            except Exception as exc:  # a model ExecuTorch cannot lower is left out (printed, deterministic)
                print(f"[{label}] skipped: {type(exc).__name__}: {str(exc)[:200]}")
                continue
            print(f"[{label}] {nodes} edge nodes, {target.stat().st_size} bytes")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(CORPUS))
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-delegate", action="store_true", help="no XNNPACK-lowered variants")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    if args.inside:
        sys.path.insert(0, str(PROJECT))
        inside(out, delegate=not args.no_delegate)
        return 0
    if PROJECT.exists() or PROJECT.is_symlink():
        raise SystemExit(f"{PROJECT} exists; this script links it to a temporary folder and needs it free")
    with tempfile.TemporaryDirectory(prefix="et-dict-") as tmp:
        work = Path(tmp)
        shutil.copy(ROOT / "scripts" / "torch" / "dictionary_models.py", work / "dictionary_models.py")
        (work / "et_extra_models.py").write_text(EXTRA_SOURCE)
        (work / ".venv").symlink_to(Path(sys.prefix))
        PROJECT.parent.mkdir(parents=True, exist_ok=True)
        PROJECT.symlink_to(work)
        try:
            python = PROJECT / ".venv" / "bin" / "python"
            cmd = [str(python), str(Path(__file__).resolve()), "--out", str(out), "--inside"]
            cmd += ["--no-delegate"] if args.no_delegate else []
            return subprocess.run(cmd, cwd=str(PROJECT), check=False).returncode
        finally:
            PROJECT.unlink()


if __name__ == "__main__":
    raise SystemExit(main())
