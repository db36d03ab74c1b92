#!/bin/sh
# sw-train --moe: a mixture of experts' checkpoint names its router and
# experts as Mixtral's files do (Qwen2-MoE's with a shared expert), every
# expert's matrices its own tensors with the expert's number, which sw-ls
# and sw-norms --expert read; a bad or unsupported combination is a
# usage error (exit 64, one message and the usage); a resume is bit for bit the
# uninterrupted run; the trace logs each MoE layer's load per expert, its
# max/mean and the router's entropy; the tools without experts' math yet
# refuse the checkpoint.
. "$(dirname "$0")/../lib/tap.sh"

CORPUS=$FIX/corpus.txt
SMALL="--batch 3 --seq-len 12 --d-model 32 --n-layers 2 --n-heads 4 --threads 1 --eval-every 0"

test_expect_success '--moe 4:2: the Mixtral layout, 4 experts of 3 matrices per layer, d-ff/K wide' '
	sw-train --data "$CORPUS" --out mx $SMALL --steps 2 --moe 4:2 --trace "" >/dev/null &&
	sw-ls --layer 1 --role router,expert_gate,expert_down mx/ckpt-000002.h5 >ls &&
	cut -f2,4,5,8,10 ls >actual &&
	cat >expect <<-\EOF &&
	name	role	layer	shape	expert
	model.layers.1.block_sparse_moe.gate.weight	router	1	4x32	-1
	model.layers.1.block_sparse_moe.experts.0.w1.weight	expert_gate	1	44x32	0
	model.layers.1.block_sparse_moe.experts.1.w1.weight	expert_gate	1	44x32	1
	model.layers.1.block_sparse_moe.experts.2.w1.weight	expert_gate	1	44x32	2
	model.layers.1.block_sparse_moe.experts.3.w1.weight	expert_gate	1	44x32	3
	model.layers.1.block_sparse_moe.experts.0.w2.weight	expert_down	1	32x44	0
	model.layers.1.block_sparse_moe.experts.1.w2.weight	expert_down	1	32x44	1
	model.layers.1.block_sparse_moe.experts.2.w2.weight	expert_down	1	32x44	2
	model.layers.1.block_sparse_moe.experts.3.w2.weight	expert_down	1	32x44	3
	EOF
	test_cmp expect actual
'

test_expect_success '--moe 4:2:1 --moe-dense-layers 1 --moe-ffn 16 --moe-shared-ffn 24: Qwen2-MoE layout, layer 0 dense' '
	sw-train --data "$CORPUS" --out qw $SMALL --steps 2 --moe 4:2:1 --moe-dense-layers 1 \
		--moe-ffn 16 --moe-shared-ffn 24 --moe-renorm no --trace "" >/dev/null &&
	sw-ls --role gate,router,shared_router,shared_gate,expert_up qw/ckpt-000002.h5 >ls &&
	cut -f2,4,5,8,10 ls >actual &&
	cat >expect <<-\EOF &&
	name	role	layer	shape	expert
	model.layers.0.mlp.gate_proj.weight	gate	0	88x32	-1
	model.layers.1.mlp.gate.weight	router	1	4x32	-1
	model.layers.1.mlp.experts.0.up_proj.weight	expert_up	1	16x32	0
	model.layers.1.mlp.experts.1.up_proj.weight	expert_up	1	16x32	1
	model.layers.1.mlp.experts.2.up_proj.weight	expert_up	1	16x32	2
	model.layers.1.mlp.experts.3.up_proj.weight	expert_up	1	16x32	3
	model.layers.1.mlp.shared_expert_gate.weight	shared_router	1	1x32	-1
	model.layers.1.mlp.shared_expert.gate_proj.weight	shared_gate	1	24x32	-1
	EOF
	test_cmp expect actual &&
	h5dump -A -g /config qw/ckpt-000002.h5 >cfg &&
	grep -A4 "\"moe_renorm\"" cfg >renorm && grep -q "(0): 0" renorm
'

