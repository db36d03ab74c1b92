#!/usr/bin/python3
"""params_close.py A.h5 B.h5 TOL [GROUP...]: every float dataset of the
groups (default /params and /optim_state) of checkpoint A agrees with B's
to TOL: max |a - b| <= TOL max |b| over each dataset (relative to the
tensor's own scale, so that entries near zero do not count alone). Prints
each dataset that does not, with its error; exit 1 if any, or if A lacks a
dataset B has."""
import sys

import h5py
import numpy as np

a, b, tol = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r"), float(sys.argv[3])
groups = sys.argv[4:] or ["params", "optim_state"]
bad = 0


def check(name, obj):
    global bad
    if not isinstance(obj, h5py.Dataset) or obj.dtype.kind != "f":
        return
    if obj.name not in a:
        print(obj.name, "missing in", sys.argv[1])
        bad = 1
        return
    x, y = a[obj.name][()].astype(np.float64), obj[()].astype(np.float64)
    scale = np.abs(y).max() if y.size else 0.0
    err = np.abs(x - y).max() / scale if scale > 0 else np.abs(x - y).max()
    if not err <= tol:
        print(obj.name, err)
        bad = 1


for g in groups:
    b[g].visititems(check)
sys.exit(bad)
