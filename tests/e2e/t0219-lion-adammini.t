#!/bin/sh
# sw-train --optimizer lion and adam-mini against an independent float64
# implementation of each paper's update (tests/e2e/optim_reference.py:
# numpy on the checkpoints read with h5py), 1 and 10 steps on a tiny
# model with wsd, warmup, Blockwise LR and per-group lr, on the CPU and
# the emulated device; resumed bit for bit; 2 ranks under mpirun (and
# --zero1) against one process; the optimizer state's size against
# AdamW's; sw-hessian --preconditioned from Adam-mini's blocks, and Lion
# refused there.
. "$(dirname "$0")/../lib/tap.sh"

if ! have_python_modules "numpy, h5py"; then
	test_skip 'Lion and Adam-mini against numpy' 'python3-numpy or python3-h5py not installed'
	test_done
fi

CORPUS=$FIX/corpus.txt
REF=$SW_TOP/tests/e2e/optim_reference.py
CLOSE=$SW_TOP/tests/e2e/params_close.py
# wsd over 10 steps (the last 3 decay), 2 of warmup, the paper's eq. 5
# ratios, the groups' ratios 1:0.5:2, no clipping (the reference takes the
# recorded gradients as they are)
BW=emb=10,qk=8,ffn=6,vo=4,norm=1
SCHED="--steps 10 --warmup 2 --schedule wsd --decay-frac 0.3 --blockwise-lr=$BW --group-lr 1:0.5:2"
RUN="--data $CORPUS --batch 2 --seq-len 16 --d-model 32 --n-layers 2 --n-heads 4 --n-kv-heads 2
	--threads 1 --grad-clip 0 --eval-every 0 --trace '' $SCHED"
REFSCHED="--warmup 2 --steps 10 --decay-frac 0.3 --blockwise $BW --group-lr 1:0.5:2"
# the sharpness paper's Lion recipe: a fifth of AdamW's lr (1e-3), wd 0.5
LION="--optimizer lion --lr 2e-4 --wd 0.5"
MINI="--optimizer adam-mini --lr 1e-3 --wd 0.1"
LIONREF="--lr 2e-4 --wd 0.5 --beta2 0.99 $REFSCHED"
MINIREF="--lr 1e-3 --wd 0.1 --beta2 0.95 $REFSCHED"

# the optimizers' options by name (lion, mini)
opts() {
	case $1 in lion) echo "$LION" ;; mini) echo "$MINI" ;; esac
}

# p0: a run at lr 0 moves nothing (coupled wd is lr wd): its checkpoint
# holds the parameters every run of this seed starts from
for dev in cpu emu; do
	test_expect_success "setup ($dev): the start, and 10 steps of each with every gradient saved" '
		eval sw-train $RUN --device $dev --lr 0 --steps 1 --ckpt-every 1 --out $dev.p0 >/dev/null &&
		for o in lion mini; do
			eval sw-train $RUN --device $dev $(opts $o) --ckpt-every 1 --save-grads --out $dev.$o >out &&
			echo $dev.$o/ckpt-000010.h5 >expect && test_cmp expect out || exit 1
		done
	'
	for n in 1 10; do
		test_expect_success "$dev: Lion, $n step(s): every parameter and m as the paper's update, 1e-6" '
			"$PY" "$REF" lion $dev.p0/ckpt-000001.h5 $dev.lion $n $LIONREF >ref.out &&
			cat ref.out && test_line_count = 1 ref.out
		'
		test_expect_success "$dev: Adam-mini, $n step(s): every parameter, m and block v, 1e-6" '
			"$PY" "$REF" adam-mini $dev.p0/ckpt-000001.h5 $dev.mini $n $MINIREF >ref.out &&
			cat ref.out && test_line_count = 1 ref.out
		'
	done
done

