#!/bin/sh
# make scale-vector-study: the scale-vectors paper's claims put to the test
# on make demo's corpus with sw-sweep, for the designs sw-train has:
#   (a) scale vectors matter: without them (--no-scale-vectors) the loss
#       is higher (its Fig. 1);
#   (b) heterogeneous gains (HG: one per reader of a Pre-Norm) beat the
#       shared one (§3.1, Fig. 5 "Heterogeneity");
#   (c) dual placement (DP: a gain on each reader's output side beside
#       the shared one) helps; after placement (AP: the output side only)
#       helps early and is overtaken (§3.2, Fig. 5 "Placement");
#   (d) weight decay helps Input-Norm gains (the Pre-Norms') and hurts
#       Output-Norm gains (QK-norm's, DNP's) (§2.2, Fig. 3, Fig. 5 "Weight
#       Decay");
#   (e) dual normalized placement (DNP: each reader's output normalized,
#       with its gain) does not help (§3.2, Fig. 5 "Placement");
#   (f) the reparameterizations help, OR (gamma = beta Norm(alpha)) and ER
#       (gamma = e^beta e^(alpha - mean alpha)), DNP+OR the most (§3.3,
#       Fig. 5 "Reparameterization"); under DNP+OR, weight decay on the
#       Input-Norm gains only (IWD) is best (Fig. 5 "Weight Decay").
#
#   1. Debian's fortunes, a BPE tokenizer of 2048 tokens (as make demo)
#   2. the learning rate, tuned once on the standard model as the paper
#      does (§4): the best of 1e-3, 3e-3, 1e-2 at half the horizon, seed 1
#   3. AdamW (wd 0.1 on the matrices, WSD: the last 20 % decays), d_model
#      128, 4 layers, 800 steps of 16 x 64 tokens, seeds 1 and 2, two runs
#      at a time on one thread each: the designs pre (standard), none (no
#      scale vectors), hg, ap, dp, hg+dp (--scale-design, every block
#      kind), dnp, hg+dnp (attention and MLP), no weight decay on the
#      gains; and the weight-decay arms: pre with wd on the Input-Norm
#      gains (--norm-wd iwd), and with QK-norm and with DNP, iwd
#      (Input-Norm gains only) against all (the Output-Norm gains too:
#      q_norm/k_norm, and DNP's v_norm, gate_norm, up_norm); the
#      reparameterizations (--scale-reparam): or, er, dnp+or, and dnp+or
#      with iwd against all (a gain's direction and magnitude decay as
#      the gain's type says)
#   4. the tables: each arm's terminal validation loss (mean over seeds,
#      range), its difference from the standard's, early (at a quarter of
#      the steps) and at the end; the gains' anisotropy and coefficient of
#      variation at the end (sw-norms --scale-vectors); the figure of the
#      seed-1 curves (sw-plot loss-curves)
#
# Everything it prints comes from the runs. The sweeps resume: rerun to
# finish what was cut. STUDY_TINY=1: the same in miniature (the committed
# corpus, a tiny model, seconds), for trying the pipeline (tests/e2e).
# STUDY_SCALE=N: N times the steps; STUDY_SLURM=1: Slurm job scripts
# instead of runs (demo/study.sh).
# Usage: demo/scale-vector-study.sh [BIN_DIR]   (make scale-vector-study passes build/bin)
set -eu
bin=${1:-build/bin}
top=$(cd "$(dirname "$0")/.." && pwd)
out=${STUDY_OUT:-demo/out/scale-vector-study}
if [ "${STUDY_TINY:-0}" = 1 ]; then
	CORPUS=$top/fixtures/corpus.txt VOCAB=300
	MODEL="--d-model 16 --n-layers 2 --n-heads 2 --seq-len 16"
	B=4 T=16 STEPS=80 EVERY=4 WARMUP=4 LRS=0.003,0.01
else
	CORPUS="" VOCAB=2048
	MODEL="--d-model 128 --n-layers 4 --n-heads 4 --n-kv-heads 2 --seq-len 64"
	B=16 T=64 STEPS=800 EVERY=50 WARMUP=40 LRS=0.001,0.003,0.01
