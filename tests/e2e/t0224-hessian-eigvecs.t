#!/bin/sh
# sw-hessian's lambda_min and --eigenvectors against PyTorch in float64
# (tests/e2e/hessian_reference.py: the dense block Hessian by autograd,
# torch.linalg.eigh) on tiny models, on the same batch (--dump-batch):
#   - lambda_min of every block type and of the whole model, within 1e-3
#     relative of the smallest eigenvalue (a floor of 1e-7 lambda_max of
#     the whole model, and twice its own bound_min): the Hessian, Adam's
#     preconditioned Hessian, a model with reparameterized gains;
#   - each block's top 3 eigenvectors, read by h5py from the file per
#     tensor: unit norm, the largest-magnitude entry positive, the
#     recorded eigenvalue the reference's, and |cos| with the reference's
#     eigenvector at least 1 - 1e-5 wherever the eigenvalue's gap to the
#     rest of the spectrum is at least 1e-2 of the block's largest |lambda|.
# Skipped without python3-torch (CI installs it).
. "$(dirname "$0")/../lib/tap.sh"

REF=$SW_TOP/tests/e2e/hessian_reference.py

if ! have_python_modules "torch, functorch, h5py, numpy"; then
	test_skip 'PyTorch cross-check' 'python3-torch not installed'
	test_done
fi

HS="--data c24 --batch-tokens 32 --seq-len 16"

test_expect_success 'setup: a text of 24 symbols, two tiny models, our numbers and vectors, the reference'"'"'s' '
	LC_ALL=C tr -c "a-w" "x" <"$FIX/corpus.txt" | LC_ALL=C tr "a-x" "\\000-\\027" >c24 &&
	sw-train --data c24 --out a --steps 40 --d-model 8 --n-layers 1 --n-heads 2 --n-kv-heads 1 \
		--d-ff 16 --batch 4 --seq-len 16 --lr 1e-2 --trace "" --threads 1 >/dev/null &&
	sw-train --data c24 --out c --steps 40 --d-model 8 --n-layers 1 --n-heads 2 --qk-norm \
		--scale-reparam attn=or,head=er --scale-design ffn=hg+dp,head=hg --d-ff 16 --batch 4 \
		--seq-len 16 --lr 1e-2 --trace "" --threads 1 >/dev/null &&
	for job in a-hessian a-preconditioned c-hessian; do
		run=${job%%-*} mode=${job#*-} &&
		case $mode in hessian) flag= ;; *) flag=--$mode ;; esac &&
		sw-hessian $HS $flag --tol 1e-6 --max-steps 300 --probes 2 --force --dump-batch batch-$job.h5 \
			--eigenvectors vec-$job.h5 $run/ckpt-000040.h5 >ours-$job &&
		echo "dense $run/ckpt-000040.h5 batch-$job.h5 $mode ref-$job" >>jobs &&
		echo "eigvecs $run/ckpt-000040.h5 batch-$job.h5 $mode vec-$job.h5 cos-$job" >>jobs || exit 1
	done &&
	"$PY" "$REF" jobs
'

for job in a-hessian a-preconditioned c-hessian; do
	# ours: block $3, lambda_min $16, bound_min $17; the reference's
	# smallest eigenvalue is its last field
	test_expect_success "$job: lambda_min of every block, to 1e-3 of the smallest eigenvalue" "
		awk -F'[\t ]' 'NR == FNR { if (FNR > 1) { l[\$3] = \$16; e[\$3] = \$17 } next }
			\$1 == \"all\" { top = \$3 < 0 ? -\$3 : \$3 }
			{ r[\$1] = \$NF }
			END { for (b in r) { d = l[b] - r[b]; if (d < 0) d = -d; m = r[b] < 0 ? -r[b] : r[b]
				if (!(b in l) || !(d <= 1e-3 * m + 1e-7 * top + 2 * e[b])) { print b, l[b], r[b]; bad = 1 } n++ }
				exit bad || n < 6 }' ours-$job ref-$job
	"
	# Davis-Kahan: sin(angle) <= ||residual|| / gap, the residual at most
	# the Lanczos bound (1e-6 of the scale at --tol 1e-6) plus the float32
	# products' error (below 1e-5 of the scale, t0280): at a gap of 1e-2
	# of the scale, sin <= 1.1e-3 and 1 - |cos| <= sin^2 / 2 < 1e-6, so
	# 1e-5 is ample; nearer eigenvalues may mix and are not checked. The
	# norm is the float32 entries' (about 1e-7 off); the eigenvalue is
	# within the bound plus the products' error, 1.1e-5 of the scale: 2e-5.
	test_expect_success "$job: eigenvectors unit, sign fixed, along the reference's where the gap is large" "
		awk '{ if (\$6 < 1 - 1e-6 || \$6 > 1 + 1e-6 || \$7 != 1) { print; bad = 1 }
			d = \$8 < 0 ? -\$8 : \$8; if (d > 2e-5 * \$5) { print; bad = 1 }
			if (\$4 >= 1e-2 * \$5) { if (\$3 < 1 - 1e-5) { print; bad = 1 } checked++ }
			n++ }
			END { exit bad || n < 18 || n % 3 || checked < 10 }' cos-$job
	"
done

test_done
