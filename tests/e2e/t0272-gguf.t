#!/bin/sh
# GGUF files written from sw-train checkpoints by a writer that follows
# the published spec (tests/e2e/gguf_write.py: struct and numpy, no
# llama.cpp; llama.cpp's names, dims fastest first, q/k rows permuted as
# convert_hf_to_gguf.py permutes them, metadata of every value type) in
# F32, F16, BF16, Q8_0 and Q4_0. The writer also writes what a reader must give
# back, decoded by numpy (F16/BF16 rounded, Q8_0/Q4_0 dequantized, q/k rows in
# rotate-half order) as an F32 safetensors directory: every tool prints the
# same numbers for the GGUF and for it, numpy's norms on it agree, and
# scalewatch's forward pass gives the same logits; an F32 GGUF gives the
# checkpoint's own. Skipped without numpy and h5py.
. "$(dirname "$0")/../lib/tap.sh"

W=$SW_TOP/tests/e2e/gguf_write.py
NREF=$SW_TOP/tests/e2e/norms_reference.py
LOGITS=$SW_BIN/../tests/unit/mklogits
TOKENS="84 104 101 32 113 117 105 99 107 32 98 114 111 119 110"
TRAIN="--data $FIX/corpus.txt --steps 20 --ckpt-every 0 --eval-every 0 --trace '' --threads 1 --seq-len 32 --batch 4 --lr 1e-2 --d-model 32 --d-ff 64 --n-layers 2"

if ! have_python_modules "numpy, h5py"; then
	test_skip 'GGUF written by the spec' 'python3-numpy or python3-h5py not installed'
	test_done
fi

test_expect_success 'setup: an untied GQA run (4 heads, 2 KV) and a tied MQA run' '
	eval sw-train $TRAIN --n-heads 4 --n-kv-heads 2 --out gqa >/dev/null &&
	eval sw-train $TRAIN --n-heads 4 --n-kv-heads 1 --tie --out mqa >/dev/null
'

# same TOOL ARGS: TOOL on m.gguf and on the reference print the same
# (the file column cut off); exact: the same binary on the same float32
# values (the reference is what the reader must decode, bit for bit)
same() {
	tool=$1
	shift
	"$tool" "$@" m.gguf >g.out && "$tool" "$@" ref >r.out &&
	cut -f2- g.out >g && cut -f2- r.out >r && test_cmp r g
}

# numpy's norms: float64 on the same float32 values; ours sum in double
# and stop Lanczos at 1e-6 relative (NORMS_SIGMA_REL_TOL): 1e-6 relative.
# The logits: the same mklogits on the same values twice, exact.
for run in gqa mqa; do
	for type in f32 f16 bf16 q8_0 q4_0; do
		test_expect_success "$run, $type: every tool prints the reference's numbers, the same logits" "
			rm -rf m.gguf ref && \"\$PY\" \"\$W\" $run/ckpt-000020.h5 m.gguf ref --type $type &&
			sw-ls m.gguf >g.ls && sw-ls ref >r.ls && cut -f2-6,8- g.ls >g && cut -f2-6,8- r.ls >r &&
			test_cmp r g &&
			same sw-norms && same sw-spectrum && same sw-spectrum --per-head && same sw-qkdrift &&
			\"\$LOGITS\" m.gguf \$TOKENS >g.logits && \"\$LOGITS\" ref \$TOKENS >r.logits &&
			test_cmp r.logits g.logits &&
			\"\$PY\" \"\$NREF\" ref >expect && sw-norms m.gguf >n.tsv &&
			sed 1d n.tsv | cut -f4,6,8-16 >actual && numbers_close 1e-6 expect actual
		"
	done
done

test_expect_success 'the dtypes listed: weights in their type, norm gains F32' '
	"$PY" "$W" gqa/ckpt-000020.h5 q.gguf qref --type q8_0 && sw-ls q.gguf >ls &&
	grep -c "	Q8_0	" ls >n && echo 16 >want && test_cmp want n &&
	grep -c "	F32	" ls >n && echo 5 >want && test_cmp want n
'

