#!/usr/bin/python3
"""optim_reference.py OPT P0.h5 RUN N [options]: Lion or Adam-mini in
float64, written from the papers' formulas, against sw-train's run.

OPT is lion or adam-mini. P0.h5 holds the parameters before the first
update (/params of a run at --lr 0: nothing moved). RUN/ckpt-00000S.h5
(S = 1..N, --ckpt-every 1 --save-grads) holds in /grads the gradient of
update S-1, taken at the run's own parameters; the reference takes those
gradients (it computes no model), starts from P0 with zero moments and
makes N updates in float64, then compares RUN/ckpt-N's /params and
/optim_state (m; Adam-mini's v, one per block) tensor by tensor:
max |x - ref| <= TOL max |ref| (each tensor's own scale: float32 rounds
a stored value by 6e-8 of its size at each of the N steps, so 1e-6 holds
for N = 10; an element near 0 is measured against its tensor's scale,
not its own, which float32's absolute rounding would make meaningless).

Lion's sign(b1 m + (1 - b1) g) is not defined by float32 where the sum
is within 1e-5 of its terms' size (the run's m carries float32's
rounding): those elements (counted, and required to be a few) leave the
parameter comparison from then on; m does not depend on the sign.

The learning rate of update s (0-based) is the paper's: a linear warmup
(s + 1) / W, then wsd (constant, then linear to 0 over the last
decay-frac of the steps), Blockwise LR (sharpness paper eq. 5, lr_min 0:
the block's ratio times the base lr, after warmup only), times the
group's ratio; weight decay decoupled, p (1 - lr wd), on matrices only.

Adam-mini's partition (Zhang et al. 2024, Algorithm 3, v1): q and k one
block per head (head_dim rows), every other matrix one per output row
(the embedding and the head: one per token), a vector one block.

Prints one line per failure; the last line: the parameters compared, the
signs left out, the state's bytes. Exit 1 on any failure.
"""
import argparse
import os
import sys

import h5py
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("opt", choices=["lion", "adam-mini"])
ap.add_argument("p0")
ap.add_argument("run")
ap.add_argument("n", type=int)
ap.add_argument("--lr", type=float, required=True)
ap.add_argument("--beta1", type=float, default=0.9)
ap.add_argument("--beta2", type=float, required=True)
ap.add_argument("--eps", type=float, default=1e-8)
ap.add_argument("--wd", type=float, required=True)
ap.add_argument("--warmup", type=int, default=0)
ap.add_argument("--steps", type=int, required=True)
ap.add_argument("--decay-frac", type=float, default=0.2)
ap.add_argument("--blockwise", default="")      # emb=10,qk=8,...
ap.add_argument("--group-lr", default="1:1:1")  # input:hidden:output
ap.add_argument("--tol", type=float, default=1e-6)
a = ap.parse_args()

ratio = {b: 1.0 for b in ["emb", "qk", "vo", "ffn", "norm", "out", "mult"]}
for kv in filter(None, a.blockwise.split(",")):
    k, v = kv.split("=")
    ratio[k] = float(v)
group = dict(zip(["input", "hidden", "output"], map(float, a.group_lr.split(":"))))


def base_factor(s):
    """the schedule's factor of update s: warmup, then wsd to 0"""
    if s < a.warmup:
        return (s + 1) / a.warmup
    start = max(a.steps - int(round(a.decay_frac * a.steps)), a.warmup)
    if s < start:
        return 1.0
    return 1.0 - min(1.0, (s - start) / (a.steps - start))


def lr_of(attrs, s):
    f = base_factor(s)
    r = ratio[attrs["block"]] if a.blockwise and s >= a.warmup else 1.0
    return a.lr * f * r * group[attrs["group"]]


def block_numel(attrs, shape):
    if attrs["kind"] != "matrix":
        return int(np.prod(shape))
    if attrs["role"] in ("q", "k"):
        return int(attrs["head_dim"]) * shape[1]
    return shape[1]


