#!/bin/sh
# make scale-vector-study's pipeline, in miniature (STUDY_TINY=1: the
# committed corpus, d_model 16, seconds): every arm trains with the design
# and weight decay it is filed under (its tensors and their wd), at the lr
# the tuning picked (recomputed from tune-loss.tsv), and every table is
# made from the runs: loss.tsv from the traces' validation losses
# (recomputed here), gains.tsv from sw-norms on the last checkpoints.
# Under STUDY_SLURM it writes job scripts a phase at a time and runs
# nothing; their tasks run, it gives the same tables.
. "$(dirname "$0")/../lib/tap.sh"

if ! have_python_modules "numpy, h5py"; then
	test_skip 'scale-vector-study pipeline' 'python3-numpy or python3-h5py not installed'
	test_done
fi

test_expect_success 'the study in miniature runs to its end' '
	STUDY_TINY=1 STUDY_OUT=study sh "$SW_TOP/demo/scale-vector-study.sh" "$SW_BIN" >log 2>&1 ||
		{ cat log; false; }
'

test_expect_success 'every arm: its design, its gains weight decay, the tuned lr' '
	"$PY" -c "
import glob, h5py
tune = [l.split(\"\t\") for l in open(\"study/tune-loss.tsv\").read().split(\"\n\")[1:] if l]
lr = min(tune, key=lambda r: float(r[1]))[0]
arms = {\"pre\": (\"\", 1, \"none\", 0), \"none\": (\"\", 0, \"none\", 0), \"hg\": (\"attn=hg,ffn=hg,head=hg\", 1, \"none\", 0),
        \"ap\": (\"attn=ap,ffn=ap,head=ap\", 1, \"none\", 0), \"dp\": (\"attn=dp,ffn=dp,head=dp\", 1, \"none\", 0),
        \"hg+dp\": (\"attn=hg+dp,ffn=hg+dp,head=hg+dp\", 1, \"none\", 0), \"pre-iwd\": (\"\", 1, \"iwd\", 0),
        \"qk-iwd\": (\"\", 1, \"iwd\", 1), \"qk-all\": (\"\", 1, \"all\", 1),
        \"dnp\": (\"attn=dnp,ffn=dnp\", 1, \"none\", 1), \"hg+dnp\": (\"attn=hg+dnp,ffn=hg+dnp\", 1, \"none\", 1),
        \"dnp-iwd\": (\"attn=dnp,ffn=dnp\", 1, \"iwd\", 1), \"dnp-all\": (\"attn=dnp,ffn=dnp\", 1, \"all\", 1),
        \"or\": (\"\", 1, \"none\", 0, \"or\"), \"er\": (\"\", 1, \"none\", 0, \"er\"),
        \"dnp+or\": (\"attn=dnp,ffn=dnp\", 1, \"none\", 1, \"or\"),
        \"dnp+or-iwd\": (\"attn=dnp,ffn=dnp\", 1, \"iwd\", 1, \"or\"),
        \"dnp+or-all\": (\"attn=dnp,ffn=dnp\", 1, \"all\", 1, \"or\")}
for arm, spec in arms.items():
    design, sv, nwd, qk, reparam = spec if len(spec) == 5 else spec + (\"\",)
    for seed in (1, 2):
        (ck,) = glob.glob(\"study/%s-s%d/*/ckpt-000080.h5\" % (arm, seed))
        with h5py.File(ck, \"r\") as f:
            c, o = f[\"config\"].attrs, f[\"optim\"].attrs
            assert c.get(\"scale_design\", \"\") == design and c[\"scale_vectors\"] == sv, (arm, dict(c))
            assert c.get(\"scale_reparam\", \"\") == reparam, arm
            assert c[\"qk_norm\"] == qk and o[\"norm_wd\"] == nwd and o[\"seed\"] == seed, arm
            assert abs(o[\"lr_max\"] - float(lr)) < 1e-12, (arm, o[\"lr_max\"], lr)
            for n, d in f[\"params\"].items():
                # a reparameterized gain is not trained: its direction and magnitude are
                if d.attrs[\"block\"] != \"norm\" or (reparam and n + \".direction\" in f[\"params\"]):
                    continue
                t = d.attrs[\"norm_type\"]
                want = 0.1 if nwd == \"all\" or (nwd == \"iwd\" and t == \"input\") else 0
                assert abs(d.attrs.get(\"wd\", 0) - want) < 1e-12, (arm, n, d.attrs.get(\"wd\"))
"
'

test_expect_success 'loss.tsv: the seeds mean and range, early and at the end, and the difference from pre' '
	"$PY" -c "
rows = [l.split(\"\t\") for l in open(\"study/curves-all.tsv\").read().split(\"\n\")[1:] if l]
loss = {}
for arm, seed, step, v in rows:
    loss.setdefault((arm, int(step)), []).append(float(v))
t = [l.split(\"\t\") for l in open(\"study/loss.tsv\").read().split(\"\n\")[1:] if l]
assert len(t) == 18
mean = lambda a, s: sum(loss[(a, s)]) / len(loss[(a, s)])
for r in t:
    a = r[0]
    for col, s in ((1, 20), (4, 80)):
        v = loss[(a, s)]
        assert len(v) == 2, (a, s)
        assert abs(float(r[col]) - mean(a, s)) < 6e-5, (a, s)
        assert abs(float(r[col + 1]) - (max(v) - min(v))) < 6e-5, (a, s)
        assert abs(float(r[col + 2]) - (mean(a, s) - mean(\"pre\", s))) < 6e-5, (a, s)
" &&
	run=$(ls -d study/hg-s2/*/) &&
	sw-trace --series val_loss --every 4 "$run/trace.h5" >t &&
	awk -F"\t" "NR > 1 && \$1 == 80 { print \"hg\t2\t80\t\" \$2 }" t >expect &&
	grep "^hg	2	80	" study/curves-all.tsv >actual &&
	test_cmp expect actual
'

test_expect_success 'gains.tsv: each arm s gains as sw-norms --scale-vectors counts them' '
	sw-norms --scale-vectors $(ls study/dp-s1/*/ckpt-000080.h5) >sv &&
	n=$(sed 1d sv | wc -l) &&
	grep -q "^dp	$n	" study/gains.tsv &&
	sw-norms --scale-vectors $(ls study/dnp+or-s1/*/ckpt-000080.h5) >sv &&
	n=$(cut -f6 sv | sed 1d | grep -c -v -e "_dir\$" -e "_mag\$") &&
	grep -q "^dnp+or	$n	" study/gains.tsv &&
	! grep -q "^none	" study/gains.tsv &&
	test_line_count = 18 study/gains.tsv
'

test_expect_success 'the figure: the designs curves, a PNG' '
	printf "\211PNG\r\n\032\n" >expect &&
	head -c 8 study/scale-vector-curves.png >magic && cmp magic expect &&
	cut -f3 study/curves.tsv | sed 1d | sort -u >runs &&
	test_line_count = 11 runs
'

# Slurm, emulated: each task of each job script the study names, run as
# its array task would (sw-sweep --run DIR INDEX, without srun)
run_jobs() {
	for f in $(sed -n "s/^sbatch //p" "$1"); do
		for i in $(sed -n "s/^#SBATCH --array=//p" "$f" |
			awk -F, "{ for (k = 1; k <= NF; k++) { n = split(\$k, r, \"-\")
				for (j = r[1]; j <= r[n]; j++) print j } }"); do
			sw-sweep --run "${f%.sbatch}" "$i" >/dev/null 2>&1 || return 1
		done
	done
}

test_expect_success 'STUDY_SLURM: job scripts, a phase at a time, nothing run here; then the same tables' '
	STUDY_TINY=1 STUDY_SLURM=1 STUDY_OUT=slurm sh "$SW_TOP/demo/scale-vector-study.sh" "$SW_BIN" >log1 2>&1 &&
	grep -q "^sbatch slurm/tune.sbatch$" log1 && test_line_count = 1 slurm/slurm-jobs.txt &&
	! ls slurm/tune/*/ckpt-*.h5 2>/dev/null &&
	run_jobs log1 &&
	STUDY_TINY=1 STUDY_SLURM=1 STUDY_OUT=slurm sh "$SW_TOP/demo/scale-vector-study.sh" "$SW_BIN" >log2 2>&1 &&
	test_line_count = 36 slurm/slurm-jobs.txt && ! test -e slurm/loss.tsv &&
	run_jobs log2 &&
	STUDY_TINY=1 STUDY_OUT=slurm sh "$SW_TOP/demo/scale-vector-study.sh" "$SW_BIN" >log3 2>&1 &&
	test_cmp study/loss.tsv slurm/loss.tsv
'

test_done
