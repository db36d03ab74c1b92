#!/bin/sh
# RoPE scaling (config.json's rope_scaling, types linear and llama3, as in
# every Llama 3.1 and 3.2 config) against an independent Llama in float64
# PyTorch whose inverse frequencies are written from transformers'
# formulas (tests/e2e/rope_reference.py, not lib/base/arch.c):
#   - the logits of scalewatch's model (tests/unit/mklogits, the forward
#     pass every model tool runs) on a Hugging Face directory whose
#     config.json asks for the scaling equal convert_reference.py's on the
#     same files to 1e-5 relative (float32 over d_model 32, 2 layers,
#     against float64: a few ulps times the depth and sqrt(d), ~1e-6;
#     RoPE without the scaling is off by 5e-3 here, below);
#   - after sw-convert to HDF5 (/config keeps the scaling) the R-operator's
#     H v (tests/unit/mkhvp) matches double backward to 1e-5, and
#     sw-hessian's top 3 eigenvalues per block match the dense Hessian's
#     to 1e-3 (t0280's tolerances, there justified);
#   - the round trip back to safetensors computes the same logits, bit
#     for bit;
#   - a GGUF's llama.rope.scaling.type linear: the logits of the same
#     weights under config.json's rope_scaling (checked against the
#     reference), bit for bit;
#   - Meta's layout with params.json's use_scaled_rope: the logits equal
#     Meta's apply_scaling's in float64 (tests/e2e/pt_reference.py), 1e-5.
# Skipped without python3-torch (CI installs it).
. "$(dirname "$0")/../lib/tap.sh"

CONV=$SW_TOP/tests/e2e/convert_reference.py
HREF=$SW_TOP/tests/e2e/hessian_reference.py
LOGITS=$SW_BIN/../tests/unit/mklogits
MKHVP=$SW_BIN/../tests/unit/mkhvp
TOKENS="84 104 101 32 113 117 105 99 107 32 98 114 111 119 110 32 102 111 120 10 84 104 101 32"

if ! have_python_modules "torch, functorch, h5py, numpy"; then
	test_skip 'RoPE scaling against PyTorch' 'python3-torch not installed'
	test_done
fi

# within REPORT: convert_reference's relative error at most 1e-5
within() {
	awk '$1 == "logits" && $2 <= 1e-5 { ok = 1 } { print } END { exit !ok }' "$1"
}

# scaled SRC DST JSON: DST is the directory SRC with config.json's
# rope_scaling set to JSON
scaled() {
	cp -r "$1" "$2" &&
	"$PY" "$SW_TOP/tests/lib/jsonedit.py" "$2/config.json" "c['rope_scaling'] = json.loads('''$3''')"
}

# head_dim 8, rope_theta 500: wavelengths 6.3, 30, 140 and 660 tokens;
# llama3 over an original context of 64 (bands 16 and 64) keeps the
# first, interpolates the second, divides the last two: every branch
test_expect_success 'setup: a trained model, its export, llama3 and linear scaling of it' '
	sw-train --data "$FIX/corpus.txt" --steps 20 --ckpt-every 20 --eval-every 0 --trace "" \
		--threads 1 --seq-len 32 --batch 4 --lr 1e-2 --d-model 32 --n-layers 2 --n-heads 4 \
		--n-kv-heads 2 --rope-theta 500 --out run >/dev/null &&
	sw-convert run/ckpt-000020.h5 plain &&
	scaled plain llama3 "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0,
		\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64}" &&
	scaled plain linear "{\"type\": \"linear\", \"factor\": 4.0}"
'

for kind in llama3 linear; do
	test_expect_success "$kind: scalewatch's logits = PyTorch's with transformers' inv_freq" "
		\"\$LOGITS\" $kind \$TOKENS >ours-$kind.tsv &&
		\"\$PY\" \"\$CONV\" logits $kind ours-$kind.tsv \$TOKENS >report && within report
	"
done

test_expect_success 'the check can fail: logits without the scaling against the scaled reference' '
	"$LOGITS" plain $TOKENS >ours-plain.tsv &&
	"$PY" "$CONV" logits llama3 ours-plain.tsv $TOKENS >report &&
	test_expect_code 1 within report &&
	"$PY" "$CONV" logits linear ours-plain.tsv $TOKENS >report &&
	test_expect_code 1 within report
'

test_expect_success 'llama3: to HDF5 and back, the same logits, bit for bit' '
	sw-convert llama3 l3.h5 && sw-convert l3.h5 back &&
	grep -q "\"rope_type\":	\"llama3\"" back/config.json &&
	"$LOGITS" l3.h5 $TOKENS >ours-h5.tsv && test_cmp ours-llama3.tsv ours-h5.tsv &&
	"$LOGITS" back $TOKENS >ours-back.tsv && test_cmp ours-llama3.tsv ours-back.tsv
'

# a smaller model for the dense Hessian (one head of 8: the same bands)
test_expect_success 'setup: the R-operator and sw-hessian on a llama3-scaled model, and the reference' '
	LC_ALL=C tr -c "a-w" "x" <"$FIX/corpus.txt" | LC_ALL=C tr "a-x" "\\000-\\027" >c24 &&
	sw-train --data c24 --out small --steps 40 --d-model 8 --n-layers 1 --n-heads 1 --d-ff 16 \
		--batch 4 --seq-len 16 --lr 1e-2 --rope-theta 500 --trace "" --threads 1 >/dev/null &&
	sw-convert small/ckpt-000040.h5 small-st &&
	scaled small-st small-l3 "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0,
		\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64}" &&
	sw-convert small-l3 small-l3.h5 &&
	"$MKHVP" small-l3.h5 c24 32 16 1 hvp.h5 &&
	sw-hessian --data c24 --batch-tokens 32 --seq-len 16 --tol 1e-6 --max-steps 300 \
		--dump-batch batch.h5 small-l3.h5 >ours-hessian &&
	sw-hessian --data c24 --batch-tokens 32 --seq-len 16 --tol 1e-6 --max-steps 300 \
		small/ckpt-000040.h5 >ours-plain-hessian &&
	printf "%s\n" "hvp small-l3.h5 hvp.h5 rel" "dense small-l3.h5 batch.h5 hessian ref" >jobs &&
	"$PY" "$HREF" jobs
