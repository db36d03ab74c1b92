#!/bin/sh
# sw-train --arch gpt2: GPT-2 (GPT2LMHeadModel; nanoGPT's GPT with biases)
# trained, resumed bit for bit under each optimizer, data parallel,
# checked against an independent float64 model, exported by sw-convert to
# a directory transformers loads with the loss sw-train logged, and
# started (--init) from transformers' and nanoGPT's own checkpoints.
#
# The references are independent of our code: tests/e2e/torch_reference.py
# (float64 PyTorch, Debian's python3-torch) for the loss, every gradient
# and one AdamW step, as t0210 checks Llama (1e-5 relative: float32
# against float64 over d_model 32, 2 layers, 36 tokens is ~1e-6);
# transformers 4.47.1's GPT2LMHeadModel in float64 where build/arch-venv
# holds it (make arch-fixtures; tests/e2e/hf_export_reference.py), the
# loss to 1e-5 again; the fixtures' tensors read here with numpy (the
# safetensors layout) and Debian's torch.load (nanoGPT's ckpt.pt), which
# a run at lr 0 must hold bit for bit.
. "$(dirname "$0")/../lib/tap.sh"

CORPUS=$FIX/corpus.txt
RUN="--data $CORPUS --arch gpt2 --d-model 32 --n-layers 2 --n-heads 4 --seq-len 12
	--batch 3 --eval-every 0 --trace '' --threads 1 --lr 1e-2 --schedule constant --wd 0.1"
REF=$SW_TOP/tests/e2e/torch_reference.py
EXPORT=$SW_TOP/tests/e2e/hf_export_reference.py
VENV=$SW_TOP/build/arch-venv/bin/python

# --norm-wd all: the gains decay, the LayerNorms' biases (biases) do not
test_expect_success 'setup: 3 steps of GPT-2 with --save-grads, Blockwise LR, no clipping, --norm-wd all' '
	eval sw-train $RUN --steps 3 --ckpt-every 1 --save-grads --blockwise-lr --grad-clip 0 \
		--norm-wd all --out run >last &&
	echo run/ckpt-000003.h5 >expect && test_cmp expect last
'

