"""The models tracepack's built-in zstd dictionary is trained on (``train_dictionary.py``).

They are deliberately *not* the benchmark's models (``export_corpus.py``: its transformer, ResNet,
``torch.cond`` and dynamic-shape poolers): other architectures, other source code (so no stack
trace line of the benchmark's models is in the training data), other widths and seeds. What the
dictionary may learn from them is what every torch.export program shares: torch's own frames,
operator and module type names, argument names, the program's JSON skeleton, tracepack's column
paths and table layout.

Each entry is ``(name, build)`` where ``build()`` returns ``(module, example_args, dynamic_shapes,
strict)``; :data:`MODELS` lists the whole training set in a fixed order (the dictionary is a
deterministic function of it).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.export import Dim

__all__ = ["MODELS", "export"]


class MLP(nn.Module):
    def __init__(self, depth: int, width: int = 24) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for i in range(depth):
            layers += [nn.Linear(width, width), nn.GELU() if i % 2 else nn.ReLU(), nn.Dropout(0.1)]
        self.body = nn.Sequential(*layers)
        self.out = nn.Linear(width, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.body(x)).log_softmax(dim=-1)


class ConvBnAct(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(cout)
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(self.conv(x)))


class VGGish(nn.Module):
    def __init__(self, stages: int) -> None:
        super().__init__()
        chans = [3] + [6 * (i + 1) for i in range(stages)]
        self.features = nn.ModuleList(ConvBnAct(a, b) for a, b in itertools.pairwise(chans))
        self.pool = nn.MaxPool2d(2)
        self.classifier = nn.Linear(chans[-1], 5)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        for i, stage in enumerate(self.features):
            image = stage(image)
            if i % 2 == 1:
                image = self.pool(image)
        return self.classifier(image.mean(dim=(2, 3)))


class GRUUnrolled(nn.Module):
    """A GRU cell written out by hand, unrolled over a fixed number of steps."""

    def __init__(self, steps: int, hidden: int = 12) -> None:
        super().__init__()
        self.steps = steps
        self.gates = nn.Linear(2 * hidden, 2 * hidden)
        self.candidate = nn.Linear(2 * hidden, hidden)

    def forward(self, seq: torch.Tensor) -> torch.Tensor:
        h = torch.zeros_like(seq[:, 0])
        for t in range(self.steps):
            xt = seq[:, t]
            reset, update = torch.sigmoid(self.gates(torch.cat([xt, h], dim=-1))).chunk(2, dim=-1)
            cand = torch.tanh(self.candidate(torch.cat([xt, reset * h], dim=-1)))
            h = (1 - update) * h + update * cand
        return h


class MixerLayer(nn.Module):
    def __init__(self, tokens: int, channels: int) -> None:
        super().__init__()
        self.ln_tokens = nn.LayerNorm(channels)
        self.token_mix = nn.Linear(tokens, tokens)
        self.ln_channels = nn.LayerNorm(channels)
        hidden = 2 * channels
        self.channel_mix = nn.Sequential(nn.Linear(channels, hidden), nn.GELU(), nn.Linear(hidden, channels))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        z = z + self.token_mix(self.ln_tokens(z).transpose(1, 2)).transpose(1, 2)
        return z + self.channel_mix(self.ln_channels(z))


class Mixer(nn.Module):
    def __init__(self, depth: int, tokens: int = 6, channels: int = 10) -> None:
        super().__init__()
        self.layers = nn.Sequential(*(MixerLayer(tokens, channels) for _ in range(depth)))
        self.head = nn.Linear(channels, 2)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.head(self.layers(z).mean(dim=1))


class TorchEncoder(nn.Module):
    """torch's own TransformerEncoder layers (torch's code, not the benchmark's transformer)."""

    def __init__(self, depth: int, dim: int = 12) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(dim, nhead=2, dim_feedforward=24, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.proj = nn.Linear(dim, dim)

    def forward(self, src: torch.Tensor) -> torch.Tensor:
        return self.proj(self.encoder(src))


class UNetTiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.down1 = ConvBnAct(1, 4)
        self.down2 = ConvBnAct(4, 8)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.fuse = ConvBnAct(8, 4)
        self.out = nn.Conv2d(4, 1, 1)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        a = self.down1(img)
        b = self.down2(nn.functional.avg_pool2d(a, 2))
        u = self.up(b)
        return torch.sigmoid(self.out(self.fuse(torch.cat([a, u], dim=1))))


class GroupedSelfMix(nn.Module):
    """Self-attention over token groups that reads its sizes from the input (``sym_size`` nodes, symbolic
    strides and ``as_sym_ints`` reshapes under dynamic batch and length)."""

    def __init__(self, width: int = 12, groups: int = 3) -> None:
        super().__init__()
        self.groups = groups
        self.pre = nn.LayerNorm(width)
        self.keys = nn.Linear(width, 2 * width)
        self.vals = nn.Linear(width, width)
        self.post = nn.Linear(width, width)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        n, t, c = feats.shape
        h = self.pre(feats)
        q, k = self.keys(h).view(n, t, 2, self.groups, c // self.groups).unbind(2)
        v = self.vals(h).view(n, t, self.groups, c // self.groups)
        att = torch.einsum("ntgd,nsgd->ngts", q, k).div(c**0.5).softmax(dim=-1)
        mixed = torch.einsum("ngts,nsgd->ntgd", att, v).reshape(n, t, c)
        return feats + self.post(mixed)


class MixStack(nn.Module):
    def __init__(self, depth: int, width: int = 12) -> None:
        super().__init__()
        self.inp = nn.Linear(6, width)
        self.mix = nn.ModuleList(GroupedSelfMix(width) for _ in range(depth))
        self.out = nn.Linear(width, 4)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        y = self.inp(frames)
        for layer in self.mix:
            y = layer(y)
        return self.out(y.flatten(0, 1)).view(frames.size(0), frames.size(1), -1)


Build = Callable[[], tuple[nn.Module, tuple[Any, ...], Any, bool]]


def _mlp(depth: int, dynamic: bool, strict: bool) -> Build:
    def build() -> tuple[nn.Module, tuple[Any, ...], Any, bool]:
        shapes = {"x": {0: Dim("rows", min=2, max=1024)}} if dynamic else None
        return MLP(depth), (torch.randn(5, 24),), shapes, strict

    return build


def _vgg(stages: int, dynamic: bool) -> Build:
    def build() -> tuple[nn.Module, tuple[Any, ...], Any, bool]:
        shapes = {"image": {0: Dim("n", min=1, max=32)}} if dynamic else None
        return VGGish(stages), (torch.randn(2, 3, 32, 32),), shapes, False

    return build


def _gru(steps: int, dynamic: bool) -> Build:
    def build() -> tuple[nn.Module, tuple[Any, ...], Any, bool]:
        shapes = {"seq": {0: Dim("batch", min=2, max=256)}} if dynamic else None
        return GRUUnrolled(steps), (torch.randn(3, steps, 12),), shapes, False

    return build


def _mixer(depth: int, dynamic: bool, strict: bool) -> Build:
    def build() -> tuple[nn.Module, tuple[Any, ...], Any, bool]:
        shapes = {"z": {0: Dim("b", min=2, max=128)}} if dynamic else None
        return Mixer(depth), (torch.randn(4, 6, 10),), shapes, strict

    return build


def _encoder(depth: int, dynamic: bool) -> Build:
    def build() -> tuple[nn.Module, tuple[Any, ...], Any, bool]:
        shapes = {"src": {0: Dim("b", min=2, max=64), 1: Dim("s", min=2, max=256)}} if dynamic else None
        return TorchEncoder(depth), (torch.randn(2, 5, 12),), shapes, False

    return build


def _unet(dynamic: bool) -> Build:
    def build() -> tuple[nn.Module, tuple[Any, ...], Any, bool]:
        shapes = {"img": {0: Dim("b", min=1, max=16)}} if dynamic else None
        return UNetTiny(), (torch.randn(2, 1, 16, 16),), shapes, False

    return build


def _mixstack(depth: int, strict: bool) -> Build:
    def build() -> tuple[nn.Module, tuple[Any, ...], Any, bool]:
        shapes = {"frames": {0: Dim("n", min=1, max=64), 1: Dim("t", min=2, max=512)}}
        return MixStack(depth), (torch.randn(2, 7, 6),), shapes, strict

    return build


#: The training set, in a fixed order: small and large, static and dynamic, strict and not.
MODELS: tuple[tuple[str, Build], ...] = (
    ("mlp1", _mlp(1, False, False)),
    ("mlp3_dyn", _mlp(3, True, False)),
    ("mlp6_strict", _mlp(6, False, True)),
    ("mlp24", _mlp(24, False, False)),
    ("mlp40_dyn", _mlp(40, True, False)),
    ("vgg2", _vgg(2, False)),
    ("vgg5_dyn", _vgg(5, True)),
    ("vgg9", _vgg(9, False)),
    ("gru2", _gru(2, False)),
    ("gru6_dyn", _gru(6, True)),
    ("gru16", _gru(16, False)),
    ("mixer1_strict", _mixer(1, False, True)),
    ("mixer4_dyn", _mixer(4, True, False)),
    ("mixer12", _mixer(12, False, False)),
    ("encoder1", _encoder(1, False)),
    ("encoder3_dyn", _encoder(3, True)),
    ("encoder8", _encoder(8, False)),
    ("unet", _unet(False)),
    ("unet_dyn", _unet(True)),
    # torch-export-7 on: dynamic programs that read their sizes (sym_size nodes, symbolic strides)
    ("mixstack1_dyn", _mixstack(1, False)),
    ("mixstack2_dyn_strict", _mixstack(2, True)),
    ("mixstack5_dyn", _mixstack(5, False)),
)


def export(build: Build) -> Any:
    """``torch.export.export`` of one training model (fixed seed)."""
    torch.manual_seed(1234)
    module, args, shapes, strict = build()
    return torch.export.export(module.eval(), args, dynamic_shapes=shapes, strict=strict)
