#!/bin/sh
# Hostile HDF5 checkpoints and traces. This script extends the bad-input
# table (t0500-bad-input.t) with the rules of docs/trust.md for HDF5
# (scalewatch-format(5), "What an HDF5 reader refuses"): data that lives
# outside the file (external links, external raw storage, virtual
# datasets: the outside file may be /etc/passwd or a FIFO), soft links,
# datasets never written (fill values taken for data; a 1 GiB tensor in a
# file of kilobytes), a decompression bomb, a filter libhdf5 does not have
# (no plugin is looked for), and FIFOs where a file is expected. Each file
# is made by tests/unit/mkhostile-h5 from a valid one, with one change.
# Every tool that reads it must give one line on stderr, "TOOL: FILE: what
# is wrong", exit 65 (66 for a FIFO), nothing on stdout but the header, no
# output left, and no byte of the outside file (or a number made from it)
# anywhere; each runs under timeout, and a hang (exit 124) fails.
. "$(dirname "$0")/../lib/tap.sh"

MK=$SW_BIN/../tests/unit/mkhostile-h5
MKTRACE=$SW_BIN/../tests/unit/mktrace
Q=model.layers.0.self_attn.q_proj.weight
SMALL="--batch 4 --seq-len 32 --d-model 32 --n-layers 2 --n-heads 4 --n-kv-heads 2 --threads 2"

# nothing of the outside files got out: their text, or the value 1234.5
# that outside.h5's q projection holds (its norms would show it)
nothing_outside() {
	! grep -q -e SWOUTSIDE -e 1234.5 "$@"
}

# refused TOOL CODE FILE PATTERN [ARGS...]: TOOL [ARGS] FILE fails so
refused() {
	tool=$1 code=$2 file=$3 pattern=$4
	shift 4
	test_expect_code "$code" timeout 10 "$tool" "$@" "$file" >out 2>err &&
	test_one_error "$tool" "$file" &&
	grep -q -- "$pattern" err &&
	test_line_count -le 1 out &&
	nothing_outside out err
}

# sw-convert refuses it and leaves nothing: no output, no temporary
convert_refused() {
	test_expect_code "$1" timeout 10 sw-convert "$2" converted >out 2>err &&
	test_one_error sw-convert "$2" &&
	grep -q -- "$3" err &&
	test_line_count = 0 out &&
	! ls -d converted* .converted* 2>/dev/null
}

test_expect_success 'setup: the outside files, a run with /fisher and /optim_state, a trace' '
	for i in $(seq 300); do echo "SWOUTSIDE-$i"; done >outside.txt &&
	"$MK" fill /params/$Q 1234.5 "$FIX/tiny.h5" outside.h5 &&
	mkfifo outside.fifo &&
	head -c 8192 /dev/zero >zeros.bin &&
	sw-train --data "$FIX/corpus.txt" --out run $SMALL --steps 2 --ckpt-every 2 \
		--fisher-every 2 --trace-every 1 >/dev/null 2>&1 &&
	test -f run/ckpt-000002.h5 && test -f run/trace.h5 &&
	"$MKTRACE" -n 600 trace.h5 >/dev/null
'

test_expect_success 'the unchanged files are read by every tool (the cases below change one thing)' '
	for tool in sw-ls sw-norms sw-spectrum sw-qkdrift; do
		timeout 10 $tool "$FIX/tiny.h5" >out 2>err && test_line_count = 0 err || return 1
	done &&
	timeout 10 sw-transfer --table run/ckpt-000002.h5 >out 2>err && test_line_count = 0 err &&
	timeout 10 sw-sharpness --data zeros.bin --data-format uint16 --seq-len 8 \
		--batch-tokens 64 "$FIX/tiny.h5" >out 2>err && test_line_count = 0 err &&
	timeout 10 sw-sharpness run/ckpt-000002.h5 >out && test_line_count = 7 out &&
	timeout 10 sw-trace trace.h5 >out && test_line_count = 601 out &&
	timeout 10 sw-convert "$FIX/tiny.h5" tiny-hf >out && test -f tiny-hf/model.safetensors
'

