#!/usr/bin/python3
"""A GGUF writer for the tests, written from the published specification
(ggml's docs/gguf.md, version 3) with struct and numpy: no llama.cpp. It
also writes, beside the GGUF, the weights a correct reader must give back:
a Hugging Face safetensors directory (F32, config.json) holding each
tensor as numpy decodes what was written (F16 and BF16 rounded to nearest
even, Q8_0 and Q4_0 blocks dequantized as d * q, d * (q - 8) in float32),
in Hugging Face's names and rotate-half q/k rows. The tools never need Python.

usage: gguf_write.py SRC OUT.gguf REF_DIR [--type f32|f16|bf16|q8_0|q4_0]
                     [--alignment N] [--vocab-from tokens|key|embedding]
                     [--version N] [--no-context] [--extra] [--iq4nl]
                     [--rope-scaling TYPE:FACTOR]

SRC is a scalewatch HDF5 checkpoint (h5py) or a Hugging Face F32/BF16
safetensors directory. Every metadata value type is written (test.*
keys: each scalar type, arrays of numbers, bools and strings, an array of
arrays, an empty array), as llama.cpp's converter writes a Llama:
general.architecture, llama.* sizes, and q and k rows permuted to
interleaved RoPE pairs with convert_hf_to_gguf.py's permute. Norm gains
stay F32 (as llama.cpp keeps them), 2-D weights take --type (Q8_0, Q4_0: F16
for rows that are no whole number of blocks of 32, as llama.cpp does).
--rope-scaling writes llama.rope.scaling.type and .factor (REF_DIR's
config.json rope_scaling with that type and factor); --extra adds Llama
3's rope_freqs.weight (ones), a tensor no Hugging
Face Llama has (not in REF_DIR); --iq4nl writes the embedding as IQ4_NL
(type 20, blocks of 32 in 18 bytes, here of zeros), a type the reader refuses.
"""
import json
import os
import struct
import sys

import numpy as np

GGML = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 8, "iq4_nl": 20, "bf16": 30}
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}


