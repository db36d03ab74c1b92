#!/usr/bin/python3
"""sw-spectrum --esd-fit recomputed with numpy, written here from the
definitions (t0285-esdfit-numpy.t), on the same eigenvalues: the singular
values sw-spectrum prints (%.9g), lambda = sigma^2 / N, N the larger side.

usage: esdfit_reference.py VALUES.tsv LS.tsv

VALUES.tsv is sw-spectrum's default table (file step name ... index
sigma), LS.tsv sw-ls's (the shapes). Prints, per matrix in order of
appearance, the --esd-fit columns: name count lambda_max alpha alpha_se
xmin ks_d tail alpha_weighted log_spectral_norm log_norm mp_sigma2
mp_edge spikes (alpha_weighted, log_spectral_norm and log_norm of the
eigenvalues sigma^2, WeightWatcher's scale; the rest of lambda), and
warn: WeightWatcher's labels of a fit not to trust,
written here from their definitions (short-tail: a tail of fewer than 50
eigenvalues, WeightWatcher's min_evals; over-trained: alpha < 2;
under-trained: alpha > 6; joined by commas, empty for none).

Power law (Clauset, Shalizi, Newman 2009): for every distinct eigenvalue
but the largest as x_min, alpha = 1 + n / sum ln(x / x_min) over the tail
x >= x_min and the KS distance max |1 - (x / x_min)^(1 - alpha) - j / n|
(j = 0 .. n - 1 over the sorted tail); the smallest distance wins, the
first on a tie. Marchenko-Pastur: the law's median for ratio y = M/N by
the trapezoid rule on x = a + t^2 (2,000,001 points), s^2 = median of the
bulk / that, the bulk the eigenvalues at or below s^2 (1 + sqrt y)^2,
until it no longer changes.
"""
import sys

import numpy as np


def powerlaw(lam):
    x = np.sort(lam[lam > 0])
    n = len(x)
    best = (np.inf, 0, 0, 0)
    for i in range(n):
        if (i > 0 and x[i] == x[i - 1]) or x[i] == x[-1]:
            continue
        tail = x[i:]
        nt = n - i
        alpha = 1 + nt / np.sum(np.log(tail / x[i]))
        D = np.max(np.abs(1 - (tail / x[i]) ** (1 - alpha) - np.arange(nt) / nt))
        if D < best[0]:
            best = (D, alpha, x[i], nt)
    D, alpha, xmin, nt = best
    return alpha, (alpha - 1) / np.sqrt(nt), xmin, D, nt


def mp_median(y):
    a, b = (1 - np.sqrt(y)) ** 2, (1 + np.sqrt(y)) ** 2
    t = np.linspace(0, np.sqrt(b - a), 2000001)
    x = a + t * t
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(x > 0, np.sqrt(np.clip((b - x) * (x - a), 0, None)) / (2 * np.pi * y * x) * 2 * t, 0)
    if y == 1:
        p[0] = 2 / np.pi      # the limit at t = 0: sqrt(4 - t^2) / pi
    c = np.concatenate([[0], np.cumsum((p[1:] + p[:-1]) / 2 * np.diff(t))])
    c /= c[-1]
    return np.interp(0.5, c, x)


def mp(lam, y):
    v = np.sort(lam)
    m = len(v)
    med0 = mp_median(y)
    bulk = m
    for _ in range(100):
        s2 = np.median(v[:bulk]) / med0
        edge = s2 * (1 + np.sqrt(y)) ** 2
        nxt = int(np.sum(v <= edge))
        if nxt == bulk or nxt == 0:
            break
        bulk = nxt
    return s2, edge, m - nxt


def warn(alpha, tail):
    w = ["short-tail"] if tail < 50 else []
    if alpha < 2:
        w.append("over-trained")
    elif alpha > 6:
        w.append("under-trained")
    return ",".join(w)


def main():
    shape = {}
    for line in open(sys.argv[2]).read().splitlines()[1:]:
        f = line.split("\t")
        if "x" in f[7]:
            shape[f[1]] = tuple(int(d) for d in f[7].split("x"))
    sig, order = {}, []
    lines = open(sys.argv[1]).read().splitlines()
    head = lines[0].split("\t")
    ni, si = head.index("name"), head.index("sigma")
    for line in lines[1:]:
        f = line.split("\t")
        if f[ni] not in sig:
            sig[f[ni]] = []
            order.append(f[ni])
        sig[f[ni]].append(float(f[si]))
    for name in order:
        rows, cols = shape[name]
        N, M = max(rows, cols), min(rows, cols)
        lam = np.array(sig[name]) ** 2 / N
        alpha, se, xmin, D, nt = powerlaw(lam)
        s2, edge, spikes = mp(lam, M / N)
        lmax = lam.max()
        # WeightWatcher's scale metrics (its apply_norm_metrics, 0.7.x) are
        # of its eigenvalues sv * sv, which since 0.6.5 have no 1/N:
        # log_norm = log10(sum(evals)), log_spectral_norm =
        # log10(max(evals)), alpha_weighted = alpha * log_spectral_norm
        ww = np.array(sig[name]) ** 2
        print(name, len(lam), *("%.12g" % v for v in (lmax, alpha, se, xmin, D)), nt,
              *("%.12g" % v for v in (alpha * np.log10(ww.max()), np.log10(ww.max()), np.log10(ww.sum()), s2, edge)),
              spikes, warn(alpha, nt), sep="\t")


if __name__ == "__main__":
    main()
