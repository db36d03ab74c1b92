#!/bin/sh
# sw-sharpness against an independent implementation in PyTorch (float64,
# tests/e2e/sharpness_reference.py) given the same checkpoint, inputs and
# sampled labels (--dump-labels): the per-tensor and per-type means of
# h = N g^2 match to 1e-5 relative, and the exact zeros are the same.
# Skipped without python3-torch (CI installs it).
. "$(dirname "$0")/../lib/tap.sh"

REF=$SW_TOP/tests/e2e/sharpness_reference.py

if ! have_python_modules "torch, h5py, numpy"; then
	test_skip 'PyTorch cross-check' 'python3-torch not installed'
	test_done
fi

# compare NAME NPARAMS MEAN ZEROS lines, sorted by name: the counts exactly,
# the means to 1e-5 relative (our float32 gradients are ~1e-6 from the
# float64 ones, their squares ~2e-6; the means are summed in double)
compare() {
	sort "$1" >a.sorted && sort "$2" >b.sorted &&
	join -t "$(printf '\t')" a.sorted b.sorted | awk -F'\t' '
		{ d = $3 - $6; if (d < 0) d = -d; if (d > 1e-5 * $6 + 1e-30 || $2 != $5 || $4 != $7) { print; bad = 1 } n++ }
		END { if (n < 10) { print "only " n " tensors"; bad = 1 } exit bad }'
}

while IFS='|' read -r name flags; do
	test_expect_success "$name: GNB per tensor matches PyTorch" "
		rm -rf run &&
		sw-train --data \"\$FIX/corpus.txt\" --out run --steps 8 --batch 4 --seq-len 16 --trace '' $flags >/dev/null &&
		sw-sharpness --recompute --data \"\$FIX/corpus.txt\" --batch-tokens 96 --seq-len 16 --draws 3 \
			--force --dump-labels labels.h5 --per-tensor run/ckpt-000008.h5 >ours &&
		awk -F'\t' 'NR > 1 { print \$3 \"\t\" \$7 \"\t\" \$8 \"\t\" \$14 }' ours >ours.cut &&
		\"\$PY\" \"\$REF\" run/ckpt-000008.h5 labels.h5 >ref &&
		compare ref ours.cut
	"
done <<'VARIANTS'
GQA, untied|--d-model 32 --n-layers 2 --n-heads 4 --n-kv-heads 2
tied, QK-norm|--d-model 32 --n-layers 2 --n-heads 4 --tie --qk-norm
row multipliers, norm-everywhere|--d-model 24 --n-layers 1 --n-heads 2 --multipliers row --norm-everywhere
VARIANTS

# micro-batches add the float32 gradients of the sequences in another
# order (a few ulps over 6 sequences, ~1e-7 relative; squared, twice
# that): 1e-5 relative
test_expect_success 'micro-batches give the same estimate as one pass' '
	sw-train --data "$FIX/corpus.txt" --out mb --steps 8 --batch 4 --seq-len 16 --trace "" \
		--d-model 24 --n-layers 1 --n-heads 2 --multipliers row --norm-everywhere >/dev/null &&
	sw-sharpness --recompute --data "$FIX/corpus.txt" --batch-tokens 96 --seq-len 16 --draws 2 \
		--per-tensor mb/ckpt-000008.h5 >one &&
	sw-sharpness --recompute --data "$FIX/corpus.txt" --batch-tokens 96 --seq-len 16 --draws 2 \
		--micro-batch 2 --per-tensor mb/ckpt-000008.h5 >two &&
	numbers_close 1e-5 one two
'

test_done
