#!/bin/sh
# How a tensor is stored: GPT-2's Conv1D keeps a linear weight as
# [in, out] (transformers' pytorch_utils.Conv1D: y = x W + b), and the
# tensor source turns it to PyTorch's [out, in], as every other family
# is read. sw-ls lists GPT-2's names with their roles, layers and the
# shapes the model sees; sw-norms' RMS->inf (which depends on the side)
# equals numpy's on the transpose numpy takes itself.
. "$(dirname "$0")/../lib/tap.sh"

G=$SW_TOP/fixtures/arch/gpt2

# name role layer block shape: from transformers' modeling_gpt2.py
# (n_embd 16, n_inner 4 * 16, vocab 64, n_positions 64), not our output
cat >gpt2.expect <<'EOF'
transformer.wte.weight embed -1 emb 64x16
transformer.wpe.weight pos_embed -1 emb 64x16
transformer.h.0.ln_1.weight attn_norm 0 norm 16
transformer.h.0.ln_1.bias attn_norm_bias 0 norm 16
transformer.h.0.attn.c_attn.weight:q q 0 qk 16x16
transformer.h.0.attn.c_attn.weight:k k 0 qk 16x16
transformer.h.0.attn.c_attn.weight:v v 0 vo 16x16
transformer.h.0.attn.c_attn.bias:q q_bias 0 qk 16
transformer.h.1.attn.c_attn.bias:v v_bias 1 vo 16
transformer.h.1.attn.c_proj.weight o 1 vo 16x16
transformer.h.1.attn.c_proj.bias o_bias 1 vo 16
transformer.h.0.mlp.c_fc.bias up_bias 0 ffn 64
transformer.h.1.mlp.c_proj.bias down_bias 1 ffn 16
transformer.h.1.ln_2.weight ffn_norm 1 norm 16
transformer.h.1.ln_2.bias ffn_norm_bias 1 norm 16
transformer.h.0.mlp.c_fc.weight up 0 ffn 64x16
transformer.h.1.mlp.c_proj.weight down 1 ffn 16x64
transformer.ln_f.weight final_norm -1 norm 16
transformer.ln_f.bias final_norm_bias -1 norm 16
lm_head.weight lm_head -1 out 64x16
EOF

test_expect_success 'gpt2: sw-ls names its tensors, [out, in] shapes, nothing on stderr' '
	sw-ls "$G/model.safetensors" >ls 2>err && test_line_count = 0 err &&
	sed 1d ls | awk -F"\t" "{ print \$2, \$4, \$5, \$3, \$8 }" >all &&
	sort gpt2.expect >expect &&
	grep -F -x -f expect all | sort >found && test_cmp expect found
'

test_expect_success 'gpt2: --role up selects the c_fc of each layer' '
	sw-norms --role up "$G/model.safetensors" >norms &&
	sed 1d norms | cut -f4,8,9 >got &&
	printf "%s\t64\t16\n" transformer.h.0.mlp.c_fc.weight transformer.h.1.mlp.c_fc.weight >want &&
	test_cmp want got
'

# numpy's RMS->inf = sqrt(d_in) max_i ||W_i,:||_2, Frobenius and the
# largest singular value of W = stored.T (c_attn's as its thirds q, k,
# v: split(n_embd) in modeling_gpt2.py), in float64 from the float32
# values; 1e-5 relative: sw-norms sums in double over the same float32
# values and stops Lanczos at 1e-6
cat >ref.py <<'EOF'
import json, struct, sys
import numpy as np
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
for k, e in sorted(json.loads(raw[8:8 + n]).items()):
    if not (k.endswith("c_attn.weight") or k.endswith("c_proj.weight") or k.endswith("c_fc.weight")):
        continue
    b, end = e["data_offsets"]
    w = np.frombuffer(raw[8 + n + b:8 + n + end], dtype="<f4").reshape(e["shape"]).astype(np.float64).T
    parts = {k: w}
    if k.endswith("c_attn.weight"):
        d = w.shape[1]
        parts = {k + ":" + r: w[i * d:(i + 1) * d] for i, r in enumerate("qkv")}
    for name, p in parts.items():
        r2i = np.sqrt(p.shape[1]) * np.linalg.norm(p, axis=1).max()
        print("%s\t%d\t%d\t%.9g\t%.9g\t%.9g" % (name, p.shape[0], p.shape[1], r2i,
              np.linalg.svd(p, compute_uv=False)[0], np.linalg.norm(p)))
EOF

if have_python_modules numpy; then
	test_expect_success 'gpt2: RMS->inf, spectral, Frobenius of each Conv1D weight = numpy on its transpose, to 1e-5' '
		"$PY" ref.py "$G/model.safetensors" >ref && sort ref >expect &&
		sw-norms "$G/model.safetensors" >norms &&
		awk -F"\t" "NR > 1 && \$4 ~ /c_(attn|proj|fc)\\.weight(:[qkv])?\$/ { print \$4 \"\t\" \$8 \"\t\" \$9 \"\t\" \$10 \"\t\" \$13 \"\t\" \$14 }" norms |
			sort >actual &&
		test_line_count = 12 actual &&
		numbers_close 1e-5 expect actual
	'
else
	test_skip 'numpy references' 'python3-numpy not installed'
fi

test_done
