#!/bin/sh
# sw-sweep: a 2x2 grid run here end to end (GNU parallel and xargs), the
# sweep file and commands, resumed after a kill (the cut run continues bit
# for bit), another grid in the same directory refused, and the --slurm
# script: shellcheck-clean, one array task per run not done, each task
# running its run (through a stand-in srun) to the same result.
. "$(dirname "$0")/../lib/tap.sh"

CORPUS=$FIX/corpus.txt
TRAIN="--data $CORPUS --d-model 16 --n-layers 1 --n-heads 2 --seq-len 16 --ckpt-every 32 --eval-every 32 --threads 1"
GRID="--lr 3e-3,1e-2 --batch 4,8 --tokens 8192"
LONG="--lr 3e-3 --batch 4,8 --tokens 131072"

test_expect_success 'a 2x2 grid run with xargs -P: every run done, its sweep file' '
	sw-sweep --out sw $GRID -j 2 --runner xargs -- $TRAIN >out &&
	printf "run\tstate\tcheckpoint\n" >expect &&
	for r in lr3e-3-b4-t8192:128 lr3e-3-b8-t8192:64 lr1e-2-b4-t8192:128 lr1e-2-b8-t8192:64; do
		n=${r%:*} s=${r#*:} &&
		printf "sw/%s\tdone\tsw/%s/ckpt-%06d.h5\n" $n $n $s >>expect || return 1
	done &&
	test_cmp expect out &&
	printf "index\trun\tlr\tbatch\ttokens\tsteps\tdata\n" >expect &&
	printf "0\tlr3e-3-b4-t8192\t3e-3\t4\t8192\t128\t%s\n1\tlr3e-3-b8-t8192\t3e-3\t8\t8192\t64\t%s\n" \
		$CORPUS $CORPUS >>expect &&
	printf "2\tlr1e-2-b4-t8192\t1e-2\t4\t8192\t128\t%s\n3\tlr1e-2-b8-t8192\t1e-2\t8\t8192\t64\t%s\n" \
		$CORPUS $CORPUS >>expect &&
	test_cmp expect sw/sweep.tsv
'

test_expect_success 'each run is the sw-train command its point says (lr, batch, steps)' '
	sw-trace --series lr,tokens sw/lr1e-2-b8-t8192/trace.h5 >t &&
	tail -n 1 t | cut -f1,3 >last && printf "64\t8192\n" >expect && test_cmp expect last &&
	# exact: lr_max is the 1e-2 given, stored as is
	h5dump -a /optim/lr_max sw/lr1e-2-b8-t8192/ckpt-000064.h5 >a && grep -q "(0): 0.01" a &&
	h5dump -a /optim/batch_size sw/lr1e-2-b8-t8192/ckpt-000064.h5 >a && grep -q "(0): 8\$" a
'

test_expect_success 'the same grid again: nothing to run, the same table' '
	sw-sweep --out sw $GRID -- $TRAIN >again &&
	test_cmp out again
'

test_expect_success '--checkpoints: every checkpoint, for sw-transfer' '
	sw-sweep --checkpoints sw >ckpts &&
	test_line_count = 12 ckpts &&
	xargs sw-transfer <ckpts >transfer &&
	test_line_count = 5 transfer
'

test_expect_success 'another grid in the same directory: refused, exit 73' '
	test_expect_code 73 sw-sweep --out sw --lr 1e-3 -- $TRAIN >out2 2>err &&
	test_one_error sw-sweep sw
'

if parallel --version >/dev/null 2>&1; then
test_expect_success 'GNU parallel as the runner: the same runs, bit for bit' '
	sw-sweep --out swp $GRID -j 2 --runner parallel -- $TRAIN >outp &&
	sed "s|sw/|swp/|g" out >expect && test_cmp expect outp &&
	# exact: the same sw-train, --threads 1, on the same data twice
	h5dump -g /params sw/lr1e-2-b4-t8192/ckpt-000128.h5 | sed 1d >a &&
	h5dump -g /params swp/lr1e-2-b4-t8192/ckpt-000128.h5 | sed 1d >b && test_cmp a b
'
else
test_skip 'GNU parallel as the runner' 'GNU parallel not installed'
fi

test_expect_success 'killed in the middle, run again: the cut run resumes, bit for bit' '
	setsid sw-sweep --out cut $LONG -j 1 --runner xargs -- $TRAIN >/dev/null 2>&1 &
	job=$! &&
	i=0 && while ! test -e cut/lr3e-3-b4-t131072/ckpt-000064.h5 && test $i -lt 600; do
		sleep 0.05; i=$((i + 1)); done &&
	kill -9 -$job && { wait $job; echo $? >status; } && test_status 137 status &&
	sw-sweep --status cut >st &&
	grep -q "lr3e-3-b4-t131072	partial" st &&
	sw-sweep --out cut $LONG -j 1 -- $TRAIN >done &&
	test_line_count = 3 done && grep -c "	done	" done >n && echo 2 >expect && test_cmp expect n &&
	sw-train $TRAIN --lr 3e-3 --batch 4 --steps 2048 --ckpt-every 512 --out whole >o &&
	# exact: a resumed run against an uninterrupted one, the same binary, --threads 1
	h5dump -g /params whole/ckpt-002048.h5 | sed 1d >a &&
	h5dump -g /params cut/lr3e-3-b4-t131072/ckpt-002048.h5 | sed 1d >b && test_cmp a b
'

test_expect_success '--slurm: an array over the runs not done; shellcheck-clean' '
	sw-sweep --out sl $GRID --slurm job.sh --sbatch --time=0:10:00 -- $TRAIN >st &&
	grep -c "	new	" st >n && echo 4 >expect && test_cmp expect n &&
	test -x job.sh &&
	grep "^#SBATCH --array=" job.sh >a && echo "#SBATCH --array=0,1,2,3" >expect && test_cmp expect a &&
	grep -c "^#SBATCH --time=0:10:00\$" job.sh >n && echo 1 >expect && test_cmp expect n &&
	shellcheck job.sh &&
	# as sbatch reads them: #SBATCH lines up to the first command, each
	# option one blank-separated word (no quoting), the log in the sweep
	awk "/^#SBATCH/ { if (NF != 2) bad = 1; print \$2; next } /^#/ || !NF { next } { exit }
		END { exit bad }" job.sh >directives &&
	printf "%s\n" --job-name=sw-sweep "--output=$(cd sl && pwd -P)/slurm-%A_%a.out" \
		--array=0,1,2,3 --time=0:10:00 >expect && test_cmp expect directives
'

test_expect_success '--slurm: each array task, srun standing in, runs its run' '
	mkdir bin && printf "#!/bin/sh\nexec \"\$@\"\n" >bin/srun && chmod +x bin/srun &&
	for t in 0 1 2 3; do
		PATH=$PWD/bin:$PATH SLURM_ARRAY_TASK_ID=$t sh job.sh || return 1
	done &&
	sw-sweep --status sl >st && sed "s|sl/|sw/|g" st >st2 && test_cmp out st2 &&
	# exact: the same sw-train, --threads 1, on the same data twice
	h5dump -g /params sl/lr3e-3-b8-t8192/ckpt-000064.h5 | sed 1d >a &&
	h5dump -g /params sw/lr3e-3-b8-t8192/ckpt-000064.h5 | sed 1d >b && test_cmp a b
'

test_expect_success '--slurm with a run done: the array lists the others' '
	rm -r sl/lr1e-2-b4-t8192 sl/lr3e-3-b4-t8192 &&
	sw-sweep --out sl $GRID --slurm job2.sh -- $TRAIN >st &&
	grep "^#SBATCH --array=" job2.sh >a && echo "#SBATCH --array=0,2" >expect && test_cmp expect a &&
	shellcheck job2.sh
'

test_expect_success 'usage errors: exit 64' '
	test_expect_code 64 sw-sweep --out x --lr 1e-3,abc -- $TRAIN 2>err &&
	test_expect_code 64 sw-sweep --out x --lr 1e-3 -- $TRAIN --lr 2e-3 2>err &&
	test_expect_code 64 sw-sweep --out x --lr 1e-3 -- $TRAIN --out y 2>err &&
	test_expect_code 64 sw-sweep --out x --tokens 10 -- $TRAIN 2>err &&
	! test -e x
'

test_expect_success 'without --tokens: --steps after -- is the run length, and a finished run is done' '
	sw-sweep --out plain --lr 1e-3 -- $TRAIN --steps 5 --ckpt-every 2 >out3 &&
	printf "run\tstate\tcheckpoint\nplain/lr1e-3\tdone\tplain/lr1e-3/ckpt-000005.h5\n" >expect &&
	test_cmp expect out3 &&
	printf "index\trun\tlr\tsteps\tdata\n0\tlr1e-3\t1e-3\t5\t%s\n" $CORPUS >expect &&
	test_cmp expect plain/sweep.tsv &&
	sw-sweep --status plain >status && test_cmp out3 status &&
	sw-sweep --status plain --json >status.json &&
	printf "%s\n" "{\"run\": \"plain/lr1e-3\", \"state\": \"done\", \"checkpoint\": \"plain/lr1e-3/ckpt-000005.h5\"}" >expect &&
	test_cmp expect status.json &&
	sw-sweep --out plain --lr 1e-3 -- $TRAIN --steps 5 --ckpt-every 2 >again3 && test_cmp out3 again3 &&
	test_expect_code 64 sw-sweep --out bad --lr 1e-3 -- $TRAIN --steps 0 2>err &&
	grep "^sw-sweep: --steps 0: a run of a sweep makes at least one step\$" err && test ! -e bad
'

test_expect_success 'options checked before anything is made: newlines, a path --slurm cannot quote' '
	nl=$(printf "nl\nx") &&
	test_expect_code 64 sw-sweep --out "$nl" --lr 1e-3 -- $TRAIN >out 2>err &&
	grep -q "^sw-sweep: --out: the directory.s name holds a newline\$" err && test ! -e nl &&
	opt=$(printf -- "--time=1\nx") &&
	test_expect_code 64 sw-sweep --out s1 --slurm s1.sh --sbatch "$opt" --lr 1e-3 -- $TRAIN >out 2>err &&
	grep -q "^sw-sweep: --sbatch: option 1 holds a newline\$" err && test ! -e s1 && test ! -e s1.sh &&
	for d in "a b" "q\"x" "s'"'"'q"; do
		test_expect_code 64 sw-sweep --out "$d" --slurm s2.sh --lr 1e-3 -- $TRAIN >out 2>err &&
		grep -q "^sw-sweep: --slurm: the sweep.s path holds a blank, a quote or a backslash" err &&
		test ! -e "$d" && test ! -e s2.sh || exit 1
	done
'

# each line stamped with the seconds since its process began: the sweep's
# for the first, each run's own (its time) for the others
test_expect_success 'the runs to do, then each run as it finishes, on stderr; none with --quiet' '
	for o in --log ""; do
		rm -rf logged &&
		sw-sweep --out logged --lr 1e-3,2e-3 -j 2 $o -- $TRAIN --steps 2 >out 2>err &&
		grep -q "^sw-sweep: \[[0-9]* s\] logged: 2 of 2 runs to do, 2 at a time\$" err &&
		grep -q "^sw-sweep: \[[0-9]* s\] logged/lr1e-3: finished\$" err &&
		grep -q "^sw-sweep: \[[0-9]* s\] logged/lr2e-3: finished\$" err &&
		test_line_count = 3 err || exit 1
	done &&
	sw-sweep --out quiet --lr 1e-3 --quiet -- $TRAIN --steps 2 >out 2>err && test_line_count = 0 err
'

test_expect_success 'each run logs its standard error in DIR/RUN.log; a failure says its last line and the log, --quiet or not' '
	sw-sweep --out logs --lr 1e-3 -- $TRAIN --steps 2 --log >out 2>err &&
	grep -q "^sw-train: logs/lr1e-3: step 2/2 " logs/lr1e-3.log &&
	! grep -q "^sw-train:" err &&
	for o in "" --quiet; do
		rm -rf bad &&
		test_expect_code 70 sw-sweep --out bad --lr 1e-3 $o -- $TRAIN --steps 2 --data nosuch.txt >out 2>err &&
		echo "sw-train: nosuch.txt: No such file or directory" >expect &&
		test_cmp expect bad/lr1e-3.log &&
		grep -q "^sw-sweep: bad/lr1e-3: failed (exit 66): sw-train: nosuch.txt: No such file or directory; its log: bad/lr1e-3.log\$" err || exit 1
	done
'

if command -v script >/dev/null 2>&1; then
	test_expect_success 'on a terminal (script): each run says when it ends, without --log' '
		script -qec "sw-sweep --out tty --lr 1e-3 -- $TRAIN --steps 2" /dev/null </dev/null >typescript 2>&1 &&
		grep -q "sw-sweep: \[[0-9]* s\] tty/lr1e-3: finished" typescript &&
		grep -q "sw-sweep: \[[0-9]* s\] tty: 1 of 1 runs to do" typescript
	'
else
	test_skip 'on a terminal: each run says when it ends' 'script (util-linux) not installed'
fi

test_done
