#!/bin/sh
# sw-qkdrift on traces. sw-train logs every head's Q/K pair in its trace
# (qk_q_rms, qk_k_rms, and qk_q_mult, qk_k_mult with multipliers),
# computed by the function sw-qkdrift runs on a checkpoint of the same
# weights: at a checkpoint's step the trace's rows are the checkpoint's,
# digit for digit, for every source (matrices with the attn_norm gain
# folded in, GQA, row multipliers, QK-norm gains, QK-norm without gains).
# --drift over a trace fits every logged step: on a trace written by
# tests/unit/mktrace -q with a planted slope and trendless noise the slope
# is recovered within its standard error, and slope and standard error
# are those of a least-squares fit computed here in awk from the trace's
# own values (sw-trace).
. "$(dirname "$0")/../lib/tap.sh"

MKTRACE=$SW_BIN/../tests/unit/mktrace
SMALL="--seq-len 16 --d-model 32 --n-layers 2 --n-heads 4 --n-kv-heads 2 --batch 4 --threads 1"

# at_steps STEPS <in >out: the rows of a sw-qkdrift table at those steps
# (a space-separated list), without the file column
at_steps() {
	awk -F'\t' -v steps="$1" 'BEGIN { n = split(steps, s, " "); for (i = 1; i <= n; i++) want[s[i]] = 1 }
		NR > 1 && ($2 in want)' | cut -f2-
}

