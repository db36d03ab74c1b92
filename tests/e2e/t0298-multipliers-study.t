#!/bin/sh
# make multipliers-study's pipeline, in miniature (STUDY_TINY=1: the
# committed corpus, a tiny model, seconds): the learning rates are each
# optimizer's best, every table is made from the runs (losses from the
# traces, gains from those losses, the equilibrium from the traces'
# weight and multiplier series, fitted again here with numpy, the heads'
# spread from sw-qkdrift), and the figure is drawn.
. "$(dirname "$0")/../lib/tap.sh"

if ! have_python_modules numpy; then
	test_skip 'multipliers-study pipeline' 'python3-numpy not installed'
	test_done
fi

test_expect_success 'the study in miniature runs to its end' '
	STUDY_TINY=1 STUDY_OUT=study sh "$SW_TOP/demo/multipliers-study.sh" "$SW_BIN" >log 2>&1 ||
		{ cat log; false; }
'

test_expect_success 'the learning rate: each optimizer s best, used by its runs' '
	test_line_count = 5 study/tune-loss.tsv &&
	for opt in adamw muon; do
		grep "^$opt	" study/tune-loss.tsv | sort -t "	" -k3,3g >sorted &&
		best=$(sed -n 1p sorted | cut -f2) &&
		awk -v b="$best" "p == \"--lr\" && \$0 == b { f = 1 } { p = \$0 } END { exit !f }" \
			study/$opt-rowcol-s2/*/command || return 1
	done
'

test_expect_success 'terminal.tsv and gain.tsv: from the traces losses' '
	sw-trace --series val_loss --every 12 study/muon-scalar-s2/*/trace.h5 >t &&
	awk -F"\t" "NR > 1 && \$2 != \"\" { print \"muon\tscalar\t2\t\" \$1 \"\t\" \$2 }" t >expect &&
	grep "^muon	scalar	2	" study/curves-all.tsv >actual &&
	test_cmp expect actual &&
	"$PY" -c "
rows = [l.split(\"\t\") for l in open(\"study/curves-all.tsv\").read().split(\"\n\")[1:] if l]
loss = {(o, m, s, int(t)): float(v) for o, m, s, t, v in rows}
def table(p):
    return [l.split(\"\t\") for l in open(p).read().split(\"\n\")[1:] if l]
term = table(\"study/terminal.tsv\")
assert len(term) == 6
for o, m, mean, rng, n in term:
    v = [loss[(o, m, s, 120)] for s in (\"1\", \"2\")]
    assert abs(float(mean) - sum(v) / 2) < 6e-5 and abs(float(rng) - (max(v) - min(v))) < 6e-5, (o, m)
gain = table(\"study/gain.tsv\")
assert len(gain) == 2 * 2 * 10
for o, m, t, g, rng, n in gain:
    d = [loss[(o, \"none\", s, int(t))] - loss[(o, m, s, int(t))] for s in (\"1\", \"2\")]
    assert abs(float(g) - sum(d) / 2) < 6e-5 and abs(float(rng) - (max(d) - min(d))) < 6e-5, (o, m, t)
"
'

test_expect_success 'equilibrium: the traces weight RMS and multipliers at step 96, and the log-log slopes (numpy)' '
	sw-trace --series weight_rms,multiplier --every 12 study/eq-scalar-hi/*/trace.h5 >t &&
	"$PY" -c "
import numpy as np
lines = [l.split(\"\t\") for l in open(\"t\").read().split(\"\n\") if l]
h, row = lines[0], [r for r in lines[1:] if r[0] == \"96\"][0]
w = [float(v) for k, v in zip(h, row) if k.startswith(\"weight_rms.model.layers.\") and k.endswith(\"_proj.weight\")]
u = [abs(float(v)) for k, v in zip(h, row) if k.startswith(\"multiplier.model.layers.\")]
assert len(w) == 14 and len(u) == 14
eq = [l.split(\"\t\") for l in open(\"study/equilibrium.tsv\").read().split(\"\n\")[1:] if l]
r = [e for e in eq if e[0] == \"scalar\" and e[1] == \"0.02\"][0]
W, U = np.exp(np.mean(np.log(w))), np.exp(np.mean(np.log(u)))
assert abs(float(r[4]) - W) < 1e-5 * W and abs(float(r[5]) - U) < 1e-5 * U, (r, W, U)
fit = {l.split(\"\t\")[0]: l.split(\"\t\") for l in open(\"study/equilibrium-fit.tsv\").read().split(\"\n\")[1:] if l}
for m in (\"none\", \"scalar\"):
    pts = [e for e in eq if e[0] == m]
    x = np.log([float(e[3]) for e in pts])
    a = np.polyfit(x, np.log([float(e[4]) for e in pts]), 1)[0]
    b = np.polyfit(x, np.log([float(e[6]) for e in pts]), 1)[0]
    assert abs(float(fit[m][2]) - a) < 2e-3 and abs(float(fit[m][3]) - b) < 2e-3, (m, a, b, fit[m])
"
'

test_expect_success 'heads.tsv and drift.tsv: every optimizer and multipliers, every run' '
	test_line_count = 7 study/heads.tsv && test_line_count = 7 study/drift.tsv &&
	awk -F"\t" "NR > 1 && (\$4 != 2 || \$3 < 0) { bad = 1 } END { exit bad }" study/heads.tsv &&
	awk -F"\t" "NR > 1 && \$4 != 4 { bad = 1 } END { exit bad }" study/drift.tsv &&
	grep -c "^adamw	0	" study/drift.tsv >n && echo 2 >expect && test_cmp expect n &&
	awk "p == \"--mult-wd\" && \$0 == 0 { f = 1 } { p = \$0 } END { exit !f }" study/adamw-rowcol-nowd-s1/*/command
'

test_expect_success 'the figure: seed 1 s six curves, a PNG' '
	head -c 8 study/multipliers-curves.png >magic && printf "\211PNG\r\n\032\n" >expect && cmp magic expect &&
	cut -f3 study/curves.tsv >runs && sort -u runs >distinct && test_line_count = 7 distinct
'

test_done
