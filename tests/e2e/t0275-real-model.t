#!/bin/sh
# A real trained model through every tool: llama2.c's stories260K
# (fixtures/real/, see its SOURCE.txt) as its original llama2.c file and
# as Hugging Face safetensors in F32 and BF16. Every tool prints the same
# numbers for the .bin and the F32 copy, BF16 within its rounding; they
# equal numpy's norms and spectra of the weights read from the .bin by
# tests/e2e/llama2c_reference.py (its own reader), and scalewatch's forward
# pass on the .bin (the q/k rows reordered to rotate-half) gives the logits
# of llama2.c's own forward pass, interleaved RoPE on the rows as stored,
# computed by that script in float64. The same weights as llama2.c v1, as
# an untied legacy file, without the RoPE tables, converted by sw-convert
# and written as GGUF read the same. Skipped without numpy.
. "$(dirname "$0")/../lib/tap.sh"

REAL=$FIX/real
BIN=$REAL/stories260K.bin
REF=$SW_TOP/tests/e2e/llama2c_reference.py
GGUF=$SW_TOP/tests/e2e/gguf_write.py
LOGITS=$SW_BIN/../tests/unit/mklogits
# "Once upon a time" and more, in the model's 512-token vocabulary
TOKENS="1 403 407 261 378 430 261 500 259 275 40 304 283 50 267 1 7 511"

test_expect_success 'the .bin is the file SOURCE.txt names (sha256)' '
	sed -n "s/^\([0-9a-f]\{64\}\)\.$/\1/p" "$REAL/SOURCE.txt" >want &&
	test_line_count = 1 want &&
	sha256sum <"$BIN" | cut -d" " -f1 >got && test_cmp want got
'

test_expect_success 'sw-ls: the .bin holds the F32 copy s tensors, names, roles and shapes' '
	sw-ls "$BIN" >bin.ls && sw-ls "$REAL/stories260k-f32" >f32.ls &&
	sw-ls "$REAL/stories260k-bf16" >bf16.ls &&
	test_line_count = 49 bin.ls &&
	cut -f2- bin.ls >a && cut -f2- f32.ls >b && test_cmp a b &&
	cut -f2-6,8- bin.ls >a && cut -f2-6,8- bf16.ls >b && test_cmp a b &&
	grep -c "	BF16	" bf16.ls >n && echo 47 >want && test_cmp want n
'

if ! have_python_modules numpy; then
	test_skip 'the real model against numpy' 'python3-numpy not installed'
	test_done
fi

# ".bin = F32 copy" here and below is exact: the same binary on the same
# float32 values (a lossless copy), the same machine and threads; against
# numpy (float64, its own summation) it is numerical, to a tolerance
test_expect_success 'sw-norms: .bin = F32 copy exactly, = numpy on the .bin to 1e-6' '
	sw-norms "$BIN" >bin.tsv && sw-norms "$REAL/stories260k-f32" >f32.tsv &&
	cut -f2- bin.tsv >a && cut -f2- f32.tsv >b && test_cmp a b &&
	"$PY" "$REF" norms "$BIN" >expect && sed 1d bin.tsv | cut -f6,8-16 >actual &&
	test_line_count = 38 actual && numbers_close 1e-6 expect actual
'

# BF16 rounds each value to 8 bits, 2^-9 relative at most: row and column
# norms, Frobenius, RMS and max move by 2^-9 relative, sigma_max by at
# most 2^-9 ||W||_F (Weyl), which is < 2^-8 sigma_max for these matrices
test_expect_success 'sw-norms: BF16 copy within its rounding (2^-8 relative)' '
	sw-norms "$REAL/stories260k-bf16" >bf16.tsv &&
	cut -f4- bin.tsv >a && cut -f4- bf16.tsv >b && numbers_close 4e-3 a b &&
	test_expect_code 1 numbers_close 1e-4 a b >/dev/null
'

test_expect_success 'sw-spectrum: every sigma of the .bin = numpy SVD; = F32 copy exactly' '
	sw-spectrum "$BIN" >bin.sv && "$PY" "$REF" spectrum "$BIN" bin.sv >report &&
	echo "spectra 37 matrices agree" >want && test_cmp want report &&
	sw-spectrum "$REAL/stories260k-f32" >f32.sv &&
	cut -f2- bin.sv >a && cut -f2- f32.sv >b && test_cmp a b
