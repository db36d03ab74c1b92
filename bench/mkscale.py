#!/usr/bin/python3
"""Write a Llama-shaped BF16 safetensors checkpoint as Hugging Face does,
tensor by tensor (never the whole model in memory), for bench/scale.

usage: mkscale.py OUTDIR [--vocab V] [--d D] [--layers L] [--heads H]
                  [--kv-heads KV] [--head-dim HD] [--ffn F] [--untied]
                  [--shard-bytes N] [--seed S] [--std X] [--rope-theta T]
                  [--max-pos P] [--llama3-rope-scaling]

Defaults are Llama-3.2-1B's shapes (vocab 128256, d_model 2048, 16
layers, 32 heads of 64, 8 KV heads, d_ff 8192, tied embeddings: no
lm_head tensor). OUTDIR gets config.json (the Llama config as
transformers writes it), model.safetensors.index.json and
model-0000I-of-0000N.safetensors: tensors in module order, a new shard
when the next tensor would take the current one past --shard-bytes
(2e9, transformers' "2GB"; a shard holds at least one tensor), as
save_pretrained shards. Inside a shard the tensors are sorted by name and
the header is padded with spaces to a multiple of 8, as the safetensors
library writes them. Weights are Gaussian with standard deviation --std
(0.02), RMSNorm gains 1; float32 rounded to BF16 to nearest even with
uint32 bit math (numpy has no bfloat16). The directory is written as
OUTDIR.part and renamed when complete.
"""
import argparse
import json
import os
import shutil

import numpy as np

CHUNK = 1 << 24          # elements generated at a time: 64 MiB of float32


def bf16(x):
    """float32 -> BF16 bits, round to nearest even (no NaN here)"""
    u = x.view(np.uint32)
    u += np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))
    return (u >> np.uint32(16)).astype("<u2")


def nbytes(shape):
    return 2 * int(np.prod(shape))


def write_tokens(path, n=1 << 20, seed=1):
    """bench/scale's tokens: n random ids below 65536 (uint16) in llm.c's
    format, written as path.part and renamed"""
    tok = np.random.default_rng(seed).integers(0, 1 << 16, n).astype(np.uint16)
    header = np.zeros(256, dtype=np.int32)
    header[:3] = [20240520, 1, n]
    with open(path + ".part", "wb") as f:
        f.write(header.tobytes())
        f.write(tok.tobytes())
    os.replace(path + ".part", path)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--vocab", type=int, default=128256)
    p.add_argument("--d", type=int, default=2048)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--ffn", type=int, default=8192)
    p.add_argument("--untied", action="store_true", help="an lm_head tensor (tie_word_embeddings false)")
    p.add_argument("--shard-bytes", type=int, default=2 * 10**9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--std", type=float, default=0.02)
    p.add_argument("--rope-theta", type=float, default=500000.0)
    p.add_argument("--max-pos", type=int, default=131072)
    p.add_argument("--llama3-rope-scaling", action="store_true",
                   help="rope_scaling as Llama 3.2's config.json has it")
    a = p.parse_args()
    D, V, F, HD = a.d, a.vocab, a.ffn, a.head_dim

    # (name, shape, kind) in module order, as model.state_dict() lists them
    tensors = [("model.embed_tokens.weight", (V, D), "w")]
    for l in range(a.layers):
        pre = "model.layers.%d." % l
        tensors += [(pre + "self_attn.q_proj.weight", (a.heads * HD, D), "w"),
                    (pre + "self_attn.k_proj.weight", (a.kv_heads * HD, D), "w"),
                    (pre + "self_attn.v_proj.weight", (a.kv_heads * HD, D), "w"),
                    (pre + "self_attn.o_proj.weight", (D, a.heads * HD), "w"),
                    (pre + "mlp.gate_proj.weight", (F, D), "w"),
                    (pre + "mlp.up_proj.weight", (F, D), "w"),
                    (pre + "mlp.down_proj.weight", (D, F), "w"),
                    (pre + "input_layernorm.weight", (D,), "gain"),
                    (pre + "post_attention_layernorm.weight", (D,), "gain")]
    tensors.append(("model.norm.weight", (D,), "gain"))
    if a.untied:
        tensors.append(("lm_head.weight", (V, D), "w"))

    shards = [[]]
    size = 0
    for t in tensors:
        if shards[-1] and size + nbytes(t[1]) > a.shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(t)
        size += nbytes(t[1])
    n = len(shards)
    rng = np.random.default_rng(a.seed)
    tmp = a.out + ".part"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    weight_map = {}
    total = 0
    for i, shard in enumerate(shards):
        fname = "model-%05d-of-%05d.safetensors" % (i + 1, n)
        shard = sorted(shard)
        header = {"__metadata__": {"format": "pt"}}
        off = 0
        for name, shape, _ in shard:
            header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + nbytes(shape)]}
            off += nbytes(shape)
            weight_map[name] = fname
        total += off
        h = json.dumps(header, separators=(",", ":")).encode()
        h += b" " * (-len(h) % 8)
        with open(os.path.join(tmp, fname), "wb") as f:
            f.write(len(h).to_bytes(8, "little"))
            f.write(h)
            for name, shape, kind in shard:
                count = int(np.prod(shape))
                if kind == "gain":
                    f.write(bf16(np.ones(count, dtype=np.float32)).tobytes())
                    continue
                for s in range(0, count, CHUNK):
                    x = rng.standard_normal(min(CHUNK, count - s), dtype=np.float32)
                    x *= np.float32(a.std)
                    f.write(bf16(x).tobytes())
    with open(os.path.join(tmp, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2, sort_keys=True)
        f.write("\n")
    config = {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 128000,
        "eos_token_id": 128001,
        "head_dim": HD,
        "hidden_act": "silu",
        "hidden_size": D,
        "initializer_range": a.std,
        "intermediate_size": F,
        "max_position_embeddings": a.max_pos,
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": a.heads,
        "num_hidden_layers": a.layers,
        "num_key_value_heads": a.kv_heads,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"}
        if a.llama3_rope_scaling else None,
        "rope_theta": a.rope_theta,
        "tie_word_embeddings": not a.untied,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.45.0",
        "use_cache": True,
        "vocab_size": V,
    }
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    shutil.rmtree(a.out, ignore_errors=True)
    os.rename(tmp, a.out)


if __name__ == "__main__":
    main()
