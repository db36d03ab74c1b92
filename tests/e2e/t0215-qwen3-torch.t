#!/bin/sh
# Qwen3 in the model: QK-norm per head (a gain of head_dim over each
# head's q and k, after the products, before RoPE) and a head_dim (12)
# that is not hidden_size / num_attention_heads (8). fixtures/arch/qwen3
# was written by transformers' save_pretrained (fixtures/make-arch.sh,
# transformers 5) with random norm gains; sw-sharpness's per-tensor GNB
# on its dumped labels equals an independent float64 model in PyTorch
# (tests/e2e/sharpness_reference.py over torch_reference.py's forward,
# which normalizes q and k per head as transformers' Qwen3Attention) to
# 1e-3 relative: float32 gradients against float64, ~1e-6 relative,
# squared ~2e-6, far inside; the same reference with QK-norm's gains at
# 1 is off by far more (below). (That forward's loss on this fixture is
# transformers 5.24.0's Qwen3ForCausalLM's in float64 to 2e-10, checked
# once in build/venv: make check has no transformers.) Skipped without
# python3-torch.
. "$(dirname "$0")/../lib/tap.sh"

REF=$SW_TOP/tests/e2e/sharpness_reference.py
QWEN=$FIX/arch/qwen3

if ! have_python_modules "torch, h5py, numpy"; then
	test_skip 'Qwen3 against PyTorch' 'python3-torch not installed'
	test_done
fi

# compare NAME NPARAMS MEAN ZEROS lines by name: counts exactly, means to
# 1e-3 relative; at least the 4 QK-norm gains among them
compare() {
	sort "$1" >a.sorted && sort "$2" >b.sorted &&
	join -t "$(printf '\t')" a.sorted b.sorted | awk -F'\t' '
		{ d = $3 - $6; if (d < 0) d = -d; if (d > 1e-3 * $6 + 1e-30 || $2 != $5 || $4 != $7) { print; bad = 1 } n++ }
		/_norm\.weight/ && /self_attn/ { qk++ }
		END { if (n < 20 || qk != 4) { print n " tensors, " qk " QK-norm gains"; bad = 1 } exit bad }'
}

# tokens below the fixture's vocabulary of 64, as bytes
test_expect_success 'a token file' '
	"$PY" -c "open(\"tok.bin\", \"wb\").write(bytes((i * 13 + i // 7) % 64 for i in range(4000)))"
'

test_expect_success 'the checkpoint: q_norm, k_norm of head_dim 12, q of 2 heads of 12, gains not 1' '
	sw-ls "$QWEN" >ls &&
	awk -F"\t" "\$4 == \"q_norm\" || \$4 == \"k_norm\" { print \$4, \$5, \$8 }" ls >qk &&
	printf "%s\n" "q_norm 0 12" "k_norm 0 12" "q_norm 1 12" "k_norm 1 12" | sort >want &&
	sort qk >got && test_cmp want got &&
	grep -q "	q	0	.*	24x16	" ls &&
	"$PY" -c "
import json, struct, sys, numpy as np
raw = open(sys.argv[1], \"rb\").read()
(n,) = struct.unpack(\"<Q\", raw[:8])
e = json.loads(raw[8:8 + n])[\"model.layers.0.self_attn.q_norm.weight\"]
w = np.frombuffer(raw[8 + n + e[\"data_offsets\"][0]:8 + n + e[\"data_offsets\"][1]], dtype=\"<f4\")
sys.exit(0 if np.abs(w - 1).min() > 1e-3 else 1)" "$QWEN/model.safetensors"
'

test_expect_success 'sw-sharpness per tensor on Qwen3 matches PyTorch in float64' '
	sw-sharpness --data tok.bin --data-format bytes --batch-tokens 96 --seq-len 16 \
		--draws 3 --force --dump-labels labels.h5 --per-tensor "$QWEN" >ours &&
	awk -F"\t" "NR > 1 { print \$3 \"\t\" \$7 \"\t\" \$8 \"\t\" \$14 }" ours >ours.cut &&
	sw-convert "$QWEN" q.h5 >/dev/null &&
	"$PY" "$REF" q.h5 labels.h5 >ref &&
	compare ref ours.cut
'

test_expect_success 'the same reference with the QK-norm gains at 1 is off (the check sees them)' '
	"$PY" -c "
import h5py
f = h5py.File(\"q.h5\", \"r+\")
for n in list(f[\"params\"]):
    if n.endswith((\"q_norm.weight\", \"k_norm.weight\")):
        f[\"params\"][n][...] = 1
" &&
	"$PY" "$REF" q.h5 labels.h5 >ref1 &&
	test_expect_code 1 compare ref1 ours.cut >/dev/null
'

test_expect_success 'sw-hessian runs on Qwen3' '
	sw-hessian --data tok.bin --data-format bytes --batch-tokens 32 --seq-len 16 \
		"$QWEN" >hess &&
	test "$(wc -l <hess)" -ge 6
'

test_done
