#!/usr/bin/python3
"""The loss Hessian of a checkpoint in PyTorch (float64), to check
sw-hessian against (t0280-hessian-torch.t). The model is
torch_reference.py's, an independent implementation of sw-train's Llama;
under scale_reparam the parameters are the gains' directions and
magnitudes, each gain computed from them (the gains themselves are left
out of the matrix).

usage: hessian_reference.py JOBS

JOBS holds one job a line, its output written to OUT (one interpreter for
all: importing torch takes seconds):

    hvp CKPT HVP.h5 OUT
    dense CKPT BATCH.h5 MODE OUT
    eigvecs CKPT BATCH.h5 MODE VECS.h5 OUT
    attr CKPT GROUP NAME OUT      (an attribute's value)

hvp: HVP.h5 (tests/unit/mkhvp) holds a batch, a direction v and our H v
and G v; prints per tensor "hv NAME REL ERR NORM" and "gv NAME REL ERR
NORM", the relative error ||ours - reference|| / ||reference||, the
absolute ||ours - reference|| and ||reference||, against H v by double
backward (torch.autograd.grad twice) and G v = J^T diag(p) J v / N (J the
Jacobian of log p; J v by the double-backward trick, J^T u by backward).

dense: the whole matrix on BATCH.h5's batch (sw-hessian --dump-batch):
MODE hessian (H, reverse over reverse), gauss-newton (G = J^T diag(p) J /
N from the Jacobian of log p) or preconditioned (D H D, D = (sqrt(v_hat)
+ eps)^-1/2 from /optim_state); per block type in order of first
appearance, then "all": "BLOCK N L1 L2 L3 TRACE M1 M2 M3 M4", the three
largest eigenvalues of its diagonal block (eigvalsh), its trace and the
first four moments mean(lambda^p) of its eigenvalues, and its smallest
eigenvalue.

eigvecs: VECS.h5 (sw-hessian --eigenvectors, by block type) against eigh
of the same dense matrix: per block and eigenvector K, "BLOCK K COS GAP
SCALE NORM POS DIFF": |cos| of the angle between ours and the reference's
K-th eigenvector (descending), the eigenvalue's distance to the nearest
other one, max |lambda| of the block, our vector's norm, 1 if its
largest-magnitude entry is positive, and its recorded eigenvalue minus
the reference's.
"""
import sys

import functorch
import h5py
import numpy as np
import torch

from torch_reference import derived, forward, load, reparameterized

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)


def setup(ckpt, batch):
    f, cfg, params = load(ckpt)
    b = h5py.File(batch, "r")
    tok = torch.tensor(np.array(b["tokens"]), dtype=torch.long)
    tgt = torch.tensor(np.array(b["targets"]), dtype=torch.long)
    gains = derived(params, cfg)
    names = [k for k in params.keys() if k not in gains]
    shapes = [params[k].shape for k in names]
    sizes = [params[k].numel() for k in names]
    theta = torch.cat([params[k].reshape(-1) for k in names])

    def unflat(t):
        out, o = {}, 0
        for k, s, n in zip(names, shapes, sizes):
            out[k] = t[o:o + n].view(s)
            o += n
        return out

    def loss(t):
        return forward(reparameterized(unflat(t), cfg), cfg, tok, tgt)

    def logp(t):
        # forward's cross entropy, swapped for the identity: its logits
        ce = torch.nn.functional.cross_entropy
        torch.nn.functional.cross_entropy = lambda logits, target: logits
        try:
            return torch.log_softmax(forward(reparameterized(unflat(t), cfg), cfg, tok, tgt), -1).reshape(-1)
        finally:
            torch.nn.functional.cross_entropy = ce

    return f, b, names, sizes, theta, loss, logp, tok.numel()


def hvp(ckpt, path, out):
    f, b, names, sizes, theta, loss, logp, N = setup(ckpt, path)
    v = torch.cat([torch.tensor(np.array(b["v"][k]), dtype=torch.float64).reshape(-1) for k in names])
    th = theta.clone().requires_grad_(True)
    g, = torch.autograd.grad(loss(th), th, create_graph=True)
    hv, = torch.autograd.grad(g, th, v)
    lp = logp(th)
    p = lp.detach().exp()
    # J v by the double-backward trick: d/du (u^T J v) with J^T u linear in u
    u = torch.zeros_like(lp, requires_grad=True)
    jtu, = torch.autograd.grad(lp, th, u, create_graph=True)
    jv, = torch.autograd.grad(jtu, u, v)
    gv, = torch.autograd.grad(lp, th, p * jv / N)
    o = 0
    for k, n in zip(names, sizes):
        for what, ref in (("hv", hv), ("gv", gv)):
            ours = torch.tensor(np.array(b[what][k]), dtype=torch.float64).reshape(-1)
            r = ref[o:o + n]
            err, norm = (ours - r).norm().item(), r.norm().item()
            print("%s %s %.3g %.3g %.3g" % (what, k, err / max(norm, 1e-300), err, norm), file=out)
        o += n


