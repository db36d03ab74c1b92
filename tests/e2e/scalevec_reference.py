#!/usr/bin/python3
"""Independent reference for sw-norms --scale-vectors: every norm gain,
multiplier and scale design's gain (X.gain_in: coupled with X's columns,
X.gain_out: with X's rows), and a reparameterized gain's direction and
magnitude (X.direction, X.magnitude: no coupling) of an HDF5 checkpoint (read with h5py) or a Hugging Face
safetensors directory (parsed here), its statistics and its coupling with
the matrices that read it, in numpy float64. Used by
t0120-scale-vectors-numpy.t; not by the tools.

usage: scalevec_reference.py FILE   (prints name n mean sd min max
anisotropy cv coupling, sorted by name; an empty field where undefined)
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from norms_reference import read_h5, read_safetensors  # noqa: E402

# a Pre-Norm gain's name -> the matrices reading its output (same prefix)
READERS = {
    "input_layernorm.weight": ["self_attn.q_proj.weight", "self_attn.k_proj.weight",
                               "self_attn.v_proj.weight"],
    "post_attention_layernorm.weight": ["mlp.gate_proj.weight", "mlp.up_proj.weight"],
    "self_attn.o_in_norm.weight": ["self_attn.o_proj.weight"],
    "mlp.down_in_norm.weight": ["mlp.down_proj.weight"],
}


def readers(name, params, tied):
    if name == "model.norm.weight":
        return [params["model.embed_tokens.weight" if tied else "lm_head.weight"]]
    for suffix, mats in READERS.items():
        if name.endswith(suffix):
            prefix = name[:-len(suffix)]
            return [params[prefix + m] for m in mats if prefix + m in params]
    return []


def fmt(x):
    return "" if np.isnan(x) else "inf" if np.isinf(x) else "%.17g" % x


path = sys.argv[1]
params, tied = read_safetensors(path) if not path.endswith(".h5") else read_h5(path)
rows = []
for name, a in params.items():
    is_gain = name.endswith("norm.weight") or name.endswith("layernorm.weight")
    # a scale design's gain of one matrix: its input side (columns) or its
    # output side (rows)
    design = name.endswith(".gain_in") or name.endswith(".gain_out")
    reparam = name.endswith(".direction") or name.endswith(".magnitude")
    if a.ndim != 1 or not (is_gain or design or reparam or name.endswith(".multiplier")):
        continue
    g = a.astype(np.float64)
    absg = np.abs(g)
    mean, sd = g.mean(), g.std()
    aniso = absg.max() / absg.min() if absg.min() > 0 else np.inf
    cv = sd / abs(mean) if mean != 0 else np.nan
    coupling = np.nan
    mats = [m for m in readers(name, params, tied) if m.ndim == 2 and m.shape[1] == g.size]
    if reparam:
        mats = []
    if design:
        w = params[name.rsplit(".", 1)[0] + ".weight"]
        mats = [w.T if name.endswith(".gain_out") else w]
    if mats:
        col = np.sqrt(sum((m.astype(np.float64) ** 2).sum(axis=0) for m in mats))
        if absg.std() > 0 and col.std() > 0:
            coupling = np.corrcoef(absg, col)[0, 1]
    rows.append([name, str(g.size)] + [fmt(x) for x in (mean, sd, g.min(), g.max(), aniso, cv,
                                                        coupling)])
for r in sorted(rows):
    print("\t".join(r))
