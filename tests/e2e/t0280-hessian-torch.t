#!/bin/sh
# sw-hessian against PyTorch in float64 (tests/e2e/hessian_reference.py,
# over torch_reference.py's independent Llama) on tiny models read from
# their checkpoints, on the same batch (--dump-batch):
#   - H v and G v (Gauss-Newton) of every tensor (tests/unit/mkhvp, the
#     R-operator in float32) against double backward: relative error at
#     most 1e-5 (measured: below 4e-7);
#   - lambda_1..3 of every block type's diagonal block and of the whole
#     model against eigvalsh of the dense matrix, to 1e-3 relative (a floor
#     of 1e-7 lambda_max for values near 0): the Hessian, the Gauss-Newton
#     matrix, Adam's preconditioned Hessian; eos_adam from that lambda_1;
#   - Hutchinson's trace (100 probes) within 3 standard errors of the exact trace;
#   - the same for a model whose gains are reparameterized (OR on the
#     attention's, ER on the head's, HG+DP on the MLP: the parameters are
#     the directions and magnitudes, the Hessian has gamma's second
#     derivatives);
#   - SLQ's first four moments sum_k w_k theta_k^p, per vector, averaged
#     over the vectors, within 3 standard errors of mean(lambda^p).
# Skipped without python3-torch (CI installs it).
. "$(dirname "$0")/../lib/tap.sh"

REF=$SW_TOP/tests/e2e/hessian_reference.py
MKHVP=$SW_BIN/../tests/unit/mkhvp

if ! have_python_modules "torch, functorch, h5py, numpy"; then
	test_skip 'PyTorch cross-check' 'python3-torch not installed'
	test_done
fi

HS="--data c24 --batch-tokens 32 --seq-len 16"

# eigs OURS REF: lambda_1..3 of each block agree (tests/lib/eigs.awk)
eigs() {
	awk -F'[\t ]' -f "$SW_TOP/tests/lib/eigs.awk" "$1" "$2"
}

# traces OURS REF: |trace - exact| <= 3 se (ours: trace $10, se $11)
traces() {
	awk -F'[\t ]' 'NR == FNR { if (FNR > 1) { t[$3] = $10; s[$3] = $11 } next }
		{ d = t[$1] - $6; if (d < 0) d = -d; if (!($1 in t) || d > 3 * s[$1]) { print $1, t[$1], s[$1], $6; bad = 1 } n++ }
		END { exit bad || n < 6 }' "$1" "$2"
}

test_expect_success 'setup: a text of 24 symbols, three tiny models, our numbers and the reference'"'"'s' '
	LC_ALL=C tr -c "a-w" "x" <"$FIX/corpus.txt" | LC_ALL=C tr "a-x" "\\000-\\027" >c24 &&
	sw-train --data c24 --out a --steps 40 --d-model 8 --n-layers 1 --n-heads 2 --n-kv-heads 1 \
		--d-ff 16 --batch 4 --seq-len 16 --lr 1e-2 --trace "" --threads 1 >/dev/null &&
	sw-train --data c24 --out b --steps 40 --d-model 8 --n-layers 1 --n-heads 2 --tie --qk-norm \
		--multipliers row --norm-everywhere --d-ff 16 --batch 4 --seq-len 16 --lr 1e-2 --trace "" \
		--threads 1 >/dev/null &&
	sw-train --data c24 --out c --steps 40 --d-model 8 --n-layers 1 --n-heads 2 --qk-norm \
		--scale-reparam attn=or,head=er --scale-design ffn=hg+dp,head=hg --d-ff 16 --batch 4 \
		--seq-len 16 --lr 1e-2 --trace "" --threads 1 >/dev/null &&
	for run in a b c; do
		if [ $run != c ]; then
			"$MKHVP" $run/ckpt-000040.h5 c24 32 16 1 hvp-$run.h5 &&
			echo "hvp $run/ckpt-000040.h5 hvp-$run.h5 rel-$run" >>jobs || exit 1
		fi
		for mode in hessian gauss-newton preconditioned; do
			case $mode in hessian) flag= ;; *) flag=--$mode ;; esac
			sw-hessian $HS $flag --tol 1e-6 --max-steps 300 --probes 100 --force --dump-batch batch-$run.h5 \
				$run/ckpt-000040.h5 >ours-$run-$mode &&
			echo "dense $run/ckpt-000040.h5 batch-$run.h5 $mode ref-$run-$mode" >>jobs || exit 1
		done
	done &&
	echo "attr a/ckpt-000040.h5 optim beta1 beta1" >>jobs &&
	"$PY" "$REF" jobs
