#!/bin/sh
# make multipliers-study: the learnable-multipliers paper's claims put to
# the test on make demo's corpus with sw-sweep:
#   (a) weight decay holds every matrix at its noise-WD equilibrium norm,
#       ||W|| ~ sqrt(lr/wd) (its eq. 1, Fig. 1), with or without
#       multipliers, while a learnable multiplier adapts, so the effective
#       matrix's scale is no longer set by lr and wd (Fig. 1);
#   (b) scalar and row+column multipliers (W_eff = s W, diag(r) W diag(c),
#       eqs. 2-3) lower the loss, with AdamW and with Muon, by a gain that
#       grows through training (Fig. 7, Table 2);
#   (c) the scales inside a block grow more diverse: the heads' Q scales
#       spread wider with multipliers (its Fig. 3 shows the rows' norms);
#   (d) the Q/K multipliers' ratio is a symmetry that drifts unless weight
#       decay holds it (§4.1, Fig. 4a).
#
#   1. Debian's fortunes, a BPE tokenizer of 2048 tokens (as make demo)
#   2. the learning rate, tuned once per optimizer as the paper does
#      (its best of 1e-3, 3e-3, 1e-2 without multipliers, seed 1, at half
#      the horizon); weight decay 1 (coupled: 1/(lr wd) = 333 steps at
#      3e-3, so the matrices reach their equilibrium well inside the runs),
#      the multipliers' own 2e-3 (the paper's), WSD schedule (the last
#      20 % decays)
#   3. no multipliers, scalar, row+column: AdamW and Muon, seeds 1 and 2,
#      1200 steps of 16 x 64 tokens, d_model 128, 4 layers; two runs at a
#      time on one thread each
#   4. the Q/K symmetry's control: AdamW, row+column, no weight decay on
#      the multipliers, seeds 1 and 2
#   5. the equilibrium sweep (AdamW, seed 1, none and scalar): lr x 1/2
#      and x 2 with wd x 2 and x 1/2 (lr wd fixed, so the same time to
#      equilibrium; the multipliers' lr kept by --mult-lr), the matrices'
#      RMS and the multipliers at the end of the stable phase against
#      sqrt(lr/wd), fitted in log-log
#   6. the tables (terminal losses, the gain per step, the equilibrium
#      fits, the heads' Q-scale spread, the Q/K drift with and without the
#      multipliers' weight decay) and the figure of the seed-1 curves
#      (sw-plot loss-curves)
#
# Everything it prints comes from the runs. The sweeps resume: rerun to
# finish what was cut. STUDY_SCALE=N: N times the steps; STUDY_SLURM=1:
# Slurm job scripts instead of runs (demo/study.sh). STUDY_TINY=1: the same in miniature (the committed
# corpus, a tiny model, seconds), for trying the pipeline (tests/e2e).
# Usage: demo/multipliers-study.sh [BIN_DIR]   (make multipliers-study passes build/bin)
set -eu
bin=${1:-build/bin}
top=$(cd "$(dirname "$0")/.." && pwd)
out=${STUDY_OUT:-demo/out/multipliers-study}
if [ "${STUDY_TINY:-0}" = 1 ]; then
	CORPUS=$top/fixtures/corpus.txt VOCAB=300
	MODEL="--d-model 16 --n-layers 2 --n-heads 2 --seq-len 16"
	B=4 T=16 STEPS=120 EVERY=12 WARMUP=4 LRS=0.003,0.01
else
	CORPUS="" VOCAB=2048
	MODEL="--d-model 128 --n-layers 4 --n-heads 4 --n-kv-heads 2 --seq-len 64"
	B=16 T=64 STEPS=1200 EVERY=120 WARMUP=50 LRS=0.001,0.003,0.01
fi
STEPS=$((STEPS * ${STUDY_SCALE:-1})) EVERY=$((EVERY * ${STUDY_SCALE:-1}))
SEEDS=${STUDY_SEEDS:-1 2}
WD=1
. "$top/demo/study.sh"

# 1. the corpus and its tokens
study_corpus "$out" "$CORPUS" $VOCAB

TRAIN="--data $out/corpus.tok --vocab $VOCAB $MODEL --warmup $WARMUP --schedule wsd
	--eval-every $EVERY --trace-every $EVERY --ckpt-every $STEPS --threads 1"
TRAIN=$(echo $TRAIN)            # one line: it goes into the commands pair runs
tokens=$((STEPS * B * T))
half=$((STEPS / 2))
stable=$((STEPS - STEPS / 5))   # the end of WSD's stable phase

