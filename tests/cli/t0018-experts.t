#!/bin/sh
# The experts of a mixture of experts, one row each: on the committed
# save_pretrained checkpoints of Mixtral, Qwen2-MoE and OLMoE (4 experts,
# 2 layers; fixtures/make-arch.sh) every expert's matrix has its row in
# sw-ls, sw-norms and sw-spectrum (--summary, --esd-fit, --json too) with
# the expert number its name holds (model.layers.N.block_sparse_moe.
# experts.E.w1.weight, model.layers.N.mlp.experts.E.gate_proj.weight),
# read here from the safetensors header, not from our output; every other
# tensor has expert -1, Qwen2-MoE's shared expert included (it is no
# routed expert). --expert takes --layer's numbers and ranges: 1-2 keeps
# exactly those experts' tensors, -1 exactly the others; a bad range is a
# usage error. A dense Llama has expert -1 everywhere; sw-qkdrift, whose
# rows are the layers and heads of q and k (no expert's), takes no
# --expert.
. "$(dirname "$0")/../lib/tap.sh"

A=$SW_TOP/fixtures/arch
MOE="mixtral qwen2_moe olmoe"

# names FILE [EXPERTS]: "name expert" of each tensor of a safetensors
# file, the expert the number after ".experts." (else -1), sorted; with
# EXPERTS (a Python expression over e), only the tensors it holds for
names() {
	"$PY" -c '
import json, re, struct, sys
raw = open(sys.argv[1], "rb").read(1 << 20)
(n,) = struct.unpack("<Q", raw[:8])
keep = sys.argv[2] if len(sys.argv) > 2 else "True"
for k in sorted(json.loads(raw[8:8 + n])):
    if k == "__metadata__":
        continue
    m = re.search(r"\.experts\.([0-9]+)\.", k)
    e = int(m.group(1)) if m else -1
    if eval(keep, {"e": e}):
        print(k, e)' "$@"
}

# the same pairs from a table of ours: its name and expert columns
pairs() {
	awk -F"\t" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
		{ print $c["name"], $c["expert"] }' "$1" | sort -u
}

for f in $MOE; do
	test_expect_success "$f: sw-ls, each tensor its expert as its name numbers it (4 experts x 3 x 2 layers)" "
		sw-ls \"\$A/$f\" >ls 2>err && test_line_count = 0 err &&
		names \"\$A/$f/model.safetensors\" >expect &&
		pairs ls >got && test_cmp expect got &&
		awk -F'\t' 'NR > 1 && \$10 != -1 { n[\$10]++ } END { for (e in n) print e, n[e] }' ls |
			sort >counts &&
		printf '%s\n' '0 6' '1 6' '2 6' '3 6' >want && test_cmp want counts
	"

	test_expect_success "$f: sw-norms, sw-spectrum --summary and --esd-fit: every matrix's row its expert" "
		names \"\$A/$f/model.safetensors\" >all &&
		sw-norms \"\$A/$f\" >norms && pairs norms >n.got &&
		sw-spectrum --summary \"\$A/$f\" >sum && pairs sum >s.got &&
		sw-spectrum --esd-fit \"\$A/$f\" >esd && pairs esd >e.got &&
		grep -F -x -f n.got all >n.expect && test_cmp n.expect n.got &&
		test_cmp n.got s.got && test_cmp n.got e.got &&
		grep -c ' [0-3]\$' n.got >n && echo 24 >want && test_cmp want n
	"

	test_expect_success "$f: --json carries the expert too" "
		sw-ls --json --layer 1 \"\$A/$f\" >ls.json &&
		\"\$PY\" -c 'import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(r[\"name\"], r[\"expert\"])' ls.json | sort >got &&
		names \"\$A/$f/model.safetensors\" | grep '^model\\.layers\\.1\\.' >expect &&
		test_cmp expect got
	"

	test_expect_success "$f: --expert 1-2 keeps exactly those experts' tensors" "
		names \"\$A/$f/model.safetensors\" '1 <= e <= 2' >expect && test_line_count = 12 expect &&
		sw-ls --expert 1-2 \"\$A/$f\" >ls && pairs ls >got && test_cmp expect got &&
		sw-norms --expert 2,1 \"\$A/$f\" >norms && pairs norms >got && test_cmp expect got &&
		sw-spectrum --top 1 --expert 1 --expert 2 \"\$A/$f\" >spec && pairs spec >got &&
		test_cmp expect got
	"

	test_expect_success "$f: --expert -1 keeps exactly the tensors of no expert" "
		names \"\$A/$f/model.safetensors\" 'e == -1' >expect &&
		sw-ls --expert -1 \"\$A/$f\" >ls && pairs ls >got && test_cmp expect got &&
		sw-ls --expert -1,3 --layer 0 \"\$A/$f\" >ls && pairs ls >got &&
		names \"\$A/$f/model.safetensors\" 'e in (-1, 3)' | grep '^model\\.layers\\.0\\.' >expect &&
		test_cmp expect got
	"
