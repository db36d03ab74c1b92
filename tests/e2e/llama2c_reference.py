#!/usr/bin/python3
"""An independent reader of llama2.c's checkpoint files (numpy and struct,
after llama2.c's run.c and export.py) and references computed from what
it reads, for the tests of the real model (t0275-real-model.t); not used
by the tools.

usage: llama2c_reference.py norms FILE
           sw-norms' table (role rows cols norms..., as norms_reference.py
           prints it) in float64 from the weights as stored
       llama2c_reference.py spectrum FILE ACTUAL
           checks sw-spectrum's output ACTUAL for FILE against numpy's SVD
           in float64 (sigma_i >= 1e-4 sigma_max within 1e-5 relative, the
           rest within 1e-6 sigma_max); exit 1 if not
       llama2c_reference.py logits FILE OURS TOKEN... [--rotate-half] [--bf16]
           llama2.c's own forward pass (run.c: interleaved RoPE on the q
           and k rows as stored) in float64 on the tokens; prints
           "logits REL", the largest |ours - ref| / max|ref| over the
           positions, OURS being mklogits' output. --rotate-half applies
           Hugging Face's RoPE to the rows as stored instead (what a reader
           that forgot to reorder them would compute): it must disagree.
           --bf16: on the weights rounded to BF16 (nearest even) first
       llama2c_reference.py write FILE OUT [--v1] [--untied] [--no-tables]
           the same weights as a version 1 file, or a legacy file with an
           untied head (negative vocab; the head a copy of the embedding)
           or without the RoPE tables
"""
import struct
import sys

import numpy as np

ROLES = ["attn_norm", "q", "k", "v", "o", "ffn_norm", "gate", "down", "up"]


def read(path):
    """(params dict, weights dict: role -> array or list per layer)"""
    raw = open(path, "rb").read()
    if struct.unpack("<I", raw[:4])[0] == 0x616B3432:
        version = struct.unpack("<i", raw[4:8])[0]
        assert version == 1
        dim, hidden, L, H, KV, V, T = struct.unpack("<7i", raw[8:36])
        shared, off, tables = raw[36] == 1, 256, False
    else:
        dim, hidden, L, H, KV, V, T = struct.unpack("<7i", raw[:28])
        shared, V, off = V > 0, abs(V), 28
    hd = dim // H
    kvd = KV * hd
    p = dict(dim=dim, hidden=hidden, L=L, H=H, KV=KV, V=V, T=T, hd=hd, shared=shared)
    f = np.frombuffer(raw, dtype="<f4", offset=off)
    shapes = {"embed": (V, dim), "attn_norm": (dim,), "q": (dim, dim), "k": (kvd, dim), "v": (kvd, dim),
              "o": (dim, dim), "ffn_norm": (dim,), "gate": (hidden, dim), "down": (dim, hidden),
              "up": (hidden, dim), "final_norm": (dim,), "lm_head": (V, dim)}
    if off == 256:
        order = ["attn_norm*", "ffn_norm*", "final_norm", "embed", "q*", "k*", "v*", "o*", "gate*",
                 "down*", "up*"]
    else:
        order = ["embed", "attn_norm*", "q*", "k*", "v*", "o*", "ffn_norm*", "gate*", "down*", "up*",
                 "final_norm"]
        rope = T * hd
        rest = len(f) - sum(int(np.prod(shapes[r.rstrip("*")])) * (L if r.endswith("*") else 1)
                            for r in order) - (0 if shared else V * dim)
        tables = rest == rope
        assert rest in (0, rope), "the file's size fits no llama2.c layout"
        if tables:
            order.append("rope")
    if not shared:
        order.append("lm_head")
    w, at = {}, 0
    for r in order:
        if r == "rope":
            at += T * hd
            continue
        role, n = r.rstrip("*"), int(np.prod(shapes[r.rstrip("*")]))
        if r.endswith("*"):
            w[role] = [f[at + i * n:at + (i + 1) * n].reshape(shapes[role]) for i in range(L)]
            at += L * n
        else:
            w[role] = f[at:at + n].reshape(shapes[role])
            at += n
    assert at == len(f), "the file's size fits no llama2.c layout"
    p["tables"] = tables
    return p, w


