#!/bin/sh
# [hostile3] D, B and M: sw-train's run directory from others, and beside
# a live run (sw-train(1), "The output directory"). A second sw-train on
# the directory of a live run is refused before anything is read or
# removed (73, one line: another process writes this run; the lock is
# flock(2) on the directory, held for the whole run, gone when its
# process dies, kill -9 included); readers are not blocked; the live run
# finishes as if alone. Nothing is written through a symbolic link: a
# trace path that is a link (dangling or not), a file of two names or no
# regular file is refused (73), force or not, the link's target outside
# the run directory unchanged (checksums before and after); --force
# removes links, never their targets. A --trace file that is no trace is
# refused saying what it is (73).
. "$(dirname "$0")/../lib/tap.sh"

CORPUS=$FIX/corpus.txt
SMALL="--batch 4 --seq-len 16 --d-model 16 --n-layers 1 --n-heads 2 --threads 1"
# the live run: 60 steps of about 30 ms, a checkpoint after each
LIVE="--d-model 64 --n-layers 2 --seq-len 32 --batch 8 --n-heads 2 --threads 1 --steps 60 \
	--ckpt-every 1 --eval-every 0"

# a listing of every file and link with its checksum (a link's target's)
snapshot() {
	(cd "$1" && find . \( -type f -o -type l \) | LC_ALL=C sort | xargs md5sum) >"$2"
}

# wait_done NAME: until start_run's NAME.rc is there (30 s at most: the
# live run's 60 steps take 2 s alone, more beside a whole suite)
wait_done() {
	wait_lines 1 "$1.rc" || wait_lines 1 "$1.rc" || wait_lines 1 "$1.rc"
}

# start_run NAME ARGS...: sw-train ARGS --log in the background (a line
# on NAME.err after each checkpoint), its pid in NAME.pid, its exit
# status in NAME.rc once it ends
start_run() {
	name=$1
	shift
	{
		sw-train "$@" --log >"$name.out" 2>"$name.err" &
		echo $! >"$name.pid"
		wait $!
		echo $? >"$name.rc.tmp" && mv "$name.rc.tmp" "$name.rc"
	} >/dev/null 2>&1 &
	wait_lines 1 "$name.pid"
}

LOCKED="another process writes this run (it holds the directory's lock): nothing was changed; wait for it to end, or choose another --out"

# ---- D: the lock ----------------------------------------------------------

test_expect_success 'setup: a live run, stopped mid-way (SIGSTOP), a watchdog to end it' '
	# the watchdog: in 120 s the live run goes on and is killed, unless
	# its sleep (watchdog.pid) is killed first
	{ sleep 120 & echo $! >watchdog.pid; wait $! && kill -CONT "$(cat live.pid)" && kill "$(cat live.pid)"; } \
		>/dev/null 2>&1 &
	start_run live --data "$CORPUS" --out live $LIVE &&
	wait_lines 3 live.err && kill -STOP "$(cat live.pid)" &&
	! test -e live/ckpt-000060.h5 && ! test -e live.rc &&
	snapshot live live.before && grep -q "ckpt-000003.h5$" live.before && grep -q "trace.h5$" live.before
'

test_expect_success '--force --trace other.h5 beside it: 73, one line, nothing of it removed' '
	test_expect_code 73 sw-train --data "$CORPUS" --out live $SMALL --steps 2 --force --trace other.h5 \
		>out 2>err &&
	echo "sw-train: live: $LOCKED" >expect && test_cmp expect err && test_line_count = 0 out &&
	! test -e other.h5 && snapshot live after && test_cmp live.before after
'

test_expect_success '--trace "" beside it: 73, one line; plain --force: 73' '
	test_expect_code 73 sw-train --data "$CORPUS" --out live $SMALL --steps 2 --trace "" >out 2>err &&
	echo "sw-train: live: $LOCKED" >expect && test_cmp expect err &&
	test_expect_code 73 sw-train --data "$CORPUS" --out live $SMALL --steps 2 --force >out 2>err &&
	test_cmp expect err && snapshot live after && test_cmp live.before after
'

test_expect_success '--resume of its own checkpoint --force beside it: 73, one line' '
	test_expect_code 73 sw-train --data "$CORPUS" --out live --resume live/ckpt-000002.h5 --force \
		>out 2>err &&
	echo "sw-train: live: $LOCKED" >expect && test_cmp expect err &&
	snapshot live after && test_cmp live.before after
