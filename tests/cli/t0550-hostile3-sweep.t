#!/bin/sh
# Hostile sweeps (the third round, findings A, B and J): a sweep directory
# from a stranger is run only as sw-sweep writes it (a command file whose
# --out, --trace, --resume, --force, --data, values or options are not
# sw-sweep's is refused, exit 65, one line), nothing in it is followed
# through a symbolic link (a run's log, its directory, its command file,
# the sweep file: 65), and a sweep's values and common options are
# checked by sw-train's own parser when it is made (64 at once, the same
# message as sw-train's). The stranger and link cases check, by their
# checksums, that nothing outside the sweep directory changed: a notes
# file, a .bashrc, a key, another run's checkpoints and trace.
. "$(dirname "$0")/../lib/tap.sh"

TRAIN="--data $FIX/corpus.txt --d-model 16 --n-layers 1 --n-heads 2 --seq-len 16 --batch 2 --steps 2 --eval-every 0 --threads 1"

# snap FILE: every file outside the sweep (names and checksums)
snap() {
	(find home other -type f | LC_ALL=C sort | xargs md5sum) >"$1"
}

# fresh: the sweep as sw-sweep wrote it, nothing run
fresh() {
	rm -rf sw && cp -R pristine sw
}

# refused WHAT: run 0 of the sweep is refused, exit 65, the one line
# saying WHAT of its command file; nothing ran, nothing outside changed
refused() {
	test_expect_code 65 sw-sweep --run sw 0 >out 2>err &&
	echo "sw-sweep: sw: sw/lr1e-3/command: not as sw-sweep writes it: $1" >expect &&
	test_cmp expect err && test_line_count = 0 out &&
	test ! -e sw/lr1e-3/ckpt-000002.h5 && test ! -e sw/lr1e-3.log &&
	snap after && test_cmp before after
}

# edit FILE SED: FILE edited in place by the sed script
edit() {
	sed "$2" "$1" >edited && mv edited "$1"
}

test_expect_success 'setup: decoys outside the sweep, a sweep of two runs not run yet' '
	mkdir -p home/.ssh &&
	echo "my notes" >home/notes.txt && echo "alias ll=ls" >home/.bashrc &&
	echo "PRIVATE KEY" >home/.ssh/id_ed25519 &&
	sw-train $TRAIN --out other >o && test -e other/ckpt-000002.h5 && test -e other/trace.h5 &&
	sw-sweep --out pristine --lr 1e-3,2e-3 --dry-run -- $TRAIN >st &&
	edit pristine/lr1e-3/command "s|^pristine/|sw/|" && edit pristine/lr2e-3/command "s|^pristine/|sw/|" &&
	snap before && test_line_count = 5 before
'

# ---- A: a command not as sw-sweep writes it ------------------------------

test_expect_success 'A: the sweep as written runs (by its path, and by its full path as a Slurm task does)' '
	fresh &&
	sw-sweep --run sw 0 >out 2>err && test -e sw/lr1e-3/ckpt-000002.h5 &&
	sw-sweep --run "$PWD/sw" 1 >out 2>err && test -e sw/lr2e-3/ckpt-000002.h5 &&
	snap after && test_cmp before after
'

test_expect_success 'A: --out edited to another run: refused, its checkpoints kept' '
	fresh && edit sw/lr1e-3/command "s|^sw/lr1e-3\$|other|" &&
	refused "--out other is not its run'"'"'s directory sw/lr1e-3"
'

test_expect_success 'A: --out edited to a path through the run back out: refused' '
	fresh && edit sw/lr1e-3/command "s|^sw/lr1e-3\$|sw/lr1e-3/../../other|" &&
	refused "--out sw/lr1e-3/../../other is not its run'"'"'s directory sw/lr1e-3"
'

test_expect_success 'A: --trace ~/notes.txt added: refused, the notes kept' '
	fresh && printf -- "--trace\nhome/notes.txt\n" >>sw/lr1e-3/command &&
	refused "--trace home/notes.txt: each run'"'"'s trace is its RUN/trace.h5 (--trace '"''"' for none)"
