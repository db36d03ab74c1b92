#!/usr/bin/python3
# make-seeds.py - writes the seed corpora of the fuzz targets under
# tests/fuzz/corpus/NAME: small valid files and near misses, the same bytes
# on every run. The tools never need Python; only this generator does.
#
#   python3 tests/fuzz/make-seeds.py        (from the top of the tree)
import json
import os
import struct

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(TOP, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def js(obj):
    return json.dumps(obj, separators=(",", ":"))


# ---- st-header: 8-byte data length, then the header's JSON ----
def header(entries, meta=None):
    h, off = {}, 0
    if meta is not None:
        h["__metadata__"] = meta
    for name, dtype, shape, size in entries:
        n = size
        for s in shape:
            n *= s
        h[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    return h, off


def st(name, entries, meta=None, data_len=None, mangle=None):
    h, off = header(entries, meta)
    if mangle:
        mangle(h)
    put("st-header", name, struct.pack("<Q", off if data_len is None else data_len) + js(h).encode())


tiny = [("model.embed_tokens.weight", "F32", [8, 4], 4),
        ("model.norm.weight", "F32", [4], 4),
        ("lm_head.weight", "BF16", [8, 4], 2)]
st("tiny.json", tiny, {"format": "pt"})
st("empty.json", [])
st("scalar-f16.json", [("a", "F16", [], 2), ("b", "F64", [0, 3], 8)])
st("all-dtypes.json", [(d, d, [2], s) for d, s in
                       [("F64", 8), ("F32", 4), ("F16", 2), ("BF16", 2), ("I64", 8), ("I32", 4),
                        ("I16", 2), ("I8", 1), ("U8", 1), ("BOOL", 1), ("F8_E4M3", 1),
                        ("F8_E5M2", 1), ("U16", 2), ("U32", 4), ("U64", 8)]])
st("short-data.json", tiny, data_len=10)
st("gap.json", tiny, mangle=lambda h: h["lm_head.weight"]["data_offsets"].__setitem__(0, 150))
st("overlap.json", tiny, mangle=lambda h: h["model.norm.weight"]["data_offsets"].__setitem__(0, 100))
st("numel-overflow.json", [("x", "F32", [4294967296, 4294967296], 1)], data_len=0)
st("rank9.json", [("x", "F32", [1] * 9, 4)])
st("bad-dtype.json", [("x", "Q4", [2], 1)])
put("st-header", "not-object.json", struct.pack("<Q", 0) + b'["x"]')
put("st-header", "nested.json", struct.pack("<Q", 0) + b'{"a":{"b":{"c":[[[[1]]]]}}}')
# what the reference readers take and refuse beyond cJSON (jsonstrict.h)
one = b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'
put("st-header", "padded.json", struct.pack("<Q", 4) + one + b"}     ")
put("st-header", "trailing-garbage.json", struct.pack("<Q", 4) + one + b"}}garbage")
put("st-header", "escaped-names.json", struct.pack("<Q", 8) +
    b'{"\\u00e9\\ud83d\\ude00\\n":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
    b'"caf\xc3\xa9":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}')
put("st-header", "name-twice.json", struct.pack("<Q", 8) + one +
    b',"\\u0061":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}')
put("st-header", "meta-key-twice.json", struct.pack("<Q", 4) + one +
    b',"__metadata__":{"k":"1","k":"2"}}')
put("st-header", "name-slash.json", struct.pack("<Q", 4) + one.replace(b'"a"', b'"a/b"') + b"}")
put("st-header", "name-nul.json", struct.pack("<Q", 4) + one.replace(b'"a"', b'"a\\u0000b"') + b"}")
put("st-header", "name-bad-utf8.json", struct.pack("<Q", 4) + one.replace(b'"a"', b'"a\xff"') + b"}")

# ---- st-index: model.safetensors.index.json ----
put("st-index", "two-shards.json", js({"metadata": {"total_size": 1234}, "weight_map": {
    "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
    "model.norm.weight": "model-00002-of-00002.safetensors",
    "lm_head.weight": "model-00002-of-00002.safetensors"}}))
put("st-index", "empty-map.json", js({"weight_map": {}}))
put("st-index", "path.json", js({"weight_map": {"a": "../etc/passwd"}}))
put("st-index", "dotdot.json", js({"weight_map": {"a": ".."}}))
put("st-index", "not-string.json", js({"weight_map": {"a": 3}}))
put("st-index", "no-map.json", js({"metadata": {}}))
put("st-index", "listed-twice.json",
    b'{"weight_map":{"a":"m-1.safetensors","b":"m-1.safetensors","a":"m-2.safetensors"}}')
put("st-index", "escaped-name.json", b'{"weight_map":{"\\u0061/b":"m.safetensors","c":"m.safetensors"}} \n')

# ---- st-config: config.json ----
llama = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 256,
         "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 176, "max_position_embeddings": 128,
         "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": False,
         "torch_dtype": "float32"}
put("st-config", "llama.json", js(llama))
put("st-config", "qwen3.json", js(dict(llama, architectures=["Qwen3ForCausalLM"], model_type="qwen3",
                                       head_dim=32, rope_parameters={"rope_theta": 1e6})))
put("st-config", "model-type-only.json", js({k: v for k, v in llama.items() if k != "architectures"}))
put("st-config", "gpt2.json", js(dict(llama, architectures=["GPT2LMHeadModel"])))
put("st-config", "gqa-bad.json", js(dict(llama, num_key_value_heads=3)))
put("st-config", "huge.json", js(dict(llama, hidden_size=2147483648)))
put("st-config", "heads-zero.json", js(dict(llama, num_attention_heads=0)))
put("st-config", "tie-string.json", js(dict(llama, tie_word_embeddings="yes")))
put("st-config", "rope-theta-twice.json", js(llama)[:-1] + ',"rope_theta":1000000.0}')
put("st-config", "trailing-garbage.json", js(llama) + "\n}garbage")
put("st-config", "trailing-blanks.json", js(llama) + "\n\r\t ")
# the keys that change the function ([hostile3] E): computed, kept by name, refused
llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}
put("st-config", "rope-llama3.json", js(dict(llama, rope_scaling=llama3)))
put("st-config", "rope-linear-type.json", js(dict(llama, rope_scaling={"type": "linear", "factor": 2})))
put("st-config", "rope-parameters-llama3.json",
    js(dict({k: v for k, v in llama.items() if k != "rope_theta"},
            rope_parameters=dict(llama3, rope_theta=500000.0))))
