#!/usr/bin/python3
"""An independent implementation of sw-train's mixture of experts (--moe),
in PyTorch (float64), to check sw-train against (t0223-moe-torch.t).

usage: moe_reference.py CKPT_A CKPT_B [fd]

The MoE block is written from transformers' modeling code (4.47:
MixtralSparseMoeBlock, Qwen2MoeSparseMoeBlock and
load_balancing_loss_func), not imported from it:

    logits = x Wr^T; p = softmax(logits) (float64 here)
    top-k of p (torch.topk); weights p_k, divided by their sum where the
        config renormalizes (Mixtral always; Qwen2-MoE's norm_topk_prob)
    y = sum_k w_k down_e(silu(gate_e x) * up_e x), expert by expert over
        the tokens routed to it (index_add_), as transformers' loop does
    Qwen2-MoE: y += sigmoid(x ws) * down_s(silu(gate_s x) * up_s x)
    aux = E * sum_e F_e P_e over every MoE layer's router at once
        (load_balancing_loss_func's concatenation): F_e the mean over
        layers and tokens of the one-hot top-k choices summed over k, P_e
        the mean router probability

and the rest is the Llama of torch_reference.py (RMSNorm, RoPE, GQA). The
objective sw-train differentiates is CE + moe_aux_coef * aux.

CKPT_A and CKPT_B are consecutive checkpoints of one run written with
--save-grads (as torch_reference.py takes them). It prints, per line, the
relative error ||ours - reference|| / ||reference||:

    loss REL                the cross-entropy (B's train_loss)
    aux REL                 the load-balancing loss (B's aux_loss)
    grad NAME REL FLOOR     every gradient of the objective (FLOOR as
                            torch_reference.py's: 1e-6 of the RMS)
    update NAME REL FLOOR   one AdamW step from A's state (FLOOR: float32
                            rounding of B's parameters)

With fd, one more line: the directional derivative of the objective along
a random direction (seed 7), by central differences in float64 with the
routing (each token's chosen experts) held at A's, against sw-train's
gradient dotted with it:

    fd REL
"""
import math
import sys

import numpy as np
import torch

from torch_reference import act, cfg_inv_freq, load, lr_of, rmsnorm, rope

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)


def swiglu(p, pre, names, x, fn):
    g, u, d = (p[pre + n + ".weight"] for n in names)
    return (act(fn, x @ g.T) * (x @ u.T)) @ d.T


def moe_block(p, cfg, l, x, fn, routes, fixed):
    """x (N, C) -> y (N, C); routes collects (probs, chosen) per layer"""
    E, K = int(cfg["n_experts"]), int(cfg["n_experts_active"])
    shared = int(cfg["n_shared_experts"])
    pre = f"model.layers.{l}."
    # Mixtral's names, Qwen2-MoE's with a shared expert (as sw-train names them)
    if shared:
        blk, ex = pre + "mlp.", ("gate_proj", "up_proj", "down_proj")
    else:
        blk, ex = pre + "block_sparse_moe.", ("w1", "w3", "w2")
    probs = torch.softmax(x @ p[blk + "gate.weight"].T, dim=-1)
    w, chosen = torch.topk(probs, K, dim=-1)
    if fixed is not None:
        chosen = fixed[l]
        w = probs.gather(1, chosen)
    if int(cfg["moe_renorm"]):
        w = w / w.sum(dim=-1, keepdim=True)
    routes.append((probs, chosen))
    y = torch.zeros_like(x)
    mask = torch.nn.functional.one_hot(chosen, E).permute(2, 1, 0)    # (E, K, N)
    for e in range(E):
        k_of, tok = torch.where(mask[e])
        if tok.numel() == 0:
            continue
        out = swiglu(p, f"{blk}experts.{e}.", ex, x[tok], fn) * w[tok, k_of, None]
        y = y.index_add(0, tok, out)
    if shared:
        s = swiglu(p, blk + "shared_expert.", ("gate_proj", "up_proj", "down_proj"), x, fn)
        y = y + torch.sigmoid(x @ p[blk + "shared_expert_gate.weight"].T) * s
    return y


def aux_loss(cfg, routes):
    # load_balancing_loss_func: every layer's router at once
    E, K = int(cfg["n_experts"]), int(cfg["n_experts_active"])
    probs = torch.cat([r[0] for r in routes], 0)
    mask = torch.nn.functional.one_hot(torch.cat([r[1] for r in routes], 0), E)   # (M, K, E)
    tokens_per_expert = mask.double().mean(0)                                       # (K, E)
    router_prob = probs.mean(0)
    return E * (tokens_per_expert * router_prob[None, :]).sum()


