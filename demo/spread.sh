#!/bin/sh
# make demo-spread: the demo on several seeds, and the spread of its
# findings. A number that comes from a training run moves with the seed,
# and, by float32 rounding amplified over the steps, with the machine (an
# OpenBLAS kernel, a SIMD width, a thread count): docs/findings.md reports the
# demo's findings as the mean and range printed here, not as one run's
# digits.
#
# Usage: demo/spread.sh [BIN_DIR]   (make demo-spread passes build/bin)
#
# Each seed's demo goes to $SW_SPREAD_OUT/seedN (default demo/spread;
# reruns reuse what is there, as demo/demo.sh does), SW_SPREAD_SEEDS
# names the seeds (default "1 2 3"; seed 1 is make demo's), and the table
# goes to stdout and to $SW_SPREAD_OUT/spread.tsv:
#
#   quantity  seed1 ... seedN  mean  min  max
#
# quantity: the last evaluation's validation loss; the GNB sharpness S
# (sw-sharpness's mean) per block type at the last step; the number of
# checkpoints at which Principle (1) holds strictly (of 10) and the first
# step from which it holds at every later one (0: not at the last);
# ||W_out||_{RMS->inf}, raw and folded, at the last step; sigma_max of
# layer 1's down projection at the last step; the norm-transfer sweep's
# log2 spread of the optimal output norm and its lr exponent.
# SW_DEMO_TINY=1 runs each demo in miniature (tests/e2e/t0250-mini-demo.t).
set -eu
bin=${1:-build/bin}
out=${SW_SPREAD_OUT:-demo/spread}
seeds=${SW_SPREAD_SEEDS:-1 2 3}
top=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"

for s in $seeds; do
	printf '\n==== seed %s\n' "$s" >&2
	SW_DEMO_SEED=$s SW_DEMO_OUT=$out/seed$s sh "$top/demo/demo.sh" "$bin" >&2
done

# one seed's findings, "quantity<TAB>value" a line, in a fixed order
findings() {
	d=$1
	awk -F'\t' '
		FILENAME ~ /training.tsv$/ && FNR > 1 && $3 != "nan" { val = $3 }
		FILENAME ~ /sharpness.tsv$/ && FNR > 1 { S[$3] = $5 }
		FILENAME ~ /sharpness-steps.tsv$/ && FNR > 1 {
			if (!($2 in seen)) { seen[$2] = 1; steps[++n] = $2 }
			s[$2, $3] = $5
		}
		FILENAME ~ /norms.tsv$/ && FNR > 1 { norm[$6] = $10 }
		FILENAME ~ /spectrum.tsv$/ && FNR > 1 && $7 == 1 { sigma = $8 }
		FILENAME ~ /transfer-summary.tsv$/ && FNR == 2 { spread = $5; lr_exp = $9 }
		END {
			printf "val_loss\t%s\n", val
			split("emb qk ffn vo norm out", kinds, " ")
			for (i = 1; i <= 6; i++)
				printf "S_%s\t%s\n", kinds[i], S[kinds[i]]
			holds = 0; since = 0
			for (i = 1; i <= n; i++) {
				t = steps[i]
				ok = s[t, "emb"] < s[t, "qk"] && s[t, "qk"] < s[t, "ffn"] && \
				     s[t, "ffn"] < s[t, "vo"] && s[t, "vo"] < s[t, "norm"]
				holds += ok
				if (!ok)
					since = 0
				else if (!since)
					since = t
			}
			printf "principle_holds_ckpts\t%d\nprinciple_holds_from_step\t%d\n", holds, since
			printf "out_norm\t%s\nout_norm_folded\t%s\n", norm["lm_head"], norm["lm_head_folded"]
			printf "sigma_max_down1\t%s\n", sigma
			printf "transfer_log2_norm_spread\t%s\ntransfer_lr_exponent\t%s\n", spread, lr_exp
		}' "$d/training.tsv" "$d/sharpness.tsv" "$d/sharpness-steps.tsv" "$d/norms.tsv" \
		"$d/spectrum.tsv" "$d/transfer-summary.tsv"
}

: >"$out/spread.tmp"
for s in $seeds; do
	findings "$out/seed$s" >"$out/seed$s/findings.tsv"
	echo "$out/seed$s/findings.tsv" >>"$out/spread.tmp"
done
# shellcheck disable=SC2046
awk -F'\t' -v seeds="$seeds" '
	BEGIN { ns = split(seeds, sd, " ") }
	FNR == 1 { f++ }
	{ if (f == 1) q[++nq] = $1; v[f, FNR] = $2 }
	END {
		printf "quantity"
		for (i = 1; i <= ns; i++)
			printf "\tseed%s", sd[i]
		print "\tmean\tmin\tmax"
		for (k = 1; k <= nq; k++) {
			printf "%s", q[k]
			sum = 0; lo = hi = v[1, k] + 0
			for (i = 1; i <= ns; i++) {
				x = v[i, k] + 0; sum += x
				if (x < lo) lo = x
				if (x > hi) hi = x
				printf "\t%s", v[i, k]
			}
			printf "\t%.6g\t%.6g\t%.6g\n", sum / ns, lo, hi
		}
	}' $(cat "$out/spread.tmp") >"$out/spread.tsv.tmp"
rm -f "$out/spread.tmp"
mv "$out/spread.tsv.tmp" "$out/spread.tsv"
cat "$out/spread.tsv"
