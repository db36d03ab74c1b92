#!/bin/sh
# [hostile3], the readers: traces whose names collide (a value printed
# under another's name), a Q/K series of one dimension, pickle frames
# whose lengths are not what they hold, CRC-32s that do not match. Each
# hostile file gives one line on stderr, "TOOL: FILE: what is wrong",
# exit 65, nothing on stdout but a header; the same file unbroken reads.
# Hostile traces are made by tests/unit/mktrace -x (HDF5 alone, after the
# library's writer closed the trace); the PyTorch files are the h3- seeds
# of fuzz-ptzip (tests/fuzz/make-h3-seeds.py), beside fixtures/bad/pt's
# config.json.
. "$(dirname "$0")/../lib/tap.sh"

MKTRACE=$SW_BIN/../tests/unit/mktrace
SEEDS=$SW_TOP/tests/fuzz/corpus/ptzip

# refused CODE TOOL FILE PATTERN [OPTION...]: exit CODE, one line naming
# FILE and matching PATTERN, at most a header on stdout
refused() {
	code=$1 tool=$2 file=$3 pattern=$4
	shift 4
	test_expect_code "$code" timeout 10 "$tool" "$@" "$file" >out 2>err &&
	test_one_error "$tool" "$file" && grep -q -- "$pattern" err &&
	test_line_count -le 1 out
}

# ---- traces: names that collide ----------------------------------------

test_expect_success 'setup: a valid trace (Q/K pairs, what sw-transfer reads) reads in every tool' '
	"$MKTRACE" -q 0.25 -t -n 6 good.h5 >/dev/null &&
	sw-trace good.h5 >out && test_line_count = 7 out &&
	sw-qkdrift good.h5 >out && test_line_count -gt 1 out &&
	sw-transfer --table good.h5 >out && test_line_count -gt 1 out
'

# NAME|mktrace -x EDIT|the message; each refused by sw-trace (also
# --json, --list, --follow, and among several traces), sw-qkdrift and
# sw-transfer: the check is the trace reader's
while IFS='|' read -r name edit pattern; do
	test_expect_success "trace $name: exit 65 in every tool that reads traces, '$pattern'" '
		"$MKTRACE" -q 0.25 -t -n 6 -x "$edit" $name.h5 >/dev/null &&
		refused 65 sw-trace $name.h5 "$pattern" &&
		refused 65 sw-trace $name.h5 "$pattern" --json &&
		refused 65 sw-trace $name.h5 "$pattern" --list &&
		refused 65 sw-trace $name.h5 "$pattern" --follow &&
		refused 65 sw-qkdrift $name.h5 "$pattern" &&
		refused 65 sw-transfer $name.h5 "$pattern" &&
		test_expect_code 65 sw-trace good.h5 $name.h5 >out 2>err &&
		test_one_error sw-trace $name.h5 && grep -q -- "$pattern" err &&
		! grep -q 666 out
	'
done <<'CASES'
dot-series|add=residual_rms.layer0|/series/residual_rms.layer0: a series name that holds a '.' (a column prints as SERIES.COLUMN): refused as ambiguous
file-series|add=file|/series/file: a series named as the column that names each row's trace (several traces): refused as ambiguous
comma-series|add=loss,lr|/series/loss,lr: a series name that holds a ','
column-twice|columns=residual_rms=layer0:layer1:layer0|/series/residual_rms: column 'layer0' twice: refused as ambiguous
column-comma|columns=residual_rms=layer0:a,b:layer2|/series/residual_rms: column 1, a name that holds a ','
qk-1d|flat=qk_q_rms|/series/qk_q_rms: rank 1, where the format's qk_q_rms is 2-D
residual-1d|flat=residual_rms|/series/residual_rms: rank 1, where the format's residual_rms is 2-D
CASES

# two names JSON would print alike (a byte that is not UTF-8 prints as
# U+FFFD), a control byte, a name longer than the format's 255 bytes
test_expect_success 'trace names: not UTF-8, a control byte, 300 bytes: exit 65' '
	"$MKTRACE" -n 3 -x "columns=residual_rms=a$(printf "\376"):a$(printf "\377"):c" utf8.h5 >/dev/null &&
	refused 65 sw-trace utf8.h5 "/series/residual_rms: column 0, a name that is not valid UTF-8" --json &&
	"$MKTRACE" -n 3 -x "columns=residual_rms=a:b$(printf "\r"):c" ctl.h5 >/dev/null &&
	refused 65 sw-trace ctl.h5 "/series/residual_rms: column 1, a name that holds a control byte" &&
	long=$(awk "BEGIN { for (i = 0; i < 300; i++) printf \"x\" }") &&
	"$MKTRACE" -n 3 -x "add=$long" long.h5 >/dev/null &&
	refused 65 sw-trace long.h5 "a series name that is longer than 255 bytes"
