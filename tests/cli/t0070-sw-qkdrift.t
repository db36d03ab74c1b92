#!/bin/sh
# sw-qkdrift on synthetic runs (tests/unit/mksynth.c) where each head's Q
# rows are scaled by s(t) and its K rows by 1/s(t), s = 2^(R (1 + g + 2l)
# t/1000) for layer l and KV head g: the product stays, log2_ratio is
# log2(qa/ka) + 2 log2 s exactly, the drift slope is 2 R (1 + g + 2l). The
# same with the multipliers, or the QK-norm gains, carrying s; GQA shares
# K between the heads of a group. Expected values are computed here, in
# awk, from the construction.
. "$(dirname "$0")/../lib/tap.sh"

SYNTH=$SW_BIN/../tests/unit/mksynth
STEPS="2500 0 4000 1000"        # written and given out of order

# mkrun DIR OPTIONS...: a run of four checkpoints
mkrun() {
	dir=$1 && shift && mkdir -p "$dir" &&
	for t in $STEPS; do
		"$SYNTH" "$@" --step $t "$dir/ckpt-$t.h5" || return 1
	done
}

# synth_check MODE R GROUP <out: every row of a sw-qkdrift table against
# the construction. MODE: matrices, row (row multipliers carry s), shared
# (scalar or column multipliers: one s per layer), gains (QK-norm gains),
# unit (QK-norm without gains). GROUP = H/KV.
synth_check() {
	awk -F'\t' -v mode="$1" -v R="$2" -v G="$3" '
	function near(a, b,   d, m) { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; return d <= 1e-6 * m + 1e-9 }
	function lg(x) { return log(x) / log(2) }
	function want(col, got, e) { if (!near(got, e)) { print NR ": " col " " got ", expected " e; bad = 1 } }
	NR == 1 { next }
	{
		t = $2; l = $4; h = $5; g = $6; rows++
		if (g != int(h / G)) { print NR ": kv_head " g " for head " h; bad = 1 }
		sg = (mode == "shared" || mode == "gains" || mode == "unit") ? 0 : g
		s = 2 ^ (R * (1 + sg + 2 * l) * t / 1000)
		if (mode == "gains") { q = 1.25 * s; k = 0.8 / s; src = "qk_norm_gains" }
		else if (mode == "unit") { q = 1; k = 1; src = "qk_norm_unit" }
		else { q = (0.5 + h / 8) * s * sqrt(1.25); k = (0.25 + g / 8) / s * sqrt(1.25); src = "matrices" }
		if ($7 != src) { print NR ": source " $7 ", expected " src; bad = 1 }
		want("q_rms", $8, q); want("k_rms", $9, k)
		want("product", $10, q * k); want("log2_ratio", $11, lg(q / k))
		if (mode == "row" || mode == "shared") {
			want("q_mult", $12, s); want("k_mult", $13, 1 / s)
			want("mult_product", $14, 1); want("mult_log2_ratio", $15, 2 * lg(s))
		} else if ($12 $13 $14 $15 != "") { print NR ": multiplier columns not empty"; bad = 1 }
	}
	END { if (!rows) { print "no rows"; bad = 1 } exit bad }' out
}

# drift_check MODE R GROUP <out: --drift rows: slope 2 R (1 + g + 2l), se
# and the product's change 0
drift_check() {
	awk -F'\t' -v mode="$1" -v R="$2" -v G="$3" '
	function abs(x) { return x < 0 ? -x : x }
	NR == 1 { next }
	{
		l = $1; h = $2; g = $3; rows++
		sg = (mode == "shared" || mode == "gains" || mode == "unit") ? 0 : g
		slope = mode == "unit" ? 0 : 2 * R * (1 + sg + 2 * l)
		if ($5 != 4 || $6 != 0 || $7 != 4000) { print NR ": points " $5 " steps " $6 ".." $7; bad = 1 }
		if (abs($8 - slope) > 1e-6 * (slope + 1)) { print NR ": slope " $8 ", expected " slope; bad = 1 }
		if (abs($9) > 1e-6 || abs($10) > 1e-6) { print NR ": se " $9 " product change " $10; bad = 1 }
		if (mode == "row" || mode == "shared") {
			if (abs($11 - slope) > 1e-6 * (slope + 1) || abs($13) > 1e-6) { print NR ": mult " $11 " " $13; bad = 1 }
		} else if ($11 $12 $13 != "") { print NR ": mult columns not empty"; bad = 1 }
	}
	END { if (!rows) { print "no rows"; bad = 1 } exit bad }' out
}

