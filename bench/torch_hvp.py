#!/usr/bin/python3
"""Hessian-vector products in PyTorch CPU (float32), for bench/hessian: the
double-backward HVP (torch.autograd.grad twice, as PyHessian computes it)
restricted to one block type's parameters, on the same model
(torch_llama.py) and batch shape as sw-hessian's run.

usage: torch_hvp.py TOKENS.llmc D_MODEL LAYERS HEADS D_FF SEQ BATCH THREADS REPS BLOCK...

For each BLOCK (emb, qk, vo, ffn, norm, out or all): one warm-up product,
then REPS timed ones, each on a fresh random direction.
prints, per block: BLOCK NPARAMS SECONDS_PER_PRODUCT
"""
import sys
import time

import torch

from torch_llama import Llama, load_tokens

path = sys.argv[1]
D, L, H, F, T, B, THREADS, REPS = (int(x) for x in sys.argv[2:10])
blocks = sys.argv[10:]
torch.set_num_threads(THREADS)
torch.manual_seed(1)
tokens = load_tokens(path)
model = Llama(int(tokens.max()) + 1, D, L, H, F, T)
g = torch.Generator().manual_seed(1)
off = torch.randint(0, len(tokens) - T - 1, (B,), generator=g)
x = torch.stack([tokens[o:o + T] for o in off])
y = torch.stack([tokens[o + 1:o + T + 1] for o in off])

# sw-hessian's block types (lib/formats/ckpt.c's roles) over torch_llama's names
roles = {"emb": ("emb.",), "qk": (".q.", ".k."), "vo": (".v.", ".o."),
         "ffn": (".gate.", ".up.", ".down."), "norm": (".n1.", ".n2.", "norm."),
         "out": ("head.",)}


def block_params(block):
    named = list(model.named_parameters())
    if block == "all":
        return [p for _, p in named]
    return [p for n, p in named if any(("." + n).find(r) >= 0 for r in roles[block])]


def hvp(params):
    v = [torch.randn(p.shape, generator=g) for p in params]
    grads = torch.autograd.grad(model.loss(x, y), params, create_graph=True)
    dot = sum((gr * vi).sum() for gr, vi in zip(grads, v))
    return torch.autograd.grad(dot, params)


for block in blocks:
    params = block_params(block)
    hvp(params)                             # warm-up
    t0 = time.time()
    for _ in range(REPS):
        hvp(params)
    print(block, sum(p.numel() for p in params), "%.6f" % ((time.time() - t0) / REPS), flush=True)
