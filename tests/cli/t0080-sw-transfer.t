#!/bin/sh
# sw-transfer on sweeps with a known loss surface and known norms. The TSV
# sweep (made here with awk): d_model 256 and 512 (m = 0, 1), horizons
# D = 2^24, 2^26, 2^28 (k = 0, 1, 2), lr = 2^-12..2^-5, batch = 2^2..2^8:
#
#   x* = -7.1 - 0.28 (log2 D - 24) - 0.3 m        (lr* = 2^x*, exponent -0.28)
#   y* = 4 + 0.5 (log2 D - 24)                    (batch* = 16, 32, 64: exponent 0.5)
#   loss   = 2.5 - 0.05 (log2 D - 24) - 0.1 m + 0.04 (log2 lr - x*)^2 + 0.015 (log2 B - y*)^2
#   log2 N = 7 + 0.05 k + 0.1 m + 0.6 (log2 lr - x*) + 0.25 (log2 B - y*),  folded 0.9 N
#
# so the refined optimum has norm 2^(7 + 0.05 k + 0.1 m): log2 spreads 0.1
# within a model size and 0.2 in all. The checkpoint sweeps are written by
# tests/unit/mksynth.c with a head whose RMS->inf norm is given.
. "$(dirname "$0")/../lib/tap.sh"

SYNTH=$SW_BIN/../tests/unit/mksynth

# the TSV sweep on stdout
mksweep() {
	awk 'BEGIN {
		OFS = "\t"
		print "file", "lr", "batch", "tokens", "d_model", "loss", "out_norm", "out_norm_folded"
		for (m = 0; m < 2; m++) for (k = 0; k < 3; k++) for (x = -12; x <= -5; x++) for (y = 2; y <= 8; y++) {
			L = 24 + 2 * k
			xs = -7.1 - 0.28 * (L - 24) - 0.3 * m; ys = 4 + 0.5 * (L - 24)
			loss = 2.5 - 0.05 * (L - 24) - 0.1 * m + 0.04 * (x - xs) ^ 2 + 0.015 * (y - ys) ^ 2
			n = 2 ^ (7 + 0.05 * k + 0.1 * m + 0.6 * (x - xs) + 0.25 * (y - ys))
			printf "run-%d-%d-%d-%d\t%.17g\t%d\t%d\t%d\t%.17g\t%.17g\t%.17g\n", m, k, x, y,
				2 ^ x, 2 ^ y, 2 ^ L, m ? 512 : 256, loss, n, 0.9 * n
		}
	}'
}

# the expected groups table: refined (1) or on the grid (0)
expect_groups() {
	awk -v refine="$1" 'BEGIN {
		OFS = "\t"
		print "d_model", "tokens", "runs", "loss_kind", "lr", "batch", "loss", "out_norm",
			"out_norm_folded", "log2_out_norm", "log2_out_norm_folded", "bracketed", "refined", "file"
		for (m = 0; m < 2; m++) for (k = 0; k < 3; k++) {
			L = 24 + 2 * k
			xs = -7.1 - 0.28 * (L - 24) - 0.3 * m; ys = 4 + 0.5 * (L - 24)
			xg = int(xs - 0.5)      # the nearest grid lr (xs < 0, never half-way)
			x = refine ? xs : xg
			ln = 7 + 0.05 * k + 0.1 * m + 0.6 * (x - xs)
			loss = 2.5 - 0.05 * (L - 24) - 0.1 * m + 0.04 * (x - xs) ^ 2
			printf "%d\t%d\t56\tloss\t%.17g\t%d\t%.17g\t%.17g\t%.17g\t%.17g\t%.17g\t1\t%d\trun-%d-%d-%d-%d\n",
				m ? 512 : 256, 2 ^ L, 2 ^ x, 2 ^ ys, loss, 2 ^ ln, 0.9 * 2 ^ ln, ln,
				ln + log(0.9) / log(2), refine, m, k, xg, ys
		}
	}'
}

# head_norms FILE...: per file, "FILE, rms_to_inf of lm_head and of
# lm_head_folded" as sw-norms prints them
head_norms() {
	for f in "$@"; do
		sw-norms --role lm_head "$f" >head.norms &&
		printf "%s\t" "$f" && sed 1d head.norms | cut -f10 | paste - - || return 1
	done
}

