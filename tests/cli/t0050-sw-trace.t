#!/bin/sh
# sw-trace: traces written by tests/unit/mktrace (its header comment gives
# the value of every cell), printed back exactly; selection, JSON, --list,
# --every; errors with their exit status; a writer killed with SIGKILL
# leaves a trace that sw-trace and h5py (as an SWMR reader) read back to
# its last flush; --follow prints what a running writer appends and stops
# when it closes the trace or dies. Background writers are finite (a few
# seconds at most) and every wait has a deadline, so a bug cannot hang
# the suite.
. "$(dirname "$0")/../lib/tap.sh"

MKTRACE=$SW_BIN/../tests/unit/mktrace

# Every value comparison here is exact: mktrace writes values exact in
# binary (quarters, 2^-10 steps, integers: its header), which sw-trace and
# h5py only read back and print; the other side is sw-trace on the same file.

test_expect_success 'setup: a closed trace of 4 rows' '
	"$MKTRACE" -n 4 run.h5 >progress &&
	test_line_count = 4 progress
'

test_expect_success 'TSV: every series, 2-D ones as SERIES.COLUMN, values exactly as written, unknown ones empty' '
	sw-trace run.h5 >actual &&
	printf "%s\n" \
		"step	loss	lr	val_loss	tokens	residual_rms.layer0	residual_rms.layer1	residual_rms.layer2" \
		"0	8	0	8.5	0	1	1.125	1.25" \
		"10	7.75	0.0009765625		123456789012	1.5	1.625	1.75" \
		"20	7.5	0.001953125		246913578024	2	2.125	2.25" \
		"30	7.25	0.0029296875	7.75	370370367036	2.5	2.625	2.75" >expect &&
	test_cmp expect actual
'

test_expect_success '--json: the same fields, null where unknown' '
	sw-trace --json run.h5 >actual &&
	cat >expect <<-\EOF &&
	{"step": 0, "loss": 8, "lr": 0, "val_loss": 8.5, "tokens": 0, "residual_rms.layer0": 1, "residual_rms.layer1": 1.125, "residual_rms.layer2": 1.25}
	{"step": 10, "loss": 7.75, "lr": 0.0009765625, "val_loss": null, "tokens": 123456789012, "residual_rms.layer0": 1.5, "residual_rms.layer1": 1.625, "residual_rms.layer2": 1.75}
	{"step": 20, "loss": 7.5, "lr": 0.001953125, "val_loss": null, "tokens": 246913578024, "residual_rms.layer0": 2, "residual_rms.layer1": 2.125, "residual_rms.layer2": 2.25}
	{"step": 30, "loss": 7.25, "lr": 0.0029296875, "val_loss": 7.75, "tokens": 370370367036, "residual_rms.layer0": 2.5, "residual_rms.layer1": 2.625, "residual_rms.layer2": 2.75}
	EOF
	test_cmp expect actual
'

test_expect_success '--series loss,lr: those columns, in that order' '
	sw-trace --series lr,loss run.h5 >actual &&
	printf "step\tlr\tloss\n0\t0\t8\n10\t0.0009765625\t7.75\n20\t0.001953125\t7.5\n30\t0.0029296875\t7.25\n" >expect &&
	test_cmp expect actual
'

test_expect_success '--series with a dotted column, a 2-D series whole, and step' '
	sw-trace --series step,residual_rms.layer1,val_loss run.h5 >actual &&
	printf "step\tresidual_rms.layer1\tval_loss\n0\t1.125\t8.5\n10\t1.625\t\n20\t2.125\t\n30\t2.625\t7.75\n" >expect &&
	test_cmp expect actual &&
	sw-trace --series residual_rms run.h5 >actual &&
	printf "step\tresidual_rms.layer0\tresidual_rms.layer1\tresidual_rms.layer2\n" >expect &&
	head -n 1 actual >header && test_cmp expect header && test_line_count = 5 actual
'

