#!/bin/sh
# make demo: the main job on the embedded default, end to end.
#
#   1. a byte-level BPE tokenizer (vocab 2048) on Debian's fortunes text
#   2. a small Llama trained for 2500 steps: checkpoints with /fisher, a trace
#   3. an lr x batch sweep (norm transfer) and an lr x wd x width sweep
#      (spectra), short runs
#   4. every tool on them (the final model exported to Hugging Face
#      safetensors and back by sw-convert), every figure kind into
#      demo/out/, TSVs beside
#
# Reruns reuse what is there: delete demo/out (or a part of it) to redo.
# Usage: demo/demo.sh [BIN_DIR]   (make demo passes build/bin)
#
# Progress: each training phase says first how long it is expected to
# take on this machine: a trial of a few steps of its own runs (trial()
# below), timed and scaled to the phase's steps, runs and lanes; sw-train
# --log prints a line per evaluation and checkpoint (step, loss, tokens/s,
# ETA) on stderr as it goes. The sweeps' small runs go
# two at a time on one thread each: on two cores that beats one run at a
# time on two threads (small matrices do not keep two threads busy).
#
# SW_DEMO_SEED=N trains every run from seed N (default 1): demo/spread.sh
# runs the demo on three seeds to give each finding its spread.
#
# SW_DEMO_TINY=1 runs the same job in miniature (the committed corpus,
# tiny models, a few steps: seconds) into SW_DEMO_OUT; the end-to-end test
# tests/e2e/t0250-mini-demo.t does that.
set -eu
bin=${1:-build/bin}
out=${SW_DEMO_OUT:-demo/out}
top=$(cd "$(dirname "$0")/.." && pwd)
if [ "${SW_DEMO_TINY:-0}" = 1 ]; then
	CORPUS=$top/fixtures/corpus.txt VOCAB=300
	MAIN_D=32 MAIN_T=32 MAIN_B=4 MAIN_STEPS=40 WARMUP=4
	SWEEP_D=16 SWEEP_T=16 HORIZON=2048 LRS="0.002 0.008" BATCHES="4 8"
	SPEC_DS="16 32" SPEC_STEPS=30
	TRIAL_STEPS=4
	HESS_TOKENS=128 HESS_PROBES=4
else
	CORPUS="" VOCAB=2048
	MAIN_D=128 MAIN_T=64 MAIN_B=16 MAIN_STEPS=2500 WARMUP=100
	SWEEP_D=64 SWEEP_T=64 HORIZON=262144 LRS="0.001 0.002 0.004 0.008" BATCHES="4 8 16"
	SPEC_DS="64 128" SPEC_STEPS=600
	TRIAL_STEPS=10
	HESS_TOKENS=1024 HESS_PROBES=20
fi
EVERY=$((MAIN_STEPS / 10))
step6() { printf %06d "$1"; }
PATH=$bin:$PATH
export PATH
mkdir -p "$out"
T0=$(date +%s)
EXPECTED=0      # seconds of training the phases that ran expected

TRIAL=$out/.trial
trap 'rm -rf "$TRIAL"' EXIT

say() { printf '\n== %s\n' "$*"; }
elapsed() { mins "$(( $(date +%s) - T0 ))"; }

# "5 min 06 s"
mins() {
	awk -v s="$1" 'BEGIN { s = int(s + 0.5); if (s >= 60) printf "%d min %02d s", s / 60, s % 60
		else printf "%d s", s }'
}

# lane K N CMD...: CMD once for each of N grid points i = 0..N-1 with
# i % 2 = K, the point's index in $i (the sweeps: two lanes side by side)
lane() {
	k=$1 n=$2
	shift 2
	i=0
	while [ $i -lt "$n" ]; do
		if [ $((i % 2)) = "$k" ]; then
			"$@" || return 1
		fi
		i=$((i + 1))
	done
}

# both lanes of a sweep ($1: the function that runs point $i, $2: points),
# then wait for both; a run that fails fails the demo
two_lanes() {
	lane 0 "$2" "$1" & l0=$!
	lane 1 "$2" "$1" & l1=$!
	st=0
	wait $l0 || st=1
	wait $l1 || st=1
	return $st
}

