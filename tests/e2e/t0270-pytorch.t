#!/bin/sh
# PyTorch checkpoints written by torch.save (Debian's python3-torch, by
# tests/e2e/pt_reference.py) from the weights of fixtures/tiny-hf: a state
# dict in F32, BF16 and F16, views at offsets into one storage and a
# transposed head, Parameters, a nested dict (nanoGPT's {"model": ...}),
# a deeper one named by FILE:KEY, a Hugging Face sharded set with its
# pytorch_model.bin.index.json, and Meta's layout (params.json and one or
# two consolidated.NN.pth, q and k rows interleaved). Every tool prints
# on them what it prints on fixtures/tiny-hf (the same weights); sw-norms
# and sw-spectrum agree with numpy on the values torch wrote; Meta's
# logits with a float64 forward of Meta's own (interleaved RoPE). A
# pickle that would run a command is refused and runs nothing. Skipped
# without python3-torch (CI installs it).
. "$(dirname "$0")/../lib/tap.sh"

REF=$SW_TOP/tests/e2e/pt_reference.py
NREF=$SW_TOP/tests/e2e/norms_reference.py
SREF=$SW_TOP/tests/e2e/spectrum_reference.py
LOGITS=$SW_BIN/../tests/unit/mklogits
TOKENS="3 14 15 9 26 5 35 8 9 7 9 32 3 8 4"
SHARP="--data tok.bin --data-format uint16 --batch-tokens 64 --seq-len 16 --threads 1"

if ! have_python_modules "torch, numpy, h5py"; then
	test_skip 'PyTorch files' 'python3-torch, numpy or h5py not installed'
	test_done
fi

test_expect_success 'setup: torch.save writes the variants (pt/), every tool run on fixtures/tiny-hf' '
	"$PY" "$REF" write "$FIX/tiny-hf" pt &&
	"$PY" -c "import numpy as np; np.random.RandomState(1).randint(0, 48, 2048).astype(\"<u2\").tofile(\"tok.bin\")" &&
	sw-ls "$FIX/tiny-hf" >ls.out && cut -f2- ls.out >ls.want &&
	sw-norms "$FIX/tiny-hf" >norms.out && cut -f2- norms.out >norms.want &&
	sw-spectrum --per-head "$FIX/tiny-hf" >spec.out && cut -f2- spec.out >spec.want &&
	sw-qkdrift "$FIX/tiny-hf" >qk.out && cut -f2- qk.out >qk.want &&
	sw-sharpness $SHARP "$FIX/tiny-hf" >sharp.out && cut -f2- sharp.out >sharp.want &&
	test_line_count = 88 norms.want
'

