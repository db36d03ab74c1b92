#!/bin/sh
# sw-spectrum: spectra against the values the fixtures were built with
# (every matrix is U diag(s) V^T with s_k = scale * 0.8^k, scale in
# fixtures/*.expect.tsv as "spectral"; wide.h5's gate has its top value
# three times), --normalize against sqrt(lr/wd) computed by hand, --fit on
# synthetic sweeps with known exponents (sw-gen-fixtures --sweep).
. "$(dirname "$0")/../lib/tap.sh"

# The construction's spectra: name role index sigma, from an expect file.
# $1 = expect file, $2 = role whose top three values are equal (or "").
construction() {
	awk -F'\t' -v top3="$2" 'NR > 1 && $2 != "lm_head_folded" {
		n = $3 < $4 ? $3 : $4
		for (k = 0; k < n; k++)
			printf "%s\t%s\t%d\t%.17g\n", $1, $2, k + 1, $8 * 0.8 ^ ($2 == top3 && k < 3 ? 0 : k)
	}' "$1"
}

# spectra_close TOL EXPECT ACTUAL: name role index sigma lines, the same
# names in the same order, each sigma within TOL * sigma_max of its matrix
# (below ~1e-5 sigma_max the float32 rounding of the stored matrix moves
# the values themselves)
spectra_close() {
	awk -F'\t' -v tol="$1" '
		NR == FNR { e[FNR] = $0; n = FNR; next }
		{
			split(e[FNR], x, "\t")
			if (x[1] != $1 || x[2] != $2 || x[3] != $3) { print "line " FNR ": " e[FNR] " vs " $0; bad = 1; next }
			if (x[3] == 1) top = x[4]
			d = x[4] - $4; if (d < 0) d = -d
			if (d > tol * top) { print "line " FNR ": " x[4] " vs " $4; bad = 1 }
		}
		END { if (FNR != n) { print "line counts differ: " n " vs " FNR; bad = 1 } exit bad }' "$2" "$3"
}

test_expect_success 'header: the columns, exactly' '
	sw-spectrum "$FIX/tiny.h5" >tiny.out &&
	head -n 1 tiny.out >header &&
	printf "file\tstep\tname\tblock\trole\tlayer\tindex\tsigma\ttokens\texpert\n" >expect &&
	test_cmp expect header
'

test_expect_success 'tiny: every spectrum is the construction, to 1e-6 relative' '
	sw-spectrum "$FIX/tiny.h5" >tiny.out &&
	construction "$FIX/tiny.expect.tsv" "" >expect &&
	sed 1d tiny.out | cut -f3,5,7,8 >actual &&
	test_line_count = 1184 actual &&
	# the construction against the spectrum of its float32-stored matrices
	# (Gram in double): a few float32 ulps, 1e-6 relative
	numbers_close 1e-6 expect actual
'

test_expect_success 'wide (64 values down to 8e-7 sigma_max, triple top, tied head): within 1e-6 sigma_max' '
	construction "$FIX/wide.expect.tsv" gate >expect &&
	sw-spectrum "$FIX/wide.h5" >wide.out && sed 1d wide.out | cut -f3,5,7,8 >actual &&
	spectra_close 1e-6 expect actual &&
	# the triple top: three values at 1.06, each to the float32 rounding of
	# the stored matrix (a few ulps, 1e-6 relative), not to printed digits
	awk -F"\t" "\$2 == \"gate\" && \$3 <= 3 && (\$4 - 1.06) ^ 2 <= (1e-6 * 1.06) ^ 2" actual >top3 &&
	test_line_count = 3 top3
'

test_expect_success 'wide: the tied head is the embedding, listed as lm_head.weight' '
	sw-spectrum --role embed,lm_head "$FIX/wide.h5" >both.out && sed 1d both.out >both &&
	grep "	embed	" both | cut -f7,8 >emb &&
	grep "	lm_head.weight	out	lm_head	-1	" both | cut -f7,8 >head &&
	# exact: the same matrix through the same function, in one run
	test_line_count = 64 head && test_cmp emb head
'

test_expect_success 'safetensors F32, single and sharded: the same values as HDF5, exactly' '
	sw-spectrum "$FIX/tiny.h5" >tiny.out && sed 1d tiny.out | cut -f3-8 >h5 &&
	sw-spectrum "$FIX/tiny-hf" >st &&
	sed 1d st | cut -f3-8 >st3 &&
	sw-spectrum "$FIX/tiny-hf-sharded" >sharded.out && sed 1d sharded.out | cut -f3-8 >sharded &&
	# exact: the same binary on the same float32 values, stored three ways
	test_cmp h5 st3 && test_cmp h5 sharded &&
	sed -n 2p st | cut -f2 >step && echo >empty && test_cmp empty step
