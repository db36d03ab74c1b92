#!/bin/sh
# sw-transfer and sw-qkdrift on a tiny real sweep made with sw-train (lr
# 0.001, 0.003, 0.01 x batch 4, 8; checkpoints at 2048 and 4096 tokens):
# the output is well formed and agrees with sw-norms, h5dump and the
# trainer's trace on the same files; sw-qkdrift agrees with an independent
# numpy computation (tests/e2e/qk_reference.py) where numpy and h5py exist.
. "$(dirname "$0")/../lib/tap.sh"

CORPUS=$FIX/corpus.txt
SMALL="--seq-len 16 --d-model 16 --n-layers 2 --n-heads 4 --n-kv-heads 2 --threads 2 --schedule constant"
REF=$SW_TOP/tests/e2e/qk_reference.py

# value of attribute $2 of object $3 in HDF5 file $1, via h5dump
h5attr() {
	h5dump -a "$3/$2" "$1" >attr.dump && sed -n 's/^ *(0): *//p' attr.dump | tr -d '"'
}

test_expect_success 'setup: a sweep of six runs, two horizons each (seconds)' '
	mkdir sweep &&
	for lr in 0.001 0.003 0.01; do for b in 4 8; do
		steps=$((4096 / (b * 16))) &&
		sw-train --data "$CORPUS" --out sweep/lr$lr-b$b $SMALL --batch $b --lr $lr \
			--steps $steps --ckpt-every $((steps / 2)) --eval-every $((steps / 2)) \
			--trace "" >/dev/null || exit 1
	done; done &&
	ls sweep/*/ckpt-*.h5 >ckpts && test_line_count = 12 ckpts
'

test_expect_success 'sw-transfer --table: one well-formed row per checkpoint' '
	sw-transfer --table $(cat ckpts) >table &&
	test_line_count = 13 table &&
	awk -F"\t" "NR > 1 && (NF != 11 || \$4 !~ /^(2048|4096)\$/ || \$3 !~ /^(4|8)\$/ ||
		\$2 !~ /^(0.001|0.003|0.01)\$/ || \$5 != 16 || \$7 != \"val_loss\" || !(\$6 > 0) ||
		!(\$8 > 0) || !(\$9 > 0) || \$11 !~ /^[01]\$/) { print; bad = 1 } END { exit bad }" table
'

test_expect_success 'the table agrees with the files: lr_max, batch_size, tokens, val_loss (h5dump)' '
	sw-transfer --table $(cat ckpts) >table &&
	test_line_count = 13 table &&
	sed 1d table | while IFS="	" read -r f lr b tok d loss kind n nf l2 opt; do
		awk -v a="$lr" -v b="$(h5attr "$f" lr_max /optim)" -v c="$b" -v d="$(h5attr "$f" batch_size /optim)" \
			-v e="$tok" -v g="$(h5attr "$f" tokens /)" -v x="$loss" -v y="$(h5attr "$f" val_loss /metrics)" \
			"BEGIN { r = x - y; if (r < 0) r = -r; exit !(a == b && c == d && e == g && r < 1e-5 * y) }" ||
		{ echo "$f disagrees"; exit 1; }
	done
'

# exact: sw-transfer computes them by sw-norms' own function
# (norms_output_head) on the same files, on the same machine
test_expect_success 'out_norm and out_norm_folded are sw-norms lm_head and lm_head_folded, digit for digit' '
	for f in $(cat ckpts); do
		sw-norms --role lm_head "$f" >norms &&
		printf "%s\t" "$f" && sed 1d norms | cut -f10 | paste - - || exit 1
	done >norms.all && sort norms.all >expect &&
	sw-transfer --table $(cat ckpts) >table &&
	sed 1d table | cut -f1,8,9 | sort >got &&
	test_line_count = 12 got && test_cmp expect got
'

# exact: the same binary on the same files; the groups copy the table's
# cells
test_expect_success 'each horizon optimum is the lowest val_loss of that horizon, its norm the table s' '
	sw-transfer --table $(cat ckpts) >table &&
	sw-transfer $(cat ckpts) >groups &&
	test_line_count = 3 groups &&
	sed 1d table | sort -t "	" -k4,4n -k6,6g | awk -F"\t" "!seen[\$4]++ { print \$4, \$1, \$2, \$3, \$8 }" >expect &&
	sed 1d groups | awk -F"\t" "{ print \$2, \$14, \$5, \$6, \$8 }" >got &&
	test_cmp expect got &&
	sed 1d table | awk -F"\t" "\$11 == 1 { print \$4, \$1 }" | sort -n >marked &&
	cut -d" " -f1,2 expect >expect2 && test_cmp expect2 marked
'

# The slopes computed here from the groups' 9-digit cells against
# sw-transfer's from its doubles: lr, batch and tokens print exactly, but
# each norm is rounded to 9 digits (5e-9 relative), which moves log2 of
# the ratio by up to 1.5e-8; compared in absolute terms (logarithms; an
# exponent may be 0), within 5e-8. 6 decimals on both sides could still
# round apart.
test_expect_success '--summary: the exponents are the slopes through the two optima' '
	sw-transfer --summary $(cat ckpts) >summary &&
	test_line_count = 3 summary &&
	sw-transfer $(cat ckpts) >groups &&
	sed 1d groups | awk -F"\t" "{ t[NR] = \$2; lr[NR] = \$5; b[NR] = \$6; n[NR] = \$8 }
		END { dl = log(t[2] / t[1]); s = log(n[2] / n[1]) / log(2);
		printf \"%.17g\t%.17g\t%.17g\n\", log(lr[2] / lr[1]) / dl, log(b[2] / b[1]) / dl, s < 0 ? -s : s }" >expect &&
	sed -n 2p summary | cut -f9,13,5 >cells &&
	awk -F"\t" -v OFS="\t" "{ print \$2, \$3, \$1 }" cells >got &&
	paste expect got >both &&
	awk -F"\t" "NF != 6 { bad = 1 } { for (i = 1; i <= 3; i++) { d = \$i - \$(i + 3); if (d < 0) d = -d
		if (\$(i + 3) !~ /^-?[0-9]/ || d > 5e-8) { print \"column \" i \": \" \$i \" vs \" \$(i + 3); bad = 1 } } }
		END { exit bad || NR != 1 }" both
'

test_expect_success '--check: a wide tolerance passes, zero fails (two different optima)' '
	sw-transfer --summary $(cat ckpts) >summary &&
	sw-transfer --check spread=100 $(cat ckpts) >out 2>err && test_line_count = 0 err &&
	spread=$(sed -n 2p summary | cut -f5) &&
	if awk "BEGIN { exit !($spread > 0) }"; then
		test_expect_code 1 sw-transfer --check spread=0 $(cat ckpts) >out 2>err &&
		grep -q "^sw-transfer: check: the optimal output norms of 2 groups span" err
	fi
'

# the table carries norms to 9 digits, so log2 of them may differ in the last
test_expect_success 'sw-transfer --table | sw-transfer -: the same groups as from the files' '
	# pipe-ok: a table piped in is what is tested; the status is kept in status
	{ sw-transfer --table $(cat ckpts); echo $? >status; } | sw-transfer - >piped &&
	test_status 0 status &&
	sw-transfer $(cat ckpts) >groups && numbers_close 1e-8 groups piped
'

# the grep is exact: sw-transfer prints the norm it read, a copy of sw-norms'
# 9 digits (9 digits read and printed again come back the same)
test_expect_success 'sw-norms | awk | sw-transfer -: another norm of the head, by file' '
	sw-norms --role lm_head $(cat ckpts) >norms &&
	awk -F"\t" "\$6 == \"lm_head\" { print \$1 \"\t\" \$13 }" norms >spectral &&
	sw-transfer --table $(cat ckpts) >table && sw-transfer $(cat ckpts) >groups &&
	awk -F"\t" -v OFS="\t" "NR == FNR { s[\$1] = \$2; next } FNR == 1 { print; next } { \$8 = s[\$1]; \$9 = \"\"; print }" \
		spectral table | sw-transfer - >out &&
	test_line_count = 3 out &&
	sed 1d out | cut -f14 >files && sed 1d groups | cut -f14 >expect && test_cmp expect files &&
	sed 1d out | while IFS="	" read -r d t r k lr b loss n rest; do
		grep -q "	$n\$" spectral || { echo "norm $n is no spectral norm of sw-norms"; exit 1; }
	done
'

test_expect_success 'sw-qkdrift on a run: well formed, product and ratio consistent' '
	sw-qkdrift sweep/lr0.003-b4/ckpt-*.h5 >qk &&
	test_line_count = 17 qk &&
	awk -F"\t" "function near(a, b) { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; return d <= 1e-6 * m + 1e-12 }
		NR > 1 { if (NF != 15 || \$2 !~ /^(32|64)\$/ || \$7 != \"matrices\" || !(\$8 > 0) || !(\$9 > 0) ||
		\$6 != int(\$5 / 2) || !near(\$10, \$8 * \$9) || !near(\$11, log(\$8 / \$9) / log(2))) { print; bad = 1 } }
		END { exit bad }" qk &&
	sw-qkdrift --drift sweep/lr0.003-b4/ckpt-*.h5 >drift &&
	test_line_count = 9 drift &&
	awk -F"\t" "NR > 1 && (\$5 != 2 || \$6 != 32 || \$7 != 64 || \$8 !~ /^-?[0-9]/) { print; bad = 1 } END { exit bad }" drift
'

test_expect_success 'setup: a run without gains (nsv/), a checkpoint and a trace row at step 16' '
	sw-train --data "$CORPUS" --out nsv $SMALL --batch 4 --steps 16 --ckpt-every 8 --trace-every 8 \
		--no-scale-vectors >/dev/null
'

# sw-norms' RMS (its sums of squares) against the heads' RMS that
# sw-qkdrift prints to 9 digits (5e-9 relative each), combined here: both
# sides sum the same float32 squares in double, so they differ by the 9
# digits printed, up to 1e-8 relative: 2e-8. 7 digits on both sides could
# still round apart.
test_expect_success 'without gains: the heads add up to sw-norms RMS of q_proj and k_proj' '
	sw-qkdrift nsv/ckpt-000016.h5 >qk &&
	awk -F"\t" "NR > 1 { q[\$4] += \$8 * \$8; k[\$4] += \$9 * \$9; n[\$4]++ }
		END { for (l in q) printf \"%d\t%.17g\t%.17g\n\", l, sqrt(q[l] / n[l]), sqrt(k[l] / n[l]) }" qk >heads &&
	sort heads >got &&
	sw-norms --role q,k nsv/ckpt-000016.h5 >norms &&
	awk -F"\t" "NR > 1 { r[\$7, \$6] = \$15 }
		END { for (l = 0; l < 2; l++) printf \"%d\t%s\t%s\n\", l, r[l, \"q\"], r[l, \"k\"] }" norms >rows &&
	sort rows >expect &&
	test_line_count = 2 expect && numbers_close 2e-8 expect got
'

# The trainer's q_head_rms (train.c's rows_rms) and sw-qkdrift's q_rms
# (qkdrift.c's head_rms) are two functions summing the same float32
# squares in double in another order: about 1e-15 apart, but sw-qkdrift
# prints 9 digits (5e-9 relative) against the trace's 17: 1e-8 relative.
test_expect_success 'without gains and multipliers: the trace q_head_rms, k_head_rms at that step' '
	sw-trace --series q_head_rms,k_head_rms nsv/trace.h5 >series &&
	awk -F"\t" "NR == 1 { for (i = 2; i <= NF; i++) c[i] = \$i; next }
		\$1 == 16 { for (i = 2; i <= NF; i++) printf \"%s\t%.17g\n\", c[i], \$i }" series >trace.tsv &&
	sort trace.tsv >trace &&
	sw-qkdrift nsv/ckpt-000016.h5 >qk &&
	awk -F"\t" "NR > 1 { printf \"q_head_rms.layer%d.head%d\t%s\n\", \$4, \$5, \$8;
		if (\$5 % 2 == 0) printf \"k_head_rms.layer%d.head%d\t%s\n\", \$4, \$6, \$9 }" qk >ours.tsv &&
	sort ours.tsv >ours &&
	test_line_count = 12 ours && numbers_close 1e-8 trace ours
'

# With multipliers the trainer's effective weights are products rounded
# to float32 (2^-24 relative each, so the RMS moves by at most 6e-8), and
# sw-qkdrift multiplies in double: 1e-7 relative (1.5e-8 is seen). 6
# digits on both sides could round apart.
test_expect_success 'with row multipliers too: the trace is of the weights after the update' '
	sw-train --data "$CORPUS" --out nsvm $SMALL --batch 4 --steps 16 --ckpt-every 8 --trace-every 8 \
		--no-scale-vectors --multipliers row --mult-wd 0 >/dev/null &&
	sw-qkdrift nsvm/ckpt-000016.h5 >qkm &&
	sw-trace --series q_head_rms,k_head_rms nsvm/trace.h5 >series &&
	awk -F"\t" "NR == 1 { for (i = 2; i <= NF; i++) c[i] = \$i; next }
		\$1 == 16 { for (i = 2; i <= NF; i++) printf \"%s\t%.17g\n\", c[i], \$i }" series >trace.tsv &&
	sort trace.tsv >trace &&
	awk -F"\t" "NR > 1 { printf \"q_head_rms.layer%d.head%d\t%s\n\", \$4, \$5, \$8;
		if (\$5 % 2 == 0) printf \"k_head_rms.layer%d.head%d\t%s\n\", \$4, \$6, \$9 }" qkm >ours.tsv &&
	sort ours.tsv >ours &&
	test_line_count = 12 ours && numbers_close 1e-7 trace ours
'

if ! have_python_modules "numpy, h5py"; then
	test_skip 'sw-qkdrift against numpy' 'python3-numpy or python3-h5py not installed'
	test_done
fi

test_expect_success 'sw-qkdrift = numpy (float64) on the fixture and on runs with multipliers, QK-norm and scale designs' '
	sw-train --data "$CORPUS" --out col $SMALL --batch 4 --steps 8 --multipliers col --trace "" >/dev/null &&
	sw-train --data "$CORPUS" --out hgdp $SMALL --batch 4 --steps 8 --scale-design attn=hg+dp --trace "" >/dev/null &&
	sw-train --data "$CORPUS" --out dp $SMALL --batch 4 --steps 8 --scale-design dp --trace "" >/dev/null &&
	sw-train --data "$CORPUS" --out scalar $SMALL --batch 4 --steps 8 --multipliers scalar --trace "" >/dev/null &&
	sw-train --data "$CORPUS" --out qkn $SMALL --batch 4 --steps 8 --qk-norm --multipliers row --trace "" >/dev/null &&
	for f in "$FIX/tiny.h5" col/ckpt-000008.h5 scalar/ckpt-000008.h5 qkn/ckpt-000008.h5 \
		hgdp/ckpt-000008.h5 dp/ckpt-000008.h5 sweep/lr0.01-b8/ckpt-000032.h5; do
		"$PY" "$REF" "$f" >expect &&
		sw-qkdrift "$f" >qk && sed 1d qk | cut -f4- >got &&
		numbers_close 1e-6 expect got || { echo "$f differs"; exit 1; }
	done &&
	sw-qkdrift qkn/ckpt-000008.h5 >qk && grep -q "	qk_norm_gains	" qk &&
	sw-qkdrift col/ckpt-000008.h5 >qk && grep -q "	matrices	.*	.*	.*	.*	[0-9.e-]*	[0-9.e-]*	[0-9.e-]*	[0-9.e-]*$" qk
'

test_done
