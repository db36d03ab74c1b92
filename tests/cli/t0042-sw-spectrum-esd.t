#!/bin/sh
# sw-spectrum --esd-fit: the heavy-tail statistics of every matrix's
# eigenvalues lambda = sigma^2 / N (the power law of Clauset, Shalizi and
# Newman, the Marchenko-Pastur bulk), on matrices with a known spectrum;
# --hist beside it; per head; a 128256-token head; usage errors. The fit
# itself is checked against numpy in tests/e2e/t0285-esdfit-numpy.t and
# against Pareto samples and a brute-force scan in tests/unit/t-esdfit.c.
. "$(dirname "$0")/../lib/tap.sh"

test_expect_success 'the columns, a row per matrix' '
	sw-spectrum --esd-fit "$FIX/tiny.h5" >out &&
	head -n 1 out >header &&
	printf "file\tstep\tname\tblock\trole\tlayer\tcount\tlambda_max\talpha\talpha_se\txmin\tks_d\ttail\talpha_weighted\tlog_spectral_norm\tlog_norm\tmp_sigma2\tmp_edge\tspikes\ttokens\texpert\twarn\n" >expect &&
	test_cmp expect header &&
	sw-spectrum --summary "$FIX/tiny.h5" >summary &&
	test_line_count = $(wc -l <summary) out
'

# the fixture head was built with sigma_k = 2.5 0.8^(k-1), k = 1..16, 48 x 16
# (stored in float32: 1e-7 relative): lambda_k = sigma_k^2 / 48, a
# geometric sequence. The spectrum is the Gram matrix's in double
# (dsyevd), so only the float32 storage separates it from the
# construction: 1e-7 relative. The log norms and alpha_weighted are on
# WeightWatcher's scale, of sigma^2 without the 1/48 (its 0.7.x
# apply_norm_metrics: log10 of the sum and of the largest of sv * sv).
# The fit's columns against the same fit redone here from the printed
# (9-digit) values: 1e-6.
test_expect_success 'the head of known spectrum: lambda_max, the norms, alpha and its s.e. from the tail' '
	sw-spectrum --esd-fit --role lm_head "$FIX/tiny.h5" >out &&
	awk -F"\t" "NR == 2 { print \$7, \$8, \$15, \$16 }" out >got &&
	awk "BEGIN { for (k = 0; k < 16; k++) s += (2.5 * 0.8^k)^2
		printf \"16 %.9g %.9g %.9g\n\", 6.25 / 48, log(6.25) / log(10), log(s) / log(10) }" >expect &&
	tr " " "\t" <expect >expect.tsv && tr " " "\t" <got >got.tsv && numbers_close 1e-7 expect.tsv got.tsv &&
	awk -F"\t" "NR == 2 { n = \$13; x = \$11; s = 0
		for (k = 0; k < 16; k++) { l = (2.5 * 0.8^k)^2 / 48; if (l >= x * (1 - 1e-6)) { s += log(l / x); c++ } }
		a = 1 + n / s; d = a - \$9; if (d < 0) d = -d
		e = (a - 1) / sqrt(n) - \$10; if (e < 0) e = -e
		w = a * log(\$8 * 48) / log(10) - \$14; if (w < 0) w = -w
		exit !(c == n && d < 1e-6 * a && e < 1e-6 && w < 1e-6 * (a + 1)) }" out
'