put("st-config", "rope-yarn.json", js(dict(llama, rope_scaling={"rope_type": "yarn", "factor": 4.0})))
put("st-config", "rope-types-differ.json",
    js(dict(llama, rope_scaling={"rope_type": "llama3", "type": "linear", "factor": 2})))
put("st-config", "rope-bands-inverted.json",
    js(dict(llama, rope_scaling=dict(llama3, low_freq_factor=4.0, high_freq_factor=1.0))))
put("st-config", "hidden-act-gelu.json", js(dict(llama, hidden_act="gelu", partial_rotary_factor=0.5)))
put("st-config", "mistral-window.json",
    js(dict(llama, architectures=["MistralForCausalLM"], model_type="mistral", sliding_window=4096)))
put("st-config", "qwen2-window.json",
    js(dict(llama, architectures=["Qwen2ForCausalLM"], model_type="qwen2", use_sliding_window=True,
            sliding_window=32, max_window_layers=1,
            layer_types=["full_attention", "sliding_attention"])))

# ---- tokens: 2 control bytes (format and T; vocabulary), then the file ----
def llmc(ids, count=None, magic=20240520, version=1):
    h = [0] * 256
    h[0], h[1], h[2] = magic, version, len(ids) if count is None else count
    return struct.pack("<256i", *h) + struct.pack("<%dH" % len(ids), *ids)


