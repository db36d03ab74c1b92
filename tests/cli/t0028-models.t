#!/bin/sh
# GPT-2, Gemma and Gemma2's configs as the model reads them: the
# fixtures written by transformers 4.47.1's save_pretrained
# (fixtures/arch/gpt2, gemma, gemma2) converted to our HDF5 (sw-convert),
# whose /config holds what was read (scalewatch-format(5)): GPT-2's
# n_positions as seq_len, layer_norm_epsilon as norm_eps,
# activation_function as hidden_act, n_inner null as 4 n_embd, the tied
# head GPT2Config defaults to; Gemma's hidden_activation (not
# hidden_act, which GemmaMLP ignores), its tied head, no sliding window
# (GemmaConfig has none); Gemma2's attn_logit_softcapping,
# final_logit_softcapping and query_pre_attn_scalar as written, their
# Gemma2Config defaults (50, 30, 256) where absent and a null soft-cap
# none; the three round-trip through our HDF5 (read from it, exported,
# read back). What the step does not
# compute is refused by name, exit status 65, by the model tools, while
# sw-ls still lists the file: GPT-2's scale_attn_by_inverse_layer_idx
# true, reorder_and_upcast_attn true, scale_attn_weights false; nanoGPT's
# bias=False; an activation no family computes; a negative soft-cap or
# query_pre_attn_scalar. (The numbers the model computes on these
# families: t-gradcheck, and the e2e tests against
# tests/e2e/torch_reference.py.)
. "$(dirname "$0")/../lib/tap.sh"

A=$SW_TOP/fixtures/arch

# FILE NAME: /config's attribute NAME of an HDF5 checkpoint, as h5dump
# prints its value (strings quoted), or nothing where it is absent
attr() {
	h5dump -a "/config/$2" "$1" 2>/dev/null | sed -n 's/^ *(0): //p'
}