'

test_expect_success 'A: --data a key with --save-grads: refused, no key in a checkpoint' '
	fresh && printf -- "--data\nhome/.ssh/id_ed25519\n--save-grads\n" >>sw/lr1e-3/command &&
	refused "--data home/.ssh/id_ed25519 is not the sweep'"'"'s (its sweep.tsv: $FIX/corpus.txt)"
'

test_expect_success 'A: --force or --resume of its own: refused' '
	fresh && printf -- "--force\n" >>sw/lr1e-3/command &&
	refused "--force is sw-sweep'"'"'s to set, not a sw-train option here" &&
	fresh && printf -- "--resume\nother/ckpt-000002.h5\n" >>sw/lr1e-3/command &&
	refused "--resume is sw-sweep'"'"'s to set, not a sw-train option here"
'

test_expect_success 'A: an option sw-train does not know, one abbreviated, an operand: refused' '
	fresh && printf -- "--bogus\n" >>sw/lr1e-3/command &&
	refused "'"'"'--bogus'"'"' is not a sw-train option (each in full: --name VALUE)" &&
	fresh && printf -- "--tra\nhome/notes.txt\n" >>sw/lr1e-3/command &&
	refused "'"'"'--tra'"'"' is not a sw-train option (each in full: --name VALUE)" &&
	fresh && printf -- "home/notes.txt\n" >>sw/lr1e-3/command &&
	refused "'"'"'home/notes.txt'"'"' is not a sw-train option (each in full: --name VALUE)"
'

test_expect_success 'A: a value sw-train refuses, a point or a length not its row'"'"'s: refused' '
	fresh && edit sw/lr1e-3/command "/^--batch\$/{n;s/.*/1e1/}" &&
	refused "--batch: '"'"'1e1'"'"' is not an integer in 1..65536" &&
	fresh && edit sw/lr1e-3/command "s/^1e-3\$/5e-1/" &&
	refused "--lr 5e-1 is not the run'"'"'s (its sweep.tsv: 1e-3)" &&
	fresh && edit sw/lr1e-3/command "/^--steps\$/{n;s/.*/200000/}" &&
	refused "--steps 200000 is not the run'"'"'s length (its sweep.tsv: 2)"
'

test_expect_success 'A: a sweep file of an older sw-sweep (no data column): read, not run; made again, run' '
	fresh && cut -f1-4 pristine/sweep.tsv >sw/sweep.tsv &&
	sw-sweep --status sw >status && test_line_count = 3 status &&
	test_expect_code 65 sw-sweep --run sw 0 >out 2>err &&
	test_line_count = 1 err &&
	grep -q "^sw-sweep: sw: sw/sweep.tsv: from an older sw-sweep, without the data column" err &&
	test ! -e sw/lr1e-3/ckpt-000002.h5 &&
	sw-sweep --out sw --lr 1e-3,2e-3 -- $TRAIN >out 2>err &&
	test_cmp pristine/sweep.tsv sw/sweep.tsv &&
	test -e sw/lr1e-3/ckpt-000002.h5 && test -e sw/lr2e-3/ckpt-000002.h5 &&
	snap after && test_cmp before after
'

test_expect_success 'A: the sweep file and a command both edited to a key: the sweep made again refuses it (73)' '
	fresh && edit sw/sweep.tsv "s|$FIX/corpus.txt\$|home/.ssh/id_ed25519|" &&
	edit sw/lr1e-3/command "s|^$FIX/corpus.txt\$|home/.ssh/id_ed25519|" &&
	test_expect_code 73 sw-sweep --out sw --lr 1e-3,2e-3 -- $TRAIN >out 2>err &&
	echo "sw-sweep: sw: holds another sweep (its sweep.tsv differs)" >expect && test_cmp expect err &&
	test ! -e sw/lr1e-3/ckpt-000002.h5 && test ! -e sw/lr2e-3/ckpt-000002.h5 &&
	snap after && test_cmp before after
'

# ---- B: symbolic links in the sweep -----------------------------------------