'

test_expect_success 'BF16 copy: the same spectra to BF16 precision (2^-8 sigma_max)' '
	sw-spectrum "$FIX/tiny-hf-bf16" >bf16.out && sed 1d bf16.out | cut -f3,5,7,8 >bf16 &&
	construction "$FIX/tiny.expect.tsv" "" >expect &&
	spectra_close 0.00390625 expect bf16 &&
	! spectra_close 1e-6 expect bf16 >/dev/null
'

test_expect_success '--summary: the columns and the construction (geometric 0.8^k)' '
	sw-spectrum --summary "$FIX/tiny.h5" >sum &&
	head -n 1 sum >header &&
	printf "file\tstep\tname\tblock\trole\tlayer\tsigma_max\tsigma_min\tstable_rank\teffective_rank\tcondition\tfrobenius\tcount\ttokens\texpert\n" >expect &&
	test_cmp expect header &&
	awk -F"\t" "NR > 1 && \$2 != \"lm_head_folded\" {
		n = \$3 < \$4 ? \$3 : \$4; S = \$8; f = \$9; sum = 0; h = 0
		for (k = 0; k < n; k++) sum += 0.8 ^ k
		for (k = 0; k < n; k++) { p = 0.8 ^ k / sum; h -= p * log(p) }
		printf \"%s\t%.17g\t%.17g\t%.17g\t%.17g\t%.17g\t%.17g\t%d\n\", \$1, S, S * 0.8 ^ (n - 1), f * f / (S * S), exp(h), 0.8 ^ (1 - n), f, n
	}" "$FIX/tiny.expect.tsv" >expect &&
	sed 1d sum | cut -f3,7-13 >actual &&
	test_line_count = 86 actual &&
	# the construction against its float32-stored matrices: a few ulps in
	# each value, 1e-6 relative (counts exact)
	numbers_close 1e-6 expect actual
'

test_expect_success '--per-head: q, k (GQA: 2 KV heads), v by rows, o by columns' '
	sw-spectrum --per-head "$FIX/tiny.h5" >heads &&
	head -n 1 heads >header &&
	printf "file\tstep\tname\tblock\trole\tlayer\thead\tindex\tsigma\ttokens\texpert\n" >expect &&
	test_cmp expect header &&
	sed 1d heads | awk -F"\t" "{ n[\$5 \" \" \$7]++ } END { for (k in n) print k, n[k] }" | sort >counts &&
	printf "k 0 48\nk 1 48\no 0 48\no 1 48\no 2 48\no 3 48\nq 0 48\nq 1 48\nq 2 48\nq 3 48\nv 0 48\nv 1 48\n" >expect &&
	test_cmp expect counts
'

test_expect_success '--per-head: the heads sum of sigma^2 is the whole ||W||_F^2' '
	sw-spectrum --per-head "$FIX/tiny.h5" >heads &&
	sed 1d heads | awk -F"\t" "{ s[\$3] += \$9 * \$9 } END { for (k in s) printf \"%s\t%.12g\n\", k, sqrt(s[k]) }" | sort >actual &&
	awk -F"\t" "\$2 ~ /^[qkvo]\$/ { printf \"%s\t%s\n\", \$1, \$9 }" "$FIX/tiny.expect.tsv" | sort >expect &&
	test_line_count = 48 actual &&
	# sums of squares of 9-digit values against the construction norm of a
	# float32-stored matrix: a few ulps, 1e-6 relative
	numbers_close 1e-6 expect actual
'

test_expect_success '--per-head: other matrices have no rows' '
	test_expect_code 65 sw-spectrum --per-head --role up,lm_head "$FIX/tiny.h5" >out 2>err &&
	test_line_count = 1 out && grep -q "no attention projection matches the selection" err
'

test_expect_success '--top 3: the first three of the full spectrum' '
	sw-spectrum --top 3 "$FIX/tiny.h5" >top.out && sed 1d top.out >top &&
	sw-spectrum "$FIX/tiny.h5" >tiny.out &&
	awk -F"\t" "\$7 <= 3" tiny.out >first3 &&
	# exact: at these sizes (min(rows, cols) <= 128) --top takes the dense
	# spectrum_full too: the same binary computing the same values twice
	test_line_count = 258 top && test_cmp first3 top
