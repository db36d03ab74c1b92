#!/bin/sh
# sw-compare: the columns; a checkpoint against itself (no change, every
# overlap 1, and sigma_max and the stable rank of the fixture's known
# spectra); a float32 model against its bfloat16 rounding (a change below
# bf16's 2^-9); several checkpoints --against previous and first;
# --summary against the rows it summarizes; --json; names on stdin;
# matrices in one file only; usage and bad input with their exit
# statuses. Every column against numpy: tests/e2e/t0222-compare-numpy.t.
. "$(dirname "$0")/../lib/tap.sh"

TINY=$FIX/tiny.h5

# col NAME FILE: the column NAME of a table, header dropped
col() {
	awk -F"\t" -v name="$1" "NR == 1 { for (i = 1; i <= NF; i++) if (\$i == name) c = i; if (!c) exit 1; next } { print \$c }" "$2"
}

test_expect_success 'the columns, exactly; a row per matrix of both' '
	sw-compare "$TINY" "$TINY" >same &&
	head -n 1 same >header &&
	printf "file_a\tstep_a\tfile_b\tstep_b\tname\tblock\trole\tlayer\texpert\trows\tcols\tk\trel_change\tsigma_max_a\tsigma_max_b\tsigma_max_change\tstable_rank_a\tstable_rank_b\tstable_rank_change\tright_overlap\tright_min_cos\tleft_overlap\tleft_min_cos\talpha_a\talpha_b\talpha_change\n" >expect &&
	test_cmp expect header &&
	sw-ls "$TINY" >ls && awk -F"\t" "\$6 == \"matrix\" { print \$2 }" ls >expect &&
	col name same >names && test_cmp expect names
'

# the same bits on both sides: exactly 0 change; the overlaps are
# ||V^T V||_F^2 / k of one orthonormal basis, 1 to rounding (1e-12)
test_expect_success 'a checkpoint against itself: no change, every overlap and min cos 1' '
	awk -F"\t" "function one(x) { return x > 1 - 1e-12 && x <= 1 }
		NR > 1 { if (\$13 != 0 || \$16 != 0 || \$19 != 0 || \$26 != 0 || \$14 != \$15 ||
			\$17 != \$18 || \$24 != \$25 || !one(\$20) || !one(\$21) || !one(\$22) || !one(\$23) ||
			\$12 != 8 && \$12 != (\$10 < \$11 ? \$10 : \$11)) bad = 1 }
		END { exit bad || NR != 87 }" same
'

# every fixture matrix is U diag(s) V^T with s_k = spectral * 0.8^(k-1),
# k = 1..min(rows, cols): sigma_max = spectral and the stable rank
# sum_k 0.64^(k-1); float32 storage moves them by 1e-7 relative
test_expect_success 'sigma_max and the stable rank of the known spectra (1e-6)' '
	awk -F"\t" "NR > 1 && \$2 != \"lm_head_folded\" { n = \$3 < \$4 ? \$3 : \$4; s = 0
		for (k = 0; k < n; k++) s += 0.64 ^ k; printf \"%s\t%.9g\t%.9g\n\", \$1, \$8, s }" \
		"$FIX/tiny.expect.tsv" >expect &&
	cut -f5,14,17 same | sed 1d >got &&
	numbers_close 1e-6 expect got
'

# bf16 keeps 8 significant bits: rounded to nearest, each element moves
# by at most 2^-8 of itself, so ||B - A||_F <= 2^-8 ||A||_F (about 2^-9
# for values spread over a binade); a real change, not 0
test_expect_success 'float32 against its bfloat16 rounding: 0 < rel_change <= 2^-8, overlaps near 1' '
	sw-compare "$FIX/real/stories260k-f32" "$FIX/real/stories260k-bf16" >bf16 &&
	test_line_count -gt 10 bf16 &&
	awk -F"\t" "NR > 1 { if (!(\$13 > 0 && \$13 <= 2 ^ -8) || !(\$20 > 0.99) || !(\$22 > 0.99)) bad = 1 }
		END { exit bad }" bf16
'

test_expect_success 'setup: a run with checkpoints at steps 10, 20, 30' '
	sw-train --data "$FIX/corpus.txt" --out run --steps 30 --ckpt-every 10 --d-model 16 --n-layers 2 \
		--n-heads 2 --batch 2 --seq-len 16 --lr 1e-2 --eval-every 0 --trace "" --threads 1 >/dev/null &&
	ls run/ckpt-*.h5 >ckpts && test_line_count = 3 ckpts
'

test_expect_success '--against previous (the default): each against the one before' '
	sw-compare run/ckpt-000010.h5 run/ckpt-000020.h5 run/ckpt-000030.h5 >prev &&
	sw-compare --against previous run/ckpt-000010.h5 run/ckpt-000020.h5 run/ckpt-000030.h5 >prev2 &&
	test_cmp prev prev2 &&
	cut -f2,4 prev | sed 1d | sort -u >pairs &&
	printf "10\t20\n20\t30\n" >expect && test_cmp expect pairs &&
	sw-compare run/ckpt-000020.h5 run/ckpt-000030.h5 >second && sed 1d second >second.rows &&
	awk -F"\t" "\$2 == 20" prev >from-prev && test_cmp second.rows from-prev
