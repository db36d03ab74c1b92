"""The Llama of sw-train in PyTorch CPU (float32), for the benchmarks
bench/train and bench/sharpness: RMSNorm, rotate-half RoPE, causal
attention, SwiGLU, untied head, cross-entropy. Not a test reference (that
is tests/e2e/torch_reference.py, in float64)."""
import math

import numpy as np
import torch


def load_tokens(path):
    return torch.from_numpy(np.fromfile(path, dtype=np.uint16, offset=1024).astype(np.int64))


class RMSNorm(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)


class Llama(torch.nn.Module):
    def __init__(self, V, D, L, H, F, T):
        super().__init__()
        self.V, self.D, self.H, self.T, self.hd = V, D, H, T, D // H
        inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        ang = torch.arange(T).float()[:, None] * inv[None, :]
        self.cos = torch.cat([ang.cos(), ang.cos()], -1)[None, :, None, :]
        self.sin = torch.cat([ang.sin(), ang.sin()], -1)[None, :, None, :]
        self.mask = torch.full((T, T), float("-inf")).triu(1)
        self.emb = torch.nn.Embedding(V, D)
        self.blocks = torch.nn.ModuleList()
        for _ in range(L):
            b = torch.nn.Module()
            b.n1, b.n2 = RMSNorm(D), RMSNorm(D)
            b.q, b.k, b.v, b.o = (torch.nn.Linear(D, D, bias=False) for _ in range(4))
            b.gate, b.up = torch.nn.Linear(D, F, bias=False), torch.nn.Linear(D, F, bias=False)
            b.down = torch.nn.Linear(F, D, bias=False)
            self.blocks.append(b)
        self.norm = RMSNorm(D)
        self.head = torch.nn.Linear(D, V, bias=False)

    def rope(self, x):
        h = self.hd // 2
        return x * self.cos + torch.cat([-x[..., h:], x[..., :h]], -1) * self.sin

    def logits(self, x):
        B, T = x.shape
        h = self.emb(x)
        for b in self.blocks:
            a = b.n1(h)
            q = self.rope(b.q(a).view(B, T, self.H, self.hd)).transpose(1, 2)
            k = self.rope(b.k(a).view(B, T, self.H, self.hd)).transpose(1, 2)
            v = b.v(a).view(B, T, self.H, self.hd).transpose(1, 2)
            att = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd) + self.mask
            y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, self.D)
            h = h + b.o(y)
            a = b.n2(h)
            h = h + b.down(torch.nn.functional.silu(b.gate(a)) * b.up(a))
        return self.head(self.norm(h))

    def loss(self, x, y):
        return torch.nn.functional.cross_entropy(self.logits(x).view(-1, self.V), y.reshape(-1))
