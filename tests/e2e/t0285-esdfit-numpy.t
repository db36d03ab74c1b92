#!/bin/sh
# sw-spectrum --esd-fit against the same statistics written with numpy in
# the test's reference (tests/e2e/esdfit_reference.py: the
# Clauset-Shalizi-Newman power law by a scan of every candidate x_min, the
# Marchenko-Pastur median by another quadrature), on the same eigenvalues
# (the singular values sw-spectrum prints): every column to 1e-6 relative,
# the counts (tail, spikes) and the warn labels equal, on the committed
# fixtures, a trained run and a wider one at initialization (tails on both
# sides of 50). Skipped without numpy.
. "$(dirname "$0")/../lib/tap.sh"

REF=$SW_TOP/tests/e2e/esdfit_reference.py

# 1e-6 relative: the reference fits the singular values as printed (9
# digits, 5e-10 relative), ours the doubles they were printed from; both
# fit in double, and the counts (tail, spikes) must be equal for the
# columns to agree at all

if ! have_python_modules "numpy"; then
	test_skip 'numpy cross-check of --esd-fit' 'python3-numpy not installed'
	test_done
fi

test_expect_success 'setup: a trained run' '
	sw-train --data "$FIX/corpus.txt" --out run --steps 150 --d-model 64 --n-layers 1 --batch 8 \
		--seq-len 32 --lr 3e-3 --trace "" --threads 1 >/dev/null &&
	sw-train --data "$FIX/corpus.txt" --out wide --steps 1 --d-model 256 --n-layers 1 --n-heads 4 \
		--batch 1 --seq-len 8 --eval-every 0 --trace "" --threads 1 >/dev/null
'

for f in "$FIX/tiny.h5" "$FIX/wide.h5" run/ckpt-000150.h5 wide/ckpt-000001.h5; do
	test_expect_success "$(basename "$f"): every matrix's fit = numpy's on its eigenvalues (1e-6)" "
		sw-spectrum \"$f\" >values &&
		sw-ls \"$f\" >ls &&
		sw-spectrum --esd-fit \"$f\" >ours &&
		\"\$PY\" \"\$REF\" values ls >ref &&
		cut -f3,7-19,22 ours | sed 1d >ours.cut &&
		test_line_count -gt 3 ref &&
		numbers_close 1e-6 ref ours.cut
	"
done

test_done
