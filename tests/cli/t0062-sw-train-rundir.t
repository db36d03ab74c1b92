#!/bin/sh
# sw-train's output directory: a directory holding another run is refused
# (exit 73, one line, nothing of it touched) unless --resume continues that
# run or --force replaces it; files of other names are never touched, and
# nothing is removed before the new run has started (sw-train(1), "The
# output directory").
. "$(dirname "$0")/../lib/tap.sh"

CORPUS=$FIX/corpus.txt
SMALL="--batch 4 --seq-len 16 --d-model 16 --n-layers 1 --n-heads 2 --threads 1"

# a listing with every file's checksum, to see that nothing changed
snapshot() {
	(cd "$1" && find . -type f | LC_ALL=C sort | xargs md5sum) >"$2"
}

# the steps column of a trace
trace_steps() {
	sw-trace --series loss "$1" >"$2.tsv" && cut -f1 "$2.tsv" >"$2"
}

test_expect_success 'setup: a run of 20 steps, and a user file beside it' '
	sw-train --data "$CORPUS" --out run $SMALL --steps 20 --ckpt-every 10 >out &&
	echo run/ckpt-000020.h5 >expect && test_cmp expect out &&
	echo "my notes" >run/notes.txt &&
	snapshot run before
'

test_expect_success 'another run into it: exit 73, one line naming the directory, --resume and --force' '
	test_expect_code 73 sw-train --data "$CORPUS" --out run $SMALL --d-model 32 --steps 5 >out 2>err &&
	test_line_count = 0 out &&
	echo "sw-train: run: holds a run: 2 checkpoints (ckpt-000010.h5 to ckpt-000020.h5) and trace.h5; --resume CKPT continues it, --force replaces it" >expect &&
	test_cmp expect err
'

test_expect_success 'after the refusal the old run is byte for byte as it was, nothing added' '
	snapshot run after && test_cmp before after
'

test_expect_success 'a trace alone, or a killed writer'"'"'s temporary, is a run too' '
	mkdir t1 t2 && cp run/trace.h5 t1/ && echo x >t2/ckpt-000003.h5.tmp.123.0 &&
	test_expect_code 73 sw-train --data "$CORPUS" --out t1 $SMALL --steps 2 >out 2>err &&
	grep -q "^sw-train: t1: holds a run: trace.h5; " err &&
	test_expect_code 73 sw-train --data "$CORPUS" --out t2 $SMALL --steps 2 >out 2>err &&
	grep -q "^sw-train: t2: holds a run: 1 temporary file of a killed writer; " err
'

test_expect_success 'a trace named by --trace that exists: exit 73 naming it' '
	test_expect_code 73 sw-train --data "$CORPUS" --out fresh $SMALL --steps 2 --trace run/trace.h5 >out 2>err &&
	test_line_count = 1 err && grep -q "^sw-train: run/trace.h5: the trace of another run is there: " err &&
	! test -e fresh && snapshot run after && test_cmp before after
'

test_expect_success 'an empty directory, or one of other files only, is used as it is' '
	mkdir empty others others/ckpt-000001.h5 &&
	echo keep >others/ckpt-best.h5 && echo keep >others/ckpt-12.h5.bak && echo keep >others/trace.h5.old &&
	snapshot others others.before &&
	sw-train --data "$CORPUS" --out empty $SMALL --steps 4 >/dev/null &&
	sw-train --data "$CORPUS" --out others $SMALL --steps 4 >/dev/null 2>err &&
	test_line_count = 0 err &&
	# exact: the same binary, data and threads twice
	cmp empty/ckpt-000004.h5 others/ckpt-000004.h5 &&
	rm others/ckpt-000004.h5 others/trace.h5 && snapshot others others.after &&
	test_cmp others.before others.after
'

test_expect_success '--force with bad data: refused for the data (65), nothing removed' '
	test_expect_code 65 sw-train --data "$FIX/bad/tokens-count.llmc" --out run $SMALL --force >out 2>err &&
	snapshot run after && test_cmp before after
'

test_expect_success '--force with a checkpoint that cannot be resumed (65): nothing removed' '
	head -c 3000 run/ckpt-000010.h5 >truncated.h5 &&
	test_expect_code 65 sw-train --data "$CORPUS" --out run --resume truncated.h5 --force >out 2>err &&
	snapshot run after && test_cmp before after
'

test_expect_success '--force: the old run replaced as a whole, the user file kept, what went said' '
	cp -r run forced &&
	sw-train --data "$CORPUS" --out forced $SMALL --d-model 32 --steps 30 --ckpt-every 15 --force >out 2>err &&
	echo "sw-train: forced: --force: removed 2 checkpoints (ckpt-000010.h5 to ckpt-000020.h5); the trace is replaced: forced/trace.h5" >expect &&
	test_cmp expect err &&
	ls forced >names && printf "ckpt-000015.h5\nckpt-000030.h5\nnotes.txt\ntrace.h5\n" >expect &&
	test_cmp expect names && echo "my notes" >expect && test_cmp expect forced/notes.txt
'

# exact: the same binary, data and threads twice (checkpoints and trace)
test_expect_success '--force: what it writes is what a run into an empty directory writes' '
	sw-train --data "$CORPUS" --out clean $SMALL --d-model 32 --steps 30 --ckpt-every 15 >/dev/null &&
	cmp clean/ckpt-000015.h5 forced/ckpt-000015.h5 && cmp clean/ckpt-000030.h5 forced/ckpt-000030.h5 &&
	trace_steps clean/trace.h5 a && trace_steps forced/trace.h5 b && test_cmp a b &&
	sw-trace --series loss forced/trace.h5 >b.tsv && cut -f2 b.tsv >b.loss && cut -f2 a.tsv >a.loss && test_cmp a.loss b.loss