# the reference is not blind: Lion's beta2 of AdamW (0.95) is not the run's
test_expect_success 'the reference fails on the wrong beta2 (Lion with 0.95)' '
	test_expect_code 1 "$PY" "$REF" lion cpu.p0/ckpt-000001.h5 cpu.lion 10 \
		--lr 2e-4 --wd 0.5 --beta2 0.95 $REFSCHED >ref.out &&
	grep -q "^/optim_state/m/" ref.out
'

test_expect_success 'the defaults recorded: Lion beta2 0.99, Adam-mini (and AdamW) 0.95' '
	h5dump -a /optim/beta2 cpu.lion/ckpt-000010.h5 >a && grep -q "(0): 0.99$" a &&
	h5dump -a /optim/beta2 cpu.mini/ckpt-000010.h5 >a && grep -q "(0): 0.95$" a &&
	h5dump -a /optim/optimizer cpu.mini/ckpt-000010.h5 >a && grep -q "(0): \"adam-mini\"" a
'

for dev in cpu emu; do
	test_expect_success "$dev: resumed at step 5, bit for bit the uninterrupted run (both)" '
		for o in lion mini; do
			eval sw-train $RUN --device $dev $(opts $o) --ckpt-every 5 --out $dev.$o.full >/dev/null &&
			mkdir $dev.$o.half && cp $dev.$o.full/ckpt-000005.h5 $dev.$o.half/ &&
			sw-train --data "$CORPUS" --out $dev.$o.half --resume $dev.$o.half/ckpt-000005.h5 \
				--threads 1 --device $dev --eval-every 0 --trace "" >/dev/null &&
			cmp $dev.$o.full/ckpt-000010.h5 $dev.$o.half/ckpt-000010.h5 || exit 1
		done
	'
done

# bytes of /optim_state: AdamW m + v (2 floats a parameter); Adam-mini m
# and one v per block (the partition: optim_reference.py's); Lion m alone
test_expect_success 'the state: Adam-mini about half of AdamW'"'"'s, its v one value per block, Lion m alone' '
	eval sw-train $RUN --steps 1 --out adamw >/dev/null &&
	"$PY" - cpu.mini/ckpt-000010.h5 adamw/ckpt-000001.h5 cpu.lion/ckpt-000010.h5 >sizes <<-\EOF &&
	import sys, h5py, numpy as np
	def state(f):
	    with h5py.File(f, "r") as h:
	        return {g: sum(d.nbytes for d in h["optim_state"][g].values()) for g in h["optim_state"]}
	mini, adamw, lion = (state(f) for f in sys.argv[1:4])
	with h5py.File(sys.argv[1], "r") as h:
	    blocks = 0
	    for k, d in h["params"].items():
	        a = {x: (y.decode() if isinstance(y, bytes) else y) for x, y in d.attrs.items()}
	        if a["kind"] != "matrix":
	            blocks += 1
	        elif a["role"] in ("q", "k"):
	            blocks += d.shape[0] // int(a["head_dim"])
	        else:
	            blocks += d.shape[0]
	n = adamw["m"] // 4
	print("parameters %d, Adam-mini blocks %d" % (n, blocks))
	print("AdamW state %d bytes (v %d), Adam-mini %d (v %d), Lion %d" % (
	    sum(adamw.values()), adamw["v"], sum(mini.values()), mini["v"], sum(lion.values())))
	ok = (mini["v"] == 4 * blocks and mini["m"] == adamw["m"] == adamw["v"] and set(lion) == {"m"}
	      and lion["m"] == adamw["m"] and sum(mini.values()) < 0.55 * sum(adamw.values()))
	sys.exit(0 if ok else 1)
	EOF
	cat sizes
'
[ -f sizes ] && sed "s/^/# /" sizes

