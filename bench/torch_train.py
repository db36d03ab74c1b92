#!/usr/bin/python3
"""The same training step as sw-train, in PyTorch CPU (float32), for
bench/train: a Llama with the same sizes, the same attention, RMSNorm,
RoPE, SwiGLU, cross-entropy, torch.optim.AdamW, gradient clipping.

usage: torch_train.py TOKENS.llmc D_MODEL LAYERS HEADS D_FF SEQ BATCH STEPS THREADS
prints: tokens_per_second
"""
import math
import sys
import time

import numpy as np
import torch

path = sys.argv[1]
D, L, H, F, T, B, STEPS, THREADS = (int(x) for x in sys.argv[2:10])
torch.set_num_threads(THREADS)
torch.manual_seed(1)
raw = np.fromfile(path, dtype=np.int32, count=256)
tokens = torch.from_numpy(np.fromfile(path, dtype=np.uint16, offset=1024).astype(np.int64))
V = int(tokens.max()) + 1
hd = D // H


class RMSNorm(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)


inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
ang = torch.arange(T).float()[:, None] * inv[None, :]
COS = torch.cat([ang.cos(), ang.cos()], -1)[None, :, None, :]
SIN = torch.cat([ang.sin(), ang.sin()], -1)[None, :, None, :]


def rope(x):
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return x * COS + torch.cat([-x2, x1], -1) * SIN


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.n2 = RMSNorm(D), RMSNorm(D)
        self.q, self.k, self.v, self.o = (torch.nn.Linear(D, D, bias=False) for _ in range(4))
        self.gate, self.up = torch.nn.Linear(D, F, bias=False), torch.nn.Linear(D, F, bias=False)
        self.down = torch.nn.Linear(F, D, bias=False)

    def forward(self, x, mask):
        h = self.n1(x)
        q = rope(self.q(h).view(B, T, H, hd)).transpose(1, 2)
        k = rope(self.k(h).view(B, T, H, hd)).transpose(1, 2)
        v = self.v(h).view(B, T, H, hd).transpose(1, 2)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(hd) + mask
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)
        x = x + self.o(y)
        h = self.n2(x)
        return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(V, D)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(L))
        self.norm = RMSNorm(D)
        self.head = torch.nn.Linear(D, V, bias=False)

    def forward(self, x, y):
        mask = torch.full((T, T), float("-inf")).triu(1)
        h = self.emb(x)
        for b in self.blocks:
            h = b(h, mask)
        logits = self.head(self.norm(h))
        return torch.nn.functional.cross_entropy(logits.view(-1, V), y.view(-1))


model = Model()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
g = torch.Generator().manual_seed(1)


def step():
    off = torch.randint(0, len(tokens) - T - 1, (B,), generator=g)
    x = torch.stack([tokens[o:o + T] for o in off])
    y = torch.stack([tokens[o + 1:o + T + 1] for o in off])
    loss = model(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


step()                                      # warm-up
t0 = time.time()
for _ in range(STEPS):
    step()
print("%.1f" % (STEPS * B * T / (time.time() - t0)))
