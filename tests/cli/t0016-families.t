#!/bin/sh
# The per-matrix tools on other families' checkpoints: fixtures/arch/*,
# written by transformers' save_pretrained (fixtures/make-arch.sh), read
# by sw-ls, sw-norms and sw-spectrum. A known family's tensors get the
# roles, layers and blocks its names say (the table below, written from
# transformers' modeling files, not from our output), experts in index
# order, a fused tensor as its parts NAME:q, NAME:k, ... (their rows and
# numbers are checked in t0020-fused.t); every 2-D tensor's Frobenius and spectral norms equal numpy's;
# an architecture no table knows (BLOOM, for now) is listed
# whole, block and role other, with one line on stderr; and the model
# tools and sw-convert refuse every one of them by name (65).
. "$(dirname "$0")/../lib/tap.sh"

A=$SW_TOP/fixtures/arch
KNOWN="gemma gemma2 phi3 olmo2 gpt_neox mixtral qwen2_moe olmoe gpt2"
UNKNOWN="bloom:BloomForCausalLM"

# family name role layer block: what each family's names mean
cat >roles.expect <<'EOF'
gemma model.embed_tokens.weight embed -1 emb
gemma model.layers.1.self_attn.k_proj.weight k 1 qk
gemma model.layers.0.mlp.down_proj.weight down 0 ffn
gemma model.layers.0.input_layernorm.weight attn_norm 0 norm
gemma model.layers.1.post_attention_layernorm.weight ffn_norm 1 norm
gemma model.norm.weight final_norm -1 norm
gemma lm_head.weight lm_head -1 out
gemma2 model.layers.0.input_layernorm.weight attn_norm 0 norm
gemma2 model.layers.1.post_attention_layernorm.weight attn_post_norm 1 norm
gemma2 model.layers.1.pre_feedforward_layernorm.weight ffn_norm 1 norm
gemma2 model.layers.0.post_feedforward_layernorm.weight ffn_post_norm 0 norm
gemma2 model.norm.weight final_norm -1 norm
gemma2 model.layers.0.self_attn.o_proj.weight o 0 vo
phi3 model.layers.0.self_attn.qkv_proj.weight:k k 0 qk
phi3 model.layers.1.mlp.gate_up_proj.weight:up up 1 ffn
phi3 model.layers.1.post_attention_layernorm.weight ffn_norm 1 norm
olmo2 model.layers.0.post_attention_layernorm.weight attn_post_norm 0 norm
olmo2 model.layers.1.post_feedforward_layernorm.weight ffn_post_norm 1 norm
olmo2 model.layers.0.self_attn.q_norm.weight q_norm 0 norm
gpt_neox gpt_neox.embed_in.weight embed -1 emb
gpt_neox embed_out.weight lm_head -1 out
gpt_neox gpt_neox.layers.1.attention.query_key_value.bias:v v_bias 1 vo
gpt_neox gpt_neox.layers.0.mlp.dense_4h_to_h.weight down 0 ffn
gpt_neox gpt_neox.final_layer_norm.bias final_norm_bias -1 norm
mixtral model.layers.1.block_sparse_moe.gate.weight router 1 ffn
mixtral model.layers.0.block_sparse_moe.experts.3.w1.weight expert_gate 0 ffn
mixtral model.layers.1.block_sparse_moe.experts.0.w3.weight expert_up 1 ffn
mixtral model.layers.1.block_sparse_moe.experts.2.w2.weight expert_down 1 ffn
qwen2_moe model.layers.0.self_attn.q_proj.bias q_bias 0 qk
qwen2_moe model.layers.1.mlp.shared_expert_gate.weight shared_router 1 ffn
qwen2_moe model.layers.1.mlp.shared_expert.down_proj.weight shared_down 1 ffn
qwen2_moe model.layers.0.mlp.experts.1.up_proj.weight expert_up 0 ffn
olmoe model.layers.1.mlp.gate.weight router 1 ffn
olmoe model.layers.0.self_attn.k_norm.weight k_norm 0 norm
olmoe model.norm.weight final_norm -1 norm
gpt2 transformer.wpe.weight pos_embed -1 emb
gpt2 transformer.h.1.attn.c_attn.weight:q q 1 qk
gpt2 transformer.h.0.mlp.c_proj.weight down 0 ffn
EOF

