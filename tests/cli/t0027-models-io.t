#!/bin/sh
# GPT-2, Gemma and Gemma2 for a user: sw-train --arch gpt2, gemma or gemma2
# and its options, the names and roles of the tensors in its checkpoints
# (those of the family's Hugging Face files), and --init, a run started
# from a checkpoint of transformers (fixtures/arch) or nanoGPT
# (fixtures/nanogpt), read into the model: Conv1D weights turned, c_attn
# split into q, k, v, Gemma's w read as the gain 1 + w, each tensor
# exactly once.
. "$(dirname "$0")/../lib/tap.sh"

CORPUS=$FIX/corpus.txt
A=$FIX/arch

# a usage error, exit 64, its first line the message, no run directory
usage() {
	msg=$1
	shift
	test_expect_code 64 sw-train --data "$CORPUS" --d-model 16 --n-layers 2 --n-heads 2 \
		--seq-len 12 --batch 2 --eval-every 0 --trace "" "$@" --steps 1 --out x >out 2>err &&
	head -n 1 err >first && echo "sw-train: $msg" >expect && test_cmp expect first &&
	test ! -e x
}

test_expect_success '--arch gpt2, gemma, gemma2: the Llama step'"'"'s own options are usage errors' '
	usage "--qk-norm is for --arch llama and qwen2, not gpt2" --arch gpt2 --qk-norm &&
	usage "--multipliers is for --arch llama and qwen2, not gemma" --arch gemma --multipliers row &&
	usage "--scale-design is for --arch llama and qwen2, not gemma2" --arch gemma2 --scale-design hg &&
	usage "--no-scale-vectors is for --arch llama and qwen2, not gpt2" --arch gpt2 --no-scale-vectors &&
	usage "--norm-everywhere is for --arch llama and qwen2, not gemma" --arch gemma --norm-everywhere
'

test_expect_success 'the soft-caps are Gemma2'"'"'s; GPT-2 has no RoPE and no shared keys' '
	usage "--attn-softcap is Gemma2'"'"'s: not for --arch gemma" --arch gemma --attn-softcap 20 &&
	usage "--final-softcap is Gemma2'"'"'s: not for --arch llama" --final-softcap 20 &&
	usage "--query-pre-attn-scalar is Gemma2'"'"'s: not for --arch gpt2" --arch gpt2 \
		--query-pre-attn-scalar 8 &&
	usage "--rope-theta: --arch gpt2 has learned positions, no RoPE" --arch gpt2 --rope-theta 500 &&
	usage "--arch gpt2: every head has its keys and values (no --n-kv-heads below --n-heads)" \
		--arch gpt2 --n-kv-heads 1
'

test_expect_success '--init and --resume: one or the other' '
	usage "--init starts a run, --resume goes on with one: not both" --init "$A/gpt2" \
		--resume x.h5
'

# a run of each family the size of its fixture (fixtures/arch: d_model
# 16, 2 layers, 2 heads; Gemma's 1 KV head, head_dim 8, d_ff 32)
train() {
	sw-train --data "$CORPUS" --d-model 16 --n-layers 2 --n-heads 2 --seq-len 12 --batch 2 \
		--eval-every 0 --trace "" --threads 1 --steps 1 "$@" >/dev/null
}

test_expect_success 'setup: a step of GPT-2, Gemma and Gemma2' '
	train --arch gpt2 --out gpt2 &&
	train --arch gemma --n-kv-heads 1 --d-ff 32 --out gemma &&
	train --arch gemma2 --n-kv-heads 1 --d-ff 32 --out gemma2
'

# name, block, role, layer, kind as sw-ls lists them
for f in gpt2 gemma gemma2; do
	test_expect_success "$f: sw-ls lists the names, roles and blocks of transformers' file" '
		sw-ls $f/ckpt-000001.h5 >ours.ls && sw-ls "$A/$f" >hf.ls &&
		cut -f2-6 ours.ls >got && cut -f2-6 hf.ls >expect && test_cmp expect got
	'
done