test_expect_success 'B: RUN.log a link to ~/.bashrc: refused, the .bashrc kept' '
	fresh && ln -s ../home/.bashrc sw/lr1e-3.log &&
	test_expect_code 65 sw-sweep --run sw 0 >out 2>err &&
	echo "sw-sweep: sw: sw/lr1e-3.log: a symbolic link, not the run'"'"'s log (not followed)" >expect &&
	test_cmp expect err && test ! -e sw/lr1e-3/ckpt-000002.h5 &&
	snap after && test_cmp before after
'

test_expect_success 'B: RUN.log a FIFO: refused at once, not waited on' '
	fresh && mkfifo sw/lr1e-3.log &&
	test_expect_code 65 timeout 60 sw-sweep --run sw 0 >out 2>err &&
	echo "sw-sweep: sw: sw/lr1e-3.log: not a regular file, where the run'"'"'s log goes" >expect &&
	test_cmp expect err && test ! -e sw/lr1e-3/ckpt-000002.h5
'

test_expect_success 'B: a run directory that is a link to another run: refused (run, status, the sweep again)' '
	fresh && rm -r sw/lr1e-3 && ln -s ../other sw/lr1e-3 &&
	echo "sw-sweep: sw: sw/lr1e-3: a symbolic link, not a run directory of the sweep (not followed)" >expect &&
	test_expect_code 65 sw-sweep --run sw 0 >out 2>err && test_cmp expect err &&
	test_expect_code 65 sw-sweep --status sw >out 2>err && test_cmp expect err &&
	test_expect_code 65 sw-sweep --out sw --lr 1e-3,2e-3 -- $TRAIN >out 2>err && test_cmp expect err &&
	test ! -e sw/lr2e-3/ckpt-000002.h5 &&
	snap after && test_cmp before after
'

test_expect_success 'B: a run directory that is a file: refused' '
	fresh && rm -r sw/lr1e-3 && echo x >sw/lr1e-3 &&
	test_expect_code 65 sw-sweep --run sw 0 >out 2>err &&
	echo "sw-sweep: sw: sw/lr1e-3: not a directory, where a run of the sweep goes" >expect && test_cmp expect err
'

test_expect_success 'B: a command file or the sweep file that is a link: refused' '
	fresh && rm sw/lr1e-3/command && ln -s ../../home/notes.txt sw/lr1e-3/command &&
	test_expect_code 65 sw-sweep --run sw 0 >out 2>err &&
	echo "sw-sweep: sw: sw/lr1e-3/command: a symbolic link, not a file of the sweep (not followed)" >expect &&
	test_cmp expect err &&
	test_expect_code 65 sw-sweep --out sw --lr 1e-3,2e-3 --dry-run -- $TRAIN >out 2>err && test_cmp expect err &&
	fresh && mv sw/sweep.tsv elsewhere.tsv && ln -s ../elsewhere.tsv sw/sweep.tsv &&
	test_expect_code 65 sw-sweep --run sw 0 >out 2>err &&
	echo "sw-sweep: sw: sw/sweep.tsv: a symbolic link, not a file of the sweep (not followed)" >expect &&
	test_cmp expect err && test ! -e sw/lr1e-3/ckpt-000002.h5 &&
	snap after && test_cmp before after
'

# ---- J: one parser for sw-train and sw-sweep -----------------------------

