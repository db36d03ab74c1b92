#!/bin/sh
# One open per checkpoint: the tools that build a model (sw-sharpness,
# sw-hessian, sw-train --resume) open each file of a checkpoint once in a
# run and pass the open checkpoint down (an index and its shards, a
# pickle, an HDF5 file: each parsed once). Counted as the openat() calls
# strace sees on the checkpoint's files; skipped where strace is absent
# or ptrace is not permitted (a container without CAP_SYS_PTRACE).
. "$(dirname "$0")/../lib/tap.sh"

if ! command -v strace >/dev/null 2>&1 || ! strace -f -o /dev/null true 2>/dev/null; then
	test_skip 'one open per checkpoint' 'strace is absent or ptrace is not permitted'
	test_done
fi

# LeakSanitizer cannot run under ptrace (it stops the process to scan
# it): under make check-asan the traced runs keep ASan and UBSan but not
# the leak check (each of these tools has its leaks checked in its own
# scripts, untraced)
if [ -n "${SW_SANITIZED:-}" ]; then
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
	export ASAN_OPTIONS
fi

# counts LOG: each file of the checkpoint the run opened successfully
# (its path below the test's directory or the fixtures) and how often,
# into counts. The measure of one open is sw-ls's, which opens each
# operand once: one open of a directory reads its index three times
# (finding it, ckpt.c sniffing which reader takes it, the reader) and
# its first shard twice (sniffed, read), so the counts are compared
# with sw-ls's on the same checkpoint, not with 1.
counts() {
	grep -E "open(at)?\(" "$1" | grep -v ENOENT |
	sed -n "s/.*\"\([^\"]*\(ckpt-[0-9]*\.h5\|\.safetensors\|index\.json\|ckpt\.pt\)\)\".*/\1/p" |
	sort | uniq -c >counts
}

# one_open CKPT TOOL ARGS...: TOOL ARGS CKPT opens CKPT's files as often
# as sw-ls CKPT does
one_open() {
	ck=$1 && shift &&
	strace -f -e trace=openat,open -o ls.log sw-ls "$ck" >ls.out &&
	counts ls.log && mv counts ls.counts && test -s ls.counts &&
	strace -f -e trace=openat,open -o log "$@" "$ck" >out 2>err &&
	counts log && test_cmp ls.counts counts
}

DATA="--data small.txt --batch-tokens 64 --seq-len 16"

test_expect_success 'setup: a run with Adam moments, tokens the tiny models read' '
	awk "BEGIN { srand(1); for (i = 0; i < 3000; i++) printf \"%c\", 1 + int(rand() * 46) }" >small.txt &&
	sw-train --data small.txt --out run --batch 4 --seq-len 16 --d-model 16 --n-layers 1 \
		--n-heads 2 --steps 4 --ckpt-every 2 --trace "" --threads 1 >/dev/null &&
	test -f run/ckpt-000002.h5 && test -f run/ckpt-000004.h5
'

test_expect_success 'sw-ls opens an HDF5 checkpoint once (the measure)' '
	strace -f -e trace=openat,open -o log sw-ls run/ckpt-000004.h5 >out &&
	counts log && echo "      1 run/ckpt-000004.h5" >expect && test_cmp expect counts
'

test_expect_success 'sw-sharpness: an HDF5 checkpoint opened once' '
	one_open run/ckpt-000004.h5 sw-sharpness $DATA
'

test_expect_success 'sw-sharpness: an index and its shards, one open' '
	one_open "$FIX/tiny-hf-sharded" sw-sharpness $DATA
'

test_expect_success 'sw-sharpness --low-memory: the stream reads the one open checkpoint' '
	one_open run/ckpt-000004.h5 sw-sharpness --low-memory $DATA
'

test_expect_success 'sw-sharpness: a pickle opened once' '
	one_open "$FIX/tiny-pt/ckpt.pt" sw-sharpness $DATA
'

test_expect_success 'sw-hessian --preconditioned: model, lr and moments from one open' '
	one_open run/ckpt-000004.h5 sw-hessian $DATA --top 1 --max-steps 4 --preconditioned &&
	test -s out
'

test_expect_success 'sw-hessian: an index and its shards, one open' '
	one_open "$FIX/tiny-hf-sharded" sw-hessian $DATA --top 1 --max-steps 4 &&
	test -s out
'

test_expect_success 'sw-train --resume: the checkpoint resumed from opened once' '
	strace -f -e trace=openat,open -o log sw-train --resume run/ckpt-000002.h5 \
		--data small.txt --out resumed --steps 4 --trace "" --threads 1 >/dev/null &&
	counts log && grep "run/ckpt-000002.h5" counts >resumed.counts &&
	echo "      1 run/ckpt-000002.h5" >expect && test_cmp expect resumed.counts
'

test_done