fi
STEPS=$((STEPS * ${STUDY_SCALE:-1})) EVERY=$((EVERY * ${STUDY_SCALE:-1}))
SEEDS=${STUDY_SEEDS:-1 2}
WD=0.1
. "$top/demo/study.sh"

# 1. the corpus and its tokens
study_corpus "$out" "$CORPUS" $VOCAB

TRAIN="--data $out/corpus.tok --vocab $VOCAB $MODEL --optimizer adamw --warmup $WARMUP --schedule wsd
	--eval-every $EVERY --trace-every $EVERY --ckpt-every $STEPS --eval-batches 8 --threads 1"
TRAIN=$(echo $TRAIN)            # one line: it goes into the commands pair runs
tokens=$((STEPS * B * T))
half=$((STEPS / 2))
early=$((STEPS / 4 / EVERY * EVERY))  # the evaluation nearest a quarter, from below

# 2. the learning rate: the standard model's best at half the horizon
say "the learning rate: the standard model's best of $LRS at $half steps, seed 1"
sweep --out "$out/tune" --lr $LRS --wd $WD --batch $B --tokens $((half * B * T)) -j 2 --quiet -- \
	$TRAIN --seed 1 >"$out/tune.tsv"
study_trained
printf 'lr\tval_loss\n' >"$out/tune-loss.tsv"
for lr in $(echo $LRS | tr , ' '); do
	sw-trace --series val_loss --every $EVERY "$out/tune/lr$lr-b$B-wd$WD-t$((half * B * T))/trace.h5" >"$out/trace.tmp"
	awk -F'\t' -v lr=$lr -v s=$half 'NR > 1 && $1 == s { print lr "\t" $2 }' "$out/trace.tmp" >>"$out/tune-loss.tsv"
done
cat "$out/tune-loss.tsv"
LR=$(awk -F'\t' 'NR > 1 && (best == "" || $2 < best) { best = $2; lr = $1 } END { print lr }' "$out/tune-loss.tsv")
echo "lr $LR"

