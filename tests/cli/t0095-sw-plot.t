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

test_expect_success 'setup: a run with a trace and /fisher, and the tables' '
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
	sw-qkdrift run/ckpt-*.h5 >qkdrift.tsv &&
	awk "BEGIN { print \"lr\tbatch\ttokens\td_model\tloss\tout_norm\";
		for (d = 1; d <= 3; d++) for (e = -4; e <= -1; e++) for (b = 8; b <= 32; b *= 2)
			printf \"%g\t%d\t%d\t64\t%g\t%g\n\", 10^e, b, 1000 * 4^d, 3 + (e + 2 + d / 4)^2 + (b / 16 - d / 2)^2 / 10, 2^(7 + e + 2 + d / 4) }" >runs.tsv &&
	sw-transfer --table - <runs.tsv >transfer.tsv &&
	sw-transfer - <runs.tsv >transfer-fits.tsv
'

for kind in training residual sharpness sharpness-steps sharpness-hist norms spectrum spectrum-normalized esd transfer transfer-fits qkdrift; do
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

test_expect_success 'an existing figure is replaced whole, never left half-written' '
	cp norms.png keep.png && sw-plot norms norms.tsv -o keep.png && cmp -s keep.png norms.png &&
	ls | grep -c "tmp" >n; echo 0 >expect; test_cmp expect n
'

test_expect_success '--list names every kind with its columns' '
	sw-plot --list >list && test_line_count = 13 list &&
	for k in training residual sharpness sharpness-steps sharpness-hist norms spectrum spectrum-normalized esd transfer transfer-fits qkdrift; do
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

test_done
