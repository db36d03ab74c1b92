#!/usr/bin/python3
"""sw-sharpness's GNB estimate in PyTorch CPU, for bench/sharpness: labels
sampled from the model's softmax, h += N g^2 per draw, on the same model
(torch_llama.py) and batch shape.

usage: torch_gnb.py TOKENS.llmc D_MODEL LAYERS HEADS D_FF SEQ BATCH DRAWS THREADS
prints: tokens_per_second (tokens of the draws)
"""
import sys
import time

import torch

from torch_llama import Llama, load_tokens

path = sys.argv[1]
D, L, H, F, T, B, DRAWS, THREADS = (int(x) for x in sys.argv[2:10])
torch.set_num_threads(THREADS)
torch.manual_seed(1)
tokens = load_tokens(path)
model = Llama(int(tokens.max()) + 1, D, L, H, F, T)
params = list(model.parameters())
h = [torch.zeros_like(p) for p in params]
g = torch.Generator().manual_seed(1)
N = B * T


def draw():
    off = torch.randint(0, len(tokens) - T - 1, (B,), generator=g)
    x = torch.stack([tokens[o:o + T] for o in off])
    logits = model.logits(x)
    with torch.no_grad():
        y = torch.multinomial(logits.view(-1, model.V).softmax(-1), 1, generator=g).view(B, T)
    loss = torch.nn.functional.cross_entropy(logits.view(-1, model.V), y.view(-1))
    grads = torch.autograd.grad(loss, params)
    with torch.no_grad():
        for a, gr in zip(h, grads):
            a.add_(N * gr * gr)


draw()                                      # warm-up
t0 = time.time()
for _ in range(DRAWS):
    draw()
print("%.1f" % (DRAWS * N / (time.time() - t0)))
