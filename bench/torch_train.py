#!/usr/bin/python3
"""sw-train's training step in PyTorch CPU, for bench/train: the same model
(torch_llama.py), torch.optim.AdamW, gradient clipping, random windows.

usage: torch_train.py TOKENS.llmc D_MODEL LAYERS HEADS D_FF SEQ BATCH STEPS THREADS [compile] [gpt2]
compile: the model's loss through torch.compile (its default inductor back
end; compiled in the warm-up steps, not timed); gpt2: torch_gpt2.py's
model in place of the Llama
prints: tokens_per_second
"""
import sys
import time

import torch

from torch_gpt2 import GPT2
from torch_llama import Llama, load_tokens

path = sys.argv[1]
D, L, H, F, T, B, STEPS, THREADS = (int(x) for x in sys.argv[2:10])
torch.set_num_threads(THREADS)
torch.manual_seed(1)
tokens = load_tokens(path)
words = sys.argv[10:]
model = (GPT2 if "gpt2" in words else Llama)(int(tokens.max()) + 1, D, L, H, F, T)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
g = torch.Generator().manual_seed(1)
loss_fn = torch.compile(model.loss) if "compile" in words else model.loss


def step():
    off = torch.randint(0, len(tokens) - T - 1, (B,), generator=g)
    x = torch.stack([tokens[o:o + T] for o in off])
    y = torch.stack([tokens[o + 1:o + T + 1] for o in off])
    loss = loss_fn(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


for _ in range(3 if loss_fn is not model.loss else 1):
    step()                                  # warm-up (and compilation)
t0 = time.time()
for _ in range(STEPS):
    step()
print("%.1f" % (STEPS * B * T / (time.time() - t0)))
