#!/bin/sh
# sw-sharpness: the table per block type, /fisher from the trainer, the
# estimate computed on data, per layer and tensor, the distribution, the
# ratios, and --check principle on estimates set by hand.
. "$(dirname "$0")/../lib/tap.sh"

CORPUS=$FIX/corpus.txt
SMALL="--batch 4 --seq-len 32 --d-model 32 --n-layers 2 --n-heads 4 --n-kv-heads 2 --threads 2"

test_expect_success 'setup: a run with /fisher every 10 steps' '
	sw-train --data "$CORPUS" --out run $SMALL --steps 20 --ckpt-every 10 --fisher-every 10 \
		--trace "" >/dev/null &&
	test -f run/ckpt-000010.h5 && test -f run/ckpt-000020.h5
'

test_expect_success 'the table: one row per block type present, the columns exactly' '
	sw-sharpness run/ckpt-000020.h5 >out &&
	head -n 1 out >header &&
	printf "file\tstep\tblock\tnparams\tmean\tlog10_mean\tmean_log10\tq10_log10\tmedian_log10\tq90_log10\tzeros\ttokens\n" >expect &&
	test_cmp expect header &&
	cut -f3 out | sed 1d | tr "\n" " " >blocks &&
	printf "emb qk vo ffn norm out " >expect && test_cmp expect blocks
'

test_expect_success 'nparams per type are the model parameter counts' '
	sw-ls --summary run/ckpt-000020.h5 >summary &&
	awk -F"\t" "NR > 1 && \$2 != \"total\" { print \$2, \$4 }" summary >counts &&
	sw-sharpness run/ckpt-000020.h5 >out &&
	awk -F"\t" "NR > 1 { print \$3, \$4 }" out >ours &&
	test_cmp counts ours
'

# mean and log10_mean are printed to 9 digits (5e-10 relative): log10 of
# the printed mean is log10_mean to far better than 1e-6
test_expect_success 'log10_mean is log10 of mean; quantiles ordered' '
	sw-sharpness run/ckpt-000020.h5 >out && test_line_count = 7 out &&
	awk -F"\t" "NR > 1 { d = \$6 - log(\$5) / log(10); if (d < 0) d = -d;
		if (d > 1e-6 || !(\$8 <= \$9 && \$9 <= \$10)) bad = 1 } END { exit bad }" out
'

test_expect_success 'zeros: the embedding rows of absent tokens, a multiple of d_model' '
	sw-sharpness run/ckpt-000020.h5 >out &&
	z=$(awk -F"\t" "\$3 == \"emb\" { print \$11 }" out) &&
	test "$z" -gt 0 && test $((z % 32)) = 0
'

test_expect_success 'the trainer wrote /fisher: no data needed; --recompute needs it' '
	test_expect_code 64 sw-sharpness --recompute run/ckpt-000020.h5 >/dev/null 2>err &&
	grep -q "give --data" err
'

test_expect_success 'computed on data: same rows; another seed, other values' '
	sw-sharpness --recompute --data "$CORPUS" --batch-tokens 512 --seq-len 32 run/ckpt-000020.h5 >a &&
	sw-sharpness --recompute --data "$CORPUS" --batch-tokens 512 --seq-len 32 run/ckpt-000020.h5 >b &&
	sw-sharpness --recompute --data "$CORPUS" --batch-tokens 512 --seq-len 32 --seed 2 run/ckpt-000020.h5 >c &&
	# exact: the same binary on the same data and seed twice
	test_cmp a b && ! cmp -s a c && test_line_count = 7 a
'

test_expect_success '--data given is used: the estimate computed on it, /fisher or not' '
	sw-sharpness --data "$CORPUS" --batch-tokens 512 --seq-len 32 run/ckpt-000020.h5 >d &&
	# exact: --recompute and --data alone are the same computation
	test_cmp a d &&
	sw-sharpness run/ckpt-000020.h5 >fisher && ! cmp -s a fisher &&
	printf "\001\002" >two.bin &&
	test_expect_code 65 sw-sharpness --data two.bin --data-format uint16 --seq-len 32 \
		run/ckpt-000020.h5 >out 2>err &&
	test_one_error sw-sharpness run/ckpt-000020.h5 && grep -q "two.bin: fewer than 2 tokens" err
'

test_expect_success 'more draws: the estimate of S moves less between seeds' '
	for s in 1 2 3 4; do
		sw-sharpness --recompute --data "$CORPUS" --batch-tokens 256 --seq-len 32 --seed $s \
			--block ffn run/ckpt-000020.h5 >s1 && sed -n 2p s1 | cut -f5 >>one &&
		sw-sharpness --recompute --data "$CORPUS" --batch-tokens 256 --seq-len 32 --seed $s \
			--draws 16 --block ffn run/ckpt-000020.h5 >s16 && sed -n 2p s16 | cut -f5 >>many || exit 1
	done &&
	spread() { awk "{ s += log(\$1); q += log(\$1)^2; n++ } END { print sqrt(q/n - (s/n)^2) }" "$1"; } &&
	a=$(spread one) && b=$(spread many) && echo "spread of log S: 1 draw $a, 16 draws $b" &&
	awk -v a="$a" -v b="$b" "BEGIN { exit !(b < a) }"
