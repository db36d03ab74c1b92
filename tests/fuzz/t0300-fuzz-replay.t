#!/bin/sh
# The fuzz targets' committed seeds (tests/fuzz/corpus/NAME) and the
# inputs of every crash they found (tests/fuzz/regress/NAME), replayed
# through each target's checks by a gcc build (build*/tests/fuzz/replay-NAME,
# made by `make unit`): no clang needed, and under check-asan with the
# sanitizers. A failed invariant aborts the replay.
. "$(dirname "$0")/../lib/tap.sh"

FZ=$SW_TOP/tests/fuzz
for t in st-header st-index st-config tokens h5ckpt tokenizer pickle ptzip gguf llama2c; do
	test_expect_success "fuzz-$t: seeds and regressions replay" '
		set -- "$FZ/corpus/'$t'" &&
		if [ -d "$FZ/regress/'$t'" ]; then set -- "$@" "$FZ/regress/'$t'"; fi &&
		(cd "$SW_TOP" && "$SW_BIN/../tests/fuzz/replay-'$t'" "$@") >out &&
		grep -q "^replay: [1-9][0-9]* inputs" out
	'
done
test_done