ids = [(i * 37) % 300 for i in range(64)]
# byte 0: bits 0-2 format (0 auto, 1 auto .bin, 2 llm.c, 3 uint16, 4 bytes,
# 5-7 tokfile_parse), bits 3-7 T - 1; byte 1: vocabulary 257 x b (0: 65536)
put("tokens", "llmc-auto", bytes([0 | (7 << 3), 2]) + llmc(ids))
put("tokens", "llmc-vocab-small", bytes([2 | (3 << 3), 1]) + llmc(ids))
put("tokens", "llmc-count-lies", bytes([0, 0]) + llmc(ids, count=65))
put("tokens", "llmc-version2", bytes([2, 0]) + llmc(ids, version=2))
put("tokens", "llmc-empty-tokfile", bytes([5, 0]) + llmc([]))
put("tokens", "llmc-tokfile", bytes([5, 0]) + llmc(ids))
put("tokens", "bin-uint16", bytes([1 | (15 << 3), 0]) + struct.pack("<64H", *ids))
put("tokens", "bin-odd", bytes([3, 0]) + struct.pack("<64H", *ids)[:-1])
put("tokens", "text-bytes", bytes([4 | (31 << 3), 1]) + b"the quick brown fox jumps over the lazy dog " * 2)
put("tokens", "one-token", bytes([3, 0]) + b"\x01\x00")

# ---- h5ckpt: a program of edits (see fuzz-h5ckpt.c); empty: none ----
# ops: 0-7 attribute (delete, int, float, string, vlen string, array,
# bool, null space), 8 replace a tensor, 9 poke NaN, 10-15 links
put("h5ckpt", "none", b"")
put("h5ckpt", "config-nan-eps", bytes([2, 1, 13, 0]))
put("h5ckpt", "config-vocab-huge", bytes([1, 1, 5, 0, 11, 0]))
put("h5ckpt", "delete-role", bytes([0, 0x80, 3, 23]))
put("h5ckpt", "role-as-vlen", bytes([4, 0x80, 2, 23, 21]))
put("h5ckpt", "layer-array", bytes([5, 0x80, 4, 24, 2]))
put("h5ckpt", "bool-tie", bytes([6, 1, 14, 1]))
put("h5ckpt", "null-step", bytes([7, 0, 2]))
put("h5ckpt", "transpose", bytes([8, 2, 1, 0]))
put("h5ckpt", "off-by-one-f16", bytes([8, 6, 2, 2, 0, 1]))
put("h5ckpt", "chunked-deflate", bytes([8, 0, 0, 5]))
put("h5ckpt", "big-endian", bytes([8, 4, 0, 3]))
put("h5ckpt", "int32", bytes([8, 4, 0, 4]))
put("h5ckpt", "unwritten", bytes([8, 1, 0, 6]))
put("h5ckpt", "nan-value", bytes([9, 3, 5, 0]))
put("h5ckpt", "config-dataset", bytes([10, 0, 0]))
put("h5ckpt", "params-dataset", bytes([10, 3, 0]))
put("h5ckpt", "tensor-group", bytes([11, 0x80, 1, 0]))
put("h5ckpt", "delete-tensor", bytes([12, 0x80, 7, 0]))
put("h5ckpt", "rename", bytes([13, 0x80, 2, 2]))
put("h5ckpt", "link-twice", bytes([14, 0x80, 5, 6]))
put("h5ckpt", "dangling", bytes([15, 0x80, 5, 6, 0]))
put("h5ckpt", "arch-gpt2", bytes([3, 1, 4, 5, 0]))
put("h5ckpt", "format-trace", bytes([3, 0, 0, 1, 0]))
# data outside the file or never written (op 8, ty 8-11), external links
# (op 16: object, name byte, outside.h5 or missing.h5), a userblock of the
# input's bytes (op 17: 512, 1024 or 2048 bytes)
put("h5ckpt", "external-storage", bytes([8, 3, 0, 8, 0]))
put("h5ckpt", "vds-outside", bytes([8, 3, 0, 9]))
put("h5ckpt", "vds-missing", bytes([8, 3, 0, 10]))
put("h5ckpt", "partly-written", bytes([8, 3, 0, 11]))
put("h5ckpt", "elink-tensor", bytes([16, 0x80, 3, 0, 1]))
put("h5ckpt", "elink-params", bytes([16, 4, 0, 1]))
put("h5ckpt", "elink-config-missing", bytes([16, 1, 0, 0]))
put("h5ckpt", "elink-metrics", bytes([16, 2, 0, 1]))
put("h5ckpt", "elink-optim", bytes([16, 3, 0, 1]))
put("h5ckpt", "userblock", bytes([17, 0]))
put("h5ckpt", "userblock-safetensors", bytes([17, 1]) + struct.pack("<Q", 20) + b'{"__metadata__":{}} ')
put("h5ckpt", "userblock-deflate", bytes([8, 0, 0, 5, 17, 2, 0x55]))