def norms(m):
    """sw-norms' columns for the operator m (float64)"""
    dout, din = m.shape
    s = np.linalg.svd(m, compute_uv=False)[0]
    fro = np.linalg.norm(m)
    return [dout, din, np.sqrt(din) * np.linalg.norm(m, axis=1).max(), np.sqrt(din / dout) * s,
            np.linalg.norm(m, axis=0).max() / np.sqrt(dout), s, fro, fro / np.sqrt(dout * din),
            np.abs(m).max()]


def matrices(p, w):
    """(name, role, float64 matrix as stored [out, in]) in sw-norms' model order"""
    yield "model.embed_tokens.weight", "embed", w["embed"].astype(np.float64)
    hf = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj",
          "o": "self_attn.o_proj", "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj"}
    for layer in range(p["L"]):
        for r in ["q", "k", "v", "o", "gate", "up", "down"]:
            yield "model.layers.%d.%s.weight" % (layer, hf[r]), r, w[r][layer].astype(np.float64)
    yield "lm_head.weight", "lm_head", (w["embed"] if p["shared"] else w["lm_head"]).astype(np.float64)


def cmd_norms(path):
    p, w = read(path)
    for name, role, m in matrices(p, w):
        rows = [[role] + norms(m.T if role == "embed" else m)]
        if role == "lm_head":
            rows.append(["lm_head_folded"] + norms(m * w["final_norm"].astype(np.float64)[None, :]))
        for r in rows:
            print("\t".join(str(x) if isinstance(x, (str, int)) else "%.9g" % x for x in r))


def cmd_spectrum(path, actual):
    p, w = read(path)
    ref = {name: np.linalg.svd(m, compute_uv=False) for name, _, m in matrices(p, w)}
    got = {}
    with open(actual) as f:
        head = f.readline().rstrip("\n").split("\t")
        n, i, s = head.index("name"), head.index("index"), head.index("sigma")
        for line in f:
            c = line.rstrip("\n").split("\t")
            got.setdefault(c[n], {})[int(c[i])] = float(c[s])
    bad = 0
    for name, sv in ref.items():
        if name not in got or len(got[name]) != len(sv):
            print("%s: %d values, numpy has %d" % (name, len(got.get(name, {})), len(sv)))
            bad = 1
            continue
        for k, x in enumerate(sv):
            y = got[name][k + 1]
            tol = 1e-5 * x if x >= 1e-4 * sv[0] else 1e-6 * sv[0]
            if abs(y - x) > tol:
                print("%s sigma_%d: %.9g, numpy %.9g" % (name, k + 1, y, x))
                bad = 1
    print("spectra %d matrices %s" % (len(ref), "differ" if bad else "agree"))
    return bad


def rmsnorm(x, g):
    return g * (x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5))


