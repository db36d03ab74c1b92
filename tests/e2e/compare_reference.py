#!/usr/bin/python3
"""sw-compare recomputed with numpy in float64 from the definitions
(docs/numerics.md), for t0222-compare-numpy.t; not used by the tools.

usage: compare_reference.py A.h5 B.h5 K ACTUAL

ACTUAL is `sw-compare --top-k K A.h5 B.h5`'s table. Reads both
checkpoints with h5py (the float32 matrices made float64), and for every
2-D tensor of both checks the row of ACTUAL with its name, column by
column: rows cols k; rel_change = ||B - A||_F / ||A||_F; sigma_max and the
stable rank ||W||_F^2 / sigma_max^2 of each from numpy's SVD, their
relative change B/A - 1; the principal angles between the spans of the
top k right (and left) singular vectors (Bjorck and Golub 1973: the
cosines are the singular values of X_A^T X_B), overlap = their mean
cos^2, min_cos the smallest; alpha of each, the Clauset-Shalizi-Newman fit
of esdfit_reference.py on lambda = sigma^2 / max(rows, cols), and
alpha(B) - alpha(A). Each number must be within RTOL relative (plus ATOL)
of numpy's; the matrices of ACTUAL must be those of both files. Prints
what differs; exit 1 if anything does.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from esdfit_reference import powerlaw  # noqa: E402

# The tool prints %.9g (5e-10 relative). Its spectra come from the Gram
# matrix in double, numpy's from an SVD in double of the same float32
# data: the values agree to about 1e-12 of sigma_max (the Gram matrix
# squares the condition: sigma_i far below sigma_max lose digits, measured
# below 1e-7 relative in spectrum.h), the top singular vectors to about
# 1e-16 sigma_max^2 / (sigma_k^2 - sigma_k+1^2). 1e-6 relative holds all
# of that with room; ATOL covers the changes that are near zero (a
# difference of two numbers each good to 1e-9 of itself, of size <= 10).
RTOL = 1e-6
ATOL = 1e-8


def read(path):
    import h5py
    with h5py.File(path, "r") as f:
        params = {k: np.array(v, dtype=np.float64) for k, v in f["params"].items()
                  if len(v.shape) == 2}
        step = int(f.attrs["step"])
    return params, step


def principal(xa, xb):
    """overlap and min cos of the spans of the columns of xa and xb"""
    c = np.linalg.svd(xa.T @ xb, compute_uv=False)
    return np.mean(c * c), min(c.min(), 1.0)


def alpha(s, rows, cols):
    lam = s * s / max(rows, cols)
    return powerlaw(lam)[0]


def reference(a, b, k):
    rows, cols = a.shape
    k = min(k, rows, cols)
    ua, sa, vta = np.linalg.svd(a, full_matrices=False)
    ub, sb, vtb = np.linalg.svd(b, full_matrices=False)
    fa, fb = np.sum(a * a), np.sum(b * b)
    sra, srb = fa / sa[0] ** 2, fb / sb[0] ** 2
    ro, rc = principal(vta[:k].T, vtb[:k].T)
    lo, lc = principal(ua[:, :k], ub[:, :k])
    ala, alb = alpha(sa, rows, cols), alpha(sb, rows, cols)
    return {"rows": rows, "cols": cols, "k": k,
            "rel_change": np.linalg.norm(b - a) / np.linalg.norm(a),
            "sigma_max_a": sa[0], "sigma_max_b": sb[0], "sigma_max_change": sb[0] / sa[0] - 1,
            "stable_rank_a": sra, "stable_rank_b": srb, "stable_rank_change": srb / sra - 1,
            "right_overlap": ro, "right_min_cos": rc, "left_overlap": lo, "left_min_cos": lc,
            "alpha_a": ala, "alpha_b": alb, "alpha_change": alb - ala}


def main():
    pa, k, actual = sys.argv[1], int(sys.argv[3]), sys.argv[4]
    a, step_a = read(pa)
    b, step_b = read(sys.argv[2])
    with open(actual) as f:
        header = f.readline().rstrip("\n").split("\t")
        rows = [dict(zip(header, line.rstrip("\n").split("\t"))) for line in f]
    bad = 0
    names = [r["name"] for r in rows]
    want = sorted(set(a) & set(b))
    if sorted(names) != want:
        print("matrices: %s, numpy's: %s" % (sorted(names), want))
        bad = 1
    for r in rows:
        if int(r["step_a"]) != step_a or int(r["step_b"]) != step_b:
            print("%s: steps %s %s, the files' %d %d" % (r["name"], r["step_a"], r["step_b"],
                                                        step_a, step_b))
            bad = 1
        if r["name"] not in a or r["name"] not in b:
            continue
        ref = reference(a[r["name"]], b[r["name"]], k)
        for col, want_v in ref.items():
            got = float(r[col]) if r[col] != "" else float("nan")
            if not abs(got - want_v) <= RTOL * abs(want_v) + ATOL:
                print("%s %s: %r, numpy %r" % (r["name"], col, got, want_v))
                bad = 1
    print("%d matrices checked" % len(rows))
    sys.exit(bad)


if __name__ == "__main__":
    main()