test_expect_success '--series repeated: the lists are joined' '
	sw-trace --series lr --series loss run.h5 >actual &&
	sw-trace --series lr,loss run.h5 >expect &&
	test_cmp expect actual
'

test_expect_success '--list: one row per series with its columns' '
	sw-trace --list run.h5 >actual &&
	printf "series\tncols\tcolumns\nloss\t0\t\nlr\t0\t\nval_loss\t0\t\ntokens\t0\t\nresidual_rms\t3\tlayer0,layer1,layer2\n" >expect &&
	test_cmp expect actual &&
	sw-trace --list --json run.h5 >actual &&
	sed -n 5p actual >last &&
	echo "{\"series\": \"residual_rms\", \"ncols\": 3, \"columns\": \"layer0,layer1,layer2\"}" >expect &&
	test_cmp expect last && test_line_count = 5 actual
'

test_expect_success '--every N: the first row at or after each multiple of N steps' '
	sw-trace --every 20 --series loss run.h5 >actual &&
	printf "step\tloss\n0\t8\n20\t7.5\n" >expect && test_cmp expect actual &&
	sw-trace --every 25 --series loss run.h5 >actual &&
	printf "step\tloss\n0\t8\n30\t7.25\n" >expect && test_cmp expect actual
'

test_expect_success 'a trace with no rows yet: the header only' '
	"$MKTRACE" -n 0 empty.h5 &&
	sw-trace --series loss empty.h5 >actual &&
	printf "step\tloss\n" >expect && test_cmp expect actual
'

# expect_error CODE MESSAGE ARGS...: exit CODE, the one line on stderr, no output
expect_error() {
	code=$1 msg=$2
	shift 2
	test_expect_code "$code" sw-trace "$@" >out 2>err &&
	echo "$msg" >expect && test_cmp expect err &&
	test_line_count = 0 out
}

test_expect_success 'an unknown series: 65, the series there are named' '
	expect_error 65 "sw-trace: run.h5: no series '\''los'\'' (the trace has: loss, lr, val_loss, tokens, residual_rms)" \
		--series loss,los run.h5
'

test_expect_success 'an unknown column: 65, the columns named' '
	expect_error 65 "sw-trace: run.h5: series '\''residual_rms'\'' has no column '\''layer9'\'' (its columns: layer0, layer1, layer2)" \
		--series residual_rms.layer9 run.h5
'

test_expect_success 'not a trace: a checkpoint, a trace without /series, a truncated file: 65' '
	expect_error 65 "sw-trace: $FIX/tiny.h5: is a scalewatch '\''checkpoint'\'', not a trace" "$FIX/tiny.h5" &&
	expect_error 65 "sw-trace: $FIX/bad/trace.h5: missing group /series" "$FIX/bad/trace.h5" &&
	test_expect_code 65 sw-trace "$FIX/bad/truncated.h5" >out 2>err &&
	test_one_error sw-trace "$FIX/bad/truncated.h5" && grep -q "not a readable HDF5 file" err &&
	: >empty-file && expect_error 65 "sw-trace: empty-file: empty file" empty-file
'

test_expect_success 'cannot open: no such file, a directory: 66' '
	expect_error 66 "sw-trace: nonexistent.h5: No such file or directory" nonexistent.h5 &&
	mkdir adir && expect_error 66 "sw-trace: adir: is a directory" adir
'

test_expect_success 'several traces: each row starts with its file, one header' '
	cp run.h5 again.h5 &&
	sw-trace --series loss run.h5 again.h5 >actual &&
	printf "file\tstep\tloss\n" >expect &&
	for f in run.h5 again.h5; do printf "$f\t%s\t%s\n" 0 8 10 7.75 20 7.5 30 7.25 >>expect || exit 1; done &&
	test_cmp expect actual
'

