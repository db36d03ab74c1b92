#!/bin/sh
# sw-train --device and --precision, sw-sharpness and sw-hessian --device:
# the CUDA trainer's path. Without a GPU (no /dev/nvidia0), --device cuda is
# refused in one line, exit 69, nothing written. --device emu runs the
# CUDA path (lib/model/cuda/gpumodel.c, its kernel bodies and products through
# the host emulation of lib/model/cuda/gpu_emu.c), so the wiring of train.c's
# --device hook is checked here: resume across devices, /fisher,
# /optim_state, traces, sharpness, the Hessian. The GPU itself: tests/e2e/t0271-cuda.t.
#
# What is exact and what is numerical (docs/numerics.md, "Exact and numerical"):
# - the emulated device against itself, same binary and machine: bit for
#   bit, resumed or not (cmp);
# - the emulated device against the CPU: numerical. Its products are
#   OpenBLAS calls of other shapes and layouts than the CPU's, which some
#   OpenBLAS kernels sum in another order (SkylakeX and Prescott gave the
#   same bits, Haswell did not). Measured after these 12 steps, max |a-b|
#   over max |b| per tensor: emu against CPU up to 2.0e-6 (Haswell), and
#   the CPU on one OpenBLAS kernel against another up to 1.8e-4 (AdamW,
#   whose update divides by sqrt(v) and so magnifies the rounding of
#   gradients near zero). The tolerance, 1e-3, is 5x the larger; one step
#   missed or repeated moves a tensor (its moments first) by 0.34 to 1.5.
#   The losses of the trace agree to 8e-9 (tolerance 1e-6), its statistics
#   to 7e-8, one float32 ulp (tolerance 1e-6).
. "$(dirname "$0")/../lib/tap.sh"

CORPUS=$FIX/corpus.txt
RUN="--data $CORPUS --batch 4 --seq-len 16 --d-model 32 --n-layers 2 --n-heads 4 --n-kv-heads 2
	--threads 1 --ckpt-every 6 --eval-every 6 --fisher-every 6 --trace-every 2 --schedule constant"

if [ -e /dev/nvidia0 ]; then
	no_gpu=
else
	no_gpu=1
fi

if [ -n "$no_gpu" ]; then
	test_expect_success 'no GPU: --device cuda is one line, exit 69, no output directory' '
		test_expect_code 69 sw-train $RUN --steps 2 --out gpu --device cuda >out 2>err &&
		test_one_error sw-train cuda &&
		grep -E "^sw-train: cuda: (no usable GPU|built without CUDA)" err &&
		test_line_count = 0 out && test ! -e gpu
	'
	test_expect_success 'no GPU: sw-sharpness --device cuda says so for the file, exit 69' '
		sw-train $RUN --steps 2 --out small >/dev/null &&
		test_expect_code 69 sw-sharpness --recompute --data "$CORPUS" --batch-tokens 64 --seq-len 16 \
			--device cuda small/ckpt-000002.h5 >out 2>err &&
		test_one_error sw-sharpness small/ckpt-000002.h5 &&
		grep -E "^sw-sharpness: small/ckpt-000002.h5: cuda: (no usable GPU|built without CUDA)" err
	'
	test_expect_success 'no GPU: sw-hessian --device cuda says so for the file, exit 69' '
		test_expect_code 69 sw-hessian --data "$CORPUS" --batch-tokens 64 --seq-len 16 \
			--device cuda small/ckpt-000002.h5 >out 2>err &&
		test_one_error sw-hessian small/ckpt-000002.h5 &&
		grep -E "^sw-hessian: small/ckpt-000002.h5: cuda: (no usable GPU|built without CUDA)" err
	'
else
	test_skip 'no GPU: --device cuda refused' 'this machine has /dev/nvidia0'
	test_skip 'no GPU: sw-sharpness --device cuda refused' 'this machine has /dev/nvidia0'
	test_skip 'no GPU: sw-hessian --device cuda refused' 'this machine has /dev/nvidia0'
fi

test_expect_success 'an unknown device, bf16 on the CPU: usage errors' '
	test_expect_code 64 sw-train $RUN --steps 2 --out x --device tpu 2>err &&
	grep "^sw-train: --device: cpu, cuda or emu" err &&
	test_expect_code 64 sw-train $RUN --steps 2 --out x --precision bf16 2>err &&
	grep "^sw-train: --precision bf16 is for a GPU" err &&
	test_expect_code 64 sw-train $RUN --steps 2 --out x --device emu --precision fp16 2>err &&
	test_expect_code 64 sw-sharpness --device tpu x.h5 2>err && test ! -e x