'

for run in a b c; do
	[ $run = c ] || test_expect_success "$run: H v and G v of every tensor match double backward to 1e-5" "
		awk '{ if (\$3 > 1e-5) { print; bad = 1 } n++ } END { exit bad || n < 20 }' rel-$run
	"
	for mode in hessian gauss-newton preconditioned; do
		test_expect_success "$run, $mode: the top 3 eigenvalues of every block to 1e-3, the trace within 3 s.e." "
			eigs ours-$run-$mode ref-$run-$mode &&
			traces ours-$run-$mode ref-$run-$mode
		"
	done
done

# eos_adam from the printed lambda_1 and lr (9 digits each, 5e-10
# relative): 1e-6 relative is ample
test_expect_success 'eos_adam is lambda_1 eta (1 - beta1) / (2 + 2 beta1), eta the tensors lr' '
	awk -F"\t" -v b1="$(cat beta1)" "NR > 1 { want = \$5 * \$13 * (1 - b1) / (2 + 2 * b1); d = \$14 - want; if (d < 0) d = -d;
		if (d > 1e-6 * want || want <= 0) { print; bad = 1 } n++ } END { exit bad || n < 6 }" ours-a-preconditioned
'

test_expect_success 'SLQ: the first four moments within 3 standard errors of the eigenvalues'"'"' (per vector)' '
	sw-hessian $HS --density --slq-vectors 48 --slq-steps 30 --block emb,ffn,norm a/ckpt-000040.h5 >nodes &&
	awk -F"[\t ]" "NR == FNR { if (FNR > 1) for (p = 1; p <= 4; p++) m[\$3, \$4, p] += \$6 * \$5 ^ p; v[\$3, \$4] = 1; next }
		\$1 == \"emb\" || \$1 == \"ffn\" || \$1 == \"norm\" {
			for (p = 1; p <= 4; p++) {
				s = 0; ss = 0; k = 0
				for (key in v) { split(key, q, SUBSEP); if (q[1] != \$1) continue; x = m[\$1, q[2], p]; s += x; ss += x * x; k++ }
				mean = s / k; se = sqrt((ss / k - mean * mean) * k / (k - 1) / k)
				d = mean - \$(6 + p); if (d < 0) d = -d
				if (k != 48 || d > 3 * se + 1e-12 * (\$(6 + p) < 0 ? -\$(6 + p) : \$(6 + p))) { print \$1, p, mean, se, \$(6 + p); bad = 1 }
			}
			n++
		}
		END { exit bad || n != 3 }" nodes ref-a-hessian
'

# micro-batches add the sequences' float32 products in another order (a
# few ulps, ~1e-7 relative), and Lanczos stops at --tol 1e-6: 1e-5 relative
test_expect_success 'micro-batches of one sequence give the same eigenvalues as one pass' '
	sw-hessian $HS --tol 1e-6 --max-steps 300 --probes 2 a/ckpt-000040.h5 >one &&
	sw-hessian $HS --tol 1e-6 --max-steps 300 --probes 2 --micro-batch 1 a/ckpt-000040.h5 >two &&
	cut -f3,5-7 one >one.eig && cut -f3,5-7 two >two.eig &&
	numbers_close 1e-5 one.eig two.eig
'

test_done
