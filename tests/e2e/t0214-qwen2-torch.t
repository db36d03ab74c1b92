#!/bin/sh
# Qwen2 in the model: q, k, v biases. fixtures/arch/qwen2 was written by
# transformers' save_pretrained (fixtures/make-arch.sh) with random
# non-zero biases; sw-sharpness's per-tensor GNB on its dumped labels
# equals an independent float64 model in PyTorch
# (tests/e2e/sharpness_reference.py over torch_reference.py's forward,
# which adds the biases after the q, k, v products, as transformers'
# Qwen2Attention) to 1e-3 relative: float32 gradients against float64,
# ~1e-6 relative, squared ~2e-6, far inside; a model without the biases
# is off by far more (below); the emulated device gives the CPU's numbers.
# Skipped without python3-torch.
. "$(dirname "$0")/../lib/tap.sh"

REF=$SW_TOP/tests/e2e/sharpness_reference.py
QWEN=$FIX/arch/qwen2

if ! have_python_modules "torch, h5py, numpy"; then
	test_skip 'Qwen2 against PyTorch' 'python3-torch not installed'
	test_done
fi

# compare NAME NPARAMS MEAN ZEROS lines by name: counts exactly, means to
# 1e-3 relative; at least the 6 bias tensors among them
compare() {
	sort "$1" >a.sorted && sort "$2" >b.sorted &&
	join -t "$(printf '\t')" a.sorted b.sorted | awk -F'\t' '
		{ d = $3 - $6; if (d < 0) d = -d; if (d > 1e-3 * $6 + 1e-30 || $2 != $5 || $4 != $7) { print; bad = 1 } n++ }
		/_proj\.bias/ { b++ }
		END { if (n < 20 || b != 6) { print n " tensors, " b " biases"; bad = 1 } exit bad }'
}

# tokens below the fixture's vocabulary of 64, as bytes
test_expect_success 'a token file' '
	"$PY" -c "open(\"tok.bin\", \"wb\").write(bytes((i * 13 + i // 7) % 64 for i in range(4000)))"
'

test_expect_success 'the checkpoint has random q, k, v biases and no o bias' '
	sw-ls "$QWEN" >ls &&
	test "$(grep -c "_proj\.bias" ls)" = 6 &&
	test "$(grep -c "o_proj\.bias" ls)" = 0
'

test_expect_success 'sw-sharpness per tensor on Qwen2 matches PyTorch in float64' '
	sw-sharpness --data tok.bin --data-format bytes --batch-tokens 96 --seq-len 16 \
		--draws 3 --force --dump-labels labels.h5 --per-tensor "$QWEN" >ours &&
	awk -F"\t" "NR > 1 { print \$3 \"\t\" \$7 \"\t\" \$8 \"\t\" \$14 }" ours >ours.cut &&
	sw-convert "$QWEN" q.h5 >/dev/null &&
	"$PY" "$REF" q.h5 labels.h5 >ref &&
	compare ref ours.cut
'

test_expect_success 'the same reference without the biases is off (the check sees them)' '
	"$PY" -c "
import h5py
f = h5py.File(\"q.h5\", \"r+\")
for n in list(f[\"params\"]):
    if n.endswith(\"_proj.bias\"):
        f[\"params\"][n][...] = 0
" &&
	"$PY" "$REF" q.h5 labels.h5 >ref0 &&
	test_expect_code 1 compare ref0 ours.cut >/dev/null
'

test_expect_success 'sw-hessian runs on Qwen2' '
	sw-hessian --data tok.bin --data-format bytes --batch-tokens 32 --seq-len 16 \
		"$QWEN" >hess &&
	test "$(wc -l <hess)" -ge 6
'

# the device's bias kernel (emulated: lib/model/cuda/kernels.h's bodies
# on the CPU) against the CPU's, on the same labels: float32 summed in
# another order, 1e-6 as t0064
test_expect_success 'sw-sharpness --device emu on Qwen2: the CPU'"'"'s estimate per tensor to 1e-6' '
	sw-sharpness --data tok.bin --data-format bytes --batch-tokens 96 --seq-len 16 \
		--draws 3 --per-tensor --device emu "$QWEN" >emu &&
	numbers_close 1e-6 ours emu
'

test_done
