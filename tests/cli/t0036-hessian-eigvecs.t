#!/bin/sh
# sw-hessian --eigenvectors FILE: the file's layout (a group per block,
# one per eigenvector, the block's tensors named and shaped as the
# checkpoint's /params, each eigenvalue the table's), the same bytes from
# the same run, and the output rules: usage errors 64, an existing FILE
# 73 without --force, an input never replaced, an unwritable place 73.
# The vectors themselves are checked against PyTorch in
# tests/e2e/t0224-hessian-eigvecs.t; lambda_min here for its place only.
. "$(dirname "$0")/../lib/tap.sh"

CORPUS=$FIX/corpus.txt
HS="--data $CORPUS --batch-tokens 64 --seq-len 16 --probes 1"
CK=run/ckpt-000020.h5

test_expect_success 'setup: a small run' '
	sw-train --data "$CORPUS" --out run --steps 20 --batch 4 --seq-len 16 --d-model 8 --n-layers 1 \
		--n-heads 2 --d-ff 16 --trace "" --threads 1 >/dev/null &&
	test -f $CK
'

test_expect_success 'lambda_min and bound_min: the last columns, after tokens; lambda_min <= lambda_2' '
	sw-hessian $HS --top 2 $CK >out &&
	head -n 1 out >header &&
	printf "file\tstep\tblock\tnparams\tlambda_1\tlambda_2\tsteps\tbound\ttrace\ttrace_se\ttrace_per_param\tlr\teos_gd\ttokens\tlambda_min\tbound_min\n" >expect &&
	test_cmp expect header &&
	awk -F"\t" "NR > 1 { if (!(\$15 <= \$6) || !(\$16 >= 0)) { print; bad = 1 } n++ } END { exit bad || n != 7 }" out
'

test_expect_success 'the layout: /block_J/v_K/TENSOR, as /params names and shapes them' '
	sw-hessian $HS --top 2 --eigenvectors ev.h5 $CK >out &&
	h5ls -r ev.h5 >list &&
	grep -c "^/block_[0-9]*/v_[12]/" list >count &&
	h5ls run/ckpt-000020.h5/params >params &&
	awk "{ print \$1, \$3, \$4 }" params | sort >expect &&
	sed -n "s|^/block_6/v_1/||p" list | awk "{ print \$1, \$3, \$4 }" | sort >actual &&
	test_cmp expect actual &&
	! grep -q "^/block_[0-9]*/v_3" list &&
	test_line_count = 8 out &&
	awk -v n="$(cat count)" "BEGIN { exit n < 14 }"
'

# the attribute holds the double the table prints to 9 digits: 1e-8
test_expect_success 'each block'"'"'s attributes: its block, and each v_K the table'"'"'s lambda_K' '
	for j in 0 1 2 3 4 5 6; do
		h5dump -a /block_$j/block ev.h5 >b && sed -n "s/^ *(0): \"\\(.*\\)\"$/\\1/p" b >>blocks &&
		for k in 1 2; do
			h5dump -m %.17g -a /block_$j/v_$k/eigenvalue ev.h5 >e &&
			sed -n "s/^ *(0): //p" e >>eig || exit 1
		done
	done &&
	printf "emb\nqk\nvo\nffn\nnorm\nout\nall\n" >expect && test_cmp expect blocks &&
	awk -F"\t" "NR > 1 { print \$5; print \$6 }" out >table &&
	numbers_close 1e-8 table eig
'

test_expect_success 'the same run writes the same bytes; --per-tensor names the tensor' '
	sw-hessian $HS --top 2 --eigenvectors ev2.h5 $CK >out2 &&
	cmp ev.h5 ev2.h5 &&
	sw-hessian $HS --top 1 --per-tensor --role final_norm --eigenvectors pt.h5 $CK >out &&
	h5dump -a /block_0/name pt.h5 >name && grep -q "\"model.norm.weight\"" name &&
	h5ls -r pt.h5 >list && grep -q "^/block_0/v_1/model.norm.weight " list
'

test_expect_success 'an existing FILE: 73 without --force, untouched; replaced with it' '
	echo keep >exists.h5 &&
	test_expect_code 73 sw-hessian $HS --eigenvectors exists.h5 $CK >out 2>err &&
	grep -q "exists" err && echo keep >expect && test_cmp expect exists.h5 &&
	sw-hessian $HS --top 1 --force --eigenvectors exists.h5 $CK >out &&
	h5ls -r exists.h5 >list && grep -q "^/block_0/v_1/" list
'

test_expect_success 'never an input, even with --force; an unwritable place 73' '
	cp $CK before.h5 &&
	test_expect_code 73 sw-hessian $HS --force --eigenvectors $CK $CK >out 2>err &&
	cmp before.h5 $CK &&
	test_expect_code 73 sw-hessian $HS --force --eigenvectors "$CORPUS" $CK >out 2>err &&
	test_expect_code 73 sw-hessian $HS --eigenvectors nodir/ev.h5 $CK >out 2>err &&
	test_one_error sw-hessian $CK
'

test_expect_success 'usage errors exit 64: two files, --density, the --dump-batch file, no FILE' '
	test_expect_code 64 sw-hessian $HS --eigenvectors x.h5 $CK $CK >out 2>err &&
	test_expect_code 64 sw-hessian $HS --density --eigenvectors x.h5 $CK >out 2>err &&
	test_expect_code 64 sw-hessian $HS --eigenvectors x.h5 --dump-batch x.h5 $CK >out 2>err &&
	test_expect_code 64 sw-hessian $HS $CK --eigenvectors >out 2>err &&
	test_expect_code 64 sw-hessian $HS --force $CK >out 2>err &&
	test ! -e x.h5
'

test_done