'

test_expect_success 'sw-spectrum: BF16 sigmas within 2^-9 ||W||_F of the .bin s (Weyl)' '
	sw-spectrum --summary "$BIN" >sum.tsv &&
	sw-spectrum "$REAL/stories260k-bf16" >bf16.sv &&
	awk -F"\t" "NR == FNR { if (FNR > 1) fro[\$3] = \$12; next }
		FNR == 1 { next }
		FILENAME == ARGV[2] { s[\$3, \$7] = \$8; n++; next }
		{ d = \$8 - s[\$3, \$7]; if (d < 0) d = -d; m++
		  if (d > fro[\$3] / 512) { print \$3, \$7, \$8, s[\$3, \$7]; bad = 1 } }
		END { if (m != n || m != 2048) { print m, n; bad = 1 } exit bad }" \
		sum.tsv bin.sv bf16.sv
'

test_expect_success 'sw-spectrum --per-head: .bin = F32 copy' '
	sw-spectrum --per-head --summary --role q,k "$BIN" >a.tsv &&
	sw-spectrum --per-head --summary --role q,k "$REAL/stories260k-f32" >b.tsv &&
	test_line_count = 61 a.tsv && cut -f2- a.tsv >a && cut -f2- b.tsv >b && test_cmp a b
'

test_expect_success 'sw-qkdrift: .bin = F32 copy; BF16 within its rounding' '
	sw-qkdrift "$BIN" >a.tsv && sw-qkdrift "$REAL/stories260k-f32" >b.tsv &&
	sw-qkdrift "$REAL/stories260k-bf16" >c.tsv &&
	test_line_count = 41 a.tsv && cut -f2- a.tsv >a && cut -f2- b.tsv >b && test_cmp a b &&
	cut -f8-10 a.tsv >a && cut -f8-10 c.tsv >c && numbers_close 4e-3 a c &&
	paste a.tsv c.tsv | awk -F"\t" "NR > 1 { d = \$11 - \$26; if (d < 0) d = -d
		if (d > 6e-3) { print NR, \$11, \$26; bad = 1 } } END { exit bad }"
'

# the GNB estimate samples labels from the model's softmax: BF16 weights
# give other labels, so only the F32 copy must agree (bit for bit)
test_expect_success 'sw-sharpness --data: .bin = F32 copy' '
	sw-sharpness --data "$FIX/corpus.txt" --batch-tokens 2048 --seq-len 64 --threads 1 \
		"$BIN" >a.tsv &&
	sw-sharpness --data "$FIX/corpus.txt" --batch-tokens 2048 --seq-len 64 --threads 1 \
		"$REAL/stories260k-f32" >b.tsv &&
	test_line_count = 6 a.tsv && cut -f2- a.tsv >a && cut -f2- b.tsv >b && test_cmp a b
'

test_expect_success 'logits: scalewatch on the .bin = llama2.c s forward (interleaved RoPE) to 1e-5' '
	"$LOGITS" "$BIN" $TOKENS >ours.tsv &&
	"$PY" "$REF" logits "$BIN" ours.tsv $TOKENS >report &&
	awk "\$1 == \"logits\" && \$2 <= 1e-5 { ok = 1 } { print } END { exit !ok }" report
'

test_expect_success 'logits: the check can fail (rotate-half RoPE on the rows as stored)' '
	"$PY" "$REF" logits "$BIN" ours.tsv $TOKENS --rotate-half >report &&
	awk "\$1 == \"logits\" && \$2 > 0.1 { ok = 1 } { print } END { exit !ok }" report
'

test_expect_success 'logits: .bin = F32 copy exactly; BF16 copy = llama2.c s forward on BF16-rounded weights' '
	"$LOGITS" "$REAL/stories260k-f32" $TOKENS >f32.logits && test_cmp ours.tsv f32.logits &&
	"$LOGITS" "$REAL/stories260k-bf16" $TOKENS >bf16.logits &&
	"$PY" "$REF" logits "$BIN" bf16.logits $TOKENS --bf16 >report &&
	awk "\$1 == \"logits\" && \$2 <= 1e-5 { ok = 1 } { print } END { exit !ok }" report