# the i-th word of a list ($1: i from 0, the rest: the list)
nth() {
	shift $(($1 + 1))
	echo "$1"
}

# seconds since the epoch, to the nanosecond where date(1) has %N (GNU)
now() {
	t=$(date +%s.%N)
	case $t in
	*[!0-9.]*) date +%s ;;
	*) echo "$t" ;;
	esac
}

# trial COPIES ARGS...: the expected duration of a phase's run, from
# $TRIAL_STEPS steps of it: sw-train ARGS (the run's model, batch and
# threads; a checkpoint, with the run's evaluation and /fisher, at the
# trial's last step) into $TRIAL, COPIES at once (2: the sweeps' two lanes,
# so that the trial shares the cores as the runs will). Sets STEP_S, the
# seconds a step took (sw-train --timing: the steps alone), and REST_S, the
# rest of the trial's wall time (start, the checkpoint with its evaluation
# and /fisher), of the slowest copy; then removes the trial's files. Its
# cost: a start, $TRIAL_STEPS steps and a checkpoint per trial; measured on
# the project's 2-core machine, 2.6 s for the full demo's 6 trials (the
# main run's 0.8 s), 0.5 s in miniature. The estimate holds while the
# machine's load does: other work that starts or stops during a phase
# moves its time, not its estimate.
trial() {
	copies=$1
	shift
	rm -rf "$TRIAL"
	mkdir "$TRIAL"
	c=0 pids=""
	while [ $c -lt "$copies" ]; do
		(t=$(now) &&
		 sw-train "$@" --out "$TRIAL/$c" --steps "$TRIAL_STEPS" --timing >/dev/null 2>"$TRIAL/$c.err" &&
		 echo "$t $(now)" >"$TRIAL/$c.wall") &
		pids="$pids $!" c=$((c + 1))
	done
	st=0
	for p in $pids; do
		wait "$p" || st=1
	done
	if [ $st != 0 ]; then
		cat "$TRIAL"/*.err >&2
		echo "demo: the trial run (sw-train $*) failed" >&2
		exit 70
	fi
	# each copy: "start end steps' seconds"
	t=$(for f in "$TRIAL"/*.wall; do
		echo "$(cat "$f") $(sed -n 's/^sw-train: timing: steps \([0-9.]*\) s.*/\1/p' "${f%.wall}.err")"
	done | awk -v k="$TRIAL_STEPS" '{ if ($3 == "") $3 = $2 - $1   # no timing line: all of it steps
		step = $3 / k; rest = $2 - $1 - $3; if (rest < 0) rest = 0
		if (step > s) s = step; if (rest > r) r = rest }
		END { printf "%.6f %.6f\n", s, r }')
	STEP_S=${t% *} REST_S=${t#* }
	rm -rf "$TRIAL"
}

# secs X [DIGITS]: the awk expression X, seconds, rounded to DIGITS
# decimals (default 0: whole seconds, at least 1)
secs() {
	awk -v d="${2:-0}" "BEGIN { s = $1; if (d > 0) printf \"%.\" d \"f\n\", s
		else { s = int(s + 0.5); print (s < 1 ? 1 : s) } }"
}

# lanes N IDX EST...: the seconds a sweep of N points takes, two lanes side
# by side (two_lanes), point i's run expected to take EST number IDX (an
# awk expression of i; from 0) seconds: the slower lane's sum
lanes() {
	n=$1 idx=$2
	shift 2
	secs "$(echo "$@" | awk -v n="$n" "{ for (i = 0; i < n; i++) l[i % 2] += \$(1 + ($idx))
		print (l[0] > l[1] ? l[0] : l[1]) }")"
}

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
if [ -n "$CORPUS" ] && [ ! -s "$out/fortunes.txt" ]; then
	cp "$CORPUS" "$out/fortunes.txt"