# ---- checkpoints: /params ------------------------------------------------
# NAME|what mkhostile-h5 does (to fixtures/tiny.h5)|the message
cat >cases <<CASES
elink-tensor|elink /params/$Q outside.h5|/params/$Q: external link: refused
elink-params|elink /params outside.h5|/params: external link: refused
elink-config|elink /config outside.h5|/config: external link: refused
elink-fifo|elink /params/$Q outside.fifo|/params/$Q: external link: refused
soft-link|soft /params/$Q|/params/$Q: soft link: refused
external-outside|external /params/$Q outside.txt|/params/$Q: external storage: refused
external-passwd|external /params/$Q /etc/passwd|/params/$Q: external storage: refused
external-fifo|external /params/$Q outside.fifo|/params/$Q: external storage: refused
vds-missing|vds /params/$Q missing.h5|/params/$Q: virtual dataset: refused
vds-outside|vds /params/$Q outside.h5|/params/$Q: virtual dataset: refused
unwritten|unwritten /params/$Q|/params/$Q: never written (no data for row 0): refused
unwritten-1gib|huge 16777216|never written (no data for row 0): refused
deflate-bomb|bomb 2097152|compressed 1026:1 (130752 bytes in the file for 134217728): refused
lzf-filter|filter /params/$Q|/params/$Q: filter 32000 not available: refused
CASES

while IFS='|' read -r name how pattern; do
	for tool in sw-ls sw-norms sw-spectrum sw-qkdrift sw-transfer; do
		args=
		if [ $tool = sw-transfer ]; then args=--table; fi
		test_expect_success "$tool: $name: exit 65, '$pattern'" "
			\"\$MK\" $how \"\$FIX/tiny.h5\" $name.h5 &&
			refused $tool 65 $name.h5 \"$pattern\" $args
		"
	done
	test_expect_success "sw-sharpness --data: $name: exit 65" "
		\"\$MK\" $how \"\$FIX/tiny.h5\" $name.h5 &&
		refused sw-sharpness 65 $name.h5 \"$pattern\" --data zeros.bin \
			--data-format uint16 --seq-len 8 --batch-tokens 64
	"
	test_expect_success "sw-convert: $name: exit 65, nothing written" "
		\"\$MK\" $how \"\$FIX/tiny.h5\" $name.h5 &&
		convert_refused 65 $name.h5 \"$pattern\" &&
		{ grep -l -r -e SWOUTSIDE -e 1234.5 . || :; } >found &&
		{ grep -v -x -e ./outside.txt -e ./found found || :; } >leaked &&
		test_line_count = 0 leaked
	"
done <cases

test_expect_success 'the bomb and the 1 GiB tensor are refused before any allocation, at once' '
	"$MK" huge 16777216 "$FIX/tiny.h5" huge.h5 &&
	"$MK" bomb 2097152 "$FIX/tiny.h5" bomb.h5 &&
	test $(wc -c <huge.h5) -lt 1000000 && test $(wc -c <bomb.h5) -lt 1000000 &&
	start=$(date +%s) &&
	test_expect_code 65 timeout 10 sw-norms --role embed huge.h5 bomb.h5 >out 2>err &&
	test $(($(date +%s) - start)) -le 5 &&
	test_line_count = 2 err && test_line_count -le 1 out
'

test_expect_success 'no plugin is looked for: a FIFO in HDF5_PLUGIN_PATH is never opened' '
	"$MK" filter /params/$Q "$FIX/tiny.h5" lzf.h5 &&
	mkdir plugins && mkfifo plugins/libh5lzf.so &&
	HDF5_PLUGIN_PATH=$PWD/plugins refused sw-norms 65 lzf.h5 "filter 32000 not available" &&
	"$MK" filter /series/loss trace.h5 lzf-trace.h5 &&
	HDF5_PLUGIN_PATH=$PWD/plugins refused sw-trace 65 lzf-trace.h5 "filter 32000 not available"
'

test_expect_success 'a userblock is allowed: the same numbers as without (read, not mapped)' '
	"$MK" userblock "$FIX/tiny.h5" ub.h5 &&
	test "$(head -c 512 ub.h5 | tr -d U | wc -c)" = 0 &&
	sw-norms ub.h5 >got && sw-norms "$FIX/tiny.h5" >expect &&
	cut -f 2- got >got.values && cut -f 2- expect >expect.values &&
	# exact: the same binary on the same stored values, behind a userblock
	test_cmp expect.values got.values
'

# ---- checkpoints: /fisher (sw-sharpness) and /optim_state (sw-train --resume) ----
cat >aux-cases <<CASES
fisher-external|external /fisher/$Q outside.txt|/fisher/$Q: external storage: refused
fisher-elink|elink /fisher outside.h5|/fisher: external link: refused
fisher-vds|vds /fisher/$Q missing.h5|/fisher/$Q: virtual dataset: refused
fisher-unwritten|unwritten /fisher/$Q|/fisher/$Q: never written
fisher-filter|filter /fisher/$Q|/fisher/$Q: filter 32000 not available
CASES
while IFS='|' read -r name how pattern; do
	test_expect_success "sw-sharpness: $name: exit 65, '$pattern'" "
		\"\$MK\" $how run/ckpt-000002.h5 $name.h5 &&
		refused sw-sharpness 65 $name.h5 \"$pattern\"
	"