test_expect_success 'trace names on stdin: the same table as named' '
	printf "run.h5\nagain.h5\n" >names &&
	sw-trace --series loss <names >from-stdin &&
	sw-trace --series loss run.h5 again.h5 >named && test_cmp named from-stdin &&
	sw-trace --series loss - <names >dash && test_cmp named dash
'

test_expect_success 'several traces, one not a trace, one with other series: said (exit 65), the others printed' '
	test_expect_code 65 sw-trace run.h5 "$FIX/tiny.h5" again.h5 >out 2>err &&
	test_line_count = 9 out && test_line_count = 1 err &&
	"$MKTRACE" -n 4 -q 0.5 qk.h5 >progress &&
	test_expect_code 65 sw-trace again.h5 qk.h5 >out 2>err &&
	grep -q "^sw-trace: qk.h5: its series are not those of again.h5: choose common ones with --series" err &&
	test_line_count = 5 out && test_line_count = 1 err &&
	sw-trace --series loss,lr again.h5 qk.h5 >out && test_line_count = 9 out
'

test_expect_success '--list of several traces: the file first' '
	sw-trace --list run.h5 again.h5 >out &&
	head -n 1 out >header && printf "file\tseries\tncols\tcolumns\n" >expect && test_cmp expect header &&
	cut -f1 out >files && test "$(grep -c "^again.h5\$" files)" = "$(grep -c "^run.h5\$" files)"
'

test_expect_success 'bad command lines: 64' '
	test_expect_code 64 sw-trace --follow run.h5 run.h5 >out 2>err && grep -q "follows one TRACE" err &&
	test_expect_code 64 sw-trace --follow - <names >out 2>err && grep -q "follows one TRACE" err &&
	test_expect_code 64 sw-trace --every 0 run.h5 >out 2>err &&
	test_expect_code 64 sw-trace --every x run.h5 >out 2>err &&
	test_expect_code 64 sw-trace --series loss,,lr run.h5 >out 2>err &&
	test_expect_code 64 sw-trace --series "" run.h5 >out 2>err &&
	test_expect_code 64 sw-trace --list --follow run.h5 >out 2>err &&
	test_expect_code 64 sw-trace --no-such-option run.h5 >out 2>err &&
	test_line_count = 0 out
'

test_expect_success 'closing the pipe early ends quietly' '
	"$MKTRACE" -n 3000 long.h5 >/dev/null &&
	# pipe-ok: the pipe is what is tested; the status is kept in status
	{ sw-trace long.h5 2>err; echo $? >status; } | head -n 1 >out &&
	test_closed_quietly status && test_line_count = 1 out && test_line_count = 0 err
'

# ---- SIGKILL: the trace reads back to the last flushed row --------------

test_expect_success 'setup: kill -9 of a writer mid-run (killed.h5, read below)' '
	"$MKTRACE" -n 400 -i 5 killed.h5 >progress-killed &
	pid=$! &&
	wait_lines 20 progress-killed; waited=$?
	kill -9 $pid; wait $pid; st=$?
	test $waited = 0 && test $st = 137 &&
	wc -l <progress-killed >flushed && test $(cat flushed) -lt 400
'

test_expect_success 'sw-trace reads it back to its last flush, every value exact, no h5clear' '
	sw-trace killed.h5 >actual 2>err && test_line_count = 0 err &&
	rows=$(($(wc -l <actual) - 1)) && flushed=$(cat flushed) &&
	echo "$rows rows read back, $flushed reported flushed" &&
	# a row flushed just before the kill may not have been reported yet
	test $rows -ge $flushed && test $rows -le $((flushed + 1)) &&
	"$MKTRACE" -n $rows whole.h5 >/dev/null && sw-trace whole.h5 >expect &&
	test_cmp expect actual
'

