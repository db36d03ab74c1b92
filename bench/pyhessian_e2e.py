"""PyHessian end to end, for bench/hessian: what a user runs today to get a
model's largest Hessian eigenvalue and trace, on sw-hessian's own
checkpoint (exported by sw-convert and loaded by transformers'
LlamaForCausalLM, float32, eager attention) and its own batch
(sw-hessian --dump-batch, passed here as .npy files). Run by the pinned
venv's python (bench/venv.sh), not Debian's.

usage: pyhessian_e2e.py HF_DIR TOKENS.npy TARGETS.npy THREADS TOL PROBES

PyHessian's eigenvalues(top_n=1, tol=TOL) (power iteration, stopped when
the eigenvalue moves by less than TOL relative) and its trace (Hutchinson
with PROBES Rademacher probes, one trace() call each: see below), each
timed, its Hessian-vector products counted.
prints: lambda_max trace trace_se eig_seconds trace_seconds eig_products trace_products loss
"""
import importlib
import sys
import time

import numpy as np
import torch
from transformers import LlamaForCausalLM

hf_dir, tok_path, tgt_path = sys.argv[1:4]
threads, tol, probes = int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
torch.set_num_threads(threads)
torch.manual_seed(1)
np.random.seed(1)
x = torch.from_numpy(np.load(tok_path).astype(np.int64))
y = torch.from_numpy(np.load(tgt_path).astype(np.int64))
hf = LlamaForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32, attn_implementation="eager")
hf.eval()                                   # no dropout; the gradients are still taken
V = hf.config.vocab_size


class Logits(torch.nn.Module):
    """PyHessian calls model(inputs) and criterion(outputs, targets)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, tokens):
        return self.m(input_ids=tokens, use_cache=False).logits.reshape(-1, V)


model = Logits(hf)
criterion = torch.nn.CrossEntropyLoss()
with torch.no_grad():
    loss = criterion(model(x), y.reshape(-1)).item()

# pyhessian/__init__ binds the name hessian to the class: the module itself
ph = importlib.import_module("pyhessian.hessian")
count = [0]
hvp = ph.hessian_vector_product


def counted(*a, **k):
    count[0] += 1
    return hvp(*a, **k)


ph.hessian_vector_product = counted
hc = ph.hessian(model, criterion, data=(x, y.reshape(-1)), cuda=False)
t0 = time.time()
eig, _ = hc.eigenvalues(maxIter=100, tol=tol, top_n=1)
t1 = time.time()
n_eig = count[0]
# trace() stops when its running mean moves by less than tol relative,
# dividing by the mean without its sign: with a negative mean it stops at
# once, whatever tol (PyHessian 0.1; bench/hessian's first run stopped
# after 3 of 20 probes). So PROBES calls of one probe each: the mean of
# their v'Hv is Hutchinson's estimate, their spread its standard error.
count[0] = 0
t2 = time.time()
samples = [hc.trace(maxIter=1, tol=0.0)[0] for _ in range(probes)]
t3 = time.time()
s = np.array(samples, dtype=np.float64)
se = s.std(ddof=1) / np.sqrt(len(s)) if len(s) > 1 else float("nan")
print("%.9g %.9g %.9g %.4f %.4f %d %d %.9g" % (eig[0], s.mean(), se, t1 - t0, t3 - t2, n_eig, count[0],
                                             loss))