test_expect_success 'setup: runs with checkpoints at 12 and 24 and a trace row every 4 steps' '
	for v in plain:"" mult:"--multipliers row --mult-wd 0" qkn:"--qk-norm" unit:"--qk-norm --no-scale-vectors"; do
		sw-train --data "$FIX/corpus.txt" --out ${v%%:*} $SMALL --steps 24 --ckpt-every 12 \
			--trace-every 4 --eval-every 12 ${v#*:} >/dev/null || exit 1
	done &&
	ls plain/ckpt-*.h5 >ckpts && test_line_count = 2 ckpts
'

# exact: the trainer's trace row and sw-qkdrift's checkpoint row come from
# the same function (qkdrift_layer, serial sums in double) on the same
# weights, on the same machine
while read -r run source title; do
	test_expect_success "$title: the trace rows at 12 and 24 are the checkpoints' rows" "
		sw-qkdrift $run/trace.h5 >trace.tsv &&
		sw-qkdrift $run/ckpt-000012.h5 $run/ckpt-000024.h5 >ckpt.tsv &&
		at_steps '12 24' <trace.tsv >got && sed 1d ckpt.tsv | cut -f2- >expect &&
		test_line_count = 16 expect && test_cmp expect got &&
		cut -f6 got | sort -u >sources && echo $source >want && test_cmp want sources
	"
done <<'RUNS'
plain matrices GQA, the attn_norm gain folded in
mult matrices row multipliers
qkn qk_norm_gains QK-norm
unit qk_norm_unit QK-norm without gains
RUNS

test_expect_success 'with multipliers the pair of the multipliers is in the trace too' '
	sw-qkdrift mult/trace.h5 >trace.tsv &&
	awk -F"\t" "NR > 1 && (\$12 == \"\" || \$13 == \"\" || \$14 == \"\" || \$15 == \"\") { bad = 1 } END { exit bad }" trace.tsv &&
	sw-qkdrift plain/trace.h5 >trace.tsv &&
	awk -F"\t" "NR > 1 && \$12 \$13 \$14 \$15 != \"\" { bad = 1 } END { exit bad }" trace.tsv
'

test_expect_success 'a row per trace row, layer and head, in step order, the tokens of the trace' '
	sw-qkdrift plain/trace.h5 >trace.tsv &&
	test_line_count = 49 trace.tsv &&
	cut -f1 trace.tsv | sed 1d | sort -u >files && echo plain/trace.h5 >expect && test_cmp expect files &&
	cut -f2 trace.tsv | sed 1d | uniq >steps &&
	printf "4\n8\n12\n16\n20\n24\n" >expect && test_cmp expect steps &&
	sw-trace --series tokens plain/trace.h5 >tokens.tsv &&
	sed 1d tokens.tsv >expect &&
	cut -f2,3 trace.tsv | sed 1d | uniq >got && test_cmp expect got
'

# exact: the same binary on the same files, and the rule above
test_expect_success 'a trace and checkpoints mixed: one row per step, the checkpoint at its steps' '
	sw-qkdrift plain/trace.h5 plain/ckpt-*.h5 >mixed.tsv &&
	sw-qkdrift plain/ckpt-*.h5 plain/trace.h5 >mixed2.tsv &&
	test_cmp mixed.tsv mixed2.tsv &&
	sw-qkdrift plain/trace.h5 >trace.tsv &&
	test_line_count = 49 mixed.tsv &&
	cut -f2- mixed.tsv >got && cut -f2- trace.tsv >expect && test_cmp expect got &&
	awk -F"\t" "NR > 1 { print \$2, \$1 }" mixed.tsv | uniq >files &&
	cat >expect <<-\EOF &&
	4 plain/trace.h5
	8 plain/trace.h5
	12 plain/ckpt-000012.h5
	16 plain/trace.h5
	20 plain/trace.h5
	24 plain/ckpt-000024.h5
	EOF
	test_cmp expect files
'

test_expect_success '--drift over the trace: every logged step; checkpoints add no point' '
	sw-qkdrift --drift plain/trace.h5 >trace.tsv &&
	sw-qkdrift --drift plain/trace.h5 plain/ckpt-*.h5 >mixed.tsv &&
	test_cmp trace.tsv mixed.tsv && test_line_count = 9 trace.tsv &&
	cut -f5-7 trace.tsv | sort -u >span &&
	printf "6\t4\t24\npoints\tfirst_step\tlast_step\n" >expect && test_cmp expect span &&
	sw-qkdrift --drift plain/ckpt-*.h5 >ckpt.tsv &&
	cut -f5 ckpt.tsv | sed 1d | sort -u >n && echo 2 >expect && test_cmp expect n
'

test_expect_success 'setup: a trace with a planted drift (mktrace -q 0.25, 150 rows)' '
	"$MKTRACE" -q 0.25 -n 150 planted.h5 >/dev/null
'

test_expect_success '--drift recovers the planted slope 0.25 (1 + l + h) within its standard error' '
	sw-qkdrift --drift planted.h5 >drift.tsv &&
	test_line_count = 7 drift.tsv &&
	awk -F"\t" "function abs(x) { return x < 0 ? -x : x }
		NR > 1 { want = 0.25 * (1 + \$1 + \$2); n++
			if (\$5 != 150 || \$6 != 0 || \$7 != 1490 || !(\$9 > 0) || abs(\$8 - want) > \$9 ||
			    abs(\$10) > 1e-12) { print; bad = 1 } }
		END { exit bad || n != 6 }" drift.tsv
'

# Two fits in double of the same values (sw-trace prints the trace's
# doubles to 17 digits), summed in another order: they agree to about
# 1e-14, and sw-qkdrift prints 9 digits (half a unit of the last is at
# most 5e-9 relative): 1e-8 relative. Digits rounded to 6 on both sides
# could still differ at a rounding boundary.
test_expect_success '--drift: slope and standard error are the least squares of the trace s values' '
	sw-trace --series qk_q_rms,qk_k_rms planted.h5 >series.tsv &&
	awk -F"\t" "NR == 1 { next }
		{ n++; x[n] = \$1 / 1000; for (j = 0; j < 6; j++) y[j, n] = log(\$(2 + j) / \$(8 + j)) / log(2) }
		END { for (j = 0; j < 6; j++) {
			sx = sy = 0; for (i = 1; i <= n; i++) { sx += x[i]; sy += y[j, i] }
			mx = sx / n; my = sy / n; sxx = sxy = 0
			for (i = 1; i <= n; i++) { sxx += (x[i] - mx) ^ 2; sxy += (x[i] - mx) * (y[j, i] - my) }
			b = sxy / sxx; rss = 0
			for (i = 1; i <= n; i++) rss += (y[j, i] - my - b * (x[i] - mx)) ^ 2
			printf \"%d\t%d\t%.17g\t%.17g\n\", int(j / 2), j % 2, b, sqrt(rss / (n - 2) / sxx) } }" series.tsv >expect &&
	sw-qkdrift --drift planted.h5 >drift.tsv &&
	test_line_count = 7 drift.tsv &&
	awk -F"\t" -v OFS="\t" "NR > 1 { print \$1, \$2, \$8, \$9 }" drift.tsv >got &&
	numbers_close 1e-8 expect got
'

# the message prints the slope to 6 digits: mktrace's noise is trendless,
# so the fit gives the planted 0.75 and 1 to about 1e-15 (doubles, no
# BLAS), far inside the 5e-7 that would change a printed digit
test_expect_success '--check MAX on a trace: exit 1 naming each head faster than MAX' '
	test_expect_code 1 sw-qkdrift --check drift=0.6 planted.h5 >out 2>err &&
	test_line_count = 7 out &&
	cat >expect <<-\EOF &&
	sw-qkdrift: check: layer 1 head 1: log2_ratio drifts 0.75 per 1000 steps (|slope| > 0.6)
	sw-qkdrift: check: layer 2 head 0: log2_ratio drifts 0.75 per 1000 steps (|slope| > 0.6)
	sw-qkdrift: check: layer 2 head 1: log2_ratio drifts 1 per 1000 steps (|slope| > 0.6)
	EOF
	test_cmp expect err &&
	sw-qkdrift --check drift=1.1 planted.h5 >out 2>err && test_line_count = 0 err
'

test_expect_success '--layer and --json on a trace' '
	sw-qkdrift --layer 2 planted.h5 >out &&
	test_line_count = 301 out && cut -f4 out | sed 1d | sort -u >layers &&
	echo 2 >expect && test_cmp expect layers &&
	sw-qkdrift --json --layer 0 planted.h5 >out &&
	test_line_count = 300 out &&
	head -n 1 out >first &&
	grep -q "^{\"file\": \"planted.h5\", \"step\": 0, \"tokens\": 0, \"layer\": 0, \"head\": 0, \"kv_head\": 0, \"source\": \"matrices\", " first
'

test_expect_success 'a trace is told by its content, not its name' '
	cp plain/trace.h5 ckpt-000099.h5 && cp plain/ckpt-000012.h5 trace.h5 &&
	sw-qkdrift ckpt-000099.h5 trace.h5 >out && test_line_count = 49 out &&
	awk -F"\t" "\$2 == 12 { print \$1 }" out | sort -u >file && echo trace.h5 >expect && test_cmp expect file
'

test_expect_success 'bad: a trace of an older sw-train (no qk_q_rms): one line naming it, exit 65, the rest go on' '
	"$MKTRACE" -n 4 old.h5 >/dev/null &&
	test_expect_code 65 sw-qkdrift old.h5 plain/ckpt-000012.h5 >out 2>err &&
	test_one_error sw-qkdrift old.h5 && grep -q "no series qk_q_rms" err &&
	test_line_count = 9 out
'

test_expect_success 'bad: a trace without /config: exit 65' '
	"$MKTRACE" -C -q 1 -n 4 noconfig.h5 >/dev/null &&
	test_expect_code 65 sw-qkdrift noconfig.h5 >out 2>err &&
	test_one_error sw-qkdrift noconfig.h5 && grep -q "no /config" err && test_line_count = 1 out
'

test_expect_success 'bad: a trace and checkpoints of another model mixed: exit 65 naming the file' '
	test_expect_code 65 sw-qkdrift plain/ckpt-000012.h5 planted.h5 >out 2>err &&
	test_one_error sw-qkdrift planted.h5 && grep -q "another model: .* in plain/ckpt-000012.h5" err &&
	test_line_count = 9 out
'

test_expect_success 'bad: a missing file: exit 66' '
	test_expect_code 66 sw-qkdrift missing.h5 >out 2>err && test_one_error sw-qkdrift missing.h5
'

# Hostile traces (tests/unit/mkhostile-h5, one change to the run's trace;
# t0510-hostile-hdf5.t has the rules): one line, exit 65, only the header
# on stdout, no byte of the outside file in it, no hang.
test_expect_success 'setup: the outside files' '
	for i in $(seq 300); do echo "SWOUTSIDE-$i"; done >outside.txt &&
	cp "$FIX/tiny.h5" outside.h5
'
while IFS='|' read -r name how pattern; do
	test_expect_success "hostile: $name: exit 65, '$pattern'" "
		\"\$SW_BIN/../tests/unit/mkhostile-h5\" $how plain/trace.h5 $name.h5 &&
		test_expect_code 65 timeout 10 sw-qkdrift $name.h5 >out 2>err &&
		test_one_error sw-qkdrift $name.h5 && grep -q -- \"$pattern\" err &&
		test_line_count = 1 out && ! grep -q SWOUTSIDE out err
	"
done <<'CASES'
q-elink|elink /series/qk_q_rms outside.h5|/series/qk_q_rms: external link: refused
q-soft|soft /series/qk_q_rms|/series/qk_q_rms: soft link: refused
k-external|external /series/qk_k_rms outside.txt|/series/qk_k_rms: external storage: refused
q-vds|vds /series/qk_q_rms missing.h5|/series/qk_q_rms: virtual dataset: refused
k-unwritten|unwritten /series/qk_k_rms|/series/qk_k_rms: never written
config-elink|elink /config outside.h5|/config: external link: refused
CASES

if ! command -v gnuplot >/dev/null 2>&1; then
	test_skip 'sw-plot qkdrift from a trace' 'gnuplot not installed'
	test_done
fi

test_expect_success 'sw-plot qkdrift draws the trace-based table' '
	sw-qkdrift plain/trace.h5 plain/ckpt-*.h5 >qk.tsv &&
	sw-plot qkdrift qk.tsv -o qk.png 2>err && test_line_count = 0 err &&
	head -c 8 qk.png | od -A n -t x1 >sig && grep -q "89 50 4e 47 0d 0a 1a 0a" sig &&
	sw-qkdrift planted.h5 >planted.tsv &&
	sw-plot qkdrift planted.tsv -o planted.svg 2>err && test_line_count = 0 err &&
	grep -q "</svg>" planted.svg
'

test_done
