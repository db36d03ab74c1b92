#!/usr/bin/python3
"""An independent implementation of sw-train's model and optimizer step, in
PyTorch (float64), to check sw-train against (t0210-torch-crosscheck.t).

usage: torch_reference.py CKPT_A CKPT_B

forward() also computes GPT-2 (LayerNorm with bias, learned positions,
every linear's bias, the tanh or exact GELU as hidden_act says, the tied
head), Gemma ((1 + w) RMSNorm, the gains taken as our HDF5 stores them:
the 1 + w applied; the embedding times sqrt(C) in float32, GeGLU) and
Gemma2 (post-norms, soft-capped scores and logits, query_pre_attn_scalar),
written from the papers' and transformers' definitions and read from our
HDF5's names. Checked once against transformers 4.47.1's GPT2LMHeadModel,
GemmaForCausalLM and Gemma2ForCausalLM (eager attention) in float64 on
fixtures/arch/gpt2, gemma, gemma2 (tests/e2e/check_torch_reference.py,
run in build/arch-venv): GPT-2's loss the same to the last bit, its
gradients to 7e-12 relative; Gemma's and Gemma2's (soft-caps 0.05 and
0.2, where tanh bends 41%) to 6e-11 and 5e-11 in the loss and 6e-7 in
the gradients, which is transformers' own float32 RMSNorm and softmax
inside its float64 model: with those two in float64 as well, the loss
agrees to the last bit and the gradients to 2e-12.

CKPT_A and CKPT_B are consecutive checkpoints of one run written with
--save-grads: B holds the batch of its step and the gradient sw-train
computed for it at A's parameters. This script builds the Llama of A's
/config in PyTorch from A's parameters (Hugging Face's LlamaForCausalLM
math: RMSNorm, rotate-half RoPE, GQA, SwiGLU; QK-norm, learnable
multipliers, a scale design's gains, norm-everywhere and norm gains as
configured; under scale_reparam each gain computed from its direction
alpha and magnitude beta, OR beta alpha / rms(alpha) or ER
exp(beta + alpha - mean alpha), as the scale-vectors paper's eqs. 8-9
write them), runs forward
and backward on B's batch, and applies one optimizer step (AdamW or Muon,
as A's /optim says) from A's optimizer state. It prints one line per
quantity: the relative error ||ours - reference|| / ||reference||:

    loss REL
    grad NAME REL FLOOR     (FLOOR: 1e-6 of the gradient's RMS, relative)
    update NAME REL FLOOR   (the parameter change B - A against the
                            reference's; FLOOR: float32 rounding of B)
"""
import math
import sys

import h5py
import numpy as np
import torch

from rope_reference import hf_inv_freq

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)


def load(path):
    f = h5py.File(path, "r")
    cfg = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f["config"].attrs.items()}
    params = {k: torch.tensor(np.array(v), dtype=torch.float64) for k, v in f["params"].items()}
    return f, cfg, params


def rmsnorm(x, g, eps):
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y * g if g is not None else y


def cfg_inv_freq(cfg, hd):
    """hf_inv_freq of a checkpoint's /config (rope_scaling and its
    parameters, scalewatch-format(5))"""
    kind = cfg.get("rope_scaling", "")
    return hf_inv_freq(float(cfg["rope_theta"]), hd, kind, float(cfg.get("rope_factor", 1)),
                       float(cfg.get("rope_low_freq_factor", 1)),
                       float(cfg.get("rope_high_freq_factor", 4)),
                       int(cfg.get("rope_original_max_position_embeddings", 8192)))


def rope(x, inv, T):
    # x (B, T, nh, hd); Hugging Face computes inv_freq and angles in float32
    hd = x.shape[-1]
    ang = torch.arange(T, dtype=torch.float32)[:, None] * inv.float()[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1).double()[None, :, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1).double()[None, :, None, :]
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    rot = torch.cat([-x2, x1], -1)
    return x * cos + rot * sin


def gain_key(p, base):
    # a norm's gain is BASE.weight; a scale design's X_gain_in is BASE itself
    return base if base.endswith((".gain_in", ".gain_out")) else base + ".weight"


def gamma(mode, alpha, beta):
    beta = beta.reshape(())
    if mode == "or":
        return beta * alpha / alpha.pow(2).mean().sqrt()
    return torch.exp(beta + alpha - alpha.mean())


