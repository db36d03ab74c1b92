#!/usr/bin/python3
"""Checks torch_reference.py's forward for GPT-2, Gemma and Gemma2 once
against transformers' own classes (GPT2LMHeadModel, GemmaForCausalLM,
Gemma2ForCausalLM) in float64, on the committed fixtures written by
transformers' save_pretrained (fixtures/arch/gpt2, gemma, gemma2). Not
part of make check (it needs transformers): run it by hand in the venv
that has it,

    build/arch-venv/bin/python tests/e2e/check_torch_reference.py

(transformers 4.47.1). For each family it loads the fixture with
transformers and maps its state dict to our HDF5's names and storage
(scalewatch-format(5)) as sw-convert does, by hand here: GPT-2's Conv1D
weights turned to [out, in] and c_attn split into its parts
(c_attn.weight:q, :k, :v, the bias likewise), Gemma's norm weights w
stored as the gains 1 + w they apply. Gemma2's soft-caps and
query_pre_attn_scalar are set small (attn 0.05, final 0.2, scalar 10)
so that tanh bends on the fixture's small scores and logits, and the
scale differs from head_dim's; GPT-2 is run with gelu_new and with the
exact gelu (nanoGPT's). Each line: the family, the two losses and their
difference relative to transformers', and the largest relative
difference of the loss's gradients of every parameter (mapped as the
weights are); for Gemma2 how far the final soft-cap bends on the
fixture's logits.

The figures (transformers 4.47.1, torch 1.13, float64), the reference's
docstring's: the losses' relative difference, the gradients' largest
    gpt2 (gelu_new)                  0        6.7e-12
    gpt2 (exact gelu)                0        5.8e-12
    gemma                            6.4e-11  2.5e-07
    gemma2 (caps 0.05, 0.2)          4.5e-11  6.3e-07
    gemma2 (the fixture's 50, 30)    3.3e-10  5.9e-07
    gemma, all in float64            0        2.3e-12
    gemma2 (0.05, 0.2), float64      0        4e-14
Gemma's and Gemma2's classes compute their RMSNorm and their attention's
softmax in float32 in a float64 model (all_in_float64): with those two
in float64 too, the reference is transformers' to the last bits. The
final soft-cap 0.2 is 41% off linear on these logits (up to 0.31).
"""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import forward  # noqa: E402

import transformers  # noqa: E402

torch.set_default_dtype(torch.float64)
TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def ours_of(arch, sd, C):
    """transformers' state dict in our HDF5's names and storage"""
    p = {}
    for k, v in sd.items():
        if arch == "gpt2":
            if k.endswith(".attn.bias") or k.endswith(".attn.masked_bias") or k == "lm_head.weight":
                continue
            conv = any(s in k for s in ("c_attn.weight", "c_proj.weight", "c_fc.weight"))
            w = v.T.contiguous() if conv else v
            if ".c_attn." in k:
                for i, s in enumerate("qkv"):
                    p[k + ":" + s] = w[i * C:(i + 1) * C]
                continue
            p[k] = w
        else:
            if k == "lm_head.weight":
                continue
            p[k] = v + 1 if k.endswith("norm.weight") else v
    return p


def our_cfg(arch, hf):
    c = {"arch": arch, "multipliers": "none", "qk_norm": 0, "tie_embeddings": 1}
    if arch == "gpt2":
        c.update(d_model=hf.n_embd, n_heads=hf.n_head, n_kv_heads=hf.n_head,
                 head_dim=hf.n_embd // hf.n_head, n_layers=hf.n_layer,
                 norm_eps=hf.layer_norm_epsilon, hidden_act=hf.activation_function)
        return c
    c.update(d_model=hf.hidden_size, n_heads=hf.num_attention_heads,
             n_kv_heads=hf.num_key_value_heads, head_dim=hf.head_dim, n_layers=hf.num_hidden_layers,
             norm_eps=hf.rms_norm_eps, rope_theta=hf.rope_theta,
             hidden_act=hf.hidden_activation or "gelu_pytorch_tanh")
    if arch == "gemma2":
        c.update(attn_softcap=hf.attn_logit_softcapping or 0,
                 final_softcap=hf.final_logit_softcapping or 0,
                 query_pre_attn_scalar=hf.query_pre_attn_scalar)
    return c


