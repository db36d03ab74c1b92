#!/bin/sh
# sw-norms --scale-vectors against an independent implementation: numpy
# (float64) on the tensors read with h5py, or from a safetensors directory
# parsed in Python; the gains of a fixture, of a run trained with QK-norm
# and row multipliers (its gains move away from 1), of a run under a scale
# design (each matrix's own gains), of a run with its gains reparameterized
# (OR under DNP: directions and magnitudes), and of the Hugging Face fixture. Skipped when numpy or h5py is missing.
. "$(dirname "$0")/../lib/tap.sh"

REF=$SW_TOP/tests/e2e/scalevec_reference.py

# 1e-7 relative: both sides work in double on the same float32 values; the
# sums differ only in their order (numpy's pairwise, ours left to right),
# about 1e-15 relative for a few hundred terms, and the table prints 9
# significant digits (5e-9 relative).

if ! have_python_modules "numpy, h5py"; then
	test_skip 'numpy cross-check of --scale-vectors' 'python3-numpy or python3-h5py not installed'
	test_done
fi

test_expect_success 'setup: a run whose gains and multipliers moved' '
	sw-train --data "$FIX/corpus.txt" --steps 30 --d-model 32 --batch 4 --seq-len 32 \
		--threads 1 --qk-norm --multipliers row --lr 1e-2 --out run >/dev/null
'

test_expect_success 'setup: a run under a scale design (attn hg+dp, ffn ap, head hg)' '
	sw-train --data "$FIX/corpus.txt" --steps 30 --d-model 32 --batch 4 --seq-len 32 \
		--threads 1 --scale-design attn=hg+dp,ffn=ap,head=hg --lr 1e-2 --trace "" \
		--out design >/dev/null
'

test_expect_success 'setup: a run with its gains reparameterized (DNP+OR, hg+dp on the head)' '
	sw-train --data "$FIX/corpus.txt" --steps 30 --d-model 32 --batch 4 --seq-len 32 \
		--threads 1 --scale-design attn=dnp,ffn=dnp,head=hg+dp --scale-reparam or --lr 1e-2 \
		--trace "" --out reparam >/dev/null
'

for f in "$FIX/tiny.h5" run/ckpt-000030.h5 design/ckpt-000030.h5 reparam/ckpt-000030.h5 "$FIX/tiny-hf"; do
	d=${f%/*}
	test_expect_success "${d##*/}/${f##*/}: sw-norms --scale-vectors = numpy to 1e-7" "
		\"\$PY\" \"\$REF\" \"$f\" >expect &&
		sw-norms --scale-vectors \"$f\" >rows &&
		sed 1d rows | cut -f4,11-18 | sort >actual &&
		test_line_count -gt 2 actual &&
		numbers_close 1e-7 expect actual
	"
done

test_expect_success 'the trained run: every Pre-Norm gain has a coupling, the others none' '
	sw-norms --scale-vectors run/ckpt-000030.h5 >rows &&
	awk -F"\t" "NR > 1 && (\$8 == \"input\") != (\$18 != \"\") { print; bad = 1 } END { exit bad }" rows
'

test_expect_success 'the scale design: before and after, each gain coupled with its own matrix' '
	sw-norms --scale-vectors design/ckpt-000030.h5 >rows &&
	awk -F"\t" "NR > 1 { print \$6, \$10, (\$18 != \"\") }" rows | sort -u >actual &&
	cat >expect <<-\EOF &&
	k_gain_in before 1
	k_gain_out after 1
	lm_head_gain_in before 1
	q_gain_in before 1
	q_gain_out after 1
	up_gain_out after 1
	gate_gain_out after 1
	v_gain_in before 1
	v_gain_out after 1
	EOF
	sort -o expect expect &&
	test_cmp expect actual
'

test_expect_success 'the trace at the last step = the checkpoint of that step (to 1e-7)' '
	for k in sd anisotropy coupling; do
		sw-trace --series scale_$k --every 30 run/trace.h5 >t-$k || exit 1
	done &&
	paste t-sd t-anisotropy t-coupling >trace-all &&
	"$PY" -c "
import sys
rows = [l.rstrip(\"\n\").split(\"\t\") for l in open(\"trace-all\")]
head, last = rows[0], rows[-1]
out = sorted(k.split(\".\", 1)[1] + \"\t\" + k.split(\".\", 1)[0] + \"\t\" + v
             for k, v in zip(head, last) if k.startswith(\"scale_\"))
print(\"\n\".join(out))
" >trace-last &&
	sw-norms --scale-vectors run/ckpt-000030.h5 >rows &&
	awk -F"\t" -v OFS="\t" "NR > 1 { print \$4, \"scale_anisotropy\", \$16; print \$4, \"scale_coupling\", \$18; print \$4, \"scale_sd\", \$13 }" rows >ckpt-last &&
	sort -o ckpt-last ckpt-last &&
	test_line_count = 72 ckpt-last &&
	numbers_close 1e-7 ckpt-last trace-last
'

test_expect_success 'a gain of equal values: sd 0, anisotropy 1, cv 0, no coupling' '
	"$PY" -c "
import h5py, numpy as np, shutil
shutil.copy(\"$FIX/tiny.h5\", \"flat.h5\")
with h5py.File(\"flat.h5\", \"r+\") as f:
    f[\"params/model.norm.weight\"][...] = np.full(f[\"params/model.norm.weight\"].shape, 0.5, np.float32)
" &&
	sw-norms --scale-vectors --role final_norm flat.h5 >rows &&
	cut -f7- rows >actual &&
	printf "layer\ttype\tbranch\tplacement\tn\tmean\tsd\tmin\tmax\tanisotropy\tcv\tcoupling\texpert\n" >expect &&
	printf "%s\t" -1 input head pre 16 0.5 0 0.5 0.5 1 0 "" >>expect && echo -1 >>expect &&
	test_cmp expect actual
'

test_done