def reparam_of(cfg, name):
    # scale_reparam: "or", "er", or "attn=or,ffn=er"; a gain's kind from its name
    spec = cfg.get("scale_reparam", "")
    kind = ("head" if name.startswith(("model.norm", "lm_head")) else
            "ffn" if ".mlp." in name or "post_attention_layernorm" in name else "attn")
    if "=" not in spec:
        return spec
    return dict(kv.split("=") for kv in spec.split(",")).get(kind, "")


def reparameterized(p, cfg):
    # the gains the model uses: from their directions and magnitudes
    q = dict(p)
    for k in p:
        if k.endswith(".direction"):
            base = k[: -len(".direction")]
            q[gain_key(p, base)] = gamma(reparam_of(cfg, base), p[k], p[base + ".magnitude"])
    return q


def derived(p, cfg):
    # the gain keys computed, not trained
    if not cfg.get("scale_reparam", ""):
        return set()
    return {gain_key(p, k[: -len(".direction")]) for k in p if k.endswith(".direction")}


def effective(p, name, mode):
    w = p[name + ".weight"]
    # a scale design's gains of a Pre-Norm's reader: g_out . (W (g_in . x))
    if name + ".gain_in" in p:
        w = w * p[name + ".gain_in"][None, :]
    if name + ".gain_out" in p:
        w = p[name + ".gain_out"][:, None] * w
    if mode == "none" or (name + ".multiplier") not in p:
        return w
    m = p[name + ".multiplier"]
    if mode == "scalar":
        return w * m[0]
    if mode == "row":
        return w * m[:, None]
    if mode == "rowcol":
        return m[:, None] * w * p[name + ".multiplier_col"][None, :]
    return w * m[None, :]


def layernorm(x, g, b, eps):
    # torch's layer_norm: the biased variance
    mu = x.mean(-1, keepdim=True)
    y = (x - mu) * torch.rsqrt((x - mu).pow(2).mean(-1, keepdim=True) + eps)
    y = y * g if g is not None else y
    return y + b if b is not None else y


def act(name, x):
    """hidden_act: SiLU (silu, swish); the tanh GELU (GPT-2's gelu_new,
    Gemma's gelu_pytorch_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
    x^3))), written out as transformers' NewGELUActivation does); the
    exact GELU x Phi(x) (nn.GELU(), nanoGPT's)"""
    if name in ("", "silu", "swish"):
        return torch.nn.functional.silu(x)
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))
    if name == "gelu":
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    raise ValueError("hidden_act %s" % name)


def softcap(x, cap):
    # Gemma2's soft-capping, as transformers writes it: x / cap, tanh, * cap
    return torch.tanh(x / cap) * cap if cap else x