'

test_expect_success 'its trace named from another --out, --force: 73 (the trace'"'"'s own lock), one line' '
	test_expect_code 73 sw-train --data "$CORPUS" --out elsewhere $SMALL --steps 2 --trace live/trace.h5 \
		--force >out 2>err &&
	echo "sw-train: live/trace.h5: another process is writing this trace (it holds the writer'"'"'s lock)" >expect &&
	test_cmp expect err && snapshot live after && test_cmp live.before after
'

test_expect_success 'readers are not blocked: sw-trace and sw-ls read the live run' '
	sw-trace --series loss live/trace.h5 >rows && test_line_count -ge 1 rows &&
	sw-ls live/ckpt-000001.h5 >ls && test_line_count -ge 2 ls &&
	snapshot live after && test_cmp live.before after
'

test_expect_success 'let go, the live run finishes: exit 0, every checkpoint, as a run left alone' '
	kill -CONT "$(cat live.pid)" && wait_done live && echo 0 >expect && test_cmp expect live.rc &&
	echo live/ckpt-000060.h5 >expect && test_cmp expect live.out &&
	ls live >names && grep -c "^ckpt-0000[0-9][0-9]\.h5$" names >n && echo 60 >expect && test_cmp expect n &&
	grep -v "^ckpt-" names >other && echo trace.h5 >expect && test_cmp expect other &&
	sw-trace --series loss live/trace.h5 >rows && cut -f1 rows >steps &&
	printf "step\n10\n20\n30\n40\n50\n60\n" >expect && test_cmp expect steps &&
	# exact: the same binary, data and threads, undisturbed
	sw-train --data "$CORPUS" --out alone $LIVE >/dev/null &&
	cmp alone/ckpt-000060.h5 live/ckpt-000060.h5 && cmp alone/ckpt-000030.h5 live/ckpt-000030.h5
'

test_expect_success 'the live run is done, its watchdog ended' '
	wait_lines 1 watchdog.pid && kill "$(cat watchdog.pid)" && wait_done live
'

test_expect_success 'kill -9 drops the lock: the killed run resumes in its directory, exit 0' '
	start_run killed --data "$CORPUS" --out killed $LIVE &&
	wait_lines 3 killed.err && kill -9 "$(cat killed.pid)" && wait_done killed &&
	echo 137 >expect && test_cmp expect killed.rc &&
	ls killed >names && grep "^ckpt-[0-9]*\.h5$" names >ckpts && last=$(tail -n 1 ckpts) &&
	sw-train --data "$CORPUS" --out killed --resume "killed/$last" --threads 1 >out 2>err &&
	echo killed/ckpt-000060.h5 >expect && test_cmp expect out &&
	echo "sw-train: killed: --resume: as $last records: --ckpt-every 1 --eval-every 0" >expect &&
	test_cmp expect err
'

if command -v flock >/dev/null 2>&1; then
	test_expect_success 'the lock is flock(2) on the directory: any holder blocks a writer (flock(1))' '
		mkdir held &&
		test_expect_code 73 flock held sw-train --data "$CORPUS" --out held $SMALL --steps 2 --force >out 2>err &&
		echo "sw-train: held: $LOCKED" >expect && test_cmp expect err &&
		ls held >names && test_line_count = 0 names &&
		sw-train --data "$CORPUS" --out held $SMALL --steps 2 >out && echo held/ckpt-000002.h5 >expect &&
		test_cmp expect out
	'
else
	test_skip 'the lock is flock(2) on the directory: any holder blocks a writer (flock(1))' 'no flock(1)'
fi

