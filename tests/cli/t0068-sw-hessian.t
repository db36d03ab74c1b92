#!/bin/sh
# sw-hessian: the table per block type, per layer and per tensor; the
# Gauss-Newton trace per parameter against sw-sharpness's GNB estimate of
# the same batch (two independent estimators of tr(G[block])/n); the
# density's nodes and weights, the smoothed curve; determinism; usage
# errors and bad input with their exit statuses. The values themselves
# are checked against PyTorch in tests/e2e/t0280-hessian-torch.t.
. "$(dirname "$0")/../lib/tap.sh"

CORPUS=$FIX/corpus.txt
HS="--data $CORPUS --batch-tokens 128 --seq-len 16"

test_expect_success 'setup: a small run' '
	sw-train --data "$CORPUS" --out run --steps 30 --batch 4 --seq-len 16 --d-model 16 --n-layers 2 \
		--n-heads 2 --trace "" --threads 1 >/dev/null &&
	test -f run/ckpt-000030.h5
'

test_expect_success 'the table: its columns, a row per block type and all' '
	sw-hessian $HS run/ckpt-000030.h5 >out &&
	head -n 1 out >header &&
	printf "file\tstep\tblock\tnparams\tlambda_1\tlambda_2\tlambda_3\tsteps\tbound\ttrace\ttrace_se\ttrace_per_param\tlr\teos_gd\ttokens\tlambda_min\tbound_min\n" >expect &&
	test_cmp expect header &&
	cut -f3 out | sed 1d | tr "\n" " " >blocks &&
	printf "emb qk vo ffn norm out all " >expect && test_cmp expect blocks
'

test_expect_success 'nparams per type are the parameter counts, all their sum' '
	sw-ls --summary run/ckpt-000030.h5 >summary &&
	awk -F"\t" "NR > 1 { print (\$2 == \"total\" ? \"all\" : \$2), \$4 }" summary >counts &&
	sw-hessian $HS run/ckpt-000030.h5 >out &&
	awk -F"\t" "NR > 1 { print \$3, \$4 }" out >ours &&
	test_cmp counts ours
'

test_expect_success 'eigenvalues descending, within bound, converged; trace_per_param = trace / n; eos_gd = lambda_1 lr / 2' '
	sw-hessian $HS run/ckpt-000030.h5 >out 2>err &&
	test_line_count = 0 err &&
	awk -F"\t" "NR > 1 { if (!(\$5 >= \$6 && \$6 >= \$7) || \$9 > 1e-5 * (\$5 < 0 ? -\$5 : \$5) * 50 || \$8 > 100) bad = 1
		d = \$12 - \$10 / \$4; if (d < 0) d = -d; if (d > 1e-6 * (\$12 < 0 ? -\$12 : \$12)) bad = 1
		d = \$14 - \$5 * \$13 / 2; if (d < 0) d = -d; if (d > 1e-6 * \$14) bad = 1 } END { exit bad }" out
'

# --whole: the all row alone. Its Lanczos start and probes are drawn for
# block 0, not for the block after the types, so the eigenvalues agree to
# the tolerance they converge to (the residual bound, 1e-5 of lambda_1:
# 1e-4 leaves room) and the traces as two estimates within their errors
test_expect_success '--whole: one row, all, the same block as the default run s last' '
	sw-hessian $HS run/ckpt-000030.h5 >out &&
	sw-hessian $HS --whole run/ckpt-000030.h5 >whole &&
	head -n 1 whole >header &&
	printf "file	step	block	nparams	lambda_1	lambda_2	lambda_3	steps	bound	trace	trace_se	trace_per_param	lr	eos_gd	tokens	lambda_min	bound_min
" >expect &&
	test_cmp expect header &&
	test_line_count = 2 whole &&
	tail -n 1 out >all-row && tail -n 1 whole >whole-row &&
	cut -f3,4 all-row >expect && cut -f3,4 whole-row >actual && test_cmp expect actual &&
	cut -f5-7 all-row >expect && cut -f5-7 whole-row >actual && numbers_close 1e-4 expect actual &&
	paste all-row whole-row >both &&
	awk -F"\t" "{ d = \$10 - \$27; if (d < 0) d = -d; exit !(d <= 4 * sqrt(\$11 * \$11 + \$28 * \$28)) }" both
'