# the tensors of a safetensors file, from its header (name, rank)
tensors() {
	"$PY" -c '
import json, struct, sys
raw = open(sys.argv[1], "rb").read(1 << 20)
(n,) = struct.unpack("<Q", raw[:8])
for k, e in sorted(json.loads(raw[8:8 + n]).items()):
    if k != "__metadata__":
        print(k, len(e["shape"]))' "$1"
}

for f in $KNOWN; do
	test_expect_success "$f: sw-ls lists every tensor, nothing on stderr, the roles its names say" "
		sw-ls \"\$A/$f/model.safetensors\" >ls 2>err && test_line_count = 0 err &&
		tensors \"\$A/$f/model.safetensors\" | cut -d' ' -f1 >want &&
		sed 1d ls | cut -f2 | grep -v '^lm_head.weight\$' | sed 's/:[a-z]*\$//' | sort -u >got &&
		grep -v '^lm_head.weight\$' want >want2 && test_cmp want2 got &&
		grep '^$f ' roles.expect | cut -d' ' -f2- | sort >expect &&
		test -s expect &&
		sed 1d ls | awk -F'\t' '{ print \$2, \$4, \$5, \$3 }' >all &&
		grep -F -x -f expect all | sort >found && test_cmp expect found
	"
done

test_expect_success 'a known family names every tensor' '
	for f in gemma gemma2 phi3 olmo2 gpt_neox mixtral qwen2_moe olmoe; do
		sw-ls "$A/$f/model.safetensors" >ls &&
		awk -F"\t" "NR > 1 && \$4 == \"other\"" ls >other &&
		test_line_count = 0 other || { echo "$f: $(cat other)"; exit 1; }
	done
'

test_expect_success 'experts in index order, each role of a layer in turn' '
	sw-ls "$A/mixtral/model.safetensors" >ls &&
	awk -F"\t" "\$5 == 0 && \$4 ~ /^expert_/ { print \$4, \$2 }" ls >experts &&
	for rw in expert_gate:w1 expert_up:w3 expert_down:w2; do
		for e in 0 1 2 3; do
			echo "${rw%:*} model.layers.0.block_sparse_moe.experts.$e.${rw#*:}.weight"
		done
	done >want &&
	test_cmp want experts
'

test_expect_success '--role selects a family role (the router of each MoE layer)' '
	sw-norms --role router "$A/olmoe/model.safetensors" >norms &&
	sed 1d norms | cut -f4 >got &&
	printf "%s\n" model.layers.0.mlp.gate.weight model.layers.1.mlp.gate.weight >want &&
	test_cmp want got
'

