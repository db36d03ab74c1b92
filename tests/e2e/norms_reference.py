#!/usr/bin/python3
"""Independent reference for sw-norms: the same table computed with numpy
(float64, full SVD) from checkpoints read with h5py, or safetensors parsed
here with struct+json. Used by t0100-numpy-crosscheck.t; not by the tools.

usage: norms_reference.py FILE...   (prints name role rows cols norms...)
"""
import json
import os
import struct
import sys

import numpy as np


def read_safetensors(path):
    d = path if os.path.isdir(path) else os.path.dirname(path)
    files = [os.path.join(d, "model.safetensors")] if os.path.isdir(path) else [path]
    out = {}
    for f in files:
        raw = open(f, "rb").read()
        (n,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8:8 + n])
        base = 8 + n
        for name, e in header.items():
            if name == "__metadata__":
                continue
            b, end = e["data_offsets"]
            buf = raw[base + b:base + end]
            if e["dtype"] == "F32":
                a = np.frombuffer(buf, dtype="<f4")
            elif e["dtype"] == "BF16":
                a = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
            else:
                raise SystemExit("unexpected dtype " + e["dtype"])
            out[name] = a.reshape(e["shape"])
    cfg = json.load(open(os.path.join(d, "config.json")))
    return out, bool(cfg.get("tie_word_embeddings", False))


def read_h5(path):
    import h5py
    with h5py.File(path, "r") as f:
        out = {k: np.array(v) for k, v in f["params"].items()}
        tied = bool(f["config"].attrs["tie_embeddings"])
    return out, tied


def norms(w):
    """rows x cols operator W (float64)"""
    dout, din = w.shape
    s = np.linalg.svd(w, compute_uv=False)[0]
    fro = np.linalg.norm(w)
    return [dout, din,
            np.sqrt(din) * np.linalg.norm(w, axis=1).max(),
            np.sqrt(din / dout) * s,
            np.linalg.norm(w, axis=0).max() / np.sqrt(dout),
            s, fro, fro / np.sqrt(dout * din), np.abs(w).max()]


def main():
    for path in sys.argv[1:]:
        t, tied = read_h5(path) if path.endswith(".h5") else read_safetensors(path)
        order = sorted(t, key=lambda n: (n != "model.embed_tokens.weight",
                                         n in ("model.norm.weight", "lm_head.weight"),
                                         n == "lm_head.weight",
                                         int(n.split(".")[2]) if n.startswith("model.layers.") else -1,
                                         ["self_attn.q", "self_attn.k", "self_attn.v", "self_attn.o",
                                          "mlp.gate", "mlp.up", "mlp.down", ""].index(
                                              next((p for p in ["self_attn.q", "self_attn.k",
                                                                "self_attn.v", "self_attn.o",
                                                                "mlp.gate", "mlp.up", "mlp.down"]
                                                    if p in n), ""))))
        rows = []
        for name in order:
            w = t[name].astype(np.float64)
            if w.ndim != 2:
                continue
            role = {"model.embed_tokens.weight": "embed", "lm_head.weight": "lm_head"}.get(
                name, name.split(".")[-2].replace("_proj", ""))
            rows.append([name, role] + norms(w.T if role == "embed" else w))
        head = "lm_head.weight"
        w = t[head] if head in t else t["model.embed_tokens.weight"] if tied else None
        if w is not None:
            w = w.astype(np.float64)
            if head not in t:
                rows.append([head, "lm_head"] + norms(w))
            g = t["model.norm.weight"].astype(np.float64)
            rows.append([head, "lm_head_folded"] + norms(w * g[None, :]))
        for r in rows:
            print("\t".join(str(x) if isinstance(x, (str, int)) else "%.9g" % x for x in r))


if __name__ == "__main__":
    main()
