#!/usr/bin/python3
# make-seeds-formats.py - writes the seed corpora of fuzz-gguf and
# fuzz-llama2c under tests/fuzz/corpus/NAME: small valid files of a Llama
# with d_model 4 (2 heads, 1 KV head), one layer, 3 tokens, and near
# misses; the same bytes on every run (make-seeds.py writes the others).
#
#   python3 tests/fuzz/make-seeds-formats.py        (from the top of the tree)
import os
import struct

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(TOP, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- gguf: the file ----
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, t, v):
    out = gstr(key) + struct.pack("<I", t)
    if t == STRING:
        return out + gstr(v)
    if t == ARRAY:
        et, items = v
        out += struct.pack("<IQ", et, len(items))
        return out + b"".join(gstr(x) if et == STRING else struct.pack(FMT[et], x) for x in items)
    return out + struct.pack(FMT[t], v)


FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B",
       U64: "<Q", I64: "<q", F64: "<d"}
SIZE = {0: 4, 1: 2, 30: 2, 28: 8}       # F32, F16, BF16, F64
# Q4_0, Q4_1, Q5_0, Q5_1, Q2_K ... Q6_K: values and bytes of a block (ggml-common.h)
QUANT = {2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 10: (256, 84), 11: (256, 110),
         12: (256, 144), 13: (256, 176), 14: (256, 210)}


