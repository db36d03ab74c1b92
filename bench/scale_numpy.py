#!/usr/bin/python3
"""What a user would otherwise run on a BF16 safetensors checkpoint: numpy
with the safetensors format read by hand (json + np.memmap; numpy has no
bfloat16, so the BF16 bits are shifted into float32's high half).

usage: scale_numpy.py DIR NAME...

For each named tensor of DIR (a sharded checkpoint: its
model.safetensors.index.json), one line:
  name rows cols read_s svd_s norms_s sigma_max frobenius max_abs
read_s: mapping the shard and converting the tensor to float32; svd_s:
np.linalg.svd(W, compute_uv=False) (LAPACK sgesdd, float32: what
np.linalg.norm(W, 2) computes, and every singular value); norms_s: the
row and column norms, Frobenius and max |w| of the sw-norms table.
"""
import json
import os
import sys
import time

import numpy as np

DTYPES = {"BF16": "<u2", "F16": "<f2", "F32": "<f4"}


def tensor(path, name):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        entry = json.loads(f.read(n))[name]
    b, e = entry["data_offsets"]
    raw = np.memmap(path, dtype=DTYPES[entry["dtype"]], mode="r", offset=8 + n + b,
                    shape=tuple(entry["shape"]))
    if entry["dtype"] == "BF16":
        return (raw.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return np.array(raw, dtype=np.float32)


top = sys.argv[1]
with open(os.path.join(top, "model.safetensors.index.json")) as f:
    weight_map = json.load(f)["weight_map"]
for name in sys.argv[2:]:
    t0 = time.perf_counter()
    w = tensor(os.path.join(top, weight_map[name]), name)
    t1 = time.perf_counter()
    s = np.linalg.svd(w, compute_uv=False)
    t2 = time.perf_counter()
    np.linalg.norm(w, axis=1).max()       # the RMS->inf and 1->RMS norms' parts
    np.linalg.norm(w, axis=0).max()
    fro = np.linalg.norm(w)
    max_abs = np.abs(w).max()
    t3 = time.perf_counter()
    print("%s\t%d\t%d\t%.3f\t%.3f\t%.3f\t%.9g\t%.9g\t%.9g"
          % (name, w.shape[0], w.shape[1], t1 - t0, t2 - t1, t3 - t2, s[0], fro, max_abs),
          flush=True)
    del w, s
