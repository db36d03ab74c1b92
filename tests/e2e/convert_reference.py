#!/usr/bin/python3
"""An independent reader and forward pass for sw-convert's safetensors export
(t0240-convert-torch.t): no scalewatch code, no transformers.

usage: convert_reference.py logits DIR LOGITS_TSV TOKEN...
       convert_reference.py bf16 F32_DIR BF16_DIR

logits: parse DIR's safetensors (model.safetensors or the shards listed in
model.safetensors.index.json: an 8-byte little-endian header length, the
JSON header, the raw little-endian data) and config.json, run Hugging
Face's LlamaForCausalLM forward in float64 PyTorch (RMSNorm, rotate-half
RoPE with rope_theta and rope_scaling (default, linear, llama3:
rope_reference.py), inv_freq and angles in float32 as HF
computes them,
GQA, causal attention scaled 1/sqrt(head_dim), SwiGLU, tied or untied
head) on the tokens, and print "logits REL" with REL = ||ours - ref|| /
||ref|| against the logits scalewatch computed (LOGITS_TSV, one row per
position).

bf16: print "bf16 MISMATCHES" - the BF16 export's values that are not the
F32 export's rounded to nearest even.
"""
import json
import os
import struct
import sys

import numpy as np
import torch

from rope_reference import hf_inv_freq

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = data[b:end]
        if e["dtype"] == "F32":
            a = np.frombuffer(raw, dtype="<f4")
        elif e["dtype"] == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit(f"{name}: dtype {e['dtype']}")
        out[name] = (e["dtype"], a.reshape(e["shape"]))
    return out, header.get("__metadata__", {})


def read_dir(d):
    cfg = json.load(open(os.path.join(d, "config.json")))
    index = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) \
        else ["model.safetensors"]
    tensors = {}
    for f in files:
        t, meta = read_safetensors(os.path.join(d, f))
        assert meta.get("format") == "pt", "transformers needs metadata format pt"
        tensors.update(t)
    return cfg, tensors


def rmsnorm(x, g, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g


def config_inv_freq(cfg, hd):
    """inv_freq as transformers reads config.json: rope_scaling (4.x) or
    rope_parameters (5.x), its type under rope_type or the older type
    (which wins); hf_inv_freq computes it as modeling_rope_utils.py does"""
    rs = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    kind = rs.get("type", rs.get("rope_type", "default"))
    theta = rs.get("rope_theta", cfg.get("rope_theta"))
    return hf_inv_freq(theta, hd, kind, rs.get("factor", 1.0), rs.get("low_freq_factor", 1.0),
                       rs.get("high_freq_factor", 4.0),
                       rs.get("original_max_position_embeddings", 8192))


def rope(x, inv):
    # x (T, nh, hd), rotate-half: dimension i pairs with i + hd/2
    T, hd = x.shape[0], x.shape[-1]
    ang = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1).double()[:, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1).double()[:, None, :]
    rot = torch.cat([-x[..., hd // 2:], x[..., : hd // 2]], -1)
    return x * cos + rot * sin


def forward(cfg, p, tokens):
    assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["model_type"] == "llama"
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", cfg["hidden_size"] // H)
    eps, inv = cfg["rms_norm_eps"], config_inv_freq(cfg, hd)
    assert cfg.get("hidden_act", "silu") == "silu", "only SiLU"
    W = lambda n: torch.from_numpy(p[n][1].astype(np.float64))
    T = len(tokens)
    x = W("model.embed_tokens.weight")[torch.tensor(tokens)]
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{l}."
        h = rmsnorm(x, W(pre + "input_layernorm.weight"), eps)
        q = (h @ W(pre + "self_attn.q_proj.weight").T).view(T, H, hd)
        k = (h @ W(pre + "self_attn.k_proj.weight").T).view(T, KV, hd)
        v = (h @ W(pre + "self_attn.v_proj.weight").T).view(T, KV, hd)
        q, k = rope(q, inv), rope(k, inv)
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        att = torch.einsum("thd,shd->hts", q, k) / hd ** 0.5 + mask
        y = torch.einsum("hts,shd->thd", att.softmax(-1), v).reshape(T, H * hd)
        x = x + y @ W(pre + "self_attn.o_proj.weight").T
        h = rmsnorm(x, W(pre + "post_attention_layernorm.weight"), eps)
        g = h @ W(pre + "mlp.gate_proj.weight").T
        u = h @ W(pre + "mlp.up_proj.weight").T
        x = x + (torch.nn.functional.silu(g) * u) @ W(pre + "mlp.down_proj.weight").T
    x = rmsnorm(x, W("model.norm.weight"), eps)
    tied = cfg["tie_word_embeddings"]
    assert tied == ("lm_head.weight" not in p), "tie_word_embeddings disagrees with the tensors"
    return x @ W("model.embed_tokens.weight" if tied else "lm_head.weight").T


def main():
    if sys.argv[1] == "logits":
        cfg, p = read_dir(sys.argv[2])
        ref = forward(cfg, p, [int(t) for t in sys.argv[4:]])
        ours = torch.from_numpy(np.loadtxt(sys.argv[3], ndmin=2))
        assert ours.shape == ref.shape, f"shapes {tuple(ours.shape)} vs {tuple(ref.shape)}"
        print("logits", float((ours - ref).norm() / ref.norm()))
    else:
        _, f32 = read_dir(sys.argv[2])
        _, b16 = read_dir(sys.argv[3])
        assert f32.keys() == b16.keys()
        bad = 0
        for n, (dt, a) in f32.items():
            assert dt == "F32" and b16[n][0] == "BF16", n
            u = a.view(np.uint32).astype(np.uint64)
            rne = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)   # finite values
            got = (b16[n][1].view(np.uint32) >> 16).astype(np.uint16)
            bad += int((rne != got).sum())
        print("bf16", bad)


main()