'

test_expect_success 'llama3: H v of every tensor matches double backward to 1e-5' '
	awk "{ if (\$3 > 1e-5) { print; bad = 1 } n++ } END { exit bad || n < 10 }" rel
'

# eigs OURS REF: lambda_1..3 of each block to 1e-3 relative (a floor of
# 1e-7 lambda_max for values near 0), as t0280 checks them
eigs() {
	awk -F'[\t ]' -f "$SW_TOP/tests/lib/eigs.awk" "$1" "$2"
}

test_expect_success 'llama3: sw-hessian'"'"'s top 3 eigenvalues of every block = the dense Hessian'"'"'s' '
	eigs ours-hessian ref
'

test_expect_success 'the check can fail: the unscaled model'"'"'s eigenvalues are not the scaled ones' '
	test_expect_code 1 eigs ours-plain-hessian ref >/dev/null
'

test_expect_success 'GGUF, llama.rope.scaling.type linear: the logits of linear/ (checked above), bit for bit' '
	"$PY" "$SW_TOP/tests/e2e/gguf_write.py" run/ckpt-000020.h5 lin.gguf lin-ref --rope-scaling linear:4 &&
	grep -q "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 4.0}" lin-ref/config.json &&
	"$LOGITS" lin.gguf $TOKENS >ours-gguf.tsv && "$LOGITS" lin-ref $TOKENS >ours-gguf-ref.tsv &&
	test_cmp ours-gguf-ref.tsv ours-gguf.tsv && test_cmp ours-linear.tsv ours-gguf.tsv
'

test_expect_success 'GGUF, llama.rope.scaling.type yarn: listed, refused by a model tool (65)' '
	"$PY" "$SW_TOP/tests/e2e/gguf_write.py" run/ckpt-000020.h5 yarn.gguf yarn-ref --rope-scaling yarn:4 &&
	sw-ls yarn.gguf >out &&
	test_expect_code 65 sw-sharpness --data "$FIX/corpus.txt" --batch-tokens 64 --seq-len 32 \
		yarn.gguf >out 2>err &&
	test_line_count = 1 err && grep -q "rope_scaling type .yarn. is not supported" err
'

# Meta's layout: params.json's use_scaled_rope with rope_scaling_factor
# (Meta's apply_scaling: low_freq_factor 1, original context 8192), on
# fixtures/tiny-hf's weights (head_dim 4) with Llama 3's rope_theta,
# 5e5: the second frequency's wavelength, 4443, is in the band
# interpolated (measured: 4e-7 against the reference, 4e-4 without the
# scaling)
META_TOKENS="3 14 15 9 26 5 35 8 9 7 9 32 3 8 4"

# params DIR CODE: DIR/params.json's dict c edited by CODE
params() {
	"$PY" "$SW_TOP/tests/lib/jsonedit.py" "$1/params.json" "$2"
}

test_expect_success 'setup: Meta'"'"'s layout of tiny-hf, with and without use_scaled_rope' '
	"$PY" "$SW_TOP/tests/e2e/pt_reference.py" write "$FIX/tiny-hf" pt >/dev/null &&
	cp -r pt/meta1 meta-scaled && cp -r pt/meta1 meta-plain && cp -r pt/meta1 meta-nofactor &&
	params meta-scaled "c.update(rope_theta=5e5, use_scaled_rope=True, rope_scaling_factor=8.0)" &&
	params meta-plain "c.update(rope_theta=5e5)" &&
	params meta-nofactor "c.update(rope_theta=5e5, use_scaled_rope=True)"
'

test_expect_success 'Meta, use_scaled_rope: scalewatch'"'"'s logits = Meta'"'"'s apply_scaling in float64' '
	"$LOGITS" meta-scaled $META_TOKENS >ours-meta.tsv &&
	"$PY" "$SW_TOP/tests/e2e/pt_reference.py" metalogits meta-scaled ours-meta.tsv $META_TOKENS >report &&
	within report &&
	"$LOGITS" meta-plain $META_TOKENS >ours-meta-plain.tsv &&
	"$PY" "$SW_TOP/tests/e2e/pt_reference.py" metalogits meta-scaled ours-meta-plain.tsv \
		$META_TOKENS >report &&
	test_expect_code 1 within report
'

test_expect_success 'Meta, use_scaled_rope without its factor: listed, refused by a model tool (65)' '
	sw-ls meta-nofactor >out &&
	"$PY" -c "import numpy as np; np.random.RandomState(1).randint(0, 48, 512).astype(\"<u2\").tofile(\"tok.bin\")" &&
	test_expect_code 65 sw-sharpness --data tok.bin --data-format uint16 --batch-tokens 32 \
		--seq-len 16 meta-nofactor >out 2>err &&
	test_line_count = 1 err && grep -q "use_scaled_rope without rope_scaling_factor is not supported" err
'

test_done