def read_source(path):
    """(tensors in HF names, float32; config dict with the HF keys)"""
    if path.endswith(".h5"):
        import h5py
        with h5py.File(path, "r") as f:
            t = {k: np.array(v, dtype=np.float32) for k, v in f["params"].items()}
            a = f["config"].attrs
            cfg = dict(hidden_size=int(a["d_model"]), num_hidden_layers=int(a["n_layers"]),
                       num_attention_heads=int(a["n_heads"]),
                       num_key_value_heads=int(a["n_kv_heads"]), head_dim=int(a["head_dim"]),
                       intermediate_size=int(a["d_ff"]), vocab_size=int(a["vocab_size"]),
                       max_position_embeddings=int(a["seq_len"]),
                       rope_theta=float(a["rope_theta"]), rms_norm_eps=float(a["norm_eps"]))
        return t, cfg
    cfg = json.load(open(os.path.join(path, "config.json")))
    raw = open(os.path.join(path, "model.safetensors"), "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    t = {}
    for name, e in json.loads(raw[8:8 + n]).items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        buf = raw[8 + n + b:8 + n + end]
        if e["dtype"] == "F32":
            a = np.frombuffer(buf, dtype="<f4")
        else:
            a = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        t[name] = a.reshape(e["shape"]).astype(np.float32)
    return t, cfg


def permute(w, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute: rotate-half rows to
    interleaved RoPE pairs, per head"""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def unpermute(w, n_head):
    """its inverse, computed here independently of the reader"""
    return (w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def bf16_bits(a):
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def encode(a, kind):
    """(bytes as written, float32 values a reader must give back)"""
    a = np.ascontiguousarray(a, dtype=np.float32)
    if kind == "f32":
        return a.tobytes(), a
    if kind == "f16":
        h = a.astype("<f2")
        return h.tobytes(), h.astype(np.float32)
    if kind == "bf16":
        b = bf16_bits(a)
        return b.astype("<u2").tobytes(), (b.astype(np.uint32) << 16).view(np.float32).reshape(a.shape)
    if kind == "q4_0":
        # Q4_0 (ggml's quantize_row_q4_0_ref): blocks of 32 along a row, an
        # F16 scale d = x_m / -8 (x_m the value of largest magnitude) and
        # 4-bit q = min(15, trunc(x / d + 8.5)), the first 16 in the low
        # nibbles; a reader gives back d * (q - 8)
        blocks = a.reshape(-1, 32)
        xm = np.take_along_axis(blocks, np.abs(blocks).argmax(axis=1)[:, None], axis=1)[:, 0]
        d = (xm / np.float32(-8)).astype(np.float32)
        inv = np.where(d != 0, 1 / np.where(d != 0, d, 1), 0).astype(np.float32)
        q = np.minimum(15, np.trunc(blocks * inv[:, None] + np.float32(8.5))).astype(np.uint8)
        d16 = d.astype("<f2")
        rec = np.zeros(len(blocks), dtype=[("d", "<f2"), ("q", "u1", 16)])
        rec["d"] = d16
        rec["q"] = q[:, :16] | q[:, 16:] << 4
        back = d16.astype(np.float32)[:, None] * (q.astype(np.float32) - np.float32(8))
        return rec.tobytes(), back.astype(np.float32).reshape(a.shape)
    # Q8_0 (ggml's quantize_row_q8_0_ref): blocks of 32 along a row, an F16
    # scale d = max|x| / 127 and int8 values round(x / d)
    blocks = a.reshape(-1, 32)
    amax = np.abs(blocks).max(axis=1)
    d = (amax / 127.0).astype(np.float32)
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0).astype(np.float32)
    q = np.clip(np.round(blocks * inv[:, None]), -127, 127).astype(np.int8)
    d16 = d.astype("<f2")
    rec = np.zeros(len(blocks), dtype=[("d", "<f2"), ("q", "i1", 32)])
    rec["d"] = d16
    rec["q"] = q
    back = (d16.astype(np.float32)[:, None] * q.astype(np.float32)).astype(np.float32)
    return rec.tobytes(), back.reshape(a.shape)


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def value(t, v):
    if t == STRING:
        return gstr(v)
    if t == ARRAY:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(value(et, x) for x in items)
    return struct.pack(SCALAR[t], v)


def kv(key, t, v):
    return gstr(key) + struct.pack("<I", t) + value(t, v)


GGUF_NAMES = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
              "lm_head.weight": "output.weight"}
LAYER_NAMES = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
               "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
               "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate",
               "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def gguf_name(hf):
    if hf in GGUF_NAMES:
        return GGUF_NAMES[hf]
    parts = hf.split(".")          # model.layers.N.<sub>.weight
    return "blk.%s.%s.weight" % (parts[2], LAYER_NAMES[".".join(parts[3:-1])])


def main():
    args = sys.argv[1:]
    opt = {"--type": "f32", "--alignment": None, "--vocab-from": "tokens", "--version": "3",
           "--rope-scaling": None}
    flags = set()
    pos = []
    i = 0
    while i < len(args):
        if args[i] in opt:
            opt[args[i]] = args[i + 1]
            i += 2
        elif args[i].startswith("--"):
            flags.add(args[i])
            i += 1
        else:
            pos.append(args[i])
            i += 1
    src, out, ref = pos
    t, cfg = read_source(src)
    H, KV = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    V = cfg["vocab_size"]
    align = int(opt["--alignment"]) if opt["--alignment"] else 32

    meta = [kv("general.architecture", STRING, "llama"), kv("general.name", STRING, "scalewatch test"),
            kv("llama.embedding_length", U32, cfg["hidden_size"]),
            kv("llama.block_count", U32, cfg["num_hidden_layers"]),
            kv("llama.feed_forward_length", U32, cfg["intermediate_size"]),
            kv("llama.attention.head_count", U32, H), kv("llama.attention.head_count_kv", U32, KV),
            kv("llama.rope.dimension_count", U32, cfg.get("head_dim", cfg["hidden_size"] // H)),
            kv("llama.rope.freq_base", F32, cfg.get("rope_theta", 10000.0)),
            kv("llama.attention.layer_norm_rms_epsilon", F32, cfg.get("rms_norm_eps", 1e-5))]
    if "--no-context" not in flags:
        meta.append(kv("llama.context_length", U32, cfg.get("max_position_embeddings", 64)))
    if opt["--alignment"]:
        meta.append(kv("general.alignment", U32, align))
    if opt["--rope-scaling"]:
        rope_type, rope_factor = opt["--rope-scaling"].split(":")
        meta.append(kv("llama.rope.scaling.type", STRING, rope_type))
        meta.append(kv("llama.rope.scaling.factor", F32, float(rope_factor)))
    if opt["--type"] == "q8_0":
        meta.append(kv("general.quantization_version", U32, 2))
    if opt["--vocab-from"] == "tokens":
        meta.append(kv("tokenizer.ggml.model", STRING, "llama"))
        meta.append(kv("tokenizer.ggml.tokens", ARRAY, (STRING, ["<t%d>" % k for k in range(V)])))
        meta.append(kv("tokenizer.ggml.scores", ARRAY, (F32, [0.0] * V)))
    elif opt["--vocab-from"] == "key":
        meta.append(kv("llama.vocab_size", U64, V))
    # every value type the spec has, none of which the reader needs
    meta += [kv("test.u8", U8, 200), kv("test.i8", I8, -100), kv("test.u16", U16, 60000),
             kv("test.i16", I16, -30000), kv("test.u32", U32, 4000000000), kv("test.i32", I32, -2000000000),
             kv("test.f32", F32, 0.25), kv("test.bool", BOOL, 1), kv("test.string", STRING, "caf\u00e9"),
             kv("test.u64", U64, 2 ** 63 + 5), kv("test.i64", I64, -2 ** 62), kv("test.f64", F64, -1e300),
             kv("test.array.i16", ARRAY, (I16, [1, -2, 3])), kv("test.array.bool", ARRAY, (BOOL, [0, 1, 1])),
             kv("test.array.f64", ARRAY, (F64, [0.5, -0.5])), kv("test.array.empty", ARRAY, (U64, [])),
             kv("test.array.strings", ARRAY, (STRING, ["", "a", "b c"])),
             kv("test.array.nested", ARRAY, (ARRAY, [(U8, [1, 2]), (STRING, ["x"]), (ARRAY, [(I64, [-1])])]))]

    infos, datas, refs, off = [], [], {}, 0
    order = sorted(t, key=lambda n: gguf_name(n))     # any order: the reader sorts
    for name in order:
        w = t[name]
        if name.endswith("q_proj.weight"):
            w = permute(w, H)
        elif name.endswith("k_proj.weight"):
            w = permute(w, KV)
        kind = opt["--type"] if w.ndim == 2 else "f32"
        if kind in ("q8_0", "q4_0") and w.shape[-1] % 32:
            kind = "f16"        # as llama.cpp falls back for rows of no whole block
        data, back = encode(w, kind)
        if "--iq4nl" in flags and name == "model.embed_tokens.weight":
            kind, data = "iq4_nl", b"\0" * (18 * -(-w.size // 32))
        if name.endswith("q_proj.weight"):
            back = unpermute(back, H)
        elif name.endswith("k_proj.weight"):
            back = unpermute(back, KV)
        refs[name] = back
        ne = list(reversed(w.shape))
        infos.append(gstr(gguf_name(name)) + struct.pack("<I", len(ne)) +
                     b"".join(struct.pack("<Q", x) for x in ne) + struct.pack("<IQ", GGML[kind], off))
        pad = (-len(data)) % align
        datas.append(data + b"\0" * pad)
        off += len(data) + pad
    if "--extra" in flags:
        hd = cfg.get("head_dim", cfg["hidden_size"] // H)
        data = np.ones(hd // 2, dtype="<f4").tobytes()
        infos.append(gstr("rope_freqs.weight") + struct.pack("<IQ", 1, hd // 2) + struct.pack("<IQ", 0, off))
        datas.append(data + b"\0" * ((-len(data)) % align))
    head = b"GGUF" + struct.pack("<IQQ", int(opt["--version"]), len(infos), len(meta))
    body = head + b"".join(meta) + b"".join(infos)
    body += b"\0" * ((-len(body)) % align)
    with open(out, "wb") as f:
        f.write(body + b"".join(datas))

    # the reference: what a reader must give back, as F32 safetensors
    os.makedirs(ref, exist_ok=True)
    header, blob, pos = {}, [], 0
    for name in sorted(refs):
        b = np.ascontiguousarray(refs[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(refs[name].shape), "data_offsets": [pos, pos + len(b)]}
        blob.append(b)
        pos += len(b)
    hj = json.dumps(header).encode()
    with open(os.path.join(ref, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + b"".join(blob))
    conf = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "hidden_size": cfg["hidden_size"], "intermediate_size": cfg["intermediate_size"],
            "num_hidden_layers": cfg["num_hidden_layers"], "num_attention_heads": H,
            "num_key_value_heads": KV, "vocab_size": V,
            "max_position_embeddings": cfg.get("max_position_embeddings", 64),
            # as the GGUF holds them: float32
            "rms_norm_eps": float(np.float32(cfg.get("rms_norm_eps", 1e-5))),
            "rope_theta": float(np.float32(cfg.get("rope_theta", 10000.0))),
            "tie_word_embeddings": "lm_head.weight" not in refs}
    if opt["--rope-scaling"]:
        conf["rope_scaling"] = {"rope_type": rope_type, "factor": float(np.float32(rope_factor))}
    json.dump(conf, open(os.path.join(ref, "config.json"), "w"))


if __name__ == "__main__":
    main()
