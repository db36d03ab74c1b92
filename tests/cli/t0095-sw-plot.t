#!/bin/sh
# sw-plot: every kind makes a sane PNG and SVG from the TSV its tool
# prints; a missing column is exit 65 naming it; errors exit as documented.
. "$(dirname "$0")/../lib/tap.sh"

if ! command -v gnuplot >/dev/null 2>&1; then
	test_skip 'sw-plot' 'gnuplot not installed'
	test_done
fi

# PNG: signature and width x height from the IHDR chunk
png_size() {
	od -A n -t u1 -j 16 -N 8 "$1" | awk '{ print $1 * 16777216 + $2 * 65536 + $3 * 256 + $4 "x" $5 * 16777216 + $6 * 65536 + $7 * 256 + $8 }'
}

# The figures as drawn, for the general rule (axis ranges cover the data,
# no empty decade on a log axis, four or more labelled ticks per axis):
# gpcheck KIND TABLE runs plots/KIND.gp on TABLE with check=1 (plots/
# check.gp: after each panel a line "check PANEL LOG XMIN XMAX YMIN YMAX
# DXMIN DXMAX DYMIN DYMAX" on stderr; sw-plot never sets check) into
# check-KIND.
gpcheck() {
	gnuplot -e "in='$2'; out='check-$1.png'; check=1" "$SW_TOP/plots/$1.gp" 2>"check-$1.err" &&
	grep "^check	" "check-$1.err" >"check-$1"
}

# extent TABLE "COL...": the smallest and largest number in columns COL of
# TABLE (empty cells and words skipped)
extent() {
	awk -F'\t' -v cols="$2" 'NR == 1 { n = split(cols, C, " "); for (i = 1; i <= NF; i++) for (j = 1; j <= n; j++) if ($i == C[j]) k[i] = 1; next }
		{ for (i in k) if ($i ~ /^[-+]?[.0-9]/) { v = $i + 0; if (!m++ || v < lo) lo = v; if (m == 1 || v > hi) hi = v } }
		END { if (!m) exit 1; printf "%.9g %.9g\n", lo, hi }' "$1"
}

# fits KIND PANEL AXIS MODE LO HI: in check-KIND, PANEL's AXIS (x or y)
# range holds LO..HI (the table's extent) and every point of it was drawn
# (the data drawn spans LO..HI), and MODE says how closely: lin, a margin
# of 1 to 15% of the range at either end (no point on the frame, no empty
# band); log, less than a decade empty at either end; ratio, as log for a
# panel that draws the values in units of 10^e (the drawn extent's ratio
# is HI / LO).
fits() {
	awk -F'\t' -v p="$2" -v ax="$3" -v mode="$4" -v lo="$5" -v hi="$6" '
		$2 == p { n++; o = ax == "x" ? 4 : 6; a = $o; b = $(o + 1); da = $(o + 4); db = $(o + 5)
			e = 1e-6
			if (mode == "ratio") { if (da <= 0 || (db / da) / (hi / lo) > 1 + e || (db / da) / (hi / lo) < 1 - e) bad = bad " drew " da ".." db " for " lo ".." hi; lo = da; hi = db }
			else if (da > lo * (1 + (lo < 0 ? -e : e)) || db < hi * (1 - (hi < 0 ? -e : e))) bad = bad " drew " da ".." db ", not all of " lo ".." hi
			if (a > lo || b < hi) bad = bad " range " a ".." b " misses " lo ".." hi
			if (mode == "lin" && ((lo - a) < 0.01 * (b - a) || (b - hi) < 0.01 * (b - a))) bad = bad " range " a ".." b ": a point on the frame"
			if (mode == "lin" && ((lo - a) > 0.15 * (b - a) || (b - hi) > 0.15 * (b - a))) bad = bad " range " a ".." b ": an empty band"
			if (mode != "lin" && (lo / a >= 10 || b / hi >= 10)) bad = bad " range " a ".." b ": an empty decade" }
		END { if (!n) print "no panel " p; else if (bad != "") print p " " ax ":" bad; exit !n || bad != "" }' "check-$1"
}

# svglabels SVG: the text labels of a figure, "ANCHOR X Y TEXT" (rotated
# ones left out); yticks SVG and xticks SVG: the labels of the y ticks (end
# anchored at the x most of them share) and of the x ticks (centred at the
# y most share), a line each
svglabels() {
	awk 'function out() { if (!r) print a "\t" x "\t" y "\t" t; g = 0 }
		/<g transform="translate\(/ && /text-anchor=/ { if (g) out(); g = 1; s = $0; sub(/.*<g transform="translate\(/, "", s)
			x = s; sub(/,.*/, "", x); y = s; sub(/^[^,]*,/, "", y); sub(/\).*/, "", y)
			a = $0; sub(/.*text-anchor="/, "", a); sub(/".*/, "", a); r = $0 ~ /rotate/; t = ""; next }
		g && /<text/ { u = $0; sub(/.*<text>/, "", u); sub(/<\/text>.*/, "", u); gsub(/<[^>]*>/, "", u); t = t u }
		g && /<\/g>/ { out() }' "$1"
}
yticks() {
	svglabels "$1" | awk -F'\t' '$1 == "end" { n[$2]++; L[NR] = $2 "\t" $4 } END { for (k in n) if (n[k] > m) { m = n[k]; c = k } for (i = 1; i <= NR; i++) if (split(L[i], f, "\t") && f[1] == c) print f[2] }'
}
xticks() {
	svglabels "$1" | awk -F'\t' '$1 == "middle" { n[$3]++; L[NR] = $3 "\t" $4 } END { for (k in n) if (n[k] > m) { m = n[k]; c = k } for (i = 1; i <= NR; i++) if (split(L[i], f, "\t") && f[1] == c) print f[2] }'
}

