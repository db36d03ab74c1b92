#!/bin/sh
# make wd-study: the weight-decay-scaling-spectra paper's claims put to the
# test on make demo's corpus with sw-sweep:
#   (a) under AdamW the singular values of a matrix scale with the
#       equilibrium scale sqrt(lr/wd), and the top one as
#       sqrt(lr/wd) d^0.75 with the width d (its §4.1-4.2, Fig. 1-2);
#   (b) hence its rule (Table 2): matrices lr ~ 1/d and wd ~ sqrt(d),
#       vector-like parameters lr fixed and no wd, makes the optimal
#       (lr, wd) found at a small width transfer to larger ones, where a
#       fixed wd does not (§4.3, Fig. 3).
#
#   1. Debian's fortunes, a BPE tokenizer of 2048 tokens (as make demo)
#   2. the grid: widths 64, 128, 256 (2 layers, 4 heads, so the heads
#      widen), base width 64; base lr 0.003, 0.01, 0.03 x base wd 0.3, 1, 3;
#      sw-train --width-base 64 (the paper's Table 2) with --wd-scaling
#      sqrt (its rule) and fixed (wd the same at every width; at the base
#      width both rules are the same run, trained once); AdamW, coupled wd,
#      400 steps of 16 x 64 tokens at a constant lr after 40 steps of
#      warmup (the steady state the paper's spectra describe, no anneal);
#      seeds 1 and 2; two runs at a time on one thread each
#   3. the tables: every run's terminal validation loss; the mean over
#      seeds per grid point; each width's optimum per rule; the transfer
#      (the loss at the base width's optimum against the width's own best)
#      with the seed-to-seed spread; sw-spectrum --fit over the runs whose
#      hidden matrices reached their steady state (lr wd steps >= 3 at
#      their own lr and wd); the top singular value at the base optimum
#      across widths under each rule; the spectra figures (sw-plot spectrum)
#
# Everything it prints comes from the runs. The sweeps resume: rerun to
# finish what was cut. STUDY_SCALE=N: N times the steps; STUDY_SLURM=1:
# Slurm job scripts instead of runs (demo/study.sh). STUDY_TINY=1: the same in miniature (the committed
# corpus, tiny models, seconds), for trying the pipeline (tests/e2e).
# Usage: demo/wd-study.sh [BIN_DIR]   (make wd-study passes build/bin)
set -eu
bin=${1:-build/bin}
top=$(cd "$(dirname "$0")/.." && pwd)
out=${STUDY_OUT:-demo/out/wd-study}
if [ "${STUDY_TINY:-0}" = 1 ]; then
	CORPUS=$top/fixtures/corpus.txt VOCAB=300
	WIDTHS=16,32 BASE=16 L=1 H=2 T=16 B=4 STEPS=40 WARMUP=4 LRS=0.003,0.01 WDS=0.3,1
	ROLE=up LAYER=0 STEADY=0.1
else
	CORPUS="" VOCAB=2048
	WIDTHS=64,128,256 BASE=64 L=2 H=4 T=64 B=16 STEPS=400 WARMUP=40 LRS=0.003,0.01,0.03 WDS=0.3,1,3
	ROLE=up LAYER=1 STEADY=3
fi
STEPS=$((STEPS * ${STUDY_SCALE:-1}))
SEEDS=${STUDY_SEEDS:-1 2}
. "$top/demo/study.sh"

# 1. the corpus and its tokens
study_corpus "$out" "$CORPUS" $VOCAB

# 2. the runs: per seed, a sweep per rule (fixed leaves the base width out:
# the sqrt sweep's runs there are the same runs)
TRAIN="--data $out/corpus.tok --vocab $VOCAB --n-layers $L --n-heads $H --seq-len $T
	--width-base $BASE --schedule constant --warmup $WARMUP --eval-every $STEPS --eval-batches 16
	--trace-every $STEPS --ckpt-every $STEPS --threads 1"
tokens=$((STEPS * B * T))
wider=$(echo $WIDTHS | tr , '\n' | awk -v b=$BASE '$1 != b' | paste -s -d, -)
say "AdamW, widths $WIDTHS (base $BASE), base lr $LRS x base wd $WDS, wd scaling sqrt and fixed, $STEPS steps of $B x $T tokens, seeds $SEEDS; two runs at a time"
for seed in $SEEDS; do
	for rule in sqrt fixed; do
		widths=$WIDTHS
		[ $rule = fixed ] && widths=$wider
		sweep --out "$out/$rule-s$seed" --lr $LRS --wd $WDS --d-model $widths --batch $B \
			--tokens $tokens -j 2 --quiet -- $TRAIN --seed $seed --wd-scaling $rule \
			>"$out/$rule-s$seed.tsv"
	done
