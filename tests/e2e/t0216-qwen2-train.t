#!/bin/sh
# sw-train --arch qwen2: a Qwen2 (Llama's step with q, k, v biases after
# the three products, zero at the start as transformers initializes
# them), trained like the other vectors of its block, resumed bit for
# bit, on the emulated device too, and exported by sw-convert to a
# Hugging Face directory that loads with the loss sw-train logged.
#
# The references are independent of our code: tests/e2e/torch_reference.py
# (float64 PyTorch, Debian's python3-torch) for the loss, every gradient
# and one AdamW step, as t0210 checks Llama (1e-5 relative: float32
# against float64 over d_model 32, 2 layers, 36 tokens is ~1e-6); the
# export read with numpy and the same float64 forward, and where
# build/arch-venv holds transformers 4.47.1 (make arch-fixtures) its own
# Qwen2ForCausalLM in float64 (tests/e2e/hf_export_reference.py), the
# loss to 1e-5 again. The emulated device against the CPU: to 1e-3 of
# each tensor's scale, t0064's tolerance and reasons; against itself bit
# for bit.
. "$(dirname "$0")/../lib/tap.sh"

CORPUS=$FIX/corpus.txt
RUN="--data $CORPUS --arch qwen2 --d-model 32 --n-layers 2 --n-heads 4 --n-kv-heads 2 --seq-len 12
	--batch 3 --eval-every 0 --trace '' --threads 1 --lr 1e-2 --schedule constant --wd 0.1"
REF=$SW_TOP/tests/e2e/torch_reference.py
EXPORT=$SW_TOP/tests/e2e/hf_export_reference.py
VENV=$SW_TOP/build/arch-venv/bin/python

test_expect_success '--arch: llama, qwen2, gpt2, gemma or gemma2, anything else a usage error' '
	test_expect_code 64 sw-train $RUN --arch gemma3 --steps 1 --out x >out 2>err &&
	head -n 1 err >first &&
	echo "sw-train: --arch: llama, qwen2, gpt2, gemma or gemma2" >expect &&
	test_cmp expect first && test ! -e x
'

test_expect_success 'setup: 3 steps of Qwen2 with --save-grads, Blockwise LR, no clipping' '
	eval sw-train $RUN --steps 3 --ckpt-every 1 --save-grads --blockwise-lr --grad-clip 0 \
		--out run >last &&
	echo run/ckpt-000003.h5 >expect && test_cmp expect last
'

test_expect_success 'the checkpoint: /config says qwen2, sw-ls lists each layer'"'"'s q, k, v biases' '
	h5dump -a /config/arch run/ckpt-000003.h5 >arch &&
	grep "(0): \"qwen2\"" arch &&
	sw-ls --role q_bias,k_bias,v_bias run/ckpt-000003.h5 >ls &&
	cut -f2-8 ls >got &&
	cat >expect <<-\EOF &&
	name	block	role	layer	kind	dtype	shape
	model.layers.0.self_attn.q_proj.bias	qk	q_bias	0	vector	F32	32
	model.layers.0.self_attn.k_proj.bias	qk	k_bias	0	vector	F32	16
	model.layers.0.self_attn.v_proj.bias	vo	v_bias	0	vector	F32	16
	model.layers.1.self_attn.q_proj.bias	qk	q_bias	1	vector	F32	32
	model.layers.1.self_attn.k_proj.bias	qk	k_bias	1	vector	F32	16
	model.layers.1.self_attn.v_proj.bias	vo	v_bias	1	vector	F32	16
	EOF
	test_cmp expect got
'

test_expect_success 'resume from a checkpoint: bit for bit the uninterrupted run' '
	eval sw-train $RUN --steps 6 --ckpt-every 3 --out full >/dev/null &&
	mkdir half && cp full/ckpt-000003.h5 half/ &&
	sw-train --data "$CORPUS" --out half --resume half/ckpt-000003.h5 --threads 1 \
		--eval-every 0 --trace "" >/dev/null &&
	cmp full/ckpt-000006.h5 half/ckpt-000006.h5
'

test_expect_success 'the emulated device trains Qwen2: the same tensors, its q, k, v biases too' '
	eval sw-train $RUN --steps 6 --ckpt-every 3 --out emu --device emu >/dev/null &&
	sw-ls full/ckpt-000006.h5 >cpu.all && sw-ls emu/ckpt-000006.h5 >emu.all &&
	sed "s,^full/,emu/," cpu.all >expect && test_cmp expect emu.all &&
	test "$(grep -c "_proj\.bias" emu.all)" = 6
'

test_expect_success 'the emulated device resumed on itself: bit for bit' '
	mkdir ehalf && cp emu/ckpt-000003.h5 ehalf/ &&
	sw-train --data "$CORPUS" --out ehalf --resume ehalf/ckpt-000003.h5 --threads 1 \
		--eval-every 0 --trace "" --device emu >/dev/null &&
	cmp emu/ckpt-000006.h5 ehalf/ckpt-000006.h5
'