done

test_expect_success 'qwen2_moe: the shared expert and its gate are expert -1, selected by their roles' '
	sw-ls --role shared_gate,shared_up,shared_down,shared_router "$A/qwen2_moe" >ls &&
	pairs ls >got &&
	names "$A/qwen2_moe/model.safetensors" | grep "\.shared_expert" >expect &&
	test_line_count = 8 expect && test_cmp expect got &&
	sw-ls --expert -1 --role shared_down "$A/qwen2_moe" >ls && test_line_count = 3 ls &&
	test_expect_code 65 sw-ls --expert 0-3 --role shared_down "$A/qwen2_moe" >out 2>err &&
	test_line_count = 1 out &&
	grep -q "no tensor matches the selection (--expert 0-3 --role shared_down)" err
'

for bad in 2-1 x -2 1-x 1,,2 ""; do
	test_expect_success "--expert '$bad': a usage error (64), one message, nothing listed" "
		test_expect_code 64 sw-ls --expert '$bad' \"\$A/mixtral\" >out 2>err &&
		test_line_count = 0 out &&
		grep -c '^sw-ls: ' err >n && echo 1 >want && test_cmp want n &&
		head -n 1 err >msg && grep -q \"^sw-ls: bad expert.*'$bad'\" msg &&
		sed 1d err | head -n 1 | grep -q '^usage: sw-ls '
	"
done

test_expect_success 'the range messages name the option and the value' '
	test_expect_code 64 sw-norms --expert 2-1 "$A/olmoe" 2>err &&
	head -n 1 err >msg && echo "sw-norms: bad expert range '"'"'2-1'"'"'" >want && test_cmp want msg &&
	test_expect_code 64 sw-spectrum --expert x "$A/olmoe" 2>err &&
	head -n 1 err >msg &&
	echo "sw-spectrum: bad expert '"'"'x'"'"' (a number, a range A-B, or -1)" >want && test_cmp want msg
'

for f in tiny.h5 tiny-hf; do
	test_expect_success "Llama $f: expert -1 on every row; --expert 0 matches nothing (65)" "
		sw-ls \"\$FIX/$f\" >ls && sw-norms \"\$FIX/$f\" >norms &&
		sw-spectrum --summary \"\$FIX/$f\" >sum && sw-norms --scale-vectors \"\$FIX/$f\" >sv &&
		for t in ls norms sum sv; do
			awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) c[\$i] = i; next } { print \$c[\"expert\"] }' \$t |
				sort -u >e && echo -1 >want && test_cmp want e || exit 1
		done &&
		sw-ls --expert -1 \"\$FIX/$f\" >all && test_cmp ls all &&
		test_expect_code 65 sw-ls --expert 0 \"\$FIX/$f\" >out 2>err &&
		test_line_count = 1 out && grep -q 'no tensor matches the selection (--expert 0)' err
	"
done

test_expect_success 'sw-qkdrift: no --expert (its rows are no expert'"'"'s)' '
	test_expect_code 64 sw-qkdrift --expert -1 "$FIX/tiny.h5" >out 2>err &&
	test_line_count = 0 out && grep -q "expert" err
'

test_done
