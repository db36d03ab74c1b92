#!/bin/sh
# sw-compare against numpy float64 (tests/e2e/compare_reference.py: every
# column from numpy's SVD of both matrices and the definitions of
# docs/numerics.md) on two checkpoints of one trained run, 100 steps
# apart, for k = 8 (the default), 3 and 64 (the whole smaller side); and a
# checkpoint against itself with one matrix doubled, whose change is known
# exactly. Skipped without numpy and h5py.
. "$(dirname "$0")/../lib/tap.sh"

REF=$SW_TOP/tests/e2e/compare_reference.py

if ! have_python_modules "numpy, h5py"; then
	test_skip 'numpy cross-check of sw-compare' 'python3-numpy or python3-h5py not installed'
	test_done
fi

test_expect_success 'setup: a trained run, checkpoints at steps 50, 100, 150' '
	sw-train --data "$FIX/corpus.txt" --out run --steps 150 --ckpt-every 50 --d-model 64 \
		--n-layers 1 --batch 8 --seq-len 32 --lr 3e-3 --trace "" --threads 1 >/dev/null &&
	test -f run/ckpt-000050.h5 && test -f run/ckpt-000150.h5
'

# the tolerance (1e-6 relative, 1e-8 absolute) is argued in the reference
for k in 8 3 64; do
	test_expect_success "step 50 against step 150, --top-k $k: every column = numpy's" "
		sw-compare --top-k $k run/ckpt-000050.h5 run/ckpt-000150.h5 >ours &&
		test_line_count = 10 ours &&
		\"\$PY\" \"\$REF\" run/ckpt-000050.h5 run/ckpt-000150.h5 $k ours
	"
done

test_expect_success 'the default k is 8, and the changes are real (not all zero)' '
	sw-compare run/ckpt-000050.h5 run/ckpt-000150.h5 >def &&
	awk -F"\t" "NR > 1 { if (\$12 != 8 || !(\$13 > 0.01) || !(\$20 < 0.999)) bad = 1 } END { exit bad }" def
'

# W -> 2W for one matrix: rel_change = 1, sigma_max doubles (+1), the
# stable rank and the subspaces are unchanged, alpha too (lambda scales by
# 4, the fit is scale-free). Doubling is exact in float32, the rest is
# the spectra's rounding: 1e-9. The other matrices: exactly no change.
test_expect_success 'one matrix doubled: rel_change 1, sigma_max_change 1, the rest unchanged' '
	cp run/ckpt-000150.h5 doubled.h5 &&
	"$PY" -c "
import h5py
with h5py.File(\"doubled.h5\", \"r+\") as f:
    d = f[\"params/model.layers.0.mlp.down_proj.weight\"]
    d[...] = 2 * d[...]
" &&
	sw-compare run/ckpt-000150.h5 doubled.h5 >d &&
	test_line_count = 10 d &&
	awk -F"\t" "function off(x, v) { e = x - v; return e < -1e-9 || e > 1e-9 }
		NR > 1 && \$7 == \"down\" { n++; bad += off(\$13, 1) || off(\$16, 1) || off(\$19, 0) ||
			off(\$20, 1) || off(\$21, 1) || off(\$22, 1) || off(\$23, 1) || off(\$26, 0) }
		NR > 1 && \$7 != \"down\" { bad += \$13 != 0 || \$20 != 1 || \$26 != 0 }
		END { exit bad || n != 1 }" d &&
	"$PY" "$REF" run/ckpt-000150.h5 doubled.h5 8 d
'

test_done