def forward(p, cfg, tok, tgt, fixed=None):
    """(CE, aux, the routing) of the Llama with MoE layers"""
    C, H, KV, hd = (int(cfg[k]) for k in ("d_model", "n_heads", "n_kv_heads", "head_dim"))
    L, eps = int(cfg["n_layers"]), float(cfg["norm_eps"])
    dense = int(cfg["moe_dense_layers"])
    fn = cfg.get("hidden_act", "silu")
    inv = cfg_inv_freq(cfg, hd)
    B, T = tok.shape
    x = p["model.embed_tokens.weight"][tok]
    mask = torch.full((T, T), float("-inf")).triu(1)
    routes = []
    for l in range(L):
        pre = f"model.layers.{l}."
        h = rmsnorm(x, p.get(pre + "input_layernorm.weight"), eps)
        q = (h @ p[pre + "self_attn.q_proj.weight"].T).view(B, T, H, hd)
        k = (h @ p[pre + "self_attn.k_proj.weight"].T).view(B, T, KV, hd)
        v = (h @ p[pre + "self_attn.v_proj.weight"].T).view(B, T, KV, hd)
        q, k = rope(q, inv, T), rope(k, inv, T)
        k = k.repeat_interleave(H // KV, dim=2)
        v = v.repeat_interleave(H // KV, dim=2)
        att = (q.transpose(1, 2) @ k.permute(0, 2, 3, 1)) / math.sqrt(hd) + mask
        y = (att.softmax(-1) @ v.transpose(1, 2)).transpose(1, 2).reshape(B, T, H * hd)
        x = x + y @ p[pre + "self_attn.o_proj.weight"].T
        h = rmsnorm(x, p.get(pre + "post_attention_layernorm.weight"), eps)
        if l < dense:
            x = x + swiglu(p, pre + "mlp.", ("gate_proj", "up_proj", "down_proj"), h, fn)
        else:
            x = x + moe_block(p, cfg, l, h.reshape(B * T, C), fn, routes, fixed).view(B, T, C)
    x = rmsnorm(x, p.get("model.norm.weight"), eps)
    head = p["model.embed_tokens.weight"] if int(cfg["tie_embeddings"]) else p["lm_head.weight"]
    ce = torch.nn.functional.cross_entropy((x @ head.T).view(B * T, -1), tgt.view(-1))
    return ce, aux_loss(cfg, routes), routes


def main():
    fa, cfg, pa = load(sys.argv[1])
    fb, _, pb = load(sys.argv[2])
    coef = float(cfg["moe_aux_coef"])
    tok = torch.tensor(np.array(fb["batch/tokens"]), dtype=torch.long)
    tgt = torch.tensor(np.array(fb["batch/targets"]), dtype=torch.long)
    leaves = {k: v.clone().requires_grad_(True) for k, v in pa.items()}
    ce, aux, routes = forward(leaves, cfg, tok, tgt)
    (ce + coef * aux).backward()
    # an expert no token was routed to has no gradient in autograd: zero
    for v in leaves.values():
        if v.grad is None:
            v.grad = torch.zeros_like(v)
    ours = float(fb["metrics"].attrs["train_loss"])
    print("loss %.3g" % (abs(ours - ce.item()) / abs(ce.item())))
    ours_aux = float(fb["metrics"].attrs["aux_loss"])
    print("aux %.3g" % (abs(ours_aux - aux.item()) / abs(aux.item())))
    n_all = sum(v.numel() for v in leaves.values())
    g_rms = math.sqrt(sum(float((v.grad ** 2).sum()) for v in leaves.values()) / n_all)
    grads = {k: torch.tensor(np.array(fb["grads"][k])) for k in pa}
    for k, v in leaves.items():
        rn = max(v.grad.norm().item(), 1e-300)
        floor = 1e-6 * math.sqrt(v.numel()) * g_rms / rn
        print("grad %s %.3g %.3g" % (k, (grads[k] - v.grad).norm().item() / rn, floor))

    # one AdamW step from A's state with the gradient sw-train used
    assert fa["optim"].attrs["optimizer"] == "adamw"
    b1, b2, eps = (float(fa["optim"].attrs[k]) for k in ("beta1", "beta2", "eps"))
    t = int(fa["optim_state"].attrs["t"]) + 1
    clip = float(fa["optim"].attrs["grad_clip"])
    gn = math.sqrt(sum(float((g ** 2).sum()) for g in grads.values()))
    scale = clip / gn if clip > 0 and gn > clip else 1.0
    for k in pa:
        lr, wd, mode = lr_of(fb, k, t)
        g = grads[k] * scale
        m = b1 * torch.tensor(np.array(fa["optim_state/m"][k])) + (1 - b1) * g
        v = b2 * torch.tensor(np.array(fa["optim_state/v"][k])) + (1 - b2) * g * g
        decay = 1 - lr * wd if mode == "coupled" else 1 - wd if mode == "independent" else 1
        new = pa[k] * decay - lr * (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + eps)
        ref, got = new - pa[k], pb[k] - pa[k]
        ulp = np.spacing(np.abs(np.array(pb[k], dtype=np.float32))).astype(np.float64)
        floor = np.linalg.norm(ulp / 2) / max(ref.norm().item(), 1e-300)
        print("update %s %.3g %.3g" % (k, (got - ref).norm().item() / max(ref.norm().item(), 1e-300),
                                       floor))

    if len(sys.argv) > 3 and sys.argv[3] == "fd":
        # the routing at A, held fixed: the objective is smooth in theta then
        dense = int(cfg["moe_dense_layers"])
        fixed = {dense + i: r[1] for i, r in enumerate(routes)}
        gen = torch.Generator().manual_seed(7)
        d = {k: torch.randn(v.shape, generator=gen) for k, v in pa.items()}
        h = 1e-6

        def obj(s):
            q = {k: pa[k] + s * d[k] for k in pa}
            c, a, _ = forward(q, cfg, tok, tgt, fixed)
            return (c + coef * a).item()
        fd = (obj(h) - obj(-h)) / (2 * h)
        ours_dd = sum(float((grads[k] * d[k]).sum()) for k in pa)
        print("fd %.3g" % (abs(ours_dd - fd) / abs(fd)))


if __name__ == "__main__":
    main()