def matrix(ckpt, path, mode):
    """The operator of MODE, dense, and each block type's indices in it."""
    f, b, names, sizes, theta, loss, logp, N = setup(ckpt, path)
    if mode == "gauss-newton":
        J = functorch.jacrev(logp)(theta)
        p = logp(theta).exp()
        A = J.T @ (p[:, None] * J) / N
    else:
        A = functorch.jacrev(functorch.jacrev(loss))(theta)
    if mode == "preconditioned":
        b1, b2, eps = (float(f["optim"].attrs[k]) for k in ("beta1", "beta2", "eps"))
        t = int(f["optim_state"].attrs["t"])
        v = torch.cat([torch.tensor(np.array(f["optim_state/v"][k]), dtype=torch.float64).reshape(-1)
                       for k in names])
        d = ((v / (1 - b2 ** t)).sqrt() + eps) ** -0.5
        A = d[:, None] * A * d[None, :]
    A = (A + A.T) / 2
    blocks, idx, o = [], {}, 0
    for k, n in zip(names, sizes):
        blk = f["params"][k].attrs["block"]
        blk = blk.decode() if isinstance(blk, bytes) else blk
        if blk not in idx:
            idx[blk] = []
            blocks.append(blk)
        idx[blk] += range(o, o + n)
        o += n
    idx["all"] = list(range(o))
    return names, A, blocks + ["all"], idx


def dense(ckpt, path, mode, out):
    names, A, blocks, idx = matrix(ckpt, path, mode)
    for blk in blocks:
        sub = A[idx[blk]][:, idx[blk]]
        lam = torch.linalg.eigvalsh(sub).numpy()[::-1]
        top = list(lam[:3]) + [float("nan")] * (3 - min(3, len(lam)))
        mom = [np.mean(lam ** q) for q in (1, 2, 3, 4)]
        print(blk, len(lam), *("%.17g" % x for x in top + [float(np.trace(sub.numpy()))] + mom + [lam[-1]]),
              file=out)


def eigvecs(ckpt, path, mode, vecs, out):
    names, A, blocks, idx = matrix(ckpt, path, mode)
    ev = h5py.File(vecs, "r")
    for name, g in ev.items():
        if not name.startswith("block_"):
            continue
        blk = g.attrs["block"]
        blk = blk.decode() if isinstance(blk, bytes) else blk
        sub = A[idx[blk]][:, idx[blk]]
        lam, U = torch.linalg.eigh(sub)
        lam, U = lam.numpy()[::-1], U.numpy()[:, ::-1]
        scale = max(abs(lam[0]), abs(lam[-1]))
        for k in range(1, len(g) + 1):
            v = g["v_%d" % k]
            # the block's entries in the reference's order: its tensors as names lists them
            ours = np.concatenate([np.array(v[n], dtype=np.float64).reshape(-1) for n in names if n in v])
            if len(ours) != len(idx[blk]):
                raise SystemExit("%s v_%d: %d entries, the block has %d" % (blk, k, len(ours), len(idx[blk])))
            gap = min(abs(lam[k - 1] - lam[j]) for j in range(len(lam)) if j != k - 1)
            cos = abs(float(ours @ U[:, k - 1])) / np.linalg.norm(ours)
            big = np.argmax(np.abs(ours))
            print(blk, k, "%.17g %.17g %.17g %.17g %d %.17g" % (cos, gap, scale, np.linalg.norm(ours),
                  ours[big] > 0, float(v.attrs["eigenvalue"]) - lam[k - 1]), file=out)


if __name__ == "__main__":
    for line in open(sys.argv[1]):
        job = line.split()
        with open(job[-1], "w") as out:
            if job[0] == "attr":
                print(h5py.File(job[1], "r")[job[2]].attrs[job[3]], file=out)
            else:
                {"hvp": hvp, "dense": dense, "eigvecs": eigvecs}[job[0]](*job[1:-1], out)
