#!/bin/sh
# sw-transfer on traces. A small sw-train sweep (lr 0.003, 0.01, 0.03 x
# batch 4, 8) with a checkpoint, an evaluation and a trace row at four
# horizons (1024 to 4096 tokens): the traces give the runs the checkpoints
# give, to the digit (the trainer logs val_loss, tokens, out_norm and
# out_norm_folded computed as from its checkpoint, and /optim lr_max and
# batch_size), so every table, --summary, --refine and --check is the
# same from either. A sweep directory reads each run's trace, or its
# checkpoints where it has none. Synthetic traces (tests/unit/mktrace -t)
# give known numbers: a run at each evaluation step, none at 0 tokens,
# no folded norm in a trace that has none.
. "$(dirname "$0")/../lib/tap.sh"

MKTRACE=$SW_BIN/../tests/unit/mktrace
TINY="--d-model 16 --seq-len 16 --n-layers 1 --n-heads 2 --threads 1"

test_expect_success 'setup: the sweep, six runs with checkpoints and trace rows at four horizons' '
	mkdir sweep &&
	for lr in 0.003 0.01 0.03; do for b in 4 8; do
		s=$((4096 / (b * 16))) &&
		sw-train --data "$FIX/corpus.txt" --out sweep/lr$lr-b$b $TINY --batch $b --lr $lr \
			--steps $s --ckpt-every $((s / 4)) --eval-every $((s / 4)) --trace-every $((s / 4)) \
			>/dev/null || exit 1
	done; done &&
	ls sweep/*/ckpt-*.h5 >ckpts && test_line_count = 24 ckpts &&
	ls sweep/*/trace.h5 >traces && test_line_count = 6 traces
'

# same_but_file CKPT TRACE: two sw-transfer outputs equal but for their
# file column (column FILECOL)
same_but_file() {
	cut -f"$3" --complement "$1" >expect && cut -f"$3" --complement "$2" >got && test_cmp expect got
}

# exact, here and in the next tests: the trainer logs in its trace what a
# checkpoint stores (val_loss, tokens, lr_max, batch_size: copies) and the
# output norms by the function sw-norms and sw-transfer run on a checkpoint
# (norms_output_head: each row's sum of squares on one thread, so any
# thread count gives the same bits), on the same machine
test_expect_success 'the optimum of each horizon: the same from the traces as from the checkpoints' '
	sw-transfer $(cat ckpts) >ckpt.tsv && sw-transfer $(cat traces) >trace.tsv &&
	test_line_count = 5 trace.tsv && same_but_file ckpt.tsv trace.tsv 14 &&
	cut -f3,4 trace.tsv | sed 1d | sort -u >runs && printf "6\tval_loss\n" >expect && test_cmp expect runs &&
	cut -f14 trace.tsv | sed 1d | sed "s,/trace.h5\$,," >from-trace &&
	cut -f14 ckpt.tsv | sed 1d | sed "s,/ckpt-[0-9]*.h5\$,," >from-ckpt && test_cmp from-ckpt from-trace
'

test_expect_success '--refine, --summary, --table: the same from the traces' '
	sw-transfer --refine $(cat ckpts) >ckpt.tsv && sw-transfer --refine $(cat traces) >trace.tsv &&
	same_but_file ckpt.tsv trace.tsv 14 &&
	sw-transfer --summary $(cat ckpts) >ckpt.tsv && sw-transfer --summary $(cat traces) >trace.tsv &&
	test_line_count = 3 trace.tsv && test_cmp ckpt.tsv trace.tsv &&
	sw-transfer --table $(cat ckpts) >ckpt.tsv && sw-transfer --table $(cat traces) >trace.tsv &&
	test_line_count = 25 trace.tsv && same_but_file ckpt.tsv trace.tsv 1
'

test_expect_success 'out_norm_folded is in the trace and the table, and is sw-norms lm_head_folded' '
	sw-transfer --table $(cat traces) >trace.tsv &&
	awk -F"\t" "NR > 1 && !(\$9 > 0) { bad = 1 } END { exit bad }" trace.tsv &&
	sw-norms --role lm_head sweep/lr0.01-b8/ckpt-000008.h5 >norms.tsv &&
	awk -F"\t" "NR > 1 { print \$10 }" norms.tsv >expect &&
	sw-trace --series out_norm,out_norm_folded sweep/lr0.01-b8/trace.h5 >series.tsv &&
	awk -F"\t" "\$1 == 8 { printf \"%.9g\n%.9g\n\", \$2, \$3 }" series.tsv >got &&
	test_line_count = 2 got && test_cmp expect got
