#!/bin/sh
# What a new user met in the first hour (issue 60's friction list), each
# held to what the man pages now say: a resumed run keeps the options it
# recorded (sw-train(1) --resume), sw-train(1) lists every option of
# --help, the trace's seconds go on across a resume, the step of a
# torch.save({'model': ..., 'step': N}) file is read (scalewatch-format(5)).
. "$(dirname "$0")/../lib/tap.sh"

CORPUS=$FIX/corpus.txt
SMALL="--batch 4 --seq-len 16 --d-model 16 --n-layers 1 --n-heads 2 --threads 1"
RUN="--ckpt-every 2 --fisher-every 4 --eval-every 5 --val-fraction 0.2"

# the steps of DIR's checkpoints, one a line
ckpt_steps() {
	ls "$1" >"$2.ls" && sed -n 's/^ckpt-0*\([0-9][0-9]*\)\.h5$/\1/p' "$2.ls" >"$2"
}

# the steps of DIR's checkpoints that hold /fisher
fisher_steps() {
	: >"$2" &&
	for f in "$1"/ckpt-*.h5; do
		h5dump -n "$f" >"$2.objs" || return 1
		if grep -q " /fisher$" "$2.objs"; then
			s=${f##*/ckpt-} && s=${s%.h5} && echo "$s" | sed 's/^0*//' >>"$2"
		fi
	done
}

test_expect_success 'setup: a run of 20 steps, and the same run stopped after 10' '
	sw-train --data "$CORPUS" --out full $SMALL $RUN --steps 20 >out &&
	cp -r full half && rm half/ckpt-00001[2-9].h5 half/ckpt-000020.h5 &&
	ckpt_steps half steps && test_line_count = 5 steps
'

# without the record the resumed run checkpoints only at its end, writes
# no /fisher, splits the data 90:10 and so trains on other batches: bit
# for bit against the uninterrupted run (the same binary and --threads)
test_expect_success '--resume keeps --ckpt-every, --fisher-every, --eval-every, --val-fraction, and says so' '
	sw-train --data "$CORPUS" --out half --resume half/ckpt-000010.h5 --threads 1 >out 2>err &&
	echo "sw-train: half: --resume: as ckpt-000010.h5 records: --ckpt-every 2 --eval-every 5 --fisher-every 4 --val-fraction 0.2" >expect &&
	test_cmp expect err &&
	ckpt_steps half steps && printf "%s\n" 2 4 6 8 10 12 14 16 18 20 >expect && test_cmp expect steps &&
	fisher_steps half fs && printf "%s\n" 4 8 12 16 20 >expect && test_cmp expect fs &&
	cmp full/ckpt-000016.h5 half/ckpt-000016.h5 && cmp full/ckpt-000020.h5 half/ckpt-000020.h5
'

test_expect_success 'an option given again wins over the record, and is not said' '
	sw-train --data "$CORPUS" --out other --resume full/ckpt-000010.h5 --ckpt-every 5 \
		--fisher-every 0 >out 2>err &&
	echo "sw-train: other: --resume: as ckpt-000010.h5 records: --eval-every 5 --val-fraction 0.2" >expect &&
	test_cmp expect err &&
	ckpt_steps other steps && printf "%s\n" 15 20 >expect && test_cmp expect steps &&
	fisher_steps other fs && test_line_count = 0 fs
'

test_expect_success 'the record is in /optim_state, as scalewatch-format(5) says' '
	h5dump -A -g /optim_state full/ckpt-000020.h5 >attrs &&
	for a in ckpt_every eval_every eval_batches trace_every fisher_every save_grads val_fraction data_format; do
		grep -q "ATTRIBUTE \"$a\"" attrs || { echo "no $a"; return 1; }
	done
'

test_expect_success 'a recorded value out of its bounds: exit 65 naming it' '
	cp full/ckpt-000010.h5 bad.h5 &&
	if have_python_modules h5py; then
		"$PY" -c "import h5py; h5py.File(\"bad.h5\", \"r+\")[\"optim_state\"].attrs[\"eval_batches\"] = -3" &&
		test_expect_code 65 sw-train --data "$CORPUS" --out badrun --resume bad.h5 >out 2>err &&
		grep -q "^sw-train: bad.h5: /optim_state eval_batches: -3 is not in 1\.\.1048576$" err
	fi
'

# item 3: the first run's seconds made large by hand, so that a clock
# begun again at 0 cannot pass for one going on
if have_python_modules "h5py, numpy"; then
	test_expect_success 'the trace'"'"'s seconds go on from its last row across a resume' '
		sw-train --data "$CORPUS" --out clock $SMALL --steps 10 --trace-every 5 >out &&
		"$PY" -c "import h5py; f = h5py.File(\"clock/trace.h5\", \"r+\"); s = f[\"series/seconds\"]; s[:] = s[:] + 1000" &&
		sw-train --data "$CORPUS" --out clock --resume clock/ckpt-000010.h5 --steps 20 >out 2>err &&
		sw-trace --series seconds clock/trace.h5 >secs &&
		cut -f1 secs >steps && printf "%s\n" step 5 10 15 20 >expect && test_cmp expect steps &&
		awk "NR > 1 { if (\$2 < prev || \$2 < 1000) bad = 1; prev = \$2 } END { exit bad }" secs
	'
else
	test_skip 'the trace'"'"'s seconds go on from its last row across a resume' 'no python3-h5py'
fi

# item 2: --help and sw-train(1) name the same options
test_expect_success 'every option of sw-train --help is in sw-train(1), and no other' '
	sw-train --help >help &&
	grep -o -- "--[a-z0-9-]*" help | sed "s/^--//" | sort -u >in.help &&
	awk "/^\\.It Fl Fl/ { for (i = 1; i < NF; i++) if (\$i == \"Fl\" && \$(i + 1) == \"Fl\") print \$(i + 2) }" \
		"$SW_TOP/man/sw-train.1" | sed "s/Ns\$//" | sort -u >in.man &&
	test_cmp in.help in.man && grep -q "^fisher-every$" in.man
'

# item 5: a training script's torch.save, assembled opcode by opcode as
# fixtures/make-bad-pt.py does (no torch needed)
if have_python_modules zipfile; then
	test_expect_success 'setup: torch.save({"model": sd, KEY: N}) files' '
		cat >mk.py <<-\EOF &&
		import importlib.util, sys
		spec = importlib.util.spec_from_file_location("badpt", sys.argv[1])
		m = importlib.util.module_from_spec(spec)
		spec.loader.exec_module(m)
		sd = m.glob("collections", "OrderedDict") + b")R(" + m.uni("w") + m.W + b"u"
		for name, key, n in [("step", "step", 300), ("global", "global_step", 7),
		                     ("iteration", "iteration", 12), ("neg", "step", -1),
		                     ("float", "step", None)]:
		    v = m.num(n) if n is not None else b"G" + bytes(8)
		    pkl = b"\x80\x02}(" + m.uni("model") + sd + m.uni(key) + v + b"u."
		    m.archive(name + ".pt", [("archive/data.pkl", pkl), ("archive/data/0", m.W_DATA)])
		EOF
		"$PY" mk.py "$SW_TOP/fixtures/make-bad-pt.py" && test -f step.pt &&
		cp "$FIX/bad/pt/config.json" .
	'

	test_expect_success 'the step of a torch dict: step, global_step, iteration; tokens unknown' '
		sw-norms step.pt global.pt iteration.pt float.pt >out &&
		cut -f1-4 out >got &&
		printf "file\tstep\ttokens\tname\n" >want &&
		printf "step.pt\t300\t\tw\nglobal.pt\t7\t\tw\niteration.pt\t12\t\tw\nfloat.pt\t\t\tw\n" >>want &&
		test_cmp want got &&
		sw-norms --json step.pt >out.json &&
		grep -q "\"step\": 300, \"tokens\": null," out.json
	'

	test_expect_success 'a negative step: exit 65, one line' '
		test_expect_code 65 sw-norms neg.pt >out 2>err &&
		test_one_error sw-norms neg.pt && grep -q "the top dict.s step is negative" err
	'
fi

test_expect_success 'the README'"'"'s PyTorch file: its iter_num is the step' '
	sw-norms --role lm_head "$FIX/tiny-pt/ckpt.pt" >out &&
	cut -f2,3 out >got && printf "step\ttokens\n1200\t\n1200\t\n" >want && test_cmp want got
'

# item 4: the refusal says what is missing, not that the file cannot be
# resumed (nanoGPT's ckpt.pt holds AdamW's state, which is not read)
test_expect_success 'sw-hessian --preconditioned on a torch.save with an optimizer: one accurate line, exit 65' '
	LC_ALL=C tr -c "a-w" "x" <"$CORPUS" | LC_ALL=C tr "a-x" "\\000-\\027" >c24 &&
	test_expect_code 65 sw-hessian --data c24 --batch-tokens 16 --seq-len 16 --preconditioned \
		"$FIX/nanogpt/ckpt.pt" >out 2>err &&
	test_one_error sw-hessian "$FIX/nanogpt/ckpt.pt" &&
	grep -q "a PyTorch file.s optimizer state (torch.s exp_avg_sq) is not read$" err &&
	! grep -q "resumed" err
'

# item 6: a follower started before the run it follows; a watchdog kills
# it after 60 s, so a bug cannot hang the suite (a follower killed by it
# fails the test: its status is then not 0)
start_waiting() {
	sw-trace --follow --wait 60 --series loss "$1" >followed 2>follow-err &
	fpid=$!
	(sleep 60 && kill $fpid) >/dev/null 2>&1 &
	wpid=$!
}

test_expect_success 'sw-trace --follow --wait: waits for the trace to appear, then follows it to the end' '
	start_waiting late/trace.h5 &&
	sleep 0.5 && kill -0 $fpid &&
	sw-train --data "$CORPUS" --out late $SMALL --steps 30 >out &&
	wait $fpid; st=$?
	kill $wpid 2>/dev/null
	echo "follower exit $st" && test "$st" = 0 && test_line_count = 0 follow-err &&
	sw-trace --series loss late/trace.h5 >expect && test_cmp expect followed
'

test_expect_success 'without --wait a missing trace is exit 66 at once; with it, once the wait is over' '
	test_expect_code 66 sw-trace --follow nowhere/trace.h5 >out 2>err &&
	test_one_error sw-trace nowhere/trace.h5 &&
	test_expect_code 66 sw-trace --follow --wait 0.3 nowhere/trace.h5 >out 2>err &&
	test_one_error sw-trace nowhere/trace.h5 &&
	test_expect_code 64 sw-trace --wait 1 late/trace.h5 >out 2>err &&
	grep -q "give --follow" err
'

# item 7: the run directories of the runs above, as scalewatch(7) says
test_expect_success 'a run directory as an operand: its checkpoints in step order' '
	sw-norms --role lm_head full >dir.tsv &&
	sw-norms --role lm_head full/ckpt-*.h5 >glob.tsv && test_cmp glob.tsv dir.tsv &&
	cut -f1 dir.tsv | uniq >files && printf "file\n" >expect &&
	for s in 2 4 6 8 10 12 14 16 18 20; do
		printf "full/ckpt-%06d.h5\n" $s >>expect
	done &&
	test_cmp expect files &&
	echo full >names && sw-ls <names >ls-stdin.tsv && sw-ls full/ckpt-*.h5 >ls-glob.tsv &&
	test_cmp ls-glob.tsv ls-stdin.tsv
'

test_expect_success 'to sw-trace a run directory is its trace; a Hugging Face directory is read as before' '
	sw-trace --series loss full >dir.tsv && sw-trace --series loss full/trace.h5 >file.tsv &&
	test_cmp file.tsv dir.tsv && test_line_count -gt 2 dir.tsv &&
	sw-ls "$FIX/tiny-hf" >hf.tsv && test_line_count -gt 2 hf.tsv
'

test_expect_success 'a run directory without a checkpoint: exit 66, one line, the other operands read' '
	mkdir tonly && cp full/trace.h5 tonly/ &&
	test_expect_code 66 sw-norms --role lm_head tonly full/ckpt-000002.h5 >out 2>err &&
	test_one_error sw-norms tonly && grep -q "a run directory without a checkpoint yet" err &&
	test_line_count = 3 out
'

# item 8: the documents say the same of the GPU, and the README what
# docs/numerics.md holds
test_expect_success 'README, sw-train(1) and docs/cuda.md say alike that the GPU path ran twice' '
	grep -q "run on an H100 twice" "$SW_TOP/docs/cuda.md" &&
	grep -q "has run on an H100 twice" "$SW_TOP/README.md" &&
	grep -c "has run on GPU hardware twice" "$SW_TOP/man/sw-train.1" >n && echo 2 >expect && test_cmp expect n &&
	{ grep -n "GPU hardware once" "$SW_TOP/man/sw-train.1" "$SW_TOP/README.md" >once; test $? = 1; }
'

test_expect_success 'the README does not call docs/numerics.md every definition' '
	{ grep -n "numerics.md. gives each definition\|every quantity.s definition and paper" \
		"$SW_TOP/README.md" "$SW_TOP/docs/numerics.md" >claims; test $? = 1; }
'

test_done
