#!/bin/sh
# The bad-input table, across every tool: each malformed file (most made
# by gen-fixtures under fixtures/bad) gives one line on stderr, "TOOL:
# FILE: what is wrong", and the documented exit status (scalewatch(7): 64
# usage, 65 bad data, 66 cannot open, 73 cannot create, 74 I/O error);
# nothing but the header on stdout; no output file under its final name
# and nothing changed where the user's data was. Under check-asan the same
# runs must give no sanitizer report (a report changes the exit status).
. "$(dirname "$0")/../lib/tap.sh"

B=$FIX/bad

# expect_error TOOL CODE FILE PATTERN: the tool fails on FILE alone
expect_error() {
	test_expect_code "$2" "$1" "$3" >out 2>err &&
	test_one_error "$1" "$3" &&
	grep -q -- "$4" err &&
	test_line_count -le 1 out
}

# sw-convert IN OUT: the same error, and no OUT (nor OUT.tmp.*) made
expect_convert_error() {
	test_expect_code "$1" sw-convert "$2" converted >out 2>err &&
	test_one_error sw-convert "$2" &&
	grep -q -- "$3" err &&
	test_line_count = 0 out &&
	! ls -d converted* 2>/dev/null
}

cat >cases <<'CASES'
65 truncated.h5 truncated file
65 not-scalewatch.h5 not a scalewatch checkpoint
65 missing-attr.h5 missing attribute 'block'
65 wrong-shape.h5 shape 4x3 disagrees with the config (4x4)
65 unknown-block.h5 unknown block 'attention'
65 trace.h5 not a checkpoint
65 version2.h5 format_version 2 is not supported
65 empty.safetensors empty file
65 lying-header.safetensors header length 4096 runs past the end
65 huge-header.safetensors exceeds 100 MB
65 overlap.safetensors overlap
65 gap.safetensors gap
65 out-of-file.safetensors beyond the data
65 truncated-data.safetensors truncated file
65 unknown-dtype.safetensors unknown dtype 'F13'
65 numel-overflow.safetensors element count overflows
65 lying-length.safetensors span 12 bytes, shape and dtype need 16
65 bad-json.safetensors not valid JSON
65 wrong-shape.safetensors shape 5 disagrees with the config (4)
66 noconfig no config.json beside it
66 nonexistent.h5 No such file or directory
CASES

while read -r code file pattern; do
	for tool in sw-ls sw-norms sw-spectrum; do
		test_expect_success "$tool: $file: exit $code, '$pattern'" "
			expect_error $tool $code \"\$B/$file\" \"$pattern\"
		"
	done
	test_expect_success "sw-convert: $file: exit $code, '$pattern', nothing written" "
		expect_convert_error $code \"\$B/$file\" \"$pattern\"
	"
done <cases

# Data errors only a reader of the values sees: that tensor is named and
# left out, the other tensors are printed
for f in nan.h5 inf.h5 nan.safetensors; do
	for tool in sw-norms sw-spectrum; do
		test_expect_success "$tool: $f: exit 65, NaN or Inf named, no row for it" "
			test_expect_code 65 $tool \"\$B/$f\" >out 2>err &&
			test_one_error $tool \"\$B/$f\" &&
			grep -q 'down_proj.weight: 1 of 24 values are NaN or Inf' err &&
			! grep -q down_proj out && grep -q up_proj out
		"
	done
done

test_expect_success 'a directory that is no model: exit 66' '
	mkdir empty-dir &&
	expect_error sw-norms 66 empty-dir "is a directory" &&
	expect_error sw-ls 66 empty-dir "is a directory"
'

test_expect_success 'a FIFO is refused, never read (no hang)' '
	mkfifo fifo &&
	expect_error sw-norms 66 fifo "not a regular file"
'

test_expect_success 'a device is refused' '
	expect_error sw-ls 66 /dev/zero "not a regular file"
'

if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
	# root reads anything: run the tool as nobody
	as_user() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
else
	as_user() { "$@"; }