# a usage error's message is its first line, before the synopsis
test_expect_success 'J: a swept value sw-train refuses: 64 at once, sw-train'"'"'s own message' '
	for ov in "lr 1e-310" "batch 1e1" "batch 4.0" "wd -1" "d-model 1" "lr 2e3"; do
		o=${ov% *} v=${ov#* } &&
		test_expect_code 64 sw-train --data x --out y --$o $v >out 2>err &&
		sed -n "1s/^sw-train: /sw-sweep: /p" err >expect &&
		test_expect_code 64 sw-sweep --out j --$o $v -- --data x >out 2>err &&
		sed -n 1p err >first && test_cmp expect first && test ! -e j || return 1
	done &&
	test_expect_code 64 sw-sweep --out j --lr 1e-310 -- --data x >out 2>err &&
	sed -n 1p err >first && echo "sw-sweep: --lr: '"'"'1e-310'"'"' is not a number in 0..1000" >expect &&
	test_cmp expect first
'

test_expect_success 'J: --tokens 1e4, a value given twice: 64' '
	test_expect_code 64 sw-sweep --out j --tokens 1e4 -- $TRAIN >out 2>err &&
	sed -n 1p err >first &&
	echo "sw-sweep: --tokens: '"'"'1e4'"'"' is not an integer in 1..1000000000000000" >expect &&
	test_cmp expect first && test ! -e j &&
	test_expect_code 64 sw-sweep --out j --lr 1e-3,0.001 -- $TRAIN >out 2>err &&
	sed -n 1p err >first && echo "sw-sweep: --lr: 0.001 given twice (as 1e-3)" >expect &&
	test_cmp expect first && test ! -e j
'

test_expect_success 'J: a common option sw-train refuses: 64 at creation, sw-train'"'"'s message' '
	for ov in "batch 4.0" "beta1 2" "seed -1" "wd-mode none" "optimizer sgd"; do
		o=${ov% *} v=${ov#* } &&
		test_expect_code 64 sw-train --data x --out y --$o $v >out 2>err &&
		sed -n "1s/^sw-train: /sw-sweep: /p" err >expect &&
		test_expect_code 64 sw-sweep --out j --lr 1e-3 -- --data x --$o $v >out 2>err &&
		sed -n 1p err >first && test_cmp expect first && test ! -e j || return 1
	done
'

test_expect_success 'J: options that exclude each other, a point sw-train refuses: 64 at creation' '
	test_expect_code 64 sw-sweep --out j --lr 1e-3 -- --data x --wd-scaling sqrt >out 2>err &&
	sed -n 1p err >first &&
	echo "sw-sweep: --wd-scaling scales from a base width: give --width-base" >expect &&
	test_cmp expect first && test ! -e j &&
	test_expect_code 64 sw-sweep --out j --d-model 16,30 -- --data x --n-heads 4 >out 2>err &&
	sed -n 1p err >first &&
	echo "sw-sweep: run d30: --d-model 30 is not a multiple of --n-heads 4 (or give --head-dim)" >expect &&
	test_cmp expect first && test ! -e j
'

test_expect_success 'J: sw-sweep'"'"'s own rules: --trace, an abbreviation, an operand: 64' '
	test_expect_code 64 sw-sweep --out j --lr 1e-3 -- $TRAIN --trace home/notes.txt >out 2>err &&
	sed -n 1p err >first &&
	echo "sw-sweep: --trace home/notes.txt: each run'"'"'s trace is its RUN/trace.h5 (--trace '"''"' for none)" >expect &&
	test_cmp expect first && test ! -e j &&
	test_expect_code 64 sw-sweep --out j --lr 1e-3 -- $TRAIN --ste 5 >out 2>err &&
	sed -n 1p err >first &&
	echo "sw-sweep: '"'"'--ste'"'"' is not a sw-train option (each in full: --name VALUE)" >expect &&
	test_cmp expect first && test ! -e j &&
	test_expect_code 64 sw-sweep --out j --lr 1e-3 -- $TRAIN extra >out 2>err &&
	sed -n 1p err >first &&
	echo "sw-sweep: '"'"'extra'"'"' is not a sw-train option (each in full: --name VALUE)" >expect &&
	test_cmp expect first && test ! -e j
'

test_expect_success 'J: what sw-train takes, sw-sweep takes: --wd 0, --trace '"''"', --name=VALUE' '
	sw-sweep --out ok --wd 0,0.1 -- $TRAIN --trace "" --seed=3 >out 2>err &&
	test -e ok/wd0/ckpt-000002.h5 && test -e ok/wd0.1/ckpt-000002.h5 && test ! -e ok/wd0/trace.h5 &&
	h5dump -a /optim/seed ok/wd0/ckpt-000002.h5 >a && grep -q "(0): 3\$" a
'

test_done