# exact: the same binary on the same float32 values (Meta's q and k rows
# permuted back bit for bit), sw-sharpness with --threads 1 both times.
# A dict that records its step (pt_reference.py writes iter_num 7 into
# nested/ckpt.pt, step 3 into deep/ckpt.pt; the third field) prints it in
# the step column, which the safetensors have empty: the step column is
# compared with that, the rest with the safetensors' rows.
# nostep IN OUT: IN (a tool's table, its file column cut) without the
# column called step
nostep() {
	awk -F'\t' -v OFS='\t' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "step") c = i }
		{ o = ""; for (i = 1; i <= NF; i++) if (i != c) o = o (o == "" && i == (c == 1 ? 2 : 1) ? "" : OFS) $i; print o }' "$1" >"$2"
}
# steps IN STEP: every row of IN has STEP in its step column (or IN has none)
steps() {
	awk -F'\t' -v want="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "step") c = i; next }
		c && $c != want { bad = 1 } END { exit bad }' "$1"
}
for t in ls norms spec qk sharp; do nostep $t.want $t.want.ns || exit 1; done
while IFS='|' read -r name in step; do
	test_expect_success "$name: every tool prints what it prints on the safetensors" "
		sw-ls pt/$in >ls.out && cut -f2- ls.out >ls.got &&
		sw-norms pt/$in >norms.out && cut -f2- norms.out >norms.got &&
		sw-spectrum --per-head pt/$in >spec.out && cut -f2- spec.out >spec.got &&
		sw-qkdrift pt/$in >qk.out && cut -f2- qk.out >qk.got &&
		sw-sharpness $SHARP pt/$in >sharp.out && cut -f2- sharp.out >sharp.got &&
		for t in ls norms spec qk sharp; do
			if test -z '$step'; then test_cmp \$t.want \$t.got || exit 1
			else nostep \$t.got \$t.got.ns && test_cmp \$t.want.ns \$t.got.ns && steps \$t.got '$step' ||
				{ echo \"\$t: not the rows, or not step $step\"; exit 1; }
			fi
		done
	"
done <<'VARIANTS'
a state dict (F32)|fp32/model.pt|
views at offsets into one storage, the head transposed|views/model.pt|
nn.Parameter values|params/model.pt|
{"model": ..., "optimizer": ..., "iter_num": 7}: the model dict, step 7|nested/ckpt.pt|7
FILE:KEY: {"ema": {"net": ...}, "step": 3}: the dict at the key, step 3|deep/ckpt.pt:ema.net|3
the sharded set's directory|sharded|
the sharded set's index|sharded/pytorch_model.bin.index.json|
Meta, one slice (directory)|meta1|
Meta, one slice (file)|meta1/consolidated.00.pth|
Meta, two slices|meta2|
Meta, two slices, Llama 3 embedding split|meta2-llama3|
VARIANTS

# numpy in float64 on the values torch wrote: 1e-6 relative for the
# norms (sums in double, Lanczos stopped at 1e-6), the spectra as in
# t0110 (spectrum_reference.py: 1e-5 relative down to 1e-4 sigma_max)
for v in fp32/model.pt bf16/model.pt fp16/model.pt views/model.pt nested/ckpt.pt:model; do
	test_expect_success "$v: sw-norms and sw-spectrum = numpy on what torch wrote" "
		\"\$PY\" \"\$REF\" export pt/$v ref &&
		\"\$PY\" \"\$NREF\" ref >expect &&
		sw-norms pt/$v >norms && sed 1d norms | cut -f4,6,8-16 >actual &&
		test_line_count = 87 actual && numbers_close 1e-6 expect actual &&
		sw-spectrum pt/$v >spec && \"\$PY\" \"\$SREF\" check ref spec &&
		rm -rf ref
	"
done

test_expect_success 'BF16 and F16 files: dtypes as stored' '
	sw-ls pt/bf16/model.pt pt/fp16/model.pt >ls.out &&
	cut -f7 ls.out | sort | uniq -c | sed "s/^ *//" >got &&
	printf "%s\n" "111 BF16" "111 F16" "1 dtype" >want && test_cmp want got
'

# our float32 forward pass against float64 (d_model 16, 12 layers): a few
# ulps times sqrt(d) and the depth, ~1e-6 relative, checked at 1e-5 (an
# unpermuted read is off by more than 1e-3, below)
for m in meta1 meta2 meta2-llama3; do
	test_expect_success "$m: logits = a float64 forward of Meta's own (interleaved RoPE)" "
		\"\$LOGITS\" pt/$m \$TOKENS >ours.tsv &&
		\"\$PY\" \"\$REF\" metalogits pt/$m ours.tsv \$TOKENS >report &&
		awk '\$1 == \"logits\" && \$2 <= 1e-5 { ok = 1 } END { exit !ok }' report
	"
done

test_expect_success 'the logits check can fail: Meta rows read unpermuted give other logits' '
	"$LOGITS" "$FIX/tiny-hf" $TOKENS >hf.tsv &&
	"$PY" "$REF" metalogits pt/meta-unpermuted hf.tsv $TOKENS >report &&
	awk "\$1 == \"logits\" && \$2 > 1e-3 { ok = 1 } END { exit !ok }" report
'

test_expect_success 'Meta: q and k say their rows were permuted, and their Meta names' '
	sw-convert pt/meta2 meta.h5 &&
	"$PY" -c "
import h5py
f = h5py.File(\"meta.h5\")
for n in (\"q_proj\", \"k_proj\", \"v_proj\"):
    a = f[\"params/model.layers.3.self_attn.%s.weight\" % n].attrs
    print(n, a[\"source_name\"].decode() if isinstance(a[\"source_name\"], bytes) else a[\"source_name\"],
          a.get(\"rope_permuted\", \"-\"))
" >got &&
	cat >want <<-\EOF &&
	q_proj layers.3.attention.wq.weight interleaved to rotate-half
	k_proj layers.3.attention.wk.weight interleaved to rotate-half
	v_proj layers.3.attention.wv.weight -
	EOF
	test_cmp want got
'

test_expect_success 'sw-convert: a .pt to HDF5 and to safetensors, the same numbers' '
	sw-convert pt/fp32/model.pt fp32.h5 &&
	sw-convert --to safetensors pt/bf16/model.pt bf16-st &&
	# exact: the same binary on the same values, converted losslessly
	sw-norms fp32.h5 >a && cut -f4- a >a.got && cut -f3- norms.want >a.want && test_cmp a.want a.got &&
	sw-norms bf16-st pt/bf16/model.pt >b && cut -f1 --complement b >b2 &&
	sed -n 2,88p b2 >b.st && sed -n 89,175p b2 >b.pt && test_cmp b.pt b.st
'

test_expect_success 'a directory with model.safetensors and pytorch_model.bin reads the safetensors, as transformers does' '
	mkdir both && cp "$FIX/tiny-hf/config.json" "$FIX/tiny-hf/model.safetensors" both/ &&
	cp pt/bf16/model.pt both/pytorch_model.bin &&
	sw-ls both >ls.out && cut -f7 ls.out | sort -u >got &&
	printf "%s\n" F32 dtype >want && test_cmp want got &&
	rm both/model.safetensors && sw-ls both >ls.out && cut -f7 ls.out | sort -u >got &&
	printf "%s\n" BF16 dtype >want && test_cmp want got
'

test_expect_success 'both a "model" and a "state_dict" dict: refused, FILE:KEY picks one' '
	test_expect_code 65 sw-ls pt/both/ckpt.pt >out 2>err &&
	test_one_error sw-ls pt/both/ckpt.pt && grep -q "FILE:model" err && test_line_count = 1 out &&
	sw-ls pt/both/ckpt.pt:state_dict >out && test_line_count = 112 out
'

test_expect_success 'FILE:KEY naming no dict, and a key for a format that has none' '
	test_expect_code 65 sw-ls pt/nested/ckpt.pt:optimizer.nope >out 2>err &&
	test_one_error sw-ls pt/nested/ckpt.pt:optimizer.nope &&
	test_expect_code 65 sw-ls pt/nested/ckpt.pt:iter_num >out 2>err &&
	grep -q "is not a dict" err &&
	test_expect_code 65 sw-ls "$FIX/tiny.h5:model" >out 2>err &&
	test_one_error sw-ls "$FIX/tiny.h5:model" && grep -q "for PyTorch files" err &&
	for key in model. .model model..x; do
		test_expect_code 65 sw-ls "pt/nested/ckpt.pt:$key" >out 2>err &&
		test_one_error sw-ls "pt/nested/ckpt.pt:$key" && grep -q "an empty part" err || exit 1
	done
'

test_expect_success 'a pickle that runs os.system in torch.load: refused by name, nothing run' '
	test_expect_code 65 sw-ls pt/evil/model.pt >out 2>err &&
	test_line_count = 1 out && test_one_error sw-ls pt/evil/model.pt &&
	grep -q "global posix.system is not one a state dict needs: refused, nothing executed" err &&
	test_expect_code 65 sw-convert pt/evil/model.pt evil.h5 2>err &&
	test ! -e PWNED && test ! -e pt/evil/PWNED && test ! -e evil.h5
'

test_done
