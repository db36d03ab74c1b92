#!/usr/bin/env python3
"""Per-head Q/K scales of a scalewatch checkpoint, computed independently of
sw-qkdrift (h5py and numpy, float64), as docs/numerics.md defines them: the head's
rows of W_eff diag(gamma) with W_eff the projection with its multiplier
applied (scalar s W, row diag(r) W, column W diag(c)) and gamma the
attn_norm gain; with QK-norm the q_norm/k_norm gains instead. Prints the
columns of sw-qkdrift from `layer` on: layer head kv_head source q_rms
k_rms product log2_ratio q_mult k_mult mult_product mult_log2_ratio.

    qk_reference.py CHECKPOINT
"""
import sys

import h5py
import numpy as np


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def rms(a):
    return float(np.sqrt(np.mean(np.square(a))))


def main(path):
    f = h5py.File(path, "r")
    c = f["config"].attrs
    H, KV, D, L = (int(c[k]) for k in ("n_heads", "n_kv_heads", "d_model", "n_layers"))
    hd = int(c["head_dim"]) if "head_dim" in c else D // H
    qk_norm = bool(c["qk_norm"])
    mode = text(c["multipliers"])
    t = {}
    for name, d in f["params"].items():
        t[(text(d.attrs["role"]), int(d.attrs["layer"]))] = np.asarray(d, dtype=np.float64)

    def effective(role, l):
        w = t[(role, l)]
        m = t.get((role + "_mult", l))
        if m is not None:
            if m.size == 1:
                w = w * m.reshape(())
            elif m.size == w.shape[0] and (w.shape[0] != w.shape[1] or mode == "row"):
                w = m[:, None] * w
            else:
                w = w * m[None, :]
        g = t.get(("attn_norm", l))
        w = w if g is None else w * g[None, :]
        # a scale design's gains of the projection itself
        gi, go = t.get((role + "_gain_in", l)), t.get((role + "_gain_out", l))
        w = w if gi is None else w * gi[None, :]
        return w if go is None else go[:, None] * w

    def mult_of(role, l, head):
        m = t.get((role + "_mult", l))
        if m is None:
            return None
        rows = t[(role, l)].shape[0]
        if m.size == 1:
            return abs(float(m.reshape(())))
        if m.size == rows and (rows != D or mode == "row"):
            return rms(m[head * hd:(head + 1) * hd])
        return rms(m)

    def gain(role, l, head):
        g = t.get((role, l))
        if g is None:
            return 1.0
        return rms(g) if g.size == hd else rms(g[head * hd:(head + 1) * hd])

    for l in range(L):
        gains = qk_norm and ((("q_norm", l) in t) or (("k_norm", l) in t))
        src = "qk_norm_gains" if gains else "qk_norm_unit" if qk_norm else "matrices"
        if src == "matrices":
            q, k = effective("q", l), effective("k", l)
        for h in range(H):
            kv = h // (H // KV)
            if src == "matrices":
                qr, kr = rms(q[h * hd:(h + 1) * hd]), rms(k[kv * hd:(kv + 1) * hd])
            else:
                qr, kr = gain("q_norm", l, h), gain("k_norm", l, kv)
            row = [str(l), str(h), str(kv), src] + ["%.17g" % v for v in
                                                   (qr, kr, qr * kr, np.log2(qr / kr))]
            qm, km = mult_of("q", l, h), mult_of("k", l, kv)
            if qm is None or km is None:
                row += [""] * 4
            else:
                row += ["%.17g" % v for v in (qm, km, qm * km, np.log2(qm / km))]
            print("\t".join(row))


if __name__ == "__main__":
    main(sys.argv[1])