# 2. the learning rate per optimizer: its best at half the horizon
say "the learning rate: each optimizer's best of $LRS without multipliers at $half steps, seed 1"
printf 'optimizer\tlr\tval_loss\n' >"$out/tune-loss.tsv"
for opt in adamw muon; do
	sweep --out "$out/tune-$opt" --lr $LRS --wd $WD --batch $B --tokens $((half * B * T)) -j 2 --quiet -- \
		$TRAIN --optimizer $opt --seed 1 >"$out/tune-$opt.tsv"
done
study_trained
for opt in adamw muon; do
	for lr in $(echo $LRS | tr , ' '); do
		sw-trace --series val_loss --every $EVERY "$out/tune-$opt/lr$lr-b$B-wd$WD-t$((half * B * T))/trace.h5" >"$out/trace.tmp"
		awk -F'\t' -v o=$opt -v lr=$lr -v s=$half 'NR > 1 && $1 == s { print o "\t" lr "\t" $2 }' \
			"$out/trace.tmp" >>"$out/tune-loss.tsv"
	done
done
cat "$out/tune-loss.tsv"
lr_of() {
	awk -F'\t' -v o=$1 'NR > 1 && $1 == o && (best == "" || $3 < best) { best = $3; lr = $2 } END { print lr }' \
		"$out/tune-loss.tsv"
}
LR_adamw=$(lr_of adamw) LR_muon=$(lr_of muon)
echo "lr: adamw $LR_adamw, muon $LR_muon"