'

# the pooled mean and the layers' are double sums of the same float32
# estimates, printed to 9 digits (5e-10 relative each): the weighted mean
# of the printed layer means is the pooled one to 1e-8 relative (a
# rounding to 6 digits compared as text would flip on a value near a
# boundary)
test_expect_success '--per-layer: the pooled mean is the size-weighted mean of the layers' '
	sw-sharpness --per-layer --block ffn run/ckpt-000020.h5 >pl &&
	test_line_count = 3 pl &&
	awk -F"\t" "NR > 1 { s += \$5 * \$6; n += \$5 } END { printf \"%.9g\n\", s / n }" pl >pooled &&
	sw-sharpness run/ckpt-000020.h5 >out &&
	awk -F"\t" "\$3 == \"ffn\" { print \$5 }" out >expect &&
	test_line_count = 1 expect && numbers_close 1e-8 expect pooled
'

test_expect_success '--per-tensor: a row per tensor, the selection applies' '
	sw-sharpness --per-tensor --layer 1 run/ckpt-000020.h5 >pt &&
	test_line_count = 10 pt && cut -f6 pt | sed 1d | sort -u >layers && echo 1 >expect && test_cmp expect layers
'

# densities (count / (n width)) and bin edges printed to 9 digits: the
# 20 products density x width sum to 1 within 1e-8, so 1e-6 is ample;
# each density is its count over the type's nonzero entries and the width
test_expect_success '--hist: per type, density x width sums to 1' '
	sw-sharpness --hist 20 run/ckpt-000020.h5 >h &&
	test_line_count = $((1 + 6 * 20)) h &&
	awk -F"\t" "NR > 1 { f[\$3] += \$7 * (\$5 - \$4) } END { for (b in f) { d = f[b] - 1; if (d < 0) d = -d; if (d > 1e-6) bad = 1 } exit bad }" h &&
	awk -F"\t" "NR > 1 { n[\$3] += \$6; r[NR] = \$3 \" \" \$6 \" \" \$7 * (\$5 - \$4) } END { for (i in r) { split(r[i], x, \" \"); d = x[3] - x[2] / n[x[1]]; if (d < 0) d = -d; if (d > 1e-6) bad = 1 } exit bad }" h &&
	# the exact zeros of each type beside its bins: those of the default table, exactly
	# (integers); the bins count the nonzero entries, so with them, all
	sw-sharpness run/ckpt-000020.h5 >t &&
	awk -F"\t" "NR > 1 { print \$3, \$4, \$11 }" t | sort >want &&
	awk -F"\t" "NR > 1 { n[\$3] += \$6; z[\$3] = \$8 } END { for (b in n) print b, n[b] + z[b], z[b] }" h |
		sort >got &&
	test_cmp want got
'

test_expect_success '--ratios: S(norm)/S(type) beside the paper ratios' '
	sw-sharpness --ratios run/ckpt-000020.h5 >r &&
	# exact by construction: S(norm)/S(norm) is 1, the paper ratios constants
	awk -F"\t" "\$3 == \"norm\" { print \$5, \$6 }" r >nr && echo "1 1" >expect && test_cmp expect nr &&
	awk -F"\t" "\$3 == \"emb\" { print \$6 }" r >pe && echo 10 >expect && test_cmp expect pe
'

# /fisher set by hand, so that the principle's truth is known
set_fisher() {
	"$PY" - "$1" "$2" <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r+")
S = dict(kv.split("=") for kv in sys.argv[2].split(","))
for name, d in f["fisher"].items():
    d[...] = float(S[f["params"][name].attrs["block"]])
PY
}

if have_python_modules h5py; then
	test_expect_success '--check principle: holds, exit 0' '
		cp run/ckpt-000020.h5 good.h5 &&
		set_fisher good.h5 emb=1e-6,qk=1e-4,ffn=2e-4,vo=3e-4,norm=1e-1,out=1e-3 &&
		sw-sharpness --check principle --strict good.h5 >out 2>err &&
		test_line_count = 0 err
	'
	test_expect_success '--check principle: QK above FFN breaks only --strict' '
		cp run/ckpt-000020.h5 mid.h5 &&
		set_fisher mid.h5 emb=1e-6,qk=5e-4,ffn=2e-4,vo=3e-4,norm=1e-1,out=1e-3 &&
		sw-sharpness --check principle mid.h5 >out 2>err &&
		test_expect_code 1 sw-sharpness --check principle --strict mid.h5 >out 2>err &&
		test_line_count = 1 err && grep -q "S(qk) = 0.0005 is not below S(ffn) = 0.0002" err
	'
	test_expect_success '--check principle: Emb not the flattest, exit 1, the pairs named' '
		cp run/ckpt-000020.h5 bad.h5 &&
		set_fisher bad.h5 emb=2e-4,qk=1e-4,ffn=3e-4,vo=4e-4,norm=1e-1,out=1e-3 &&
		test_expect_code 1 sw-sharpness --check principle bad.h5 >out 2>err &&
		test_line_count = 1 err && grep -q "S(emb) = 0.0002 is not below S(qk) = 0.0001" err &&
		test_line_count = 7 out
	'
