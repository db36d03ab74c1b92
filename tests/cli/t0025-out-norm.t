#!/bin/sh
# The output head's RMS->inf norm has one owner (lib/analysis/norms.c,
# norms_output_head): the trainer's trace, sw-norms and sw-transfer give
# the same number for the same weights, tied head or not. Exact: a trace
# row against the checkpoint row, computed by the same function on the
# same float32 weights on the same machine.
. "$(dirname "$0")/../lib/tap.sh"

# trace_out_norm RUN STEP: the trace's out_norm at STEP, as %.9g
trace_out_norm() {
	sw-trace --series out_norm "$1/trace.h5" >trace.tsv &&
	awk -F'\t' -v s="$2" '$1 == s { printf "%.9g\n", $2 }' trace.tsv
}

for tie in untied tied; do
	opt=
	[ $tie = tied ] && opt=--tie
	test_expect_success "setup: a run with the $tie head, checkpoints and trace rows at 10 and 20" '
		sw-train --data "$FIX/corpus.txt" --out run-$tie --steps 20 --ckpt-every 10 \
			--trace-every 10 --eval-every 0 --d-model 32 --n-layers 2 --batch 2 \
			--seq-len 16 --threads 1 $opt >/dev/null
	'
	test_expect_success "$tie head: the trace's out_norm is sw-norms' rms_to_inf at each checkpoint" '
		for s in 10 20; do
			sw-norms --role lm_head run-$tie/ckpt-0000$s.h5 >norms.tsv &&
			awk -F"\t" "\$6 == \"lm_head\" { print \$10 }" norms.tsv >expect &&
			trace_out_norm run-$tie $s >actual &&
			test_line_count = 1 expect && test_cmp expect actual || return 1
		done
	'
done

test_expect_success 'sw-transfer --table: out_norm and out_norm_folded are sw-norms rows' '
	sw-norms --role lm_head run-untied/ckpt-000020.h5 >norms.tsv &&
	awk -F"\t" "NR > 1 { print \$10 }" norms.tsv >expect &&
	sw-transfer --table run-untied/ckpt-000020.h5 >table.tsv &&
	awk -F"\t" "NR > 1 { print \$8; print \$9 }" table.tsv >actual &&
	test_line_count = 2 expect && test_cmp expect actual
'

test_done