# 3. the runs: a sweep of one run per optimizer, multipliers and seed
run() {         # run OPT MULT SEED [NAME OPTIONS]: the sw-sweep command of that run
	eval lr=\$LR_$1
	echo "sweep --out '$out/$1-$2${4:+-$4}-s$3' --lr $lr --wd $WD --batch $B --tokens $tokens --quiet -- \
		$TRAIN --optimizer $1 --multipliers $2 --seed $3 ${5:-} >'$out/$1-$2${4:+-$4}-s$3.tsv'"
}
say "none, scalar, rowcol multipliers; AdamW at $LR_adamw and Muon at $LR_muon; seeds $SEEDS; $STEPS steps ($MODEL)"
for opt in adamw muon; do
	for mult in none scalar rowcol; do
		set -- $SEEDS
		if [ $# -ge 2 ]; then
			pair "$(run $opt $mult $1)" "$(run $opt $mult $2)"
		else
			eval "$(run $opt $mult $1)"
		fi
	done
done

# 4. the Q/K symmetry's control: AdamW, row+column, no weight decay on the multipliers
say "the Q/K symmetry without the multipliers' weight decay: AdamW, rowcol, --mult-wd 0, seeds $SEEDS"
set -- $SEEDS
if [ $# -ge 2 ]; then
	pair "$(run adamw rowcol $1 nowd '--mult-wd 0')" "$(run adamw rowcol $2 nowd '--mult-wd 0')"
else
	eval "$(run adamw rowcol $1 nowd '--mult-wd 0')"
fi

# 5. the equilibrium sweep: (lr, wd) x (1/2, 2) and (2, 1/2), AdamW, seed 1
lo=$(awk -v l=$LR_adamw 'BEGIN { print l / 2 }') hi=$(awk -v l=$LR_adamw 'BEGIN { print l * 2 }')
say "the equilibrium: AdamW seed 1, none and scalar, lr $lo wd $((WD * 2)) and lr $hi wd $(awk -v w=$WD 'BEGIN { print w / 2 }') besides lr $LR_adamw wd $WD"
for mult in none scalar; do
	pair "sweep --out '$out/eq-$mult-lo' --lr $lo --wd $((WD * 2)) --batch $B --tokens $tokens --quiet -- \
		$TRAIN --optimizer adamw --multipliers $mult --seed 1 --mult-lr 2 >'$out/eq-$mult-lo.tsv'" \
	     "sweep --out '$out/eq-$mult-hi' --lr $hi --wd $(awk -v w=$WD 'BEGIN { print w / 2 }') --batch $B \
		--tokens $tokens --quiet -- $TRAIN --optimizer adamw --multipliers $mult --seed 1 --mult-lr 0.5 \
		>'$out/eq-$mult-hi.tsv'"
done
study_trained
echo "trained in $(( $(date +%s) - T0 )) s"

# 6. the tables
trace_of() {    # trace_of SWEEP_DIR: its one run's trace
	ls "$1"/*/trace.h5
}
# curves.tsv: step val_loss optimizer multipliers seed, every run of 3.
printf 'optimizer\tmultipliers\tseed\tstep\tval_loss\n' >"$out/curves-all.tsv"
for opt in adamw muon; do
	for mult in none scalar rowcol; do
		for seed in $SEEDS; do
			sw-trace --series val_loss --every $EVERY "$(trace_of "$out/$opt-$mult-s$seed")" >"$out/trace.tmp"
			awk -F'\t' -v OFS='\t' -v o=$opt -v m=$mult -v s=$seed 'NR > 1 && $2 != "" { print o, m, s, $1, $2 }' \
				"$out/trace.tmp" >>"$out/curves-all.tsv"
		done
	done
done
# terminal.tsv: the loss at the last step, mean over seeds and range
awk -F'\t' -v OFS='\t' -v n=$STEPS 'NR > 1 && $4 == n { k = $1 OFS $2; s[k] += $5; c[k]++
		if (!(k in lo) || $5 < lo[k]) lo[k] = $5; if (!(k in hi) || $5 > hi[k]) hi[k] = $5 }
	END { print "optimizer", "multipliers", "mean", "range", "seeds"
		for (k in s) printf "%s\t%.4f\t%.4f\t%d\n", k, s[k] / c[k], hi[k] - lo[k], c[k] }' \
	"$out/curves-all.tsv" | { IFS= read -r h; echo "$h"; sort; } >"$out/terminal.tsv"
# gain.tsv: per optimizer, multipliers and step, loss(none) - loss(mult)
# per seed, then the mean over seeds and its range
awk -F'\t' -v OFS='\t' 'NR == 1 { next } $2 == "none" { base[$1 OFS $3 OFS $4] = $5; next }
	{ k = $1 OFS $3 OFS $4; if (k in base) { g = base[k] - $5; key = $1 OFS $2 OFS $4
		s[key] += g; c[key]++; if (!(key in lo) || g < lo[key]) lo[key] = g; if (!(key in hi) || g > hi[key]) hi[key] = g } }
	END { print "optimizer", "multipliers", "step", "gain", "range", "seeds"
		for (k in s) printf "%s\t%.4f\t%.4f\t%d\n", k, s[k] / c[k], hi[k] - lo[k], c[k] }' \
	"$out/curves-all.tsv" | { IFS= read -r h; echo "$h"; sort -k1,1 -k2,2 -k3,3n; } >"$out/gain.tsv"
# equilibrium.tsv: per multipliers and (lr, wd): the hidden matrices' RMS
# and the multipliers (geometric means) at the end of the stable phase
printf 'multipliers\tlr\twd\tscale\tweight_rms\tmultiplier\teffective_rms\tval_loss\n' >"$out/equilibrium.tsv"
for mult in none scalar; do
	for arm in lo mid hi; do
		case $arm in
		lo) dir=$out/eq-$mult-lo lr=$lo wd=$((WD * 2)) ;;
		mid) dir=$out/adamw-$mult-s1 lr=$LR_adamw wd=$WD ;;
		hi) dir=$out/eq-$mult-hi lr=$hi wd=$(awk -v w=$WD 'BEGIN { print w / 2 }') ;;
		esac
		tr=$(trace_of "$dir")
		series=weight_rms
		[ $mult = none ] || series=weight_rms,multiplier
		sw-trace --series $series --every $EVERY "$tr" >"$out/trace.tmp"
		sw-trace --series val_loss --every $EVERY "$tr" >"$out/loss.tmp"
		loss=$(awk -F'\t' -v n=$STEPS 'NR > 1 && $1 == n { print $2 }' "$out/loss.tmp")
		awk -F'\t' -v OFS='\t' -v m=$mult -v lr=$lr -v wd=$wd -v at=$stable -v loss=$loss '
			NR == 1 { for (i = 2; i <= NF; i++) { h[i] = $i } next }
			$1 == at { for (i = 2; i <= NF; i++) {
					if (h[i] ~ /^weight_rms\.model\.layers\..*_proj\.weight$/) { w += log($i); nw++ }
					if (h[i] ~ /^multiplier\.model\.layers\./) { u += log($i < 0 ? -$i : $i); nu++ } }
				W = exp(w / nw); U = nu ? exp(u / nu) : 1
				printf "%s\t%s\t%s\t%.6g\t%.6g\t%.6g\t%.6g\t%s\n", m, lr, wd, sqrt(lr / wd), W, U, W * U, loss }' \
			"$out/trace.tmp" >>"$out/equilibrium.tsv"
	done
done
# the slopes of log weight_rms and log effective_rms against log scale
awk -F'\t' -v OFS='\t' 'NR == 1 { next } { m = $1; n[m]++; x = log($4)
		sx[m] += x; sxx[m] += x * x
		y1 = log($5); sy1[m] += y1; sxy1[m] += x * y1
		y2 = log($7); sy2[m] += y2; sxy2[m] += x * y2 }
	END { print "multipliers", "points", "slope_weight_rms", "slope_effective_rms"
		for (m in n) { d = n[m] * sxx[m] - sx[m] * sx[m]
			printf "%s\t%d\t%.3f\t%.3f\n", m, n[m], (n[m] * sxy1[m] - sx[m] * sy1[m]) / d,
				(n[m] * sxy2[m] - sx[m] * sy2[m]) / d } }' "$out/equilibrium.tsv" |
	{ IFS= read -r h; echo "$h"; sort; } >"$out/equilibrium-fit.tsv"
# heads.tsv: the spread of the heads' effective Q scales per layer (sd over
# mean of q_rms), at the last checkpoint, mean over layers and seeds
printf 'optimizer\tmultipliers\tq_scale_cv\truns\n' >"$out/heads.tsv"
last=$(printf 'ckpt-%06d.h5' $STEPS)
for opt in adamw muon; do
	for mult in none scalar rowcol; do
		for seed in $SEEDS; do
			sw-qkdrift "$(dirname "$(trace_of "$out/$opt-$mult-s$seed")")/$last"
		done >"$out/qk.tmp"
		awk -F'\t' -v OFS='\t' -v o=$opt -v m=$mult 'NR == 1 || $1 == "file" { for (i = 1; i <= NF; i++) c[$i] = i; next }
			{ k = $1 " " $c["layer"]; s[k] += $c["q_rms"]; ss[k] += $c["q_rms"] ^ 2; n[k]++; f[$1] = 1 }
			END { for (k in s) { mu = s[k] / n[k]; v = ss[k] / n[k] - mu * mu; t += sqrt(v > 0 ? v : 0) / mu; nl++ }
				nf = 0; for (x in f) nf++
				printf "%s\t%s\t%.4f\t%d\n", o, m, t / nl, nf }' "$out/qk.tmp" >>"$out/heads.tsv"
	done
done
# drift.tsv: the Q/K multipliers' log2 ratio slope per 1000 steps, rowcol
# runs, with the multipliers' weight decay and (AdamW) without
printf 'optimizer\tmult_wd\tseed\theads\tmax_abs_mult_slope\tmax_abs_slope\n' >"$out/drift.tsv"
for arm in adamw-rowcol:2e-3 muon-rowcol:2e-3 adamw-rowcol-nowd:0; do
	for seed in $SEEDS; do
		sw-qkdrift --drift "$(trace_of "$out/${arm%:*}-s$seed")" >"$out/qk.tmp"
		awk -F'\t' -v OFS='\t' -v o=${arm%%-*} -v w=${arm#*:} -v s=$seed 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
			{ n++; a = $c["mult_slope"]; a = a < 0 ? -a : a; if (a > ma) ma = a
			  b = $c["slope"]; b = b < 0 ? -b : b; if (b > mb) mb = b }
			END { printf "%s\t%s\t%s\t%d\t%.4f\t%.4f\n", o, w, s, n, ma, mb }' "$out/qk.tmp" >>"$out/drift.tsv"
	done
done
rm -f "$out/trace.tmp" "$out/loss.tmp" "$out/qk.tmp"
# the figure: seed 1's validation curves
printf 'step\tloss\trun\n' >"$out/curves.tsv"
awk -F'\t' -v OFS='\t' 'NR > 1 && $3 == 1 { print $4, $5, $1 " " $2 }' "$out/curves-all.tsv" >>"$out/curves.tsv"
sw-plot --force loss-curves "$out/curves.tsv" -o "$out/multipliers-curves.png"

say "terminal validation loss (nats/token), mean over seeds and range"
cat "$out/terminal.tsv"
say "the gain over no multipliers per step (paper: positive, growing through training)"
cat "$out/gain.tsv"
say "the equilibrium at the end of the stable phase, step $stable (paper: weight_rms ~ scale always; effective_rms ~ scale without multipliers, not with)"
cat "$out/equilibrium.tsv"
cat "$out/equilibrium-fit.tsv"
say "the heads' Q scales per layer: sd/mean (paper: more diverse with multipliers)"
cat "$out/heads.tsv"
say "the Q/K drift of the rowcol runs: the largest |slope| of log2 ratio per 1000 steps, multipliers' and effective (paper: drifts without the multipliers' weight decay, held with it)"
cat "$out/drift.tsv"
echo "figure: $out/multipliers-curves.png; in all $(( $(date +%s) - T0 )) s"
