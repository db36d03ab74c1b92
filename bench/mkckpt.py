#!/usr/bin/python3
"""Write a large scalewatch HDF5 v1 checkpoint for the benchmarks, with h5py.

usage: mkckpt.py OUT.h5 [--vocab V] [--d D] [--layers L] [--spike S] [--seed N]
                      [--no-embed] [--head-dim HD] [--kv-heads KV] [--ffn F]

Tensors: the embedding [V, D], q/k/v/o [D, D] of L layers, the final norm
and an untied lm_head [V, D]: with V = 32000, D = 4096, L = 2 about 1.1 GB.
Heads of HD (default 128); --kv-heads makes k, v [KV*HD, D] (GQA); --ffn F
adds gate, up [F, D] and down [D, F] to every layer (a Llama MLP).
Entries are Gaussian with variance 1/D; --spike S adds a rank-one term
whose singular value is S times the bulk's edge (trained weights have a
separated top singular value; S = 0 is pure noise, the hard case for
Krylov methods).
"""
import argparse

import h5py
import numpy as np

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--vocab", type=int, default=32000)
p.add_argument("--d", type=int, default=4096)
p.add_argument("--layers", type=int, default=2)
p.add_argument("--spike", type=float, default=1.5)
p.add_argument("--seed", type=int, default=1)
p.add_argument("--no-embed", action="store_true", help="leave the embedding out")
p.add_argument("--head-dim", type=int, default=128)
p.add_argument("--kv-heads", type=int, default=0, help="0: as many as the heads")
p.add_argument("--ffn", type=int, default=0, help="d_ff of an MLP per layer (0: none)")
a = p.parse_args()
rng = np.random.default_rng(a.seed)
D, V = a.d, a.vocab
H = D // a.head_dim
KV = a.kv_heads or H


def matrix(rows, cols):
    w = rng.standard_normal((rows, cols), dtype=np.float32)
    w *= np.float32(1.0 / np.sqrt(cols))
    if a.spike > 0:
        edge = 1.0 + np.sqrt(rows / cols)      # the bulk's largest singular value
        u = rng.standard_normal(rows).astype(np.float32)
        v = rng.standard_normal(cols).astype(np.float32)
        u /= np.linalg.norm(u)
        v /= np.linalg.norm(v)
        w += np.float32(a.spike * edge) * np.outer(u, v).astype(np.float32)
    return w


def put(f, name, data, block, role, layer, mup, group, **extra):
    d = f["params"].create_dataset(name, data=data)
    d.attrs.update(dict(block=block, role=role, layer=np.int64(layer),
                        kind="matrix" if data.ndim == 2 else "vector",
                        mup=mup, group=group, lr=1e-3, wd=0.1, wd_mode="coupled", **extra))


with h5py.File(a.out + ".part", "w") as f:
    f.attrs.update(dict(scalewatch_format="checkpoint", format_version=np.int64(1),
                        step=np.int64(1000), tokens=np.int64(1000 * 2**20)))
    f.create_group("config").attrs.update(dict(
        arch="llama", vocab_size=np.int64(V), d_model=np.int64(D), n_layers=np.int64(a.layers),
        n_heads=np.int64(H), n_kv_heads=np.int64(KV), head_dim=np.int64(a.head_dim),
        d_ff=np.int64(a.ffn or 4 * D), seq_len=np.int64(2048), rope_theta=10000.0, norm_eps=1e-5,
        tie_embeddings=np.int64(0), qk_norm=np.int64(0), multipliers="none"))
    f.create_group("params")
    if not a.no_embed:
        put(f, "model.embed_tokens.weight", matrix(V, D), "emb", "embed", -1, "vector-like", "input")
    for l in range(a.layers):
        for r, blk in (("q", "qk"), ("k", "qk"), ("v", "vo"), ("o", "vo")):
            nh = KV if r in "kv" else H
            shape = (D, H * a.head_dim) if r == "o" else (nh * a.head_dim, D)
            put(f, f"model.layers.{l}.self_attn.{r}_proj.weight", matrix(*shape), blk, r, l,
                "matrix-like", "hidden", n_heads=np.int64(nh), head_dim=np.int64(a.head_dim))
        if a.ffn:
            for r, shape in (("gate", (a.ffn, D)), ("up", (a.ffn, D)), ("down", (D, a.ffn))):
                put(f, f"model.layers.{l}.mlp.{r}_proj.weight", matrix(*shape), "ffn", r, l,
                    "matrix-like", "hidden")
    put(f, "model.norm.weight", (1 + 0.1 * rng.standard_normal(D)).astype(np.float32),
        "norm", "final_norm", -1, "vector-like", "output", norm_type="input")
    put(f, "lm_head.weight", matrix(V, D), "out", "lm_head", -1, "vector-like", "output")

import os
os.replace(a.out + ".part", a.out)
