"""The small models every torch release exports for tracepack's release samples.

Kept in their own file so that the stack traces and TorchScript source ranges the
releases record name one stable path (``/home/user/project/scripts/torch/releases/
models.py`` once machine paths are rewritten). Only torch APIs that every release
from 2.1 on has are used here; what differs between releases lives in
``make_samples.py``.
"""

from typing import Any

import torch
from torch import nn

DIM = 8


class Layer(nn.Module):
    def __init__(self, din: int, dout: int) -> None:
        super().__init__()
        self.linear = nn.Linear(din, dout)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.linear(x))


class Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(Layer(DIM, DIM), Layer(DIM, DIM))
        self.norm = nn.LayerNorm(DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.layers(x))


class MLP(nn.Module):
    """Nested modules: MLP -> Stack -> Sequential -> Layer -> Linear/ReLU."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(4, DIM)
        self.body = Stack()
        self.head = nn.Linear(DIM, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.embed(x)))


class Attention(nn.Module):
    def __init__(self, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)
        k = k.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)
        v = v.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)
        w = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * 0.5, dim=-1)
        out = torch.matmul(w, v).transpose(1, 2).reshape(b, s, d)
        return self.proj(out)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(DIM)
        self.attn = Attention()
        self.norm2 = nn.LayerNorm(DIM)
        self.ff = nn.Sequential(nn.Linear(DIM, 2 * DIM), nn.GELU(), nn.Linear(2 * DIM, DIM))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.ff(self.norm2(x))


class Transformer(nn.Module):
    """Two pre-norm blocks; ``chunk`` gives getitem nodes."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(DIM, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


class ConvBN(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


class CNN(nn.Module):
    """conv + batch norm (eval: getitem of the batch-norm tuple in older releases)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = ConvBN(3, 4)
        self.block = nn.Sequential(ConvBN(4, 4), ConvBN(4, 4))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        y = y + self.block(y)
        return self.fc(torch.flatten(self.pool(y), 1))


class Dynamic(nn.Module):
    """Uses the batch size in arithmetic, so dynamic-batch exports hold sym_size nodes."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return y.reshape(x.shape[0], 2, DIM // 2).sum(dim=1) * 2.0


class CondBranches(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(DIM, DIM)
        self.down = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def true_fn(x: torch.Tensor) -> torch.Tensor:
            return self.up(x).sin()

        def false_fn(x: torch.Tensor) -> torch.Tensor:
            return self.down(x).cos()

        return _cond()(x.sum() > 0, true_fn, false_fn, (x,))


def _cond() -> Any:
    """``torch.cond`` (2.2+), or ``functorch.experimental.control_flow.cond`` (2.1)."""
    found = getattr(torch, "cond", None)
    if found is None:
        from functorch.experimental.control_flow import cond as found
    return found


# -- TorchScript ---------------------------------------------------------------------------------


class Gate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return self.proj(x) * torch.sigmoid(g)


class ScriptBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.gate = Gate()

    def forward(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return x + self.gate(self.norm(x), g)


class ScriptNet(nn.Module):
    """Two inputs: a bad ``x`` fails at the top, a bad ``g`` fails deep inside ``blocks``."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(4, DIM)
        self.block0 = ScriptBlock()
        self.block1 = ScriptBlock()
        self.head = nn.Linear(DIM, 2)

    def forward(self, x: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.block1(self.block0(self.embed(x), g), g)
        return self.head(h), h.sum(dim=-1)
