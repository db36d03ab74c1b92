#!/bin/sh
# The families newer than the transformers t0016's fixtures were written
# with: Qwen3 (QK-norm per head, a head_dim of 12 that is not
# hidden_size / heads), Gemma3's text model (Gemma3ForCausalLM,
# model_type gemma3_text: Gemma2's four norms per layer and QK-norm, all
# (1 + w) gains) and Qwen3-MoE (QK-norm, routed experts, no shared one, a
# dense MLP where decoder_sparse_step says), written by transformers
# 5.24.0's save_pretrained (fixtures/make-arch.sh) with random norm
# weights. sw-ls gives every tensor the role, layer and block its name
# has in transformers' modeling files (written out below, not from our
# output); every matrix's Frobenius and spectral norms (sw-norms) and
# sw-spectrum --esd-fit's largest eigenvalue equal numpy's; sw-qkdrift
# reads each layer's heads; the model tools refuse Gemma3 and Qwen3-MoE
# by name, and refuse by name what a Qwen3 config asks that the model
# does not compute. (Qwen3's numbers in the model: e2e/t0215.)
. "$(dirname "$0")/../lib/tap.sh"

A=$SW_TOP/fixtures/arch
NEW="qwen3 gemma3 qwen3_moe"

# DIR FAMILY: name role layer block of every tensor of DIR (and the tied
# head where config.json ties it), from its safetensors header and the
# names transformers' Qwen3, Gemma3 and Qwen3-MoE classes give each
# module; a name not below is an error (the fixture has a tensor this
# test does not know)
cat >roles.py <<'EOF'
import json, re, struct, sys
path, fam = sys.argv[1], sys.argv[2]
raw = open(path + "/model.safetensors", "rb").read(1 << 20)
(n,) = struct.unpack("<Q", raw[:8])
names = [k for k in json.loads(raw[8:8 + n]) if k != "__metadata__"]
if json.load(open(path + "/config.json")).get("tie_word_embeddings") and "lm_head.weight" not in names:
    names.append("lm_head.weight")
top = {"model.embed_tokens.weight": ("embed", "emb"), "model.norm.weight": ("final_norm", "norm"),
       "lm_head.weight": ("lm_head", "out")}
layer = {"input_layernorm": ("attn_norm", "norm"), "post_attention_layernorm": ("ffn_norm", "norm"),
         "self_attn.q_proj": ("q", "qk"), "self_attn.k_proj": ("k", "qk"),
         "self_attn.v_proj": ("v", "vo"), "self_attn.o_proj": ("o", "vo"),
         "self_attn.q_norm": ("q_norm", "norm"), "self_attn.k_norm": ("k_norm", "norm"),
         "pre_feedforward_layernorm": ("ffn_norm", "norm"),
         "post_feedforward_layernorm": ("ffn_post_norm", "norm"),
         "mlp.gate_proj": ("gate", "ffn"), "mlp.up_proj": ("up", "ffn"),
         "mlp.down_proj": ("down", "ffn"), "mlp.gate": ("router", "ffn"),
         "mlp.experts.E.gate_proj": ("expert_gate", "ffn"), "mlp.experts.E.up_proj": ("expert_up", "ffn"),
         "mlp.experts.E.down_proj": ("expert_down", "ffn")}
for name in names:
    m = re.fullmatch(r"model\.layers\.(\d+)\.(.*)\.weight", name)
    if m:
        (role, block), l = layer[re.sub(r"experts\.\d+\.", "experts.E.", m[2])], int(m[1])
    else:
        (role, block), l = top[name], -1
    # Gemma3 normalizes each sublayer's input and output, as Gemma2
    if fam == "gemma3" and name.endswith("post_attention_layernorm.weight"):
        role = "attn_post_norm"
    print(name, role, l, block)
EOF

for f in $NEW; do
	test_expect_success "$f: sw-ls lists every tensor, nothing on stderr, the roles and layers its names say" "
		sw-ls \"\$A/$f\" >ls 2>err && test_line_count = 0 err &&
		\"\$PY\" roles.py \"\$A/$f\" $f | sort >expect &&
		test \$(wc -l <expect) -ge 25 &&
		sed 1d ls | awk -F'\t' '{ print \$2, \$4, \$5, \$3 }' | sort >actual &&
		test_cmp expect actual
	"
done