done <aux-cases

cat >resume-cases <<CASES
m-external|external /optim_state/m/$Q outside.txt|/optim_state/m/$Q: external storage: refused
state-elink|elink /optim_state outside.h5|/optim_state: external link: refused
v-vds|vds /optim_state/v/$Q missing.h5|/optim_state/v/$Q: virtual dataset: refused
v-unwritten|unwritten /optim_state/v/$Q|/optim_state/v/$Q: never written
CASES
while IFS='|' read -r name how pattern; do
	test_expect_success "sw-train --resume: $name: exit 65, nothing written" "
		\"\$MK\" $how run/ckpt-000002.h5 $name.h5 &&
		refused sw-train 65 $name.h5 \"$pattern\" --data \"\$FIX/corpus.txt\" \
			--out resumed-$name --steps 4 --resume &&
		! test -e resumed-$name
	"
done <resume-cases

# ---- traces ----------------------------------------------------------------
cat >trace-cases <<CASES
series-elink|elink /series outside.h5|/series: external link: refused
loss-elink|elink /series/loss outside.h5|/series/loss: external link: refused
status-elink-fifo|elink /status outside.fifo|/status: external link: refused
loss-soft|soft /series/loss|/series/loss: soft link: refused
loss-external|external /series/loss outside.txt|/series/loss: external storage: refused
loss-external-fifo|external /series/loss outside.fifo|/series/loss: external storage: refused
session-external|external /session outside.txt|/session: external storage: refused
loss-vds|vds /series/loss missing.h5|/series/loss: virtual dataset: refused
loss-unwritten|unwritten /series/loss|/series/loss: never written (no data for row 0): refused
loss-filter|filter /series/loss|/series/loss: filter 32000 not available: refused
CASES
while IFS='|' read -r name how pattern; do
	test_expect_success "sw-trace: $name: exit 65, '$pattern'" "
		\"\$MK\" $how trace.h5 $name.h5 &&
		refused sw-trace 65 $name.h5 \"$pattern\" &&
		refused sw-trace 65 $name.h5 \"$pattern\" --list &&
		refused sw-trace 65 $name.h5 \"$pattern\" --follow
	"
done <trace-cases

test_expect_success 'sw-train --resume refuses a hostile trace and leaves it as it was' '
	rm -rf r1 && cp -R run r1 &&
	"$MK" vds /series/loss missing.h5 run/trace.h5 r1/trace.h5 &&
	cp r1/trace.h5 before.h5 &&
	test_expect_code 65 timeout 20 sw-train --data "$FIX/corpus.txt" --out r1 --steps 4 \
		--resume r1/ckpt-000002.h5 >out 2>err &&
	test_one_error sw-train r1/trace.h5 &&
	grep -q "/series/loss: virtual dataset: refused" err &&
	cmp before.h5 r1/trace.h5 && ! test -e r1/ckpt-000004.h5
'

# ---- FIFOs where a file is expected: refused, never opened ----------------
test_expect_success 'sw-trace: a FIFO: exit 66, no hang' '
	mkfifo trace.fifo &&
	refused sw-trace 66 trace.fifo "not a regular file" &&
	refused sw-trace 66 trace.fifo "not a regular file" --follow
'

test_expect_success 'sw-train --resume: a FIFO checkpoint, and a FIFO trace in --out: no hang' '
	mkfifo ckpt.fifo &&
	refused sw-train 66 ckpt.fifo "not a regular file" --data "$FIX/corpus.txt" \
		--out fifo-run --steps 4 --resume &&
	rm -rf r2 && cp -R run r2 && rm r2/trace.h5 && mkfifo r2/trace.h5 &&
	# the trace is what the run writes: a FIFO there is refused as an
	# output (73, docs/security.md), before anything is opened on it
	test_expect_code 73 timeout 10 sw-train --data "$FIX/corpus.txt" --out r2 --steps 4 \
		--resume r2/ckpt-000002.h5 >out 2>err &&
	test_one_error sw-train r2/trace.h5 && grep -q "not a regular file: refused as a trace" err &&
	test -p r2/trace.h5 && ! test -e r2/ckpt-000004.h5
'

test_done
