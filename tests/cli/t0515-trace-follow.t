#!/bin/sh
# sw-trace --follow never prints the rows of two runs as one: a writer
# killed (SIGKILL) and a resumed run (or a new run) writing the same
# trace at once, a trace replaced or removed under the follower. It stops
# with one line on stderr: status 0 and "the writer is gone" when it saw
# the writer die first (every row printed is the dead run's), status 74
# when another writer took the trace over or the file was replaced or
# removed (it printed nothing of them). Writers are tests/unit/mktrace
# (row r of a run started with -b BASE has loss 8 - r/4 + BASE: the
# second runs use BASE 100, so any loss above 50 is theirs). Every wait
# has a deadline and the follower a watchdog, so a bug cannot hang the
# suite (a follower killed by it fails the test).
. "$(dirname "$0")/../lib/tap.sh"

MKTRACE=$SW_BIN/../tests/unit/mktrace

# start_follower TRACE: sw-trace --follow --series loss TRACE in the
# background (its pid in fpid; stdout in followed, stderr in follow-err),
# killed by a watchdog after 20 s. Callers wait for its header and first
# row (wait_lines 2 followed) before they touch the trace: a follower slow
# to start (a loaded machine, ASan) must have opened it first.
start_follower() {
	sw-trace --follow --series loss "$1" >followed 2>follow-err &
	fpid=$!
	(sleep 20 && kill $fpid) >/dev/null 2>&1 &
	wpid=$!
}

# the rows followed are the first rows of the first run, exactly, and none
# of the second run's (exact: the losses 8 - r/4 are exact in float, and
# the same sw-trace prints them from the same rows)
only_first_run() {
	awk -F'\t' 'NR > 1 && $2 > 50' followed >second-run-rows &&
	test_line_count = 0 second-run-rows &&
	n=$(wc -l <followed) && test "$n" -ge 2 &&
	head -n "$n" reference >expect && test_cmp expect followed
}

took_over() {
	test_line_count = 1 follow-err &&
	grep -q "^sw-trace: $1: another writer took the trace over (a resumed or new run)\$" follow-err
}

test_expect_success 'setup: what the first run writes, as sw-trace prints it' '
	"$MKTRACE" -n 400 ref.h5 >/dev/null &&
	sw-trace --series loss ref.h5 >reference
'

test_expect_success 'kill -9, then a resumed run at once: no row of it is printed, the stop said' '
	"$MKTRACE" -n 400 -i 20 race.h5 >progress-race &
	apid=$! &&
	wait_lines 1 progress-race &&
	start_follower race.h5 &&
	wait_lines 2 followed &&
	wait_lines 15 progress-race; kill -9 $apid; wait $apid
	"$MKTRACE" -r 100 -n 30 -i 5 -b 100 race.h5 >progress-resumed &&
	wait $fpid; st=$?
	kill $wpid 2>/dev/null
	echo "follower exit $st: $(cat follow-err)" &&
	test_line_count = 30 progress-resumed &&
	test_line_count = 1 follow-err &&
	case $st in
	0) grep -q "the writer is gone without closing the trace (killed?); stopped following" follow-err ;;
	74) grep -q -e "another writer took the trace over" -e "another writer took it over" follow-err ;;
	*) false ;;
	esac &&
	only_first_run
'

# takeover NAME ARGS: a first run writes NAME with a follower; after 15
# rows the follower is stopped, the run killed and mktrace -k ARGS NAME
# writes 30 rows of a second run and holds the trace open; then the
# follower goes on. Its exit status in st.
takeover() {
	"$MKTRACE" -n 400 -i 20 "$1" >progress-first &
	apid=$! &&
	wait_lines 1 progress-first &&
	start_follower "$1" &&
	wait_lines 2 followed &&
	wait_lines 15 progress-first; kill -STOP $fpid; kill -9 $apid; wait $apid
	"$MKTRACE" -k $2 -n 30 -b 100 "$1" >progress-second &
	bpid=$! &&
	wait_lines 30 progress-second; kill -CONT $fpid; wait $fpid; st=$?
	kill $bpid $wpid 2>/dev/null; wait $bpid
	return 0
}

# under_follower NAME COMMAND: a first run writes NAME with a follower;
# after 15 rows COMMAND runs. The follower's exit status in st.
under_follower() {
	"$MKTRACE" -n 400 -i 20 "$1" >progress-first &
	apid=$! &&
	wait_lines 1 progress-first &&
	start_follower "$1" &&
	wait_lines 2 followed &&
	wait_lines 15 progress-first; eval "$2"; wait $fpid; st=$?
	kill $apid $wpid 2>/dev/null; wait $apid
	return 0
}

test_expect_success 'a resumed run takes over while the follower is stopped: exit 74, nothing of it printed' '
	takeover resumed.h5 "-r 100" &&
	test $st = 74 && took_over resumed.h5 && only_first_run
'

test_expect_success 'a new run creates the trace anew in place: exit 74, nothing of it printed' '
	takeover anew.h5 "" &&
	test $st = 74 && took_over anew.h5 && only_first_run
'

test_expect_success 'the trace replaced by another file (mv): exit 74, nothing of it printed' '
	"$MKTRACE" -n 30 -b 100 other.h5 >/dev/null &&
	under_follower moved.h5 "mv other.h5 moved.h5" &&
	test $st = 74 && test_line_count = 1 follow-err &&
	grep -q "^sw-trace: moved.h5: the trace was replaced by another file\$" follow-err &&
	only_first_run
'

test_expect_success 'the trace removed: exit 74' '
	under_follower removed.h5 "rm removed.h5" &&
	test $st = 74 && test_line_count = 1 follow-err &&
	grep -q "^sw-trace: removed.h5: the trace was removed\$" follow-err &&
	only_first_run
'

test_expect_success 'a run that closes its trace is followed to its end, as before' '
	"$MKTRACE" -n 40 -i 10 closed.h5 >progress-c &
	apid=$! &&
	wait_lines 1 progress-c &&
	start_follower closed.h5 &&
	wait $fpid; st=$?
	kill $wpid 2>/dev/null
	wait $apid && test $st = 0 && test_line_count = 0 follow-err &&
	test_line_count = 41 followed && head -n 41 reference >expect && test_cmp expect followed
'

test_done
