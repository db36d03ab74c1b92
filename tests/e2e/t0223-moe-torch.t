#!/bin/sh
# sw-train --moe against an independent mixture of experts in PyTorch
# (float64, tests/e2e/moe_reference.py: Mixtral's and Qwen2-MoE's block
# and transformers' load-balancing loss written out): on tiny models (d 32,
# 2 layers, 4 experts) the cross-entropy and the load-balancing loss, every
# gradient of CE + coef * aux, one AdamW step, and the directional
# derivative along a random direction by central differences with the
# routing held fixed. Skipped without python3-torch (CI installs it).
. "$(dirname "$0")/../lib/tap.sh"

REF=$SW_TOP/tests/e2e/moe_reference.py
BASE="--data $FIX/corpus.txt --steps 2 --ckpt-every 1 --save-grads --batch 3 --seq-len 12 --eval-every 0 --trace '' --threads 1 --lr 1e-2 --d-model 32 --n-layers 2 --n-heads 4"

if ! have_python_modules "torch, h5py, numpy"; then
	test_skip 'MoE PyTorch cross-check' 'python3-torch not installed'
	test_done
fi

# check: every line within tolerance. Our float32 forward and backward
# (36 tokens, d 32, 2 layers; softmax and the routing weights summed in
# double) against float64 is a few ulps times sqrt(n) and the depth,
# ~1e-6 relative (t0210's bound, 1e-5, leaves the same margin); the
# losses are summed in double from float32 terms: 1e-6. The central
# difference in float64 (h 1e-6) is good to ~1e-9; our float32 gradient
# dotted with the direction to ~1e-6: 1e-5. The top-k choice itself is
# not differentiated (as autograd does not): it is held fixed there.
check() {
	awk '
		$1 == "loss" && $2 > 1e-6 { print; bad = 1 }
		$1 == "aux" && $2 > 1e-6 { print; bad = 1 }
		$1 == "fd" && $2 > 1e-5 { print; bad = 1 }
		$1 == "grad" && $3 > 1e-5 + $4 { print; bad = 1 }
		$1 == "update" && $3 > 1e-5 + $4 { print; bad = 1 }
		$1 == "aux" || $1 == "fd" { seen++ }
		{ n++ }
		END { if (n < 10 || seen < 2) { print "no report"; bad = 1 } exit bad }' "$1"
}

while IFS='|' read -r name flags; do
	test_expect_success "$name: losses, gradients, one step and a finite difference match PyTorch" "
		eval sw-train \$BASE --out run $flags >/dev/null &&
		PYTHONPATH=\$SW_TOP/tests/e2e \"\$PY\" \"\$REF\" run/ckpt-000001.h5 run/ckpt-000002.h5 fd >report &&
		check report && rm -rf run
	"
done <<'VARIANTS'
Mixtral 4:2 (renormalized top 2, aux 0.001), GQA|--moe 4:2 --n-kv-heads 2
Mixtral 4:2 without the load-balancing loss|--moe 4:2 --moe-aux-coef 0
Qwen2-MoE 4:2:1 (a shared expert, top 2 not renormalized), aux 0.5|--moe 4:2:1 --moe-renorm no --moe-aux-coef 0.5
4:2:1 behind a dense first layer, renormalized, aux 0.01|--moe 4:2:1 --moe-dense-layers 1 --moe-aux-coef 0.01
4:1 with narrow experts, tied head|--moe 4:1 --moe-ffn 16 --tie
VARIANTS

test_expect_success 'the check can fail: a perturbed expert gradient is caught' '
	eval sw-train $BASE --out run --moe 4:2 >/dev/null &&
	"$PY" -c "
import h5py
f = h5py.File(\"run/ckpt-000002.h5\", \"r+\")
d = f[\"grads/model.layers.1.block_sparse_moe.experts.2.w3.weight\"]
d[0, 0] = d[0, 0] * 1.001 + 1e-4
" &&
	PYTHONPATH=$SW_TOP/tests/e2e "$PY" "$REF" run/ckpt-000001.h5 run/ckpt-000002.h5 >report &&
	test_expect_code 1 check report >/dev/null
'

test_expect_success 'the check can fail: a wrong load-balancing loss is caught' '
	eval sw-train $BASE --out run2 --moe 4:2 >/dev/null &&
	"$PY" -c "
import h5py
f = h5py.File(\"run2/ckpt-000002.h5\", \"r+\")
f[\"metrics\"].attrs[\"aux_loss\"] = f[\"metrics\"].attrs[\"aux_loss\"] * 1.0001
" &&
	PYTHONPATH=$SW_TOP/tests/e2e "$PY" "$REF" run2/ckpt-000001.h5 run2/ckpt-000002.h5 fd >report &&
	test_expect_code 1 check report >/dev/null
'

test_done