def attention(q, k, v, scale, cap):
    """causal GQA attention of q (B, T, H, hd), k and v (B, T, KV, hd): the
    scores q k^T scale, soft-capped (cap 0: not), masked, softmax"""
    B, T, H, hd = q.shape
    k = k.repeat_interleave(H // k.shape[2], dim=2)
    v = v.repeat_interleave(H // v.shape[2], dim=2)
    mask = torch.full((T, T), float("-inf")).triu(1)
    att = softcap((q.transpose(1, 2) @ k.permute(0, 2, 3, 1)) * scale, cap) + mask
    return (att.softmax(-1) @ v.transpose(1, 2)).transpose(1, 2).reshape(B, T, H * hd)


def forward_gpt2(p, cfg, tok, tgt):
    """GPT-2 (GPT2LMHeadModel, Radford et al. 2019; nanoGPT's GPT): the
    token and learned position embeddings summed; per block x += attn(ln_1
    x), x += mlp(ln_2 x) with LayerNorm's weight and bias, c_attn's q, k,
    v (each with its bias; our HDF5 keeps c_attn's parts as
    c_attn.weight:q, ... [out, in]), the scores over sqrt(hd), c_proj with
    its bias, the MLP c_proj(act(c_fc x)) with both biases; ln_f, the
    head tied to wte"""
    C, H, hd = (int(cfg[k]) for k in ("d_model", "n_heads", "head_dim"))
    L, eps, fn = int(cfg["n_layers"]), float(cfg["norm_eps"]), cfg.get("hidden_act", "gelu_new")
    B, T = tok.shape
    x = p["transformer.wte.weight"][tok] + p["transformer.wpe.weight"][:T][None]
    lin = lambda h, n, part="": h @ p[n + ".weight" + part].T + p[n + ".bias" + part]
    for l in range(L):
        pre = f"transformer.h.{l}."
        h = layernorm(x, p[pre + "ln_1.weight"], p[pre + "ln_1.bias"], eps)
        q, k, v = (lin(h, pre + "attn.c_attn", ":" + s).view(B, T, H, hd) for s in "qkv")
        x = x + lin(attention(q, k, v, 1 / math.sqrt(hd), 0), pre + "attn.c_proj")
        h = layernorm(x, p[pre + "ln_2.weight"], p[pre + "ln_2.bias"], eps)
        x = x + lin(act(fn, lin(h, pre + "mlp.c_fc")), pre + "mlp.c_proj")
    x = layernorm(x, p["transformer.ln_f.weight"], p["transformer.ln_f.bias"], eps)
    head = p["transformer.wte.weight"] if int(cfg["tie_embeddings"]) else p["lm_head.weight"]
    logits = x @ head.T
    return torch.nn.functional.cross_entropy(logits.view(B * T, -1), tgt.view(-1))


def forward_gemma(p, cfg, tok, tgt):
    """Gemma (Gemma Team 2024; GemmaForCausalLM) and Gemma2 (Gemma2ForCausalLM):
    the embedding times the normalizer sqrt(C), rounded to float32 as
    transformers' tensor of the hidden states' dtype (float32 checkpoints)
    is; RMSNorm x / rms(x) (1 + w), whose (1 + w) our HDF5 stores as the
    gain itself (scalewatch-format(5): gains as applied), so the gains are
    taken as stored, not offset again; RoPE; GeGLU down(act(gate x) up x)
    with hidden_act (hidden_activation, gelu_pytorch_tanh); the tied head.
    Gemma2 adds a norm on each sublayer's output before its residual
    (post_attention_layernorm; pre_ and post_feedforward_layernorm around
    the MLP), the scores scaled by query_pre_attn_scalar^-1/2 and
    soft-capped, and the final logits soft-capped (attn_softcap,
    final_softcap in /config; 0 or absent: none). Gemma2's sliding window
    (every other layer) is longer than these sequences: no mask of its
    own."""
    C, H, KV, hd = (int(cfg[k]) for k in ("d_model", "n_heads", "n_kv_heads", "head_dim"))
    L, eps, fn = int(cfg["n_layers"]), float(cfg["norm_eps"]), cfg.get("hidden_act", "gelu_pytorch_tanh")
    two = cfg["arch"] == "gemma2"
    scale = float(cfg.get("query_pre_attn_scalar", 0) or hd) ** -0.5
    acap, fcap = float(cfg.get("attn_softcap", 0)), float(cfg.get("final_softcap", 0))
    inv = cfg_inv_freq(cfg, hd)
    B, T = tok.shape
    x = p["model.embed_tokens.weight"][tok] * float(np.float32(math.sqrt(C)))
    lin = lambda h, n: h @ p[n + ".weight"].T
    for l in range(L):
        pre = f"model.layers.{l}."
        h = rmsnorm(x, p[pre + "input_layernorm.weight"], eps)
        q = lin(h, pre + "self_attn.q_proj").view(B, T, H, hd)
        k = lin(h, pre + "self_attn.k_proj").view(B, T, KV, hd)
        v = lin(h, pre + "self_attn.v_proj").view(B, T, KV, hd)
        y = lin(attention(rope(q, inv, T), rope(k, inv, T), v, scale, acap), pre + "self_attn.o_proj")
        if two:
            y = rmsnorm(y, p[pre + "post_attention_layernorm.weight"], eps)
        x = x + y
        h = rmsnorm(x, p[pre + ("pre_feedforward_layernorm" if two else "post_attention_layernorm") +
                         ".weight"], eps)
        y = lin(act(fn, lin(h, pre + "mlp.gate_proj")) * lin(h, pre + "mlp.up_proj"), pre + "mlp.down_proj")
        if two:
            y = rmsnorm(y, p[pre + "post_feedforward_layernorm.weight"], eps)
        x = x + y
    x = rmsnorm(x, p["model.norm.weight"], eps)
    head = p["model.embed_tokens.weight"] if int(cfg["tie_embeddings"]) else p["lm_head.weight"]
    logits = softcap(x @ head.T, fcap)
    return torch.nn.functional.cross_entropy(logits.view(B * T, -1), tgt.view(-1))


def forward(p, cfg, tok, tgt):
    """The loss of /config's model on tokens tok, targets tgt: the Llama
    family below, GPT-2 and Gemma above (without multipliers and scale
    designs there)"""
    arch = cfg.get("arch", "llama")
    if arch in ("gpt2", "gemma", "gemma2"):
        assert cfg["multipliers"] == "none" and not cfg.get("scale_design", ""), \
            "multipliers and scale designs: the Llama family's"
        return (forward_gpt2 if arch == "gpt2" else forward_gemma)(p, cfg, tok, tgt)
    return forward_llama(p, cfg, tok, tgt)


def forward_llama(p, cfg, tok, tgt):
    C, H, KV, hd = (int(cfg[k]) for k in ("d_model", "n_heads", "n_kv_heads", "head_dim"))
    L, eps = int(cfg["n_layers"]), float(cfg["norm_eps"])
    fn = cfg.get("hidden_act", "silu")
    inv = cfg_inv_freq(cfg, hd)
    mult, qkn = cfg["multipliers"], int(cfg["qk_norm"])
    nev = int(cfg.get("norm_everywhere", 0))
    B, T = tok.shape
    g = lambda n: p.get(n)
    x = p["model.embed_tokens.weight"][tok]
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(L):
        pre = f"model.layers.{l}."
        h = rmsnorm(x, g(pre + "input_layernorm.weight"), eps)
        q = h @ effective(p, pre + "self_attn.q_proj", mult).T
        k = h @ effective(p, pre + "self_attn.k_proj", mult).T
        v = h @ effective(p, pre + "self_attn.v_proj", mult).T
        # Qwen2's q, k, v biases, after the products (before QK-norm, RoPE)
        if pre + "self_attn.q_proj.bias" in p:
            q = q + p[pre + "self_attn.q_proj.bias"]
            k = k + p[pre + "self_attn.k_proj.bias"]
            v = v + p[pre + "self_attn.v_proj.bias"]
        q, k, v = q.view(B, T, H, hd), k.view(B, T, KV, hd), v.view(B, T, KV, hd)
        if qkn:
            q = rmsnorm(q, g(pre + "self_attn.q_norm.weight"), eps)
            k = rmsnorm(k, g(pre + "self_attn.k_norm.weight"), eps)
        # dual normalized placement (scale-vectors paper, eq. 7): each
        # reader's output normalized, per head, with its own gain
        if pre + "self_attn.v_norm.weight" in p:
            v = rmsnorm(v, p[pre + "self_attn.v_norm.weight"], eps)
        q, k = rope(q, inv, T), rope(k, inv, T)
        k = k.repeat_interleave(H // KV, dim=2)
        v = v.repeat_interleave(H // KV, dim=2)
        att = (q.transpose(1, 2) @ k.permute(0, 2, 3, 1)) / math.sqrt(hd) + mask
        y = (att.softmax(-1) @ v.transpose(1, 2)).transpose(1, 2).reshape(B, T, H * hd)
        if nev:
            y = rmsnorm(y, g(pre + "self_attn.o_in_norm.weight"), eps)
        x = x + y @ effective(p, pre + "self_attn.o_proj", mult).T
        h = rmsnorm(x, g(pre + "post_attention_layernorm.weight"), eps)
        gate = h @ effective(p, pre + "mlp.gate_proj", mult).T
        up = h @ effective(p, pre + "mlp.up_proj", mult).T
        if pre + "mlp.gate_norm.weight" in p:
            gate = rmsnorm(gate, p[pre + "mlp.gate_norm.weight"], eps)
            up = rmsnorm(up, p[pre + "mlp.up_norm.weight"], eps)
        a = act(fn, gate) * up
        if nev:
            a = rmsnorm(a, g(pre + "mlp.down_in_norm.weight"), eps)
        x = x + a @ effective(p, pre + "mlp.down_proj", mult).T
    x = rmsnorm(x, g("model.norm.weight"), eps)
    head = p["model.embed_tokens.weight"] if int(cfg["tie_embeddings"]) else effective(p, "lm_head", mult)
    logits = x @ head.T
    return torch.nn.functional.cross_entropy(logits.view(B * T, -1), tgt.view(-1))


def lr_of(fa, name, step):
    """The tensor's lr for the update at `step` is in B's attributes."""
    return float(fa["params"][name].attrs["lr"]), float(fa["params"][name].attrs.get("wd", 0.0)), \
        fa["params"][name].attrs.get("wd_mode", "none")


def newton_schulz(G):
    a, b, c = 3.4445, -4.7750, 2.0315
    X = G.clone()
    tr = G.shape[0] > G.shape[1]
    if tr:
        X = X.T
    X = X / (X.norm() + 1e-7)
    for _ in range(5):
        A = X @ X.T
        X = a * X + (b * A + c * A @ A) @ X
    return X.T if tr else X


def main():
    fa, cfg, pa = load(sys.argv[1])
    fb, _, pb = load(sys.argv[2])
    tok = torch.tensor(np.array(fb["batch/tokens"]), dtype=torch.long)
    tgt = torch.tensor(np.array(fb["batch/targets"]), dtype=torch.long)
    leaves = {k: v.clone().requires_grad_(True) for k, v in pa.items()}
    loss = forward(reparameterized(leaves, cfg), cfg, tok, tgt)
    loss.backward()
    gains = derived(pa, cfg)
    ours = float(fb["metrics"].attrs["train_loss"])
    print("loss %.3g" % (abs(ours - loss.item()) / abs(loss.item())))
    # an absolute floor, as atol + rtol |ref|: 1e-6 of the whole gradient's
    # RMS per element. Some gradients are cancellations that float32
    # cannot resolve to 1e-5 relative, e.g. a scalar multiplier of q or k
    # before QK-norm, which the norm undoes up to eps.
    n_all = sum(v.numel() for k, v in leaves.items() if k not in gains)
    g_rms = math.sqrt(sum(float((v.grad ** 2).sum()) for k, v in leaves.items() if k not in gains) / n_all)
    for k, v in leaves.items():
        # a computed gain's own gradient is 0: sw-train hands it on
        ref = v.grad if k not in gains else torch.zeros_like(v)
        g = torch.tensor(np.array(fb["grads"][k]))
        rn = max(ref.norm().item(), 1e-300)
        floor = 1e-6 * math.sqrt(ref.numel()) * g_rms / rn
        print("grad %s %.3g %.3g" % (k, (g - ref).norm().item() / rn, floor))

    # one optimizer step from A's state with the gradient sw-train used
    opt = fa["optim"].attrs["optimizer"]
    b1, b2, eps = (float(fa["optim"].attrs[k]) for k in ("beta1", "beta2", "eps"))
    mom = float(fa["optim"].attrs["momentum"])
    t = int(fa["optim_state"].attrs["t"]) + 1
    clip = float(fa["optim"].attrs["grad_clip"])
    gn = math.sqrt(sum(float((torch.tensor(np.array(fb["grads"][k])) ** 2).sum())
                       for k in pa if fb["params"][k].attrs["block"] != "mult"))
    scale = clip / gn if clip > 0 and gn > clip else 1.0
    news = {}
    for k in pa:
        if k in gains:
            continue
        info = fb["params"][k].attrs
        lr, wd, mode = lr_of(fb, k, t)
        g = torch.tensor(np.array(fb["grads"][k])) * (scale if info["block"] != "mult" else 1.0)
        m0 = torch.tensor(np.array(fa["optim_state/m"][k]))
        v0 = torch.tensor(np.array(fa["optim_state/v"][k]))
        p = pa[k]
        decay = 1 - lr * wd if mode == "coupled" else 1 - wd if mode == "independent" else 1
        hidden = info["kind"] == "matrix" and info["block"] in ("qk", "vo", "ffn")
        if opt == "muon" and hidden:
            buf = mom * m0 + (1 - mom) * g
            geff = (1 - mom) * g + mom * buf
            u = newton_schulz(geff) * math.sqrt(max(1.0, p.shape[0] / p.shape[1]))
            new = p * decay - lr * u
        else:
            m = b1 * m0 + (1 - b1) * g
            v = b2 * v0 + (1 - b2) * g * g
            mhat, vhat = m / (1 - b1 ** t), v / (1 - b2 ** t)
            new = p * decay - lr * mhat / (vhat.sqrt() + eps)
        news[k] = new
    # a computed gain moves as its direction and magnitude do
    for k in gains:
        base = k if k.endswith(("gain_in", "gain_out")) else k[: -len(".weight")]
        news[k] = gamma(reparam_of(cfg, base), news[base + ".direction"], news[base + ".magnitude"])
    for k in pa:
        p, new = pa[k], news[k]
        ref = new - p
        got = pb[k] - p
        # the new parameters are stored in float32: half an ulp of each is
        # the floor of any comparison of the update
        ulp = np.spacing(np.abs(np.array(pb[k], dtype=np.float32))).astype(np.float64)
        floor = np.linalg.norm(ulp / 2) / max(ref.norm().item(), 1e-300)
        print("update %s %.3g %.3g" % (k, (got - ref).norm().item() / max(ref.norm().item(), 1e-300), floor))


if __name__ == "__main__":
    main()