elif [ ! -s "$out/fortunes.txt" ]; then
	if [ ! -d "$FORTUNES" ]; then
		echo "demo: $FORTUNES is missing: install Debian's fortunes (make deps does)" >&2
		exit 66
	fi
	cat $(ls -d "$FORTUNES"/* | grep -v -E '\.(dat|u8)$') >"$out/fortunes.txt"
fi
if [ ! -s "$out/fortunes.tok" ]; then
	say "a BPE tokenizer on $(wc -c <"$out/fortunes.txt") bytes of fortunes; expected seconds (at $(elapsed))"
	sw-tokenize train --force --vocab $VOCAB -o "$out/tokenizer.bpe" "$out/fortunes.txt" >"$out/tokenizer.tsv"
	pretty <"$out/tokenizer.tsv"
	sw-tokenize encode --force -t "$out/tokenizer.bpe" -o "$out/fortunes.tok" "$out/fortunes.txt" >"$out/encode.tsv"
	pretty <"$out/encode.tsv"
fi
DATA="--data $out/fortunes.tok --vocab $VOCAB --seed ${SW_DEMO_SEED:-1}"

# ---- 2. the main run -----------------------------------------------------

MAIN=$out/main
FINAL=$MAIN/ckpt-$(step6 $MAIN_STEPS).h5
MODEL="--d-model $MAIN_D --n-layers 4 --n-heads 4 --n-kv-heads 2 --seq-len $MAIN_T --batch $MAIN_B"
if [ ! -s "$FINAL" ]; then
	# the steps, and the rest of the trial (a start, a checkpoint with its
	# evaluation and /fisher) once per checkpoint; its trace rows (one per
	# 10 steps, a few seconds in all) are left out
	trial 1 $DATA $MODEL --warmup $WARMUP --lr 3e-3 --wd 0.1 --ckpt-every "$TRIAL_STEPS" \
		--fisher-every "$TRIAL_STEPS" --eval-every "$TRIAL_STEPS" --trace-every $((EVERY / 25 > 0 ? EVERY / 25 : 1))
	MAIN_SECS=$(secs "$STEP_S * $MAIN_STEPS + $REST_S * $MAIN_STEPS / $EVERY")
	EXPECTED=$((EXPECTED + MAIN_SECS))
	say "training: d_model $MAIN_D, 4 layers, GQA 4/2 heads, $MAIN_STEPS steps of $MAIN_B x $MAIN_T tokens; expected $(mins $MAIN_SECS) (at $(elapsed))"
	rm -rf "$MAIN"
	sw-train $DATA --out "$MAIN" $MODEL --steps $MAIN_STEPS --warmup $WARMUP --lr 3e-3 --wd 0.1 \
		--ckpt-every $EVERY --fisher-every $EVERY --eval-every $EVERY \
		--trace-every $((EVERY / 25 > 0 ? EVERY / 25 : 1)) --log >/dev/null
fi

# ---- 3. the sweeps -------------------------------------------------------

# norm transfer: lr x batch, checkpoints at three horizons of tokens
SWEEP=$out/sweep-lr-batch
NB=$(echo $BATCHES | wc -w)
RUNS=$(( $(echo $LRS | wc -w) * NB ))
sweep_run() {
	lr=$(nth $((i / NB)) $LRS) b=$(nth $((i % NB)) $BATCHES)
	s=$((HORIZON / (b * SWEEP_T)))
	sw-train $DATA --out "$SWEEP/lr$lr-b$b" --d-model $SWEEP_D --n-layers 2 --n-heads 4 \
		--seq-len $SWEEP_T --batch $b --lr $lr --warmup $((s / 20)) --steps $s \
		--ckpt-every $((s / 4)) --eval-every $((s / 4)) --trace "" --threads 1 --log >/dev/null &&
	rm -f "$SWEEP/lr$lr-b$b/ckpt-$(step6 $((s * 3 / 4))).h5" &&
	: >"$SWEEP/lr$lr-b$b/.done" &&
	echo "sweep: lr$lr-b$b done, $(ls "$SWEEP"/*/.done | wc -l) of $RUNS runs (at $(elapsed))"
}
if [ ! -d "$SWEEP/done" ]; then
	# each batch size's run (its steps, and 4 checkpoints with an
	# evaluation), then the slower lane's runs
	ests=""
	for b in $BATCHES; do
		trial 2 $DATA --d-model $SWEEP_D --n-layers 2 --n-heads 4 --seq-len $SWEEP_T --batch "$b" \
			--ckpt-every "$TRIAL_STEPS" --eval-every "$TRIAL_STEPS" --trace "" --threads 1
		ests="$ests $(secs "$STEP_S * $((HORIZON / (b * SWEEP_T))) + $REST_S * 4" 3)"
	done
	SWEEP_SECS=$(lanes $RUNS "i % $NB" $ests)
	EXPECTED=$((EXPECTED + SWEEP_SECS))
	say "an lr x batch sweep: lr $LRS x batch $BATCHES, d_model $SWEEP_D, horizons of $((HORIZON / 4)), $((HORIZON / 2)), $HORIZON tokens; $RUNS runs, two at a time; expected $(mins $SWEEP_SECS) (at $(elapsed))"
	rm -rf "$SWEEP"
	two_lanes sweep_run $RUNS
	mkdir "$SWEEP/done"
