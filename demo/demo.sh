#!/bin/sh
# make demo: the main job on the embedded default, end to end.
#
#   1. a byte-level BPE tokenizer (vocab 2048) on Debian's fortunes text
#   2. a small Llama trained for 2500 steps: checkpoints with /fisher, a trace
#   3. an lr x batch sweep (norm transfer) and an lr x wd x width sweep
#      (spectra), short runs
#   4. every tool on them, every figure kind into demo/out/, TSVs beside
#
# Reruns reuse what is there: delete demo/out (or a part of it) to redo.
# Usage: demo/demo.sh [BIN_DIR]   (make demo passes build/bin)
set -eu
bin=${1:-build/bin}
out=demo/out
PATH=$bin:$PATH
export PATH
mkdir -p "$out"
T0=$(date +%s)

say() { printf '\n== %s\n' "$*"; }
elapsed() { echo "$(( $(date +%s) - T0 )) s"; }

# align a TSV for reading (column(1) is not on every machine)
pretty() {
	awk -F'\t' '{ for (i = 1; i <= NF; i++) { c[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) }
		       if (NF > nf) nf = NF }
		END { for (r = 1; r <= NR; r++) { line = ""
			for (i = 1; i <= nf; i++) line = line (i < nf ? sprintf("%-" w[i] "s  ", c[r, i]) : c[r, i])
			print line } }'
}

# ---- 1. the corpus and the tokenizer ------------------------------------

