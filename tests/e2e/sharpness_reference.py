#!/usr/bin/python3
"""An independent GNB sharpness estimate in PyTorch (float64), to check
sw-sharpness against (t0230-sharpness-crosscheck.t).

usage: sharpness_reference.py CKPT LABELS.h5

LABELS.h5 is what sw-sharpness --dump-labels wrote: /tokens and /labels,
(draws x B) x T, and the attribute draws. For each draw, the gradient g of
the mean cross-entropy of the model's logits against the sampled labels
over the draw's N = B T tokens; h = N g^2, averaged over the draws.
Prints one line per tensor: NAME NPARAMS MEAN ZEROS (zeros: exact zeros).
"""
import sys

import h5py
import numpy as np
import torch

from torch_reference import forward, load

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)


def main():
    _, cfg, params = load(sys.argv[1])
    d = h5py.File(sys.argv[2], "r")
    draws = int(d.attrs["draws"])
    tok = torch.tensor(np.array(d["tokens"]), dtype=torch.long)
    lab = torch.tensor(np.array(d["labels"]), dtype=torch.long)
    B = tok.shape[0] // draws
    N = B * tok.shape[1]
    h = {k: torch.zeros_like(v) for k, v in params.items()}
    for k in range(draws):
        leaves = {n: v.clone().requires_grad_(True) for n, v in params.items()}
        loss = forward(leaves, cfg, tok[k * B:(k + 1) * B], lab[k * B:(k + 1) * B])
        loss.backward()
        for n, v in leaves.items():
            h[n] += N * v.grad ** 2 / draws
    for n, v in h.items():
        print("%s\t%d\t%.17g\t%d" % (n, v.numel(), v.mean().item(), int((v == 0).sum())))


main()