fi

# spectra: lr x wd at two widths, constant lr after warmup (the AdamW steady state)
SPEC=$out/sweep-lr-wd
spec_run() {
	d=$(nth $((i / 4)) $SPEC_DS) lr=$(nth $((i / 2 % 2)) 0.003 0.01) wd=$(nth $((i % 2)) 0.3 1.0)
	# a checkpoint, and a --log line, at the end only
	sw-train $DATA --out "$SPEC/d$d-lr$lr-wd$wd" --d-model $d --n-layers 2 \
		--n-heads 4 --seq-len 64 --batch 8 --lr $lr --wd $wd --schedule constant \
		--warmup $((SPEC_STEPS / 12)) --steps $SPEC_STEPS --eval-every 0 \
		--ckpt-every $SPEC_STEPS --trace "" --threads 1 --log >/dev/null &&
	: >"$SPEC/d$d-lr$lr-wd$wd/.done" &&
	echo "sweep: d$d-lr$lr-wd$wd done, $(ls "$SPEC"/*/.done | wc -l) of 8 runs (at $(elapsed))"
}
if [ ! -d "$SPEC/done" ]; then
	# each width's run (its steps, a checkpoint), then the slower lane's runs
	ests=""
	for d in $SPEC_DS; do
		trial 2 $DATA --d-model "$d" --n-layers 2 --n-heads 4 --seq-len 64 --batch 8 \
			--ckpt-every "$TRIAL_STEPS" --eval-every 0 --trace "" --threads 1
		ests="$ests $(secs "$STEP_S * $SPEC_STEPS + $REST_S" 3)"
	done
	SPEC_SECS=$(lanes 8 "int(i / 4)" $ests)
	EXPECTED=$((EXPECTED + SPEC_SECS))
	say "an lr x wd x width sweep: 2 x 2 x 2 runs of $SPEC_STEPS steps, two at a time; expected $(mins $SPEC_SECS) (at $(elapsed))"
	rm -rf "$SPEC"
	two_lanes spec_run 8
	mkdir "$SPEC/done"
fi

# ---- 4. every tool, every figure -----------------------------------------

say "the tools, then the figures: no training, reading what was written; expected well under a minute (at $(elapsed))"
sw-ls --summary "$FINAL" >"$out/params.tsv"
pretty <"$out/params.tsv"

# the final model for PyTorch/transformers, and back: the same numbers
rm -rf "$out/hf" "$out/hf-back.h5"
sw-convert "$FINAL" "$out/hf" >/dev/null
sw-convert "$out/hf" "$out/hf-back.h5" >/dev/null
# (each table to a file first: a pipe would hide a tool's failure from set -e)
sw-norms "$FINAL" >"$out/norms-h5.full.tsv"
sw-norms "$out/hf" >"$out/norms-hf.full.tsv"
sw-norms "$out/hf-back.h5" >"$out/norms-back.full.tsv"
for f in h5 hf back; do
	cut -f2- "$out/norms-$f.full.tsv" >"$out/norms-$f.tsv"