'

test_expect_success '--top K above min(rows, cols): every value' '
	sw-spectrum --top 100 --role k "$FIX/tiny.h5" >top.out && sed 1d top.out >top &&
	sw-spectrum "$FIX/tiny.h5" >tiny.out &&
	awk -F"\t" "\$5 == \"k\"" tiny.out >all &&
	# exact: the same dense computation twice, as above
	test_cmp all top
'

test_expect_success '--normalize: sigma / sqrt(lr/wd), lr 3e-3 and wd 0.1 coupled: / 0.173205081' '
	sw-spectrum --normalize "$FIX/tiny.h5" >norm.out && sed 1d norm.out | cut -f3,7,8 >norm &&
	sw-spectrum "$FIX/tiny.h5" >tiny.out &&
	sed 1d tiny.out | awk -F"\t" "{ printf \"%s\t%s\t%.17g\n\", \$3, \$7, \$8 / 0.17320508075688773 }" >expect &&
	# the same sigma divided here and by the tool, each printed to 9
	# digits: two roundings of <= 5e-9 relative, 1e-8
	numbers_close 1e-8 expect norm &&
	# the head: its construction value 2.5 / sqrt(0.03), from a
	# float32-stored matrix (a few ulps, 1e-6 relative)
	awk "BEGIN { printf \"lm_head.weight\t1\t%.17g\n\", 2.5 / sqrt(3e-3 / 0.1) }" >expect-head &&
	grep "^lm_head.weight	1	" norm >head && numbers_close 1e-6 expect-head head
'

test_expect_success '--normalize, independent weight decay: sigma / (lr / sqrt(wd))' '
	sw-gen-fixtures --sweep ind-norm 0.9 0.5 0.003 independent &&
	sw-spectrum --summary --role q ind-norm/d32-lr0.001-wd0.01.h5 >raw.out &&
	sed 1d raw.out | cut -f7,8,12 >raw &&
	sw-spectrum --summary --normalize --role q ind-norm/d32-lr0.001-wd0.01.h5 >norm.out &&
	sed 1d norm.out | cut -f7,8,12 >norm &&
	awk -F"\t" "{ printf \"%.17g\t%.17g\t%.17g\n\", \$1 / 0.01, \$2 / 0.01, \$3 / 0.01 }" raw >expect &&
	# the same values divided here and by the tool: 9-digit rounding, 1e-8
	numbers_close 1e-8 expect norm
'

test_expect_success '--normalize: wd = 0 and a missing lr are exit 65, each tensor named, the rest printed' '
	test_expect_code 65 sw-spectrum --normalize --summary "$FIX/bad/lrwd.h5" >out 2>err &&
	test_line_count = 2 err &&
	grep -q "^sw-spectrum: $FIX/bad/lrwd.h5: model.layers.0.self_attn.o_proj.weight: no per-tensor lr" err &&
	grep -q "^sw-spectrum: $FIX/bad/lrwd.h5: model.layers.0.mlp.up_proj.weight: wd = 0: no equilibrium" err &&
	test_line_count = 8 out && ! grep -q "o_proj\|up_proj" out
'

test_expect_success '--normalize on safetensors (no per-tensor lr/wd): one error, exit 65' '
	test_expect_code 65 sw-spectrum --normalize "$FIX/tiny-hf" >out 2>err &&
	test_one_error sw-spectrum "$FIX/tiny-hf" &&
	grep -q "no per-tensor lr, wd and wd_mode" err && test_line_count = 1 out
'

test_expect_success '--normalize on an sw-convert export: the lr, wd and wd_mode its metadata carries' '
	sw-convert "$FIX/tiny.h5" export >/dev/null &&
	sw-spectrum --normalize --summary "$FIX/tiny.h5" >out && sed 1d out | cut -f3- >from-h5 &&
	sw-spectrum --normalize --summary export >out && sed 1d out | cut -f3- >from-st &&
	# exact: the same binary on the same float32 values, converted losslessly
	test_line_count -gt 5 from-h5 && test_cmp from-h5 from-st &&
	sw-spectrum --normalize --summary --role lm_head export >out && sed 1d out | cut -f7 >top &&
	sw-spectrum --summary --role lm_head export >out && sed 1d out | cut -f7 >raw &&
	awk "{ printf \"%.17g\n\", \$1 / sqrt(3e-3 / 0.1) }" raw >expect &&
	# the same sigma divided here and by the tool, each printed to 9
	# digits: two roundings of <= 5e-9 relative, 1e-8
	test_line_count = 1 expect && numbers_close 1e-8 expect top
