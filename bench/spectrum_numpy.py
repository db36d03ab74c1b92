#!/usr/bin/python3
"""What a user would otherwise run: singular values of every matrix with
h5py + numpy.

usage: spectrum_numpy.py FILE.h5 [NAME...]   (prints name index sigma)

One tensor at a time (only the NAMEs given, if any), read with h5py into
memory as float32, numpy.linalg.svd(W, compute_uv=False): LAPACK sgesdd on
the float32 matrix. The seconds spent in svd go to stderr.
"""
import sys
import time

import h5py
import numpy as np

svd_seconds = 0.0
with h5py.File(sys.argv[1], "r") as f:
    p = f["params"]
    for name, d in p.items():
        if d.ndim != 2 or (len(sys.argv) > 2 and name not in sys.argv[2:]):
            continue
        w = d[...]
        t = time.time()
        s = np.linalg.svd(w, compute_uv=False)
        svd_seconds += time.time() - t
        sys.stdout.write("".join("%s\t%d\t%.9g\n" % (name, i + 1, x) for i, x in enumerate(s)))
print("svd_seconds %.3f" % svd_seconds, file=sys.stderr)