done
if cmp -s "$out/norms-h5.tsv" "$out/norms-hf.tsv" && cmp -s "$out/norms-h5.tsv" "$out/norms-back.tsv"; then
	echo "sw-convert: $out/hf (Hugging Face safetensors) and back: every norm identical"
else
	echo "demo: sw-convert changed the norms of $FINAL" >&2
	exit 70
fi

sw-trace --series loss,val_loss,lr,grad_norm,out_norm "$MAIN/trace.h5" >"$out/training.tsv"
sw-trace --series residual_rms "$MAIN/trace.h5" >"$out/residual.tsv"
sw-norms --role lm_head "$MAIN"/ckpt-*.h5 >"$out/norms.tsv"
sw-sharpness "$MAIN"/ckpt-*.h5 >"$out/sharpness-steps.tsv"
# the last step's rows of the table over training (computed once)
awk -F'\t' -v f="$FINAL" 'NR == 1 || $1 == f' "$out/sharpness-steps.tsv" >"$out/sharpness.tsv"
sw-sharpness --hist 60 "$FINAL" >"$out/sharpness-hist.tsv"
sw-sharpness --ratios "$MAIN"/ckpt-*.h5 >"$out/sharpness-ratios.tsv"
sw-spectrum --role down --layer 1 "$MAIN/ckpt-$(step6 $EVERY).h5" "$MAIN/ckpt-$(step6 $((4 * EVERY))).h5" \
	"$FINAL" >"$out/spectrum.tsv"
sw-spectrum --summary "$FINAL" >"$out/spectrum-summary.tsv"
sw-spectrum --hist 40 --role down --layer 1 "$FINAL" >"$out/esd.tsv"
# the heavy-tail fits of every matrix at three steps (esd-layers: alpha
# against the layer), and Adam's preconditioned Hessian per block at the
# same steps (hessian, and eos: the edge-of-stability ratio)
THREE="$MAIN/ckpt-$(step6 $EVERY).h5 $MAIN/ckpt-$(step6 $((4 * EVERY))).h5 $FINAL"
sw-spectrum --esd-fit $THREE >"$out/esd-layers.tsv"
sw-hessian --preconditioned --data "$out/fortunes.tok" --batch-tokens $HESS_TOKENS \
	--probes $HESS_PROBES --seq-len $MAIN_T $THREE >"$out/hessian.tsv"
cp "$out/hessian.tsv" "$out/eos.tsv"
SPEC_LAST=ckpt-$(step6 $SPEC_STEPS).h5
sw-spectrum --normalize --role down --layer 1 "$SPEC"/d${SPEC_DS##* }-*/$SPEC_LAST >"$out/spectrum-normalized.tsv"
sw-spectrum --fit "$SPEC"/*/$SPEC_LAST >"$out/spectrum-fit.tsv"
sw-qkdrift "$MAIN"/ckpt-*.h5 >"$out/qkdrift.tsv"
sw-qkdrift --drift "$MAIN"/ckpt-*.h5 >"$out/qkdrift-drift.tsv"
sw-norms --scale-vectors --block norm "$MAIN"/ckpt-*.h5 >"$out/scale-vectors.tsv"
sw-transfer --table "$SWEEP"/*/ckpt-*.h5 >"$out/transfer.tsv"
sw-transfer "$SWEEP"/*/ckpt-*.h5 >"$out/transfer-fits.tsv"
sw-transfer --summary "$SWEEP"/*/ckpt-*.h5 >"$out/transfer-summary.tsv" || true

say "figures (at $(elapsed))"
for kind in training residual norms sharpness sharpness-steps sharpness-hist spectrum \
	spectrum-normalized esd esd-layers hessian eos qkdrift scale-vectors transfer transfer-fits; do
	sw-plot --force "$kind" "$out/$kind.tsv" -o "$out/$kind.png"
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
say "done in $(elapsed) (the training expected $(mins $EXPECTED)): tables and figures in $out/"