if have_python_modules h5py; then
	test_expect_success 'h5py opened as SWMR reader reads the same rows (no h5clear)' '
		"$PY" - killed.h5 >py <<-\EOF &&
		import sys, h5py
		with h5py.File(sys.argv[1], "r", swmr=True) as f:
		    s = f["series"]
		    n = min(len(s[k]) for k in s)
		    print("step\tloss\tresidual_rms.layer2")
		    for i in range(n):
		        print("%d\t%.15g\t%.15g" % (s["step"][i], s["loss"][i], s["residual_rms"][i, 2]))
		EOF
		sw-trace --series loss,residual_rms.layer2 killed.h5 >expect &&
		test_cmp expect py
	'
else
	test_skip 'h5py opened as SWMR reader' 'python3 h5py not importable'
fi

if command -v h5clear >/dev/null 2>&1; then
	test_expect_success 'h5dump reads a copy after h5clear -s, the same steps' '
		cp killed.h5 copy.h5 && h5clear -s copy.h5 &&
		h5dump -d /series/step -y -w 0 copy.h5 >dump &&
		sed -n "/DATA {/{n;p;}" dump | tr -d " " | tr , "\n" >dumped &&
		sw-trace --series step killed.h5 >steps.out && sed 1d steps.out >steps &&
		test_line_count -gt 0 steps &&
		# the step index may hold a row the series did not get to
		head -n $(wc -l <steps) dumped >dumped-aligned && test_cmp steps dumped-aligned
	'
else
	test_skip 'h5dump reads a copy after h5clear -s' 'h5clear (hdf5-tools) not installed'
fi

test_expect_success 'a resumed run reopens the killed trace: rows after the checkpoint dropped' '
	"$MKTRACE" -r 25 -n 2 -b 100 killed.h5 >progress-resumed &&
	test_line_count = 2 progress-resumed &&
	sw-trace --series loss killed.h5 >actual &&
	printf "step\tloss\n0\t8\n10\t7.75\n20\t7.5\n30\t107.25\n40\t107\n" >expect &&
	test_cmp expect actual
'

# ---- --follow -----------------------------------------------------------

test_expect_success '--follow prints the rows a running writer appends, stops when it closes' '
	"$MKTRACE" -n 12 -i 100 live.h5 >progress-live &
	pid=$! &&
	wait_lines 1 progress-live &&
	timeout 20 sw-trace --follow --series loss,residual_rms.layer0 live.h5 >actual 2>err &&
	wait $pid &&
	test_line_count = 12 progress-live && test_line_count = 0 err &&
	sw-trace --series loss,residual_rms.layer0 live.h5 >expect &&
	test_line_count = 13 expect && test_cmp expect actual
'

test_expect_success '--follow --json --every: the same selection while following' '
	"$MKTRACE" -n 8 -i 100 live2.h5 >progress-live2 &
	pid=$! &&
	wait_lines 1 progress-live2 &&
	timeout 20 sw-trace --follow --json --every 20 --series lr live2.h5 >actual &&
	wait $pid &&
	sw-trace --json --every 20 --series lr live2.h5 >expect &&
	test_line_count = 4 expect && test_cmp expect actual
'

test_expect_success '--follow stops when the writer is killed, after its last rows' '
	"$MKTRACE" -n 400 -i 10 dying.h5 >progress-dying &
	pid=$! &&
	wait_lines 1 progress-dying &&
	{ timeout 20 sw-trace --follow --series loss dying.h5 >actual 2>err & } &&
	fpid=$! &&
	wait_lines 15 progress-dying; waited=$?
	kill -9 $pid; wait $pid; st=$?
	wait $fpid && test $waited = 0 && test $st = 137 &&
	echo "sw-trace: dying.h5: the writer is gone without closing the trace (killed?); stopped following" >expect-err &&
	test_cmp expect-err err &&
	sw-trace --series loss dying.h5 >expect && test_cmp expect actual &&
	test $(wc -l <actual) -ge 16
'

test_expect_success '--follow on a finished trace: prints it and ends' '
	timeout 20 sw-trace --follow run.h5 >actual &&
	sw-trace run.h5 >expect && test_cmp expect actual
'

test_done