'

test_expect_success '--hist 4: log-spaced bins from sigma_min to sigma_max, 4 values each' '
	sw-spectrum --hist 4 --role lm_head "$FIX/tiny.h5" >hist &&
	head -n 1 hist >header &&
	printf "file\tstep\tname\tblock\trole\tlayer\tbin\tbin_lo\tbin_hi\tcount\tdensity\ttokens\texpert\n" >expect &&
	test_cmp expect header &&
	awk "BEGIN { lo = 2.5 * 0.8 ^ 15; r = (2.5 / lo) ^ 0.25
		for (b = 0; b < 4; b++) printf \"%d\t%.17g\t%.17g\t4\t%.17g\n\", b + 1, lo * r ^ b, lo * r ^ (b + 1), 4 / (16 * (lo * r ^ (b + 1) - lo * r ^ b)) }" >expect &&
	sed 1d hist | cut -f7-11 >actual &&
	# bin edges from sigma_min and sigma_max of the construction against a
	# float32-stored matrix: a few ulps, 1e-6 relative (the counts exact)
	numbers_close 1e-6 expect actual
'

test_expect_success '--hist: the counts of every matrix add up to its values' '
	sw-spectrum --hist 7 "$FIX/wide.h5" >hist &&
	sed 1d hist | awk -F"\t" "{ c[\$3] += \$10; n++ } END { for (k in c) if (c[k] != 64) { print k, c[k]; exit 1 }; exit n == 0 }"
'

test_expect_success 'setup: sweeps with known exponents (lr/wd x width, 0.3% scatter)' '
	sw-gen-fixtures --sweep paper 1 0.75 0.003 &&
	sw-gen-fixtures --sweep other 0.8 0.6 0.003 &&
	sw-gen-fixtures --sweep ind 0.9 0.5 0.003 independent &&
	ls paper/*.h5 >files && test_line_count = 18 files
'

# fit_recovers DIR A B: every role's sigma_top exponents within 0.01
fit_recovers() {
	sw-spectrum --fit "$1"/*.h5 >fit &&
	head -n 1 fit >header &&
	printf "role\tquantity\tpoints\texp_scale\tse_scale\texp_d_model\tse_d_model\tprefactor\tr2\n" >expect &&
	test_cmp expect header &&
	test_line_count = 19 fit &&
	awk -F"\t" -v a="$2" -v b="$3" "\$2 == \"sigma_top\" {
		n++
		if (\$3 != 18 || (\$4 - a) ^ 2 > 1e-4 || (\$6 - b) ^ 2 > 1e-4 || \$9 < 0.999 || \$5 <= 0 || \$5 > 0.005) { print; bad = 1 }
	} END { exit bad || n != 9 }" fit
}

test_expect_success '--fit: the paper exponents 1 and 0.75 recovered within 0.01' '
	fit_recovers paper 1 0.75
'

test_expect_success '--fit: other exponents (0.8, 0.6) recovered: nothing is hard-coded' '
	fit_recovers other 0.8 0.6
'

test_expect_success '--fit, independent weight decay: the scale is lr/sqrt(wd)' '
	fit_recovers ind 0.9 0.5
'

test_expect_success '--fit: ||W||_rms is fitted too (q: d x d, rms ~ sigma / d)' '
	sw-spectrum --fit --role q other/*.h5 >fit &&
	awk -F"\t" "\$2 == \"rms\" && (\$4 - 0.8) ^ 2 < 1e-4 && (\$6 + 0.4) ^ 2 < 1e-4" fit >rms &&
	test_line_count = 1 rms
'

test_expect_success '--fit at one width: the width exponent is empty' '
	sw-spectrum --fit --role up other/d32-*.h5 >fit && sed -n 2p fit | cut -f3,6,7 >w &&
	printf "6\t\t\n" >expect && test_cmp expect w
'

test_expect_success '--fit: scale and width varying together is exit 65, said so' '
	test_expect_code 65 sw-spectrum --fit --role up paper/d16-lr0.01-wd0.01.h5 paper/d32-lr0.001-wd0.01.h5 \
		paper/d64-lr0.001-wd0.1.h5 >out 2>err &&
	grep -q "^sw-spectrum: --fit: role up, sigma_top: the two regressors vary together" err &&
	test_line_count = 1 out
'

test_expect_success 'NaN in a tensor: exit 65, the tensor named, the rest printed' '
	test_expect_code 65 sw-spectrum "$FIX/bad/nan.h5" >out 2>err &&
	test_one_error sw-spectrum "$FIX/bad/nan.h5" &&
	grep -q "model.layers.0.mlp.down_proj.weight: 1 of 24 values are NaN or Inf" err &&
	! grep -q down_proj out && grep -q up_proj out
'

test_expect_success 'Inf, with --top, --summary and --fit: exit 65 the same way' '
	for opt in --top=1 --summary --fit; do
		test_expect_code 65 sw-spectrum $opt "$FIX/bad/inf.h5" >out 2>err &&
		grep -q "down_proj.weight: 1 of 24 values are NaN or Inf" err || exit 1
	done
'

test_expect_success 'NaN in q with --per-head: exit 65 once for the tensor, the other heads printed' '
	test_expect_code 65 sw-spectrum --per-head "$FIX/bad/nan-q.h5" >out 2>err &&
	test_one_error sw-spectrum "$FIX/bad/nan-q.h5" &&
	grep -q "model.layers.0.self_attn.q_proj.weight: 1 of 16 values are NaN or Inf" err &&
	! grep -q q_proj out && grep -q k_proj out && grep -q o_proj out
'

test_expect_success '--json: JSON Lines, null for an unknown step' '
	sw-spectrum --json --role lm_head --top 1 "$FIX/tiny-hf" >out &&
	test_line_count = 1 out &&
	grep -q "^{\"file\": \".*tiny-hf\", \"step\": null, \"name\": \"lm_head.weight\", \"block\": \"out\", \"role\": \"lm_head\", \"layer\": -1, \"index\": 1, \"sigma\": [-+.0-9e]*, \"tokens\": null, \"expert\": -1}$" out &&
	# sigma: the construction value 2.5 from a float32-stored matrix (a
	# few ulps, 1e-6 relative), not the digits one machine printed
	sed "s/.*\"sigma\": \([^,]*\),.*/\1/" out >sigma &&
	echo 2.5 >expect-sigma && numbers_close 1e-6 expect-sigma sigma