test_expect_success 'setup: the TSV sweep' '
	mksweep >sweep.tsv && test_line_count = 337 sweep.tsv
'

test_expect_success 'header: the columns, exactly' '
	sw-transfer - <sweep.tsv >out &&
	head -n 1 out >header &&
	printf "d_model\ttokens\truns\tloss_kind\tlr\tbatch\tloss\tout_norm\tout_norm_folded\tlog2_out_norm\tlog2_out_norm_folded\tbracketed\trefined\tfile\n" >expect &&
	test_cmp expect header
'

test_expect_success 'the optimum of each group on the grid: the nearest lr, batch*, the norm there' '
	sw-transfer - <sweep.tsv >out &&
	expect_groups 0 >expect &&
	# values copied from the sweep and their log2, in double, printed to 9
	# digits: 1e-8 relative (integers and names exact)
	numbers_close 1e-8 expect out
'

test_expect_success '--refine: lr* and the norm there from the parabola in log2 lr' '
	sw-transfer --refine - <sweep.tsv >out &&
	expect_groups 1 >expect &&
	# a parabola through three exact points, in double, printed to 9
	# digits: 1e-8 relative
	numbers_close 1e-8 expect out
'

test_expect_success '--summary --refine: the known spread and exponents (within 0.01; in fact 1e-8)' '
	sw-transfer --summary --refine - <sweep.tsv >out &&
	head -n 1 out >header &&
	printf "d_model\tgroups\tlog2_out_norm_mean\tlog2_out_norm_sd\tlog2_out_norm_spread\tlog2_out_norm_folded_mean\tlog2_out_norm_folded_sd\tlog2_out_norm_folded_spread\tlr_exponent\tlr_exponent_se\tlr_prefactor\tlr_r2\tbatch_exponent\tbatch_exponent_se\tbatch_prefactor\tbatch_r2\tunbracketed\n" >expect &&
	test_cmp expect header &&
	awk "BEGIN { OFS = \"\t\"; OFMT = \"%.17g\"; f = log(0.9) / log(2)
		print 256, 3, 7.05, 0.05, 0.1, 7.05 + f, 0.05, 0.1, -0.28, 0, 2 ^ (-7.1 + 0.28 * 24), 1, 0.5, 0, 2 ^ -8, 1, 0
		print 512, 3, 7.15, 0.05, 0.1, 7.15 + f, 0.05, 0.1, -0.28, 0, 2 ^ (-7.4 + 0.28 * 24), 1, 0.5, 0, 2 ^ -8, 1, 0
		print \"all\", 6, 7.1, sqrt(0.005), 0.2, 7.1 + f, sqrt(0.005), 0.2, -0.28, 0, \"\", 1, 0.5, 0, \"\", 1, 0 }" >values &&
	sed 1d out >got &&
	awk -F"\t" "NR == FNR { for (i = 1; i <= NF; i++) w[FNR, i] = \$i; next }
		{ for (i = 1; i <= NF; i++) { d = \$i - w[FNR, i]; if (d < 0) d = -d;
		  m = w[FNR, i] < 0 ? -w[FNR, i] : w[FNR, i];
		  if (\$i \"\" != w[FNR, i] \"\" && d > 1e-8 * m + 1e-9) { print FNR, i, \$i, w[FNR, i]; bad = 1 } } }
		END { exit bad }" values got
'

test_expect_success '--summary: optima at the lr grid s edge counted as unbracketed' '
	# the grid cut at lr 2^-8: the optimal lr of 2^-7.1, 2^-7.66, 2^-8.22
	# (d_model 256) and 2^-7.4, 2^-7.96 (512) lie past it, their grid
	# optimum 2^-8 at the edge; 2^-8.52 (512) is nearest 2^-9, inside
	awk -F"\t" "NR == 1 || \$2 <= 0.00390625" sweep.tsv >cut.tsv &&
	sw-transfer --summary - <cut.tsv >out &&
	cut -f1,17 out >got && printf "d_model\tunbracketed\n256\t3\n512\t2\nall\t5\n" >expect &&
	test_cmp expect got
'

test_expect_success '--check TOL: the span of log2 optimal norms against TOL' '
	sw-transfer --refine --check spread=0.25 - <sweep.tsv >out 2>err && test_line_count = 0 err &&
	sw-transfer --refine --check 0.25 - <sweep.tsv >old 2>err && test_cmp out old &&
	echo "sw-transfer: --check 0.25 is the old spelling of --check spread=0.25; it goes in the next release" >expect &&
	test_cmp expect err &&
	test_expect_code 1 sw-transfer --refine --check spread=0.15 - <sweep.tsv >out 2>err &&
	test_line_count = 1 err && test_line_count = 7 out &&
	grep -q "^sw-transfer: check: the optimal output norms of 6 groups span 0.2 in log2, more than 0.15: 2^7 at d_model 256, tokens 16777216 (run-0-0--7-4) to 2^7.2 at d_model 512, tokens 268435456 (run-1-2--9-6)" err
'

test_expect_success '--check --folded: the folded norms' '
	test_expect_code 1 sw-transfer --summary --refine --check spread=0.15 --folded - <sweep.tsv >out 2>err &&
	grep -q "optimal folded output norms of 6 groups span 0.2" err
'

test_expect_success '--table: every run, loss against output norm, the optima marked' '
	sw-transfer --table - <sweep.tsv >out &&
	test_line_count = 337 out &&
	head -n 1 out >header &&
	printf "file\tlr\tbatch\ttokens\td_model\tloss\tloss_kind\tout_norm\tout_norm_folded\tlog2_out_norm\toptimal\n" >expect &&
	test_cmp expect header &&
	awk -F"\t" "\$11 == 1 { print \$1 }" out >optima &&
	expect_groups 0 | sed 1d | cut -f14 >expect &&
	test_cmp expect optima
'

test_expect_success 'sw-transfer --table | sw-transfer -: the same groups' '
	sw-transfer - <sweep.tsv >direct &&
	# pipe-ok: a table piped in is what is tested; the status is kept in status
	{ sw-transfer --table - <sweep.tsv; echo $? >status; } | sw-transfer - >piped &&
	# the table prints 9 digits: the piped run reads each value rounded to
	# 5e-9 relative and recomputes log2 from it: 1e-8 relative (names,
	# counts and which run is the optimum exact)
	test_status 0 status && numbers_close 1e-8 direct piped
'

test_expect_success 'columns in any order, extra columns, a pasted second header, blank lines' '
	awk -F"\t" -v OFS="\t" "{ print \$6, \$2, \"x\", \$3, \$4, \$5, \$7, \$1 }" sweep.tsv >shuffled &&
	{ head -n 100 shuffled && echo && head -n 1 shuffled && sed 1,100d shuffled; } >pasted &&
	sw-transfer - <pasted >out &&
	sw-transfer - <sweep.tsv >direct && cut -f1-8,10,12- direct >expect &&
	# exact: the same binary on the same values (the same text, moved)
	cut -f1-8,10,12- out >got && test_cmp expect got
'

test_expect_success '--json: JSON Lines with the same fields' '
	sw-transfer --json --summary --refine - <sweep.tsv >out &&
	test_line_count = 3 out &&
	grep -q "^{\"d_model\": \"all\", \"groups\": 6, " out &&
	grep -q "\"lr_prefactor\": null" out
'

# checkpoints: lr 1e-3, 2e-3, 4e-3 x batch 8, 16 at 1e6 and 4e6 tokens;
# val_loss lowest at (2e-3, 8) for 1e6, at (1e-3, 16) for 4e6
mkckpts() {
	dir=$1 && shift && mkdir -p "$dir" &&
	for t in 1000000 4000000; do for lr in 0.001 0.002 0.004; do for b in 8 16; do
		loss=$(awk -v t=$t -v lr=$lr -v b=$b "BEGIN { if (t == 1000000) print 3 + (lr == 0.002 ? 0 : 0.1) + (b == 8 ? 0 : 0.05);
			else print 2.5 + (lr == 0.001 ? 0 : 0.1) + (b == 16 ? 0 : 0.05) }") &&
		norm=$(awk -v lr=$lr -v b=$b "BEGIN { print lr * 64000 / b }") &&
		"$SYNTH" "$@" --step 100 --tokens $t --lr $lr --batch $b --val-loss $loss --train-loss 9 \
			--out-norm $norm "$dir/run-$t-$lr-$b.h5" || return 1
	done; done; done
}

test_expect_success 'setup: checkpoint sweeps (untied, tied, without gains)' '
	mkckpts ck && mkckpts tied --tie && mkckpts nogain --no-gains &&
	ls ck/*.h5 >names && test_line_count = 12 names
'

test_expect_success 'checkpoints: lr_max, batch_size, tokens, val_loss from the files' '
	sw-transfer ck/*.h5 >out &&
	cut -f1-7,12-14 out >got &&
	# exact: lr, batch, tokens and loss are the attributes as stored
	printf "d_model\ttokens\truns\tloss_kind\tlr\tbatch\tloss\tbracketed\trefined\tfile\n16\t1000000\t6\tval_loss\t0.002\t8\t3\t1\t0\tck/run-1000000-0.002-8.h5\n16\t4000000\t6\tval_loss\t0.001\t16\t2.5\t0\t0\tck/run-4000000-0.001-16.h5\n" >expect &&
	test_cmp expect got
'

test_expect_success 'checkpoints: the norms are sw-norms lm_head and lm_head_folded, to the digit' '
	head_norms ck/run-1000000-0.002-8.h5 ck/run-4000000-0.001-16.h5 >norms && cut -f2,3 norms >expect &&
	sw-transfer ck/*.h5 >out && test_line_count = 3 out &&
	# exact: the same lib/analysis/norms.c function on the same files
	sed 1d out | cut -f8,9 >got && test_cmp expect got &&
	# against the construction (N, and N sqrt(1.25) folded): norms of a
	# float32 matrix, a few ulps times sqrt(n), 1e-6 relative
	awk -F"\t" "NR > 1 { printf \"%.17g\t%.17g\n\", \$8, \$9 / \$8 }" out >r &&
	awk "BEGIN { printf \"16\t%.17g\n4\t%.17g\n\", sqrt(1.25), sqrt(1.25) }" >expect &&
	numbers_close 1e-6 expect r
'

test_expect_success '--table of checkpoints: every run is sw-norms of its file' '
	sw-transfer --table ck/*.h5 >out && test_line_count = 13 out &&
	sed 1d out | cut -f1,8,9 | sort >got &&
	head_norms ck/*.h5 >norms && sort norms >expect &&
	# exact: the same lib/analysis/norms.c function on the same files
	test_cmp expect got
'

test_expect_success 'tied head: the embedding as the head, as sw-norms computes it' '
	sw-transfer --table tied/*.h5 >out && sed 1d out | cut -f1,8,9 | sort >got &&
	head_norms tied/*.h5 >norms && sort norms >expect &&
	# exact: the same lib/analysis/norms.c function on the same files
	test_cmp expect got && test_line_count = 12 got
'

test_expect_success 'no final norm gain: no folded norm (empty)' '
	sw-transfer nogain/*.h5 >out &&
	sed 1d out | cut -f9,11 | sort -u >got && printf "\t\n" >expect && test_cmp expect got
'

test_expect_success 'two horizons: the fits; file names from stdin' '
	ls ck/*.h5 | sw-transfer --summary >out &&
	sed -n 2p out | cut -f1,2,9,13 >got &&
	printf "16\t2\t-0.5\t0.5\n" >expect &&
	# exponents ln(1/2) / ln 4 and ln 2 / ln 4, fitted in double and
	# printed to 9 digits: 1e-8 relative
	numbers_close 1e-8 expect got
'

test_expect_success 'train_loss when not every run has val_loss' '
	mkdir tl && cp ck/*.h5 tl/ &&
	"$SYNTH" --step 100 --tokens 1000000 --lr 0.008 --batch 8 --train-loss 1 tl/extra.h5 &&
	sw-transfer tl/*.h5 >out &&
	sed -n 2p out | cut -f3,4,5,7 >got && printf "7\ttrain_loss\t0.008\t1\n" >expect && test_cmp expect got
'

test_expect_success '--horizon-tol: nearby token counts are one horizon' '
	"$SYNTH" --step 100 --tokens 1009000 --lr 0.002 --batch 8 --val-loss 2.9 near.h5 &&
	sw-transfer ck/*.h5 near.h5 >out && test_line_count = 4 out &&
	sw-transfer --horizon-tol 0.01 ck/*.h5 near.h5 >out && test_line_count = 3 out &&
	sed -n 2p out | cut -f2,3,14 >got &&
	awk "BEGIN { printf \"%d\t7\tnear.h5\n\", exp((6 * log(1000000) + log(1009000)) / 7) + 0.5 }" >expect &&
	test_cmp expect got
'

test_expect_success 'one run: the group printed, no fit asked, none said (exit 0)' '
	sw-transfer ck/run-1000000-0.001-8.h5 >out 2>err &&
	test_line_count = 2 out && test_line_count = 0 err
'

test_expect_success 'bad: --summary of a sweep with one run: the fit an error, exit 65' '
	test_expect_code 65 sw-transfer --summary ck/run-1000000-0.001-8.h5 >out 2>err &&
	test_line_count = 3 out && test_line_count = 1 err &&
	grep -q "^sw-transfer: d_model 16: cannot fit lr\*(D) and batch\*(D): the sweep has one horizon (1 run in all)" err
'

test_expect_success 'bad: --summary of one horizon, many runs: the same' '
	test_expect_code 65 sw-transfer --summary ck/run-1000000-*.h5 >out 2>err &&
	test_line_count = 3 out && grep -q "one horizon (6 runs in all)" err &&
	sw-transfer ck/run-1000000-*.h5 >out 2>err && test_line_count = 2 out && test_line_count = 0 err
'

test_expect_success '--table needs no fit: one run is fine' '
	sw-transfer --table ck/run-1000000-0.001-8.h5 >out 2>err &&
	test_line_count = 2 out && test_line_count = 0 err
'

test_expect_success 'bad: runs without a loss: exit 65 naming the file, the others go on' '
	"$SYNTH" --step 100 --tokens 1000000 --lr 0.002 --batch 8 noloss.h5 &&
	test_expect_code 65 sw-transfer ck/*.h5 noloss.h5 >out 2>err &&
	test_one_error sw-transfer noloss.h5 && grep -q "no val_loss or train_loss" err &&
	test_line_count = 3 out
'

test_expect_success 'bad: a TSV row without a loss: exit 65 naming the run' '
	sed "5s/\t[^\t]*\t\([^\t]*\t[^\t]*\)$/\t\t\1/" sweep.tsv >noloss.tsv &&
	test_expect_code 65 sw-transfer - <noloss.tsv >out 2>err &&
	test_line_count = 1 err && grep -q "^sw-transfer: run-0-0--12-5: no loss" err &&
	test_line_count = 7 out
'

test_expect_success 'bad: no /optim, a safetensors model, a missing file' '
	"$SYNTH" --no-optim --step 100 --val-loss 3 noopt.h5 &&
	test_expect_code 65 sw-transfer noopt.h5 >out 2>err &&
	test_one_error sw-transfer noopt.h5 && grep -q "no /optim group" err &&
	test_expect_code 65 sw-transfer "$FIX/tiny-hf" >out 2>err &&
	test_one_error sw-transfer "$FIX/tiny-hf" && grep -q "TSV on stdin" err &&
	test_expect_code 66 sw-transfer nonexistent.h5 >out 2>err &&
	test_one_error sw-transfer nonexistent.h5
'

test_expect_success 'bad: a TSV without the columns, an empty stdin' '
	printf "lr\tbatch\n0.1\t8\n" >short.tsv &&
	test_expect_code 65 sw-transfer - <short.tsv >out 2>err &&
	test_one_error sw-transfer - && grep -q "without the columns tokens d_model loss out_norm" err &&
	test_expect_code 65 sw-transfer - </dev/null >out 2>err &&
	test_line_count = 1 err && grep -q "no runs" err
'

test_expect_success 'bad usage: exit 64' '
	test_expect_code 64 sw-transfer --table --summary - <sweep.tsv >out 2>err &&
	test_expect_code 64 sw-transfer --folded - <sweep.tsv >out 2>err &&
	test_expect_code 64 sw-transfer --check spread=-1 - <sweep.tsv >out 2>err &&
	test_expect_code 64 sw-transfer --horizon-tol 2 - <sweep.tsv >out 2>err &&
	grep -q "^usage: sw-transfer" err
'

test_done
