#!/bin/sh
# make blockwise-study's pipeline, in miniature (STUDY_TINY=1: the
# committed corpus, a one-layer model, seconds): the learning rate is
# AdamW's best at the shortest horizon, every table is made from
# the runs it trained (the terminal losses are the traces', the speedups
# interpolate those losses), Principle (1) is checked on every
# checkpoint, and the figure is drawn; then the same for the GPT-2 arm
# (sw-train --arch gpt2), in study-gpt2.
. "$(dirname "$0")/../lib/tap.sh"

test_expect_success 'the study in miniature runs to its end' '
	STUDY_TINY=1 STUDY_OUT=study sh "$SW_TOP/demo/blockwise-study.sh" "$SW_BIN" >log 2>&1 ||
		{ cat log; false; }
'

test_expect_success 'the learning rate: AdamW s best at the shortest horizon, used by both arms' '
	test_line_count = 3 study/tune-loss.tsv &&
	sed 1d study/tune-loss.tsv >losses && sort -t "	" -k2,2g losses >sorted && sed -n 1p sorted >best-line &&
	best=$(cut -f1 best-line) &&
	test -d "study/adamw-lr$best-s1" && test -d "study/blockwise-lr$best-s2" &&
	awk -v b="$best" "p == \"--lr\" && \$0 == b { f = 1 } { p = \$0 } END { exit !f }" \
		"study/blockwise-lr$best-s1/b4-t1280/command"
'

test_expect_success 'terminal.tsv: every optimizer, seed and horizon, the loss of its trace' '
	test_line_count = 13 study/terminal.tsv &&
	sw-trace --series val_loss --every 20 study/blockwise-lr*-s2/b4-t2560/trace.h5 >t &&
	awk -F"\t" "NR > 1 && \$1 == 40 { print \"blockwise\t2\t40\t\" \$2 }" t >expect &&
	grep "^blockwise	2	40	" study/terminal.tsv >actual &&
	test_cmp expect actual
'

test_expect_success 'speedup.tsv: per seed and horizon, interpolated in log steps between the losses' '
	test_line_count = 7 study/speedup.tsv &&
	"$PY" -c "
import math
rows = [l.split(\"\t\") for l in open(\"study/terminal.tsv\").read().split(\"\n\")[1:] if l]
loss = {(o, s, int(t)): float(v) for o, s, t, v in rows}
for l in open(\"study/speedup.tsv\").read().split(\"\n\")[1:]:
    if not l: continue
    seed, T, L, Tw, sp, bound = l.split(\"\t\"); T = int(T)
    assert abs(float(L) - loss[(\"adamw\", seed, T)]) < 1e-9, l
    w = sorted((t, v) for (o, s, t), v in loss.items() if o == \"blockwise\" and s == seed)
    if bound != \"=\": continue
    for (t0, v0), (t1, v1) in zip(w, w[1:]):
        if v1 <= float(L) < v0:
            x = math.exp(math.log(t0) + (math.log(t1) - math.log(t0)) * (v0 - float(L)) / (v0 - v1))
            assert abs(x - float(Tw)) < 1e-3 * x and abs(T / x - float(sp)) < 1e-3 * T / x, l
            break
    else:
        raise SystemExit(\"no bracket for \" + l)
"
'

test_expect_success 'principle.tsv: every checkpoint of every run checked' '
	test_line_count = 5 study/principle.tsv &&
	awk -F"\t" "NR > 1 && \$3 != 7 { bad = 1 } NR > 1 && (\$4 < 0 || \$4 > \$3) { bad = 1 } END { exit bad }" \
		study/principle.tsv
'

test_expect_success 'the figure: the longest runs curves, a PNG' '
	head -c 8 study/blockwise-curves.png >magic && printf "\211PNG\r\n\032\n" >expect && cmp magic expect &&
	cut -f3 study/curves.tsv >runs && sort -u runs >distinct && test_line_count = 5 distinct
'

test_expect_success 'the GPT-2 arm: its own tables, from runs of --arch gpt2' '
	test_line_count = 3 study-gpt2/tune-loss.tsv && test_line_count = 13 study-gpt2/terminal.tsv &&
	test_line_count = 7 study-gpt2/speedup.tsv && test_line_count = 5 study-gpt2/principle.tsv &&
	for cmd in study-gpt2/adamw-lr*-s1/b4-t1280/command study-gpt2/blockwise-lr*-s2/b4-t5120/command; do
		awk "p == \"--arch\" && \$0 == \"gpt2\" { f = 1 } { p = \$0 } END { exit !f }" "$cmd" || exit 1
	done &&
	h5dump -a /config/arch study-gpt2/adamw-lr*-s1/b4-t1280/ckpt-000020.h5 >arch &&
	grep -q "(0): \"gpt2\"" arch &&
	test_expect_code 1 cmp -s study/terminal.tsv study-gpt2/terminal.tsv &&
	head -c 8 study-gpt2/blockwise-curves.png >magic && printf "\211PNG\r\n\032\n" >expect && cmp magic expect
'

test_done