done
study_trained
echo "trained in $(( $(date +%s) - T0 )) s"

# 3. the tables
# runs.tsv: rule seed d_model lr wd run (lr and wd the base values); the
# base width's runs stand for both rules
printf 'rule\tseed\td_model\tlr\twd\trun\n' >"$out/runs.tsv"
for seed in $SEEDS; do
	awk -F'\t' -v OFS='\t' -v s=$seed -v b=$BASE -v dir="$out/sqrt-s$seed" 'NR > 1 {
		print "sqrt", s, $6, $3, $5, dir "/" $2
		if ($6 == b) print "fixed", s, $6, $3, $5, dir "/" $2 }' "$out/sqrt-s$seed/sweep.tsv"
	awk -F'\t' -v OFS='\t' -v s=$seed -v dir="$out/fixed-s$seed" 'NR > 1 {
		print "fixed", s, $6, $3, $5, dir "/" $2 }' "$out/fixed-s$seed/sweep.tsv"
done >>"$out/runs.tsv"
# terminal.tsv: the runs with their terminal validation loss
printf 'rule\tseed\td_model\tlr\twd\tval_loss\n' >"$out/terminal.tsv"
sed 1d "$out/runs.tsv" | while IFS='	' read -r rule seed d lr wd run; do
	sw-trace --series val_loss --every $STEPS "$run/trace.h5" >"$out/trace.tmp"
	awk -F'\t' -v OFS='\t' -v r=$rule -v s=$seed -v d=$d -v lr=$lr -v wd=$wd -v n=$STEPS \
		'NR > 1 && $1 == n { print r, s, d, lr, wd, $2 }' "$out/trace.tmp"
done >>"$out/terminal.tsv"
rm -f "$out/trace.tmp"
# mean.tsv: per rule, width and (lr, wd): the mean over seeds and the range
awk -F'\t' -v OFS='\t' 'NR > 1 { k = $1 OFS $3 OFS $4 OFS $5; s[k] += $6; c[k]++
		if (!(k in lo) || $6 < lo[k]) lo[k] = $6; if (!(k in hi) || $6 > hi[k]) hi[k] = $6 }
	END { for (k in s) printf "%s\t%.4f\t%.4f\t%d\n", k, s[k] / c[k], hi[k] - lo[k], c[k] }' \
	"$out/terminal.tsv" | sort -k1,1r -k2,2n -k3,3g -k4,4g >"$out/mean.tmp"
{ printf 'rule\td_model\tlr\twd\tmean\trange\tseeds\n'; cat "$out/mean.tmp"; } >"$out/mean.tsv"
rm -f "$out/mean.tmp"
# optima.tsv: each width's best (lr, wd) per rule; edge: on the grid's edge
awk -F'\t' -v OFS='\t' -v lrs=$LRS -v wds=$WDS 'BEGIN {
		nl = split(lrs, L, ","); nw = split(wds, W, ",")
		print "rule", "d_model", "lr", "wd", "mean", "edge" }
	NR == 1 { next }
	{ k = $1 OFS $2; if (!(k in best) || $5 < best[k]) { best[k] = $5; arg[k] = $3 OFS $4 } }
	END { for (k in best) { split(arg[k], a, OFS)
		edge = (a[1] == L[1] || a[1] == L[nl]) ? "lr" : ""
		if (a[2] == W[1] || a[2] == W[nw]) edge = edge (edge == "" ? "" : ",") "wd"
		print k, arg[k], best[k], edge == "" ? "no" : edge } }' "$out/mean.tsv" |
	{ IFS= read -r h; echo "$h"; sort -k1,1r -k2,2n; } >"$out/optima.tsv"
# transfer.tsv: per rule and width, the loss at the base width's optimum,
# the width's best, and the regret (their difference)
awk -F'\t' -v OFS='\t' -v b=$BASE 'FNR == 1 { f++; next }
	f == 1 { if ($2 == b) opt[$1] = $3 OFS $4; best[$1 OFS $2] = $5; next }
	{ m[$1 OFS $2 OFS $3 OFS $4] = $5 }
	END { print "rule", "d_model", "base_lr", "base_wd", "loss_at_base_opt", "best", "regret"
		for (k in best) { split(k, p, OFS); o = opt[p[1]]; l = m[k OFS o]
			printf "%s\t%s\t%s\t%s\t%.4f\n", k, o, l, best[k], l - best[k] } }' \
	"$out/optima.tsv" "$out/mean.tsv" | { IFS= read -r h; echo "$h"; sort -k1,1r -k2,2n; } >"$out/transfer.tsv"
