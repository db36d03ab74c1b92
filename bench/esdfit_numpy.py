#!/usr/bin/python3
"""What a user would otherwise run for sw-spectrum --esd-fit, for
bench/hessian: every matrix read with h5py, numpy.linalg.svd(W,
compute_uv=False) (LAPACK sgesdd, float32), lambda = sigma^2 / N, and the
power-law fit of tests/e2e/esdfit_reference.py (the same estimator in
numpy, a scan of every candidate x_min).

usage: esdfit_numpy.py FILE.h5   (prints name alpha xmin; the seconds in
svd on stderr)
"""
import os
import sys
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "e2e"))
from esdfit_reference import mp, powerlaw  # noqa: E402

svd_seconds = 0.0
with h5py.File(sys.argv[1], "r") as f:
    for name, d in f["params"].items():
        if d.ndim != 2:
            continue
        w = d[...]
        t = time.time()
        s = np.linalg.svd(w, compute_uv=False).astype(np.float64)
        svd_seconds += time.time() - t
        N, M = max(w.shape), min(w.shape)
        lam = s * s / N
        alpha, se, xmin, D, nt = powerlaw(lam)
        mp(lam, M / N)
        print("%s\t%.9g\t%.9g" % (name, alpha, xmin), flush=True)
print("svd_seconds %.3f" % svd_seconds, file=sys.stderr)
