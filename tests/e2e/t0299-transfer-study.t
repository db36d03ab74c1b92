#!/bin/sh
# make transfer-study's pipeline, in miniature (STUDY_TINY=1: the committed
# corpus, d_model 16, seconds): every run trains with the optimizer, batch
# and lr of its place in the grid (each batch's lr window), B* is called
# bracketed exactly when it is not at the grid's edge, the fits "from the
# bracketed horizons" see those horizons' runs and no others (recomputed
# here with numpy from the per-horizon optima), and the side-by-side table
# is the summaries' rows.
. "$(dirname "$0")/../lib/tap.sh"

if ! have_python_modules "numpy, h5py"; then
	test_skip 'transfer-study pipeline' 'python3-numpy or python3-h5py not installed'
	test_done
fi

test_expect_success 'the study in miniature runs to its end' '
	STUDY_TINY=1 STUDY_OUT=study sh "$SW_TOP/demo/transfer-study.sh" "$SW_BIN" >log 2>&1 ||
		{ cat log; false; }
'

# the grids the script declares for STUDY_TINY, written again here:
# Scion batches 4, 8, 16, 3 lrs from 0.032 moving up x2 per batch doubling;
# Adam batches 1, 2, 4, 3 lrs from 0.004 at every batch
test_expect_success 'every run: the optimizer, batch and lr of its place in the grid' '
	"$PY" -c "
import glob, h5py
grid = {\"scion\": ([4, 8, 16], 0.032, 1), \"adamw\": ([1, 2, 4], 0.004, 0)}
for opt, (batches, lr0, shift) in grid.items():
    for k, b in enumerate(batches):
        want = sorted(lr0 * 2 ** (k * shift + i) for i in range(3))
        runs = sorted(glob.glob(\"study/%s/sweep-b%d/lr*-b%d-t8192\" % (opt, b, b)))
        assert len(runs) == 3, (opt, b, runs)
        got = []
        for r in runs:
            ckpts = sorted(glob.glob(r + \"/ckpt-*.h5\"))
            assert len(ckpts) == 4, r       # every 2048 tokens to 8192
            with h5py.File(ckpts[-1], \"r\") as f:
                o = f[\"optim\"].attrs
                assert o[\"optimizer\"] == opt and o[\"batch_size\"] == b, r
                assert f.attrs[\"tokens\"] == 8192, r
                got.append(float(o[\"lr\"]))
        assert all(abs(g - w) < 1e-12 * w for g, w in zip(sorted(got), want)), (opt, b, got, want)
"
'

test_expect_success 'bracketed.tsv: B* bracketed exactly when not the grid s smallest or largest batch' '
	"$PY" -c "
def table(p):
    return [l.split(\"\t\") for l in open(p).read().split(\"\n\") if l]
for opt, edge in ((\"scion\", (\"4\", \"16\")), (\"adamw\", (\"1\", \"4\"))):
    t = table(\"study/%s/transfer.tsv\" % opt)
    c = {n: i for i, n in enumerate(t[0])}
    want = [[r[c[\"tokens\"]], r[c[\"batch\"]], \"no\" if r[c[\"batch\"]] in edge else \"yes\"] for r in t[1:]]
    assert table(\"study/%s/bracketed.tsv\" % opt)[1:] == want, opt
"
'

test_expect_success 'the fits from the bracketed horizons: those horizons runs only, the exponent and mean norm they give' '
	"$PY" -c "
import numpy as np
def table(p):
    return [l.split(\"\t\") for l in open(p).read().split(\"\n\") if l]
fitted = 0
for opt in (\"scion\", \"adamw\"):
    yes = [r[0] for r in table(\"study/%s/bracketed.tsv\" % opt)[1:] if r[2] == \"yes\"]
    full, sub = table(\"study/%s/table.tsv\" % opt), table(\"study/%s/table-bracketed.tsv\" % opt)
    ti = full[0].index(\"tokens\")
    assert sub == [full[0]] + [r for r in full[1:] if r[ti] in yes], opt
    s = table(\"study/%s/summary-bracketed.tsv\" % opt)
    if len(yes) < 2:
        assert s == [], opt
        continue
    fitted += 1
    t = table(\"study/%s/transfer.tsv\" % opt)
    c = {n: i for i, n in enumerate(t[0])}
    opt_rows = [r for r in t[1:] if r[c[\"tokens\"]] in yes]
    D = np.log2([float(r[c[\"tokens\"]]) for r in opt_rows])
    B = np.log2([float(r[c[\"batch\"]]) for r in opt_rows])
    slope = np.polyfit(D, B, 1)[0]
    norm = np.mean([float(r[c[\"log2_out_norm\"]]) for r in opt_rows])
    sc = {n: i for i, n in enumerate(s[0])}
    all_row = [r for r in s[1:] if r[0] == \"all\"][0]
    assert int(all_row[sc[\"groups\"]]) == len(yes), opt
    # the table carries 9 significant digits; the parabola refit from it
    # moves the norm by less than 1e-6
    assert abs(float(all_row[sc[\"batch_exponent\"]]) - slope) < 1e-9, (opt, all_row, slope)
    assert abs(float(all_row[sc[\"log2_out_norm_mean\"]]) - norm) < 1e-6, (opt, all_row, norm)
assert fitted >= 1
"
'

test_expect_success 'optimizers.tsv: each optimizer s summary, side by side' '
	"$PY" -c "
def table(p):
    return [l.split(\"\t\") for l in open(p).read().split(\"\n\") if l]
side = table(\"study/optimizers.tsv\")
h = side[0]
assert [r[0] for r in side[1:]] == [\"scion\", \"adamw\"]
for r in side[1:]:
    s = table(\"study/%s/summary.tsv\" % r[0])
    sc = {n: i for i, n in enumerate(s[0])}
    a = [x for x in s[1:] if x[0] == \"all\"][0]
    for col, src in ((\"horizons\", \"groups\"), (\"log2_norm_mean\", \"log2_out_norm_mean\"),
                     (\"batch_exponent\", \"batch_exponent\"), (\"lr_exponent\", \"lr_exponent\")):
        assert r[h.index(col)] == a[sc[src]], (r[0], col)
    yes = [x for x in table(\"study/%s/bracketed.tsv\" % r[0])[1:] if x[2] == \"yes\"]
    assert int(r[h.index(\"B_bracketed_horizons\")]) == len(yes), r
"
'

test_expect_success 'the figures: each optimizer s transfer and fits, PNGs' '
	printf "\211PNG\r\n\032\n" >expect &&
	for o in scion adamw; do
		for f in transfer transfer-fits; do
			head -c 8 study/$o/$f.png >magic && cmp magic expect || return 1
		done
	done
'

test_done
