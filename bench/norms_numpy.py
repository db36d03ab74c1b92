#!/usr/bin/python3
"""What a user would otherwise run: the sw-norms table with h5py + numpy.

usage: norms_numpy.py FILE.h5   (prints name role rows cols norms...)

One tensor at a time, read with h5py into memory, norms by numpy in the
tensor's float32 (np.linalg.norm(W, 2) is a full SVD, LAPACK sgesdd).
"""
import sys

import h5py
import numpy as np


def norms(w):
    dout, din = w.shape
    rows = np.linalg.norm(w, axis=1)
    cols = np.linalg.norm(w, axis=0)
    s = np.linalg.norm(w, 2)
    fro = np.linalg.norm(w)
    return [dout, din, np.sqrt(din) * rows.max(), np.sqrt(din / dout) * s,
            cols.max() / np.sqrt(dout), s, fro, fro / np.sqrt(dout * din), np.abs(w).max()]


with h5py.File(sys.argv[1], "r") as f:
    p = f["params"]
    gamma = p["model.norm.weight"][...] if "model.norm.weight" in p else None
    for name, d in p.items():
        if d.ndim != 2:
            continue
        w = d[...]
        role = d.attrs["role"]
        out = [[name, role] + norms(w.T if role == "embed" else w)]
        if role == "lm_head" and gamma is not None:
            out.append([name, "lm_head_folded"] + norms(w * gamma[None, :]))
        for r in out:
            print("\t".join(str(x) if isinstance(x, (str, int)) else "%.9g" % x for x in r))