# 3. the arms: name and sw-train options
ARMS="pre|
none|--no-scale-vectors
hg|--scale-design hg
ap|--scale-design ap
dp|--scale-design dp
hg+dp|--scale-design hg+dp
dnp|--scale-design dnp
hg+dnp|--scale-design hg+dnp
pre-iwd|--norm-wd iwd
qk-iwd|--qk-norm --norm-wd iwd
qk-all|--qk-norm --norm-wd all
dnp-iwd|--scale-design dnp --norm-wd iwd
dnp-all|--scale-design dnp --norm-wd all
or|--scale-reparam or
er|--scale-reparam er
dnp+or|--scale-design dnp --scale-reparam or
dnp+or-iwd|--scale-design dnp --scale-reparam or --norm-wd iwd
dnp+or-all|--scale-design dnp --scale-reparam or --norm-wd all"
run() {         # run ARM SEED OPTIONS: the sw-sweep command of that run
	echo "sweep --out '$out/$1-s$2' --lr $LR --wd $WD --batch $B --tokens $tokens --quiet -- \
		$TRAIN --seed $2 $3 >'$out/$1-s$2.tsv'"
}
say "the arms at lr $LR, wd $WD on the matrices; seeds $SEEDS; $STEPS steps ($MODEL)"
echo "$ARMS" | while IFS='|' read -r arm opts; do
	set -- $SEEDS
	if [ $# -ge 2 ]; then
		pair "$(run "$arm" $1 "$opts")" "$(run "$arm" $2 "$opts")"
	else
		eval "$(run "$arm" $1 "$opts")"
	fi
done
study_trained
echo "trained in $(( $(date +%s) - T0 )) s"

# 4. the tables. curves-all.tsv: arm seed step val_loss, every run
printf 'arm\tseed\tstep\tval_loss\n' >"$out/curves-all.tsv"
echo "$ARMS" | while IFS='|' read -r arm opts; do
	for seed in $SEEDS; do
		sw-trace --series val_loss --every $EVERY "$(ls "$out/$arm-s$seed"/*/trace.h5)" >"$out/trace.tmp"
		awk -F'\t' -v OFS='\t' -v a="$arm" -v s=$seed 'NR > 1 && $2 != "" { print a, s, $1, $2 }' \
			"$out/trace.tmp" >>"$out/curves-all.tsv"
	done
done
# loss.tsv: per arm, at a quarter of the steps and at the end: the mean
# over seeds, its range, and the difference from the standard's mean
# (negative: lower than the standard)
awk -F'\t' -v OFS='\t' -v e=$early -v n=$STEPS 'NR == 1 { next } $3 == e || $3 == n {
		k = $1 OFS $3; s[k] += $4; c[k]++
		if (!(k in lo) || $4 < lo[k]) lo[k] = $4; if (!(k in hi) || $4 > hi[k]) hi[k] = $4
		if (!($1 in seen)) { seen[$1] = 1; order[++na] = $1 } }
	END { print "arm", "early_mean", "early_range", "early_vs_pre", "terminal_mean", "terminal_range", "terminal_vs_pre", "seeds"
		pe = s["pre" OFS e] / c["pre" OFS e]; pn = s["pre" OFS n] / c["pre" OFS n]
		for (i = 1; i <= na; i++) { a = order[i]; ke = a OFS e; kn = a OFS n
			printf "%s\t%.4f\t%.4f\t%+.4f\t%.4f\t%.4f\t%+.4f\t%d\n", a, s[ke] / c[ke], hi[ke] - lo[ke],
				s[ke] / c[ke] - pe, s[kn] / c[kn], hi[kn] - lo[kn], s[kn] / c[kn] - pn, c[kn] } }' \
	"$out/curves-all.tsv" >"$out/loss.tsv"
say "validation loss at step $early and at the end ($STEPS), mean over seeds $SEEDS, range, and the difference from pre"
cat "$out/loss.tsv"
# gains.tsv: per arm (seed 1's last checkpoint), over its gains: how many,
# the mean anisotropy and coefficient of variation, the mean coupling (a
# reparameterized gain's direction and magnitude are not counted: the
# gain they give is)
printf 'arm\tgains\tanisotropy\tcv\tcoupling\n' >"$out/gains.tsv"
set -- $SEEDS
echo "$ARMS" | while IFS='|' read -r arm opts; do
	[ "$arm" = none ] && continue
	sw-norms --scale-vectors "$(sw-sweep --checkpoints "$out/$arm-s$1" | tail -n 1)" >"$out/sv.tmp"
	awk -F'\t' -v a="$arm" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
		$c["role"] ~ /_(dir|mag)$/ { next }
		{ n++; an += $c["anisotropy"]; cv += $c["cv"]
		  if ($c["coupling"] != "") { k++; co += $c["coupling"] } }
		END { printf "%s\t%d\t%.4f\t%.4f\t%s\n", a, n, an / n, cv / n, k ? sprintf("%.3f", co / k) : "-" }' \
		"$out/sv.tmp" >>"$out/gains.tsv"
done
say "the gains at the end (seed $1): their count, mean anisotropy max|g|/min|g|, mean cv, mean coupling"
cat "$out/gains.tsv"
# the figure: seed 1's validation curves of the designs
printf 'step\tloss\trun\n' >"$out/curves.tsv"
awk -F'\t' -v OFS='\t' -v s=$1 'NR > 1 && $2 == s && $1 !~ /iwd|all/ { print $3, $4, $1 }' \
	"$out/curves-all.tsv" >>"$out/curves.tsv"
sw-plot --force loss-curves "$out/curves.tsv" -o "$out/scale-vector-curves.png"
rm -f "$out/trace.tmp" "$out/sv.tmp"
echo "figure: $out/scale-vector-curves.png; in all $(( $(date +%s) - T0 )) s"