else
	test_skip '--check principle' 'python3-h5py not installed'
fi

# Under --scale-reparam the gains are computed from their directions and
# magnitudes: those are the parameters, the gains have no estimate of
# their own. d_model 32, 2 layers: 5 gains of 32 values, 5 magnitudes.
test_expect_success 'gains reparameterized: the norm block is the directions and magnitudes, both ways' '
	sw-train --data "$CORPUS" --out rp $SMALL --steps 10 --ckpt-every 10 --fisher-every 10 \
		--scale-reparam er --trace "" >/dev/null &&
	sw-sharpness --block norm rp/ckpt-000010.h5 >stored &&
	sw-sharpness --block norm --recompute --data "$CORPUS" --batch-tokens 128 --seq-len 32 \
		rp/ckpt-000010.h5 >computed &&
	for f in stored computed; do
		cut -f3,4 $f >actual &&
		printf "block\tnparams\nnorm\t165\n" >expect && test_cmp expect actual || return 1
	done &&
	awk -F"\t" "NR == 2 && !(\$5 > 0) { exit 1 }" computed
'

# --low-memory runs the same operations on the same values, held
# otherwise: each layer read again from the file when a pass reaches it
# (BF16 widened exactly) and its activations computed again from its
# input for the backward pass. Exact: the same binary and threads, one
# sequence per pass both ways.
test_expect_success '--low-memory: the table of the model loaded whole, bit for bit (HDF5; BF16 safetensors)' '
	sw-convert --to safetensors --dtype bf16 run/ckpt-000020.h5 bf16.safetensors >/dev/null &&
	for c in run/ckpt-000020.h5 bf16.safetensors; do
		sw-sharpness --per-layer --data "$CORPUS" --batch-tokens 256 --seq-len 32 \
			--micro-batch 1 "$c" >whole &&
		sw-sharpness --per-layer --data "$CORPUS" --batch-tokens 256 --seq-len 32 \
			--low-memory "$c" >low &&
		test $(wc -l <low) -gt 7 && test_cmp whole low || return 1
	done
'

test_expect_success '--low-memory: not on a device, not with multipliers (exit 64); no data file (66)' '
	test_expect_code 64 sw-sharpness --low-memory --device emu --data "$CORPUS" \
		--batch-tokens 64 --seq-len 32 run/ckpt-000020.h5 2>err &&
	test_line_count = 1 err && grep -q "CPU only" err &&
	sw-train --data "$CORPUS" --out mult $SMALL --steps 2 --ckpt-every 2 --multipliers row \
		--trace "" >/dev/null &&
	test_expect_code 64 sw-sharpness --low-memory --data "$CORPUS" --batch-tokens 64 \
		--seq-len 32 mult/ckpt-000002.h5 2>err &&
	test_line_count = 1 err && grep -q "multipliers" err &&
	test_expect_code 66 sw-sharpness --low-memory --data missing.txt --batch-tokens 64 \
		--seq-len 32 run/ckpt-000020.h5 2>err &&
	test_line_count = 1 err
'

test_expect_success 'a Hugging Face model from safetensors, on tokens it can read' '
	awk "BEGIN { srand(1); for (i = 0; i < 3000; i++) printf \"%c\", 1 + int(rand() * 46) }" >small.txt &&
	sw-sharpness --data small.txt --batch-tokens 64 --seq-len 16 "$FIX/tiny-hf" >hf &&
	test_line_count = 7 hf
'

test_expect_success 'bad input: token ids beyond the vocabulary, exit 65' '
	test_expect_code 65 sw-sharpness --data "$CORPUS" --batch-tokens 64 --seq-len 16 "$FIX/tiny-hf" 2>err &&
	test_line_count = 1 err && grep -q "not below the vocabulary size 48" err
'

test_expect_success 'bad input: batch not a multiple of the sequence, exit 64' '
	test_expect_code 64 sw-sharpness --recompute --data "$CORPUS" --batch-tokens 100 --seq-len 32 run/ckpt-000020.h5 2>err &&
	test_one_error sw-sharpness run/ckpt-000020.h5
'

test_expect_success 'usage: one mode at a time; --strict needs --check' '
	test_expect_code 64 sw-sharpness --per-layer --hist 3 run/ckpt-000020.h5 2>err &&
	test_expect_code 64 sw-sharpness --strict run/ckpt-000020.h5 2>err
'

test_done