def all_in_float64():
    """transformers' GemmaRMSNorm and Gemma2RMSNorm compute x / rms(x) in
    float32 (x.float()), and their eager attention its softmax
    (softmax(..., dtype=torch.float32)), whatever the model's dtype: here
    both in the model's (float64), the same math otherwise, so that what
    is compared is the function and not that rounding"""
    from transformers.models.gemma import modeling_gemma
    from transformers.models.gemma2 import modeling_gemma2
    for cls in (modeling_gemma.GemmaRMSNorm, modeling_gemma2.Gemma2RMSNorm):
        cls.forward = lambda self, x: self._norm(x) * (1.0 + self.weight)
    softmax = torch.nn.functional.softmax
    torch.nn.functional.softmax = lambda x, dim=None, dtype=None, **kw: softmax(x, dim=dim, **kw)


def check(arch, cls, tweak, label):
    path = os.path.join(TOP, "fixtures", "arch", arch)
    hf_cfg = transformers.AutoConfig.from_pretrained(path)
    if arch == "gemma2":
        hf_cfg._attn_implementation = "eager"   # soft-capping is only in eager
    for k, v in tweak.items():
        setattr(hf_cfg, k, v)
    model = cls.from_pretrained(path, config=hf_cfg, torch_dtype=torch.float64)
    if arch == "gemma2":
        model.config._attn_implementation = "eager"
    model.eval()
    V = hf_cfg.vocab_size
    g = torch.Generator().manual_seed(5)
    tok = torch.randint(0, V, (3, 11), generator=g)
    tgt = torch.randint(0, V, (3, 11), generator=g)
    out = model(input_ids=tok, use_cache=False)
    ref_loss = torch.nn.functional.cross_entropy(out.logits.reshape(-1, V), tgt.reshape(-1))
    ref_loss.backward()
    C = hf_cfg.n_embd if arch == "gpt2" else hf_cfg.hidden_size
    hf_grads = ours_of(arch, {k: v.grad.detach() for k, v in model.named_parameters()
                              if v.grad is not None}, C)
    # Gemma's gain gradient: d/d(1 + w) = d/dw (ours_of adds 1 to values only)
    if arch != "gpt2":
        hf_grads = {k: (v - 1 if k.endswith("norm.weight") else v) for k, v in hf_grads.items()}
    leaves = {k: v.detach().clone().requires_grad_(True)
              for k, v in ours_of(arch, dict(model.state_dict()), C).items()}
    loss = forward(leaves, our_cfg(arch, hf_cfg), tok, tgt)
    loss.backward()
    # relative per tensor, over a floor of 1e-9 of the whole gradient's
    # norm: k's bias has no gradient in exact arithmetic (q . b is the
    # same for every key of a query, which the softmax cancels), both
    # sides' are rounding, ~1e-17
    total = math.sqrt(sum(float((v ** 2).sum()) for v in hf_grads.values()))
    worst = max((leaves[k].grad - hf_grads[k]).norm().item() /
                max(hf_grads[k].norm().item(), 1e-9 * total) for k in leaves)
    missing = set(hf_grads) ^ set(leaves)
    print("%-28s transformers %.15f reference %.15f rel %.2g grads %.2g%s" %
          (label, ref_loss.item(), loss.item(), abs(loss.item() - ref_loss.item()) / ref_loss.item(),
           worst, " names differ: %s" % sorted(missing) if missing else ""))
    return model, tok


def bends(model, tok, caps):
    """the largest relative gap tanh(x/cap) cap - x over the scores' and
    the logits' magnitudes: the soft-caps are not the identity here"""
    with torch.no_grad():
        logits = model.model(input_ids=tok, use_cache=False).last_hidden_state @ model.lm_head.weight.T
        x = logits.abs().max().item()
        print("    final logits up to %.3g: cap %.3g gives %.3g (%.0f%% off linear)" %
              (x, caps[1], math.tanh(x / caps[1]) * caps[1], 100 * (1 - math.tanh(x / caps[1]) * caps[1] / x)))


def main():
    check("gpt2", transformers.GPT2LMHeadModel, {}, "gpt2 (gelu_new)")
    check("gpt2", transformers.GPT2LMHeadModel, {"activation_function": "gelu"}, "gpt2 (exact gelu)")
    check("gemma", transformers.GemmaForCausalLM, {}, "gemma")
    caps = {"attn_logit_softcapping": 0.05, "final_logit_softcapping": 0.2, "query_pre_attn_scalar": 10}
    model, tok = check("gemma2", transformers.Gemma2ForCausalLM, caps, "gemma2 (caps 0.05, 0.2)")
    bends(model, tok, (0.05, 0.2))
    check("gemma2", transformers.Gemma2ForCausalLM, {}, "gemma2 (the fixture's caps)")
    all_in_float64()
    check("gemma", transformers.GemmaForCausalLM, {}, "gemma, all in float64")
    check("gemma2", transformers.Gemma2ForCausalLM, caps, "gemma2 (0.05, 0.2), float64")


if __name__ == "__main__":
    main()