'

# the parameters and optimizer state of two checkpoints to TOL (above)
CKPT_TOL=1e-3
for opts in "--optimizer adamw --multipliers row --tie" "--optimizer muon --qk-norm --norm-everywhere --multipliers rowcol" \
	"--optimizer scion --multipliers col --save-grads"; do
	test_expect_success "emu: the CPU's checkpoints, the same tensors (exact) ($opts)" '
		rm -rf cpu emu &&
		sw-train $RUN $opts --steps 12 --out cpu >/dev/null &&
		sw-train $RUN $opts --steps 12 --out emu --device emu >last &&
		echo emu/ckpt-000012.h5 >expect && test_cmp expect last &&
		sw-ls cpu/ckpt-000012.h5 >cpu.ls && sw-ls emu/ckpt-000012.h5 >emu.ls &&
		sed "s,^cpu/,emu/," cpu.ls >expect && test_cmp expect emu.ls
	'
	if have_python_modules h5py; then
		test_expect_success "emu: the CPU's values to float32 rounding ($opts)" '
			"$PY" "$SW_TOP/tests/e2e/params_close.py" emu/ckpt-000006.h5 cpu/ckpt-000006.h5 $CKPT_TOL &&
			"$PY" "$SW_TOP/tests/e2e/params_close.py" emu/ckpt-000012.h5 cpu/ckpt-000012.h5 $CKPT_TOL
		'
	else
		test_skip "emu: the CPU's values to float32 rounding ($opts)" 'no python3-h5py'
	fi
done

# every series but the wall-clock seconds
SERIES=loss,val_loss,lr,grad_norm,tokens,out_norm,residual_rms,attn_out_rms,mlp_out_rms,sublayer_gain
SERIES=$SERIES,weight_rms,q_head_rms,k_head_rms,multiplier
test_expect_success 'emu: the trace, the same steps and tokens, every series to 1e-6 of the CPU' '
	sw-trace --series $SERIES cpu/trace.h5 >cpu.all && sw-trace --series $SERIES emu/trace.h5 >emu.all &&
	numbers_close 1e-6 cpu.all emu.all && test_line_count = 7 emu.all &&
	cut -f1,6 cpu.all >expect && cut -f1,6 emu.all >got && test_cmp expect got
'

if have_python_modules h5py; then
	test_expect_success 'emu with gradient accumulation: the CPU run to 1e-5 (Scion, column multipliers)' '
		rm -rf cpu2 emu2 &&
		sw-train $RUN --optimizer scion --multipliers col --grad-accum 2 --steps 12 --out cpu2 >/dev/null &&
		sw-train $RUN --optimizer scion --multipliers col --grad-accum 2 --steps 12 --out emu2 \
			--device emu >/dev/null &&
		"$PY" "$SW_TOP/tests/e2e/params_close.py" emu2/ckpt-000012.h5 cpu2/ckpt-000012.h5 1e-5
	'
else
	test_skip 'emu with gradient accumulation: the CPU run to 1e-5' 'no python3-h5py'
fi

test_expect_success 'setup: a CPU run of 12 steps, and its first 6 (Muon, QK-norm)' '
	sw-train $RUN --optimizer muon --qk-norm --steps 12 --out ref >/dev/null &&
	sw-train $RUN --optimizer muon --qk-norm --steps 6 --out half >/dev/null
'

test_expect_success 'emu resumed on emu: the uninterrupted run bit for bit (same binary, same machine)' '
	sw-train $RUN --optimizer muon --qk-norm --steps 12 --out eref --device emu >/dev/null &&
	sw-train $RUN --optimizer muon --qk-norm --steps 6 --out b --device emu >/dev/null &&
	cp -r b e2 &&
	sw-train $RUN --optimizer muon --qk-norm --resume e2/ckpt-000006.h5 --steps 12 --out e2 \
		--device emu >/dev/null &&
	cmp eref/ckpt-000012.h5 e2/ckpt-000012.h5
'

if have_python_modules h5py; then
	test_expect_success 'resumed across devices: CPU then emu, emu then CPU, each the 12 steps to float32 rounding' '
		rm -rf a && cp -r half a &&
		sw-train $RUN --optimizer muon --qk-norm --resume a/ckpt-000006.h5 --steps 12 --out a \
			--device emu >/dev/null &&
		"$PY" "$SW_TOP/tests/e2e/params_close.py" a/ckpt-000012.h5 ref/ckpt-000012.h5 $CKPT_TOL &&
		sw-train $RUN --optimizer muon --qk-norm --resume b/ckpt-000006.h5 --steps 12 --out b >/dev/null &&
		"$PY" "$SW_TOP/tests/e2e/params_close.py" b/ckpt-000012.h5 ref/ckpt-000012.h5 $CKPT_TOL
	'
