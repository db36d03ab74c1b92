#!/bin/sh
# Tensors a family stores as something other than one [out, in] matrix
# per role are read as one tensor per role (per expert): GPT-2's c_attn
# (Conv1D [in, out], q, k, v by thirds), Phi-3's qkv_proj (q, k, v of
# n_heads hd, n_kv_heads hd, n_kv_heads hd rows) and gate_up_proj (gate,
# up by halves), GPT-NeoX's query_key_value (q, k, v interleaved per
# head), and GGUF's stacked experts ffn_*_exps [E, out, in] (a row per
# expert). The splits are written here in numpy from transformers'
# modeling files (modeling_gpt2.py: split(n_embd) of the Conv1D output;
# modeling_phi3.py: qkv[..., :H hd], the next KV hd, the rest, and
# chunk(2); modeling_gpt_neox.py: the output viewed as [H, 3 hd]) and
# from gguf-py's writer (numpy's [E, out, in], dims listed fastest first),
# not from our output; sw-ls, sw-norms and sw-qkdrift are checked against
# them, and a fused tensor whose rows the config does not give is refused.
. "$(dirname "$0")/../lib/tap.sh"

A=$SW_TOP/fixtures/arch
G=$A/mixtral-gguf/model.gguf

# what sw-ls lists for each fused tensor of layer L (GPT-2, Phi-3 and
# GPT-NeoX at d_model 16, 2 heads of 8, Phi-3's d_ff 32): name role
# layer block shape
parts_expect() {
	for l in 0 1; do
		for p in q:qk k:qk v:vo; do
			r=${p%:*} b=${p#*:}
			echo "transformer.h.$l.attn.c_attn.weight:$r $r $l $b 16x16" >>gpt2.expect
			echo "transformer.h.$l.attn.c_attn.bias:$r ${r}_bias $l $b 16" >>gpt2.expect
			echo "model.layers.$l.self_attn.qkv_proj.weight:$r $r $l $b 16x16" >>phi3.expect
			echo "gpt_neox.layers.$l.attention.query_key_value.weight:$r $r $l $b 16x16" >>gpt_neox.expect
			echo "gpt_neox.layers.$l.attention.query_key_value.bias:$r ${r}_bias $l $b 16" >>gpt_neox.expect
		done
		for r in gate up; do
			echo "model.layers.$l.mlp.gate_up_proj.weight:$r $r $l ffn 32x16" >>phi3.expect
		done
	done
}

test_expect_success 'sw-ls: each fused tensor is its parts NAME:q, NAME:k, ... with their roles, no whole' '
	parts_expect &&
	for f in gpt2 phi3 gpt_neox; do
		sw-ls "$A/$f" >ls 2>err && test_line_count = 0 err &&
		sed 1d ls | awk -F"\t" "\$2 ~ /:/ { print \$2, \$4, \$5, \$3, \$8 }" | sort >got &&
		sort $f.expect >want && test_cmp want got &&
		cut -f2 ls >names &&
		test_expect_code 1 grep -E "(c_attn|qkv_proj|gate_up_proj|query_key_value)\.(weight|bias)\$" names ||
		exit 1
	done
'

test_expect_success '--name globs and --role select parts (the colon is a plain character)' '
	sw-norms --name "*c_attn.weight:q" "$A/gpt2" >norms &&
	sed 1d norms | cut -f4,6 >got &&
	printf "transformer.h.%s.attn.c_attn.weight:q\tq\n" 0 1 >want && test_cmp want got &&
	sw-norms --role up "$A/phi3" >norms &&
	sed 1d norms | cut -f4 >got &&
	printf "model.layers.%s.mlp.gate_up_proj.weight:up\n" 0 1 >want && test_cmp want got
'

# a safetensors file of float32 tensors NAME=ROWSxCOLS (or NAME=N) with
# seeded random values, beside a config.json from JSON: mkst.py DIR JSON
# NAME=SHAPE...
cat >mkst.py <<'EOF'
import json, os, random, struct, sys
d, cfg = sys.argv[1], json.loads(sys.argv[2])
os.makedirs(d, exist_ok=True)
json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
rng = random.Random(20)
head, data = {}, b""
for arg in sys.argv[3:]:
    name, shape = arg.split("=")
    dims = [int(x) for x in shape.split("x")]
    n = 1
    for x in dims:
        n *= x
    vals = [1 + 0.3 * rng.gauss(0, 1) if name.endswith("norm.weight") else rng.gauss(0, 1)
            for _ in range(n)]
    head[name] = {"dtype": "F32", "shape": dims, "data_offsets": [len(data), len(data) + 4 * n]}
    data += struct.pack("<%df" % n, *vals)
h = json.dumps(head).encode()
h += b" " * (-len(h) % 8)
open(os.path.join(d, "model.safetensors"), "wb").write(struct.pack("<Q", len(h)) + h + data)
EOF

# Phi-3 with grouped-query attention (4 heads, 2 KV heads of 4): k and v
# are n_kv_heads hd rows each; GPT-NeoX with 4 heads of 4 and an input
# norm gain away from 1 (sw-qkdrift folds it in)
test_expect_success 'setup: Phi-3 with GQA, GPT-NeoX with 4 heads and a gain' '
	"$PY" mkst.py phi3gqa "{\"architectures\": [\"Phi3ForCausalLM\"], \"vocab_size\": 8,
		\"hidden_size\": 16, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,
		\"num_key_value_heads\": 2, \"intermediate_size\": 8}" \
		model.layers.0.input_layernorm.weight=16 \
		model.layers.0.self_attn.qkv_proj.weight=32x16 \
		model.layers.0.mlp.gate_up_proj.weight=16x16 &&
	"$PY" mkst.py neox4 "{\"architectures\": [\"GPTNeoXForCausalLM\"], \"vocab_size\": 8,
		\"hidden_size\": 16, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,
		\"intermediate_size\": 8}" \
		gpt_neox.layers.0.input_layernorm.weight=16 \
		gpt_neox.layers.0.attention.query_key_value.weight=48x16 \
		gpt_neox.layers.0.attention.query_key_value.bias=48 &&
	sw-ls phi3gqa >ls &&
	sed 1d ls | awk -F"\t" "\$2 ~ /:/ { print \$2, \$8 }" >got &&
	cat >want <<-\EOF &&
	model.layers.0.self_attn.qkv_proj.weight:q 16x16
	model.layers.0.self_attn.qkv_proj.weight:k 8x16
	model.layers.0.self_attn.qkv_proj.weight:v 8x16
	model.layers.0.mlp.gate_up_proj.weight:gate 8x16
	model.layers.0.mlp.gate_up_proj.weight:up 8x16
	EOF
	test_cmp want got
'

# The parts as numpy takes them from the stored bytes, split as
# transformers splits the fused products (not as our table says):
# ref.py DIR norms | qkdrift; ref.py DIR torch OUT: the stored tensors
# as torch.save writes a state dict
cat >ref.py <<'EOF'
import json, struct, sys
import numpy as np
d, what = sys.argv[1], sys.argv[2]
cfg = json.load(open(d + "/config.json"))
raw = open(d + "/model.safetensors", "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
w = {}
for k, e in json.loads(raw[8:8 + n]).items():
    if k == "__metadata__":
        continue
    b, end = e["data_offsets"]
    w[k] = np.frombuffer(raw[8 + n + b:8 + n + end], dtype="<f4").reshape(e["shape"]).astype(np.float64)
if what == "torch":
    import torch
    torch.save({k: torch.from_numpy(x.astype(np.float32)) for k, x in w.items()}, sys.argv[3])
    sys.exit(0)
D = cfg.get("hidden_size", cfg.get("n_embd"))
H = cfg.get("num_attention_heads", cfg.get("n_head"))
KV = cfg.get("num_key_value_heads", H)
hd = D // H
parts, gain = {}, {}
for k, x in w.items():
    layer = (k.split(".") + ["", ""])[2]          # X.layers.L. / transformer.h.L.
    if k.endswith("attn.c_attn.weight"):            # Conv1D: y = x W, W [D, 3D]
        q, kk, v = np.split(x.T, 3, axis=0)
    elif k.endswith("qkv_proj.weight"):
        q, kk, v = x[:H * hd], x[H * hd:(H + KV) * hd], x[(H + KV) * hd:]
    elif k.endswith("query_key_value.weight"):      # viewed [H, 3 hd]: q, k, v per head
        x4 = x.reshape(H, 3, hd, D)
        q, kk, v = (x4[:, i].reshape(H * hd, D) for i in range(3))
    elif k.endswith("gate_up_proj.weight"):
        for r, p in zip(("gate", "up"), np.split(x, 2, axis=0)):
            parts[k + ":" + r] = p
        continue
    else:
        if k.endswith(("ln_1.weight", "input_layernorm.weight")):
            gain[layer] = x
        continue
    parts[k + ":q"], parts[k + ":k"], parts[k + ":v"] = q, kk, v
    parts[(layer, "q")], parts[(layer, "k")] = q, kk
if what == "norms":
    for k in sorted(p for p in parts if isinstance(p, str)):
        p = parts[k]
        print("%s\t%.9g\t%.9g" % (k, np.linalg.svd(p, compute_uv=False)[0], np.linalg.norm(p)))
else:
    # man/sw-qkdrift.1: Q_h rows [h hd, (h+1) hd) of W_q diag(gamma), K_h the
    # same of k for the KV head h / (H / KV); scale = RMS of the block
    for layer in sorted(gain, key=int):
        q, k, g = parts[(layer, "q")] * gain[layer], parts[(layer, "k")] * gain[layer], H // KV
        for h in range(H):
            qr = np.sqrt(np.mean(q[h * hd:(h + 1) * hd] ** 2))
            kr = np.sqrt(np.mean(k[(h // g) * hd:(h // g + 1) * hd] ** 2))
            print("%s\t%d\t%d\t%.9g\t%.9g\t%.9g\t%.9g" % (layer, h, h // g, qr, kr, qr * kr, np.log2(qr / kr)))
EOF

if have_python_modules numpy; then
	# 1e-5 relative: numpy in float64 on the same float32 values;
	# sw-norms sums in double and stops Lanczos at 1e-6
	for f in "$A/gpt2" "$A/phi3" "$A/gpt_neox" phi3gqa neox4; do
		test_expect_success "${f##*/}: sw-norms' spectral and Frobenius of each part = numpy's to 1e-5" "
			\"\$PY\" ref.py \"$f\" norms >expect &&
			sw-norms \"$f\" >norms &&
			awk -F'\t' 'NR > 1 && \$4 ~ /:/ { print \$4 \"\t\" \$13 \"\t\" \$14 }' norms | sort >actual &&
			test_line_count -ge 3 expect && test_line_count = \$(wc -l <expect) actual &&
			numbers_close 1e-5 expect actual
		"
	done
	# 1e-7 relative: both sum squares in double from the same float32
	# values (rounding near 1e-15); sw-qkdrift prints 9 digits (5e-9)
	for f in "$A/gpt2" "$A/phi3" "$A/gpt_neox" phi3gqa neox4; do
		test_expect_success "${f##*/}: sw-qkdrift runs, its q_rms, k_rms, product, log2_ratio = numpy's to 1e-7" "
			\"\$PY\" ref.py \"$f\" qkdrift >expect &&
			sw-qkdrift \"$f\" >qk 2>err && test_line_count = 0 err &&
			awk -F'\t' 'NR > 1 { print \$4 \"\t\" \$5 \"\t\" \$6 \"\t\" \$8 \"\t\" \$9 \"\t\" \$10 \"\t\" \$11 }' qk >actual &&
			test_line_count -ge 2 expect && numbers_close 1e-7 expect actual
		"
	done
else
	test_skip 'numpy references' 'python3-numpy not installed'
fi

if have_python_modules "numpy, torch"; then
	# the reader hands up the stored tensor (its shape and strides as
	# stored); the parts are cut above it, the same for every format
	test_expect_success 'gpt2 and gpt_neox as torch.save writes them: the same parts and norms as their safetensors' '
		for f in gpt2 gpt_neox; do
			mkdir pt-$f && cp "$A/$f/config.json" pt-$f/ &&
			"$PY" ref.py "$A/$f" torch pt-$f/pytorch_model.bin &&
			sw-norms pt-$f >pt.norms && sw-norms "$A/$f" >st.norms &&
			cut -f4- pt.norms >a && cut -f4- st.norms >b && test_cmp b a &&
			grep -q "query_key_value.weight:v	\|c_attn.weight:v	" a || exit 1
		done
	'
else
	test_skip 'torch.save' 'python3-torch not installed'
fi

# rows the config does not give: refused naming the tensor, one line, 65,
# no row (a table's header at most)
test_expect_success 'a fused tensor whose rows do not match the config is refused in one line (65)' '
	"$PY" mkst.py badphi "{\"architectures\": [\"Phi3ForCausalLM\"], \"vocab_size\": 8,
		\"hidden_size\": 16, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,
		\"num_key_value_heads\": 2, \"intermediate_size\": 8}" \
		model.layers.0.self_attn.qkv_proj.weight=40x16 &&
	"$PY" mkst.py badneox "{\"architectures\": [\"GPTNeoXForCausalLM\"], \"vocab_size\": 8,
		\"hidden_size\": 16, \"num_hidden_layers\": 1, \"num_attention_heads\": 2}" \
		gpt_neox.layers.0.attention.query_key_value.bias=40 &&
	"$PY" mkst.py badgpt2 "{\"architectures\": [\"GPT2LMHeadModel\"], \"vocab_size\": 8,
		\"n_embd\": 16, \"n_layer\": 1, \"n_head\": 2}" \
		transformer.h.0.attn.c_attn.weight=16x40 &&
	"$PY" mkst.py badup "{\"architectures\": [\"Phi3ForCausalLM\"], \"vocab_size\": 8,
		\"hidden_size\": 16, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,
		\"intermediate_size\": 8}" \
		model.layers.0.mlp.gate_up_proj.weight=16x16x1 &&
	for tool in sw-ls sw-norms sw-qkdrift; do
		test_expect_code 65 $tool badphi >out 2>err && test_one_error $tool badphi &&
		grep -q "^$tool: badphi.*: model.layers.0.self_attn.qkv_proj.weight: 40 rows, not the 48 of q, k, v the config gives (16 + 16 + 16)\$" err &&
		test_line_count -le 1 out || exit 1
	done &&
	test_expect_code 65 sw-ls badneox >out 2>err && test_one_error sw-ls badneox &&
	grep -q ": gpt_neox.layers.0.attention.query_key_value.bias: 40 rows, not the 48 of q_bias, k_bias, v_bias per head the config gives (2 heads x (8 + 8 + 8))\$" err &&
	test_expect_code 65 sw-ls badgpt2 >out 2>err && test_one_error sw-ls badgpt2 &&
	grep -q ": transformer.h.0.attn.c_attn.weight: 40 rows, not the 48 of q, k, v the config gives (16 + 16 + 16)\$" err &&
	test_expect_code 65 sw-ls badup >out 2>err && test_one_error sw-ls badup &&
	grep -q ": model.layers.0.mlp.gate_up_proj.weight: rank 3, not the 2 its family stores it in\$" err
'

# ---- stacked experts (GGUF) ---------------------------------------------

# the GGUF file's tensors as numpy arrays, from its bytes (gguf.md: the
# header, the key-value pairs, the tensor infos with dims fastest first,
# the data at general.alignment, 32 by default)
cat >gguf.py <<'EOF'
import struct, sys
import numpy as np
def read(path):
    b = open(path, "rb").read()
    at = [0]
    def take(fmt):
        v = struct.unpack_from("<" + fmt, b, at[0])
        at[0] += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v
    def string():
        n = take("Q")
        at[0] += n
        return b[at[0] - n:at[0]].decode()
    fixed = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(fixed[t])
    assert b[:4] == b"GGUF"
    at[0] = 4
    version, nt, nkv = take("I"), take("Q"), take("Q")
    kv = {}
    for _ in range(nkv):
        k = string()
        kv[k] = value(take("I"))
    infos = []
    for _ in range(nt):
        name = string()
        ne = [take("Q") for _ in range(take("I"))]
        infos.append((name, ne, take("I"), take("Q")))
    align = kv.get("general.alignment", 32)
    data = (at[0] + align - 1) // align * align
    out = {}
    for name, ne, t, off in infos:
        dt = {0: "<f4", 1: "<f2"}[t]
        n = int(np.prod(ne))
        out[name] = np.frombuffer(b, dtype=dt, count=n, offset=data + off).reshape(ne[::-1]).astype(np.float64)
    return kv, out
kv, t = read(sys.argv[1])
for name in sorted(t):
    if name.endswith("_exps.weight"):
        assert kv["llama.expert_count"] == t[name].shape[0]
        for e, m in enumerate(t[name]):
            print("%s:%d\t%d\t%d\t%.9g\t%.9g" % (name, e, m.shape[0], m.shape[1],
                  np.linalg.svd(m, compute_uv=False)[0], np.linalg.norm(m)))
EOF

test_expect_success 'GGUF stacked experts: a row per expert, role expert_*, its layer, experts in order' '
	sw-ls "$G" >ls 2>err && test_line_count = 0 err &&
	awk -F"\t" "\$4 ~ /^expert_/ { print \$2, \$4, \$5, \$8 }" ls >got &&
	for l in 0 1; do
		for p in gate:8x16 up:8x16 down:16x8; do
			for e in 0 1 2 3; do
				echo "blk.$l.ffn_${p%:*}_exps.weight:$e expert_${p%:*} $l ${p#*:}"
			done
		done
	done >want &&
	test_cmp want got &&
	grep -q "	blk.1.ffn_gate_inp.weight	ffn	router	1	matrix	F32	4x16	64" ls &&
	grep -q "	blk.0.ffn_up_exps.weight:2	ffn	expert_up	0	matrix	F16	8x16	128" ls &&
	# where sw-ls has an expert column: each part'"'"'s is its number
	awk -F"\t" "NR == 1 { for (i = 1; i <= NF; i++) if (\$i == \"expert\") x = i; next }
		x && \$4 ~ /^expert_/ { n = split(\$2, p, \":\"); if (\$x != p[n]) bad = 1 }
		END { exit bad }" ls
'

if have_python_modules numpy; then
	# 1e-5 relative: as above (the F16 experts widened to float64 by
	# numpy, to float32 by the reader: both exact)
	test_expect_success 'GGUF stacked experts: each expert'"'"'s shape, spectral and Frobenius norms = numpy'"'"'s to 1e-5' '
		"$PY" gguf.py "$G" >expect &&
		sw-norms "$G" >norms &&
		awk -F"\t" "NR > 1 && \$6 ~ /^expert_/ { print \$4 \"\t\" \$8 \"\t\" \$9 \"\t\" \$13 \"\t\" \$14 }" norms |
			sort >actual &&
		test_line_count = 24 actual && numbers_close 1e-5 expect actual
	'
else
	test_skip 'numpy references (GGUF)' 'python3-numpy not installed'
fi

test_expect_success 'GGUF: a stack of experts in a layer past the config is refused in one line (65)' '
	"$PY" -c "import sys; b = open(sys.argv[1], \"rb\").read()
open(\"past.gguf\", \"wb\").write(b.replace(b\"blk.1.ffn_up_exps\", b\"blk.7.ffn_up_exps\"))" "$G" &&
	test_expect_code 65 sw-norms past.gguf >out 2>err && test_one_error sw-norms past.gguf &&
	grep -q ": blk.7.ffn_up_exps.weight: layer 7 is outside 0..1\$" err
'

test_expect_success 'GGUF with llama.expert_count is Mixtral: the model tools and sw-convert refuse it by name (65)' '
	test_expect_code 65 sw-sharpness --data "$FIX/corpus.txt" "$G" >out 2>err &&
	grep -q "architecture .mixtral. is read for its matrices only" err &&
	test_expect_code 65 sw-convert "$G" x.h5 >out 2>err && test_one_error sw-convert "$G" &&
	grep -q "architecture .mixtral. is read for its matrices only: sw-convert writes llama" err &&
	test_expect_code 1 test -e x.h5
'

test_done
