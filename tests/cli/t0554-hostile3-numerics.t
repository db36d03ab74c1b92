#!/bin/sh
# Strangers' files, third round (issue 53): the numerics. H: a valid
# float32 matrix far from 1 in size (one entry of 1e20; every entry near
# 1e-25 or 1e-30; 1e20 among 1e-20s) gets the sigma_max numpy's float64
# SVD gives, where the float32 Lanczos search overflowed into "LAPACK
# dsyevr failed (info -6)", exit 70; Inf is still refused. P: under an
# address-space limit (ulimit -v) a thread count OpenBLAS cannot map
# (--threads 64, OMP_NUM_THREADS=64) is bounded, never a hang (OpenBLAS
# retried a refused mapping for ever); a limit too small for one thread
# is one line and 70. Every run is under timeout, and a hang (124)
# fails. N: a 1 x N head is a vector: neither its lm_head row nor its
# lm_head_folded row (the folded row came alone).
. "$(dirname "$0")/../lib/tap.sh"

# ---- H: sigma_max against numpy -------------------------------------------
# far.py make FILE: the matrices of a d 256 checkpoint (block Lanczos:
# min(rows, cols) > 128) made far from 1; far.py check FILE NORMS
# SPECTRUM: sw-norms' spectral column (lm_head_folded's: the head times
# the final norm's gain, in float64) and sw-spectrum --top 1's sigma
# within 1e-5 relative of numpy's SVD of the float32 values in float64
# (the tools' bound is 5e-7 and 5e-6), a row for every matrix
cat >far.py <<'EOF'
import sys
import h5py
import numpy as np

P = "params/"
Q, K, V, O = ("model.layers.0.self_attn.%s_proj.weight" % r for r in "qkvo")
E, H, G = "model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"


def edit(f, name, fn):
    d = f[P + name]
    d[...] = fn(d[...].astype(np.float64)).astype(np.float32)


def spike(w, at, value):
    w[at] = value
    return w


if sys.argv[1] == "make":
    with h5py.File(sys.argv[2], "r+") as f:
        edit(f, Q, lambda w: spike(w, (3, 5), 1e20))          # one entry of 1e20
        edit(f, K, lambda w: w * 1e-25)                       # sigma^2 ~ 1e-50
        edit(f, V, lambda w: spike(w * 1e-20, (7, 9), 1e20))  # 1e20 among 1e-20s
        edit(f, O, lambda w: w * 1e-30)
        edit(f, E, lambda w: w * 2.0 ** 70)                   # every entry ~1e20
        edit(f, H, lambda w: spike(w, (11, 13), 1e20))        # the head, and folded
        edit(f, G, lambda w: spike(w, 17, 1e20))              # with a gain of 1e20
    sys.exit(0)

f = h5py.File(sys.argv[2], "r")
ref = {}
for name in (Q, K, V, O, E, H):
    w = f[P + name][...].astype(np.float64)
    ref[name, name == E and "embed" or name == H and "lm_head" or "x"] = np.linalg.svd(w, compute_uv=False)[0]
g = f[P + G][...].astype(np.float64)
ref[H, "lm_head_folded"] = np.linalg.svd(f[P + H][...].astype(np.float64) * g, compute_uv=False)[0]
bad = 0
for path, col, want_rows in ((sys.argv[3], "spectral", 7), (sys.argv[4], "sigma", 6)):
    lines = open(path).read().splitlines()
    head = lines[0].split("\t")
    seen = 0
    for line in lines[1:]:
        c = dict(zip(head, line.split("\t")))
        role = c["role"] if c["role"] in ("embed", "lm_head", "lm_head_folded") else "x"
        want = ref[c["name"], role]
        got = float(c[col])
        seen += 1
        if not abs(got - want) <= 1e-5 * want:
            print("%s: %s %s: %r, numpy %r" % (path, c["name"], c["role"], got, want))
            bad = 1
    if seen != want_rows:
        print("%s: %d rows, expected %d" % (path, seen, want_rows))
        bad = 1
sys.exit(bad)
EOF

