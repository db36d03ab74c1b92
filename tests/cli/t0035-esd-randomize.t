#!/bin/sh
# sw-spectrum --esd-fit --randomize: WeightWatcher's randomized ESD, each
# matrix's elements shuffled and the shuffled matrix's spectrum fitted
# (rand_lambda_max, rand_mp_edge, traps: its eigenvalues beyond the
# Marchenko-Pastur edge and WeightWatcher's Tracy-Widom margin, the
# correlation traps; ww_softrank). The shuffle itself cannot be redone in
# numpy, so the invariants are checked: Gaussian matrices have no trap, a
# matrix with one planted large element has one, whichever shuffle; the
# shuffled matrix keeps every element (sigma_max >= the largest |element|,
# and numpy's own shuffles give the same largest eigenvalue); the seed
# gives the same bytes, another seed another shuffle. That a shuffle is a
# permutation (the multiset kept exactly) is tests/unit/t-esdfit.c's.
. "$(dirname "$0")/../lib/tap.sh"

# a Llama of d_model 256 in safetensors, float32, seeded N(0, 0.02^2)
# entries: q (256 x 256) and gate (128 x 256) as drawn, o (256 x 256) and
# down (256 x 128) with one element set to 2 (100 standard deviations:
# its eigenvalue 2^2 / 256 = 0.0156 against the bulk's edge, 0.0016 and
# 0.0012), and k (256 x 256) with a rank-one signal 0.05 u v^T (u, v of
# random signs: sigma 12.8, an eigenvalue 0.64 far above the edge) that
# the shuffle spreads over the elements: spikes, but no trap. mkst.py DIR
cat >mkst.py <<'EOF'
import json, os, random, struct, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
json.dump({"architectures": ["LlamaForCausalLM"], "vocab_size": 8, "hidden_size": 256,
           "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 128},
          open(os.path.join(d, "config.json"), "w"))
rng = random.Random(35)
head, data = {}, b""
for name, rows, cols, kind in (("self_attn.q_proj", 256, 256, ""), ("self_attn.k_proj", 256, 256, "signal"),
                               ("self_attn.o_proj", 256, 256, "planted"), ("mlp.gate_proj", 128, 256, ""),
                               ("mlp.down_proj", 256, 128, "planted")):
    vals = [rng.gauss(0, 0.02) for _ in range(rows * cols)]
    if kind == "planted":
        vals[3 * cols + 5] = 2.0
    if kind == "signal":
        u = [rng.choice((-1, 1)) for _ in range(rows)]
        v = [rng.choice((-1, 1)) for _ in range(cols)]
        vals = [x + 0.05 * u[i // cols] * v[i % cols] for i, x in enumerate(vals)]
    name = "model.layers.0.%s.weight" % name
    head[name] = {"dtype": "F32", "shape": [rows, cols], "data_offsets": [len(data), len(data) + 4 * rows * cols]}
    data += struct.pack("<%df" % (rows * cols), *vals)
h = json.dumps(head).encode()
h += b" " * (-len(h) % 8)
open(os.path.join(d, "model.safetensors"), "wb").write(struct.pack("<Q", len(h)) + h + data)
EOF

test_expect_success 'setup: two Gaussian matrices, two with a planted element, one with a signal' '
	"$PY" mkst.py m && sw-spectrum --esd-fit --randomize m >r &&
	test_line_count = 6 r
'

test_expect_success 'the columns: --esd-fit'"'"'s, then rand_lambda_max rand_mp_edge traps ww_softrank' '
	sw-spectrum --esd-fit m >plain &&
	head -n 1 plain | tr -d "\n" >expect && printf "\trand_lambda_max\trand_mp_edge\ttraps\tww_softrank\n" >>expect &&
	head -n 1 r >header && test_cmp expect header &&
	cut -f1-22 r >first && test_cmp plain first
'

test_expect_success 'traps: none in a Gaussian matrix or a shuffled signal, one where an element was planted' '
	awk -F"\t" "NR > 1 { print \$5, \$25 }" r >got &&
	printf "%s\n" "q 0" "k 0" "o 1" "gate 0" "down 1" >expect && test_cmp expect got &&
	awk -F"\t" "\$5 == \"k\" { exit !(\$19 >= 1) }" r
'

# sigma_max >= max |w_ij| for any matrix: the planted 2 survives the
# shuffle, rand_lambda_max >= 4 / 256 (5e-10: the 9 printed digits); and
# sigma_max^2 <= ||W||_F^2, which the shuffle keeps: rand_lambda_max <=
# 10^log_norm / N (N = 256 for all five). ww_softrank is the ratio of the printed lambdas (1e-8:
# two 9-digit values)
test_expect_success 'invariants: the planted element survives, the Frobenius norm bounds, ww_softrank the ratio' '
	awk -F"\t" "NR > 1 { n = 256
		if ((\$5 == \"o\" || \$5 == \"down\") && \$23 < 4 / 256 * (1 - 5e-10)) { print \"lost: \" \$5; bad = 1 }
		if (\$23 > 10^\$16 / n * (1 + 1e-8)) { print \"above the norm: \" \$5; bad = 1 }
		d = \$26 - \$23 / \$8; if (d < 0) d = -d; if (d > 1e-8 * \$26) { print \"softrank: \" \$5; bad = 1 } }
		END { exit bad }" r
'

test_expect_success 'the seed: the same bytes again, another seed another shuffle' '
	sw-spectrum --esd-fit --randomize --seed 1 m >again && test_cmp r again &&
	sw-spectrum --esd-fit --randomize --seed 7 m >other &&
	cut -f1-22 other >first && test_cmp plain first &&
	cut -f23 r >a && cut -f23 other >b && ! cmp -s a b
'

# a tied head is the embedding's matrix: its shuffle is the embedding's
# (the seed goes with the stored tensor), the same bytes in every column
test_expect_success 'a tied head: the embedding'"'"'s shuffle, the same row' '
	sw-train --data "$FIX/corpus.txt" --out tied --steps 2 --d-model 64 --n-layers 1 --n-heads 2 --tie \
		--batch 1 --seq-len 8 --eval-every 0 --trace "" --threads 1 >/dev/null &&
	sw-spectrum --esd-fit --randomize --role embed,lm_head tied/ckpt-000002.h5 >t &&
	test_line_count = 3 t && cut -f7- t | sed 1d | uniq >u && test_line_count = 1 u
'

# numpy shuffles the same matrices (read back from the file) 20 times:
# the largest eigenvalue of a shuffled matrix, sigma_max^2 / N, varies
# with the shuffle by well under 2% for the planted ones (the planted 4
# plus the rest of its row and column, about 0.2) and with the bulk's
# fluctuation for the Gaussian ones (M^(-2/3) of the edge: 2.5% at M =
# 128); ours must lie within numpy's range widened by 2%. WeightWatcher's
# rule on numpy's shuffles, with s^2 the entries' variance: the same
# trap counts.
if ! have_python_modules "numpy"; then
	test_skip 'numpy: the shuffled spectra and trap counts' 'python3-numpy not installed'
	test_done
fi

cat >ref.py <<'EOF'
import json, struct, sys
import numpy as np
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
gen = np.random.default_rng(35)
for name in sorted(head, key=lambda k: head[k]["data_offsets"][0]):
    a, b = head[name]["data_offsets"]
    rows, cols = head[name]["shape"]
    w = np.frombuffer(raw[8 + n + a:8 + n + b], dtype="<f4").astype(np.float64)
    N, M = max(rows, cols), min(rows, cols)
    y = M / N
    e = (1 + np.sqrt(y)) ** 2
    s2 = np.var(w)
    edge = s2 * (e + np.sqrt(np.sqrt(y) * e ** (2 / 3) * M ** (-2 / 3)))
    tops, traps = [], set()
    for _ in range(20):
        lam = np.linalg.svd(gen.permutation(w).reshape(rows, cols), compute_uv=False) ** 2 / N
        tops.append(lam.max())
        traps.add(int(np.sum(lam > edge)))
    print(name.split(".")[-2], min(tops), max(tops), *sorted(traps))
EOF

test_expect_success 'numpy: our shuffled lambda_max within numpy'"'"'s shuffles'"'"', the same trap counts' '
	"$PY" ref.py m/model.safetensors >ref &&
	awk "NR == FNR { lo[\$1] = \$2; hi[\$1] = \$3; t[\$1] = \$4 (NF > 4 ? \" more\" : \"\"); next }
		FNR > 1 { split(\$3, p, \".\"); k = p[5]
			if (!(\$23 >= lo[k] * 0.98 && \$23 <= hi[k] * 1.02)) { print k \": \" \$23 \" outside \" lo[k] \"..\" hi[k]; bad = 1 }
			if (t[k] != \$25) { print k \": traps \" \$25 \", numpy \" t[k]; bad = 1 } }
		END { exit bad }" ref FS="\t" r
'

test_expect_success 'usage: --randomize goes with --esd-fit alone, --seed with --randomize' '
	test_expect_code 64 sw-spectrum --randomize m 2>err &&
	test_expect_code 64 sw-spectrum --esd-fit --randomize --hist 4 m 2>err &&
	test_expect_code 64 sw-spectrum --esd-fit --randomize --per-head m 2>err &&
	test_expect_code 64 sw-spectrum --esd-fit --seed 3 m 2>err &&
	head -n 1 err >first && grep -q "^sw-spectrum: --seed is the shuffle" first
'

test_done
