#!/bin/sh
# make wd-study's pipeline, in miniature (STUDY_TINY=1: the committed
# corpus, widths 16 and 32, seconds): the runs train under the width rule
# they are filed under, every table is made from the runs (losses from the
# traces, optima and transfer from those losses, the steady-state
# selection from the lr and wd, the top singular values from the
# checkpoints' matrices, recomputed here with numpy), and the figures are
# drawn.
. "$(dirname "$0")/../lib/tap.sh"

if ! have_python_modules "numpy, h5py"; then
	test_skip 'wd-study pipeline' 'python3-numpy or python3-h5py not installed'
	test_done
fi

test_expect_success 'the study in miniature runs to its end' '
	STUDY_TINY=1 STUDY_OUT=study sh "$SW_TOP/demo/wd-study.sh" "$SW_BIN" >log 2>&1 ||
		{ cat log; false; }
'

# runs.tsv: seeds 1, 2 x (sqrt: 2 widths, fixed: the base width's runs
# again and width 32) x 2 lr x 2 wd
test_expect_success 'runs.tsv: every run, trained with the lr and wd its rule gives at its width' '
	test_line_count = 33 study/runs.tsv &&
	"$PY" -c "
import h5py
rows = [l.split(\"\t\") for l in open(\"study/runs.tsv\").read().split(\"\n\")[1:] if l]
for rule, seed, d, lr, wd, run in rows:
    d, lr, wd = int(d), float(lr), float(wd)
    with h5py.File(run + \"/ckpt-000040.h5\", \"r\") as f:
        assert f[\"config\"].attrs[\"d_model\"] == d, run
        up = f[\"params/model.layers.0.mlp.up_proj.weight\"].attrs
        emb = f[\"params/model.embed_tokens.weight\"].attrs
        want_wd = wd * ((d / 16) ** 0.5 if rule == \"sqrt\" else 1)
        assert abs(up[\"lr\"] - lr * 16 / d) < 1e-12 and abs(up[\"wd\"] - want_wd) < 1e-12, (run, up[\"lr\"], up[\"wd\"])
        assert abs(emb[\"lr\"] - lr) < 1e-12 and emb.get(\"wd\", 0) == 0, run
"
'

test_expect_success 'terminal.tsv: each run s loss is its trace s at the last step' '
	test_line_count = 33 study/terminal.tsv &&
	run=$(awk -F"\t" "\$1 == \"fixed\" && \$2 == 2 && \$3 == 32 && \$4 == 0.01 && \$5 == 1 { print \$6 }" study/runs.tsv) &&
	sw-trace --series val_loss --every 40 "$run/trace.h5" >t &&
	awk -F"\t" "NR > 1 && \$1 == 40 { print \"fixed\t2\t32\t0.01\t1\t\" \$2 }" t >expect &&
	grep "^fixed	2	32	0.01	1	" study/terminal.tsv >actual &&
	test_cmp expect actual
'

test_expect_success 'mean, optima and transfer: recomputed from terminal.tsv' '
	"$PY" -c "
rows = [l.split(\"\t\") for l in open(\"study/terminal.tsv\").read().split(\"\n\")[1:] if l]
pts = {}
for rule, seed, d, lr, wd, v in rows:
    pts.setdefault((rule, d, lr, wd), []).append(float(v))
def table(p):
    return [l.split(\"\t\") for l in open(p).read().split(\"\n\")[1:] if l]
mean = {tuple(r[:4]): float(r[4]) for r in table(\"study/mean.tsv\")}
assert len(mean) == len(pts) == 16
for k, v in pts.items():
    assert abs(mean[k] - sum(v) / len(v)) < 6e-5, k
opt = {(r[0], r[1]): (r[2], r[3]) for r in table(\"study/optima.tsv\")}
for rule in (\"sqrt\", \"fixed\"):
    for d in (\"16\", \"32\"):
        best = min((m, k[2:]) for k, m in mean.items() if k[:2] == (rule, d))
        assert opt[(rule, d)] == best[1], (rule, d)
for r in table(\"study/transfer.tsv\"):
    rule, d, lr, wd, at, best, regret = r
    assert (lr, wd) == opt[(rule, \"16\")]
    assert abs(float(at) - mean[(rule, d, lr, wd)]) < 1e-9
    assert abs(float(regret) - (float(at) - float(best))) < 2e-4, r
"
'

test_expect_success 'the sigma fit: over the steady-state runs only, every role' '
	"$PY" -c "
rows = [l.split(\"\t\") for l in open(\"study/runs.tsv\").read().split(\"\n\")[1:] if l]
want = sorted(set(run + \"/ckpt-000040.h5\" for rule, s, d, lr, wd, run in rows
               if float(lr) * 16 / int(d) * float(wd) * ((int(d) / 16) ** 0.5 if rule == \"sqrt\" else 1) * 40 >= 0.1))
got = open(\"study/steady.txt\").read().split()
assert got == want and len(got) > 4, (got, want)
fit = [l.split(\"\t\") for l in open(\"study/fit.tsv\").read().split(\"\n\")[1:] if l]
assert sorted(set(r[0] for r in fit)) == sorted([\"q\", \"k\", \"v\", \"o\", \"gate\", \"up\", \"down\"])
assert all(int(r[2]) == len(got) for r in fit)
"
'

test_expect_success 'alignment.tsv: the geometric mean of the hidden matrices top singular values (numpy)' '
	"$PY" -c "
import h5py, numpy as np
rows = [l.split(\"\t\") for l in open(\"study/runs.tsv\").read().split(\"\n\")[1:] if l]
opt = {r[0]: (r[2], r[3]) for r in (l.split(\"\t\") for l in open(\"study/optima.tsv\").read().split(\"\n\")[1:] if l) if r[1] == \"16\"}
hidden = (\"q_proj\", \"k_proj\", \"v_proj\", \"o_proj\", \"gate_proj\", \"up_proj\", \"down_proj\")
for r in (l.split(\"\t\") for l in open(\"study/alignment.tsv\").read().split(\"\n\")[1:] if l):
    rule, d, sigma, n = r
    logs = []
    for rr, s, dd, lr, wd, run in rows:
        if rr != rule or dd != d or (lr, wd) != opt[rule]: continue
        with h5py.File(run + \"/ckpt-000040.h5\", \"r\") as f:
            for name in f[\"params\"]:
                if name.split(\".\")[-2] in hidden:
                    logs.append(np.log(np.linalg.svd(f[\"params\"][name][()].astype(np.float64), compute_uv=False)[0]))
    assert int(n) == len(logs) == 14, r
    assert abs(float(sigma) - np.exp(np.mean(logs))) < 1e-4 * float(sigma), (r, np.exp(np.mean(logs)))
"
'

test_expect_success 'the figures: each rule s spectra across widths, PNGs' '
	printf "\211PNG\r\n\032\n" >expect &&
	head -c 8 study/wd-spectra-sqrt.png >magic && cmp magic expect &&
	head -c 8 study/wd-spectra-fixed.png >magic && cmp magic expect &&
	cut -f1 study/spectrum-sqrt.tsv >files && sort -u files >distinct && test_line_count = 3 distinct
'

test_done
