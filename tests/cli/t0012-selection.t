#!/bin/sh
# The selection options every tool shares (--block, --role, --layer,
# --name): an unknown role is refused naming the valid ones, and a
# selection that matches nothing in a file is said on stderr, with exit 65
# when it matched in no file and 0 when it matched in some.
. "$(dirname "$0")/../lib/tap.sh"

TINY=$FIX/tiny.h5       # 12 layers, untied head
WIDE=$FIX/wide.h5       # 1 layer, tied head

test_expect_success 'setup: a run with /fisher, multipliers, QK-norm and norms everywhere' '
	sw-train --data "$FIX/corpus.txt" --out run --steps 2 --fisher-every 2 --d-model 16 \
		--seq-len 16 --batch 2 --n-layers 1 --n-heads 2 --multipliers row --qk-norm \
		--norm-everywhere --trace "" >/dev/null &&
	test -f run/ckpt-000002.h5
'

for tool in sw-ls sw-norms sw-spectrum sw-sharpness; do
	test_expect_success "$tool --role lmhead (a typo): exit 64, the valid roles named, nothing on stdout" '
		test_expect_code 64 $tool --role lmhead run/ckpt-000002.h5 >out 2>err &&
		test_line_count = 0 out &&
		head -n 1 err >first &&
		grep -q "^$tool: unknown role .lmhead. (embed, .*lm_head, .*other, and G_dir, G_mag of each gain G)\$" first
	'
done

test_expect_success 'one bad role among good ones is refused too' '
	test_expect_code 64 sw-ls --role q,k,lmhead "$TINY" >out 2>err &&
	test_line_count = 0 out && grep -q "unknown role .lmhead." err
'

# the list in the message is what --role takes: every role in it is
# accepted, and every role the readers give a tensor is in it
test_expect_success 'the roles named are the roles: each accepted, each role of a real file listed' '
	test_expect_code 64 sw-ls --role nosuch "$TINY" 2>err >/dev/null &&
	sed -n "1s/.*(\(.*\), and G_dir, G_mag of each gain G)\$/\1/p" err | tr -d " " | tr , "\n" >listed &&
	test_line_count -gt 30 listed &&
	while read -r r; do
		sw-ls --role "$r" "$TINY" run/ckpt-000002.h5 >/dev/null 2>err; code=$?
		test $code = 0 || test $code = 65 || { echo "$r: exit $code"; cat err; exit 1; }
	done <listed &&
	sw-ls "$TINY" "$WIDE" run/ckpt-000002.h5 "$FIX/tiny-hf" >all &&
	cut -f4 all | sed 1d | sort -u >used &&
	grep -q "^q_mult\$" used && grep -q "^q_norm\$" used && grep -q "^o_in_norm\$" used &&
	sort -u listed >listed.sorted && comm -23 used listed.sorted >missing &&
	test_line_count = 0 missing
'

test_expect_success 'lm_head_folded is a role of sw-norms only' '
	sw-norms --role lm_head_folded "$TINY" >out &&
	cut -f6 out >roles && printf "role\nlm_head_folded\n" >expect && test_cmp expect roles &&
	test_expect_code 64 sw-ls --role lm_head_folded "$TINY" >out 2>err &&
	test_line_count = 0 out && ! grep -q ", lm_head_folded," err
'

test_expect_success '--block outt: exit 64 naming the block types' '
	test_expect_code 64 sw-norms --block outt "$TINY" >out 2>err &&
	test_line_count = 0 out && grep -q "unknown block .outt. (emb, qk, vo, ffn, norm, out, mult, other)" err
'

# nothing matched in the only file: the one line, the header alone, exit 65
check_none() {
	want_err=$1
	shift
	test_expect_code 65 "$@" >out 2>err &&
	test_line_count = 1 out &&
	echo "$want_err" >expect && test_cmp expect err
}

