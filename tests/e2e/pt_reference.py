#!/usr/bin/python3
"""PyTorch files for t0270-pytorch.t, written by torch.save (Debian's
python3-torch), and the independent checks of what the tools read from
them; no scalewatch code.

usage: pt_reference.py write SRC_DIR OUT
           from the F32 safetensors model SRC_DIR (config.json beside),
           torch.save the same weights as OUT/NAME/... for every NAME of
           the list below (config.json or params.json beside each)
       pt_reference.py export PT DIR
           torch.load our own file PT (the tensors under KEY for PT:KEY)
           and write its values as F32 safetensors into DIR with PT's
           config.json: the numpy references read that
       pt_reference.py metalogits META_DIR LOGITS_TSV TOKEN...
           Meta's Llama forward in float64 on the consolidated.NN.pth of
           META_DIR (their slices joined as Meta's code splits them):
           interleaved RoPE on pairs (2i, 2i+1), as Meta's
           apply_rotary_emb computes it (use_scaled_rope: Llama 3.1's
           apply_scaling); prints "logits REL" against the
           logits scalewatch computed
"""
import collections
import glob
import json
import math
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from norms_reference import read_safetensors  # noqa: E402


def hf_to_meta_rows(w, heads):
    """Meta's row order from Hugging Face's: Meta row 2i+j of a head is
    HF row j*hd/2+i (transformers' permute, inverted)."""
    rows, cols = w.shape
    hd = rows // heads
    return w.reshape(heads, 2, hd // 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


META_NAMES = [("model.embed_tokens.weight", "tok_embeddings.weight"),
              ("model.norm.weight", "norm.weight"), ("lm_head.weight", "output.weight")]
LAYER_NAMES = [("self_attn.q_proj", "attention.wq"), ("self_attn.k_proj", "attention.wk"),
               ("self_attn.v_proj", "attention.wv"), ("self_attn.o_proj", "attention.wo"),
               ("mlp.gate_proj", "feed_forward.w1"), ("mlp.down_proj", "feed_forward.w2"),
               ("mlp.up_proj", "feed_forward.w3"), ("input_layernorm", "attention_norm"),
               ("post_attention_layernorm", "ffn_norm")]
# the dimension Meta's model-parallel code splits each along (None: replicated)
SPLIT = {"tok_embeddings": 1, "output": 0, "wq": 0, "wk": 0, "wv": 0, "w1": 0, "w3": 0,
         "wo": 1, "w2": 1}


def to_meta(t, cfg):
    out = collections.OrderedDict()
    for hf, meta in META_NAMES:
        out[meta] = t[hf]
    for layer in range(cfg["num_hidden_layers"]):
        for hf, meta in LAYER_NAMES:
            w = t["model.layers.%d.%s.weight" % (layer, hf)]
            if meta == "attention.wq":
                w = hf_to_meta_rows(w, cfg["num_attention_heads"])
            if meta == "attention.wk":
                w = hf_to_meta_rows(w, cfg["num_key_value_heads"])
            out["layers.%d.%s.weight" % (layer, meta)] = w
    out["rope.freqs"] = np.ones(cfg["head_dim"] // 2, dtype=np.float32)
    return out


def split_meta(sd, shards, embed_dim):
    parts = [collections.OrderedDict() for _ in range(shards)]
    for name, w in sd.items():
        kind = name.split(".")[-2] if name.count(".") >= 2 else name.split(".")[0]
        dim = embed_dim if kind == "tok_embeddings" else SPLIT.get(kind)
        for k in range(shards):
            parts[k][name] = w if dim is None else np.split(w, shards, axis=dim)[k]
    return parts


def tensors(sd, dtype=torch.float32):
    return collections.OrderedDict((k, torch.from_numpy(np.ascontiguousarray(v)).to(dtype))
                                   for k, v in sd.items())


def save(obj, path, cfg=None, params=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save(obj, path)
    d = os.path.dirname(path)
    if cfg is not None:
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    if params is not None:
        json.dump(params, open(os.path.join(d, "params.json"), "w"))


def views(sd):
    """Every tensor a view at an offset into one flat storage; the head
    stored transposed (strides (1, rows))."""
    total = sum(v.size for v in sd.values()) + 5
    flat = torch.zeros(total, dtype=torch.float32)
    out, at = collections.OrderedDict(), 5
    for k, v in sd.items():
        if k == "lm_head.weight":
            out[k] = torch.from_numpy(np.ascontiguousarray(v.T)).t()
            continue
        n = v.size
        flat[at:at + n] = torch.from_numpy(v.reshape(-1))
        out[k] = flat[at:at + n].view(*v.shape)
        at += n
    return out


class RunsACommand:
    """A pickle torch.load would execute: os.system on load."""

    def __init__(self, cmd):
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


def write(src, out):
    t, _ = read_safetensors(src)
    t = {k: np.array(v) for k, v in t.items()}
    cfg = json.load(open(os.path.join(src, "config.json")))
    sd = tensors(t)
    save(sd, out + "/fp32/model.pt", cfg)
    save(tensors(t, torch.bfloat16), out + "/bf16/model.pt", cfg)
    save(tensors(t, torch.float16), out + "/fp16/model.pt", cfg)
    save(views(t), out + "/views/model.pt", cfg)
    save({"model": sd, "iter_num": 7, "config": {"lr": 0.1},
          "optimizer": {"state": {0: {"exp_avg": torch.zeros(3)}},
                        "param_groups": [{"params": [0], "betas": (0.9, 0.95)}]}},
         out + "/nested/ckpt.pt", cfg)
    save({"ema": {"net": sd}, "step": 3}, out + "/deep/ckpt.pt", cfg)
    params = {k: torch.nn.Parameter(v) for k, v in sd.items()}
    save(params, out + "/params/model.pt", cfg)
    # a Hugging Face sharded set: layers 0-5, then the rest
    first = collections.OrderedDict((k, v) for k, v in sd.items()
                                    if k.startswith("model.layers.") and int(k.split(".")[2]) < 6)
    rest = collections.OrderedDict((k, v) for k, v in sd.items() if k not in first)
    os.makedirs(out + "/sharded", exist_ok=True)
    wmap = {}
    for i, part in enumerate([first, rest]):
        name = "pytorch_model-%05d-of-00002.bin" % (i + 1)
        save(part, out + "/sharded/" + name, cfg)
        wmap.update({k: name for k in part})
    json.dump({"metadata": {"total_size": 4 * sum(v.numel() for v in sd.values())},
               "weight_map": wmap}, open(out + "/sharded/pytorch_model.bin.index.json", "w"))
    # Meta's layout: one slice, two slices, two slices with Llama 3's embedding split
    params_json = {"dim": cfg["hidden_size"], "n_layers": cfg["num_hidden_layers"],
                   "n_heads": cfg["num_attention_heads"], "n_kv_heads": cfg["num_key_value_heads"],
                   "vocab_size": -1, "multiple_of": 8, "norm_eps": cfg["rms_norm_eps"],
                   "rope_theta": cfg["rope_theta"], "max_seq_len": cfg["max_position_embeddings"]}
    meta = to_meta(t, cfg)
    save(tensors(meta), out + "/meta1/consolidated.00.pth", params=params_json)
    for name, shards, edim in (("meta2", 2, 1), ("meta2-llama3", 2, 0)):
        for k, part in enumerate(split_meta(meta, shards, edim)):
            save(tensors(part), out + "/%s/consolidated.%02d.pth" % (name, k), params=params_json)
    # Hugging Face's rows under Meta's names: what reading Meta's rows
    # without the permutation would amount to
    unpermuted = to_meta(t, cfg)
    for k, v in t.items():
        for proj, meta_name in (("q_proj", "wq"), ("k_proj", "wk")):
            if proj in k:
                unpermuted["layers.%s.attention.%s.weight" % (k.split(".")[2], meta_name)] = v
    save(tensors(unpermuted), out + "/meta-unpermuted/consolidated.00.pth", params=params_json)
    save({"model": sd, "state_dict": sd}, out + "/both/ckpt.pt", cfg)
    save({"w": RunsACommand("touch PWNED"), "x": torch.ones(2)}, out + "/evil/model.pt", cfg)


def write_safetensors(t, cfg, d):
    os.makedirs(d, exist_ok=True)
    header, blobs, at = {}, [], 0
    for k, v in t.items():
        b = np.ascontiguousarray(v, dtype="<f4").tobytes()
        header[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header).encode()
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))


def export(pt, d):
    path, _, key = pt.partition(":") if not os.path.exists(pt) else (pt, "", "")
    obj = torch.load(path)          # our own file: written above by torch.save
    for k in [k for k in key.split(".") if k]:
        obj = obj[k]
    t = {}

    def walk(o, prefix):
        for k, v in o.items():
            if isinstance(v, dict):
                walk(v, prefix + k + ".")
            elif isinstance(v, torch.Tensor):
                t[prefix + k] = v.detach().to(torch.float32).numpy()
    walk(obj, "")
    write_safetensors(t, json.load(open(os.path.join(os.path.dirname(path), "config.json"))), d)


def meta_scaled(freqs, factor, high, low=1, n=8192):
    """Meta's apply_scaling (Llama 3.1's reference model.py), one frequency
    at a time: wavelengths below n/high kept, above n/low over factor,
    between them interpolated"""
    out = []
    for f in freqs.tolist():
        w = 2 * math.pi / f
        if w < n / high:
            out.append(f)
        elif w > n / low:
            out.append(f / factor)
        else:
            s = (n / w - low) / (high - low)
            out.append((1 - s) * f / factor + s * f)
    return torch.tensor(out, dtype=torch.float64)


def meta_forward(p, prm, tokens):
    torch.set_default_dtype(torch.float64)
    D, H, KV = prm["dim"], prm["n_heads"], prm.get("n_kv_heads", prm["n_heads"])
    hd, eps, T = D // H, prm["norm_eps"], len(tokens)

    def norm(x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g

    freqs = 1.0 / (prm["rope_theta"] ** (torch.arange(0, hd, 2)[: hd // 2].double() / hd))
    if prm.get("use_scaled_rope"):
        freqs = meta_scaled(freqs, prm["rope_scaling_factor"], prm.get("rope_high_freq_factor", 4))
    cis = torch.polar(torch.ones(T, hd // 2), torch.outer(torch.arange(T).double(), freqs))

    def rope(x):    # (T, heads, hd): pairs (2i, 2i+1) as complex numbers
        xc = torch.view_as_complex(x.reshape(*x.shape[:-1], hd // 2, 2).contiguous())
        return torch.view_as_real(xc * cis[:, None, :]).reshape(x.shape)

    x = p["tok_embeddings.weight"][tokens]
    mask = torch.full((T, T), float("-inf")).triu(1)
    for layer in range(prm["n_layers"]):
        w = lambda n: p["layers.%d.%s.weight" % (layer, n)]  # noqa: E731
        h = norm(x, w("attention_norm"))
        q = rope((h @ w("attention.wq").T).view(T, H, hd))
        k = rope((h @ w("attention.wk").T).view(T, KV, hd)).repeat_interleave(H // KV, dim=1)
        v = (h @ w("attention.wv").T).view(T, KV, hd).repeat_interleave(H // KV, dim=1)
        s = torch.einsum("thd,shd->hts", q, k) / hd ** 0.5 + mask
        a = torch.einsum("hts,shd->thd", torch.softmax(s, -1), v).reshape(T, H * hd)
        x = x + a @ w("attention.wo").T
        h = norm(x, w("ffn_norm"))
        x = x + (torch.nn.functional.silu(h @ w("feed_forward.w1").T) * (h @ w("feed_forward.w3").T)) \
            @ w("feed_forward.w2").T
    return norm(x, p["norm.weight"]) @ p["output.weight"].T


def metalogits(d, ours, tokens):
    prm = json.load(open(os.path.join(d, "params.json")))
    shards = [torch.load(f) for f in sorted(glob.glob(os.path.join(d, "*.pth")))]
    p = {}
    for name in shards[0]:
        kind = name.split(".")[-2] if name.count(".") >= 2 else name.split(".")[0]
        dim = SPLIT.get(kind)
        if kind == "tok_embeddings" and len(shards) > 1 and shards[0][name].shape[1] == prm["dim"]:
            dim = 0     # Llama 3: VocabParallelEmbedding
        p[name] = (shards[0][name] if dim is None
                   else torch.cat([s[name] for s in shards], dim=dim)).double()
    ref = meta_forward(p, prm, torch.tensor(tokens)).numpy()
    got = np.loadtxt(ours, ndmin=2)
    print("logits %.3g" % (np.linalg.norm(got - ref) / np.linalg.norm(ref)))


def main():
    torch.set_num_threads(1)
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "export":
        export(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "metalogits":
        metalogits(sys.argv[2], sys.argv[3], [int(x) for x in sys.argv[4:]])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
