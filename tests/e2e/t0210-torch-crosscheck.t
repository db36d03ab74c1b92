#!/bin/sh
# sw-train against an independent implementation in PyTorch (float64,
# tests/e2e/torch_reference.py): for each model variant, the loss and every
# gradient of one step match to 1e-5 relative (plus an absolute 1e-6 of
# the whole gradient's RMS per element, atol + rtol |ref|), and one optimizer step
# (AdamW, Muon) matches to 1e-5 of the update plus the float32 rounding of
# the stored parameters. Skipped without python3-torch (CI installs it).
. "$(dirname "$0")/../lib/tap.sh"

REF=$SW_TOP/tests/e2e/torch_reference.py
BASE="--data $FIX/corpus.txt --steps 2 --ckpt-every 1 --save-grads --batch 3 --seq-len 12 --eval-every 0 --trace '' --threads 1 --lr 1e-2"

if ! have_python_modules "torch, h5py, numpy"; then
	test_skip 'PyTorch cross-check' 'python3-torch not installed'
	test_done
fi

# check: every line of the reference's report within tolerance: our
# float32 forward and backward over d_model <= 32, 2 layers, 36-132 tokens
# against float64 is a few ulps times sqrt(n) and the depth, ~1e-6
# relative; 1e-5 leaves a margin and still catches a 1e-3 error (below)
check() {
	awk '
		$1 == "loss" && $2 > 1e-5 { print; bad = 1 }
		$1 == "grad" && $3 > 1e-5 + $4 { print; bad = 1 }
		$1 == "update" && $3 > 1e-5 + $4 { print; bad = 1 }
		{ n++ }
		END { if (n < 3) { print "no report"; bad = 1 } exit bad }' "$1"
}

while IFS='|' read -r name flags; do
	test_expect_success "$name: loss, gradients and one step match PyTorch" "
		eval sw-train \$BASE --out run $flags >/dev/null &&
		\"\$PY\" \"\$REF\" run/ckpt-000001.h5 run/ckpt-000002.h5 >report &&
		check report && rm -rf run
	"
done <<'VARIANTS'
AdamW, GQA, untied|--d-model 32 --n-layers 2 --n-heads 4 --n-kv-heads 2
AdamW, GQA, 44-token sequences (attention's products in 4 causal blocks)|--d-model 32 --n-layers 2 --n-heads 4 --n-kv-heads 2 --seq-len 44
AdamW, tied, QK-norm, scalar multipliers|--d-model 32 --n-layers 2 --n-heads 4 --tie --qk-norm --multipliers scalar
AdamW, norm-everywhere, column multipliers, independent wd|--d-model 24 --n-layers 2 --n-heads 2 --norm-everywhere --multipliers col --wd-mode independent --wd 0.01 --norm-wd iwd
AdamW, no scale vectors, MQA, clipping|--d-model 32 --n-layers 1 --n-heads 4 --n-kv-heads 1 --no-scale-vectors --grad-clip 0.05
Muon, GQA, row multipliers|--d-model 32 --n-layers 2 --n-heads 4 --n-kv-heads 2 --optimizer muon --multipliers row
AdamW, GQA, row and column multipliers, tied|--d-model 32 --n-layers 2 --n-heads 4 --n-kv-heads 2 --multipliers rowcol --tie
Muon, row and column multipliers, QK-norm|--d-model 32 --n-layers 2 --n-heads 4 --optimizer muon --multipliers rowcol --qk-norm
Muon, Blockwise LR, per-group lr|--d-model 32 --n-layers 2 --n-heads 4 --optimizer muon --blockwise-lr --group-lr 1:0.125:1
AdamW, the width rules (base 16, wd x sqrt 2)|--d-model 32 --n-layers 2 --n-heads 4 --width-base 16 --wd-scaling sqrt --wd 0.3
AdamW, scale design attn hg, ffn dp, head ap, IWD|--d-model 32 --n-layers 2 --n-heads 4 --n-kv-heads 2 --scale-design attn=hg,ffn=dp,head=ap --norm-wd iwd --wd 0.1
Muon, scale design hg+dp everywhere, QK-norm|--d-model 32 --n-layers 2 --n-heads 4 --optimizer muon --scale-design hg+dp --qk-norm
AdamW, scale design dnp (QK-norm, v, gate and up normalized), GQA, IWD|--d-model 32 --n-layers 2 --n-heads 4 --n-kv-heads 2 --scale-design dnp --norm-wd iwd --wd 0.1
Muon, scale design attn hg+dnp, ffn dnp, head hg|--d-model 32 --n-layers 2 --n-heads 4 --optimizer muon --scale-design attn=hg+dnp,ffn=dnp,head=hg
AdamW, gains reparameterized OR, QK-norm, norm-everywhere, IWD|--d-model 32 --n-layers 2 --n-heads 4 --scale-reparam or --qk-norm --norm-everywhere --norm-wd iwd --wd 0.1
Muon, gains reparameterized ER, scale design hg+dp, tied head|--d-model 32 --n-layers 2 --n-heads 4 --optimizer muon --scale-reparam er --scale-design attn=hg+dp,ffn=hg+dp --tie
AdamW, attention's gains OR, the head's ER, QK-norm|--d-model 32 --n-layers 2 --n-heads 4 --scale-reparam attn=or,head=er --qk-norm
AdamW, DNP+OR, every gain decayed, GQA|--d-model 32 --n-layers 2 --n-heads 4 --n-kv-heads 2 --scale-design dnp --scale-reparam or --norm-wd all --wd 0.1
VARIANTS

test_expect_success 'the check can fail: a perturbed gradient is caught' '
	eval sw-train $BASE --out run --d-model 32 --n-layers 1 --n-heads 4 >/dev/null &&
	"$PY" -c "
import h5py
f = h5py.File(\"run/ckpt-000002.h5\", \"r+\")
d = f[\"grads/model.layers.0.self_attn.q_proj.weight\"]
d[0, 0] = d[0, 0] * 1.001 + 1e-4
" &&
	"$PY" "$REF" run/ckpt-000001.h5 run/ckpt-000002.h5 >report &&
	test_expect_code 1 check report >/dev/null
'

test_done