test_expect_success '--whole with --per-layer or --per-tensor: a usage error' '
	test_expect_code 64 sw-hessian $HS --whole --per-layer run/ckpt-000030.h5 2>err &&
	grep -q "exclude each other" err &&
	test_expect_code 64 sw-hessian $HS --whole --per-tensor run/ckpt-000030.h5
'

# exact: the same binary on the same data twice, the same threads
test_expect_success 'the same seed: the same output; another seed: other values' '
	sw-hessian $HS run/ckpt-000030.h5 >a &&
	sw-hessian $HS run/ckpt-000030.h5 >b &&
	sw-hessian $HS --seed 2 run/ckpt-000030.h5 >c &&
	test_cmp a b && ! cmp -s a c
'

test_expect_success 'Gauss-Newton trace per parameter = sw-sharpness S on the same batch (5%)' '
	sw-hessian $HS --gauss-newton --probes 400 --max-steps 3 run/ckpt-000030.h5 >gn 2>/dev/null &&
	sw-sharpness --recompute --same-batch --draws 400 $HS run/ckpt-000030.h5 >gnb &&
	awk -F"\t" "NR == FNR { if (FNR > 1) s[\$3] = \$5; next } FNR > 1 && \$3 != \"all\" {
		d = \$12 - s[\$3]; if (d < 0) d = -d; if (!(\$3 in s) || d > 0.05 * s[\$3]) { print \$3, \$12, s[\$3]; bad = 1 } n++ }
		END { exit bad || n != 6 }" gnb gn
'

test_expect_success 'Gauss-Newton: positive semi-definite, its top eigenvalues not negative' '
	sw-hessian $HS --gauss-newton run/ckpt-000030.h5 >gn &&
	awk -F"\t" "NR > 1 && (\$7 < -\$9 || \$10 < -3 * \$11) { bad = 1 } END { exit bad }" gn
'

test_expect_success '--per-layer: qk, vo, ffn, norm per layer; emb, out and the final norm at -1' '
	sw-hessian $HS --per-layer --top 1 --probes 2 run/ckpt-000030.h5 >pl &&
	awk -F"\t" "NR > 1 { print \$3, \$4, \$5 }" pl >rows &&
	printf "%s\n" "emb -1 768" "qk 0 384" "qk 1 384" "vo 0 512" "vo 1 512" "ffn 0 2112" "ffn 1 2112" \
		"norm -1 16" "norm 0 32" "norm 1 32" "out -1 768" "all  7648" >expect &&
	cut -d" " -f1-2 rows >got && cut -d" " -f1-2 expect >want && test_cmp want got
'

test_expect_success '--per-tensor: a row per selected tensor, nparams its numel' '
	sw-hessian $HS --per-tensor --top 1 --probes 2 --layer 1 run/ckpt-000030.h5 >pt &&
	sw-ls --layer 1 run/ckpt-000030.h5 >ls &&
	awk -F"\t" "NR > 1 { print \$2, \$3, \$9; n += \$9 } END { print \"\", \"all\", n }" ls >expect &&
	awk -F"\t" "NR > 1 { print \$3, \$4, \$7 }" pt >got &&
	test_cmp expect got
'

# Lanczos stops on a residual bound, so alone the block may take a few
# steps more or fewer (39 and 41 here): lambda_1 agrees to about 1e-8,
# nparams exactly
test_expect_success 'a block alone is the same block: --block vo gives the vo row'"'"'s lambda_1 (1e-6)' '
	sw-hessian $HS run/ckpt-000030.h5 >all &&
	sw-hessian $HS --block vo run/ckpt-000030.h5 >vo &&
	test_line_count = 2 vo &&
	awk -F"\t" "\$3 == \"vo\" { print \$4 \"\t\" \$5 }" all >expect &&
	awk -F"\t" "NR > 1 { print \$4 \"\t\" \$5 }" vo >got && numbers_close 1e-6 expect got
'

# --low-memory reads each layer again from the file when a pass reaches
# it, the same values widened exactly: the same operations on the same
# values, so the same bits (the same binary, one sequence per pass both
# ways)
test_expect_success '--low-memory: the table of the model loaded whole, bit for bit' '
	sw-hessian $HS --micro-batch 1 --probes 4 run/ckpt-000030.h5 >whole &&
	sw-hessian $HS --low-memory --probes 4 run/ckpt-000030.h5 >low &&
	test_line_count = 8 low && test_cmp whole low