'

test_expect_success '--against first: each against the first' '
	sw-compare --against first run/ckpt-000010.h5 run/ckpt-000020.h5 run/ckpt-000030.h5 >first &&
	cut -f2,4 first | sed 1d | sort -u >pairs &&
	printf "10\t20\n10\t30\n" >expect && test_cmp expect pairs &&
	sw-compare run/ckpt-000010.h5 run/ckpt-000030.h5 >far && sed 1d far >far.rows &&
	awk -F"\t" "\$4 == 30" first >from-first && test_cmp far.rows from-first
'

test_expect_success 'a run changes: rel_change > 0 and an overlap below 1 somewhere' '
	awk -F"\t" "NR > 1 { if (!(\$13 > 0)) bad = 1; if (\$20 < 0.9999) low = 1 } END { exit bad || !low }" prev
'

# means and extremes of the printed rows, recomputed from them: each row
# printed to 9 digits (5e-10 of its value); a mean of signed terms (the
# changes) errs by up to 5e-10 of the largest term, which here is up to
# 20 times the mean (alpha_change_mean -0.05 of terms near 1): 1e-6
# relative (AVX2's OpenBLAS kernels moved one by 1.4e-8)
test_expect_success '--summary: a row per block type and per layer, the means and extremes of the rows' '
	sw-compare --summary run/ckpt-000010.h5 run/ckpt-000020.h5 >sum &&
	head -n 1 sum >header &&
	printf "file_a\tstep_a\tfile_b\tstep_b\tblock\tlayer\tmatrices\trel_change_mean\trel_change_max\tsigma_max_change_mean\tstable_rank_change_mean\tright_overlap_mean\tright_overlap_min\tleft_overlap_mean\tleft_overlap_min\talpha_change_mean\n" >expect &&
	test_cmp expect header &&
	sw-compare run/ckpt-000010.h5 run/ckpt-000020.h5 >rows &&
	awk -F"\t" -v OFS="\t" "NR > 1 { for (g = 0; g < 2; g++) { key = g ? \"\t\" \$8 : \$6 \"\t\"
			if (!(key in n)) { order[++m] = key; mx[key] = \$13; mn[key] = \$20; ml[key] = \$22 }
			n[key]++; rc[key] += \$13; sm[key] += \$16; sr[key] += \$19; ro[key] += \$20; lo[key] += \$22; al[key] += \$26
			if (\$13 > mx[key]) mx[key] = \$13; if (\$20 < mn[key]) mn[key] = \$20; if (\$22 < ml[key]) ml[key] = \$22 } }
		END { for (i = 1; i <= m; i++) { k = order[i] ; if (k ~ /^\t/) continue
			printf \"%s\t%d\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\n\", k, n[k], rc[k] / n[k], mx[k],
				sm[k] / n[k], sr[k] / n[k], ro[k] / n[k], mn[k], lo[k] / n[k], ml[k], al[k] / n[k] }
			for (i = 1; i <= m; i++) { k = order[i]; if (k !~ /^\t/) continue
			printf \"%s\t%d\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\n\", k, n[k], rc[k] / n[k], mx[k],
				sm[k] / n[k], sr[k] / n[k], ro[k] / n[k], mn[k], lo[k] / n[k], ml[k], al[k] / n[k] } }" rows >expect &&
	cut -f5- sum | sed 1d >got &&
	cut -f1,2 got >groups && printf "emb\t\nqk\t\nvo\t\nffn\t\nout\t\n\t-1\n\t0\n\t1\n" >expect.groups &&
	test_cmp expect.groups groups &&
	numbers_close 1e-6 expect got
'

test_expect_success '--json: an object a row, the header'"'"'s keys in order' '
	sw-compare --json run/ckpt-000010.h5 run/ckpt-000020.h5 >json &&
	sw-compare run/ckpt-000010.h5 run/ckpt-000020.h5 >tsv &&
	test_line_count = $(($(wc -l <tsv) - 1)) json &&
	"$PY" -c "
import json, sys
head = open(sys.argv[1]).readline().rstrip(chr(10)).split(chr(9))
for line in open(sys.argv[2]):
    assert list(json.loads(line)) == head
" tsv json
'

test_expect_success 'names on stdin: the same table as the operands' '
	printf "%s\n" run/ckpt-000010.h5 run/ckpt-000020.h5 run/ckpt-000030.h5 >names &&
	sw-compare <names >stdin.out && test_cmp prev stdin.out &&
	sw-compare - <names >dash.out && test_cmp prev dash.out
'