fi
test_expect_success 'permission denied: exit 66' '
	cp "$FIX/tiny.h5" secret.h5 && chmod 000 secret.h5 &&
	test_expect_code 66 as_user "$SW_BIN/sw-norms" secret.h5 >out 2>err &&
	test_one_error sw-norms secret.h5 && grep -q "Permission denied" err
'

test_expect_success 'the good file after a bad one is still processed' '
	test_expect_code 65 sw-norms "$B/overlap.safetensors" "$FIX/wide.h5" >out 2>err &&
	test_line_count = 11 out && test_line_count = 1 err
'

# ---- the other readers: traces, sweeps, runs, token files, tokenizers ----

test_expect_success 'setup: v8.llmc, token ids below 8 (the bad fixtures vocabulary)' '
	"$PY" -c "
import struct
n = 600
open(\"v8.llmc\", \"wb\").write(struct.pack(\"<256i\", 20240520, 1, n, *[0] * 253)
                           + struct.pack(\"<%dH\" % n, *[(3 * i) % 8 for i in range(n)]))"
'

for tool in sw-sharpness sw-qkdrift sw-transfer sw-trace; do
	test_expect_success "$tool: truncated.h5: exit 65, 'truncated'" "
		expect_error $tool 65 \"\$B/truncated.h5\" 'truncated'
	"
done

test_expect_success 'sw-trace: a checkpoint is not a trace: exit 65' '
	expect_error sw-trace 65 "$FIX/tiny.h5" "not a trace" &&
	expect_error sw-trace 65 "$B/trace.h5" "missing group /series"
'

test_expect_success 'sw-sharpness --data: NaN in a weight is named, exit 65' '
	test_expect_code 65 sw-sharpness --data v8.llmc "$B/nan.h5" >out 2>err &&
	test_one_error sw-sharpness "$B/nan.h5" &&
	grep -q "down_proj.weight: 1 of 24 values are NaN or Inf" err &&
	test_expect_code 65 sw-sharpness --data v8.llmc "$B/inf.h5" >out 2>err &&
	grep -q "NaN or Inf" err
'

# a reparameterized gain whose direction is all zeros: OR divides by its
# RMS, so the gain is 0/0; every tool that builds the model says which
# gain, before any pass through it (the file made from a trained one)
test_expect_success 'a reparameterized gain that is 0/0: named by each tool that builds the model, exit 65' '
	sw-train --data "$FIX/corpus.txt" --out rp --steps 1 --batch 2 --seq-len 16 --d-model 16 \
		--n-layers 1 --n-heads 2 --scale-reparam or --trace "" --threads 1 >/dev/null &&
	"$PY" -c "
import h5py
with h5py.File(\"rp/ckpt-000001.h5\", \"r+\") as f:
    f[\"params/model.norm.direction\"][...] = 0
" &&
	for tool in "sw-sharpness --recompute --data $FIX/corpus.txt --batch-tokens 32 --seq-len 16" \
		"sw-hessian --data $FIX/corpus.txt --batch-tokens 32 --seq-len 16" \
		"sw-train --data $FIX/corpus.txt --out rp2 --steps 2 --resume"; do
		test_expect_code 65 $tool rp/ckpt-000001.h5 >out 2>err &&
		test_one_error ${tool%% *} rp/ckpt-000001.h5 &&
		grep -q "model.norm.weight: its direction and magnitude give a gain that is not finite" err ||
			return 1
	done &&
	! test -e rp2
'

# a NaN in a tied embedding: one fault, one line, though the embedding is
# read for the head's rows too (llama2.c's shared classifier; the same
# tensor in the F32 safetensors copy, which ties the head)
test_expect_success 'a NaN in a tied embedding: one line from each tool, exit 65' '
	cp "$FIX/real/stories260K.bin" tied-nan.bin &&
	printf "\000\000\300\177" | dd of=tied-nan.bin bs=1 seek=56 conv=notrunc 2>/dev/null &&
	for tool in sw-norms sw-spectrum; do
		test_expect_code 65 $tool tied-nan.bin >out 2>err &&
		test_one_error $tool tied-nan.bin &&
		grep -q "model.embed_tokens.weight: 1 of 32768 values are NaN or Inf" err || exit 1
	done &&
	test_expect_code 65 sw-sharpness --data v8.llmc --seq-len 4 --batch-tokens 8 tied-nan.bin >out 2>err &&
	test_one_error sw-sharpness tied-nan.bin
'

# traces whose steps do not increase, or whose series have other row
# counts than step (a closed trace): refused by the trace reader, so by
# every tool that reads traces, naming the series
if have_python_modules h5py; then
	test_expect_success 'traces: steps out of order or repeated, a series short of rows: exit 65' '
		"$SW_BIN/../tests/unit/mktrace" -q 0.25 -n 6 good.h5 >/dev/null &&
		for bad in down:"[0, 10, 20, 15, 40, 50]" same:"[0, 10, 20, 20, 40, 50]" \
			negative:"[-10, 10, 20, 30, 40, 50]"; do
			cp good.h5 ${bad%%:*}.h5 &&
			"$PY" -c "import h5py, sys; f = h5py.File(sys.argv[1], \"r+\"); f[\"series/step\"][:] = ${bad#*:}" \
				${bad%%:*}.h5 || exit 1
		done &&
		cp good.h5 short.h5 &&
		"$PY" -c "import h5py, sys; f = h5py.File(sys.argv[1], \"r+\"); f[\"series/loss\"].resize((2,))" short.h5 &&
		for tool in sw-trace sw-qkdrift; do
			expect_error $tool 65 down.h5 "/series/step: row 3 is step 15 after 20: steps must increase" &&
			expect_error $tool 65 same.h5 "/series/step: row 3 is step 20 after 20" &&
			expect_error $tool 65 negative.h5 "/series/step: row 0 is step -10, below 0" &&
			expect_error $tool 65 short.h5 "/series/loss has 2 rows and /series/step 6" || exit 1
		done &&
		sw-trace good.h5 >out && test_line_count = 7 out
	'
else
	test_skip 'traces: steps out of order, a series short of rows' 'no python3-h5py'
fi

# a file no reader claims: one line saying what it looks like, exit 65
# (never "no config.json beside it" from the safetensors reader it used
# to fall to), config.json beside it or not
test_expect_success 'not a checkpoint: text, binary, a big-endian llama2.c magic, GGML: exit 65' '
	awk "BEGIN { for (i = 0; i < 100; i++) printf \"x\" }" >x100 &&
	printf "GGUX\003\000\000\000\001\002" >gx &&
	printf "\141\153\064\062\000\000\000\000\000\000" >be &&
	printf "tjgg\001\000\000\000\000\000" >ggjt &&
	printf "\037\213\010\000\000\000\000\000\000\000" >gz &&
	cat >cases <<-\EOF &&
	x100 text
	gx its first bytes are 47 47 55 58 03 00 00 00
	be llama2.c.s magic in big-endian byte order
	ggjt a GGML/GGJT file, llama.cpp.s format before GGUF
	gz gzip-compressed
	EOF
	while read -r f what; do
		for tool in sw-ls sw-norms; do
			expect_error $tool 65 $f "not a checkpoint scalewatch reads (HDF5, safetensors, PyTorch, GGUF, llama2.c): $what" ||
				exit 1
		done
	done <cases &&
	mkdir hf && cp x100 hf/model.safetensors && cp "$FIX/tiny-hf/config.json" hf/ &&
	expect_error sw-norms 65 hf "not a checkpoint scalewatch reads (HDF5, safetensors, PyTorch, GGUF, llama2.c): text"
'

# names read from stdin: a line no file name can be is refused, named by
# its line number (not echoed back); a name is shown with its control
# bytes escaped
test_expect_success 'a name list on stdin: NUL, a line longer than a path: exit 65, one short line' '
	printf "\000\377\376\n" >nul.list &&
	test_expect_code 65 sw-transfer - <nul.list >out 2>err &&
	test_one_error sw-transfer "stdin: line 1" && grep -q "a NUL byte in a file name" err &&
	test_expect_code 65 sw-ls <nul.list >out 2>err && test_one_error sw-ls "stdin: line 1" &&
	awk "BEGIN { printf \"\\n\"; for (i = 0; i < 100000; i++) printf \"aaaaaaaaaa\"; print \"\" }" >long.list &&
	test_expect_code 65 sw-norms <long.list >out 2>err &&
	test_one_error sw-norms "stdin: line 2" && grep -q "1000000 bytes, more than a path can have" err &&
	test $(wc -c <err) -lt 200
'

test_expect_success 'a name with control bytes: escaped in the message' '
	printf "x\033[31m\n" >esc.list &&
	test_expect_code 66 sw-norms <esc.list >out 2>err &&
	test_line_count = 1 err && grep -q "^sw-norms: x\\\\x1b\[31m: No such file or directory\$" err
'

test_expect_success 'sw-sharpness: no /fisher and no --data: exit 64' '
	expect_error sw-sharpness 64 "$FIX/tiny.h5" "no /fisher in the checkpoint: give --data"
'

test_expect_success 'sw-qkdrift: NaN in a q projection: exit 65, the head named' '
	expect_error sw-qkdrift 65 "$B/nan-q.h5" "layer 0 head 0: the q/k projections"
'

test_expect_success 'sw-qkdrift: checkpoints of two models: exit 65' '
	test_expect_code 65 sw-qkdrift "$FIX/tiny.h5" "$FIX/wide.h5" >out 2>err &&
	test_one_error sw-qkdrift "$FIX/wide.h5" && grep -q "another model" err
'

test_expect_success 'sw-transfer: a checkpoint without /optim: exit 65' '
	expect_error sw-transfer 65 "$FIX/tiny.h5" "/optim: missing attribute"
'

# sw-train: every data error is found before anything is written
train_error() {
	code=$1 data=$2 pattern=$3
	shift 3
	test_expect_code "$code" sw-train --data "$data" --steps 2 --out run "$@" >out 2>err &&
	test_one_error sw-train "$data" && grep -q -- "$pattern" err &&
	test_line_count = 0 out && ! test -e run
}

test_expect_success 'sw-train: a token file whose count disagrees with its size: exit 65' '
	train_error 65 "$B/tokens-count.llmc" "header says 32778 tokens, the file holds 100"
'

test_expect_success 'sw-train: token ids >= --vocab: exit 65' '
	train_error 65 "$FIX/corpus.llmc" "token id 121 is not below the vocabulary size 16" --vocab 16
'

test_expect_success 'sw-train: an empty token file: exit 65' '
	: >empty.llmc && train_error 65 empty.llmc "empty file"
'

test_expect_success 'sw-train: --data a directory, a FIFO, nothing: exit 66, no hang' '
	mkdir dir && train_error 66 dir "not a regular file" &&
	mkfifo tokfifo && train_error 66 tokfifo "not a regular file" &&
	train_error 66 nonexistent.llmc "No such file or directory"
'

test_expect_success 'sw-train --resume: a truncated checkpoint: exit 65' '
	test_expect_code 65 sw-train --data "$FIX/corpus.llmc" --resume "$B/truncated.h5" --out run >out 2>err &&
	test_one_error sw-train "$B/truncated.h5" && grep -q truncated err && ! test -e run
'

test_expect_success 'sw-train --out under a regular file: exit 73' '
	echo mine >afile &&
	test_expect_code 73 sw-train --data "$FIX/corpus.llmc" --steps 2 --out afile/run >out 2>err &&
	test_one_error sw-train afile/run && grep -q "Not a directory" err &&
	echo mine | cmp -s - afile
'

# sw-tokenize: tokenizer files and token files
test_expect_success 'setup: a tokenizer, tok.bpe' '
	sw-tokenize train --vocab 300 -o tok.bpe "$FIX/corpus.txt" >/dev/null
'

test_expect_success 'sw-tokenize: a tokenizer that is no tokenizer: exit 65' '
	test_expect_code 65 sw-tokenize encode -t "$B/truncated.h5" -o x.tok "$FIX/corpus.txt" >out 2>err &&
	test_one_error sw-tokenize "$B/truncated.h5" && grep -q "not a scalewatch BPE tokenizer" err &&
	! test -e x.tok
'

test_expect_success 'sw-tokenize: a truncated tokenizer: exit 65, the line named' '
	head -c 60 tok.bpe >trunc.bpe &&
	test_expect_code 65 sw-tokenize encode -t trunc.bpe -o x.tok "$FIX/corpus.txt" >out 2>err &&
	test_one_error sw-tokenize trunc.bpe && grep -q "line 5: no newline at the end" err &&
	! test -e x.tok
'

test_expect_success 'sw-tokenize decode: a token count that lies: exit 65' '
	test_expect_code 65 sw-tokenize decode -t tok.bpe -o text "$B/tokens-count.llmc" >out 2>err &&
	test_one_error sw-tokenize "$B/tokens-count.llmc" && grep -q "header says 32778 tokens" err &&
	! test -e text
'

test_expect_success 'sw-tokenize decode: an id >= the vocabulary: exit 65' '
	"$PY" -c "
import struct
open(\"big.llmc\", \"wb\").write(struct.pack(\"<256i\", 20240520, 1, 50, *[0] * 253)
                              + struct.pack(\"<50H\", *([5] * 49 + [4000])))" &&
	echo mine >text &&
	test_expect_code 65 sw-tokenize decode --force -t tok.bpe -o text big.llmc >out 2>err &&
	test_one_error sw-tokenize big.llmc && grep -q "id 4000 is not below the vocabulary size 300" err &&
	echo mine | cmp -s - text
'

test_expect_success 'sw-tokenize: a directory as tokenizer or input: exit 66' '
	mkdir -p tdir &&
	test_expect_code 66 sw-tokenize encode -t tdir -o x.tok "$FIX/corpus.txt" >out 2>err &&
	test_one_error sw-tokenize tdir &&
	test_expect_code 66 sw-tokenize encode -t tok.bpe -o x.tok tdir >out 2>err &&
	test_one_error sw-tokenize tdir && ! test -e x.tok
'

test_expect_success 'sw-plot: a TSV that is binary garbage: exit 65, no figure' '
	head -c 4096 "$FIX/tiny.h5" >garbage.tsv &&
	test_expect_code 65 sw-plot norms garbage.tsv -o fig.png >out 2>err &&
	test_line_count = 1 err && ! test -e fig.png
'

# ---- disk full: a 64 KiB tmpfs when we may mount one, else ulimit -f ----
# Each writer: exit 74, one line naming the file, nothing under the final
# name (or the user's earlier file there, byte for byte), no temporary file.
mkdir -p full
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=64k tmpfs full 2>/dev/null; then
	FULL_HOW=tmpfs
	# what is left of the 64 KiB after the users' earlier files: nothing
	fill_disk() { cat /dev/zero >full/filler 2>/dev/null; true; }
	limited() { "$@"; }
else
	FULL_HOW=ulimit
	fill_disk() { true; }
	limited() { (ulimit -f 1 && exec "$@"); }
fi
no_temp_left() { ! ls -a full | grep -q '\.tmp'; }

test_expect_success "disk full ($FULL_HOW): sw-train's checkpoint: exit 74, nothing left" '
	test_expect_code 74 limited sw-train --data "$FIX/corpus.llmc" --steps 2 --ckpt-every 1 \
		--d-model 64 --trace "" --eval-every 0 --out full/run >out 2>err &&
	test_one_error sw-train full/run/ckpt-000001.h5 &&
	test -z "$(ls full/run)" && no_temp_left
'

# the trace is the run's log, written as it goes: it keeps the rows
# flushed before the disk filled, and sw-trace reads them (a trace that
# could not be started is removed)
test_expect_success "disk full ($FULL_HOW): sw-train's trace: exit 74, the rows before kept" '
	test_expect_code 74 limited sw-train --data "$FIX/corpus.llmc" --steps 300 --ckpt-every 0 \
		--d-model 16 --eval-every 0 --trace-every 1 --out full/run2 >out 2>err &&
	test_one_error sw-train full/run2/trace.h5 && test $(wc -c <err) -lt 200 &&
	{ ! test -e full/run2/trace.h5 ||
	  { sw-trace full/run2/trace.h5 >rows && test $(wc -l <rows) -lt 301; }; } &&
	rm -rf full/run2
'

rm -f full/filler
test_expect_success "disk full ($FULL_HOW): sw-tokenize train and encode keep the earlier files" '
	sw-tokenize train --vocab 300 -o tok300.bpe "$FIX/corpus.txt" &&
	sw-tokenize encode -t tok300.bpe -o enc.tok "$FIX/corpus.txt" &&
	echo "the user s tokenizer" >full/tok.bpe && echo "the user s tokens" >full/x.tok &&
	cp full/tok.bpe keep.bpe && cp full/x.tok keep.tok && fill_disk &&
	test_expect_code 74 limited sw-tokenize train --force --vocab 300 -o full/tok.bpe "$FIX/corpus.txt" >out 2>err &&
	test_one_error sw-tokenize full/tok.bpe && test_cmp keep.bpe full/tok.bpe &&
	test_expect_code 74 limited sw-tokenize encode --force -t tok300.bpe -o full/x.tok "$FIX/corpus.txt" >out 2>err &&
	test_one_error sw-tokenize full/x.tok && test_cmp keep.tok full/x.tok && no_temp_left
'
rm -f full/filler

test_expect_success "disk full ($FULL_HOW): sw-plot keeps the earlier figure" '
	sw-norms "$FIX/tiny.h5" >norms.tsv &&
	echo "the user s figure" >full/fig.png && cp full/fig.png keep.png && fill_disk &&
	test_expect_code 74 limited sw-plot --force norms norms.tsv -o full/fig.png >out 2>err &&
	grep "^sw-plot:" err >err1 && mv err1 err &&
	test_one_error sw-plot full/fig.png && test_cmp keep.png full/fig.png && no_temp_left
'

rm -f full/filler
test_expect_success "disk full ($FULL_HOW): sw-convert both ways: exit 74, nothing under the final names" '
	sw-convert "$FIX/tiny.h5" st-export >/dev/null && fill_disk &&
	test_expect_code 74 limited sw-convert "$FIX/wide.h5" full/export >out 2>err &&
	test_line_count = 1 err && grep -q "^sw-convert: full/export" err &&
	test_expect_code 74 limited sw-convert st-export full/back.h5 >out 2>err &&
	test_one_error sw-convert full/back.h5 &&
	! ls full | grep -q "^export\|^back" && no_temp_left
'
rm -f full/filler

test_expect_success "disk full ($FULL_HOW): a table on stdout: exit 74" '
	test_expect_code 74 limited sh -c "sw-spectrum \"\$1\" >full/spectrum.tsv" sh "$FIX/tiny.h5" 2>err &&
	test_line_count = 1 err && grep -q "write error" err
'
rm -f full/filler
[ "$FULL_HOW" = tmpfs ] && umount full

# (a shell starts background commands with SIGINT ignored: perl restores it;
# the writer's end opens without blocking: a reader killed already is none)
test_expect_success 'killed while writing (SIGTERM, SIGINT, SIGHUP): no temporary file left' '
	for sig in TERM:143 INT:130 HUP:129; do
		code=${sig#*:} sig=${sig%:*}
		rm -f fifo-in && mkfifo fifo-in &&
		{ perl -e "\$SIG{INT} = q(DEFAULT); exec @ARGV" \
			sw-tokenize train --vocab 300 -o killed.bpe fifo-in >out 2>err & } &&
		pid=$! && n=0 &&
		while ! ls | grep -q "^killed.bpe.tmp." && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done &&
		ls | grep -q "^killed.bpe.tmp." &&
		kill -$sig $pid &&
		perl -MFcntl -e "sysopen(my \$f, q(fifo-in), O_WRONLY | O_NONBLOCK)" &&
		{ wait $pid; st=$?; } && test $st = $code &&
		! ls | grep -q "^killed.bpe" || exit 1
	done
'

test_done