'

test_expect_success '--density: each vector'"'"'s weights sum to 1, nodes at most lambda_1' '
	sw-hessian $HS --top 1 run/ckpt-000030.h5 >top &&
	sw-hessian $HS --density --slq-vectors 3 --slq-steps 20 run/ckpt-000030.h5 >nodes &&
	head -n 1 nodes >header &&
	printf "file\tstep\tblock\tvector\tlambda\tweight\ttokens\n" >expect && test_cmp expect header &&
	awk -F"\t" "NR == FNR { if (FNR > 1) top[\$3] = \$5 + \$9; next } FNR > 1 {
		w[\$3, \$4] += \$6; if (\$5 > top[\$3] * (1 + 1e-5)) { print \"node above lambda_1:\", \$0; bad = 1 } }
		END { for (k in w) { n++; d = w[k] - 1; if (d < 0) d = -d; if (d > 1e-6) { print k, w[k]; bad = 1 } } exit bad || n != 21 }" top nodes
'

test_expect_success '--density --grid: a curve per block that integrates to 1' '
	sw-hessian $HS --density --slq-steps 20 --grid 400 --smooth 0.02 run/ckpt-000030.h5 >grid &&
	test_line_count = 2801 grid &&
	awk -F"\t" "NR > 1 { if (\$3 == b) a[b] += (\$4 - x) * (\$5 + y) / 2; b = \$3; x = \$4; y = \$5 }
		END { for (k in a) { n++; d = a[k] - 1; if (d < 0) d = -d; if (d > 1e-3) { print k, a[k]; bad = 1 } } exit bad || n != 7 }" grid
'

test_expect_success '--json: the same fields' '
	sw-hessian $HS --json --block norm run/ckpt-000030.h5 >j &&
	test_line_count = 1 j &&
	grep -q "^{\"file\": \"run/ckpt-000030.h5\", \"step\": 30, \"block\": \"norm\", \"nparams\": 80, \"lambda_1\": " j
'

test_expect_success 'Lanczos stopped early: a line on stderr, the bound in the table, exit 0' '
	sw-hessian $HS --max-steps 2 --block ffn run/ckpt-000030.h5 >out 2>err &&
	test_line_count = 1 err &&
	grep -q "^sw-hessian: run/ckpt-000030.h5: ffn: Lanczos stopped after 2 products" err &&
	awk -F"\t" "NR == 2 { exit !(\$8 == 2 && \$9 > 0) }" out
'

test_expect_success '--preconditioned: eos_adam, P from the checkpoint'"'"'s Adam moments' '
	sw-hessian $HS --preconditioned --top 1 run/ckpt-000030.h5 >pre &&
	head -n 1 pre | cut -f12 >col && echo eos_adam >expect && test_cmp expect col &&
	sw-hessian $HS --top 1 run/ckpt-000030.h5 >plain &&
	! cmp -s pre plain
'

# two estimators of one trace (the same batch: the same seed), each with
# its standard error: they agree within 4 of the two combined, block by
# block (the estimator itself is checked on a known trace in
# tests/unit/t-traceest.c)
test_expect_success '--trace-estimator hutch++: the trace of Hutchinson'"'"'s within their errors' '
	sw-hessian $HS --probes 60 run/ckpt-000030.h5 >hutchinson &&
	sw-hessian $HS --probes 30 --trace-estimator hutch++ run/ckpt-000030.h5 >hutchpp &&
	cut -f1-9 hutchinson >a && cut -f1-9 hutchpp >b && test_cmp a b &&
	paste hutchinson hutchpp | awk -F"\t" "NR > 1 { d = \$10 - \$27; e = sqrt(\$11 * \$11 + \$28 * \$28)
		if (!(d * d <= 16 * e * e) || !(\$28 > 0)) { print; bad = 1 } } END { exit bad }"
'

