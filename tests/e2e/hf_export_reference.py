#!/usr/bin/python3
"""The loss of a Hugging Face directory sw-convert exported, in float64,
against the loss sw-train logged (t0216-qwen2-train.t, t0217-gpt2-train.t,
t0218-gemma-train.t).

usage: hf_export_reference.py DIR CKPT_B torch|nobias|transformers

DIR is sw-convert's export of a checkpoint A of a run written with
--save-grads; CKPT_B is the run's next checkpoint: its /batch is the batch
of its step and its /metrics train_loss the loss sw-train computed on it
at A's parameters. The model is built from DIR alone (config.json and
model.safetensors, read here with numpy, not by our readers):

    torch          tests/e2e/torch_reference.py's float64 forward (Debian's
                   python3-torch), its sizes from config.json's keys
    nobias         the same with every q, k, v bias at 0 (the check can
                   see the biases)
    transformers   transformers' own class (config.json's: Qwen2ForCausalLM,
                   GPT2LMHeadModel, GemmaForCausalLM, Gemma2ForCausalLM)
                   from_pretrained in float64 (build/arch-venv); every
                   tensor of the file loaded, none left at its initial
                   value

Prints "loss REL", |ours - reference| / |reference|, and for
transformers a line per key it did not load ("missing NAME",
"unexpected NAME").
"""
import json
import os
import struct
import sys

import h5py
import numpy as np
import torch

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)

DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64}


def safetensors(path):
    """{name: float64 tensor} of one safetensors file (the format: an
    8-byte little-endian header length, the JSON header, the data)"""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in head.items():
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        a = np.frombuffer(data[lo:hi], dtype=DTYPES[t["dtype"]]).reshape(t["shape"])
        out[name] = torch.tensor(a.astype(np.float64))
    return out


def main():
    d, ckpt_b, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    fb = h5py.File(ckpt_b, "r")
    tok = torch.tensor(np.array(fb["batch/tokens"]), dtype=torch.long)
    tgt = torch.tensor(np.array(fb["batch/targets"]), dtype=torch.long)
    ours = float(fb["metrics"].attrs["train_loss"])
    if mode == "transformers":
        from transformers import AutoModelForCausalLM
        model, info = AutoModelForCausalLM.from_pretrained(
            d, torch_dtype=torch.float64, attn_implementation="eager", output_loading_info=True)
        for k in ("missing_keys", "unexpected_keys", "mismatched_keys"):
            for name in info.get(k, []):
                print(k.split("_")[0], name)
        model.eval()
        with torch.no_grad():
            # no cache: Gemma2's HybridCache needs torch._dynamo
            logits = model(tok, use_cache=False).logits
        ref = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from torch_reference import forward
        hf = json.load(open(os.path.join(d, "config.json")))
        cfg = {"d_model": hf["hidden_size"], "n_heads": hf["num_attention_heads"],
               "n_kv_heads": hf["num_key_value_heads"],
               "head_dim": hf.get("head_dim", hf["hidden_size"] // hf["num_attention_heads"]),
               "n_layers": hf["num_hidden_layers"], "norm_eps": hf["rms_norm_eps"],
               "rope_theta": hf["rope_theta"], "hidden_act": hf["hidden_act"],
               "tie_embeddings": int(hf["tie_word_embeddings"]), "multipliers": "none",
               "qk_norm": 0}
        p = safetensors(os.path.join(d, "model.safetensors"))
        if mode == "nobias":
            p = {k: (v * 0 if k.endswith("_proj.bias") else v) for k, v in p.items()}
        with torch.no_grad():
            ref = forward(p, cfg, tok, tgt)
    print("loss %.3g" % (abs(ours - ref.item()) / abs(ref.item())))


if __name__ == "__main__":
    main()
