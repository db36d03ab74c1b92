#!/bin/sh
# sw-convert's export against an independent Llama in PyTorch (float64,
# tests/e2e/convert_reference.py, which parses the safetensors itself):
# the logits it computes from the exported files equal scalewatch's own
# forward pass (tests/unit/mklogits on the checkpoint) to 1e-5 relative.
# Skipped without python3-torch (CI installs it).
. "$(dirname "$0")/../lib/tap.sh"

REF=$SW_TOP/tests/e2e/convert_reference.py
LOGITS=$SW_BIN/../tests/unit/mklogits
TOKENS="84 104 101 32 113 117 105 99 107 32 98 114 111 119 110 32 102 111 120 10"
TRAIN="--data $FIX/corpus.txt --steps 20 --ckpt-every 10 --eval-every 0 --trace '' --threads 1 --seq-len 32 --batch 4 --lr 1e-2 --d-model 32 --n-layers 2 --rope-theta 500"

if ! have_python_modules "torch, numpy"; then
	test_skip 'PyTorch cross-check of sw-convert' 'python3-torch not installed'
	test_done
fi

# within: the report's relative error at most 1e-5 (our forward pass in
# float32 over d_model 32, 2 layers, against float64: a few ulps times the
# depth and sqrt(d), ~1e-6)
within() {
	awk '$1 == "logits" && $2 <= 1e-5 { ok = 1 } { print } END { exit !ok }' "$1"
}

while IFS='|' read -r name flags convert; do
	test_expect_success "$name: PyTorch on the export = scalewatch on the checkpoint" "
		rm -rf run && eval sw-train \$TRAIN --out run $flags >/dev/null &&
		sw-convert $convert run/ckpt-000020.h5 st &&
		\"\$LOGITS\" run/ckpt-000020.h5 \$TOKENS >ours.tsv &&
		\"\$PY\" \"\$REF\" logits st ours.tsv \$TOKENS >report && within report &&
		rm -rf st
	"
done <<'VARIANTS'
untied, GQA (4 heads, 2 KV)|--n-heads 4 --n-kv-heads 2|
tied head, MQA|--n-heads 4 --n-kv-heads 1 --tie|
untied, GQA, sharded|--n-heads 4 --n-kv-heads 2|--shard-size 20KB
row and column multipliers, folded|--n-heads 4 --n-kv-heads 2 --multipliers rowcol|
scalar multipliers, tied, folded, sharded|--n-heads 4 --n-kv-heads 1 --tie --multipliers scalar|--shard-size 20KB
column multipliers, folded (d_model = q width: the config says col)|--n-heads 4 --multipliers col|
scale design attn hg, ffn dp, head ap: gains folded, unit Pre-Norm gains added|--n-heads 4 --n-kv-heads 2 --scale-design attn=hg,ffn=dp,head=ap|
scale design hg+dp, sharded|--n-heads 4 --scale-design hg+dp|--shard-size 20KB
gains reparameterized (OR), scale design hg+dp: gamma exported, folded|--n-heads 4 --scale-reparam or --scale-design hg+dp|
gains reparameterized (ER), tied head: gamma exported|--n-heads 4 --n-kv-heads 2 --tie --scale-reparam er|
VARIANTS

test_expect_success 'setup: a tied run (bfrun/), its step 20 exported in F32 (f32/) and BF16 (bf16/)' '
	eval sw-train $TRAIN --out bfrun --n-heads 4 --n-kv-heads 2 --tie >/dev/null &&
	sw-convert bfrun/ckpt-000020.h5 f32 && sw-convert --dtype bf16 bfrun/ckpt-000020.h5 bf16
'

test_expect_success 'BF16 export: every value the F32 one rounded to nearest even' '
	"$PY" "$REF" bf16 f32 bf16 >report && echo "bf16 0" >expect && test_cmp expect report
'

test_expect_success 'BF16 export: PyTorch on it = scalewatch on the same BF16 weights' '
	"$LOGITS" bf16 $TOKENS >ours.tsv &&
	"$PY" "$REF" logits bf16 ours.tsv $TOKENS >report && within report
'

test_expect_success 'the check can fail: another step s logits are caught' '
	"$LOGITS" bfrun/ckpt-000010.h5 $TOKENS >other.tsv &&
	"$PY" "$REF" logits f32 other.tsv $TOKENS >report &&
	test_expect_code 1 within report
'

test_done