'

test_expect_success 'the norms the trace logs are those of the head a checkpoint stores (multipliers, tied head)' '
	sw-train --data "$FIX/corpus.txt" --out mult $TINY --batch 4 --steps 8 --ckpt-every 4 --trace-every 4 \
		--multipliers row --mult-wd 0 >/dev/null &&
	sw-train --data "$FIX/corpus.txt" --out tied $TINY --batch 4 --steps 8 --ckpt-every 4 --trace-every 4 \
		--tie >/dev/null &&
	for run in mult tied; do
		sw-trace --series out_norm,out_norm_folded $run/trace.h5 >series.tsv &&
		for s in 4 8; do
			sw-norms --role lm_head $run/ckpt-00000$s.h5 >norms.tsv &&
			awk -F"\t" "NR > 1 { print \$10 }" norms.tsv >expect &&
			awk -F"\t" -v s=$s "\$1 == s { printf \"%.9g\n%.9g\n\", \$2, \$3 }" series.tsv >got &&
			test_line_count = 2 got && test_cmp expect got || exit 1
		done
	done
'

# exact: the same binary on the same files
test_expect_success 'a sweep directory: the runs traces' '
	sw-transfer $(cat traces) >expect && sw-transfer sweep >got && test_cmp expect got &&
	sw-transfer --table sweep/ >got && sw-transfer --table $(cat traces) >expect && test_cmp expect got &&
	sw-transfer --table sweep/lr0.01-b4 >got && test_line_count = 5 got &&
	cut -f1 got | sed 1d | sort -u >file && echo sweep/lr0.01-b4/trace.h5 >expect && test_cmp expect file
'

test_expect_success 'a sweep directory: a run without a trace is read by its checkpoints' '
	cp -R sweep mixed && rm mixed/lr0.01-b4/trace.h5 &&
	sw-transfer --table mixed >got &&
	test_line_count = 25 got &&
	awk -F"\t" "NR > 1 { print \$1 }" got | sort >files &&
	grep -c "^mixed/lr0.01-b4/ckpt-0000[0-9][0-9].h5\$" files >n && echo 4 >expect && test_cmp expect n &&
	grep -c "/trace.h5\$" files >n && echo 20 >expect && test_cmp expect n &&
	sw-transfer --table $(cat traces) >expect && same_but_file expect got 1
'

test_expect_success 'a trace is told by its content: named ckpt-*.h5 in a directory, it is read as a trace' '
	mkdir -p named/run && cp sweep/lr0.03-b8/trace.h5 named/run/ckpt-000999.h5 &&
	sw-transfer --table named >got && test_line_count = 5 got &&
	sw-transfer --table sweep/lr0.03-b8/trace.h5 >expect && same_but_file expect got 1
'

test_expect_success 'only evaluation steps are runs (a trace row every 4 steps, an evaluation every 8)' '
	sw-train --data "$FIX/corpus.txt" --out sparse $TINY --batch 4 --steps 16 --trace-every 4 \
		--eval-every 8 --ckpt-every 8 >/dev/null &&
	sw-trace --series tokens,val_loss sparse/trace.h5 >series.tsv && test_line_count = 5 series.tsv &&
	sw-transfer --table sparse/trace.h5 >trace.tsv &&
	cut -f4 trace.tsv >tokens && printf "tokens\n512\n1024\n" >expect && test_cmp expect tokens &&
	sw-transfer --table sparse/ckpt-*.h5 >ckpt.tsv && same_but_file ckpt.tsv trace.tsv 1
'

test_expect_success '--check: a wide tolerance passes, none fails, naming the traces' '
	sw-transfer --summary $(cat traces) >summary &&
	sw-transfer --check spread=100 $(cat traces) >out 2>err && test_line_count = 0 err &&
	sw-transfer --check spread=100 --folded $(cat traces) >out 2>err && test_line_count = 0 err &&
	awk -F"\t" "NR == 2 { exit !(\$5 > 0) }" summary &&
	test_expect_code 1 sw-transfer --check spread=0 $(cat traces) >out 2>err &&
	test_line_count = 1 err &&
	grep -q "^sw-transfer: check: the optimal output norms of 4 groups span .*/trace.h5" err
'