sw-train --version >version || exit 1
if command -v flock >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1 &&
	grep -q "^MPI: .*data parallel" version; then
	# OpenMPI's setup as in t0066-sw-train-mpi.t, its own leaks suppressed
	# under the sanitizers
	if [ -n "${SW_SANITIZED:-}" ]; then
		LSAN_OPTIONS=suppressions=$SW_TOP/tests/lib/lsan-mpi.supp:print_suppressions=0
		ASAN_OPTIONS=${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0
		export LSAN_OPTIONS ASAN_OPTIONS
	fi
	test_expect_success 'under mpirun rank 0 takes the lock: a held directory is one line, 73' '
		OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader \
		OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none &&
		export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMPI_MCA_btl \
			OMPI_MCA_rmaps_base_oversubscribe OMPI_MCA_btl_vader_single_copy_mechanism &&
		mkdir held2 &&
		test_expect_code 73 flock held2 mpirun -np 2 sw-train --data "$CORPUS" --out held2 $SMALL --steps 2 \
			>out 2>err &&
		grep "^sw-train: " err >lines && echo "sw-train: held2: $LOCKED" >expect && test_cmp expect lines &&
		ls held2 >names && test_line_count = 0 names &&
		mpirun -np 2 sw-train --data "$CORPUS" --out held2 $SMALL --steps 2 >out &&
		echo held2/ckpt-000002.h5 >expect && test_cmp expect out
	'
else
	test_skip 'under mpirun rank 0 takes the lock: a held directory is one line, 73' \
		'no flock(1), no mpirun, or sw-train built without MPI'
fi

# ---- B: links -------------------------------------------------------------

LINKED="a symbolic link: refused (no file is written through a link); remove it, or choose another --trace"

test_expect_success 'setup: a finished run of 20 steps, a decoy outside every run directory' '
	sw-train --data "$CORPUS" --out base $SMALL --steps 20 --ckpt-every 10 >/dev/null &&
	echo "a user file, not to be written" >decoy.txt && md5sum decoy.txt >decoy.sum &&
	cp -r base r1 && rm r1/trace.h5 && ln -s ../decoy.txt r1/trace.h5 && snapshot r1 r1.before
'

test_expect_success 'a re-run into a directory whose trace.h5 is a link: 73, one line, the target unchanged' '
	test_expect_code 73 sw-train --data "$CORPUS" --out r1 $SMALL --steps 20 --ckpt-every 10 >out 2>err &&
	echo "sw-train: r1/trace.h5: $LINKED" >expect && test_cmp expect err &&
	md5sum -c --quiet decoy.sum && snapshot r1 after && test_cmp r1.before after
'

test_expect_success 'the same with --force: 73, nothing removed, the target unchanged' '
	test_expect_code 73 sw-train --data "$CORPUS" --out r1 $SMALL --steps 4 --force >out 2>err &&
	echo "sw-train: r1/trace.h5: $LINKED" >expect && test_cmp expect err &&
	md5sum -c --quiet decoy.sum && snapshot r1 after && test_cmp r1.before after && test -L r1/trace.h5
'

test_expect_success '--resume in it (the trace appended to): 73, the target unchanged' '
	test_expect_code 73 sw-train --data "$CORPUS" --out r1 --resume r1/ckpt-000020.h5 --steps 30 >out 2>err &&
	echo "sw-train: r1/trace.h5: $LINKED" >expect && test_cmp expect err &&
	md5sum -c --quiet decoy.sum && snapshot r1 after && test_cmp r1.before after
'

test_expect_success '--trace naming a link, into a new directory: 73, the target unchanged, no directory left' '
	ln -s decoy.txt link.h5 &&
	test_expect_code 73 sw-train --data "$CORPUS" --out fresh/run $SMALL --steps 2 --trace link.h5 --force \
		>out 2>err &&
	echo "sw-train: link.h5: $LINKED" >expect && test_cmp expect err &&
	md5sum -c --quiet decoy.sum && ! test -e fresh
'

test_expect_success 'a dangling link at trace.h5, --force: 73, its target not created' '
	cp -r base r2 && rm r2/trace.h5 && ln -s ../made-through-link.h5 r2/trace.h5 &&
	test_expect_code 73 sw-train --data "$CORPUS" --out r2 $SMALL --steps 2 --force >out 2>err &&
	echo "sw-train: r2/trace.h5: $LINKED" >expect && test_cmp expect err &&
	! test -e made-through-link.h5 && test -e r2/ckpt-000010.h5
'

test_expect_success 'a trace.h5 of two names (a hard link to the decoy), --force: 73, both unchanged' '
	cp -r base r3 && rm r3/trace.h5 && ln decoy.txt r3/trace.h5 &&
	test_expect_code 73 sw-train --data "$CORPUS" --out r3 $SMALL --steps 2 --force >out 2>err &&
	echo "sw-train: r3/trace.h5: a file of 2 names (hard links): refused (a trace written in place would change the others); remove it, or choose another --trace" >expect &&
	test_cmp expect err && md5sum -c --quiet decoy.sum
'

test_expect_success 'a FIFO at trace.h5, --force: 73, never opened' '
	cp -r base r6 && rm r6/trace.h5 && mkfifo r6/trace.h5 &&
	test_expect_code 73 sw-train --data "$CORPUS" --out r6 $SMALL --steps 2 --force >out 2>err &&
	echo "sw-train: r6/trace.h5: not a regular file: refused as a trace" >expect && test_cmp expect err
'

test_expect_success '--force removes links (checkpoint, temporary, trace.h5), never their targets' '
	cp -r base r4 && rm r4/trace.h5 && ln -s ../decoy.txt r4/trace.h5 &&
	ln -s ../decoy.txt r4/ckpt-000007.h5 && ln -s ../decoy.txt r4/ckpt-000009.h5.tmp.1.0 &&
	sw-train --data "$CORPUS" --out r4 $SMALL --steps 4 --force --trace r4-trace.h5 >out 2>err &&
	echo "sw-train: r4: --force: removed 3 checkpoints (ckpt-000007.h5 to ckpt-000020.h5), 1 temporary file of a killed writer and trace.h5" >expect &&
	test_cmp expect err && ls r4 >names && echo ckpt-000004.h5 >expect && test_cmp expect names &&
	md5sum -c --quiet decoy.sum
'

test_expect_success 'a checkpoint name the resumed run writes planted as a link: removed by --force, written anew' '
	cp -r base r5 && ln -s ../decoy.txt r5/ckpt-000030.h5 &&
	test_expect_code 73 sw-train --data "$CORPUS" --out r5 --resume r5/ckpt-000020.h5 --steps 30 >out 2>err &&
	md5sum -c --quiet decoy.sum &&
	sw-train --data "$CORPUS" --out r5 --resume r5/ckpt-000020.h5 --steps 30 --ckpt-every 10 --force \
		>out 2>err &&
	test -f r5/ckpt-000030.h5 && ! test -L r5/ckpt-000030.h5 && sw-ls r5/ckpt-000030.h5 >ls &&
	md5sum -c --quiet decoy.sum
'

# ---- M: what is at --trace ------------------------------------------------

NOTRACE="only a trace is replaced or removed, --force or not; remove it, or choose another --trace"

test_expect_success '--trace a text file: 73, one line saying it is no HDF5 file, --force or not; unchanged' '
	echo "my notes" >plain.txt && md5sum plain.txt >plain.sum &&
	test_expect_code 73 sw-train --data "$CORPUS" --out m1 $SMALL --steps 2 --trace plain.txt >out 2>err &&
	echo "sw-train: plain.txt: not a scalewatch trace (not an HDF5 file): $NOTRACE" >expect &&
	test_cmp expect err && test_line_count = 0 out &&
	test_expect_code 73 sw-train --data "$CORPUS" --out m1 $SMALL --steps 2 --trace plain.txt --force \
		>out 2>err &&
	test_cmp expect err && md5sum -c --quiet plain.sum && ! test -e m1
'

test_expect_success '--trace a checkpoint, --force: 73, saying it is a checkpoint; unchanged' '
	md5sum base/ckpt-000010.h5 >ckpt.sum &&
	test_expect_code 73 sw-train --data "$CORPUS" --out m2 $SMALL --steps 2 --trace base/ckpt-000010.h5 \
		--force >out 2>err &&
	echo "sw-train: base/ckpt-000010.h5: not a scalewatch trace (a scalewatch checkpoint): $NOTRACE" >expect &&
	test_cmp expect err && md5sum -c --quiet ckpt.sum
'

test_expect_success 'a text file named trace.h5 in the directory, --trace "" --force: 73, kept' '
	mkdir m3 && echo "my notes" >m3/trace.h5 &&
	test_expect_code 73 sw-train --data "$CORPUS" --out m3 $SMALL --steps 2 --trace "" --force >out 2>err &&
	echo "sw-train: m3/trace.h5: not a scalewatch trace (not an HDF5 file): $NOTRACE" >expect &&
	test_cmp expect err && echo "my notes" >expect && test_cmp expect m3/trace.h5
'

test_expect_success '--trace an empty file (mktemp'"'"'s): it holds nothing, the trace is written there' '
	: >empty.h5 &&
	sw-train --data "$CORPUS" --out m4 $SMALL --steps 10 --trace empty.h5 >out 2>err &&
	test_line_count = 0 err && sw-trace --series loss empty.h5 >rows && test_line_count = 2 rows
'

test_done