# the sharpness paper's block types of GPT-2 (its Appendix: wte and wpe
# Emb; every LayerNorm's weight and bias Norm; c_attn's q and k QK, its v
# and c_proj VO; the MLP FFN), written here by role, not read from our
# table (the tied head listed as tied, block out); Gemma2's norm after attention is an Output-Norm of its own
# (attn_post_norm), not Llama's pre-MLP norm that shares its name
test_expect_success 'GPT-2'"'"'s block types are the paper'"'"'s, biases with their weights' '
	cat >blocks <<-\EOF &&
	embed emb
	pos_embed emb
	attn_norm norm
	attn_norm_bias norm
	q qk
	q_bias qk
	k qk
	k_bias qk
	v vo
	v_bias vo
	o vo
	o_bias vo
	ffn_norm norm
	ffn_norm_bias norm
	up ffn
	up_bias ffn
	down ffn
	down_bias ffn
	final_norm norm
	final_norm_bias norm
	lm_head out
	EOF
	sw-ls gpt2/ckpt-000001.h5 >ls &&
	awk "NR == FNR { want[\$1] = \$2; next }
		FNR > 1 { n++; if (want[\$4] != \$3) { print; bad = 1 } }
		END { if (n != 37) { print n \" tensors\"; bad = 1 } exit bad }" blocks ls
'

test_expect_success 'Gemma2: post_attention_layernorm is attn_post_norm (an Output-Norm), pre_feedforward_layernorm ffn_norm' '
	h5dump -a "/params/model.layers.1.post_attention_layernorm.weight/role" \
		-a "/params/model.layers.1.post_attention_layernorm.weight/norm_type" \
		-a "/params/model.layers.1.pre_feedforward_layernorm.weight/role" \
		gemma2/ckpt-000001.h5 >attrs &&
	grep -c "\"attn_post_norm\"\|\"output\"\|\"ffn_norm\"" attrs >n &&
	echo 3 >expect && test_cmp expect n
'

# a token file of ids below the fixtures' vocabulary of 64 (nanoGPT's
# uint16 .bin)
test_expect_success 'setup: tokens below 64' '
	"$PY" -c "
import array, random
random.seed(1)
array.array(\"H\", [random.randrange(64) for _ in range(4000)]).tofile(open(\"tok.bin\", \"wb\"))
"
'

init() {
	sw-train --data tok.bin --seq-len 12 --batch 2 --steps 1 --eval-every 0 --trace "" \
		--threads 1 "$@"
}

test_expect_success '--init: transformers'"'"' GPT-2, Gemma, Gemma2 and nanoGPT'"'"'s ckpt.pt start a run' '
	for f in "$A/gpt2" "$A/gemma" "$A/gemma2" "$FIX/nanogpt/ckpt.pt"; do
		init --init "$f" --out "init-${f##*/}" >last &&
		echo "init-${f##*/}/ckpt-000001.h5" >expect && test_cmp expect last || exit 1
	done &&
	h5dump -a /config/arch init-ckpt.pt/ckpt-000001.h5 >arch && grep "(0): \"gpt2\"" arch
'

# learned positions fix the sequence: nanoGPT's block_size (32) rows
test_expect_success '--init: GPT-2'"'"'s sequences are its positions'"'"' rows, the others'"'"' --seq-len, at most the context' '
	h5dump -a /optim/seq_len init-ckpt.pt/ckpt-000001.h5 >a &&
	h5dump -a /optim/seq_len init-gemma2/ckpt-000001.h5 >b &&
	grep -c "(0): 32$" a >n && grep -c "(0): 12$" b >>n &&
	printf "1\n1\n" >expect && test_cmp expect n &&
	test_expect_code 64 init --init "$A/gemma" --seq-len 65 --out long 2>err &&
	echo "sw-train: --seq-len 65: longer than the --init model'"'"'s context (64)" >expect &&
	test_cmp expect err
'

if have_python_modules "h5py, numpy"; then
	# a copy of a checkpoint with one tensor twice (under another name,
	# its attributes too) and one without a tensor
	test_expect_success '--init: a tensor twice, or one missing, is refused naming it (65)' '
		"$PY" - gemma/ckpt-000001.h5 <<-\EOF &&
		import shutil, sys, h5py
		shutil.copy(sys.argv[1], "twice.h5")
		shutil.copy(sys.argv[1], "missing.h5")
		with h5py.File("twice.h5", "a") as f:
		    f.copy("params/model.layers.1.mlp.up_proj.weight", "params/model.layers.1.mlp.up_copy")
		with h5py.File("missing.h5", "a") as f:
		    del f["params/model.layers.1.mlp.up_proj.weight"]
		EOF
		test_expect_code 65 init --init twice.h5 --out t 2>err &&
		echo "sw-train: twice.h5: model.layers.1.mlp.up_copy and model.layers.1.mlp.up_proj.weight both claim role up in layer 1" >expect &&
		test_cmp expect err &&
		test_expect_code 65 init --init missing.h5 --out m 2>err &&
		echo "sw-train: missing.h5: missing tensor model.layers.1.mlp.up_proj.weight" >expect &&
		test_cmp expect err
	'
	# the export joins c_attn from its three parts: two are refused, not
	# written as a smaller matrix
	test_expect_success 'sw-convert: GPT-2 without one of c_attn'"'"'s parts is refused naming it (65), nothing written' '
		"$PY" - gpt2/ckpt-000001.h5 <<-\EOF &&
		import shutil, sys, h5py
		shutil.copy(sys.argv[1], "nov.h5")
		with h5py.File("nov.h5", "a") as f:
		    del f["params/transformer.h.1.attn.c_attn.weight:v"]
		EOF
		test_expect_code 65 sw-convert nov.h5 nov.hf 2>err &&
		echo "sw-convert: nov.h5: transformer.h.1.attn.c_attn.weight: 32 rows, not the 48 of q, k, v the config gives (16 + 16 + 16)" >expect &&
		test_cmp expect err && test ! -e nov.hf
	'
else
	test_skip '--init: a tensor twice, or one missing, is refused' 'python3-h5py not installed'
	test_skip 'sw-convert: GPT-2 without one of c_attn'"'"'s parts is refused' 'python3-h5py not installed'
fi

test_done
