#!/bin/sh
# GPT-2, Gemma and Gemma2 for a user: sw-train --arch gpt2|gemma|gemma2
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

test_done
