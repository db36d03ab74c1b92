#!/bin/sh
# make transfer-study: the optimal-norm paper's experiment at the largest
# scale this 2-core machine affords in about an hour, run with sw-sweep.
#
#   1. Debian's fortunes, a BPE tokenizer of 2048 tokens (as make demo)
#   2. an lr x batch grid of Scion runs (the paper's optimizer; its
#      norm-everywhere Llama), constant lr after a warmup, every run
#      checkpointed (and validated) every 2^18 tokens up to 2^20: four
#      horizons from one run each, two runs at a time on one thread each
#   3. sw-transfer --refine per horizon (the loss-optimal lr and batch and
#      the output norm there), --summary (the norm's spread, eta*(D) and
#      B*(D) exponents against the paper's -0.28 +- 0.07 and 0.45 +- 0.07),
#      the optimal norm at each batch size (the best lr of each batch and
#      horizon), whether B* is bracketed (not at the grid's edge), and the
#      figures (sw-plot transfer, transfer-fits) into STUDY_OUT
#
# The sweep resumes: rerun to finish what was cut. The findings it prints
# are what docs/guide.md's "norm-transfer study" needs.
# STUDY_TINY=1: the same in miniature (the committed corpus, a tiny model,
# seconds), for trying the pipeline; STUDY_HORIZONS="A B C": other
# horizons (tokens; each checkpoint interval is the first).
# Usage: demo/transfer-study.sh [BIN_DIR]   (make transfer-study passes build/bin)
set -eu
bin=${1:-build/bin}
top=$(cd "$(dirname "$0")/.." && pwd)
out=${STUDY_OUT:-demo/out/transfer-study}
if [ "${STUDY_TINY:-0}" = 1 ]; then
	CORPUS=$top/fixtures/corpus.txt VOCAB=300
	D=16 L=1 H=2 T=16 LRS=0.004,0.008,0.016,0.032 BATCHES=2,4,8,16 HORIZONS="4096 8192 16384"
else
	CORPUS="" VOCAB=2048
	D=64 L=4 H=4 T=64 LRS=0.001,0.002,0.004,0.008,0.016,0.032,0.064 BATCHES=2,4,8,16,32
	HORIZONS="262144 524288 1048576"
fi
# a scaled-down trial of the same grid: STUDY_HORIZONS="32768 65536 131072"
HORIZONS=${STUDY_HORIZONS:-$HORIZONS}
. "$top/demo/study.sh"

# 1. the corpus and its tokens
study_corpus "$out" "$CORPUS" $VOCAB

# 2. the grid: every run trains to the last horizon, a checkpoint (and a
# validation loss) at each; a horizon in steps is tokens / (batch x T)
last=$(echo $HORIZONS | awk '{ print $NF }')
first=$(echo $HORIZONS | awk '{ print $1 }')
say "an lr x batch grid of Scion runs (lr $LRS, batch $BATCHES x $T tokens, d_model $D, $L layers) to $last tokens, checkpoints at $HORIZONS; two at a time"
# the checkpoint interval of each run: the first horizon (the horizons
# double), given per batch through one sw-sweep per batch size
for b in $(echo $BATCHES | tr , ' '); do
	every=$((first / (b * T)))
	[ "$every" -ge 1 ] || { echo "transfer-study: batch $b x $T is past the first horizon" >&2; exit 64; }
	sw-sweep --out "$out/sweep-b$b" --lr $LRS --batch $b --tokens $last -j 2 -- \
		--data "$out/corpus.tok" --vocab $VOCAB --optimizer scion --norm-everywhere \
		--d-model $D --n-layers $L --n-heads $H --seq-len $T --warmup $((every / 4 + 1)) \
		--schedule constant --ckpt-every $every --eval-every $every --eval-batches 8 \
		--trace '' --threads 1 >"$out/sweep-b$b.tsv"
done
echo "trained in $(( $(date +%s) - T0 )) s"

# 3. the analyses
for b in $(echo $BATCHES | tr , ' '); do
	sw-sweep --checkpoints "$out/sweep-b$b"
done >"$out/checkpoints.txt"
xargs sw-transfer --refine <"$out/checkpoints.txt" >"$out/transfer.tsv"
xargs sw-transfer --summary --refine <"$out/checkpoints.txt" >"$out/summary.tsv"
xargs sw-transfer --table <"$out/checkpoints.txt" >"$out/table.tsv"
sw-plot transfer "$out/table.tsv" -o "$out/transfer.png"
sw-plot transfer-fits "$out/transfer.tsv" -o "$out/transfer-fits.png"

say "the loss-optimal (lr, batch) per horizon and the output norm there (sw-transfer --refine)"
cut -f1-8,12-13 "$out/transfer.tsv"
say "across the horizons (sw-transfer --summary --refine; paper: eta* ~ D^-0.28+-0.07, B* ~ D^0.45+-0.07)"
cut -f1-5,9,10,13,14 "$out/summary.tsv"
say "B* bracketed? (the grid's batches: $BATCHES)"
awk -F'\t' -v grid="$BATCHES" 'BEGIN { n = split(grid, g, ","); lo = g[1]; hi = g[n] }
	NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
	{ b = $c["batch"]; printf "%s tokens: B* = %s, %s\n", $c["tokens"], b,
		(b == lo || b == hi) ? "at the grid'"'"'s edge" : "bracketed" }' "$out/transfer.tsv"
say "the optimal output norm at each batch size (the best lr of each batch and horizon): log2 ||W_out||_{RMS->inf}"
awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
	{ k = $c["batch"] "\t" $c["tokens"]
	  if (!(k in best) || $c["loss"] < best[k]) { best[k] = $c["loss"]; norm[k] = $c["log2_out_norm"]; lr[k] = $c["lr"] } }
	END { print "batch\ttokens\tlr\tloss\tlog2_out_norm"
	      for (k in best) print k "\t" lr[k] "\t" best[k] "\t" norm[k] }' "$out/table.tsv" |
	sort -t "$(printf '\t')" -k1,1n -k2,2n >"$out/per-batch.tsv"
cat "$out/per-batch.tsv"
awk -F'\t' 'NR > 1 { n++; s += $5; ss += $5 * $5; if (n == 1 || $5 < lo) lo = $5; if (n == 1 || $5 > hi) hi = $5 }
	END { m = s / n; printf "over %d (batch, horizon) optima: log2 norm mean %.3f, sd %.3f, spread %.3f\n",
		n, m, sqrt(ss / n - m * m), hi - lo }' "$out/per-batch.tsv"
echo "figures: $out/transfer.png $out/transfer-fits.png; in all $(( $(date +%s) - T0 )) s"
