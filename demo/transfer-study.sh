#!/bin/sh
# make transfer-study: the optimal-norm paper's experiment at the largest
# scale this 2-core machine affords in about 40 minutes, run with sw-sweep.
#
#   1. Debian's fortunes, a BPE tokenizer of 2048 tokens (as make demo)
#   2. per optimizer (Scion, the paper's, and Adam, which the paper also
#      runs), an lr x batch grid on the norm-everywhere Llama, constant lr
#      after a warmup, every run checkpointed (and validated) every 2^18
#      tokens up to 2^20: four horizons from one run each, two runs at a
#      time on one thread each. Each batch size gets its own window of
#      NLR learning rates (factors of 2): Scion's optimal lr grows with
#      the batch, so its window moves up a factor of 2 per doubling of the
#      batch (a window that follows the optimum brackets it with fewer
#      runs than a full grid); Adam's stays near 0.004 at every batch
#      (measured once, batches 8 and 64), so its window stays. Adam's
#      batches are smaller (2 to 32 against Scion's 8 to 256): its
#      optimal batch is small (4 at 2^18 tokens, where 64 loses a nat)
#   3. per optimizer: sw-transfer --refine per horizon (the loss-optimal lr
#      and batch and the output norm there), whether B* is bracketed (not
#      at the grid's smallest or largest batch), --summary over every
#      horizon and over the horizons whose B* is bracketed (the B*(D) and
#      eta*(D) exponents against the paper's 0.45 +- 0.07 and -0.28 +-
#      0.07: an optimum at the grid's edge is a bound, not a measurement),
#      the optimal norm at each batch size (the best lr of each batch and
#      horizon), the figures (sw-plot transfer, transfer-fits)
#   4. both optimizers side by side (optimizers.tsv)
#
# The sweeps resume: rerun to finish what was cut. The findings it prints
# are what docs/guide.md's "norm-transfer study" needs.
# STUDY_TINY=1: the same in miniature (the committed corpus, a tiny model,
# seconds), for trying the pipeline; STUDY_HORIZONS="A B C": other
# horizons (tokens; each checkpoint interval is the first);
# STUDY_OPTIMIZERS="scion": one optimizer; STUDY_SCALE=N: N times every
# horizon; STUDY_SLURM=1: Slurm job scripts instead of runs (demo/study.sh).
# Usage: demo/transfer-study.sh [BIN_DIR]   (make transfer-study passes build/bin)
set -eu
bin=${1:-build/bin}
top=$(cd "$(dirname "$0")/.." && pwd)
out=${STUDY_OUT:-demo/out/transfer-study}
if [ "${STUDY_TINY:-0}" = 1 ]; then
	CORPUS=$top/fixtures/corpus.txt VOCAB=300
	D=16 L=1 H=2 T=16 NLR=3 HORIZONS="2048 4096 8192"
	BATCHES_scion=4,8,16 LR0_scion=0.032 SHIFT_scion=1
	BATCHES_adamw=1,2,4 LR0_adamw=0.004 SHIFT_adamw=0
else
	CORPUS="" VOCAB=2048
	D=64 L=4 H=4 T=64 NLR=5 HORIZONS="262144 524288 1048576"
	# per optimizer: the batches, where the smallest batch's lr window
	# starts, and its shift (factors of 2) per doubling of the batch:
	# Scion 0.002-0.032 at batch 8, ..., 0.064-1.024 at batch 256 (a grid
	# of 4 to 128 left Scion's B* at 128 from 2^19 tokens on); Adam
	# 0.001-0.016 at every batch
	BATCHES_scion=8,16,32,64,128,256 LR0_scion=0.002 SHIFT_scion=1
	BATCHES_adamw=2,4,8,16,32 LR0_adamw=0.001 SHIFT_adamw=0
fi
# a scaled-down trial of the same grid: STUDY_HORIZONS="32768 65536 131072"
HORIZONS=${STUDY_HORIZONS:-$HORIZONS}
HORIZONS=$(for h in $HORIZONS; do echo $((h * ${STUDY_SCALE:-1})); done | tr '\n' ' ')
OPTIMIZERS=${STUDY_OPTIMIZERS:-scion adamw}
. "$top/demo/study.sh"