# densities and edges printed to 9 digits: the integrals agree to 1e-6
test_expect_success '--esd-fit --hist: the density of lambda integrates to 1, the power law to the tail'"'"'s share up to lambda_max' '
	sw-spectrum --esd-fit --hist 12 --role down --layer 0 "$FIX/wide.h5" >h &&
	head -n 1 h | cut -f7-13 >header &&
	printf "bin\tbin_lo\tbin_hi\tcount\tdensity\tfit_density\tmp_density\n" >expect && test_cmp expect header &&
	sw-spectrum --esd-fit --role down --layer 0 "$FIX/wide.h5" >f &&
	awk -F"\t" "NR == FNR { if (FNR == 2) { n = \$7; x = \$11; t = \$13; m = \$8; al = \$9 } next } FNR > 1 {
		w = \$9 - \$8; a += \$11 * w; c += \$10
		if (\$12 != \"\") p += \$12 * w; else if (\$9 > x) bad = 1 }
		END { d = a - 1; if (d < 0) d = -d; e = p - t / n * (1 - (m / x)^(1 - al)); if (e < 0) e = -e
		exit bad || c != n || d > 1e-6 || e > 1e-6 }" f h
'

test_expect_success '--per-head: a row per head, head_dim eigenvalues each' '
	sw-spectrum --esd-fit --per-head --role q,k --layer 0 "$FIX/tiny.h5" >ph &&
	awk -F"\t" "NR > 1 { print \$5, \$7, \$8 }" ph >got &&
	printf "%s\n" "q 0 4" "q 1 4" "q 2 4" "q 3 4" "k 0 4" "k 1 4" >expect && test_cmp expect got
'

test_expect_success 'a head of 128256 tokens is fitted like any matrix' '
	sw-train --data "$FIX/corpus.txt" --vocab 128256 --out big --steps 1 --d-model 16 --n-layers 1 \
		--n-heads 2 --batch 1 --seq-len 8 --eval-every 0 --trace "" --threads 1 >/dev/null &&
	sw-spectrum --esd-fit --role embed,lm_head big/ckpt-000001.h5 >big.tsv &&
	awk -F"\t" "NR > 1 { print \$5, \$7; if (!(\$9 > 1) || \$13 < 2) bad = 1 } END { exit bad }" big.tsv >got &&
	printf "%s\n" "embed 16" "lm_head 16" >expect && test_cmp expect got
'

test_expect_success 'a tied head: its row is the embedding'"'"'s' '
	sw-train --data "$FIX/corpus.txt" --out tied --steps 2 --d-model 16 --n-layers 1 --n-heads 2 --tie \
		--batch 1 --seq-len 8 --eval-every 0 --trace "" --threads 1 >/dev/null &&
	sw-spectrum --esd-fit --role embed,lm_head tied/ckpt-000002.h5 >t &&
	# exact: the same function on the same matrix twice
	test_line_count = 3 t && cut -f7- t | sed 1d | uniq >u && test_line_count = 1 u
'

# warn: WeightWatcher's labels, from the row's own tail and alpha
# (short-tail below 50, over-trained below 2, under-trained above 6,
# joined by commas), recomputed here from the printed columns
test_expect_success 'warn: short-tail, over-trained, under-trained as the row'"'"'s tail and alpha say' '
	sw-train --data "$FIX/corpus.txt" --out init --steps 1 --d-model 256 --n-layers 1 --n-heads 4 \
		--batch 1 --seq-len 8 --eval-every 0 --trace "" --threads 1 >/dev/null &&
	sw-spectrum --esd-fit "$FIX/tiny.h5" init/ckpt-000001.h5 >w &&
	awk -F"\t" "NR > 1 { e = \$13 < 50 ? \"short-tail\" : \"\"
		if (\$9 < 2) e = e (e == \"\" ? \"\" : \",\") \"over-trained\"
		else if (\$9 > 6) e = e (e == \"\" ? \"\" : \",\") \"under-trained\"
		if (e != \$22 || NF != 22) { print \"row \" NR \": \" \$22 \" for tail \" \$13 \", alpha \" \$9; bad = 1 }
		seen[\$22] = 1 }
		END { exit bad || !(\"\" in seen) || !(\"short-tail\" in seen) ||
			!(\"short-tail,over-trained\" in seen) || !(\"short-tail,under-trained\" in seen) }" w
'

# the fixture head: sigma_k = 2.5 0.8^(k-1), 16 values: a tail of at
# most 16, a fit not to trust whatever alpha
test_expect_success 'warn: the 16-value head of known spectrum is short-tail' '
	sw-spectrum --esd-fit --role lm_head "$FIX/tiny.h5" >h &&
	cut -f22 h >got && printf "warn\nshort-tail,over-trained\n" >expect && test_cmp expect got
'

# the density rows end with the matrix's alpha and warn, the cells of its
# --esd-fit row (the same fit: the same bytes), every bin's row alike
test_expect_success '--esd-fit --hist: each bin carries its matrix'"'"'s alpha and warn; JSON carries warn' '
	sw-spectrum --esd-fit --hist 4 "$FIX/tiny.h5" >hh &&
	sw-spectrum --esd-fit "$FIX/tiny.h5" >rows &&
	head -n 1 hh >header && grep -q "	expert	alpha	warn$" header &&
	awk -F"\t" "FNR == 1 { for (i = 1; i <= NF; i++) c[\$i] = i; next }
		NR == FNR { want[\$c[\"name\"]] = \$c[\"alpha\"] \"|\" \$c[\"warn\"]; next }
		{ n++; if (want[\$c[\"name\"]] != \$c[\"alpha\"] \"|\" \$c[\"warn\"]) { print \"row \" FNR \": \" \$c[\"name\"]; bad = 1 } }
		END { exit !n || bad }" rows hh &&
	sw-spectrum --esd-fit --json --role lm_head "$FIX/tiny.h5" >j &&
	grep -q "\"expert\": -1, \"warn\": \"short-tail,over-trained\"}$" j
'

test_expect_success 'usage: --esd-fit needs the whole spectrum and no other mode' '
	test_expect_code 64 sw-spectrum --esd-fit --top 2 "$FIX/tiny.h5" 2>err &&
	test_expect_code 64 sw-spectrum --esd-fit --summary "$FIX/tiny.h5" 2>err &&
	test_expect_code 64 sw-spectrum --fit --esd-fit "$FIX/tiny.h5" 2>err
'

test_done
