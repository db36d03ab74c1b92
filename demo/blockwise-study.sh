#!/bin/sh
# make blockwise-study: the sharpness-disparity paper's claim, that
# Blockwise LR (its eq. 5: each block type's learning rate scaled by a
# ratio, emb 10, qk 8, ffn 6, vo 4, norm 1) on top of AdamW reaches a lower
# terminal loss and the baseline's terminal loss in about half the steps,
# put to the test on make demo's corpus and model with sw-sweep.
#
#   1. Debian's fortunes, a BPE tokenizer of 2048 tokens (as make demo)
#   2. the learning rate, tuned once as the paper does (lr_max tuned for
#      AdamW, which Blockwise LR keeps for the norm gains and multiplies
#      by its ratios elsewhere): AdamW's best of 1e-3, 3e-3 and 1e-2 at the
#      shortest horizon, seed 1
#   3. AdamW, and AdamW with --blockwise-lr, at that learning rate and
#      three horizons (cosine schedules ending at 500, 1000 and 2000
#      steps: one run each), on seeds 1 and 2: one sw-sweep over the
#      horizons per (optimizer, seed), two runs at a time on one thread
#      each; a checkpoint, a validation loss and the GNB estimate every
#      250 steps
#   4. the terminal validation loss of every run; per seed and horizon T the
#      speedup: T over the horizon at which Blockwise LR's terminal loss
#      equals AdamW's at T (interpolated in log T between the horizons
#      that bracket it; a bound where none does); Principle (1)'s order
#      (sw-sharpness --check principle) on every checkpoint; the curves of
#      the longest runs (sw-plot loss-curves)
#
# Two arms, the paper's two architectures: the Llama of make demo, then a
# GPT-2 of the same sizes (LayerNorm, learned positions, GELU, biases, tied
# head: sw-train --arch gpt2), each the whole study above, the GPT-2's in
# OUT-gpt2; STUDY_ARCH=llama or gpt2 runs one.
#
# Everything it prints comes from the runs. The sweeps resume: rerun to
# finish what was cut. STUDY_TINY=1: the same in miniature (the committed
# corpus, a tiny model, seconds), for trying the pipeline (tests/e2e).
# STUDY_SCALE=N multiplies the horizons (and the checkpoint interval);
# STUDY_SLURM=1 writes Slurm job scripts instead of running (demo/study.sh).
# Usage: demo/blockwise-study.sh [BIN_DIR]   (make blockwise-study passes build/bin)
set -eu
if [ -z "${STUDY_ARCH:-}" ]; then
	STUDY_ARCH=llama sh "$0" "$@"
	STUDY_ARCH=gpt2 exec sh "$0" "$@"
fi
bin=${1:-build/bin}
top=$(cd "$(dirname "$0")/.." && pwd)
out=${STUDY_OUT:-demo/out/blockwise-study}
case $STUDY_ARCH in
llama) ;;
gpt2) out=$out-gpt2 ;;
*) echo "blockwise-study: STUDY_ARCH: llama or gpt2" >&2; exit 64 ;;
esac
scale=${STUDY_SCALE:-1}
if [ "${STUDY_TINY:-0}" = 1 ]; then
	CORPUS=$top/fixtures/corpus.txt VOCAB=300
	MODEL="--arch $STUDY_ARCH --d-model 16 --n-layers 1 --n-heads 2 --seq-len 16"
	B=4 T=16 STEPS="20 40 80" EVERY=20 WARMUP=4 LRS=0.003,0.01
else
	CORPUS="" VOCAB=2048
	MODEL="--arch $STUDY_ARCH --d-model 128 --n-layers 4 --n-heads 4 --seq-len 64"
	# Llama's grouped queries; GPT-2 has one key and value head per query head
	[ $STUDY_ARCH = llama ] && MODEL="$MODEL --n-kv-heads 2"
	B=16 T=64 STEPS="500 1000 2000" EVERY=250 WARMUP=50 LRS=0.001,0.003,0.01