# an AdamW checkpoint whose v is Adam-mini's expanded to every element of
# its block (numpy) is the preconditioner Adam-mini's must give: the same
# table
test_expect_success 'sw-hessian --preconditioned on Adam-mini: each element its block'"'"'s v' '
	HS="--data $CORPUS --batch-tokens 32 --seq-len 16 --threads 1 --top 1 --probes 4 --quiet" &&
	cp cpu.mini/ckpt-000010.h5 expanded.h5 &&
	"$PY" - expanded.h5 <<-\EOF &&
	import sys, h5py, numpy as np
	with h5py.File(sys.argv[1], "r+") as h:
	    h["optim"].attrs["optimizer"] = np.bytes_("adamw")
	    for k in list(h["optim_state/v"]):
	        d = h["optim_state/v"][k]
	        full = np.repeat(d[()], int(d.attrs["block_numel"])).reshape(h["params"][k].shape)
	        del h["optim_state/v"][k]
	        h["optim_state/v"].create_dataset(k, data=full.astype(np.float32))
	EOF
	sw-hessian $HS --preconditioned cpu.mini/ckpt-000010.h5 >mini.pre &&
	sw-hessian $HS --preconditioned expanded.h5 >expanded.pre &&
	sed "s|expanded.h5|cpu.mini/ckpt-000010.h5|" expanded.pre >expect && test_cmp expect mini.pre &&
	sw-hessian $HS cpu.mini/ckpt-000010.h5 >plain && ! cmp -s plain mini.pre
'

test_expect_success 'sw-hessian --preconditioned on Lion (no second moment): one line, exit 65' '
	test_expect_code 65 sw-hessian --data "$CORPUS" --batch-tokens 32 --seq-len 16 --threads 1 \
		--preconditioned cpu.lion/ckpt-000010.h5 >out 2>err &&
	test_one_error sw-hessian cpu.lion/ckpt-000010.h5 && grep -q "the optimizer is lion" err
'

test_expect_success 'an unknown optimizer: exit 64, the names listed' '
	test_expect_code 64 sw-train --data "$CORPUS" --out bad --optimizer lamb 2>err &&
	grep -q "lion, adam-mini" err
'

# MPI: t0066's setting (tests/lib/mpi.sh)
. "$SW_TOP/tests/lib/mpi.sh"
if [ -n "$MPI" ]; then
	# a global batch of 4: 2 sequences a rank; 1e-5 as t0066 (the
	# all-reduce adds the ranks' float32 sums in another order)
	test_expect_success 'mpirun -np 2 (and --zero1): one process'"'"'s run to float rounding, --zero1 the same bits' '
		for o in lion mini; do
			eval sw-train $RUN --batch 4 $(opts $o) --out $o.one >/dev/null &&
			eval mpirun -np 2 sw-train $RUN --batch 4 $(opts $o) --out $o.two >/dev/null &&
			eval mpirun -np 2 sw-train $RUN --batch 4 $(opts $o) --zero1 --out $o.zero >/dev/null &&
			"$PY" "$CLOSE" $o.two/ckpt-000010.h5 $o.one/ckpt-000010.h5 1e-5 &&
			cmp $o.two/ckpt-000010.h5 $o.zero/ckpt-000010.h5 || exit 1
		done
	'
	test_expect_success '--zero1 resumed on 2 ranks: bit for bit the uncut run' '
		for o in lion mini; do
			eval mpirun -np 2 sw-train $RUN --batch 4 $(opts $o) --zero1 --ckpt-every 5 --out $o.zfull >/dev/null &&
			mkdir $o.zhalf && cp $o.zfull/ckpt-000005.h5 $o.zhalf/ &&
			mpirun -np 2 sw-train --data "$CORPUS" --out $o.zhalf --resume $o.zhalf/ckpt-000005.h5 \
				--threads 1 --zero1 --eval-every 0 --trace "" >/dev/null &&
			cmp $o.zfull/ckpt-000010.h5 $o.zhalf/ckpt-000010.h5 || exit 1
		done
	'
else
	test_skip 'mpirun -np 2: one process'"'"'s run' 'no mpirun or an MPI build'
	test_skip '--zero1 resumed on 2 ranks' 'no mpirun or an MPI build'
fi

test_done