if have_python_modules "h5py, numpy"; then
test_expect_success 'sw-norms --expert 2: exactly expert 2s matrices, their Frobenius norms numpys' '
	sw-norms --expert 2 mx/ckpt-000002.h5 >norms &&
	awk -F"\t" "NR == 1 { for (i = 1; i <= NF; i++) c[\$i] = i; next }
		{ print \$c[\"name\"], \$c[\"expert\"], \$c[\"frobenius\"] }" norms >got &&
	test_line_count = 6 got &&
	"$PY" -c "
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], \"r\")
bad = 0
for line in open(sys.argv[2]):
    name, expert, fro = line.split()
    ref = np.linalg.norm(np.array(f[\"params\"][name], dtype=np.float64))
    # float32 values, the norm summed in double: 1e-6 relative
    if \".experts.2.\" not in name or expert != \"2\" or abs(float(fro) - ref) > 1e-6 * ref:
        print(\"bad\", name, expert, fro, ref); bad = 1
sys.exit(bad)" mx/ckpt-000002.h5 got
'
else
	test_skip 'sw-norms --expert against numpy' 'python3-h5py or python3-numpy not installed'
fi

# exact: the same binary and threads both times
test_expect_success 'resume: bit for bit the uninterrupted run (AdamW; Muon and Scion per expert matrix)' '
	for opt in adamw:--moe=4:2 muon:--moe=4:2:1 scion:--moe=4:2 adamw:--moe=4:1:1; do
		rm -rf full half &&
		sw-train --data "$CORPUS" --out full $SMALL --steps 6 --ckpt-every 3 \
			--optimizer ${opt%%:*} ${opt#*:} --trace-every 3 >/dev/null &&
		mkdir half && cp full/ckpt-000003.h5 half/ &&
		sw-train --data "$CORPUS" --out half --resume half/ckpt-000003.h5 --threads 1 \
			--eval-every 0 --trace "" >/dev/null &&
		cmp full/ckpt-000006.h5 half/ckpt-000006.h5 || { echo "$opt differs"; exit 1; }
	done
'

test_expect_success 'the trace: per MoE layer the load per expert (summing to K), its max/mean, the entropy' '
	sw-trace --series aux_loss,moe_load,moe_load_max_mean,moe_router_entropy full/trace.h5 >tr &&
	awk -F"\t" "
		NR == 1 { n = NF; next }
		{ rows++
		  s0 = \$3 + \$4 + \$5 + \$6; s1 = \$7 + \$8 + \$9 + \$10
		  # 4:1:1, K = 1: the loads of a layer are fractions summing to 1
		  if (s0 < 0.999999 || s0 > 1.000001 || s1 < 0.999999 || s1 > 1.000001) bad = 1
		  mx = \$3; for (i = 4; i <= 6; i++) if (\$i > mx) mx = \$i
		  if (\$11 < mx * 4 - 1e-9 || \$11 > mx * 4 + 1e-9) bad = 1
		  # entropy of 4 probabilities: in (0, log 4]
		  if (\$13 <= 0 || \$13 > log(4) + 1e-12 || \$14 <= 0 || \$14 > log(4) + 1e-12) bad = 1
		  if (\$2 <= 0) bad = 1 }
		END { exit bad || rows != 2 || n != 14 }" tr
'

test_expect_success 'bad values and combinations not built yet: exit 64, one message' '
	for args in "--moe 4" "--moe 4:5" "--moe 1:1" "--moe 4:2:2" "--moe x:2" "--moe 4:2:" \
		"--moe 4:2 --moe-renorm maybe" "--moe 4:2 --moe-ffn 0" "--moe 4:2 --moe-aux-coef -1" \
		"--moe 4:2 --moe-dense-layers 3" "--moe-ffn 8" "--moe-aux-coef 0.1" \
		"--moe 4:2 --moe-shared-ffn 8" "--moe 4:2 --device emu" "--moe 4:2 --arch gpt2" \
		"--moe 4:2 --multipliers row" "--moe 4:2 --norm-everywhere" \
		"--moe 4:2 --scale-design ffn=hg" "--moe 4:2 --fisher-every 1" "--moe 4:2 --zero1"; do
		rm -rf bad &&
		test_expect_code 64 sw-train --data "$CORPUS" --out bad $SMALL --steps 1 $args 2>err &&
		grep -c "^sw-train: " err >n && echo 1 >one && test_cmp one n && ! test -e bad ||
			{ echo "$args"; cat err; exit 1; }
	done
'

test_expect_success 'sw-hessian, sw-sharpness and sw-convert refuse a mixture of experts (exit 64)' '
	test_expect_code 64 sw-hessian --data "$CORPUS" --batch-tokens 24 mx/ckpt-000002.h5 >out 2>err &&
	test_line_count = 1 err && grep -q "mixture of experts are not built yet" err &&
	test_expect_code 64 sw-sharpness --data "$CORPUS" --batch-tokens 24 mx/ckpt-000002.h5 >out 2>err &&
	test_line_count = 1 err && grep -q "mixture of experts is not built yet" err &&
	test_expect_code 64 sw-convert mx/ckpt-000002.h5 hf.out 2>err &&
	test_line_count = 1 err && ! test -e hf.out
'

if have_python_modules h5py; then
test_expect_success 'a file whose expert number is past n_experts: exit 65, one line naming it' '
	cp mx/ckpt-000002.h5 bad-expert.h5 &&
	"$PY" -c "
import h5py
f = h5py.File(\"bad-expert.h5\", \"r+\")
f[\"params/model.layers.0.block_sparse_moe.experts.1.w1.weight\"].attrs[\"expert\"] = 7
" &&
	test_expect_code 65 sw-ls bad-expert.h5 >out 2>err &&
	test_line_count = 1 err && grep -q "experts.1.w1.weight: expert 7 is outside 0..3" err
'
else
	test_skip 'a bad expert number' 'python3-h5py not installed'
fi

test_done