fi
STEPS=$(for s in $STEPS; do echo $((s * scale)); done | tr '\n' ' ')
EVERY=$((EVERY * scale))
SEEDS=${STUDY_SEEDS:-1 2}
. "$top/demo/study.sh"

# 1. the corpus and its tokens
study_corpus "$out" "$CORPUS" $VOCAB

TRAIN="--data $out/corpus.tok --vocab $VOCAB $MODEL --wd 0.1 --warmup $WARMUP --schedule cosine
	--eval-every $EVERY --trace-every $EVERY --threads 1"
tokens=$(for s in $STEPS; do echo $((s * B * T)); done | paste -s -d, -)
first=$(echo $STEPS | awk '{ print $1 }')

# 2. the learning rate: AdamW's best at the shortest horizon
say "the learning rate: AdamW's best of $LRS at $first steps, seed 1"
sweep --out "$out/tune" --lr $LRS --batch $B --tokens $((first * B * T)) -j 2 --quiet -- \
	$TRAIN --seed 1 --ckpt-every $first >"$out/tune.tsv"
study_trained
printf 'lr\tval_loss\n' >"$out/tune-loss.tsv"
for lr in $(echo $LRS | tr , ' '); do
	sw-trace --series val_loss --every $first "$out/tune/lr$lr-b$B-t$((first * B * T))/trace.h5" >"$out/trace.tmp"
	awk -F'\t' -v lr=$lr -v s=$first 'NR > 1 && $1 == s { print lr "\t" $2 }' "$out/trace.tmp" >>"$out/tune-loss.tsv"
done
LR=$(awk -F'\t' 'NR > 1 && (best == "" || $2 < best) { best = $2; lr = $1 } END { print lr }' "$out/tune-loss.tsv")
cat "$out/tune-loss.tsv"
echo "lr_max $LR"

# 3. the runs: a sweep over the horizons per optimizer and seed
say "AdamW and AdamW + Blockwise LR at lr_max $LR, horizons $STEPS steps ($MODEL), seeds $SEEDS; two runs at a time"
for seed in $SEEDS; do
	for opt in adamw blockwise; do
		extra=
		[ $opt = blockwise ] && extra=--blockwise-lr
		sweep --out "$out/$opt-lr$LR-s$seed" --batch $B --tokens "$tokens" -j 2 --quiet -- \
			$TRAIN --seed $seed --lr $LR --ckpt-every $EVERY --fisher-every $EVERY $extra \
			>"$out/$opt-lr$LR-s$seed.tsv"
	done
done
study_trained
echo "trained in $(( $(date +%s) - T0 )) s"

# 4. the tables
# terminal.tsv: optimizer seed steps val_loss, from each run's trace
printf 'optimizer\tseed\tsteps\tval_loss\n' >"$out/terminal.tsv"
printf 'step\tloss\trun\n' >"$out/curves.tsv"
last=$(echo $STEPS | awk '{ print $NF }')
for seed in $SEEDS; do
	for opt in adamw blockwise; do
		for s in $STEPS; do
			run=$out/$opt-lr$LR-s$seed/b$B-t$((s * B * T))
			sw-trace --series val_loss --every $EVERY "$run/trace.h5" >"$out/trace.tmp"
			awk -F'\t' -v o=$opt -v seed=$seed -v s=$s 'NR > 1 && $1 == s { print o "\t" seed "\t" s "\t" $2 }' \
				"$out/trace.tmp" >>"$out/terminal.tsv"
			[ $s = $last ] && awk -F'\t' -v r="$opt seed $seed" 'NR > 1 && $2 != "" { print $1 "\t" $2 "\t" r }' \
				"$out/trace.tmp" >>"$out/curves.tsv"
		done
	done