# FILE NAME=VALUE...: each attribute as given ("-" for absent)
attrs_are() {
	f=$1 && shift &&
	for kv in "$@"; do
		k=${kv%%=*} && want=${kv#*=} &&
		got=$(attr "$f" "$k") &&
		if [ "$want" = - ]; then want=; fi &&
		if [ "$got" != "$want" ]; then
			echo "$f: /config/$k is '$got', not '$want'"
			return 1
		fi || return 1
	done
}

test_expect_success 'GPT-2: n_positions, layer_norm_epsilon, activation_function, n_inner null, tied' '
	sw-convert "$A/gpt2" gpt2.h5 >out &&
	attrs_are gpt2.h5 "arch=\"gpt2\"" seq_len=64 norm_eps=1e-05 "hidden_act=\"gelu_new\"" \
		d_model=16 n_layers=2 n_heads=2 n_kv_heads=2 head_dim=8 d_ff=64 vocab_size=64 \
		tie_embeddings=1 attn_softcap=- final_softcap=- query_pre_attn_scalar=-
'

test_expect_success 'Gemma: hidden_activation, tied by default, no sliding window' '
	sw-convert "$A/gemma" gemma.h5 >out &&
	attrs_are gemma.h5 "arch=\"gemma\"" "hidden_act=\"gelu_pytorch_tanh\"" tie_embeddings=1 \
		head_dim=8 n_kv_heads=1 d_ff=32 norm_eps=1e-06 sliding_window=- attn_softcap=-
'

test_expect_success 'Gemma2: its soft-caps and query_pre_attn_scalar as config.json says' '
	sw-convert "$A/gemma2" gemma2.h5 >out &&
	attrs_are gemma2.h5 "arch=\"gemma2\"" attn_softcap=50 final_softcap=30 \
		query_pre_attn_scalar=256 "hidden_act=\"gelu_pytorch_tanh\"" tie_embeddings=1
'

test_expect_success 'our HDF5 keeps them: to Hugging Face and back, the same /config' '
	for f in gpt2 gemma gemma2; do
		sw-convert $f.h5 hf-$f >out && sw-convert hf-$f again-$f.h5 >out &&
		h5dump -A -g /config $f.h5 | sed 1d >a &&
		h5dump -A -g /config again-$f.h5 | sed 1d >b &&
		test_cmp a b || exit 1
	done
'

# DIR's config.json with one change (JSON merged over it; a key set to
# "DEL" removed) into a copy at x/
edited() {
	from=$1 &&
	rm -rf x && mkdir x && cp "$from/model.safetensors" x/ &&
	"$PY" -c "
import json, sys
c = json.load(open(sys.argv[1]))
c.update(json.loads(sys.argv[2]))
c = {k: v for k, v in c.items() if v != \"DEL\"}
json.dump(c, open(\"x/config.json\", \"w\"))
" "$from/config.json" "$2"
}

test_expect_success 'Gemma2: absent, Gemma2Config defaults; a null soft-cap none' '
	edited "$A/gemma2" "{\"attn_logit_softcapping\": \"DEL\", \"final_logit_softcapping\": null,
		\"query_pre_attn_scalar\": \"DEL\"}" &&
	sw-convert x d.h5 >out &&
	attrs_are d.h5 attn_softcap=50 final_softcap=- query_pre_attn_scalar=256 &&
	edited "$A/gemma2" "{\"attn_logit_softcapping\": 2.5, \"final_logit_softcapping\": \"DEL\",
		\"query_pre_attn_scalar\": 12}" &&
	sw-convert x e.h5 >out &&
	attrs_are e.h5 attn_softcap=2.5 final_softcap=30 query_pre_attn_scalar=12
'

test_expect_success 'Gemma: hidden_act is not what it computes, hidden_activation is' '
	edited "$A/gemma" "{\"hidden_act\": \"silu\", \"hidden_activation\": \"gelu\"}" &&
	sw-convert x g.h5 >out && attrs_are g.h5 "hidden_act=\"gelu\"" &&
	edited "$A/gemma" "{\"hidden_act\": \"silu\", \"hidden_activation\": null}" &&
	sw-convert x h.h5 >out && attrs_are h.h5 "hidden_act=\"gelu_pytorch_tanh\""
'

test_expect_success 'GPT-2: the exact gelu read; n_inner given is d_ff (48: not the fixture'"'"'s c_fc)' '
	edited "$A/gpt2" "{\"activation_function\": \"gelu\", \"n_inner\": 64}" &&
	sw-convert x gelu.h5 >out && attrs_are gelu.h5 "hidden_act=\"gelu\"" d_ff=64 &&
	edited "$A/gpt2" "{\"n_inner\": 48}" &&
	test_expect_code 65 sw-ls x >ls 2>err &&
	grep -q "transformer.h.0.mlp.c_fc.bias: shape 64 disagrees with the config (48)" err
'

test_expect_success 'a token file' '
	"$PY" -c "open(\"tok.bin\", \"wb\").write(bytes(i * 7 % 64 for i in range(400)))"
'

# DIR TEXT: the model tools refuse it, exit status 65, one line naming
# TEXT; sw-ls lists it (a listing needs no model)
refused() {
	test_expect_code 65 sw-sharpness --data tok.bin --data-format bytes --seq-len 16 \
		--batch-tokens 32 "$1" >out 2>err &&
	test_one_error sw-sharpness "$1" &&
	grep -q "$2" err &&
	test_expect_code 65 sw-hessian --data tok.bin --data-format bytes --seq-len 16 \
		--batch-tokens 32 "$1" >out 2>err &&
	grep -q "$2" err &&
	sw-ls "$1" >ls 2>err && test_line_count = 0 err && test -s ls
}

test_expect_success 'the fixtures themselves run (the refusals below are the edits)' '
	for f in gpt2 gemma gemma2; do
		sw-sharpness --data tok.bin --data-format bytes --seq-len 16 --batch-tokens 32 \
			"$A/$f" >out 2>err || { cat err; exit 1; }
	done
'

test_expect_success 'GPT-2: scale_attn_by_inverse_layer_idx true refused by name' '
	edited "$A/gpt2" "{\"scale_attn_by_inverse_layer_idx\": true}" &&
	refused x "scale_attn_by_inverse_layer_idx true is not supported"
'

test_expect_success 'GPT-2: reorder_and_upcast_attn true refused by name' '
	edited "$A/gpt2" "{\"reorder_and_upcast_attn\": true}" &&
	refused x "reorder_and_upcast_attn true is not supported"
'

test_expect_success 'GPT-2: scale_attn_weights false refused by name' '
	edited "$A/gpt2" "{\"scale_attn_weights\": false}" &&
	refused x "scale_attn_weights false is not supported"
'

test_expect_success 'GPT-2 and Gemma: an activation none computes refused by name' '
	edited "$A/gpt2" "{\"activation_function\": \"relu\"}" &&
	refused x "hidden_act .relu. is not supported (silu, gelu_new, gelu_pytorch_tanh or gelu are)" &&
	edited "$A/gemma" "{\"hidden_activation\": \"gelu_fast\"}" &&
	refused x "hidden_act .gelu_fast. is not supported"
'

test_expect_success 'Gemma2: a negative soft-cap, an infinite query_pre_attn_scalar refused by name' '
	edited "$A/gemma2" "{\"attn_logit_softcapping\": -1.0}" &&
	refused x "attn_logit_softcapping = -1 is not a finite positive number" &&
	edited "$A/gemma2" "{\"final_logit_softcapping\": -30}" &&
	refused x "final_logit_softcapping = -30 is not a finite positive number" &&
	edited "$A/gemma2" "{\"query_pre_attn_scalar\": -4}" &&
	refused x "query_pre_attn_scalar = -4 is not a finite positive number"
'

# nanoGPT's model_args bias=False: LayerNorm and the linears without
# biases, which GPT-2's step has (fixtures/nanogpt with that one flag
# changed, by torch)
if have_python_modules torch; then
	test_expect_success 'nanoGPT: bias=False refused by name, bias=True runs' '
		"$PY" -c "
import torch
c = torch.load(\"$FIX/nanogpt/ckpt.pt\", map_location=\"cpu\")
c[\"model_args\"][\"bias\"] = False
torch.save(c, \"nobias.pt\")
" &&
		refused nobias.pt "nanoGPT.s bias=False (no biases in LayerNorm and the linears) is not supported" &&
		sw-sharpness --data tok.bin --data-format bytes --seq-len 16 --batch-tokens 32 \
			"$FIX/nanogpt/ckpt.pt" >out
	'
else
	test_skip 'nanoGPT bias=False' 'python3-torch not installed'
fi

test_expect_success 'config.json with a soft-cap that is not a number: 65 for every reader' '
	edited "$A/gemma2" "{\"attn_logit_softcapping\": \"big\"}" &&
	test_expect_code 65 sw-ls x >ls 2>err &&
	grep -q "attn_logit_softcapping is not a number" err
'

test_done
