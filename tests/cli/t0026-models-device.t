#!/bin/sh
# The other families on the CUDA trainer's path, through the tools: GPT-2's,
# Gemma's and Gemma2's checkpoints written by transformers (fixtures/arch, made by
# fixtures/make-arch.py), converted by sw-convert, and their Hessians
# (sw-hessian) and GNB estimates (sw-sharpness) on the emulated device
# (--device emu: lib/model/cuda/gpumodel.c's operations, the kernel bodies
# of kernels.h in host loops) against the CPU's. The kernels and the
# device's model are checked one by one in t-cuda-kernels and t-cuda-model;
# here the tools' wiring: the family's tensors, activations and soft-caps
# reach the device from a checkpoint of its own.
#
# Tolerances, as t0064's for Llama: the device's H v is the CPU's
# R-operator in float32 summed in another order (t-cuda-model: each H v
# to 1e-5 of its tensor's norm), Lanczos and the trace take the products
# to eigenvalues and traces within 1e-5; the GNB estimate is a sum of
# squared gradients (t-cuda-model: the gradients to 1e-5 of each tensor's
# norm, here summed over the block) to 1e-5. The residual bound is left
# out: the norm of a small residual, relative to itself it moves by more.
. "$(dirname "$0")/../lib/tap.sh"

# tokens as bytes below the fixtures' vocabulary of 64: digits,
# punctuation, space (a byte of 64 or more is refused, exit 65)
text() {
	i=0
	while [ $i -lt 40 ]; do
		printf '%s' '31 41 59 26 (5 + 3) * 5 = 40; 8 / 9 < 1 > 0? #7, $8 & %9: 23-42!'
		i=$((i + 1))
	done
}

test_expect_success 'setup: the GPT-2, Gemma and Gemma2 fixtures as checkpoints, a text of bytes below 64' '
	sw-convert "$FIX/arch/gpt2" gpt2.h5 &&
	sw-convert "$FIX/arch/gemma" gemma.h5 &&
	sw-convert "$FIX/arch/gemma2" gemma2.h5 &&
	text >small.txt
'

for arch in gpt2 gemma gemma2; do
	test_expect_success "sw-hessian --device emu on $arch: the CPU eigenvalues and traces to 1e-5" '
		for dev in cpu emu; do
			sw-hessian --data small.txt --data-format bytes --batch-tokens 64 --seq-len 16 --top 2 \
				--probes 2 --device $dev $arch.h5 >$arch.$dev.hess &&
			sw-hessian --data small.txt --data-format bytes --batch-tokens 64 --seq-len 16 \
				--gauss-newton --whole --top 1 --probes 2 --device $dev $arch.h5 >$arch.$dev.gn ||
				exit 1
		done &&
		test_line_count = 7 $arch.emu.hess && test_line_count = 2 $arch.emu.gn &&
		cut -f1-7,9- $arch.cpu.hess >c.h && cut -f1-7,9- $arch.emu.hess >e.h && numbers_close 1e-5 c.h e.h &&
		cut -f1-6,8- $arch.cpu.gn >c.g && cut -f1-6,8- $arch.emu.gn >e.g && numbers_close 1e-5 c.g e.g
	'
	test_expect_success "sw-sharpness --device emu on $arch: the CPU GNB estimate to 1e-5" '
		for dev in cpu emu; do
			sw-sharpness --recompute --data small.txt --data-format bytes --batch-tokens 64 \
				--seq-len 16 --draws 2 --device $dev $arch.h5 >$arch.$dev.sharp || exit 1
		done &&
		test_line_count -gt 1 $arch.emu.sharp && numbers_close 1e-5 $arch.cpu.sharp $arch.emu.sharp
	'
done

# sw-train --arch on the emulated device against the CPU, 12 steps: the
# tensors alike by name and shape (sw-ls), every parameter and moment to
# 1e-3 of its tensor's largest value (tests/e2e/params_close.py), t0064's
# tolerance for Llama (AdamW's division by sqrt(v) magnifies the rounding
# of near-zero gradients; one step missed or repeated moves a tensor by
# 0.34 to 1.5). But GPT-2's k biases: a key's bias adds q . b_k to every
# score of a query's row, which the softmax takes out, so their gradient
# is zero but for rounding, which AdamW scales up to the learning rate in
# each device's own way (as t-cuda-model says of gains whose readers are
# all normalized): they differ, and only they. No trace: its sums read a
# gate's activations, which GPT-2's MLP has none of (on the CPU as on the
# device).
RUN="--data $FIX/corpus.txt --batch 4 --seq-len 16 --d-model 32 --n-layers 2 --n-heads 4
	--threads 1 --ckpt-every 12 --eval-every 6 --schedule constant"
for run in gpt2,adamw gemma,adamw gemma2,adamw gemma2,muon; do
	arch=${run%,*} opt=${run#*,}
	test_expect_success "sw-train --arch $arch --optimizer $opt --device emu: the same tensors" '
		for dev in cpu emu; do
			sw-train $RUN --trace "" --arch $arch --optimizer $opt --steps 12 --out $arch-$opt-$dev \
				--device $dev >/dev/null &&
			sw-ls $arch-$opt-$dev/ckpt-000012.h5 >$dev.ls0 && cut -f2- $dev.ls0 >$dev.ls || exit 1
		done &&
		test_cmp cpu.ls emu.ls && test_line_count -gt 10 emu.ls
	'
	if have_python_modules "h5py, numpy"; then
		test_expect_success "sw-train --arch $arch --optimizer $opt --device emu: the CPU's values to 1e-3" '
			"$PY" "$SW_TOP/tests/e2e/params_close.py" $arch-$opt-emu/ckpt-000012.h5 \
				$arch-$opt-cpu/ckpt-000012.h5 1e-3 >far
			test $? -le 1 && cat far &&
			awk "!/\/transformer\.h\.[0-9]+\.attn\.c_attn\.bias:k /" far >others &&
			test_line_count = 0 others
		'
	else
		test_skip "sw-train --arch $arch --optimizer $opt --device emu: the CPU's values" 'no python3-h5py'
	fi
done

test_done