done
rm -f "$out/trace.tmp"
# speedup.tsv: seed steps adamw_loss blockwise_steps speedup bound, per
# baseline horizon: the blockwise horizon with the same terminal loss
awk -F'\t' -v OFS='\t' 'NR == 1 { next }
	$1 == "adamw" { a[$2, $3] = $4 }
	$1 == "blockwise" { w[$2, ++n[$2]] = $3 " " $4; seeds[$2] = 1 }
	END {
		print "seed", "steps", "adamw_loss", "blockwise_steps", "speedup", "bound"
		for (seed in seeds) for (i = 1; i <= n[seed]; i++) {
			split(w[seed, i], p, " "); T = p[1]; L = a[seed, T]
			split(w[seed, 1], f, " ")
			split(w[seed, n[seed]], l, " ")
			if (f[2] <= L) { print seed, T, L, f[1], T / f[1], ">="; continue }
			if (l[2] > L) { print seed, T, L, l[1], T / l[1], "<"; continue }
			for (j = 2; j <= n[seed]; j++) {
				split(w[seed, j - 1], u, " "); split(w[seed, j], v, " ")
				if (v[2] <= L && u[2] > L) {
					x = log(u[1]) + (log(v[1]) - log(u[1])) * (u[2] - L) / (u[2] - v[2])
					print seed, T, L, exp(x), T / exp(x), "="
					break
				}
			}
		}
	}' "$out/terminal.tsv" >"$out/speedup.tmp"
{ head -n 1 "$out/speedup.tmp"; sed 1d "$out/speedup.tmp" | sort -k1,1n -k2,2n; } >"$out/speedup.tsv"
rm -f "$out/speedup.tmp"
# principle.tsv: optimizer seed checkpoints holds (Principle (1) strict at each)
printf 'optimizer\tseed\tcheckpoints\tholds\n' >"$out/principle.tsv"
for seed in $SEEDS; do
	for opt in adamw blockwise; do
		n=0 k=0
		for c in $(sw-sweep --checkpoints "$out/$opt-lr$LR-s$seed"); do
			n=$((n + 1))
			if sw-sharpness --check principle --strict "$c" >/dev/null 2>&1; then k=$((k + 1)); fi
		done
		printf '%s\t%s\t%d\t%d\n' $opt $seed $n $k >>"$out/principle.tsv"
	done
done
sw-plot --force loss-curves "$out/curves.tsv" -o "$out/blockwise-curves.png"

say "terminal validation loss per horizon (nats/token)"
awk -F'\t' 'NR == 1 { next } { k = $1 "\t" $3; s[k] += $4; ss[k] += $4 * $4; c[k]++; if (!(k in lo) || $4 < lo[k]) lo[k] = $4; if (!(k in hi) || $4 > hi[k]) hi[k] = $4 }
	END { for (k in s) printf "%s\t%.4f\t%.4f\t%d\n", k, s[k] / c[k], hi[k] - lo[k], c[k] }' "$out/terminal.tsv" |
	sort -t "$(printf '\t')" -k1,1 -k2,2n >"$out/terminal-mean.tmp"
{ printf 'optimizer\tsteps\tmean\trange\tseeds\n'; cat "$out/terminal-mean.tmp"; } >"$out/terminal-mean.tsv"
rm -f "$out/terminal-mean.tmp"
cat "$out/terminal-mean.tsv"
say "speedup: AdamW's steps over Blockwise LR's to the same terminal loss (paper: nearly 2x)"
cat "$out/speedup.tsv"
awk -F'\t' 'NR > 1 && $6 == "=" { n++; s += $5; if (n == 1 || $5 < lo) lo = $5; if (n == 1 || $5 > hi) hi = $5 }
	END { if (n) printf "interpolated speedups: %d, mean %.2f, from %.2f to %.2f\n", n, s / n, lo, hi
	      else print "no horizon of Blockwise LR matches a baseline loss inside the grid (see the bounds)" }' "$out/speedup.tsv"
say "Principle (1), S(emb) < S(qk) < S(ffn) < S(vo) < S(norm), strict, at every checkpoint"
cat "$out/principle.tsv"
echo "figure: $out/blockwise-curves.png; in all $(( $(date +%s) - T0 )) s"
