#!/bin/sh
# sw-norms against an independent implementation: numpy (float64, full
# SVD) on the tensors read with h5py, and a safetensors reader written in
# Python (BF16 decoded by numpy). Skipped when numpy or h5py is missing.
. "$(dirname "$0")/../lib/tap.sh"

REF=$SW_TOP/tests/e2e/norms_reference.py

# 1e-6 relative: numpy works in float64 on the same float32 values; ours
# sums rows, columns and squares in double and stops Lanczos for sigma_max
# at 1e-6 relative (NORMS_SIGMA_REL_TOL), the dense path in double

if ! have_python_modules "numpy, h5py"; then
	test_skip 'numpy cross-check' 'python3-numpy or python3-h5py not installed'
	test_done
fi

for f in tiny.h5 wide.h5 tiny-hf tiny-hf-bf16; do
	test_expect_success "$f: sw-norms = numpy to 1e-6" "
		\"\$PY\" \"\$REF\" \"\$FIX/$f\" >expect &&
		sw-norms \"\$FIX/$f\" >norms && sed 1d norms | cut -f4,6,8-16 >actual &&
		numbers_close 1e-6 expect actual
	"
done

test_expect_success 'a checkpoint written by h5py (variable-length strings, any int types)' '
	"$PY" "$SW_TOP/bench/mkckpt.py" h5py.h5 --vocab 300 --d 256 --layers 2 --spike 1 &&
	"$PY" "$REF" h5py.h5 >expect &&
	sw-norms h5py.h5 >norms && sed 1d norms | cut -f4,6,8-16 >actual &&
	test_line_count = 11 actual &&
	numbers_close 1e-6 expect actual
'

test_done
