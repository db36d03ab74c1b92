#!/bin/sh
# make demo: the main job on the embedded default.
#
# For now (the foundation): write the fixture checkpoints (HDF5 and
# safetensors, F32 and BF16, sharded) into demo/out/, list them with sw-ls,
# print their operator norms with sw-norms and their spectra with
# sw-spectrum, and fit the spectra paper's exponents on a synthetic sweep.
# Later steps add training, the other tools and the figures.
set -eu
bin=${1:-build/bin}
out=demo/out
mkdir -p "$out"
PATH=$bin:$PATH

# align a TSV for reading (column(1) is not on every machine)
pretty() {
	awk -F'\t' '{ for (i = 1; i <= NF; i++) { c[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) }
		       if (NF > nf) nf = NF }
		END { for (r = 1; r <= NR; r++) { line = ""
			for (i = 1; i <= nf; i++) line = line (i < nf ? sprintf("%-" w[i] "s  ", c[r, i]) : c[r, i])
			print line } }'
}

echo "== writing checkpoints with known spectra into $out/fixtures"
sw-gen-fixtures "$out/fixtures"

echo
echo "== sw-ls --summary $out/fixtures/tiny.h5 $out/fixtures/tiny-hf-bf16"
sw-ls --summary "$out/fixtures/tiny.h5" "$out/fixtures/tiny-hf-bf16" | pretty

echo
echo "== sw-ls --layer 10 $out/fixtures/tiny-hf-sharded"
sw-ls --layer 10 "$out/fixtures/tiny-hf-sharded" | pretty

echo
echo "== sw-norms --layer 0,-1 $out/fixtures/tiny.h5 (all in $out/norms.tsv)"
sw-norms "$out/fixtures/tiny.h5" "$out/fixtures/wide.h5" "$out/fixtures/tiny-hf-bf16" >"$out/norms.tsv"
sw-norms --layer 0,-1 "$out/fixtures/tiny.h5" | cut -f4,6,8- | pretty

echo
echo "== the output layer's RMS->inf norm, F32 HDF5 vs BF16 safetensors of the same model"
awk -F'\t' 'NR == 1 || $6 ~ /^lm_head/ { print $1 "\t" $6 "\t" $10 }' "$out/norms.tsv" | pretty

echo
echo "== sw-spectrum --summary --layer 0,-1 $out/fixtures/tiny.h5 (singular values 0.8^k by construction)"
sw-spectrum --summary --layer 0,-1 "$out/fixtures/tiny.h5" | cut -f3,5,7- | pretty

echo
echo "== an lr/wd x width sweep: sigma_top fitted against sqrt(lr/wd) and d_model"
sw-gen-fixtures --sweep "$out/sweep"
sw-spectrum --fit --role q,up,down "$out/sweep"/*.h5 | pretty

echo
echo "demo: wrote $out/fixtures, $out/sweep and $out/norms.tsv"