# mktrace writes binary fractions, the same on every machine, which print
# alike; log2_out_norm is sw-transfer's log2() against awk's
# log(x)/log(2), which may differ in the last bit and so round apart in
# the 9th digit printed: 1e-8 relative there (the other cells are equal)
test_expect_success 'a synthetic trace (mktrace -t): a run at each evaluation step after 0 tokens, its numbers' '
	"$MKTRACE" -t -n 10 synth.h5 >/dev/null &&
	sw-transfer --table synth.h5 >got &&
	awk "BEGIN { OFS = \"\t\"
		print \"file\", \"lr\", \"batch\", \"tokens\", \"d_model\", \"loss\", \"loss_kind\", \"out_norm\", \"out_norm_folded\", \"log2_out_norm\", \"optimal\"
		for (r = 3; r <= 9; r += 3) printf \"synth.h5\t0.00390625\t16\t%.0f\t16\t%.9g\tval_loss\t%.9g\t\t%.17g\t1\n\",
			123456789012 * r, 8.5 - r / 4, 4 + r / 8, log(4 + r / 8) / log(2) }" >expect &&
	numbers_close 1e-8 expect got
'

test_expect_success 'a trace without out_norm_folded (an older sw-train): the folded norm empty, --check --folded an error' '
	sw-transfer synth.h5 >got 2>err && test_line_count = 0 err &&
	cut -f9,11 got | sed 1d | sort -u >folded && printf "\t\n" >expect && test_cmp expect folded &&
	test_expect_code 65 sw-transfer --check spread=1 --folded synth.h5 >out 2>err &&
	grep -q "no folded norm" err
'

test_expect_success 'bad: a trace of an older sw-train (no /optim): one line naming it, exit 65, the rest go on' '
	"$MKTRACE" -n 4 old.h5 >/dev/null &&
	test_expect_code 65 sw-transfer old.h5 $(cat traces) >out 2>err &&
	test_one_error sw-transfer old.h5 && grep -q "no /optim lr_max" err &&
	# exact: the same binary on the same traces
	sw-transfer $(cat traces) >expect && test_cmp expect out
'

test_expect_success 'bad: a trace without val_loss rows: exit 65 saying why' '
	sw-train --data "$FIX/corpus.txt" --out noeval $TINY --batch 4 --steps 8 --eval-every 0 >/dev/null &&
	test_expect_code 65 sw-transfer noeval/trace.h5 >out 2>err &&
	grep -q "^sw-transfer: noeval/trace.h5: no row has a validation loss" err
'

test_expect_success 'bad: a trace without /config: exit 65' '
	"$MKTRACE" -C -t -n 4 noconfig.h5 >/dev/null &&
	test_expect_code 65 sw-transfer noconfig.h5 >out 2>err &&
	test_one_error sw-transfer noconfig.h5 && grep -q "no /config" err
'

test_expect_success 'setup: the outside files' '
	for i in $(seq 300); do echo "SWOUTSIDE-$i"; done >outside.txt &&
	cp "$FIX/tiny.h5" outside.h5
'
while IFS='|' read -r name how pattern; do
	test_expect_success "hostile: $name: exit 65, '$pattern'" "
		\"\$SW_BIN/../tests/unit/mkhostile-h5\" $how sweep/lr0.01-b4/trace.h5 $name.h5 &&
		test_expect_code 65 timeout 10 sw-transfer $name.h5 >out 2>err &&
		grep -q \"^sw-transfer: $name.h5: .*$pattern\" err &&
		test_line_count = 1 out && ! grep -q SWOUTSIDE out err
	"
done <<'CASES'
optim-elink|elink /optim outside.h5|/optim: external link: refused
val-soft|soft /series/val_loss|/series/val_loss: soft link: refused
norm-external|external /series/out_norm outside.txt|/series/out_norm: external storage: refused
tokens-vds|vds /series/tokens missing.h5|/series/tokens: virtual dataset: refused
folded-unwritten|unwritten /series/out_norm_folded|/series/out_norm_folded: never written
CASES

if ! command -v gnuplot >/dev/null 2>&1; then
	test_skip 'sw-plot transfer and transfer-fits from traces' 'gnuplot not installed'
	test_done
fi

test_expect_success 'sw-plot transfer and transfer-fits draw the trace-based tables' '
	sw-transfer --table sweep >t.tsv && sw-transfer sweep >g.tsv &&
	sw-plot transfer t.tsv -o t.png 2>err && test_line_count = 0 err &&
	sw-plot transfer-fits g.tsv -o g.svg 2>err && test_line_count = 0 err &&
	head -c 8 t.png | od -A n -t x1 >sig && grep -q "89 50 4e 47 0d 0a 1a 0a" sig &&
	grep -q "</svg>" g.svg
'

test_done
