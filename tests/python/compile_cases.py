"""The torch.compile cases devbridge checks on a plugin device: on simdev in CI
(tests/python/test_inductor_simdev.py) and on cudadev on the GPU machine
(plugins/cudadev/tests/python/test_cudadev_inductor.py), compared with eager
on the same inputs.

Each case: a function (or a module factory) and a maker of its inputs on a
given device; inputs are made on the CPU from a fixed seed and moved, so
every device gets the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F


@dataclass
class Case:
    name: str
    fn: Callable[..., Any]
    inputs: Callable[[], tuple]  # CPU tensors; the test moves them
    atol: float = 1e-5
    rtol: float = 1e-5


def _randn(*shape, seed=0, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=dtype)


def pointwise_chain(x, y):
    return torch.sigmoid(x * 2.0 + y).relu() - torch.tanh(y) * 0.5 + torch.exp(-x.abs())


def reductions(x):
    return (x.sum(0), x.sum(1), x.amax(0), x.amax(1), x.var(0), x.var(1), x.mean())


def softmax(x):
    return torch.softmax(x, dim=-1), torch.log_softmax(x, dim=0)


def layernorm(x, weight, bias):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps=1e-5)


def linear_gelu(x, w, b):
    return F.gelu(x @ w + b)


def gather_index(x, index):
    return torch.gather(x, 1, index) + x[index[:, 0]].sum(1, keepdim=True)


def broadcast(x, row, column):
    return x * row + column - (x / (row.abs() + 1.0))


def views_non_contiguous(x):
    t = x.t()  # non-contiguous
    return (t[::2, 1:] * 3.0).contiguous().view(-1)[:100], t.sum(1) + t[:, 3], x.unsqueeze(0).expand(3, -1, -1) * 2


CASES = [
    Case("pointwise_chain", pointwise_chain, lambda: (_randn(1000), _randn(1000, seed=1))),
    Case("reductions", reductions, lambda: (_randn(33, 65),), atol=1e-4, rtol=1e-4),
    Case("softmax", softmax, lambda: (_randn(17, 129),)),
    Case("layernorm", layernorm, lambda: (_randn(8, 96), _randn(96, seed=1), _randn(96, seed=2)), atol=1e-4,
         rtol=1e-4),
    Case("linear_gelu", linear_gelu, lambda: (_randn(16, 32), _randn(32, 24, seed=1), _randn(24, seed=2)),
         atol=1e-4, rtol=1e-4),
    Case("gather_index", gather_index,
         lambda: (_randn(16, 10), torch.randint(0, 10, (16, 4), generator=torch.Generator().manual_seed(3)))),
    Case("broadcast", broadcast, lambda: (_randn(12, 40), _randn(40, seed=1), _randn(12, 1, seed=2))),
    Case("views_non_contiguous", views_non_contiguous, lambda: (_randn(60, 8),)),
]


class MLP(torch.nn.Module):
    def __init__(self, width=32, hidden=64):
        super().__init__()
        self.up = torch.nn.Linear(width, hidden)
        self.down = torch.nn.Linear(hidden, width)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class Block(torch.nn.Module):
    """A pre-norm transformer block: attention (written out, causal) and an MLP."""

    def __init__(self, width=32, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)
        self.norm2 = torch.nn.LayerNorm(width)
        self.mlp = MLP(width, 4 * width)

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=-1)
        shape = (batch, length, self.heads, width // self.heads)
        q, k, v = (t.reshape(shape).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) / (width // self.heads) ** 0.5
        causal = torch.ones(length, length, dtype=torch.bool, device=x.device).tril()
        attention = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1) @ v
        x = x + self.proj(attention.transpose(1, 2).reshape(batch, length, width))
        return x + self.mlp(self.norm2(x))


class AttentionBlock(torch.nn.Module):
    """A pre-norm attention block over [B, L, H * E] as Llama-style models write
    it: grouped-query heads through scaled_dot_product_attention, causal, the
    query a transposed view. `norm`: LayerNorm, or RMSNorm as Llama has."""

    def __init__(self, width=32, heads=4, kv_heads=2, norm=torch.nn.LayerNorm):
        super().__init__()
        self.heads, self.kv_heads, self.head = heads, kv_heads, width // heads
        self.norm = norm(width)
        self.q = torch.nn.Linear(width, width, bias=False)
        self.kv = torch.nn.Linear(width, 2 * kv_heads * self.head, bias=False)
        self.out = torch.nn.Linear(width, width, bias=False)

    def forward(self, x):
        b, length, _ = x.shape
        h = self.norm(x)
        q = self.q(h).view(b, length, self.heads, self.head).transpose(1, 2)
        k, v = self.kv(h).view(b, length, 2, self.kv_heads, self.head).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return x + self.out(attended.transpose(1, 2).reshape(b, length, -1))


def two_blocks(width=32, heads=4, seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(Block(width, heads), Block(width, heads))


def train_step(model, optimizer, x, target):
    optimizer.zero_grad(set_to_none=True)
    loss = F.mse_loss(model(x), target)
    loss.backward()
    optimizer.step()
    return loss.detach()


def to(values, device):
    return tuple(v.to(device) for v in values)


def assert_close(actual, expected, atol, rtol):
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_close(a, e, atol, rtol)
        return
    torch.testing.assert_close(actual.cpu(), expected.cpu(), atol=atol, rtol=rtol)