test_expect_success 'setup: synthetic runs (MHA, GQA, multipliers, QK-norm)' '
	mkrun mha -H 4 -K 4 &&
	mkrun gqa -H 4 -K 2 &&
	mkrun row --mult row &&
	mkrun scalar --mult scalar &&
	mkrun col --mult col -K 4 &&
	mkrun qkn --qk-norm &&
	mkrun unit --qk-norm --no-gains &&
	mkrun still --rate 0 &&
	ls mha/*.h5 >names && test_line_count = 4 names
'

test_expect_success 'header: the columns, exactly' '
	sw-qkdrift mha/ckpt-0.h5 >out &&
	head -n 1 out >header &&
	printf "file\tstep\ttokens\tlayer\thead\tkv_head\tsource\tq_rms\tk_rms\tproduct\tlog2_ratio\tq_mult\tk_mult\tmult_product\tmult_log2_ratio\n" >expect &&
	test_cmp expect header && test_line_count = 9 out
'

test_expect_success 'MHA: Q scaled by s, K by 1/s: the product stays, log2_ratio = log2(qa/ka) + 2 log2 s' '
	sw-qkdrift mha/ckpt-2500.h5 mha/ckpt-0.h5 mha/ckpt-4000.h5 mha/ckpt-1000.h5 >out &&
	test_line_count = 33 out &&
	synth_check matrices 0.25 1
'

test_expect_success 'rows in step order whatever the order of the files' '
	sw-qkdrift mha/ckpt-2500.h5 mha/ckpt-0.h5 mha/ckpt-4000.h5 mha/ckpt-1000.h5 >out &&
	cut -f2 out | sed 1d | uniq >steps &&
	printf "0\n1000\n2500\n4000\n" >expect && test_cmp expect steps &&
	cut -f1 out | sed 1d | uniq >files &&
	printf "mha/ckpt-0.h5\nmha/ckpt-1000.h5\nmha/ckpt-2500.h5\nmha/ckpt-4000.h5\n" >expect && test_cmp expect files
'

test_expect_success 'the product is the same at every step (the symmetry leaves it)' '
	sw-qkdrift mha/*.h5 >out && test_line_count = 33 out &&
	awk -F"\t" "NR > 1 { k = \$4 \" \" \$5; if (!(k in p)) p[k] = \$10;
		d = \$10 - p[k]; if (d < 0) d = -d; if (d > 1e-6 * p[k]) { print; bad = 1 } } END { exit bad }" out
'

test_expect_success 'MHA --drift: slope 2 R (1 + g + 2l) per 1000 steps, se 0, product change 0' '
	sw-qkdrift --drift mha/*.h5 >out &&
	head -n 1 out >header &&
	printf "layer\thead\tkv_head\tsource\tpoints\tfirst_step\tlast_step\tslope\tslope_se\tproduct_change\tmult_slope\tmult_slope_se\tmult_product_change\n" >expect &&
	test_cmp expect header && test_line_count = 9 out &&
	drift_check matrices 0.25 1
'

# Each variant: its rows and its drift against the construction.
while read -r dir mode group title; do
	test_expect_success "$title" "
		sw-qkdrift $dir/*.h5 >out && synth_check $mode 0.25 $group &&
		sw-qkdrift --drift $dir/*.h5 >out && drift_check $mode 0.25 $group
	"
done <<'CASES'
gqa matrices 2 GQA (4 heads, 2 KV heads): K_h is the KV head of the group
row row 2 row multipliers carry s: effective matrices and the multipliers pair
scalar shared 2 a scalar multiplier: one s per layer, shared by the heads
col shared 1 column multipliers: one s per layer, shared by the heads
qkn gains 2 QK-norm: the pair is the q_norm/k_norm gains
unit unit 2 QK-norm without gains: both scales fixed at 1, no drift
CASES

# the message prints the slope to 6 digits: the planted 1.5 and 2 come
# out within 1e-8 (mksynth's float32 rounding; sums in double, no BLAS),
# far inside the 5e-7 that would change a printed digit
test_expect_success '--check MAX: exit 1 naming every head whose |slope| exceeds it' '
	test_expect_code 1 sw-qkdrift --check drift=1.2 gqa/*.h5 >out 2>err &&
	test_line_count = 9 out &&
	cat >expect <<-\EOF &&
	sw-qkdrift: check: layer 1 head 0: log2_ratio drifts 1.5 per 1000 steps (|slope| > 1.2)
	sw-qkdrift: check: layer 1 head 1: log2_ratio drifts 1.5 per 1000 steps (|slope| > 1.2)
	sw-qkdrift: check: layer 1 head 2: log2_ratio drifts 2 per 1000 steps (|slope| > 1.2)
	sw-qkdrift: check: layer 1 head 3: log2_ratio drifts 2 per 1000 steps (|slope| > 1.2)
	EOF
	test_cmp expect err
'

test_expect_success '--check: the multipliers drift is checked too' '
	test_expect_code 1 sw-qkdrift --check drift=1.8 row/*.h5 >out 2>err &&
	test_line_count = 4 err &&
	grep -c "multipliers" err >n && echo 2 >expect && test_cmp expect n
'

test_expect_success '--check: no drift, or a larger MAX: exit 0' '
	sw-qkdrift --check drift=0.001 still/*.h5 >out 2>err && test_line_count = 0 err &&
	sw-qkdrift --check drift=2.5 gqa/*.h5 >out 2>err && test_line_count = 0 err &&
	# the spelling of the release before: taken, with a note that it goes
	sw-qkdrift --check 2.5 gqa/*.h5 >old 2>err && test_cmp out old &&
	echo "sw-qkdrift: --check 2.5 is the old spelling of --check drift=2.5; it goes in the next release" >expect &&
	test_cmp expect err
'

test_expect_success '--layer: only those layers' '
	sw-qkdrift --layer 1 gqa/ckpt-0.h5 >out &&
	test_line_count = 5 out && cut -f4 out | sed 1d | sort -u >layers &&
	echo 1 >expect && test_cmp expect layers
'

test_expect_success 'file names on stdin' '
	ls gqa/*.h5 | sw-qkdrift --drift >out && drift_check matrices 0.25 2 &&
	# exact: the same binary on the same files twice
	ls gqa/*.h5 | sw-qkdrift --drift - >out2 && test_cmp out out2
'

test_expect_success '--json: the same fields, null where no multiplier' '
	sw-qkdrift --json gqa/ckpt-0.h5 >out &&
	test_line_count = 8 out &&
	head -n 1 out >first &&
	grep -q "^{\"file\": \"gqa/ckpt-0.h5\", \"step\": 0, \"tokens\": 0, \"layer\": 0, \"head\": 0, \"kv_head\": 0, \"source\": \"matrices\", " first &&
	grep -q "\"q_mult\": null, \"k_mult\": null, \"mult_product\": null, \"mult_log2_ratio\": null}$" first
'

test_expect_success 'a safetensors model (no step): rows with an empty step' '
	sw-qkdrift "$FIX/tiny-hf" >out && test_line_count = 49 out &&
	sed -n 2p out | cut -f2,3 >st && printf "\t\n" >expect && test_cmp expect st
'

# exact: the same binary on the same float32 values in two formats
test_expect_success 'the same numbers from safetensors as from HDF5' '
	sw-qkdrift "$FIX/tiny.h5" >out && cut -f4- out >h5 &&
	sw-qkdrift "$FIX/tiny-hf" >out && cut -f4- out >st && test_cmp h5 st
'

test_expect_success 'bad: --drift and a file without a step: exit 65 naming it, the rest go on' '
	test_expect_code 65 sw-qkdrift --drift gqa/*.h5 "$FIX/tiny-hf" >out 2>err &&
	test_one_error sw-qkdrift "$FIX/tiny-hf" && grep -q "no step" err &&
	test_line_count = 9 out
'

test_expect_success 'bad: checkpoints of different models mixed: exit 65 naming the file' '
	"$SYNTH" -H 8 -K 8 --step 500 other.h5 &&
	test_expect_code 65 sw-qkdrift --drift gqa/ckpt-0.h5 gqa/ckpt-1000.h5 other.h5 gqa/ckpt-2500.h5 >out 2>err &&
	test_one_error sw-qkdrift other.h5 &&
	grep -q "n_heads is 8 here, 4 in gqa/ckpt-0.h5" err &&
	test_line_count = 9 out && cut -f5 out | sed 1d | sort -u >n && echo 3 >expect && test_cmp expect n
'

test_expect_success 'bad: multipliers mode differs: another model' '
	test_expect_code 65 sw-qkdrift gqa/ckpt-0.h5 row/ckpt-0.h5 >out 2>err &&
	test_one_error sw-qkdrift row/ckpt-0.h5 && grep -q "multipliers is row here" err
'

test_expect_success 'bad: --drift over one step: exit 65' '
	test_expect_code 65 sw-qkdrift --drift gqa/ckpt-1000.h5 >out 2>err &&
	test_line_count = 1 err && grep -q "1 point, all at step 1000: a drift needs two steps or more" err &&
	test_expect_code 65 sw-qkdrift --drift gqa/ckpt-1000.h5 gqa/ckpt-1000.h5 >out 2>err &&
	grep -q "2 points, all at step 1000" err
'

test_expect_success 'bad: NaN in a q projection: exit 65 naming the file and the head' '
	"$SYNTH" --nan nan.h5 &&
	test_expect_code 65 sw-qkdrift nan.h5 >out 2>err &&
	test_one_error sw-qkdrift nan.h5 && grep -q "layer 0 head 0: .* NaN or Inf" err &&
	test_line_count = 1 out
'

test_expect_success 'bad: missing file 66, bad --check 64, unknown option 64' '
	test_expect_code 66 sw-qkdrift nonexistent.h5 >out 2>err &&
	test_one_error sw-qkdrift nonexistent.h5 &&
	test_expect_code 64 sw-qkdrift --check fast gqa/ckpt-0.h5 >out 2>err &&
	grep -q "^usage: sw-qkdrift" err &&
	test_expect_code 64 sw-qkdrift --role q gqa/ckpt-0.h5 >out 2>err
'

test_expect_success 'closing the pipe early ends it quietly' '
	for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do ls gqa/*.h5; done >many &&
	# pipe-ok: the pipe is what is tested; the status is kept in status
	{ sw-qkdrift <many 2>err; echo $? >status; } | head -n 2 >out &&
	test_closed_quietly status && test_line_count = 2 out && test_line_count = 0 err
'

test_expect_success '--drift on a checkpoint with no step: that one line, no second one' '
	test_expect_code 65 sw-qkdrift --drift "$FIX/tiny-hf" >out 2>err &&
	test_one_error sw-qkdrift "$FIX/tiny-hf" && grep -q "no step in this checkpoint" err
'

test_done