'

test_expect_success '--force --trace "": the old trace.h5 goes too' '
	cp -r run notrace &&
	sw-train --data "$CORPUS" --out notrace $SMALL --steps 3 --trace "" --force >out 2>err &&
	echo "sw-train: notrace: --force: removed 2 checkpoints (ckpt-000010.h5 to ckpt-000020.h5) and trace.h5" >expect &&
	test_cmp expect err &&
	ls notrace >names && printf "ckpt-000003.h5\nnotes.txt\n" >expect && test_cmp expect names
'

test_expect_success 'setup: an uninterrupted run of 40 steps, and one stopped after step 20' '
	sw-train --data "$CORPUS" --out full $SMALL --steps 40 --ckpt-every 10 >/dev/null &&
	cp -r full half && rm half/ckpt-000030.h5 half/ckpt-000040.h5 &&
	trace_steps half/trace.h5 steps && printf "step\n10\n20\n30\n40\n" >expect && test_cmp expect steps
'

# exact here and below: a resume against the uninterrupted run, the same
# binary and the same thread count (--threads 1 as in $SMALL: a resume
# takes the thread count from its command line, and another count would
# add the sums in another order)
test_expect_success '--resume in the run'"'"'s own directory: allowed, bit for bit, the trace appended' '
	sw-train --data "$CORPUS" --out half --resume half/ckpt-000020.h5 --ckpt-every 10 --threads 1 >out 2>err &&
	test_line_count = 0 err &&
	cmp full/ckpt-000030.h5 half/ckpt-000030.h5 && cmp full/ckpt-000040.h5 half/ckpt-000040.h5 &&
	cmp full/ckpt-000010.h5 half/ckpt-000010.h5 &&
	trace_steps full/trace.h5 a && trace_steps half/trace.h5 b && test_cmp a b &&
	cut -f2 a.tsv >a.loss && cut -f2 b.tsv >b.loss && test_cmp a.loss b.loss
'

test_expect_success '--resume with checkpoints after its step there: exit 73, nothing touched' '
	snapshot half half.before &&
	test_expect_code 73 sw-train --data "$CORPUS" --out half --resume half/ckpt-000010.h5 >out 2>err &&
	echo "sw-train: half: holds checkpoints after step 10, the one resumed from: 3 checkpoints (ckpt-000020.h5 to ckpt-000040.h5), which would mix with the resumed run'"'"'s; --force removes them" >expect &&
	test_cmp expect err && test_line_count = 0 out &&
	snapshot half half.after && test_cmp half.before half.after
'

# the resumed run checkpoints every 10 steps as the run did (recorded in
# the checkpoint), and says so
test_expect_success '--resume --force: the later checkpoints go, the earlier and the trace stay' '
	sw-train --data "$CORPUS" --out half --resume half/ckpt-000010.h5 --steps 30 --force >out 2>err &&
	echo "sw-train: half: --resume: as ckpt-000010.h5 records: --ckpt-every 10" >expect &&
	echo "sw-train: half: --force: removed 3 checkpoints (ckpt-000020.h5 to ckpt-000040.h5)" >>expect &&
	test_cmp expect err &&
	ls half >names && printf "ckpt-000010.h5\nckpt-000020.h5\nckpt-000030.h5\ntrace.h5\n" >expect &&
	test_cmp expect names &&
	cmp full/ckpt-000010.h5 half/ckpt-000010.h5 &&
	trace_steps half/trace.h5 steps && printf "step\n10\n20\n30\n" >expect && test_cmp expect steps
'

test_expect_success '--resume into another directory holding a run: exit 73; --force replaces it' '
	snapshot run before &&
	test_expect_code 73 sw-train --data "$CORPUS" --out run --resume full/ckpt-000020.h5 >out 2>err &&
	grep -q "^sw-train: run: holds another run than the one full/ckpt-000020.h5 continues: 2 checkpoints" err &&
	test_line_count = 1 err && snapshot run after && test_cmp before after &&
	cp -r run branch &&
	sw-train --data "$CORPUS" --out branch --resume full/ckpt-000020.h5 --force --threads 1 >out 2>err &&
	ls branch >names && printf "ckpt-000030.h5\nckpt-000040.h5\nnotes.txt\ntrace.h5\n" >expect &&
	test_cmp expect names &&
	cmp full/ckpt-000030.h5 branch/ckpt-000030.h5 && cmp full/ckpt-000040.h5 branch/ckpt-000040.h5 &&
	trace_steps branch/trace.h5 steps && printf "step\n30\n40\n" >expect && test_cmp expect steps
'

test_expect_success '--resume into a new directory: a new trace, beginning after the step' '
	sw-train --data "$CORPUS" --out new --resume full/ckpt-000020.h5 --threads 1 >out 2>err &&
	echo "sw-train: new: --resume: as ckpt-000020.h5 records: --ckpt-every 10" >expect &&
	test_cmp expect err && echo new/ckpt-000040.h5 >expect && test_cmp expect out &&
	cmp full/ckpt-000030.h5 new/ckpt-000030.h5 && cmp full/ckpt-000040.h5 new/ckpt-000040.h5 &&
	trace_steps new/trace.h5 steps && printf "step\n30\n40\n" >expect && test_cmp expect steps &&
	ls full >names && printf "ckpt-000010.h5\nckpt-000020.h5\nckpt-000030.h5\nckpt-000040.h5\ntrace.h5\n" >expect &&
	test_cmp expect names
'

test_done