def rope(x, hd, interleaved):
    """x (T, heads, hd): run.c's pairs (2i, 2i+1), or Hugging Face's (i, i + hd/2)"""
    T = x.shape[0]
    freq = 1.0 / 10000.0 ** (np.arange(0, hd, 2) / hd)          # (hd/2)
    ang = np.arange(T)[:, None] * freq[None, :]                 # (T, hd/2)
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
    else:
        a, b = x[..., : hd // 2], x[..., hd // 2:]
    ra, rb = a * c - b * s, a * s + b * c
    out = np.empty_like(x)
    if interleaved:
        out[..., 0::2], out[..., 1::2] = ra, rb
    else:
        out[..., : hd // 2], out[..., hd // 2:] = ra, rb
    return out


def forward(p, w, tokens, interleaved):
    """run.c's transformer(), all positions at once, float64: logits (T, V)"""
    d = {k: ([a.astype(np.float64) for a in v] if isinstance(v, list) else v.astype(np.float64))
         for k, v in w.items()}
    H, KV, hd = p["H"], p["KV"], p["hd"]
    T = len(tokens)
    x = d["embed"][tokens]                                      # (T, dim)
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(p["L"]):
        xb = rmsnorm(x, d["attn_norm"][l])
        q = rope((xb @ d["q"][l].T).reshape(T, H, hd), hd, interleaved)
        k = rope((xb @ d["k"][l].T).reshape(T, KV, hd), hd, interleaved)
        v = (xb @ d["v"][l].T).reshape(T, KV, hd)
        out = np.empty((T, H, hd))
        for h in range(H):
            g = h // (H // KV)                                  # run.c: h / kv_mul
            a = q[:, h] @ k[:, g].T / np.sqrt(hd) + mask
            a = np.exp(a - a.max(-1, keepdims=True))
            out[:, h] = (a / a.sum(-1, keepdims=True)) @ v[:, g]
        x = x + out.reshape(T, H * hd) @ d["o"][l].T
        xb = rmsnorm(x, d["ffn_norm"][l])
        h1, h3 = xb @ d["gate"][l].T, xb @ d["up"][l].T
        x = x + (h1 / (1 + np.exp(-h1)) * h3) @ d["down"][l].T
    x = rmsnorm(x, d["final_norm"])
    return x @ (d["embed"] if p["shared"] else d["lm_head"]).T


def bf16(a):
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)


def cmd_logits(path, ours, tokens, interleaved, round_bf16):
    p, w = read(path)
    if round_bf16:
        w = {k: ([bf16(a) for a in v] if isinstance(v, list) else bf16(v)) for k, v in w.items()}
    ref = forward(p, w, tokens, interleaved)
    got = np.loadtxt(ours, ndmin=2)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    print("logits %.3g" % (np.abs(got - ref).max() / np.abs(ref).max()))


def cmd_write(path, out, v1, untied, tables):
    p, w = read(path)
    f32 = lambda a: np.ascontiguousarray(a, dtype="<f4").tobytes()
    layers = lambda r: b"".join(f32(a) for a in w[r])
    vals = (p["dim"], p["hidden"], p["L"], p["H"], p["KV"], p["V"], p["T"])
    head = w["embed"] if p["shared"] else w["lm_head"]
    if v1:
        hdr = struct.pack("<Ii7iB", 0x616B3432, 1, *vals, 0 if untied else 1)
        body = (layers("attn_norm") + layers("ffn_norm") + f32(w["final_norm"]) + f32(w["embed"]) +
                b"".join(layers(r) for r in ["q", "k", "v", "o", "gate", "down", "up"]))
        hdr += b"\0" * (256 - len(hdr))
    else:
        hdr = struct.pack("<7i", *vals[:5], -p["V"] if untied else p["V"], p["T"])
        body = f32(w["embed"]) + b"".join(layers(r) for r in ROLES) + f32(w["final_norm"])
        if tables:
            # run.c skips them; their values (export.py's freqs_cos, freqs_sin) do not matter
            freq = 1.0 / 10000.0 ** (np.arange(0, p["hd"], 2) / p["hd"])
            ang = np.outer(np.arange(p["T"]), freq)
            body += f32(np.cos(ang)) + f32(np.sin(ang))
    if untied:
        body += f32(head)
    open(out, "wb").write(hdr + body)


def main():
    a = sys.argv[1:]
    if a[0] == "norms":
        cmd_norms(a[1])
    elif a[0] == "spectrum":
        sys.exit(cmd_spectrum(a[1], a[2]))
    elif a[0] == "logits":
        flags = [x for x in a[3:] if x.startswith("--")]
        cmd_logits(a[1], a[2], [int(x) for x in a[3:] if not x.startswith("--")],
                   "--rotate-half" not in flags, "--bf16" in flags)
    elif a[0] == "write":
        cmd_write(a[1], a[2], "--v1" in a, "--untied" in a, "--no-tables" not in a)
    else:
        sys.exit("unknown command " + a[0])


if __name__ == "__main__":
    main()