test_expect_success 'usage errors: exit 64' '
	test_expect_code 64 sw-hessian run/ckpt-000030.h5 2>err && grep -q "\-\-data FILE" err &&
	test_expect_code 64 sw-hessian $HS --per-layer --per-tensor run/ckpt-000030.h5 2>err &&
	test_expect_code 64 sw-hessian $HS --grid 10 run/ckpt-000030.h5 2>err &&
	test_expect_code 64 sw-hessian $HS --density --smooth 0.1 run/ckpt-000030.h5 2>err &&
	test_expect_code 64 sw-hessian $HS --gauss-newton --preconditioned run/ckpt-000030.h5 2>err &&
	test_expect_code 64 sw-hessian $HS --top 0 run/ckpt-000030.h5 2>err &&
	test_expect_code 64 sw-hessian $HS --top 33 run/ckpt-000030.h5 2>err &&
	test_expect_code 64 sw-hessian $HS --trace-estimator hutch run/ckpt-000030.h5 2>err &&
	test_expect_code 64 sw-hessian $HS --trace-estimator hutch++ --density run/ckpt-000030.h5 2>err &&
	test_expect_code 64 sw-hessian $HS --trace-estimator hutch++ --probes 2 run/ckpt-000030.h5 2>err &&
	test_expect_code 64 sw-hessian --data "$CORPUS" --batch-tokens 100 --seq-len 16 run/ckpt-000030.h5 >out 2>err &&
	test_one_error sw-hessian run/ckpt-000030.h5 && grep -q "not a multiple" err
'

test_expect_success 'bad input: a missing file 66, token ids beyond the vocabulary 65, no selection 65' '
	test_expect_code 66 sw-hessian $HS nothere.h5 >out 2>err &&
	test_one_error sw-hessian nothere.h5 &&
	test_expect_code 66 sw-hessian --data nothere.txt run/ckpt-000030.h5 >out 2>err &&
	test_one_error sw-hessian run/ckpt-000030.h5 &&
	printf "\377\377\377\377%.0s" $(seq 100) >high.txt &&
	test_expect_code 65 sw-hessian --data high.txt --batch-tokens 32 --seq-len 16 run/ckpt-000030.h5 >out 2>err &&
	test_one_error sw-hessian run/ckpt-000030.h5 && test_line_count = 1 out &&
	test_expect_code 65 sw-hessian $HS --block mult run/ckpt-000030.h5 >out 2>err &&
	test_one_error sw-hessian run/ckpt-000030.h5 && grep -q "no tensor matches the selection" err
'

test_expect_success '--preconditioned without Adam moments: exit 65, said' '
	LC_ALL=C tr -c "a-w" "x" <"$CORPUS" | LC_ALL=C tr "a-x" "\\000-\\027" >c24 &&
	test_expect_code 65 sw-hessian --data c24 --batch-tokens 16 --seq-len 16 --preconditioned \
		"$FIX/tiny-hf" >out 2>err &&
	test_one_error sw-hessian "$FIX/tiny-hf" && grep -q "preconditioned needs Adam" err
'

# d_model 16, 1 layer: attn_norm, ffn_norm, final_norm, 16 values each,
# their directions and magnitudes the parameters (the values against
# PyTorch: tests/e2e/t0280-hessian-torch.t)
test_expect_success 'gains reparameterized (--scale-reparam): the norm block is the directions and magnitudes' '
	sw-train --data "$CORPUS" --out rp --steps 2 --batch 4 --seq-len 16 --d-model 16 --n-layers 1 \
		--n-heads 2 --scale-reparam or --trace "" --threads 1 >/dev/null &&
	sw-hessian $HS --block norm --per-tensor rp/ckpt-000002.h5 >out &&
	sed "\$d" out | cut -f5,6,7 >actual &&
	tail -n 1 out | cut -f4,7 >all && printf "all\t51\n" >all.expect && test_cmp all.expect all &&
	cat >expect <<-\EOF &&
	role	layer	nparams
	attn_norm_dir	0	16
	attn_norm_mag	0	1
	ffn_norm_dir	0	16
	ffn_norm_mag	0	1
	final_norm_dir	-1	16
	final_norm_mag	-1	1
	EOF
	test_cmp expect actual
'

test_expect_success '--dump-batch: the batch, B rows of T; an unwritable place 73' '
	sw-hessian $HS --top 1 --probes 1 --dump-batch batch.h5 --block norm run/ckpt-000030.h5 >out &&
	h5dump -H batch.h5 >dump && grep -q "DATASET \"tokens\"" dump && grep -q "( 8, 16 )" dump &&
	test_expect_code 73 sw-hessian $HS --dump-batch nodir/batch.h5 run/ckpt-000030.h5 >out 2>err &&
	test_one_error sw-hessian run/ckpt-000030.h5
'

test_done