# the trace's statistics read every activation the family has: GPT-2's
# MLP has no gate, whose gain the trace leaves empty (NaN), the rest numbers
test_expect_success 'a traced GPT-2 run: the gate gains empty, every other sublayer gain a number' '
	eval sw-train $RUN --trace traced.h5 --trace-every 1 --steps 2 --out traced >/dev/null &&
	sw-trace --series sublayer_gain traced.h5 >gains &&
	awk -F"\t" "NR == 1 { for (i = 2; i <= NF; i++) name[i] = \$i; next }
		{ for (i = 2; i <= NF; i++) if ((name[i] ~ /\\.gate\$/) != (\$i == \"\")) bad++; rows++ }
		END { exit bad || rows != 2 || NF != 15 }" gains
'

# GPT2Config's: layer_norm_epsilon 1e-5, gelu_new, n_inner 4 n_embd,
# n_positions rows of wpe (here --seq-len), the head tied
test_expect_success 'the checkpoint: /config is GPT-2'"'"'s, wpe has --seq-len rows, c_fc 4 d_model' '
	for a in arch hidden_act norm_eps tie_embeddings d_ff; do
		h5dump -a /config/$a run/ckpt-000003.h5 || exit 1
	done >config &&
	grep -c "(0): \"gpt2\"\|(0): \"gelu_new\"\|(0): 1e-05\|(0): 1$\|(0): 128$" config >n &&
	echo 5 >expect && test_cmp expect n &&
	sw-ls --name "transformer.w*" --name "*c_fc.weight" --layer -1,0 run/ckpt-000003.h5 >ls &&
	cut -f2,8 ls >got &&
	printf "name\tshape\ntransformer.wte.weight\t122x32\ntransformer.wpe.weight\t12x32\ntransformer.h.0.mlp.c_fc.weight\t128x32\n" >expect &&
	test_cmp expect got
'

test_expect_success 'resume from a checkpoint: bit for bit the uninterrupted run' '
	eval sw-train $RUN --steps 6 --ckpt-every 3 --out full >/dev/null &&
	mkdir half && cp full/ckpt-000003.h5 half/ &&
	sw-train --data "$CORPUS" --out half --resume half/ckpt-000003.h5 --threads 1 \
		--eval-every 0 --trace "" >/dev/null &&
	cmp full/ckpt-000006.h5 half/ckpt-000006.h5
'

test_expect_success 'Muon and Scion train GPT-2 and resume it bit for bit' '
	for o in muon scion; do
		eval sw-train $RUN --optimizer $o --steps 4 --ckpt-every 2 --out $o >/dev/null &&
		mkdir $o.half && cp $o/ckpt-000002.h5 $o.half/ &&
		sw-train --data "$CORPUS" --out $o.half --resume $o.half/ckpt-000002.h5 --threads 1 \
			--eval-every 0 --trace "" >/dev/null &&
		cmp $o/ckpt-000004.h5 $o.half/ckpt-000004.h5 || exit 1
	done
'

test_expect_success 'the emulated device trains GPT-2: the same tensors, resumed bit for bit' '
	eval sw-train $RUN --steps 6 --ckpt-every 3 --out emu --device emu >/dev/null &&
	sw-ls full/ckpt-000006.h5 >cpu.all && sw-ls emu/ckpt-000006.h5 >emu.all &&
	sed "s,^full/,emu/," cpu.all >expect && test_cmp expect emu.all &&
	mkdir ehalf && cp emu/ckpt-000003.h5 ehalf/ &&
	sw-train --data "$CORPUS" --out ehalf --resume ehalf/ckpt-000003.h5 --threads 1 \
		--eval-every 0 --trace "" --device emu >/dev/null &&
	cmp emu/ckpt-000006.h5 ehalf/ckpt-000006.h5
'

# OpenMPI as t0066 runs it (tests/lib/mpi.sh sets MPI)
. "$SW_TOP/tests/lib/mpi.sh"
# t0066's check and tolerance: a sum of the ranks' gradients in another
# order, the norms of every matrix and the loss (not each value: the k
# biases' gradient is 0 but for rounding, which Adam's normalization
# makes a step of lr either way, in PyTorch as here)
if [ -n "$MPI" ]; then
	test_expect_success 'two ranks under mpirun: one process'"'"'s run, 1e-5 (wpe'"'"'s gradient the embedding'"'"'s)' '
		eval sw-train $RUN --batch 4 --steps 4 --out one >/dev/null &&
		mkdir job && (cd job && eval mpirun -np 2 sw-train $RUN --batch 4 --steps 4 --out ../two \
			>../out2 2>../err2) &&
		test_line_count = 0 err2 &&
		sw-norms one/ckpt-000004.h5 >n1 && sw-norms two/ckpt-000004.h5 >n2 &&
		sed "s|^one/|two/|" n1 >n1two && numbers_close 1e-5 n1two n2 &&
		h5dump -a /metrics/train_loss one/ckpt-000004.h5 >l1 &&
		h5dump -a /metrics/train_loss two/ckpt-000004.h5 >l2 &&
		sed "s|one/|two/|" l1 >l1two && numbers_close 1e-5 l1two l2
	'
else
	test_skip 'two ranks under mpirun: one process'"'"'s run' 'no mpirun or an MPI build'
fi

if ! have_python_modules "torch, h5py, numpy"; then
	test_skip 'the biases start at zero, undecayed' 'python3-torch not installed'
	test_skip 'sw-train on GPT-2 against PyTorch' 'python3-torch not installed'
	test_skip 'the emulated device: the CPU run to float32 rounding' 'python3-torch not installed'
	test_skip 'sw-convert: the export' 'python3-torch not installed'
	test_skip 'transformers loads the export' 'python3-torch not installed'
	test_skip '--init from transformers'"'"' GPT-2' 'python3-torch not installed'
	test_skip '--init from nanoGPT'"'"'s ckpt.pt' 'python3-torch not installed'
	test_done
fi

# Adam's first step from p = 0 with no weight decay and no clipping is
# p = -lr g / (|g| + eps) (m^ = g, v^ = g^2): a bias that did not start
# at 0 or was decayed is off by far more than float32 rounding (1e-6 lr);
# the LayerNorms' gains, decayed under --norm-wd all, are not biases
test_expect_success 'every bias starts at zero, no weight decay, its block'"'"'s lr; the gains decay' '
	"$PY" - run/ckpt-000001.h5 >report <<-\EOF &&
	import sys, h5py, numpy as np
	f = h5py.File(sys.argv[1], "r")
	base = float(f["params/transformer.h.0.ln_1.weight"].attrs["lr"])
	ratio = {"qk": 8, "vo": 4, "ffn": 6, "norm": 1}
	n = 0
	for k, d in f["params"].items():
	    a = d.attrs
	    if k.endswith("ln_1.weight") and (float(a["wd"]) != 0.1 or a["wd_mode"] != "coupled"):
	        print(k, "undecayed")
	    if ".bias" not in k:
	        continue
	    lr, g = float(a["lr"]), f["grads"][k][()].astype(np.float64)
	    want = -lr * g / (np.abs(g) + float(f["optim"].attrs["eps"]))
	    err = np.abs(d[()] - want).max() / lr
	    if err > 1e-6 or float(a["wd"]) != 0 or a["wd_mode"] != "none" or \
	       abs(lr / base - ratio[a["block"]]) > 1e-12:
	        print(k, err, a["wd"], a["wd_mode"], lr / base)
	    n += 1
	# per layer the 3 of c_attn, those of c_proj, c_fc, the MLP c_proj, ln_1, ln_2; ln_f
	if n != 2 * 8 + 1:
	    print(n, "biases")
	EOF
	test_line_count = 0 report
'

# the reference's report, every line within 1e-5 (t0210's check): the
# loss, a grad and an update line for each of the 36 tensors (the tied
# head is wte)
check() {
	awk '
		$1 == "loss" && $2 > 1e-5 { print; bad = 1 }
		$1 == "grad" && $3 > 1e-5 + $4 { print; bad = 1 }
		$1 == "update" && $3 > 1e-5 + $4 { print; bad = 1 }
		{ n++ }
		END { if (n != 1 + 2 * 36) { print n " lines"; bad = 1 } exit bad }' "$1"
}

# the export's loss: one line, within 1e-5
loss_close() {
	awk '$1 == "loss" && $2 <= 1e-5 { n++ } END { exit !(n == 1 && NR == 1) }' "$1"
}

test_expect_success 'sw-train on GPT-2: the loss, every gradient and one AdamW step match PyTorch in float64' '
	"$PY" "$REF" run/ckpt-000002.h5 run/ckpt-000003.h5 >report &&
	check report
'

# t0064's tolerance and reasons (t0216's check): to 1e-3 of each tensor's
# scale; the k biases, whose gradient is 0 but for rounding (Adam makes
# that a step of lr either way: t0066's note above), are not compared
test_expect_success 'the emulated device: the CPU run to float32 rounding' '
	"$PY" - emu/ckpt-000006.h5 full/ckpt-000006.h5 >report <<-\EOF &&
	import sys, h5py, numpy as np
	a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
	for k in b["params"]:
	    if k.endswith("c_attn.bias:k"):
	        continue
	    x, y = a["params"][k][()].astype(np.float64), b["params"][k][()].astype(np.float64)
	    err = np.abs(x - y).max() / np.abs(y).max()
	    if not err <= 1e-3:
	        print(k, err)
	EOF
	test_line_count = 0 report
'

# GPT2LMHeadModel's layout: Conv1D weights [in, out], c_attn q, k, v
# joined by columns (its bias by values), no lm_head (tied)
test_expect_success 'sw-convert: a GPT2LMHeadModel directory, its config.json and Conv1D weights' '
	sw-convert run/ckpt-000002.h5 hf >/dev/null &&
	"$PY" - hf run/ckpt-000002.h5 >report <<-\EOF &&
	import json, struct, sys, h5py, numpy as np
	c = json.load(open(sys.argv[1] + "/config.json"))
	want = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 32, "n_layer": 2,
	        "n_head": 4, "n_positions": 12, "n_inner": 128, "activation_function": "gelu_new",
	        "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}
	for k, v in want.items():
	    if c.get(k) != v:
	        print(k, c.get(k))
	b = open(sys.argv[1] + "/model.safetensors", "rb").read()
	n = struct.unpack("<Q", b[:8])[0]
	head = json.loads(b[8:8 + n])
	def t(name):
	    lo, hi = head[name]["data_offsets"]
	    return np.frombuffer(b[8 + n + lo:8 + n + hi], np.float32).reshape(head[name]["shape"])
	p = h5py.File(sys.argv[2], "r")["params"]
	h = "transformer.h.1."
	qkv = np.concatenate([p[h + "attn.c_attn.weight:" + s][()] for s in "qkv"])
	bias = np.concatenate([p[h + "attn.c_attn.bias:" + s][()] for s in "qkv"])
	for name, ours in ((h + "attn.c_attn.weight", qkv.T), (h + "attn.c_attn.bias", bias),
	                   (h + "attn.c_proj.weight", p[h + "attn.c_proj.weight"][()].T),
	                   (h + "mlp.c_fc.weight", p[h + "mlp.c_fc.weight"][()].T),
	                   (h + "mlp.c_proj.weight", p[h + "mlp.c_proj.weight"][()].T),
	                   ("transformer.wpe.weight", p["transformer.wpe.weight"][()])):
	    if t(name).shape != ours.shape or not np.array_equal(t(name), ours):
	        print(name, t(name).shape, ours.shape)
	if "lm_head.weight" in head or len(head) - ("__metadata__" in head) != 2 + 2 * 12 + 2:
	    print(sorted(head))
	EOF
	test_line_count = 0 report &&
	sw-ls hf >hf.ls && sw-ls run/ckpt-000002.h5 >ls &&
	cut -f2- ls >expect && cut -f2- hf.ls >got && test_cmp expect got
'

if [ -x "$VENV" ] && "$VENV" -c "import transformers, h5py" 2>/dev/null; then
	test_expect_success 'transformers'"'"' GPT2LMHeadModel loads the export, every tensor, with the same loss (float64)' '
		"$VENV" "$EXPORT" hf run/ckpt-000003.h5 transformers >report &&
		loss_close report
	'
else
	test_skip 'transformers loads the export with the same loss' \
		'no build/arch-venv with transformers (make arch-fixtures; make check needs no PyPI)'
fi

# tokens below the fixtures' vocabulary (64), nanoGPT's uint16 .bin
test_expect_success 'setup: tokens below 64' '
	"$PY" -c "
import numpy as np
np.random.default_rng(1).integers(0, 64, 4000).astype(np.uint16).tofile(\"tok.bin\")
"
'

# at lr 0 (and no decay) one step leaves the parameters as read: the
# file's, Conv1D weights turned and c_attn split by rows of n_embd
# (modeling_gpt2.py's split of its output); the step's loss is that of
# the file's model on the step's batch
init() {
	sw-train --data tok.bin --init "$1" --out "$2" --batch 2 --steps 1 --lr 0 --save-grads \
		--eval-every 0 --trace "" --threads 1 >/dev/null
}

test_expect_success '--init from transformers'"'"' GPT-2 (fixtures/arch/gpt2): its tensors as the model holds them' '
	init "$FIX/arch/gpt2" hfinit &&
	"$PY" - "$FIX/arch/gpt2/model.safetensors" hfinit/ckpt-000001.h5 >report <<-\EOF &&
	import json, struct, sys, h5py, numpy as np
	b = open(sys.argv[1], "rb").read()
	n = struct.unpack("<Q", b[:8])[0]
	head = json.loads(b[8:8 + n])
	p = h5py.File(sys.argv[2], "r")["params"]
	seen = 0
	for name, h in head.items():
	    if name == "__metadata__":
	        continue
	    lo, hi = h["data_offsets"]
	    w = np.frombuffer(b[8 + n + lo:8 + n + hi], np.float32).reshape(h["shape"])
	    conv = name.startswith("transformer.h.") and name.endswith(".weight") and w.ndim == 2
	    w = w.T if conv else w
	    parts = [(name + ":" + s, w[i * 16:(i + 1) * 16]) for i, s in enumerate("qkv")] \
	        if "c_attn" in name else [(name, w)]
	    for k, want in parts:
	        seen += 1
	        if not np.array_equal(p[k][()], want):
	            print(k)
	if seen != len(p):
	    print(seen, len(p))
	EOF
	test_line_count = 0 report
'

if [ -x "$VENV" ] && "$VENV" -c "import transformers, h5py" 2>/dev/null; then
	test_expect_success '--init from transformers'"'"' GPT-2: the first step'"'"'s loss is transformers'"'"' own' '
		"$VENV" "$EXPORT" "$FIX/arch/gpt2" hfinit/ckpt-000001.h5 transformers >report &&
		loss_close report
	'
else
	test_skip '--init from transformers'"'"' GPT-2: its loss' 'no build/arch-venv with transformers'
fi

# nanoGPT's nn.Linear is [out, in] as stored; its GELU the exact one
# (nn.GELU()), exported as activation_function gelu
test_expect_success '--init from nanoGPT'"'"'s ckpt.pt: its state dict as the model holds it' '
	init "$FIX/nanogpt/ckpt.pt" nginit &&
	"$PY" - "$FIX/nanogpt/ckpt.pt" nginit/ckpt-000001.h5 >report <<-\EOF &&
	import sys, h5py, numpy as np, torch
	sd = torch.load(sys.argv[1], map_location="cpu")["model"]
	p = h5py.File(sys.argv[2], "r")["params"]
	seen = 0
	for k, v in sd.items():
	    name, w = k[len("_orig_mod."):], v.numpy()
	    if name == "lm_head.weight":
	        continue                # tied: wte itself
	    parts = [(name + ":" + s, w[i * 16:(i + 1) * 16]) for i, s in enumerate("qkv")] \
	        if "c_attn" in name else [(name, w)]
	    for q, want in parts:
	        seen += 1
	        if not np.array_equal(p[q][()], want):
	            print(q)
	if seen != len(p):
	    print(seen, len(p))
	EOF
	test_line_count = 0 report &&
	h5dump -a /config/hidden_act nginit/ckpt-000001.h5 >act && grep "(0): \"gelu\"" act
'

if [ -x "$VENV" ] && "$VENV" -c "import transformers, h5py" 2>/dev/null; then
	test_expect_success '--init from nanoGPT: its export'"'"'s loss in transformers is the first step'"'"'s' '
		sw-convert nginit/ckpt-000001.h5 nghf >/dev/null &&
		"$VENV" "$EXPORT" nghf nginit/ckpt-000001.h5 transformers >report &&
		loss_close report
	'
else
	test_skip '--init from nanoGPT: its loss' 'no build/arch-venv with transformers'
fi

test_done