'

test_expect_success 'file names from stdin, many files in one table' '
	printf "%s\n%s\n" "$FIX/tiny.h5" "$FIX/wide.h5" | sw-spectrum --summary --role lm_head >out &&
	test_line_count = 3 out
'

test_expect_success 'closing the pipe early ends quietly' '
	# pipe-ok: the pipe is what is tested; the status is kept in status
	{ sw-spectrum "$FIX/tiny.h5" "$FIX/tiny.h5" 2>err; echo $? >status; } | head -n 1 >out &&
	test_closed_quietly status && test_line_count = 1 out && test_line_count = 0 err
'

if command -v script >/dev/null 2>&1; then
	test_expect_success 'progress on a terminal: matrices done of n, the last one, elapsed seconds' '
		script -qec "sw-spectrum --top 1 $FIX/tiny.h5 >/dev/null" /dev/null >tty &&
		grep -q "sw-spectrum: $FIX/tiny.h5: matrix 86 of 86, [a-z_.0-9]*weight, [0-9.]* s" tty
	'
else
	test_skip 'progress on a terminal' 'script(1) not installed'
fi

test_expect_success 'usage errors: exit 64' '
	test_expect_code 64 sw-spectrum --summary --hist 3 "$FIX/tiny.h5" 2>err &&
	test_expect_code 64 sw-spectrum --top 2 --summary "$FIX/tiny.h5" 2>err &&
	test_expect_code 64 sw-spectrum --fit --normalize "$FIX/tiny.h5" 2>err &&
	test_expect_code 64 sw-spectrum --top 0 "$FIX/tiny.h5" 2>err &&
	test_expect_code 64 sw-spectrum --hist x "$FIX/tiny.h5" 2>err &&
	test_expect_code 64 sw-spectrum --no-such-option "$FIX/tiny.h5" 2>err
'

test_expect_success 'a missing file: exit 66, the others printed' '
	test_expect_code 66 sw-spectrum --summary no-such.h5 "$FIX/tiny.h5" >out 2>err &&
	test_one_error sw-spectrum no-such.h5 && test_line_count = 87 out
'

test_done
