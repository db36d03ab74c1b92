#!/bin/sh
# make demo in miniature (demo/demo.sh with SW_DEMO_TINY=1: the committed
# corpus, tiny models, seconds): the whole job runs through every tool and
# every figure kind, and a rerun reuses what is there.
. "$(dirname "$0")/../lib/tap.sh"

if ! command -v gnuplot >/dev/null 2>&1; then
	test_skip 'the miniature demo' 'gnuplot not installed'
	test_done
fi

KINDS="training residual norms sharpness sharpness-steps sharpness-hist spectrum
	spectrum-normalized esd esd-layers hessian eos qkdrift transfer transfer-fits"

test_expect_success 'setup: the miniature demo runs to the end (out/, read below)' '
	SW_DEMO_TINY=1 SW_DEMO_OUT=out sh "$SW_TOP/demo/demo.sh" "$SW_BIN" >log 2>err &&
	grep -q "^== done in" log
'

test_expect_success 'every figure kind: a PNG of sane size' '
	for k in $KINDS; do
		test "$(od -A n -t x1 -N 4 out/$k.png)" = " 89 50 4e 47" &&
		size=$(od -A n -t u1 -j 16 -N 8 out/$k.png |
			awk "{ print \$3 * 256 + \$4, \$7 * 256 + \$8 }") &&
		set -- $size && test "$1" -ge 400 && test "$2" -ge 300 || {
			echo "$k: bad PNG"; exit 1; }
	done
'

test_expect_success 'every table beside its figure, with a header and rows' '
	for k in $KINDS params spectrum-summary spectrum-fit qkdrift-drift sharpness-ratios; do
		test $(wc -l <out/$k.tsv) -ge 2 || { echo "$k.tsv: empty"; exit 1; }
	done
'

test_expect_success 'the tokenizer, the main run, both sweeps' '
	test -s out/tokenizer.bpe && test -s out/fortunes.tok &&
	test -s out/main/ckpt-000040.h5 && test -s out/main/trace.h5 &&
	test $(ls out/sweep-lr-batch/*/ckpt-*.h5 | wc -l) = 12 &&
	test $(ls out/sweep-lr-wd/*/ckpt-000030.h5 | wc -l) = 8 &&
	test -s out/hf/config.json && test -s out/hf/model.safetensors && test -s out/hf-back.h5 &&
	grep -q "sw-convert: out/hf (Hugging Face safetensors) and back: every norm identical" log
'

test_expect_success 'progress: each training phase its expected duration, a line per evaluation' '
	grep -q "^== training: .*; expected [0-9]* s (at " log &&
	grep -q "^== an lr x batch sweep: .*; expected [0-9]* s (at " log &&
	grep -q "^== an lr x wd x width sweep: .*; expected [0-9]* s (at " log &&
	grep "^sw-train: out/main: step" err >main && sed "s/  .*//" main >steps &&
	printf "sw-train: out/main: step %s/40\n" 4 8 12 16 20 24 28 32 36 40 >expect && test_cmp expect steps &&
	grep -c "tok/s  elapsed [0-9]*s  ETA [0-9]*s" main >n && echo 10 >expect && test_cmp expect n &&
	grep -c "^sweep: [a-z0-9.-]* done, [0-9]* of [0-9]* runs (at " log >n && echo 12 >expect && test_cmp expect n &&
	grep -q "^sweep: [a-z0-9.-]* done, 4 of 4 runs (at " log && grep -q "^sweep: [a-z0-9.-]* done, 8 of 8 runs (at " log
'

test_expect_success 'a rerun trains nothing again' '
	SW_DEMO_TINY=1 SW_DEMO_OUT=out sh "$SW_TOP/demo/demo.sh" "$SW_BIN" >log2 2>err &&
	! grep -q "^== training" log2 && ! grep -q "^== an lr" log2 && grep -q "^== done in" log2
'

test_expect_success 'demo/spread.sh: the findings over two seeds, seed 1 the demo above' '
	mkdir spr && ln -s ../out spr/seed1 &&
	SW_DEMO_TINY=1 SW_SPREAD_OUT=spr SW_SPREAD_SEEDS="1 2" sh "$SW_TOP/demo/spread.sh" "$SW_BIN" \
		>spread 2>err &&
	# exact: the table spread.sh wrote and the copy it printed
	test_cmp spr/spread.tsv spread &&
	cut -f1 spread >got &&
	printf "%s\n" quantity val_loss S_emb S_qk S_ffn S_vo S_norm S_out principle_holds_ckpts \
		principle_holds_from_step out_norm out_norm_folded sigma_max_down1 \
		transfer_log2_norm_spread transfer_lr_exponent >expect &&
	test_cmp expect got &&
	head -n 1 spread >got && printf "quantity\tseed1\tseed2\tmean\tmin\tmax\n" >expect && test_cmp expect got &&
	# exact: spread.sh copies seed 1 S_emb from out/sharpness.tsv as text
	awk -F"\t" "\$3 == \"emb\" { print \$5 }" out/sharpness.tsv >expect &&
	awk -F"\t" "\$1 == \"S_emb\" { print \$2 }" spread >got && test_cmp expect got &&
	# mean, min and max printed to 6 digits (%.6g): 1e-5 relative
	awk -F"\t" "function off(x, y) { d = x - y; return (d < 0 ? -d : d) > 1e-5 * (y < 0 ? -y : y) }
		NR > 1 && \$1 == \"val_loss\" && \$2 == \$3 { print \"seed 2 trained the same run\"; bad = 1 }
		NR > 1 { a = \$2 + 0; b = \$3 + 0; lo = a < b ? a : b; hi = a < b ? b : a
			if (off(\$4, (a + b) / 2) || off(\$5, lo) || off(\$6, hi)) { print \"bad row: \" \$0; bad = 1 } }
		END { exit bad }" spread
'

test_done