# exact: the same binary on byte-identical float32 weights
test_expect_success 'F32: the GGUF gives the checkpoint s own numbers and logits' '
	"$PY" "$W" gqa/ckpt-000020.h5 m.gguf ref &&
	sw-norms m.gguf >g.tsv && sw-norms gqa/ckpt-000020.h5 >h.tsv &&
	cut -f4- g.tsv >g && cut -f4- h.tsv >h && test_cmp h g &&
	"$LOGITS" m.gguf $TOKENS >g.logits && "$LOGITS" gqa/ckpt-000020.h5 $TOKENS >h.logits &&
	test_cmp h.logits g.logits
'

test_expect_success 'the check can fail: Q8_0 s logits are not the checkpoint s' '
	"$LOGITS" q.gguf $TOKENS >q.logits && test_expect_code 1 cmp -s h.logits q.logits
'

test_expect_success 'sw-sharpness --data: the GGUF = its reference' '
	"$PY" "$W" mqa/ckpt-000020.h5 m.gguf ref --type bf16 &&
	same sw-sharpness --data "$FIX/corpus.txt" --batch-tokens 512 --seq-len 32 --threads 1
'

# exact: the same sw-norms on the same F32 weights as h.tsv, laid out otherwise
while IFS='|' read -r name flags; do
	test_expect_success "$name: read, the same numbers" "
		\"\$PY\" \"\$W\" gqa/ckpt-000020.h5 v.gguf vref $flags &&
		sw-norms v.gguf >v.tsv && cut -f4- v.tsv >v && cut -f4- h.tsv >h && test_cmp h v
	"
done <<'VARIANTS'
general.alignment 64|--alignment 64
general.alignment 8|--alignment 8
general.alignment 1 (F32 data read unaligned)|--alignment 1
GGUF version 2|--version 2
vocabulary from llama.vocab_size|--vocab-from key
vocabulary from the embedding's rows|--vocab-from none
VARIANTS

test_expect_success 'a tensor llama has not (rope_freqs): listed as other; no model is built' '
	"$PY" "$W" gqa/ckpt-000020.h5 x.gguf xref --extra &&
	sw-ls --role other x.gguf >out && cut -f2-8 out >got &&
	printf "name\tblock\trole\tlayer\tkind\tdtype\tshape\nrope_freqs.weight\tother\tother\t-1\tvector\tF32\t4\n" >want &&
	test_cmp want got &&
	test_expect_code 65 "$LOGITS" x.gguf 1 2 >out 2>err &&
	grep -q "rope_freqs.weight (role other) has no place in the model" err
'

test_expect_success 'a quantization not read (IQ4_NL): refused by name' '
	"$PY" "$W" gqa/ckpt-000020.h5 k.gguf kref --iq4nl &&
	test_expect_code 65 sw-norms k.gguf >out 2>err && test_one_error sw-norms k.gguf &&
	grep -q "token_embd.weight: IQ4_NL: a quantization not read" err && test_line_count -le 1 out
'

test_expect_success 'no llama.context_length: refused, the key named' '
	"$PY" "$W" gqa/ckpt-000020.h5 c.gguf cref --no-context &&
	test_expect_code 65 sw-ls c.gguf >out 2>err &&
	test_one_error sw-ls c.gguf && grep -q "missing metadata llama.context_length" err
'

# exact: F16 widened to F32 by the converter is the value the GGUF reader
# gives; the same binary on the same values
test_expect_success 'sw-convert: GGUF to HDF5 and to safetensors (BF16), the numbers kept, the source recorded' '
	"$PY" "$W" gqa/ckpt-000020.h5 m.gguf ref --type f16 &&
	sw-convert m.gguf m.h5 && sw-convert --dtype bf16 m.gguf m-hf &&
	sw-norms m.gguf >g.tsv && sw-norms m.h5 >c.tsv && cut -f4- g.tsv >g && cut -f4- c.tsv >c &&
	test_cmp g c &&
	h5dump -a /source_format m.h5 >attr && grep -q "\"GGUF v3\"" attr &&
	sw-ls m-hf >ls && grep -c "	BF16	" ls >n && echo 21 >want && test_cmp want n &&
	"$LOGITS" m.h5 $TOKENS >c.logits && "$LOGITS" m.gguf $TOKENS >g.logits && test_cmp g.logits c.logits
'

test_done