test_expect_success 'sw-sharpness and sw-hessian --device emu on the Qwen2 run: the CPU'"'"'s to 1e-6' '
	for dev in cpu emu; do
		sw-sharpness --recompute --data "$CORPUS" --batch-tokens 96 --seq-len 12 --draws 2 \
			--per-tensor --device $dev full/ckpt-000006.h5 >$dev.sharp &&
		sw-hessian --data "$CORPUS" --batch-tokens 36 --seq-len 12 --device $dev \
			full/ckpt-000006.h5 >$dev.hess || exit 1
	done &&
	test "$(grep -c "_proj\.bias" emu.sharp)" = 6 &&
	numbers_close 1e-6 cpu.sharp emu.sharp && numbers_close 1e-6 cpu.hess emu.hess
'

if ! have_python_modules "torch, h5py, numpy"; then
	test_skip 'the biases start at zero' 'python3-torch not installed'
	test_skip 'sw-train on Qwen2 against PyTorch' 'python3-torch not installed'
	test_skip 'sw-convert: the export'"'"'s config.json and biases' 'python3-torch not installed'
	test_skip 'the export against PyTorch' 'python3-torch not installed'
	test_skip 'transformers loads the export' 'python3-torch not installed'
	test_skip 'the emulated device'"'"'s parameters against the CPU'"'"'s' 'python3-torch not installed'
	test_done
fi

# Adam's first step from p = 0 with no weight decay and no clipping is
# p = -lr g / (|g| + eps) (m^ = g, v^ = g^2): a bias that did not start
# at 0 or was decayed is off by far more than float32 rounding (1e-6 lr)
test_expect_success 'the biases start at zero, no weight decay, their block'"'"'s lr (Blockwise: qk 8, vo 4)' '
	"$PY" - run/ckpt-000001.h5 >report <<-\EOF &&
	import sys, h5py, numpy as np
	f = h5py.File(sys.argv[1], "r")
	base = float(f["params/model.layers.0.input_layernorm.weight"].attrs["lr"])
	ratio = {"qk": 8, "vo": 4}
	n = 0
	for k, d in f["params"].items():
	    if not k.endswith("_proj.bias"):
	        continue
	    a = d.attrs
	    lr, g = float(a["lr"]), f["grads"][k][()].astype(np.float64)
	    want = -lr * g / (np.abs(g) + float(f["optim"].attrs["eps"]))
	    err = np.abs(d[()] - want).max() / lr
	    if err > 1e-6 or float(a["wd"]) != 0 or a["wd_mode"] != "none" or \
	       abs(lr / base - ratio[a["block"]]) > 1e-12:
	        print(k, err, a["wd"], a["wd_mode"], lr / base)
	    n += 1
	if n != 6:
	    print(n, "biases")
	EOF
	test_line_count = 0 report
'

# the reference's report, every line within 1e-5 (t0210's check)
check() {
	awk '
		$1 == "loss" && $2 > 1e-5 { print; bad = 1 }
		$1 == "grad" && $3 > 1e-5 + $4 { print; bad = 1 }
		$1 == "update" && $3 > 1e-5 + $4 { print; bad = 1 }
		/_proj\.bias/ { b++ }
		{ n++ }
		END { if (n < 3) { print "no report"; bad = 1 } if (b && b != 12) { print b " bias lines"; bad = 1 } exit bad }' "$1"
}

# the export's loss: one line, within 1e-5
loss_close() {
	awk '$1 == "loss" && $2 <= 1e-5 { n++ } END { exit !(n == 1 && NR == 1) }' "$1"
}

test_expect_success 'sw-train on Qwen2: the loss, every gradient and one AdamW step match PyTorch in float64' '
	"$PY" "$REF" run/ckpt-000002.h5 run/ckpt-000003.h5 >report &&
	test "$(grep -c "_proj\.bias" report)" = 12 &&
	check report
'

test_expect_success 'sw-convert: a Qwen2ForCausalLM directory with the biases' '
	sw-convert run/ckpt-000002.h5 hf >/dev/null &&
	"$PY" -c "
import json
c = json.load(open(\"hf/config.json\"))
assert c[\"architectures\"] == [\"Qwen2ForCausalLM\"] and c[\"model_type\"] == \"qwen2\", c
assert not c[\"use_sliding_window\"] and c[\"attention_bias\"] is False, c
" &&
	sw-ls --role q_bias,k_bias,v_bias hf >hf.ls &&
	cut -f2- ls >expect && cut -f2- hf.ls >got && test_cmp expect got
'

test_expect_success 'the export, read with numpy, gives sw-train'"'"'s logged loss in float64 PyTorch; without its biases it does not' '
	"$PY" "$EXPORT" hf run/ckpt-000003.h5 torch >report &&
	loss_close report &&
	"$PY" "$EXPORT" hf run/ckpt-000003.h5 nobias >report0 &&
	test_line_count = 1 report0 && test_expect_code 1 loss_close report0
'

if [ -x "$VENV" ] && "$VENV" -c "import transformers, h5py" 2>/dev/null; then
	test_expect_success 'transformers'"'"' Qwen2ForCausalLM loads the export, every tensor, with the same loss (float64)' '
		"$VENV" "$EXPORT" hf run/ckpt-000003.h5 transformers >report &&
		loss_close report
	'
else
	test_skip 'transformers loads the export with the same loss' \
		'no build/arch-venv with transformers (make arch-fixtures; make check needs no PyPI)'
fi

test_expect_success 'the emulated device: the CPU run to float32 rounding' '
	"$PY" "$SW_TOP/tests/e2e/params_close.py" emu/ckpt-000006.h5 full/ckpt-000006.h5 1e-3
'

test_done