def tensor_bytes(ne, t, seed):
    n = 1
    for x in ne:
        n *= x
    if t == 8:                           # Q8_0: blocks of an F16 scale and 32 int8
        return b"".join(struct.pack("<e", 0.5) + bytes((i * 7 + seed) % 256 for i in range(32))
                        for _ in range(n // 32))
    if t in QUANT:                       # another quantization: patterned blocks
        values, nbytes = QUANT[t]
        return bytes((i * 7 + seed) % 256 for i in range(n // values * nbytes))
    vals = [((i * 37 + seed) % 17 - 8) / 8.0 for i in range(n)]
    fmt = {0: "<%df", 1: "<%de", 28: "<%dd"}.get(t)
    if fmt:
        return struct.pack(fmt % n, *vals)
    return b"".join(struct.pack("<f", v)[2:] for v in vals)     # BF16: the top halves


def gguf(wtype=0, tied=False, align=None, version=3, extra=(), meta=(), drop=(), arch="llama"):
    d, ff, V = 4, 4, 3
    tensors = [("token_embd.weight", [d, V]), ("blk.0.attn_norm.weight", [d]),
               ("blk.0.attn_q.weight", [d, d]), ("blk.0.attn_k.weight", [d, 2]),
               ("blk.0.attn_v.weight", [d, 2]), ("blk.0.attn_output.weight", [d, d]),
               ("blk.0.ffn_norm.weight", [d]), ("blk.0.ffn_gate.weight", [d, ff]),
               ("blk.0.ffn_up.weight", [d, ff]), ("blk.0.ffn_down.weight", [ff, d]),
               ("output_norm.weight", [d])] + ([] if tied else [("output.weight", [d, V])])
    tensors = [(n, ne, wtype if len(ne) == 2 else 0) for n, ne in tensors] + list(extra)
    a = align or 32
    m = [kv("general.architecture", STRING, arch), kv("llama.embedding_length", U32, d),
         kv("llama.block_count", U32, 1), kv("llama.attention.head_count", U32, 2),
         kv("llama.attention.head_count_kv", U32, 1), kv("llama.feed_forward_length", U32, ff),
         kv("llama.context_length", U32, 8), kv("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
         kv("llama.rope.freq_base", F32, 10000.0), kv("tokenizer.ggml.tokens", ARRAY, (STRING, ["a", "b", "c"]))]
    m = [x for x in m if not any(x[8:].startswith(k.encode()) for k in drop)] + list(meta)
    if align:
        m.append(kv("general.alignment", U32, align))
    infos, data, off = b"", b"", 0
    for i, (name, ne, t) in enumerate(tensors):
        b = tensor_bytes(ne, t, i)
        infos += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", x) for x in ne)
        infos += struct.pack("<IQ", t, off)
        b += b"\0" * ((-len(b)) % a)
        data += b
        off += len(b)
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(m)) + b"".join(m) + infos
    return head + b"\0" * ((-len(head)) % a) + data


put("gguf", "f32", gguf())
put("gguf", "f32-tied", gguf(tied=True))
put("gguf", "f16", gguf(1))
put("gguf", "bf16", gguf(30))
put("gguf", "f64", gguf(28))
put("gguf", "q8-extra", gguf(extra=[("blk.0.extra.weight", [32, 2], 8)]))
put("gguf", "align8-v2", gguf(align=8, version=2))
put("gguf", "every-type", gguf(meta=[
    kv("t.u8", U8, 1), kv("t.i8", I8, -1), kv("t.u16", U16, 2), kv("t.i16", I16, -2),
    kv("t.i32", I32, -3), kv("t.bool", BOOL, 1), kv("t.u64", U64, 2 ** 64 - 1), kv("t.i64", I64, -4),
    kv("t.f64", F64, 0.5), kv("t.bools", ARRAY, (BOOL, [0, 1])),
    gstr("t.nested") + struct.pack("<IIQ", ARRAY, ARRAY, 2) + struct.pack("<IQ", U8, 1) + b"\x07" +
    struct.pack("<IQ", STRING, 1) + gstr("x")]))
put("gguf", "vocab-key", gguf(drop=["tokenizer.ggml.tokens"], meta=[kv("llama.vocab_size", U32, 3)]))
put("gguf", "no-context", gguf(drop=["llama.context_length"]))
put("gguf", "q4k", gguf(extra=[("blk.0.extra.weight", [256, 1], 12)])[:-200])
put("gguf", "truncated", gguf()[:300])
put("gguf", "quants-extra", gguf(extra=[("blk.0.extra%d.weight" % t, [QUANT[t][0], 2], t) for t in QUANT]))
# gguf-py's file of each quantization (fixtures/make-gguf-quants.py)
put("gguf", "quants-fixture", open(os.path.join(TOP, "../../../fixtures/gguf-quants/quants.gguf"), "rb").read())
put("gguf", "gpt2", gguf(arch="gpt2"))
put("gguf", "empty-v3", b"GGUF" + struct.pack("<IQQ", 3, 0, 0))

# ---- llama2c: a mode byte (how fuzz-llama2c grows the file), then its first bytes ----
P = (4, 4, 1, 2, 1, 3, 8)       # dim, hidden_dim, layers, heads, KV heads, vocab, seq_len
floats = b"".join(struct.pack("<f", ((i * 13) % 9 - 4) / 4.0) for i in range(40))
put("llama2c", "legacy-exact", bytes([0]) + struct.pack("<7i", *P) + floats)
put("llama2c", "legacy-tables", bytes([3]) + struct.pack("<7i", *P) + floats)
put("llama2c", "legacy-untied-short", bytes([1]) + struct.pack("<7i", *P[:5], -3, 8) + floats)
put("llama2c", "legacy-long", bytes([2]) + struct.pack("<7i", *P))
v1 = struct.pack("<Ii7iB", 0x616B3432, 1, *P, 1)
put("llama2c", "v1-shared", bytes([0]) + v1 + b"\0" * (256 - len(v1)) + floats)
v1u = struct.pack("<Ii7iB", 0x616B3432, 1, *P, 0)
put("llama2c", "v1-untied", bytes([0]) + v1u + b"\0" * (256 - len(v1u)))
v2 = struct.pack("<Ii7iBi", 0x616B3432, 2, *P, 1, 64)
put("llama2c", "v2", bytes([0]) + v2 + b"\0" * (256 - len(v2)))
put("llama2c", "implausible", bytes([0]) + struct.pack("<7i", 7, 4, 1, 2, 1, 3, 8))
put("llama2c", "stories260k-header", bytes([0]) + struct.pack("<7i", 64, 172, 5, 8, 4, 512, 512))