'

# the same weights in the other llama2.c layouts, written by numpy: exact,
# the same float32 values, the same binary
while IFS='|' read -r name flags; do
	test_expect_success "llama2.c $name: the tools print the .bin s numbers" "
		\"\$PY\" \"\$REF\" write \"\$BIN\" other.bin $flags &&
		sw-norms other.bin >o.tsv && cut -f2- o.tsv >o && cut -f2- bin.tsv >b && test_cmp b o &&
		\"\$LOGITS\" other.bin \$TOKENS >o.logits && test_cmp ours.tsv o.logits &&
		rm other.bin
	"
done <<'LAYOUTS'
v1 (ak42 header)|--v1
v1, untied head|--v1 --untied
legacy, untied head (negative vocab)|--untied
legacy without the RoPE tables|--no-tables
LAYOUTS

test_expect_success 'sw-ls: an untied head is a tensor of the file, a tied one the embedding' '
	"$PY" "$REF" write "$BIN" untied.bin --untied && sw-ls --role lm_head untied.bin >out &&
	cut -f2,7-9 out >got && printf "name\tdtype\tshape\tnumel\nlm_head.weight\tF32\t512x64\t32768\n" >want &&
	test_cmp want got && sw-ls --role lm_head "$BIN" >out && cut -f2,7-9 out >got &&
	printf "name\tdtype\tshape\tnumel\nlm_head.weight\ttied\t512x64\t0\n" >want && test_cmp want got
'

# exact here and for GGUF F32: sw-convert and gguf_write.py copy the
# float32 values the tools read from the .bin, and the same binary reads them
test_expect_success 'sw-convert: .bin to HDF5 and to safetensors, the same numbers, the source recorded' '
	sw-convert "$BIN" s.h5 && sw-convert "$BIN" s-hf && ls s-hf >files &&
	printf "config.json\nmodel.safetensors\n" >want && test_cmp want files &&
	sw-norms s.h5 >h.tsv && cut -f4- h.tsv >h && cut -f4- bin.tsv >b && test_cmp b h &&
	sw-norms s-hf >st.tsv && cut -f4- st.tsv >st && test_cmp b st &&
	h5dump -a /source_format s.h5 >attr && grep -q "\"llama2.c v0 (legacy)\"" attr &&
	h5dump -a /qk_rows s.h5 >attr && grep -q "interleaved RoPE pairs to rotate-half" attr &&
	grep -q "scalewatch.source_format" s-hf/model.safetensors &&
	"$LOGITS" s.h5 $TOKENS >h.logits && test_cmp ours.tsv h.logits
'

test_expect_success 'GGUF of the model (F32): the .bin s numbers and logits' '
	"$PY" "$GGUF" "$REAL/stories260k-f32" s.gguf ref-f32 &&
	sw-norms s.gguf >g.tsv && cut -f4- g.tsv >g && test_cmp b g &&
	"$LOGITS" s.gguf $TOKENS >g.logits && test_cmp ours.tsv g.logits
'

# exact: Q8_0 dequantizes to d * q (an F16 scale times an int8, exact in
# float32) and F16 widens exactly, so ref-q8 holds the same float32
# values; the same binary reads both
test_expect_success 'GGUF of the model (Q8_0, down_proj F16): numpy s dequantized weights, exactly' '
	"$PY" "$GGUF" "$REAL/stories260k-f32" q8.gguf ref-q8 --type q8_0 &&
	sw-ls q8.gguf >q.ls && grep -c "	Q8_0	" q.ls >n && echo 31 >want && test_cmp want n &&
	sw-norms q8.gguf >q.tsv && sw-norms ref-q8 >r.tsv &&
	cut -f4- q.tsv >q && cut -f4- r.tsv >r && test_cmp r q &&
	"$LOGITS" q8.gguf $TOKENS >q.logits && "$LOGITS" ref-q8 $TOKENS >r.logits &&
	test_cmp r.logits q.logits && test_expect_code 1 cmp -s ours.tsv q.logits
'

test_done