if have_python_modules "numpy, h5py"; then
	test_expect_success 'H setup: a d 256 checkpoint written by h5py, made far from 1 in size' '
		"$PY" "$SW_TOP/bench/mkckpt.py" far.h5 --vocab 300 --d 256 --layers 1 --spike 1 &&
		"$PY" far.py make far.h5
	'

	test_expect_success 'H: sw-norms and sw-spectrum --top 1 = numpy float64 SVD (1e-5), exit 0' '
		timeout 60 sw-norms far.h5 >norms 2>err && test_line_count = 0 err &&
		timeout 60 sw-spectrum --top 1 far.h5 >spectrum 2>err && test_line_count = 0 err &&
		"$PY" far.py check far.h5 norms spectrum
	'

	test_expect_success 'H: the same with --threads 1 (the one-thread path)' '
		timeout 60 sw-norms --threads 1 far.h5 >norms1 2>err && test_line_count = 0 err &&
		timeout 60 sw-spectrum --threads 1 --top 1 far.h5 >spectrum1 2>err &&
		test_line_count = 0 err &&
		"$PY" far.py check far.h5 norms1 spectrum1
	'

	test_expect_success 'H: an Inf among them is still refused (65, one line)' '
		cp far.h5 inf.h5 &&
		"$PY" -c "import h5py, numpy as np; d = h5py.File(\"inf.h5\", \"r+\")[\"params/model.layers.0.self_attn.q_proj.weight\"]; w = d[...]; w[0, 0] = np.inf; d[...] = w" &&
		test_expect_code 65 timeout 60 sw-spectrum --top 1 --role q inf.h5 >out 2>err &&
		test_one_error sw-spectrum inf.h5 && grep -q "1 of 65536 values are NaN or Inf" err
	'
else
	test_skip 'H: sigma_max of matrices far from 1 against numpy' 'python3-numpy or python3-h5py not installed'
fi

# ---- P: thread counts under an address-space limit ------------------------
# ASan's shadow memory is address space: no ulimit -v under it
if [ -n "${SW_SANITIZED:-}" ]; then
	test_skip 'P: thread counts under ulimit -v' 'sanitized build (shadow memory is address space)'
else
	# limited -v|-d LIMIT CMD...: CMD under ulimit -v (RLIMIT_AS) or -d
	# (RLIMIT_DATA) LIMIT (KiB) and timeout 60, its status into status
	limited() {
		flag=$1 lim=$2
		shift 2
		(ulimit "$flag" "$lim" && exec timeout 60 "$@") >out 2>err
		echo $? >status
	}
	SMALL="--batch 4 --seq-len 32 --d-model 32 --n-layers 2 --n-heads 4 --n-kv-heads 2"

	test_expect_success 'P: ulimit -v 4000000, sw-norms --threads 64: bounded, the rows, a note (never a hang)' '
		timeout 60 sw-norms --threads 1 "$FIX/tiny.h5" >free &&
		limited -v 4000000 sw-norms --threads 64 "$FIX/tiny.h5" &&
		echo 0 >want && test_cmp want status &&
		cut -f4,6 free >expect && cut -f4,6 out >actual && test_cmp expect actual &&
		test_line_count = 1 err &&
		grep -q "^sw-norms: --threads 64: [0-9]* threads: the address-space limit" err
	'

	test_expect_success 'P: ulimit -d 4000000 (RLIMIT_DATA), sw-norms --threads 64: the same' '
		limited -d 4000000 sw-norms --threads 64 "$FIX/tiny.h5" &&
		echo 0 >want && test_cmp want status &&
		cut -f4,6 out >actual && test_cmp expect actual &&
		test_line_count = 1 err &&
		grep -q "^sw-norms: --threads 64: [0-9]* threads: the address-space limit" err &&
		limited -d 250000 sw-norms "$FIX/tiny.h5" &&
		echo 70 >want && test_cmp want status && test_line_count = 1 err
	'

	test_expect_success 'P: ulimit -v 4000000, OMP_NUM_THREADS=64: sw-norms, sw-spectrum bounded' '
		OMP_NUM_THREADS=64 limited -v 4000000 sw-norms "$FIX/tiny.h5" &&
		echo 0 >want && test_cmp want status && test_line_count = 0 err &&
		cut -f4,6 out >actual && test_cmp expect actual &&
		OMP_NUM_THREADS=64 limited -v 4000000 sw-spectrum --top 1 "$FIX/tiny.h5" &&
		test_cmp want status && test_line_count = 0 err && test_line_count -gt 1 out &&
		limited -v 4000000 sw-spectrum --threads 64 --top 1 "$FIX/tiny.h5" &&
		test_cmp want status && test_line_count -gt 1 out
	'

	test_expect_success 'P: ulimit -v 4000000, sw-train --threads 64 and OMP_NUM_THREADS=64: trains' '
		limited -v 4000000 sw-train --data "$FIX/corpus.txt" --out run64 $SMALL --threads 64 \
			--steps 2 --ckpt-every 2 &&
		echo 0 >want && test_cmp want status && test -f run64/ckpt-000002.h5 &&
		OMP_NUM_THREADS=64 limited -v 4000000 sw-train --data "$FIX/corpus.txt" --out runenv \
			$SMALL --steps 2 --ckpt-every 2 &&
		test_cmp want status && test -f runenv/ckpt-000002.h5
	'

	test_expect_success 'P: a limit as tight as 450000 KiB: one thread, the rows' '
		limited -v 450000 sw-norms --threads 16 "$FIX/tiny.h5" &&
		echo 0 >want && test_cmp want status &&
		cut -f4,6 out >actual && test_cmp expect actual &&
		grep -q "^sw-norms: --threads 16: 1 thread: " err
	'

	test_expect_success 'P: a limit too small for one thread (250000 KiB): one line, 70' '
		limited -v 250000 sw-norms "$FIX/tiny.h5" &&
		echo 70 >want && test_cmp want status && test_line_count = 0 out &&
		test_line_count = 1 err &&
		grep -q "^sw-norms: the address-space limit (ulimit -v or -d) leaves [0-9]* MiB, and OpenBLAS needs 132 MiB for its calls$" err &&
		limited -v 250000 sw-spectrum --threads 64 "$FIX/tiny.h5" &&
		test_cmp want status && test_line_count = 1 err
	'