test_expect_success 'config.json as save_pretrained writes it: the class and model_type the tables name' '
	for fc in qwen3:Qwen3ForCausalLM:qwen3 gemma3:Gemma3ForCausalLM:gemma3_text \
		  qwen3_moe:Qwen3MoeForCausalLM:qwen3_moe; do
		f=${fc%%:*} rest=${fc#*:} &&
		"$PY" -c "
import json, sys
c = json.load(open(sys.argv[1]))
sys.exit(0 if c[\"architectures\"] == [sys.argv[2]] and c[\"model_type\"] == sys.argv[3] else 1)
" "$A/$f/config.json" "${rest%%:*}" "${rest#*:}" || exit 1
	done
'

# Qwen3-MoE's layer l has experts where l is not in mlp_only_layers and
# (l + 1) % decoder_sparse_step == 0 (Qwen3MoeDecoderLayer), a dense MLP
# otherwise: the fixture's config says which, sw-ls's rows agree
test_expect_success 'qwen3_moe: the dense and the expert layers where the config says, experts in order' '
	"$PY" -c "
import json, sys
c = json.load(open(sys.argv[1]))
for l in range(c[\"num_hidden_layers\"]):
    moe = l not in c[\"mlp_only_layers\"] and (l + 1) % c[\"decoder_sparse_step\"] == 0
    roles = [\"router\"] + [r for r in (\"expert_gate\", \"expert_up\", \"expert_down\")
                           for e in range(c[\"num_local_experts\"])] if moe else [\"gate\", \"up\", \"down\"]
    for r in roles:
        print(r, l)
" "$A/qwen3_moe/config.json" >expect &&
	grep -c "expert_" expect >n && test "$(cat n)" = 12 &&
	sw-ls "$A/qwen3_moe" >ls &&
	awk -F"\t" "\$3 == \"ffn\" { print \$4, \$5 }" ls >actual &&
	test_cmp expect actual &&
	awk -F"\t" "\$4 == \"expert_down\" { print \$2 }" ls >downs &&
	for e in 0 1 2 3; do echo "model.layers.1.mlp.experts.$e.down_proj.weight"; done >want &&
	test_cmp want downs
'

# numpy's norms of every matrix of a fixture, in float64 from the
# safetensors bytes (the tied head is the embedding): NAME SIGMA_MAX
# FROBENIUS, or with esd NAME COUNT LAMBDA_MAX (lambda = sigma^2 /
# max(rows, cols), count min(rows, cols): sw-spectrum(1))
cat >norms.py <<'EOF'
import json, struct, sys
import numpy as np
path, what = sys.argv[1], sys.argv[2]
raw = open(path + "/model.safetensors", "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
ws = {}
for k, e in json.loads(raw[8:8 + n]).items():
    if k != "__metadata__" and len(e["shape"]) == 2:
        b, end = e["data_offsets"]
        ws[k] = np.frombuffer(raw[8 + n + b:8 + n + end], dtype="<f4").reshape(e["shape"]).astype(np.float64)
if "lm_head.weight" not in ws:
    ws["lm_head.weight"] = ws["model.embed_tokens.weight"]
for k in sorted(ws):
    w = ws[k]
    s = np.linalg.svd(w, compute_uv=False)[0]
    if what == "esd":
        print("%s\t%d\t%.9g" % (k, min(w.shape), s * s / max(w.shape)))
    else:
        print("%s\t%.9g\t%.9g" % (k, s, np.linalg.norm(w)))
EOF

if have_python_modules numpy; then
	for f in $NEW; do
		# 1e-5 relative: numpy works in float64 on the same float32
		# values (exact), sw-norms sums in double and stops Lanczos at
		# 1e-6; lambda = sigma^2 / n doubles sigma's error, still inside
		test_expect_success "$f: every matrix's spectral and Frobenius norms = numpy's to 1e-5" "
			\"\$PY\" norms.py \"\$A/$f\" norms >expect &&
			test \$(wc -l <expect) -ge 16 &&
			sw-norms \"\$A/$f\" >norms &&
			awk -F'\t' 'NR > 1 && \$6 != \"lm_head_folded\" { print \$4 \"\t\" \$13 \"\t\" \$14 }' norms |
				sort >actual &&
			numbers_close 1e-5 expect actual
		"
		test_expect_success "$f: sw-spectrum --esd-fit: a row per matrix, lambda_max = numpy's to 1e-5" "
			\"\$PY\" norms.py \"\$A/$f\" esd >expect &&
			sw-spectrum --esd-fit \"\$A/$f\" >esd &&
			awk -F'\t' 'NR > 1 { print \$3 \"\t\" \$7 \"\t\" \$8 }' esd | sort >actual &&
			numbers_close 1e-5 expect actual
		"
	done

	# sw-qkdrift per layer and head: under QK-norm (Qwen3, Qwen3-MoE)
	# the RMS of the q_norm and k_norm gains, hd entries shared by every
	# head; Gemma3's gains are the 1 + w its norms apply (1 + w added in
	# float32, as the model adds it). 1e-6 relative: an RMS of a few
	# float32 values in double.
	cat >qk.py <<'EOF'
import json, struct, sys
import numpy as np
path, fam = sys.argv[1], sys.argv[2]
raw = open(path + "/model.safetensors", "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
hdr = json.loads(raw[8:8 + n])
c = json.load(open(path + "/config.json"))
H, KV, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
def w(name):
    e = hdr[name]
    b, end = e["data_offsets"]
    return np.frombuffer(raw[8 + n + b:8 + n + end], dtype="<f4").reshape(e["shape"]).astype(np.float64)
rms = lambda x: np.sqrt(np.mean(x * x))
for l in range(c["num_hidden_layers"]):
    p = "model.layers.%d.self_attn." % l
    for h in range(H):
        g = h // (H // KV)
        off = np.float32(1) if fam == "gemma3" else np.float32(0)
        gain = lambda name: (w(name).astype(np.float32) + off).astype(np.float64)
        src, q, k = "qk_norm_gains", rms(gain(p + "q_norm.weight")), rms(gain(p + "k_norm.weight"))
        print("%d\t%d\t%d\t%s\t%.9g\t%.9g" % (l, h, g, src, q, k))
EOF
	for f in $NEW; do
		test_expect_success "$f: sw-qkdrift, each layer and head = numpy's to 1e-6" "
			\"\$PY\" qk.py \"\$A/$f\" $f >expect &&
			test_line_count = 4 expect &&
			sw-qkdrift \"\$A/$f\" >qk &&
			awk -F'\t' 'NR > 1 { print \$4 \"\t\" \$5 \"\t\" \$6 \"\t\" \$7 \"\t\" \$8 \"\t\" \$9 }' qk >actual &&
			numbers_close 1e-6 expect actual
		"
	done
else
	test_skip 'numpy references' 'python3-numpy not installed'
fi

for f in gemma3:gemma3_text qwen3_moe:qwen3_moe; do
	test_expect_success "${f%%:*}: the model tools and sw-convert refuse it by name (65)" "
		for tool in sw-sharpness sw-hessian; do
			test_expect_code 65 \$tool --data \"\$FIX/corpus.txt\" \"\$A/${f%%:*}\" >out 2>err &&
			grep -q \"architecture '${f#*:}' is read for its matrices only\" err || exit 1
		done &&
		test_expect_code 65 sw-convert \"\$A/${f%%:*}\" x.h5 >out 2>err &&
		test_one_error sw-convert \"\$A/${f%%:*}\" && ! test -e x.h5
	"
done

# a Qwen3 config that asks for what the model does not compute: the
# fixture's own config.json (transformers 5's keys) with one key changed;
# tokens below its vocabulary of 64
edited() {
	from=${2:-$A/qwen3} &&
	rm -rf q3 && mkdir q3 && cp "$from/model.safetensors" q3/ &&
	"$PY" -c "
import json, sys
c = json.load(open(sys.argv[1]))
c.update(json.loads(sys.argv[2]))
json.dump(c, open(\"q3/config.json\", \"w\"))
" "$from/config.json" "$1"
}

test_expect_success 'a token file' '
	"$PY" -c "open(\"tok.bin\", \"wb\").write(bytes(i * 7 % 64 for i in range(400)))"
'

test_expect_success 'qwen3: a sliding window shorter than the sequences is refused by name' '
	edited "{\"use_sliding_window\": true, \"sliding_window\": 8, \"max_window_layers\": 0,
		 \"layer_types\": [\"sliding_attention\", \"sliding_attention\"]}" &&
	test_expect_code 65 sw-sharpness --data tok.bin --data-format bytes --seq-len 16 \
		--batch-tokens 32 q3 >out 2>err &&
	grep -q "sliding_window 8 is shorter than the sequences of 16" err
'

test_expect_success 'qwen3: a RoPE scaling the model does not compute is refused by name' '
	edited "{\"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4.0, \"rope_theta\": 10000.0}}" &&
	test_expect_code 65 sw-hessian --data tok.bin --data-format bytes --seq-len 16 \
		--batch-tokens 32 q3 >out 2>err &&
	grep -q "rope_scaling type .yarn. is not supported" err
'

# Qwen3Attention's q, k, v, o biases under attention_bias: none in the
# model, and a file without them would otherwise run as if they were 0
test_expect_success 'qwen3: attention_bias true is refused by name (the listing reads it)' '
	edited "{\"attention_bias\": true}" &&
	test_expect_code 65 sw-sharpness --data tok.bin --data-format bytes --seq-len 16 \
		--batch-tokens 32 q3 >out 2>err &&
	test_one_error sw-sharpness q3 &&
	grep -q "attention_bias is not supported" err &&
	sw-ls q3 >ls 2>err && test_line_count = 0 err
'

test_expect_success 'llama: mlp_bias true is refused by name too (LlamaConfig reads it)' '
	edited "{\"mlp_bias\": true}" "$FIX/tiny-hf" &&
	test_expect_code 65 sw-hessian --data tok.bin --data-format bytes --seq-len 16 \
		--batch-tokens 32 q3 >out 2>err &&
	test_one_error sw-hessian q3 &&
	grep -q "mlp_bias is not supported" err
'

test_expect_success 'qwen3: attention_bias null is the default, false, as the fixture has it' '
	edited "{\"attention_bias\": null}" &&
	sw-hessian --data tok.bin --data-format bytes --seq-len 16 --batch-tokens 32 q3 >a &&
	sw-hessian --data tok.bin --data-format bytes --seq-len 16 --batch-tokens 32 "$A/qwen3" >b &&
	cut -f2- a >a.cut && cut -f2- b >b.cut && test_cmp b.cut a.cut
'

test_done