test_expect_success 'sw-ls: a layer the model lacks: exit 65, one line naming the file and the options' '
	check_none "sw-ls: $WIDE: no tensor matches the selection (--layer 5)" sw-ls --layer 5 "$WIDE" &&
	check_none "sw-ls: $TINY: no tensor matches the selection (--role q_mult)" sw-ls --role q_mult "$TINY"
'

test_expect_success 'sw-ls --summary: the same rule (its total row of 0 is no match)' '
	test_expect_code 65 sw-ls --summary --name "nothing.*" "$TINY" >out 2>err &&
	echo "sw-ls: $TINY: no tensor matches the selection (--name nothing.*)" >expect &&
	test_cmp expect err
'

test_expect_success 'sw-norms: matrices only, so --block norm matches nothing (exit 65)' '
	check_none "sw-norms: $TINY: no matrix matches the selection (--block norm)" sw-norms --block norm "$TINY"
'

test_expect_success 'sw-spectrum: --role q_mult on a model without multipliers: exit 65' '
	check_none "sw-spectrum: $TINY: no matrix matches the selection (--role q_mult)" \
		sw-spectrum --summary --role q_mult "$TINY" &&
	check_none "sw-spectrum: $TINY: no attention projection matches the selection (--role up)" \
		sw-spectrum --per-head --role up "$TINY"
'

test_expect_success 'sw-sharpness: a role the run lacks: exit 65, and no --check either' '
	check_none "sw-sharpness: run/ckpt-000002.h5: no tensor matches the selection (--role lm_head_mult --layer 0)" \
		sw-sharpness --role lm_head_mult --layer 0 run/ckpt-000002.h5 &&
	check_none "sw-sharpness: run/ckpt-000002.h5: no tensor matches the selection (--layer 3)" \
		sw-sharpness --check principle --layer 3 run/ckpt-000002.h5
'

test_expect_success 'sw-qkdrift: --layer naming no layer: exit 65' '
	check_none "sw-qkdrift: $TINY: no layer matches the selection (--layer 12)" sw-qkdrift --layer 12 "$TINY"
'

test_expect_success 'matched in one file of two: its rows, a line for the other, exit 0' '
	sw-ls --layer 5 --role q "$TINY" "$WIDE" >out 2>err &&
	cut -f2 out >names && printf "name\nmodel.layers.5.self_attn.q_proj.weight\n" >expect &&
	test_cmp expect names &&
	echo "sw-ls: $WIDE: no tensor matches the selection (--layer 5 --role q)" >expect &&
	test_cmp expect err &&
	sw-norms --layer 5 --role q "$WIDE" "$TINY" >out 2>err && test_line_count = 2 out &&
	echo "sw-norms: $WIDE: no matrix matches the selection (--layer 5 --role q)" >expect &&
	test_cmp expect err
'

test_expect_success 'the same from file names on stdin' '
	printf "%s\n%s\n" "$WIDE" "$TINY" >names &&
	sw-spectrum --summary --layer 5 --role q <names >out 2>err &&
	test_line_count = 2 out && grep -q "^sw-spectrum: $WIDE: no matrix matches" err && test_line_count = 1 err &&
	printf "%s\n" "$WIDE" "$WIDE" >names &&
	test_expect_code 65 sw-spectrum --summary --layer 5 <names >out 2>err && test_line_count = 2 err
'

test_expect_success 'no selection: no such line, even where a file has no rows' '
	sw-ls "$WIDE" >out 2>err && test_line_count = 0 err &&
	sw-norms "$WIDE" >out 2>err && test_line_count = 0 err
'

test_expect_success 'a file that cannot be opened keeps its own status (66), not 65' '
	test_expect_code 66 sw-ls --layer 5 nonexistent.h5 "$WIDE" >out 2>err &&
	test_line_count = 2 err && grep -q "^sw-ls: nonexistent.h5: " err &&
	grep -q "^sw-ls: $WIDE: no tensor matches" err
'

test_done
