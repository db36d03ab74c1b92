#!/usr/bin/python3
"""Independent reference for sw-spectrum: numpy's SVD in float64 of the
float32 matrices read with h5py (or safetensors parsed by
norms_reference.py), and numpy's least squares for --fit. Used by
t0110-spectrum-numpy.t; not by the tools.

usage: spectrum_reference.py check FILE ACTUAL [--per-head] [--top K]
           ACTUAL is sw-spectrum's output for FILE with the same options;
           checks every sigma_i >= 1e-4 sigma_max within 1e-5 relative of
           numpy, the rest within 1e-6 sigma_max; exit 1 if not
       spectrum_reference.py fit FILE...
           prints role exp_scale exp_d_model for sigma_top, fitted by
           numpy.linalg.lstsq from numpy's sigma_max and the files' lr/wd
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from norms_reference import read_h5, read_safetensors  # noqa: E402


def matrices(path, per_head):
    """(name, head, float64 matrix) for every matrix (heads of q/k/v/o)."""
    t, tied = read_h5(path) if path.endswith(".h5") else read_safetensors(path)
    heads = {}
    if path.endswith(".h5"):
        import h5py
        with h5py.File(path, "r") as f:
            for n, d in f["params"].items():
                if "n_heads" in d.attrs:
                    heads[n] = (int(d.attrs["n_heads"]), int(d.attrs["head_dim"]))
    for name, w in t.items():
        if w.ndim != 2:
            continue
        w = w.astype(np.float64)
        if not per_head:
            yield name, "", w
            continue
        if name not in heads:
            continue
        nh, hd = heads[name]
        for h in range(nh):
            if ".o_proj." in name:
                yield name, str(h), w[:, h * hd:(h + 1) * hd]
            else:
                yield name, str(h), w[h * hd:(h + 1) * hd, :]
    if tied and "lm_head.weight" not in t and not per_head:
        yield "lm_head.weight", "", t["model.embed_tokens.weight"].astype(np.float64)


def check(path, actual, per_head, top):
    rows = [l.rstrip("\n").split("\t") for l in open(actual)]
    col = {c: i for i, c in enumerate(rows[0])}
    got = {}
    for r in rows[1:]:
        key = (r[col["name"]], r[col["head"]] if per_head else "")
        got.setdefault(key, []).append((int(r[col["index"]]), float(r[col["sigma"]])))
    worst_rel = worst_abs = 0.0
    n = 0
    for name, head, w in matrices(path, per_head):
        ref = np.linalg.svd(w, compute_uv=False)
        if top:
            ref = ref[:top]
        mine = sorted(got.pop((name, head), []))
        if [i for i, _ in mine] != list(range(1, len(ref) + 1)):
            sys.exit("%s head %s: %d values, numpy has %d" % (name, head, len(mine), len(ref)))
        s = np.array([v for _, v in mine])
        big = ref >= 1e-4 * ref[0]
        worst_rel = max(worst_rel, float(np.max(np.abs(s[big] - ref[big]) / ref[big])))
        worst_abs = max(worst_abs, float(np.max(np.abs(s - ref)) / ref[0]))
        n += 1
    if got:
        sys.exit("rows for matrices numpy does not know: %s" % sorted(got)[:3])
    print("%d matrices: sigma >= 1e-4 sigma_max within %.2g relative, all within %.2g sigma_max"
          % (n, worst_rel, worst_abs))
    if worst_rel > 1e-5 or worst_abs > 1e-6:
        sys.exit(1)


def fit(paths):
    import h5py
    pts = {}
    for p in paths:
        with h5py.File(p, "r") as f:
            d_model = float(f["config"].attrs["d_model"])
            for name, ds in f["params"].items():
                if ds.ndim != 2:
                    continue
                a = ds.attrs
                lr, wd = float(a["lr"]), float(a["wd"])
                mode = a["wd_mode"].decode() if isinstance(a["wd_mode"], bytes) else a["wd_mode"]
                scale = np.sqrt(lr / wd) if mode == "coupled" else lr / np.sqrt(wd)
                s = np.linalg.svd(ds[...].astype(np.float64), compute_uv=False)[0]
                role = a["role"].decode() if isinstance(a["role"], bytes) else a["role"]
                pts.setdefault(role, []).append((s, scale, d_model))
    for role, p in pts.items():
        p = np.array(p)
        X = np.column_stack([np.ones(len(p)), np.log(p[:, 1]), np.log(p[:, 2])])
        beta = np.linalg.lstsq(X, np.log(p[:, 0]), rcond=None)[0]
        print("%s\t%.9g\t%.9g" % (role, beta[1], beta[2]))


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "check":
        a = sys.argv[4:]
        top = int(a[a.index("--top") + 1]) if "--top" in a else 0
        check(sys.argv[2], sys.argv[3], "--per-head" in a, top)
    elif len(sys.argv) >= 3 and sys.argv[1] == "fit":
        fit(sys.argv[2:])
    else:
        sys.exit(__doc__)


main()