else
	test_skip 'resumed across devices: the 12 steps to float32 rounding' 'no python3-h5py'
fi

test_expect_success 'sw-sharpness --device emu: the CPU estimate to 1e-6 (fresh batches, and one batch in micro-batches)' '
	for dev in cpu emu; do
		sw-sharpness --recompute --data "$CORPUS" --batch-tokens 256 --seq-len 16 --draws 2 \
			--device $dev ref/ckpt-000012.h5 >$dev.sharp || exit 1
		sw-sharpness --recompute --data "$CORPUS" --batch-tokens 256 --seq-len 16 --draws 2 \
			--same-batch --micro-batch 4 --per-tensor --device $dev ref/ckpt-000012.h5 >$dev.micro || exit 1
	done &&
	numbers_close 1e-6 cpu.sharp emu.sharp && numbers_close 1e-6 cpu.micro emu.micro &&
	test_line_count = 7 emu.sharp
'

# The Hessian's products on the emulated device are the CPU's R-operator
# in float32 summed in another order (t-cuda-model: each H v to 1e-5 of
# its tensor's norm); Lanczos and the trace take them to eigenvalues and
# traces that agreed here to 5e-7 relative (SkylakeX kernels), 3e-6
# (Haswell): 1e-5. The residual bound is the norm of a small residual,
# relative to itself it moved 1.3e-5 (Haswell): it is compared to 1e-5 of
# the block's lambda_1, the scale it bounds.
test_expect_success 'sw-hessian --device emu: the CPU eigenvalues, traces and densities to 1e-5' '
	for dev in cpu emu; do
		sw-hessian --data "$CORPUS" --batch-tokens 128 --seq-len 16 --top 2 --probes 3 \
			--device $dev ref/ckpt-000012.h5 >$dev.hess &&
		sw-hessian --data "$CORPUS" --batch-tokens 128 --seq-len 16 --gauss-newton --top 1 \
			--probes 2 --micro-batch 4 --per-tensor --layer 1 --device $dev ref/ckpt-000012.h5 >$dev.gn &&
		sw-hessian --data "$CORPUS" --batch-tokens 64 --seq-len 16 --whole --density --slq-steps 8 \
			--block qk,vo --device $dev ref/ckpt-000012.h5 >$dev.slq || exit 1
	done &&
	test_line_count = 8 emu.hess && test_line_count = 13 emu.gn &&
	cut -f1-7,9-15 cpu.hess >cpu.h && cut -f1-7,9-15 emu.hess >emu.h && numbers_close 1e-5 cpu.h emu.h &&
	cut -f1-9,11-17 cpu.gn >cpu.g && cut -f1-9,11-17 emu.gn >emu.g && numbers_close 1e-5 cpu.g emu.g &&
	numbers_close 1e-5 cpu.slq emu.slq &&
	paste cpu.hess emu.hess >both.hess && paste cpu.gn emu.gn >both.gn &&
	# the residual bounds (bound, and bound_min, the last column) to 1e-5
	# of the block'"'"'s lambda_1: a residual is small, its digits rounding
	# (16 columns a table here, 18 with --per-tensor'"'"'s name)
	awk -F"\t" "NR > 1 { for (c = 8; c <= 16; c += 8) { d = \$c - \$(c + 16); s = \$5; if (d < 0) d = -d; if (s < 0) s = -s
		if (d > 1e-5 * s) bad = 1 } } END { exit NF != 32 || bad }" both.hess &&
	awk -F"\t" "NR > 1 { for (c = 10; c <= 18; c += 8) { d = \$c - \$(c + 18); s = \$8; if (d < 0) d = -d; if (s < 0) s = -s
		if (d > 1e-5 * s) bad = 1 } } END { exit NF != 36 || bad }" both.gn
'

test_expect_success 'emu --precision bf16: the products rounded to bf16, a loss near fp32s, not the same' '
	sw-train $RUN --steps 6 --out bf --device emu --precision bf16 >/dev/null &&
	sw-train $RUN --steps 6 --out fp >/dev/null &&
	sw-trace --series loss bf/trace.h5 >bf.loss &&
	sw-trace --series loss fp/trace.h5 >fp.loss &&
	numbers_close 1e-2 fp.loss bf.loss && test_expect_code 1 cmp -s fp.loss bf.loss
'

test_done
