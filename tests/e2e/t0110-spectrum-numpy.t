#!/bin/sh
# sw-spectrum against an independent implementation: numpy's SVD in
# float64 of the float32 matrices read with h5py (or a safetensors reader
# written in Python), and numpy's least squares for --fit. Skipped when
# numpy or h5py is missing.
. "$(dirname "$0")/../lib/tap.sh"

REF=$SW_TOP/tests/e2e/spectrum_reference.py

if ! have_python_modules "numpy, h5py"; then
	test_skip 'numpy cross-check of sw-spectrum' 'python3-numpy or python3-h5py not installed'
	test_done
fi

# the check's tolerances (spectrum_reference.py): the full spectrum is the
# Gram matrix's in double (dsyevd), whose error in sigma_i is ~1e-16
# sigma_max^2 / sigma_i, so 1e-5 relative down to 1e-4 sigma_max and 1e-6
# sigma_max below it; --top stops block Lanczos at 1e-6 relative
for f in tiny.h5 wide.h5 tiny-hf-bf16; do
	test_expect_success "$f: every spectrum = numpy's float64 SVD (>= 1e-4 sigma_max: 1e-5 relative)" "
		sw-spectrum \"\$FIX/$f\" >actual &&
		\"\$PY\" \"\$REF\" check \"\$FIX/$f\" actual
	"
done

test_expect_success 'tiny.h5 --per-head: every head slice = numpy' '
	sw-spectrum --per-head "$FIX/tiny.h5" >actual &&
	"$PY" "$REF" check "$FIX/tiny.h5" actual --per-head
'

# Gaussian matrices written by h5py: square ones reach sigma_min ~ 1e-4
# sigma_max, and min(rows, cols) = 256 takes --top to the Lanczos path
test_expect_success 'setup: a checkpoint written by h5py, d_model 256, vocab 300' '
	"$PY" "$SW_TOP/bench/mkckpt.py" h5py.h5 --vocab 300 --d 256 --layers 1 --spike 1
'

test_expect_success 'h5py checkpoint: full spectra = numpy' '
	sw-spectrum h5py.h5 >actual &&
	"$PY" "$REF" check h5py.h5 actual
'

test_expect_success 'h5py checkpoint: --top 5 (block Lanczos) = numpy within 1e-5' '
	sw-spectrum --top 5 h5py.h5 >actual &&
	"$PY" "$REF" check h5py.h5 actual --top 5
'

test_expect_success 'h5py checkpoint: --per-head (2 heads of 128) = numpy' '
	sw-spectrum --per-head h5py.h5 >actual &&
	"$PY" "$REF" check h5py.h5 actual --per-head
'

# the exponents are least-squares slopes of log sigma_max over log lr, wd
# and d, both in double; our sigma_max of these small matrices is the
# dense path's, in double (all 9 printed digits agree), and at worst
# Lanczos's, stopped at 1e-6 relative: 1e-6 relative on exponents of ~1
test_expect_success '--fit: the exponents = numpy lstsq on numpy sigma_max, to 1e-6' '
	sw-gen-fixtures --sweep sweep 0.9 0.7 0.02 &&
	"$PY" "$REF" fit sweep/*.h5 >ref && sort ref >expect &&
	sw-spectrum --fit sweep/*.h5 >fit &&
	awk -F"\t" "\$2 == \"sigma_top\" { print \$1 \"\t\" \$4 \"\t\" \$6 }" fit | sort >actual &&
	test_line_count = 9 actual &&
	numbers_close 1e-6 expect actual
'

test_done