# the lr window of the K-th batch size (0 the smallest) under SHIFT:
# NLR factors of 2 from LR0 x 2^(K x SHIFT)
lr_window() {
	awk -v lo="$1" -v k="$2" -v shift="$3" -v n="$NLR" \
		'BEGIN { for (i = 0; i < n; i++) printf "%s%g", i ? "," : "", lo * 2 ^ (k * shift + i) }'
}
# an optimizer's settings: opt_set OPT sets batches, lr0, shift
opt_set() {
	case $1 in
	scion|adamw) eval "batches=\$BATCHES_$1 lr0=\$LR0_$1 shift=\$SHIFT_$1" ;;
	*) echo "transfer-study: no grid for optimizer $1 (scion, adamw)" >&2; exit 64 ;;
	esac
}

# 1. the corpus and its tokens
study_corpus "$out" "$CORPUS" $VOCAB

# 2. the grids: every run trains to the last horizon, a checkpoint (and a
# validation loss) at each; a horizon in steps is tokens / (batch x T)
last=$(echo $HORIZONS | awk '{ print $NF }')
first=$(echo $HORIZONS | awk '{ print $1 }')
for opt in $OPTIMIZERS; do
	opt_set $opt
	mkdir -p "$out/$opt"
	say "$opt: an lr x batch grid (batch $batches x $T tokens, $NLR lrs from $lr0 at the smallest batch, x2^$shift per batch doubling; d_model $D, $L layers) to $last tokens, checkpoints at $HORIZONS; two at a time"
	k=0
	for b in $(echo $batches | tr , ' '); do
		every=$((first / (b * T)))
		[ "$every" -ge 1 ] || { echo "transfer-study: batch $b x $T is past the first horizon" >&2; exit 64; }
		sweep --out "$out/$opt/sweep-b$b" --lr "$(lr_window $lr0 $k $shift)" --batch $b --tokens $last -j 2 -- \
			--data "$out/corpus.tok" --vocab $VOCAB --optimizer $opt --norm-everywhere \
			--d-model $D --n-layers $L --n-heads $H --seq-len $T --warmup $((every / 4 + 1)) \
			--schedule constant --ckpt-every $every --eval-every $every --eval-batches 8 \
			--trace '' --threads 1 >"$out/$opt/sweep-b$b.tsv"
		k=$((k + 1))
	done
	echo "trained in $(( $(date +%s) - T0 )) s"
done
study_trained

