#!/bin/sh
# sw-train --log: a progress line on stderr per evaluation and checkpoint
# (and at every tenth of a run that does neither), when stderr is a file;
# without --log nothing on a stderr that is not a terminal.
. "$(dirname "$0")/../lib/tap.sh"

CORPUS=$FIX/corpus.txt
SMALL="--batch 4 --seq-len 16 --d-model 16 --n-layers 1 --n-heads 2 --threads 1"

test_expect_success 'no --log, stderr a file: nothing on it' '
	sw-train --data "$CORPUS" --out quiet $SMALL --steps 20 --eval-every 10 --ckpt-every 10 >out 2>err &&
	test_line_count = 0 err
'

test_expect_success '--log: a line per evaluation and checkpoint, and at the end' '
	sw-train --data "$CORPUS" --out run $SMALL --steps 40 --eval-every 10 --ckpt-every 20 \
		--trace-every 10 --log >out 2>err &&
	test_line_count = 4 err &&
	sed "s/  .*//" err >steps &&
	printf "sw-train: run: step %s/40\n" 10 20 30 40 >expect && test_cmp expect steps &&
	grep -c "  val [0-9.]*  lr [0-9.e-]*  [0-9]* tok/s  elapsed [0-9hms]*  ETA [0-9hms]*" err >n &&
	echo 4 >expect && test_cmp expect n &&
	sed -n "s/.*  \(ckpt-[0-9]*\.h5\)\$/\1/p" err >ckpts &&
	printf "ckpt-000020.h5\nckpt-000040.h5\n" >expect && test_cmp expect ckpts
'

# exact: the same floats of one run, printed by the trainer and by sw-trace
test_expect_success '--log: the loss and val printed are the trace'"'"'s, to 4 decimals' '
	sed -n "s/.*step \([0-9]*\)\/40  loss \([0-9.]*\)  val \([0-9.]*\) .*/\1 \2 \3/p" err >printed &&
	sw-trace --series loss,val_loss run/trace.h5 >trace.tsv &&
	awk -F"\t" "NR > 1 { printf \"%d %.4f %.4f\n\", \$1, \$2, \$3 }" trace.tsv >expect &&
	test_cmp expect printed
'

test_expect_success '--log, no evaluation and no checkpoints on the way: every tenth of the steps' '
	sw-train --data "$CORPUS" --out tenth $SMALL --steps 30 --eval-every 0 --log >out 2>err &&
	sed "s/  .*//" err >steps &&
	printf "sw-train: tenth: step %s/30\n" 3 6 9 12 15 18 21 24 27 30 >expect && test_cmp expect steps
'

test_expect_success '--log on a resumed run: lines after the step it resumed from' '
	sw-train --data "$CORPUS" --out run --resume run/ckpt-000040.h5 --steps 60 --ckpt-every 10 \
		--eval-every 0 --log >out 2>err &&
	sed "s/  .*//" err >steps &&
	printf "sw-train: run: step %s/60\n" 50 60 >expect && test_cmp expect steps
'

test_done