test_expect_success 'a matrix in one file only: one line on stderr naming it, the rest compared, exit 0' '
	sw-train --data "$FIX/corpus.txt" --out tied --steps 2 --d-model 16 --n-layers 2 --n-heads 2 --tie \
		--batch 2 --seq-len 16 --eval-every 0 --trace "" --threads 1 >/dev/null &&
	sw-compare run/ckpt-000010.h5 tied/ckpt-000002.h5 >out 2>err &&
	echo "sw-compare: tied/ckpt-000002.h5: not compared: 1 matrix only in run/ckpt-000010.h5 (lm_head.weight)" >expect &&
	test_cmp expect err && col name out >names && test_line_count = 15 names &&
	sw-compare tied/ckpt-000002.h5 run/ckpt-000010.h5 >out 2>err &&
	echo "sw-compare: run/ckpt-000010.h5: not compared: 1 matrix only here (lm_head.weight)" >expect &&
	test_cmp expect err &&
	sw-compare --quiet tied/ckpt-000002.h5 run/ckpt-000010.h5 >out 2>err && test_line_count = 0 err
'

test_expect_success 'matrices whose shapes differ: one line, the others compared, exit 65' '
	test_expect_code 65 sw-compare "$TINY" "$FIX/wide.h5" >out 2>err &&
	grep -q "^sw-compare: $FIX/wide.h5: 8 matrices of the same name differ in shape from $TINY.s (model.embed_tokens.weight: 48 x 16 there, 100 x 64 here): not compared$" err &&
	test_line_count = 2 err
'

test_expect_success 'the selection: only its matrices; none matching: exit 65' '
	sw-compare --role q,k --layer 1 run/ckpt-000010.h5 run/ckpt-000020.h5 >sel &&
	col name sel >names && printf "%s\n" model.layers.1.self_attn.q_proj.weight model.layers.1.self_attn.k_proj.weight >expect &&
	test_cmp expect names &&
	test_expect_code 65 sw-compare --layer 7 run/ckpt-000010.h5 run/ckpt-000020.h5 >out 2>err &&
	test_one_error sw-compare run/ckpt-000020.h5
'

test_expect_success '--top-k: the subspaces'"'"' dimension, cut to the smaller side' '
	sw-compare --top-k 3 --role q run/ckpt-000010.h5 run/ckpt-000020.h5 >k3 &&
	col k k3 | sort -u >ks && echo 3 >expect && test_cmp expect ks &&
	sw-compare --top-k 1000 --role q run/ckpt-000010.h5 run/ckpt-000020.h5 >kbig &&
	col k kbig | sort -u >ks && echo 16 >expect && test_cmp expect ks
'

test_expect_success 'usage: one checkpoint, a bad --against or --top-k: exit 64' '
	test_expect_code 64 sw-compare "$TINY" >out 2>err && test_line_count = 0 out &&
	grep -q "^sw-compare: one checkpoint: give two or more to compare$" err &&
	echo "$TINY" | test_expect_code 64 sw-compare >out 2>err &&
	grep -q "^sw-compare: one checkpoint: give two or more to compare$" err && test_line_count = 1 err &&
	test_expect_code 64 sw-compare --against last "$TINY" "$TINY" >out 2>err &&
	grep -q "^sw-compare: --against takes first or previous, not .last.$" err &&
	test_expect_code 64 sw-compare --top-k 0 "$TINY" "$TINY" >out 2>err &&
	test_expect_code 64 sw-compare --top-k x "$TINY" "$TINY" >out 2>err
'

# fixtures/bad/nan-q.h5 is base.h5 with one NaN in layer 0's q
test_expect_success 'NaN in either file: the matrix named, in which file, no row for it, exit 65' '
	test_expect_code 65 sw-compare "$FIX/bad/base.h5" "$FIX/bad/nan-q.h5" >out 2>err &&
	echo "sw-compare: $FIX/bad/nan-q.h5: model.layers.0.self_attn.q_proj.weight: 1 of 16 values are NaN or Inf" >expect &&
	test_cmp expect err && col name out >names && test_expect_code 1 grep -q q_proj names &&
	test_line_count -gt 3 names &&
	test_expect_code 65 sw-compare "$FIX/bad/nan-q.h5" "$FIX/bad/base.h5" >out 2>err &&
	echo "sw-compare: $FIX/bad/base.h5: model.layers.0.self_attn.q_proj.weight: in $FIX/bad/nan-q.h5: 1 of 16 values are NaN or Inf" >expect &&
	test_cmp expect err
'

test_expect_success 'a file that is missing or no checkpoint: said, the others compared, exit 66 / 65' '
	test_expect_code 66 sw-compare run/ckpt-000010.h5 nosuch.h5 run/ckpt-000030.h5 >out 2>err &&
	test_one_error sw-compare nosuch.h5 && cut -f2,4 out | sed 1d | sort -u >pairs &&
	printf "10\t30\n" >expect && test_cmp expect pairs &&
	printf "not a checkpoint\n" >junk.h5 &&
	test_expect_code 65 sw-compare "$TINY" junk.h5 >out 2>err && test_one_error sw-compare junk.h5 &&
	test_line_count = 1 out
'

test_done