last=$(printf 'ckpt-%06d.h5' $STEPS)
# the steady-state runs' final checkpoints: lr wd steps >= STEADY (3; 0.1 tiny) at the hidden
# matrices' own lr (lr base/d) and wd (wd (d/base)^p)
awk -F"\t" -v b=$BASE -v n=$STEPS -v steady=$STEADY 'NR > 1 { p = $1 == "sqrt" ? 0.5 : 0
		if ($4 * b / $3 * $5 * ($3 / b) ^ p * n >= steady) print $6 "/" ck }' ck="$last" "$out/runs.tsv" |
	sort -u >"$out/steady.txt"
xargs sw-spectrum --fit --block qk,vo,ffn <"$out/steady.txt" >"$out/fit.tsv"
# alignment.tsv: the top singular value of the hidden matrices at the base
# optimum, per rule and width: the geometric mean over matrices and seeds
printf 'rule\td_model\tsigma_top\tmatrices\n' >"$out/alignment.tsv"
for rule in sqrt fixed; do
	opt=$(awk -F'\t' -v r=$rule -v b=$BASE '$1 == r && $2 == b { print $3 "\t" $4 }' "$out/optima.tsv")
	for d in $(echo $WIDTHS | tr , ' '); do
		awk -F'\t' -v r=$rule -v d=$d -v o="$opt" -v ck="$last" \
			'$1 == r && $3 == d && $4 "\t" $5 == o { print $6 "/" ck }' "$out/runs.tsv" >"$out/at-opt.txt"
		xargs sw-spectrum --summary --block qk,vo,ffn <"$out/at-opt.txt" >"$out/summary.tmp"
		awk -F'\t' -v OFS='\t' -v r=$rule -v d=$d 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
			{ s += log($c["sigma_max"]); n++ } END { printf "%s\t%s\t%.4f\t%d\n", r, d, exp(s / n), n }' \
			"$out/summary.tmp" >>"$out/alignment.tsv"
		# the figure's curves: role $ROLE, layer $LAYER, seed 1's run
		xargs sw-spectrum --role $ROLE --layer $LAYER <"$out/at-opt.txt" >"$out/spectrum.tmp"
		[ $d = $BASE ] && head -n 1 "$out/spectrum.tmp" >"$out/spectrum-$rule.tsv"
		awk -F'\t' -v OFS='\t' -v d=$d 'NR > 1 && $1 ~ /-s1\// { $1 = "d_model " d; print }' \
			"$out/spectrum.tmp" >>"$out/spectrum-$rule.tsv"
	done
	sw-plot --force spectrum "$out/spectrum-$rule.tsv" -o "$out/wd-spectra-$rule.png"
done
rm -f "$out/summary.tmp" "$out/spectrum.tmp" "$out/at-opt.txt"

say "terminal validation loss, mean over seeds (nats/token) and its range"
cat "$out/mean.tsv"
say "each width's optimum (base lr, base wd) per rule; edge: on the grid's edge"
cat "$out/optima.tsv"
say "transfer: the loss at the base width's optimum against each width's best (paper: regret ~0 under sqrt, not under fixed)"
cat "$out/transfer.tsv"
awk -F'\t' 'NR > 1 { r[++n] = $6 } END { if (n) { m = 0; for (i = 1; i <= n; i++) m += r[i]
	printf "seed-to-seed range of a grid point'"'"'s loss: mean %.4f over %d points\n", m / n, n } }' "$out/mean.tsv"
say "sigma_top and ||W||_rms against the equilibrium scale and the width over $(wc -l <"$out/steady.txt") steady-state checkpoints (paper: exp_scale 1, exp_d_model 0.75 for sigma_top)"
cat "$out/fit.tsv"
say "the hidden matrices' top singular value at the base optimum across widths (paper: aligned under sqrt)"
cat "$out/alignment.tsv"
echo "figures: $out/wd-spectra-sqrt.png $out/wd-spectra-fixed.png; in all $(( $(date +%s) - T0 )) s"