FORTUNES=/usr/share/games/fortunes
if [ ! -s "$out/fortunes.txt" ]; then
	if [ ! -d "$FORTUNES" ]; then
		echo "demo: $FORTUNES is missing: install Debian's fortunes (make deps does)" >&2
		exit 66
	fi
	cat $(ls -d "$FORTUNES"/* | grep -v -E '\.(dat|u8)$') >"$out/fortunes.txt"
fi
if [ ! -s "$out/fortunes.tok" ]; then
	say "a BPE tokenizer on $(wc -c <"$out/fortunes.txt") bytes of fortunes ($(elapsed))"
	sw-tokenize train --vocab 2048 -o "$out/tokenizer.bpe" "$out/fortunes.txt" | pretty
	sw-tokenize encode -t "$out/tokenizer.bpe" -o "$out/fortunes.tok" "$out/fortunes.txt" | pretty
fi
DATA="--data $out/fortunes.tok --vocab 2048"

# ---- 2. the main run -----------------------------------------------------

MAIN=$out/main
if [ ! -s "$MAIN/ckpt-002500.h5" ]; then
	say "training: d_model 128, 4 layers, GQA 4/2 heads, 2500 steps of 16 x 64 tokens ($(elapsed))"
	rm -rf "$MAIN"
	sw-train $DATA --out "$MAIN" --d-model 128 --n-layers 4 --n-heads 4 --n-kv-heads 2 \
		--seq-len 64 --batch 16 --steps 2500 --warmup 100 --lr 3e-3 --wd 0.1 \
		--ckpt-every 250 --fisher-every 250 --eval-every 250 --trace-every 10 >/dev/null
fi

# ---- 3. the sweeps -------------------------------------------------------

# norm transfer: lr x batch, checkpoints at three horizons of tokens
SWEEP=$out/sweep-lr-batch
if [ ! -d "$SWEEP/done" ]; then
	say "an lr x batch sweep: 4 x 3 runs, d_model 64, horizons 64k, 128k, 256k tokens ($(elapsed))"
	rm -rf "$SWEEP"
	for lr in 0.001 0.002 0.004 0.008; do
		for b in 4 8 16; do
			s=$((262144 / (b * 64)))
			sw-train $DATA --out "$SWEEP/lr$lr-b$b" --d-model 64 --n-layers 2 --n-heads 4 \
				--seq-len 64 --batch $b --lr $lr --warmup $((s / 20)) --steps $s \
				--ckpt-every $((s / 4)) --eval-every $((s / 4)) --trace "" >/dev/null
			rm -f "$SWEEP/lr$lr-b$b/ckpt-$(printf %06d $((s * 3 / 4))).h5"
		done
	done
	mkdir "$SWEEP/done"
fi

# spectra: lr x wd at two widths, constant lr after warmup (the AdamW steady state)
SPEC=$out/sweep-lr-wd
if [ ! -d "$SPEC/done" ]; then
	say "an lr x wd x width sweep: 2 x 2 x 2 runs of 600 steps ($(elapsed))"
	rm -rf "$SPEC"
	for d in 64 128; do
		for lr in 0.003 0.01; do
			for wd in 0.3 1.0; do
				sw-train $DATA --out "$SPEC/d$d-lr$lr-wd$wd" --d-model $d --n-layers 2 \
					--n-heads 4 --seq-len 64 --batch 8 --lr $lr --wd $wd --schedule constant \
					--warmup 50 --steps 600 --eval-every 0 --trace "" >/dev/null
			done
		done
	done
	mkdir "$SPEC/done"
fi

# ---- 4. every tool, every figure -----------------------------------------

say "the tools ($(elapsed))"
FINAL=$MAIN/ckpt-002500.h5
sw-ls --summary "$FINAL" >"$out/params.tsv"
pretty <"$out/params.tsv"

sw-trace --series loss,val_loss,lr,grad_norm,out_norm "$MAIN/trace.h5" >"$out/training.tsv"
sw-trace --series residual_rms "$MAIN/trace.h5" >"$out/residual.tsv"
sw-norms --role lm_head "$MAIN"/ckpt-*.h5 >"$out/norms.tsv"
sw-sharpness "$MAIN"/ckpt-*.h5 >"$out/sharpness-steps.tsv"
sw-sharpness "$FINAL" >"$out/sharpness.tsv"
sw-sharpness --hist 60 "$FINAL" >"$out/sharpness-hist.tsv"
sw-sharpness --ratios "$MAIN"/ckpt-*.h5 >"$out/sharpness-ratios.tsv"
sw-spectrum --role down --layer 1 "$MAIN"/ckpt-000250.h5 "$MAIN"/ckpt-001000.h5 "$FINAL" >"$out/spectrum.tsv"
sw-spectrum --summary "$FINAL" >"$out/spectrum-summary.tsv"
sw-spectrum --hist 40 --role down --layer 1 "$FINAL" >"$out/esd.tsv"
sw-spectrum --normalize --role down --layer 1 "$SPEC"/d128-*/ckpt-000600.h5 >"$out/spectrum-normalized.tsv"
sw-spectrum --fit "$SPEC"/*/ckpt-000600.h5 >"$out/spectrum-fit.tsv"
sw-qkdrift "$MAIN"/ckpt-*.h5 >"$out/qkdrift.tsv"
sw-qkdrift --drift "$MAIN"/ckpt-*.h5 >"$out/qkdrift-drift.tsv"
sw-transfer --table "$SWEEP"/*/ckpt-*.h5 >"$out/transfer.tsv"
sw-transfer "$SWEEP"/*/ckpt-*.h5 >"$out/transfer-fits.tsv"
sw-transfer --summary "$SWEEP"/*/ckpt-*.h5 >"$out/transfer-summary.tsv" || true

say "figures ($(elapsed))"
for kind in training residual norms sharpness sharpness-steps sharpness-hist spectrum \
	spectrum-normalized esd qkdrift transfer transfer-fits; do
	sw-plot "$kind" "$out/$kind.tsv" -o "$out/$kind.png"
	echo "$out/$kind.png"
done

say "what it shows"
echo "sharpness by block type at the last step (S = mean of the GNB estimate, eq. 4):"
cut -f3,4,5,6 "$out/sharpness.tsv" | pretty
if sw-sharpness --check principle --strict "$FINAL" >/dev/null 2>"$out/principle.txt"; then
	echo "Principle (1), S(emb) < S(qk) < S(ffn) < S(vo) < S(norm): holds at the last step"
else
	echo "Principle (1) at the last step:"
	sed 's/^sw-sharpness: [^:]*: /  /' "$out/principle.txt"
fi
echo
echo "norm transfer: the loss-optimal run of each horizon and its output norm:"
cut -f2,5,6,7,8,10 "$out/transfer-fits.tsv" | pretty
echo
echo "spectra: sigma_top and ||W||_rms against sqrt(lr/wd) and d_model (the paper: slopes 1 and 0.75):"
pretty <"$out/spectrum-fit.tsv" | cut -c1-160
say "done in $(elapsed): tables and figures in $out/"