test_expect_success 'setup: a run with a trace and /fisher, the tables, a reference figure ref.png' '
	sw-train --data "$FIX/corpus.txt" --out run --steps 40 --ckpt-every 20 --fisher-every 20 \
		--eval-every 20 --trace-every 5 --batch 4 --seq-len 32 --d-model 32 --n-layers 2 >/dev/null &&
	sw-trace --series loss,val_loss,lr,grad_norm,out_norm run/trace.h5 >training.tsv &&
	sw-trace --series residual_rms run/trace.h5 >residual.tsv &&
	sw-sharpness run/ckpt-000040.h5 >sharpness.tsv &&
	sw-sharpness run/ckpt-*.h5 >sharpness-steps.tsv &&
	sw-sharpness --hist 30 run/ckpt-000040.h5 >sharpness-hist.tsv &&
	sw-norms --role lm_head run/ckpt-*.h5 >norms.tsv &&
	sw-spectrum --role down --layer 1 run/ckpt-*.h5 >spectrum.tsv &&
	sw-gen-fixtures --sweep sweep &&
	sw-spectrum --normalize --role down --layer 0 sweep/d32-*.h5 >spectrum-normalized.tsv &&
	sw-spectrum --hist 20 --role down run/ckpt-000040.h5 >esd.tsv &&
	sw-spectrum --esd-fit --hist 20 --role down --layer 1 run/ckpt-000040.h5 >esd-fit.tsv &&
	sw-qkdrift run/ckpt-*.h5 >qkdrift.tsv &&
	sw-norms --scale-vectors --block norm run/ckpt-*.h5 >scale-vectors.tsv &&
	awk -F"\t" -v OFS="\t" "NR == 1 { print \"step\", \"loss\", \"run\"; next }
		{ print \$1, \$2, \"train\"; if (\$3 != \"\") v[\$1] = \$3 }
		END { for (s = 0; s <= 40; s++) if (s in v) print s, v[s], \"validation\" }" training.tsv >loss-curves.tsv &&
	sw-hessian --data "$FIX/corpus.txt" --batch-tokens 128 --seq-len 32 --density --slq-steps 20 \
		--grid 200 --probes 2 run/ckpt-000040.h5 >hessian-density.tsv &&
	awk "BEGIN { print \"lr\tbatch\ttokens\td_model\tloss\tout_norm\";
		for (d = 1; d <= 3; d++) for (e = -4; e <= -1; e++) for (b = 8; b <= 32; b *= 2)
			printf \"%g\t%d\t%d\t64\t%g\t%g\n\", 10^e, b, 1000 * 4^d, 3 + (e + 2 + d / 4)^2 + (b / 16 - d / 2)^2 / 10, 2^(7 + e + 2 + d / 4) }" >runs.tsv &&
	sw-transfer --table - <runs.tsv >transfer.tsv &&
	sw-transfer - <runs.tsv >transfer-fits.tsv &&
	sw-hessian --preconditioned --data "$FIX/corpus.txt" --batch-tokens 128 --seq-len 32 \
		run/ckpt-*.h5 >eos.tsv &&
	sw-spectrum --esd-fit run/ckpt-*.h5 >esd-layers.tsv &&
	sw-compare run/ckpt-*.h5 >compare.tsv &&
	sw-plot norms norms.tsv -o ref.png
'

for kind in training residual sharpness sharpness-steps sharpness-hist norms spectrum spectrum-normalized esd transfer transfer-fits qkdrift scale-vectors loss-curves \
	hessian-density esd-fit eos esd-layers compare; do
	test_expect_success "$kind: a PNG of the set size and an SVG" "
		sw-plot $kind $kind.tsv -o $kind.png 2>err && test_line_count = 0 err &&
		head -c 8 $kind.png | od -A n -t x1 | grep -q '89 50 4e 47 0d 0a 1a 0a' &&
		test \"\$(png_size $kind.png)\" = 1400x900 &&
		test \$(wc -c <$kind.png) -gt 20000 &&
		sw-plot $kind $kind.tsv -o $kind.svg &&
		grep -q '<svg' $kind.svg && grep -q '</svg>' $kind.svg
	"
done

test_expect_success 'the scripts run on their own with gnuplot' '
	gnuplot -e "in=\"norms.tsv\"; out=\"direct.png\"" "$SW_TOP/plots/norms.gp" && test -s direct.png
'

test_expect_success 'a PDF too' '
	sw-plot sharpness sharpness.tsv -o s.pdf && head -c 5 s.pdf | grep -q "%PDF-"
'

test_expect_success 'a missing column: exit 65, the column and the command named, no figure' '
	test_expect_code 65 sw-plot sharpness training.tsv -o x.png 2>err &&
	test_one_error sw-plot training.tsv && grep -q "no column .file." err && grep -q "sw-sharpness" err &&
	! test -e x.png
'

test_expect_success 'usage: unknown kind, bad extension: exit 64' '
	test_expect_code 64 sw-plot nosuch norms.tsv -o x.png 2>err &&
	test_expect_code 64 sw-plot norms norms.tsv -o x.jpg 2>err &&
	test_expect_code 64 sw-plot norms norms.tsv 2>err
'

test_expect_success 'missing table: exit 66; empty table: 65' '
	test_expect_code 66 sw-plot norms nonexistent.tsv -o x.png 2>err &&
	: >empty.tsv && test_expect_code 65 sw-plot norms empty.tsv -o x.png 2>err
'

test_expect_success 'gnuplot missing: exit 70 with the package named' '
	mkdir bin && ln -s "$SW_BIN/sw-plot" bin/sw-plot &&
	test_expect_code 70 env PATH=bin bin/sw-plot norms norms.tsv -o x.png 2>err &&
	grep -q gnuplot-nox err
'

# cmp against ref.png, here and below: exact, the same gnuplot on the
# same table
test_expect_success 'an existing figure is kept without --force, replaced whole with it' '
	echo "the user s figure" >keep.png && cp keep.png user.png &&
	test_expect_code 73 sw-plot norms norms.tsv -o keep.png 2>err &&
	test_one_error sw-plot keep.png && grep -q "exists (--force replaces it)$" err &&
	cmp keep.png user.png &&
	sw-plot --force norms norms.tsv -o keep.png && cmp keep.png ref.png &&
	ls >files && ! grep -q tmp files
'

test_expect_success '--list names every kind with its columns' '
	sw-plot --list >list && test_line_count = 21 list &&
	for k in training residual sharpness sharpness-steps sharpness-hist norms spectrum spectrum-normalized esd transfer transfer-fits qkdrift hessian-density hessian \
		scale-vectors loss-curves \
		esd-fit eos esd-layers compare; do
		grep -q "^$k	" list && test -f "$SW_TOP/plots/$k.gp" || exit 1
	done
'

test_expect_success 'the key names files by what differs: run-x, run-y, not the whole path' '
	printf "file\tstep\tname\tblock\trole\tlayer\tindex\tsigma\n" >two.tsv &&
	for r in run-x run-y; do
		printf "out/sweep/$r/ckpt-000600.h5\t600\tw\tffn\tdown\t1\t%d\t%s\n" 1 3 2 2 3 1 >>two.tsv
	done &&
	sw-plot spectrum two.tsv -o two.svg &&
	grep -q ">run-x<" two.svg && grep -q ">run-y<" two.svg && ! grep -q "sweep/run-x" two.svg
'

test_expect_success 'each figure says what a referee asks (read from its SVG)' '
	for k in norms training spectrum spectrum-normalized esd sharpness qkdrift residual transfer scale-vectors; do
		sw-plot $k $k.tsv -o said-$k.svg || exit 1
	done &&
	grep -q ">L0 attn_norm<" said-scale-vectors.svg && grep -q ">L1 ffn_norm<" said-scale-vectors.svg &&
	grep -q ">final_norm<" said-scale-vectors.svg && ! grep -q "input_layernorm" said-scale-vectors.svg &&
	grep -q ">raw<" said-norms.svg && grep -q ">γ-folded: W_out·diag(γ)<" said-norms.svg &&
	! grep -q ">lm_head_folded<" said-norms.svg &&
	grep -q ">learning rate (×10<" said-training.svg && grep -q "‖W<" said-training.svg &&
	grep -q ">step 20<" said-spectrum.svg && grep -q ">step 40<" said-spectrum.svg &&
	grep -q ">model.layers.1.mlp.down_proj.weight<" said-spectrum.svg &&
	! grep -q ">ckpt-000040.h5<" said-spectrum.svg &&
	grep -q ">model.layers.0.mlp.down_proj.weight, step " said-spectrum-normalized.svg &&
	grep -q "∫p dσ = 1<" said-esd.svg &&
	grep -q ">Principle (1): S(emb) ≪ S(qk) &lt; S(ffn) &lt; S(vo) ≪ S(norm)<" said-sharpness.svg &&
	grep -q ">last step<" said-qkdrift.svg && grep -q ">head 1<" said-qkdrift.svg &&
	grep -q ">layer 1<" said-qkdrift.svg &&
	grep -q ">RMS of the residual stream entering the layer<" said-residual.svg &&
	grep -q ">lr 0.0001<" said-transfer.svg && grep -q ">batch 32<" said-transfer.svg
'

test_expect_success 'training: the loss axis holds both losses, with room above the first point; a title' '
	gpcheck training training.tsv && test_line_count = 4 check-training &&
	fits training loss y lin $(extent training.tsv "loss val_loss") &&
	awk "BEGIN { print \"step\tloss\tval_loss\tlr\tgrad_norm\tout_norm\"
		for (s = 10; s <= 400; s += 10) printf \"%d\t%g\t%s\t0.001\t1\t8\n\", s, (s == 10 ? 7.5 : 3.5 + 3 * exp(-s / 60)), (s % 100 ? \"\" : 3.4 + 3 * exp(-s / 60)) }" >t75.tsv &&
	gpcheck training t75.tsv && fits training loss y lin $(extent t75.tsv "loss val_loss") &&
	sw-plot training training.tsv -o title-training.svg &&
	grep -q ">training: loss, learning rate, gradient norm and output-layer norm against step<" title-training.svg
'

test_expect_success 'norms, sharpness-steps: x from the first checkpoint, y fitted (no empty decade)' '
	gpcheck norms norms.tsv && fits norms norms x lin $(extent norms.tsv step) &&
	fits norms norms y log $(extent norms.tsv rms_to_inf) &&
	gpcheck sharpness-steps sharpness-steps.tsv && fits sharpness-steps mean x lin $(extent sharpness-steps.tsv step) &&
	fits sharpness-steps mean y ratio $(extent sharpness-steps.tsv mean)
'

test_expect_success 'sharpness: S as points on a log axis fitted to S, its spread fitted too' '
	gpcheck sharpness sharpness.tsv && fits sharpness mean y ratio $(extent sharpness.tsv mean) &&
	fits sharpness spread y log $(awk -F"\t" "NR == 1 { for (i = 1; i <= NF; i++) c[\$i] = i; next } !f { f = \$1 } \$1 == f { print 10 ^ \$c[\"q10_log10\"]; print 10 ^ \$c[\"q90_log10\"] }" sharpness.tsv |
		sort -g | sed -n "1p;\$p") &&
	sw-plot sharpness sharpness.tsv -o bars.svg && ! grep -q "<polygon" bars.svg && grep -q "<use xlink:href=.#gpPt" bars.svg
'

test_expect_success 'residual, spectrum, spectrum-normalized: y fitted, a labelled tick at or beyond either end of the data' '
	ncol=$(head -n 1 residual.tsv | awk -F"\t" "{ print NF }") &&
	cols=$(head -n 1 residual.tsv | cut -f2-$ncol | tr "\t" " ") &&
	gpcheck residual residual.tsv && fits residual residual y log $(extent residual.tsv "$cols") &&
	gpcheck spectrum spectrum.tsv && fits spectrum spectrum y log $(extent spectrum.tsv sigma) &&
	gpcheck spectrum-normalized spectrum-normalized.tsv &&
	fits spectrum-normalized spectrum y log $(extent spectrum-normalized.tsv sigma) &&
	for k in residual spectrum spectrum-normalized; do
		sw-plot $k $k.tsv -o cover-$k.svg && yticks cover-$k.svg >y-$k &&
		set -- $(extent $k.tsv "$(test $k = residual && echo "$cols" || echo sigma)") &&
		awk -v lo=$1 -v hi=$2 "\$1 + 0 <= lo { b = 1 } \$1 + 0 >= hi { a = 1 } END { exit !(a && b) }" y-$k ||
		{ echo "$k: y ticks $(tr "\n" " " <y-$k)do not cover $1..$2"; exit 1; }
	done
'

test_expect_success 'the single-panel figures: four or more labelled ticks on each axis' '
	for k in norms residual sharpness-steps sharpness-hist spectrum spectrum-normalized hessian-density; do
		sw-plot $k $k.tsv -o ticks-$k.svg && yticks ticks-$k.svg >y-$k && xticks ticks-$k.svg >x-$k &&
		test $(wc -l <y-$k) -ge 4 && test $(wc -l <x-$k) -ge 4 ||
		{ echo "$k: y $(tr "\n" " " <y-$k)/ x $(tr "\n" " " <x-$k)"; exit 1; }
	done
'

test_expect_success 'hessian-density: x spans the eigenvalues with a density above the floor, not the whole grid' '
	awk -F"\t" "NR == 1 { for (i = 1; i <= NF; i++) c[\$i] = i; next } { n++; L[n] = \$c[\"lambda\"]; D[n] = \$c[\"density\"]; if (D[n] > hi) hi = D[n] }
		END { for (i = 1; i <= n; i++) if (D[i] >= hi * 1e-6) { if (!m++ || L[i] < a) a = L[i]; if (m == 1 || L[i] > b) b = L[i] } print a, b }" \
		hessian-density.tsv >above && read -r lo hi <above &&
	gpcheck hessian-density hessian-density.tsv &&
	awk -F"\t" -v lo=$lo -v hi=$hi "{ exit !(\$4 <= lo && \$5 >= hi && \$5 - \$4 <= 1.2 * (hi - lo)) }" check-hessian-density ||
	{ cat check-hessian-density; echo "data above the floor: $lo..$hi"; exit 1; }
'

# density per unit of log10 h on bins of 0.5: the shares are 0.5 density
test_expect_success 'sharpness-hist: a far mode of one type is left out of x, its share said' '
	{ printf "file\tstep\tblock\tbin_lo\tbin_hi\tcount\tdensity\n" &&
	  awk "BEGIN { split(\"emb qk out\", B, \" \"); for (b = 1; b <= 3; b++) for (k = 0; k < 40; k++) { x = -20 + 0.5 * k; y = 0
		if (x >= -6 && x < -1) y = (b == 3 ? 0.096 : 0.1); if (b == 3 && x >= -14 && x < -13) y = 0.02
		printf \"c.h5\t9\t%s\t%g\t%g\t%d\t%g\n\", B[b], x, x + 0.5, y * 1000, y / 0.5 } }"; } >far.tsv &&
	gpcheck sharpness-hist far.tsv && awk -F"\t" "{ exit !(\$4 >= -7 && \$4 <= -6 && \$5 >= -1 && \$5 <= 0) }" check-sharpness-hist &&
	sw-plot sharpness-hist far.tsv -o far.svg && grep -q ">out: 4.0% left<" far.svg && grep -q ">emb<" far.svg &&
	grep -q "not drawn" far.svg &&
	awk -F"\t" -v OFS="\t" "NR == 1 { print \$0, \"zeros\"; next } { print \$0, (\$3 == \"emb\" ? 77 : 0) }" far.tsv >zeros.tsv &&
	sw-plot sharpness-hist zeros.tsv -o zeros.svg && grep -q ">emb: 77 zeros<" zeros.svg &&
	# a table of an earlier release, the share of each bin as fraction: the same key
	awk -F"\t" -v OFS="\t" "NR == 1 { \$7 = \"fraction\" } NR > 1 { \$7 = \$7 * 0.5 } 1" far.tsv >old.tsv &&
	sw-plot sharpness-hist old.tsv -o old.svg && grep -q ">out: 4.0% left<" old.svg
'

test_expect_success 'sharpness-steps, sharpness-hist, hessian-density: the types in Principle (1)'"'"'s order' '
	for k in sharpness-steps sharpness-hist hessian-density; do
		sw-plot $k $k.tsv -o order-$k.svg &&
		svglabels order-$k.svg | awk -F"\t" "\$1 == \"start\" { print \$4 }" | sed "s/[: ].*//" |
			grep -x -e emb -e qk -e ffn -e vo -e norm -e out | tr "\n" " " >order-$k &&
		test "$(cat order-$k)" = "emb qk ffn vo norm out " || { echo "$k: $(cat order-$k)"; exit 1; }
	done
'

test_expect_success 'transfer: the loss named from loss_kind; 3 or more x labels per panel for a sweep of 2 learning rates' '
	awk -F"\t" -v OFS="\t" "NR == 1 || ((\$1 == 0.001 || \$1 == 0.01) && \$2 == 16)" runs.tsv | sw-transfer --table - >two-lr.tsv &&
	sw-plot transfer two-lr.tsv -o two-lr.svg && grep -q ">loss at the horizon (nats/token)<" two-lr.svg &&
	test $(xticks two-lr.svg | wc -l) -ge 9 &&
	awk -F"\t" -v OFS="\t" "NR == 1 { for (i = 1; i <= NF; i++) if (\$i == \"loss_kind\") k = i } NR > 1 { \$k = \"val_loss\" } 1" \
		two-lr.tsv >val.tsv && sw-plot transfer val.tsv -o val.svg && grep -q ">validation loss at the horizon (nats/token)<" val.svg
'

test_expect_success 'transfer-fits: no line through optima at the grid edge or through one grid value, said so' '
	awk -F"\t" -v OFS="\t" "NR == 1 { for (i = 1; i <= NF; i++) if (\$i == \"bracketed\") k = i; print; next } { \$k = 0; print }" \
		transfer-fits.tsv >edge.tsv &&
	sw-plot transfer-fits edge.tsv -o edge.svg && grep -q ">no optimum bracketed:<" edge.svg && grep -q ">not fitted<" edge.svg &&
	! grep -q "±" edge.svg && svglabels edge.svg | cut -f4 >edge-labels && ! grep -qx fit edge-labels &&
	awk -F"\t" -v OFS="\t" "NR == 1 { for (i = 1; i <= NF; i++) if (\$i == \"batch\") k = i; print; next } { \$k = 4; print }" \
		transfer-fits.tsv >flat.tsv &&
	sw-plot transfer-fits flat.tsv -o flat.svg && grep -q ">B\\* the same at every horizon<" flat.svg &&
	! grep -q "0.00 ± 0.00" flat.svg && grep -q ">-0.83 ± 0.48<" flat.svg &&
	gpcheck transfer-fits flat.tsv && fits transfer-fits batch y log 4 4 && test $(yticks flat.svg | wc -l) -ge 4
'

# exact to the 2 decimals printed: both fits are double arithmetic (no
# BLAS, no float32) on runs.tsv, which awk writes the same on every
# machine, and the exponents (-0.830, 0.479, 0.25, 0.144) lie far from a
# rounding boundary of 2 decimals
test_expect_success 'transfer-fits prints the exponents sw-transfer --summary fits, with their s.e.' '
	sw-transfer --summary - <runs.tsv >summary.tsv &&
	awk -F"\t" "NR == 1 { for (i = 1; i <= NF; i++) c[\$i] = i; next } \$1 == \"all\" {
		printf \"%.2f ± %.2f\n%.2f ± %.2f\n\", \$c[\"lr_exponent\"], \$c[\"lr_exponent_se\"],
			\$c[\"batch_exponent\"], \$c[\"batch_exponent_se\"] }" summary.tsv >expect &&
	test_line_count = 2 expect &&
	sw-plot transfer-fits transfer-fits.tsv -o fits.svg &&
	while read -r e; do grep -q ">$e<" fits.svg || { echo "no $e"; exit 1; }; done <expect
'

# ---- no name and no cell becomes a command (issue 21, D1) ----------------
# sw-plot stages the table in a private directory under TMPDIR and runs
# gnuplot there: a command that ran would leave its file in that directory,
# which then stays (only sw-plot's own files are removed), or in the cwd.
splot() { mkdir -p "$TRASH/tmp" && TMPDIR="$TRASH/tmp" sw-plot "$@"; }
nothing_ran() { ! test -e PWNED && ls -A "$TRASH/tmp" >left && test_line_count = 0 left; }

test_expect_success 'a table named "<touch PWNED;cat t.tsv": the figure, nothing run' '
	cp norms.tsv t.tsv && cp norms.tsv "<touch PWNED;cat t.tsv" &&
	splot norms "<touch PWNED;cat t.tsv" -o lt.png 2>err && test_line_count = 0 err &&
	cmp lt.png ref.png && nothing_ran
'

test_expect_success 'names starting with | in and out: the figure, nothing run' '
	cp norms.tsv "|touch PWNED" &&
	splot norms "|touch PWNED" -o "|touch PWNED.png" 2>err && test_line_count = 0 err &&
	cmp "|touch PWNED.png" ref.png && nothing_ran
'

test_expect_success "names with ', \", spaces and a newline, in and out" '
	in=$(printf "it'\''s a \"table\"\nof norms.tsv") && out=$(printf "<fig> '\''1'\'' \"x\"\n.png") &&
	cp norms.tsv "$in" && splot norms "$in" -o "$out" 2>err && test_line_count = 0 err &&
	cmp "$out" ref.png && nothing_ran
'

test_expect_success 'the table on stdin (-)' '
	splot norms - -o stdin.png <norms.tsv && cmp stdin.png ref.png && nothing_ran
'

# every string cell, and an extra header cell, carry gnuplot's and the
# shell's ways to run a command: backquotes, @macros, quotes closing a
# string around system(), $(...)
PAYLOAD='x`touch PWNED`'\''"@M $(touch PWNED);touch PWNED;'\''.system("touch PWNED").'\'' '
export PAYLOAD
test_expect_success 'cells and a header holding commands: every kind draws them as text' '
	for kind in training residual sharpness sharpness-steps sharpness-hist norms spectrum spectrum-normalized esd transfer transfer-fits qkdrift scale-vectors loss-curves \
	hessian-density esd-fit; do
		awk -F"\t" -v OFS="\t" -v P="$PAYLOAD" "
			NR == 1 { for (i = 1; i <= NF; i++) if (\$i ~ /^(file|name|block|role|source|loss_kind)\$/) m[i] = 1
				  print \$0, P; next }
			{ for (i in m) \$i = P \$i; print \$0, P }" $kind.tsv >h-$kind.tsv &&
		head -n 1 h-$kind.tsv | grep -q "touch PWNED" &&
		splot $kind h-$kind.tsv -o h-$kind.png 2>err && test_line_count = 0 err &&
		test "$(png_size h-$kind.png)" = 1400x900 && nothing_ran || { echo "$kind"; cat err; exit 1; }
	done &&
	splot spectrum h-spectrum.tsv -o h-spectrum.svg && grep -qF ">${PAYLOAD}model.layers.1.mlp.down_proj.weight<" h-spectrum.svg
'

test_expect_success 'commands in the group columns (numbers expected): refused or drawn, nothing run' '
	for kind in transfer transfer-fits qkdrift training; do
		awk -F"\t" -v OFS="\t" -v P="$PAYLOAD" "
			NR == 1 { for (i = 1; i <= NF; i++) if (\$i ~ /^(d_model|tokens|layer|head|lr|batch)\$/) m[i] = 1; print; next }
			{ for (i in m) \$i = P \$i; print }" $kind.tsv >n-$kind.tsv &&
		{ splot $kind n-$kind.tsv -o n-$kind.png 2>err; rc=$?; } &&
		{ test $rc = 0 || { test $rc = 65 && test_one_error sw-plot n-$kind.tsv; }; } &&
		nothing_ran || { echo "$kind: $rc"; cat err; exit 1; }
	done
'

test_expect_success 'gnuplot reads no init file (~/.gnuplot)' '
	mkdir home && echo "system \"touch $TRASH/INIT\"" >home/.gnuplot &&
	HOME=$TRASH/home gnuplot -e "exit" && test -e INIT && rm INIT &&
	HOME=$TRASH/home splot norms norms.tsv -o init.png && ! test -e INIT && nothing_ran
'

test_expect_success 'the scripts on their own refuse a name gnuplot would run' '
	test_expect_code 64 gnuplot -e "in=\"<touch PWNED\"; out=\"x.png\"" "$SW_TOP/plots/norms.gp" 2>err &&
	test_expect_code 64 gnuplot -e "in=\"norms.tsv\"; out=\"|touch PWNED\"" "$SW_TOP/plots/norms.gp" 2>err &&
	test_expect_code 64 gnuplot -e "in=\"a'\''b.tsv\"; out=\"x.png\"" "$SW_TOP/plots/norms.gp" 2>err &&
	! test -e PWNED && ! test -e x.png
'

test_expect_success 'a bad table: one line naming it, exit 65, no figure, nothing left' '
	printf "step\trole\trms_to_inf\n1\tlm_head\n" >ragged.tsv &&
	test_expect_code 65 splot norms ragged.tsv -o bad.png 2>err &&
	test_one_error sw-plot ragged.tsv && grep -q "line 2: 2 fields, the header has 3" err &&
	printf "step\trole\trms_to_inf\n1\tlm\000head\t2\n" >nul.tsv &&
	test_expect_code 65 splot norms nul.tsv -o bad.png 2>err &&
	test_one_error sw-plot nul.tsv && grep -q "line 2: a NUL byte" err &&
	head -n 1 norms.tsv >header.tsv &&
	test_expect_code 65 splot norms header.tsv -o bad.png 2>err &&
	test_one_error sw-plot header.tsv && grep -q "no rows below the header" err &&
	awk -F"\t" -v OFS="\t" "NR > 1 { \$10 = \"x\" } 1" norms.tsv >words.tsv &&
	test_expect_code 65 splot norms words.tsv -o bad.png 2>err &&
	test_one_error sw-plot words.tsv && grep -q "gnuplot failed on this table: " err &&
	mkdir adir && test_expect_code 66 splot norms adir -o bad.png 2>err && test_one_error sw-plot adir &&
	! test -e bad.png && ls >files && ! grep -q bad.png files && nothing_ran
'

test_expect_success 'killed while gnuplot runs: no stage, no half figure left' '
	mkdir -p tmp fake && printf "#!/bin/sh\ntouch \"\$MARK\"\nexec sleep 5\n" >fake/gnuplot && chmod +x fake/gnuplot &&
	PATH="$TRASH/fake:$PATH" MARK="$TRASH/started" TMPDIR="$TRASH/tmp" sw-plot norms norms.tsv -o sig.png 2>err &
	pid=$! && i=0 &&
	while ! test -e started && test $i -lt 100; do sleep 0.1; i=$((i + 1)); done &&
	test -e started && test -n "$(ls -A tmp)" &&
	kill -TERM $pid && { wait $pid; rc=$?; } && test $rc = 143 &&
	test -z "$(ls -A tmp)" && ! ls sig.png* 2>/dev/null
'

test_expect_success 'hessian: lambda_1 and trace per parameter per block over the steps, every point drawn' '
	printf "file\tstep\tblock\tnparams\tlambda_1\ttrace_per_param\n" >hess.tsv &&
	for st in 100 200 300; do
		for b in emb qk ffn vo norm out all; do
			printf "c.h5\t%d\t%s\t64\t%s\t%s\n" $st $b \
				$(awk -v s=$st -v b=$b "BEGIN { h = length(b); printf \"%g %g\", h * s / 100, (h - 3) * s / 1e5 }") \
				>>hess.tsv || exit 1
		done
	done &&
	sw-plot hessian hess.tsv -o hess.png && test -s hess.png &&
	gpcheck hessian hess.tsv &&
	for panel in "lambda_1" "trace_per_param"; do
		set -- $(extent hess.tsv "$panel") &&
		awk -F"\t" -v p="$panel" -v lo="$1" -v hi="$2" "\$2 == p { n++
			if (\$10 - lo > 1e-9 * (hi - lo) || hi - \$11 > 1e-9 * (hi - lo)) bad = 1
			if (\$6 > lo || \$7 < hi || \$4 > 100 || \$5 < 300) bad = 1 }
			END { exit !n || bad }" check-hessian || { cat check-hessian; exit 1; }
	done
'

# The hessian figure on values spanning decades (lambda_1 from 5 to 5e4,
# all positive): both value axes logarithmic (check.gp's LOG column), and
# on ten steps 100..1000 in a half-width panel at most five step labels,
# all distinct, none run together (each a whole number or Nk)
test_expect_success 'hessian: a log axis where the values span decades, step labels apart' '
	printf "file\tstep\tblock\tnparams\tlambda_1\ttrace_per_param\teos_gd\n" >hdec.tsv &&
	for st in 100 200 300 400 500 600 700 800 900 1000; do
		for b in emb qk ffn vo norm; do
			printf "c.h5\t%d\t%s\t64\t%s\n" $st $b \
				"$(awk -v s=$st -v b=$b "BEGIN { h = index(\"emb qk ffn vo norm\", b); printf \"%g\t%g\t%g\", 5 * 10^(h - 1) * s / 1000, h * h * s / 1000, 0.01 * h * s / 1000 }")" \
				>>hdec.tsv || exit 1
		done
	done &&
	gpcheck hessian hdec.tsv &&
	awk -F"\t" "{ n++; if (\$3 != \"y\") bad = 1 } END { exit n != 2 || bad }" check-hessian ||
	{ cat check-hessian; exit 1; }
	sw-plot hessian hdec.tsv -o hdec.svg && xticks hdec.svg >xt &&
	awk "{ n++; if (\$0 !~ /^[0-9]+k?\$/) bad = 1 } END { exit !n || n > 10 || bad }" xt &&
	awk "{ c[\$0]++ } END { for (k in c) if (c[k] != 2) exit 1 }" xt ||
	{ cat xt; exit 1; }
'

test_expect_success 'hessian, eos: the title says which operator (P^-1 H from --preconditioned)' '
	sw-plot hessian eos.tsv -o hp.svg && grep -q ">Adam.s preconditioned Hessian P<" hp.svg &&
	sw-plot hessian hdec.tsv -o hl.svg && grep -q ">the loss Hessian per block type" hl.svg &&
	! grep -q "preconditioned" hl.svg &&
	sw-plot eos eos.tsv -o eosp.svg && grep -q ">Adam.s edge of stability" eosp.svg &&
	sw-plot eos hdec.tsv -o eosgd.svg && grep -q ">gradient descent.s edge of stability" eosgd.svg
'

# eos: the ratios of hdec.tsv (eos_gd 0.001 .. 0.05) and the edge at 1:
# the y axis logarithmic and holding 1 (the edge drawn, not cut off)
test_expect_success 'eos: a log axis from the smallest ratio to the edge at 1, the edge keyed' '
	gpcheck eos hdec.tsv &&
	awk -F"\t" "{ n++; if (\$3 != \"y\" || \$6 > 0.001 || \$7 < 1) bad = 1 } END { exit n != 1 || bad }" check-eos ||
	{ cat check-eos; exit 1; }
	grep -q ">the edge<" eosgd.svg
'

test_expect_success 'esd-layers: a panel per role that has layers, alpha by default, --column another' '
	gpcheck esd-layers esd-layers.tsv && test_line_count = 7 check-esd-layers &&
	sw-plot esd-layers esd-layers.tsv -o el.svg && grep -q ">heavy-tail exponent α" el.svg &&
	grep -q ">step 20<" el.svg && grep -q ">step 40<" el.svg &&
	for r in q k v o gate up down; do grep -q ">$r<" el.svg || exit 1; done &&
	sw-plot --column alpha_weighted esd-layers esd-layers.tsv -o elw.svg &&
	grep -q ">alpha_weighted of each layer" elw.svg &&
	set -- $(awk -F"\t" "NR == 1 { for (i = 1; i <= NF; i++) if (\$i == \"alpha_weighted\") c = i; next }
		\$6 + 0 >= 0 { v = \$c + 0; if (!n++ || v < lo) lo = v; if (n == 1 || v > hi) hi = v } END { print lo, hi }" esd-layers.tsv) &&
	gnuplot -e "in='"'"'esd-layers.tsv'"'"'; out='"'"'c.png'"'"'; check=1; ycol=$(head -n 1 esd-layers.tsv | tr "\t" "\n" | grep -n -x alpha_weighted | cut -d: -f1)" \
		"$SW_TOP/plots/esd-layers.gp" 2>cw.err && grep "^check	" cw.err >cw &&
	awk -F"\t" -v lo=$1 -v hi=$2 "{ n++; if (\$6 > lo || \$7 < hi) bad = 1 } END { exit n != 7 || bad }" cw ||
	{ cat cw; exit 1; }
'

test_expect_success '--column: a fixed kind refuses it (64), a missing column is 65 naming it' '
	test_expect_code 64 sw-plot --column alpha norms norms.tsv -o x.png 2>err &&
	grep -q "draws fixed columns" err &&
	test_expect_code 65 sw-plot --column nosuch esd-layers esd-layers.tsv -o x.png 2>err &&
	test_one_error sw-plot esd-layers.tsv && grep -q "no column .nosuch." err && ! test -e x.png
'

# two files: a panel each (check.gp prints a line per panel), and the x
# labels in one style: every one 10^n, or every one m×10^n (the SVG's text
# of 10^{-4} reads 10-4)
test_expect_success 'esd-fit: a panel per file, x labels in one style' '
	sw-spectrum --esd-fit --hist 20 --role down --layer 1 run/ckpt-*.h5 >ef2.tsv &&
	gpcheck esd-fit ef2.tsv && test_line_count = 2 check-esd-fit &&
	sw-plot esd-fit ef2.tsv -o ef2.svg && xticks ef2.svg >xt2 &&
	{ awk "{ n++; if (\$0 !~ /^10-?[0-9]+\$/) bad = 1 } END { exit !n || bad }" xt2 ||
	  awk "{ n++; if (\$0 !~ /^[0-9.]+×10-?[0-9]+\$/) bad = 1 } END { exit !n || bad }" xt2; } ||
	{ cat xt2; exit 1; }
'

# the key of each panel: the alpha of its rows (read from the table, two
# decimals), "(warn)" where the row's warn is not empty
test_expect_success 'esd-fit: each key says its alpha from the table, and a flagged fit' '
	awk -F"\t" "NR == 1 { for (i = 1; i <= NF; i++) c[\$i] = i; next }
		!s[\$1]++ { printf \"power law, α = %.2f%s\n\", \$c[\"alpha\"], \$c[\"warn\"] != \"\" ? \" (warn)\" : \"\" }" ef2.tsv >keys &&
	test_line_count = 2 keys &&
	while read -r k; do grep -q ">$k<" ef2.svg || { echo "no key: $k"; exit 1; }; done <keys
'

# three checkpoints compared in turn (20 -> 40 -> 60): a panel per pair,
# each holding that pair's rel_change (the table's extent over its rows),
# and --column another column, the panels' range holding its extent
test_expect_success 'compare: a panel per pair, rel_change by default, --column another' '
	sw-train --data "$FIX/corpus.txt" --out run3 --steps 60 --ckpt-every 20 --batch 4 --seq-len 32 \
		--d-model 32 --n-layers 2 >/dev/null &&
	sw-compare run3/ckpt-*.h5 >c3.tsv &&
	gpcheck compare c3.tsv && test_line_count = 2 check-compare &&
	set -- $(extent c3.tsv rel_change) &&
	awk -F"\t" -v lo=$1 -v hi=$2 "{ if (\$6 > lo || \$7 < hi) bad = 1 } END { exit bad }" check-compare ||
	{ cat check-compare; exit 1; }
	sw-plot compare c3.tsv -o c3.svg && grep -q ">step 20 → 40<" c3.svg && grep -q ">step 40 → 60<" c3.svg &&
	grep -q ">relative change of each matrix" c3.svg && grep -q ">none<" c3.svg &&
	sw-plot --column right_overlap compare c3.tsv -o c3o.svg && grep -q ">right_overlap of each matrix" c3o.svg
'

test_done
