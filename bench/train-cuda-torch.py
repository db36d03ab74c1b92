#!/usr/bin/python3
"""PyTorch eager on the GPU, for bench/train-cuda: the same Llama as
sw-train (bench/torch_llama.py), torch.optim.AdamW, clipping at 1, random
windows of the same token file; fp32 (TF32 off, as sw-train's fp32), or
bf16 autocast (bf16 products, fp32 master weights, as --precision bf16).

usage: train-cuda-torch.py TOKENS.llmc D_MODEL LAYERS HEADS D_FF SEQ BATCH STEPS fp32|bf16
prints: tokens_per_second
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_llama import Llama, load_tokens  # noqa: E402

path = sys.argv[1]
D, L, H, F, T, B, STEPS = (int(x) for x in sys.argv[2:9])
bf16 = sys.argv[9] == "bf16"
torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
torch.manual_seed(1)
tokens = load_tokens(path)
model = Llama(int(tokens.max()) + 1, D, L, H, F, T)
model.cos, model.sin, model.mask = model.cos.to(dev), model.sin.to(dev), model.mask.to(dev)
model.to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
g = torch.Generator().manual_seed(1)


def step():
    off = torch.randint(0, len(tokens) - T - 1, (B,), generator=g)
    x = torch.stack([tokens[o:o + T] for o in off]).to(dev, non_blocking=True)
    y = torch.stack([tokens[o + 1:o + T + 1] for o in off]).to(dev, non_blocking=True)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
        loss = model.loss(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


for _ in range(2):                          # warm-up
    step()
torch.cuda.synchronize()
t0 = time.time()
for _ in range(STEPS):
    step()
torch.cuda.synchronize()
print("%.1f" % (STEPS * B * T / (time.time() - t0)))