'

test_expect_success 'a series of a name the format leaves free reads, every JSON key once' '
	"$MKTRACE" -n 2 -x add=loss_ema extra.h5 >/dev/null &&
	sw-trace --json extra.h5 >out &&
	cat >expect <<-\EOF &&
	{"step": 0, "loss": 8, "lr": 0, "val_loss": 8.5, "tokens": 0, "residual_rms.layer0": 1, "residual_rms.layer1": 1.125, "residual_rms.layer2": 1.25, "loss_ema": 666}
	{"step": 10, "loss": 7.75, "lr": 0.0009765625, "val_loss": null, "tokens": 123456789012, "residual_rms.layer0": 1.5, "residual_rms.layer1": 1.625, "residual_rms.layer2": 1.75, "loss_ema": 666}
	EOF
	test_cmp expect out
'

# a name the user gives twice prints once, where first given (as cut -f
# 1,1 does): no key twice from the command line either
test_expect_success '--series with a name twice, or a column and its series: each column once' '
	"$MKTRACE" -n 2 plain.h5 >/dev/null &&
	sw-trace --series loss,residual_rms.layer1,loss,residual_rms --series lr,loss plain.h5 >out &&
	printf "step\tloss\tresidual_rms.layer1\tresidual_rms.layer0\tresidual_rms.layer2\tlr\n" >expect &&
	printf "0\t8\t1.125\t1\t1.25\t0\n10\t7.75\t1.625\t1.5\t1.75\t0.0009765625\n" >>expect &&
	test_cmp expect out
'

# ---- PyTorch files: pickle frames, CRC-32s -----------------------------

test_expect_success 'setup: the h3- archives beside a config.json' '
	cp "$SEEDS"/h3-*.pt "$FIX/bad/pt/config.json" . &&
	test -f h3-frame-ok.pt && test -f h3-crc-storage.pt
'

# exact by construction, as in t0540-bad-pytorch.t
test_expect_success 'protocol 4, two frames of their exact lengths: read, w = [[1, -2, 3], [-4, 5, -6]]' '
	sw-norms h3-frame-ok.pt >out &&
	cut -f4,8,9,14-16 out >got &&
	printf "name\trows\tcols\tfrobenius\trms\tmax_abs\n" >want &&
	printf "w\t2\t3\t9.53939201\t3.89444048\t6\n" >>want &&
	test_cmp want got
'

# every tool that reads tensors, and sw-convert, which then writes nothing
each_tool() {
	for tool in sw-ls sw-norms sw-spectrum; do
		refused "$1" $tool "$2" "$3" || return 1
	done
	test_expect_code "$1" sw-convert "$2" converted >out 2>err &&
	test_one_error sw-convert "$2" && grep -q -- "$3" err &&
	test_line_count = 0 out && ! ls -d converted* 2>/dev/null
}

while read -r file pattern; do
	test_expect_success "$file: exit 65, '$pattern'" "
		each_tool 65 $file \"$pattern\"
	"
done <<'CASES'
h3-frame-short.pt data.pkl: byte 192: SETITEMS outside any frame, after the frame that ends at byte 192: that FRAME's length is shorter than what it holds
h3-frame-cross.pt data.pkl: byte 112: BINUNICODE crosses the end of its frame (byte 113)
h3-frame-zero.pt data.pkl: byte 2: a FRAME of 0 bytes
h3-frame-long.pt data.pkl: byte 112: a FRAME inside the frame that ends at byte 116
h3-crc0-deflated.pt archive/data.pkl: its CRC-32 does not match its data
h3-crc-pkl-stored.pt archive/data.pkl: its CRC-32 does not match its data
CASES

# a storage is checked when a tool reads it whole (sw-ls reads none: it
# lists the file as it is); in place (float32, contiguous) or gathered
# (a transposed view)
for file in h3-crc-storage.pt h3-crc-storage-t.pt; do
	test_expect_success "$file: a storage whose CRC-32 is wrong: exit 65 for every tool that reads it" "
		sw-ls $file >out 2>err && test_line_count = 2 out && test_line_count = 0 err &&
		refused 65 sw-norms $file 'w: storage data/0: its CRC-32 does not match its data' &&
		refused 65 sw-spectrum $file 'w: storage data/0: its CRC-32 does not match its data' &&
		test_expect_code 65 sw-convert $file converted >out 2>err &&
		test_one_error sw-convert $file && ! ls -d converted* 2>/dev/null
	"
done

test_done
