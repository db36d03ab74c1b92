#!/bin/sh
# Bad input: each malformed file (fixtures/bad, made by gen-fixtures) gives
# one line on stderr, "TOOL: FILE: what is wrong", and the documented exit
# status; nothing but the header on stdout. Under check-asan the same runs
# must give no sanitizer report (a report changes the exit status).
. "$(dirname "$0")/../lib/tap.sh"

B=$FIX/bad

# expect_error TOOL CODE FILE PATTERN: the tool fails on FILE alone
expect_error() {
	test_expect_code "$2" "$1" "$3" >out 2>err &&
	test_one_error "$1" "$3" &&
	grep -q -- "$4" err &&
	test_line_count -le 1 out
}

while read -r code file pattern; do
	for tool in sw-ls sw-norms sw-spectrum; do
		test_expect_success "$tool: $file: exit $code, '$pattern'" "
			expect_error $tool $code \"\$B/$file\" \"$pattern\"
		"
	done
done <<'CASES'
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
65 gpt2 architecture 'GPT2LMHeadModel' is not supported
66 noconfig no config.json beside it
66 nonexistent.h5 No such file or directory
CASES

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

test_done