def ckpt(s):
    return h5py.File(os.path.join(a.run, "ckpt-%06d.h5" % s), "r")


p0 = h5py.File(a.p0, "r")
names = list(p0["params"].keys())
attrs = {k: {x: (y.decode() if isinstance(y, bytes) else y) for x, y in p0["params"][k].attrs.items()}
         for k in names}
p = {k: p0["params"][k][()].astype(np.float64) for k in names}
m = {k: np.zeros_like(p[k]) for k in names}
bn = {k: block_numel(attrs[k], p[k].shape) for k in names}
v = {k: np.zeros(p[k].size // bn[k]) for k in names}
unsure = {k: np.zeros(p[k].shape, bool) for k in names}
b1, b2 = a.beta1, a.beta2

for s in range(a.n):
    with ckpt(s + 1) as c:
        g = {k: c["grads"][k][()].astype(np.float64) for k in names}
    t = s + 1
    for k in names:
        lr = lr_of(attrs[k], s)
        wd = a.wd if attrs[k]["kind"] == "matrix" else 0.0
        if a.opt == "lion":
            # Chen et al. 2023, Algorithm 2
            u = b1 * m[k] + (1 - b1) * g[k]
            size = b1 * np.abs(m[k]) + (1 - b1) * np.abs(g[k])
            unsure[k] |= (size > 0) & (np.abs(u) <= 1e-5 * size)
            p[k] = p[k] - lr * (np.sign(u) + wd * p[k])
            m[k] = b2 * m[k] + (1 - b2) * g[k]
        else:
            # Zhang et al. 2024, Algorithm 1: v per block, the mean of g^2
            m[k] = b1 * m[k] + (1 - b1) * g[k]
            gb = g[k].reshape(-1, bn[k])
            v[k] = b2 * v[k] + (1 - b2) * (gb * gb).mean(axis=1)
            mhat = m[k] / (1 - b1 ** t)
            vhat = np.repeat(v[k] / (1 - b2 ** t), bn[k]).reshape(p[k].shape)
            p[k] = p[k] - lr * wd * p[k] - lr * mhat / (np.sqrt(vhat) + a.eps)

bad = 0
compared = left_out = 0


def close(what, x, ref, mask=None):
    global bad
    x = np.asarray(x, np.float64)
    if x.shape != ref.shape:
        print(what, "shape", x.shape, "expected", ref.shape)
        bad = 1
        return
    scale = np.abs(ref).max() if ref.size else 0.0
    d = np.abs(x - ref)
    if mask is not None:
        d = d[~mask]
    err = d.max() / scale if d.size and scale > 0 else (d.max() if d.size else 0.0)
    if not err <= a.tol:
        print(what, "relative error", err)
        bad = 1


with ckpt(a.n) as c:
    for k in names:
        close("/params/" + k, c["params"][k][()], p[k], unsure[k])
        compared += unsure[k].size - int(unsure[k].sum())
        left_out += int(unsure[k].sum())
        close("/optim_state/m/" + k, c["optim_state/m"][k][()], m[k])
        if a.opt == "lion":
            if "v" in c["optim_state"]:
                print("Lion's checkpoint holds /optim_state/v")
                bad = 1
        else:
            d = c["optim_state/v"][k]
            if int(d.attrs["block_numel"]) != bn[k]:
                print(k, "block_numel", int(d.attrs["block_numel"]), "expected", bn[k])
                bad = 1
            close("/optim_state/v/" + k, d[()], v[k])
    nbytes = sum(d.nbytes for g in c["optim_state"].values() for d in g.values())
if left_out > max(10, compared // 1000):
    print("too many signs left out:", left_out)
    bad = 1
print("%s: %d steps, %d parameters within %g, %d signs left out, optimizer state %d bytes"
      % (a.opt, a.n, compared, a.tol, left_out, nbytes))
sys.exit(bad)