fi

# ---- N: a head of one row -------------------------------------------------
if have_python_modules "numpy, h5py"; then
	test_expect_success 'N setup: checkpoints of vocab 1 (a 1 x 64 head, untied and tied) and vocab 2' '
		"$PY" "$SW_TOP/bench/mkckpt.py" v1.h5 --vocab 1 --d 64 --layers 1 --head-dim 32 &&
		"$PY" "$SW_TOP/bench/mkckpt.py" v2.h5 --vocab 2 --d 64 --layers 1 --head-dim 32 &&
		"$PY" - <<-\EOF
		import shutil
		import h5py
		import numpy as np
		with h5py.File("v1.h5", "r+") as f:
		    for n in ("lm_head.weight", "model.embed_tokens.weight"):
		        f["params/" + n].attrs["kind"] = "vector"
		shutil.copy("v1.h5", "v1tied.h5")
		with h5py.File("v1tied.h5", "r+") as f:
		    del f["params/lm_head.weight"]
		    f["config"].attrs["tie_embeddings"] = np.int64(1)
		EOF
	'

	test_expect_success 'N: a 1 x 64 head has neither its lm_head row nor its lm_head_folded row' '
		for f in v1.h5 v1tied.h5; do
			timeout 60 sw-norms $f >out 2>err && test_line_count = 0 err &&
			test_line_count = 5 out &&
			cut -f6 out >roles && printf "role\nq\nk\nv\no\n" >expect &&
			test_cmp expect roles || return 1
		done
	'

	test_expect_success 'N: a 2 x 64 head has both (and --role lm_head selects both)' '
		timeout 60 sw-norms v2.h5 >out 2>err && test_line_count = 0 err &&
		cut -f6 out >roles && grep -qx lm_head roles && grep -qx lm_head_folded roles &&
		timeout 60 sw-norms --role lm_head v2.h5 >out &&
		cut -f6 out >roles && printf "role\nlm_head\nlm_head_folded\n" >expect &&
		test_cmp expect roles
	'
else
	test_skip 'N: a head of one row' 'python3-numpy or python3-h5py not installed'
fi

test_done