for u in $UNKNOWN; do
	f=${u%%:*} cls=${u#*:}
	test_expect_success "$f ($cls, no table yet): every tensor listed, block and role other, one line on stderr" "
		sw-ls \"\$A/$f/model.safetensors\" >ls 2>err &&
		test_line_count = 1 err &&
		grep -q \"^sw-ls: \$A/$f/model.safetensors: architecture '$cls' is not known: its tensors are listed with block and role other\" err &&
		tensors \"\$A/$f/model.safetensors\" | cut -d' ' -f1 >want &&
		sed 1d ls | cut -f2 | sort >got && test_cmp want got &&
		sed 1d ls | cut -f3,4 | sort -u >kinds && printf 'other\tother\n' >want &&
		test_cmp want kinds
	"
done

# numpy's norms of each matrix (a 2-D tensor of at least 2 rows and 2
# columns: one of 1 x N, Qwen2-MoE's shared expert gate, is a vector, as
# scalewatch-format(5) says), in float64 by a full SVD, as stored (the
# norms sw-norms prints next to them do not depend on the side: the
# embedding is listed as its transpose); a tied head (Gemma) is the
# embedding again; a fused tensor's parts are t0020-fused.t's
cat >ref.py <<'EOF'
import json, struct, sys
import numpy as np
path, tied = sys.argv[1], sys.argv[2] == "1"
raw = open(path, "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
rows = {}
for k, e in json.loads(raw[8:8 + n]).items():
    if k == "__metadata__" or len(e["shape"]) != 2 or min(e["shape"]) < 2:
        continue
    if k.endswith(("c_attn.weight", "qkv_proj.weight", "gate_up_proj.weight", ".attention.query_key_value.weight")):
        continue
    b, end = e["data_offsets"]
    rows[k] = np.frombuffer(raw[8 + n + b:8 + n + end], dtype="<f4").reshape(e["shape"]).astype(np.float64)
if tied and "lm_head.weight" not in rows:
    rows["lm_head.weight"] = rows.get("model.embed_tokens.weight", rows.get("transformer.wte.weight"))
for k in sorted(rows):
    w = rows[k]
    print("%s\t%.9g\t%.9g" % (k, np.linalg.svd(w, compute_uv=False)[0], np.linalg.norm(w)))
EOF

if have_python_modules numpy; then
	for u in $KNOWN bloom; do
		tied=0 && case $u in gemma|gemma2|gpt2) tied=1 ;; esac
		# 1e-5 relative: numpy works in float64 on the same float32
		# values; sw-norms sums in double and stops Lanczos at 1e-6
		test_expect_success "$u: sw-norms' spectral and Frobenius norms = numpy's to 1e-5" "
			\"\$PY\" ref.py \"\$A/$u/model.safetensors\" $tied >expect &&
			sw-norms \"\$A/$u/model.safetensors\" >norms 2>/dev/null &&
			awk -F'\t' 'NR > 1 && \$6 != \"lm_head_folded\" && \$4 !~ /:/ { print \$4 \"\t\" \$13 \"\t\" \$14 }' norms |
				sort >actual &&
			test_line_count = \$(wc -l <expect) actual &&
			numbers_close 1e-5 expect actual
		"
	done
	test_expect_success 'qwen2_moe: sw-spectrum --top 1 is numpy sigma_max to 1e-5, an expert and a router' '
		"$PY" ref.py "$A/qwen2_moe/model.safetensors" 0 >all &&
		grep -E "^model.layers.1.mlp.(experts.3.down_proj|gate).weight	" all |
			cut -f1,2 >expect &&
		sw-spectrum --top 1 --name model.layers.1.mlp.experts.3.down_proj.weight \
			--name model.layers.1.mlp.gate.weight \
			"$A/qwen2_moe/model.safetensors" >spec &&
		sed 1d spec | cut -f3,8 | sort >actual &&
		numbers_close 1e-5 expect actual
	'
else
	test_skip 'numpy references' 'python3-numpy not installed'
fi

if have_python_modules "numpy, torch"; then
	test_expect_success 'mixtral as torch.save writes it (pytorch_model.bin): the same rows as its safetensors' '
		mkdir pt && cp "$A/mixtral/config.json" pt/ &&
		"$PY" -c "
import json, struct, sys, numpy as np, torch
raw = open(sys.argv[1], \"rb\").read()
(n,) = struct.unpack(\"<Q\", raw[:8])
sd = {k: torch.from_numpy(np.frombuffer(raw[8 + n + e[\"data_offsets\"][0]:8 + n + e[\"data_offsets\"][1]],
                                        dtype=\"<f4\").reshape(e[\"shape\"]).copy())
      for k, e in json.loads(raw[8:8 + n]).items() if k != \"__metadata__\"}
torch.save(sd, \"pt/pytorch_model.bin\")" "$A/mixtral/model.safetensors" &&
		sw-ls pt >pt.ls && sw-ls "$A/mixtral" >st.ls &&
		cut -f2- pt.ls >a && cut -f2- st.ls >b && test_cmp b a &&
		grep -q "	expert_down	1	" a
	'
else
	test_skip 'torch.save' 'python3-torch not installed'
fi

for f in mixtral phi3; do
	test_expect_success "$f: the model tools and sw-convert refuse it by name (65), nothing written" "
		for tool in sw-sharpness sw-hessian; do
			test_expect_code 65 \$tool --data \"\$FIX/corpus.txt\" \"\$A/$f/model.safetensors\" >out 2>err &&
			grep -q 'is read for its matrices only' err || exit 1
		done &&
		test_expect_code 65 sw-train --data \"\$FIX/corpus.txt\" --out run --steps 2 \
			--resume \"\$A/$f/model.safetensors\" >out 2>err &&
		grep -q 'is read for its matrices only' err &&
		test_expect_code 65 sw-convert \"\$A/$f/model.safetensors\" x.h5 >out 2>err &&
		test_one_error sw-convert \"\$A/$f/model.safetensors\" &&
		grep -q 'is read for its matrices only: sw-convert writes llama' err && ! test -e x.h5
	"
done

test_done