# 3. the analyses, per optimizer
for opt in $OPTIMIZERS; do
	opt_set $opt
	lo=$(echo $batches | cut -d, -f1)
	hi=$(echo $batches | awk -F, '{ print $NF }')
	o=$out/$opt
	for b in $(echo $batches | tr , ' '); do
		sw-sweep --checkpoints "$o/sweep-b$b"
	done >"$o/checkpoints.txt"
	xargs sw-transfer --refine --quiet <"$o/checkpoints.txt" >"$o/transfer.tsv"
	xargs sw-transfer --summary --refine --quiet <"$o/checkpoints.txt" >"$o/summary.tsv"
	xargs sw-transfer --table --quiet <"$o/checkpoints.txt" >"$o/table.tsv"
	sw-plot --force transfer "$o/table.tsv" -o "$o/transfer.png"
	sw-plot --force transfer-fits "$o/transfer.tsv" -o "$o/transfer-fits.png"

	say "$opt: the loss-optimal (lr, batch) per horizon and the output norm there (sw-transfer --refine)"
	cut -f1-8,12-13 "$o/transfer.tsv"
	say "$opt: B* bracketed? (the grid's batches: $batches)"
	awk -F'\t' -v lo="$lo" -v hi="$hi" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; print "tokens\tbatch\tB_bracketed"; next }
		{ b = $c["batch"]; print $c["tokens"] "\t" b "\t" ((b == lo || b == hi) ? "no" : "yes") }' \
		"$o/transfer.tsv" >"$o/bracketed.tsv"
	cat "$o/bracketed.tsv"
	# the fits again from the horizons whose B* is bracketed: the runs of
	# those horizons, as sw-transfer --table printed them
	awk -F'\t' 'FNR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; if (NR == FNR) next; print; next }
		NR == FNR { if ($3 == "yes") keep[$1] = 1; next }
		keep[$c["tokens"]]' "$o/bracketed.tsv" "$o/table.tsv" >"$o/table-bracketed.tsv"
	# (a power law in D needs two horizons or more)
	if [ "$(awk 'NR > 1 && $3 == "yes"' "$o/bracketed.tsv" | wc -l)" -ge 2 ]; then
		sw-transfer --summary --refine --quiet <"$o/table-bracketed.tsv" >"$o/summary-bracketed.tsv"
	else
		: >"$o/summary-bracketed.tsv"
	fi
	say "$opt: across the horizons (sw-transfer --summary --refine; paper: eta* ~ D^-0.28+-0.07, B* ~ D^0.45+-0.07)"
	cut -f1-5,9,10,13,14 "$o/summary.tsv"
	say "$opt: the same from the horizons whose B* is bracketed"
	if [ -s "$o/summary-bracketed.tsv" ]; then cut -f1-5,9,10,13,14 "$o/summary-bracketed.tsv"; else echo "fewer than two"; fi
	say "$opt: the optimal output norm at each batch size (the best lr of each batch and horizon): log2 ||W_out||_{RMS->inf}"
	awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
		{ k = $c["batch"] "\t" $c["tokens"]
		  if (!(k in best) || $c["loss"] < best[k]) { best[k] = $c["loss"]; norm[k] = $c["log2_out_norm"]; lr[k] = $c["lr"] } }
		END { print "batch\ttokens\tlr\tloss\tlog2_out_norm"
		      for (k in best) print k "\t" lr[k] "\t" best[k] "\t" norm[k] }' "$o/table.tsv" |
		sort -t "$(printf '\t')" -k1,1n -k2,2n >"$o/per-batch.tsv"
	cat "$o/per-batch.tsv"
	awk -F'\t' 'NR > 1 { n++; s += $5; ss += $5 * $5; if (n == 1 || $5 < lo) lo = $5; if (n == 1 || $5 > hi) hi = $5 }
		END { m = s / n; printf "over %d (batch, horizon) optima: log2 norm mean %.3f, sd %.3f, spread %.3f\n",
			n, m, sqrt(ss / n - m * m), hi - lo }' "$o/per-batch.tsv"
done

# 4. side by side: each optimizer's "all" row of --summary, and the B*
# exponent from the bracketed horizons
say "the optimizers side by side"
for opt in $OPTIMIZERS; do
	o=$out/$opt
	awk -F'\t' -v opt="$opt" -v nb="$(awk 'NR > 1 && $3 == "yes"' "$o/bracketed.tsv" | wc -l)" \
		'FNR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
		$1 != "all" { next }
		NR == FNR { row = opt "\t" $c["groups"] "\t" $c["log2_out_norm_mean"] "\t" $c["log2_out_norm_sd"] "\t" \
			$c["log2_out_norm_spread"] "\t" $c["lr_exponent"] "\t" $c["lr_exponent_se"] "\t" \
			$c["batch_exponent"] "\t" $c["batch_exponent_se"]; next }
		{ bb = $c["batch_exponent"] "\t" $c["batch_exponent_se"] }
		END { if (bb == "") bb = "-\t-"; print row "\t" nb "\t" bb }' "$o/summary.tsv" "$o/summary-bracketed.tsv"
done | { printf 'optimizer\thorizons\tlog2_norm_mean\tlog2_norm_sd\tlog2_norm_spread\tlr_exponent\tlr_exponent_se\tbatch_exponent\tbatch_exponent_se\tB_bracketed_horizons\tbatch_exponent_bracketed\tbatch_exponent_bracketed_se\n'; cat; } >"$out/optimizers.tsv"
cat "$out/optimizers.tsv"
echo "figures: $out/<optimizer>/transfer.png, transfer-fits.png; in all $(( $(date +%s) - T0 )) s"
