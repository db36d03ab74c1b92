#!/bin/sh
# sw-train and sw-sharpness data parallel under mpirun: 2 ranks with a
# global batch B give the one-process run with batch B within 1e-5
# relative (the all-reduce adds the ranks' partial sums, in another order
# than one process's float32 sums: numerical; up to 2e-7 is seen over 20
# steps, on AVX-512, AVX2 and SSE2 kernels alike);
# rank 0 alone writes; ZeRO-1 gives the same bits as without; a run
# resumes on another number of ranks; a rank killed stops the job and
# leaves every checkpoint whole; the GNB estimate split over 2 ranks is
# the one-process estimate on the same labels.
. "$(dirname "$0")/../lib/tap.sh"

if ! command -v mpirun >/dev/null 2>&1; then
	echo "1..0 # SKIP no mpirun (OpenMPI: make deps installs openmpi-bin)"
	exit 0
fi
sw-train --version >version || exit 1
if ! grep -q "^MPI: .*data parallel" version; then
	echo "1..0 # SKIP sw-train built without MPI (no mpicc when it was built)"
	exit 0
fi

# OpenMPI in a sandbox (tests/lib/mpi.sh)
. "$SW_TOP/tests/lib/mpi.sh"

CORPUS=$FIX/corpus.txt
# a batch of 5 sequences: 2 and 3 on the two ranks
RUN="--data $CORPUS --d-model 32 --n-layers 2 --n-kv-heads 2 --seq-len 16 --batch 5 --grad-accum 2 \
	--lr 3e-3 --warmup 5 --steps 20 --ckpt-every 10 --eval-every 10 --trace-every 5 --fisher-every 10 \
	--threads 1"
SERIES=loss,val_loss,grad_norm,lr,tokens,residual_rms,attn_out_rms,sublayer_gain,weight_rms,q_head_rms

test_expect_success 'setup: one process, and two ranks with the same global batch' '
	sw-train $RUN --out one >out1 &&
	mkdir job && (cd job && mpirun -np 2 sw-train $RUN --out ../two >../out2 2>../err2) &&
	echo ../two/ckpt-000020.h5 >expect && test_cmp expect out2 &&
	test_line_count = 0 err2
'

test_expect_success 'rank 0 alone writes: the run directory holds what one process writes, nothing else' '
	ls -A job >after && test_line_count = 0 after &&
	ls one >expect && ls two >actual && test_cmp expect actual &&
	printf "ckpt-000010.h5\nckpt-000020.h5\ntrace.h5\n" >expect && test_cmp expect actual
'

test_expect_success 'the trace: loss, validation loss, gradient norm, activation RMS as one process, 1e-5' '
	sw-trace --series $SERIES one/trace.h5 >t1 &&
	sw-trace --series $SERIES two/trace.h5 >t2 &&
	test_line_count = 5 t2 &&
	numbers_close 1e-5 t1 t2
'

test_expect_success 'the checkpoints: every norm of every matrix as one process, 1e-5' '
	sw-norms one/ckpt-*.h5 >n1 && sw-norms two/ckpt-*.h5 >n2 &&
	sed "s|^one/|two/|" n1 >n1two && numbers_close 1e-5 n1two n2
'

test_expect_success '/fisher, estimated by the two ranks in each checkpoint: as one process, 1e-4' '
	sw-sharpness --per-layer one/ckpt-*.h5 >s1 && sw-sharpness --per-layer two/ckpt-*.h5 >s2 &&
	sed "s|^one/|two/|" s1 >s1two && numbers_close 1e-4 s1two s2
'

# exact (here and with 3 ranks below): the same ranks and threads both
# times, so the same all-reduce of the same gradient buckets in the same
# order; ZeRO-1 only shards the optimizer state and copies the updated
# tensors back (dp.h)
# reparameterized gains: their gradients are handed on to the directions
# and magnitudes only at the end of the backward pass, so the ranks
# exchange them then (as with multipliers). The gains, their magnitudes
# and the matrices compared; not ER's directions, whose entries sit near
# 0, so their statistics (max|a|/min|a|) amplify the last bits
test_expect_success 'gains reparameterized (--scale-reparam er), 2 ranks: as one process, 1e-5' '
	sw-train $RUN --scale-reparam er --steps 10 --out rp1 >/dev/null &&
	(cd job && mpirun -np 2 sw-train $RUN --scale-reparam er --steps 10 --out ../rp2 >/dev/null 2>../rperr) &&
	test_line_count = 0 rperr &&
	sw-norms --scale-vectors rp1/ckpt-000010.h5 >s1 && sw-norms --scale-vectors rp2/ckpt-000010.h5 >s2 &&
	awk -F"\t" "\$6 !~ /_dir\$/" s1 | sed "s|^rp1/|rp2/|" >g1 && awk -F"\t" "\$6 !~ /_dir\$/" s2 >g2 &&
	test_line_count = 11 g2 && numbers_close 1e-5 g1 g2 &&
	sw-norms rp1/ckpt-000010.h5 >n1 && sw-norms rp2/ckpt-000010.h5 >n2 &&
	sed "s|^rp1/|rp2/|" n1 >n1two && numbers_close 1e-5 n1two n2
'

test_expect_success '--zero1: the optimizer state sharded, the same bits as without (muon)' '
	mpirun -np 2 sw-train $RUN --optimizer muon --out plain >out &&
	mpirun -np 2 sw-train $RUN --optimizer muon --zero1 --out zero >out &&
	for g in /params /optim_state; do
		h5dump -g $g plain/ckpt-000020.h5 | sed 1d >a &&
		h5dump -g $g zero/ckpt-000020.h5 | sed 1d >b &&
		test_cmp a b || return 1
	done
'

# exact: a resume on the same ranks and threads
test_expect_success '--zero1, resumed from its step-10 checkpoint: the uncut run, bit for bit' '
	mkdir zr && cp zero/ckpt-000010.h5 zr/ &&
	mpirun -np 2 sw-train $RUN --optimizer muon --zero1 --out zr --resume zr/ckpt-000010.h5 >out &&
	for g in /params /optim_state; do
		h5dump -g $g zero/ckpt-000020.h5 | sed 1d >a &&
		h5dump -g $g zr/ckpt-000020.h5 | sed 1d >b &&
		test_cmp a b || return 1
	done
'

test_expect_success '--zero1 with adamw over 3 ranks: the same bits as 3 ranks without' '
	mpirun -np 3 sw-train $RUN --out plain3 >out &&
	mpirun -np 3 sw-train $RUN --zero1 --out zero3 >out &&
	for g in /params /optim_state; do
		h5dump -g $g plain3/ckpt-000020.h5 | sed 1d >a &&
		h5dump -g $g zero3/ckpt-000020.h5 | sed 1d >b &&
		test_cmp a b || return 1
	done
'

# another number of ranks: another order of the sums, numerical (1e-5 as
# above)
test_expect_success 'resume on 1 rank from a 2-rank checkpoint: the 2-rank run, 1e-5' '
	mkdir r1 && cp two/ckpt-000010.h5 r1/ &&
	sw-train $RUN --out r1 --resume r1/ckpt-000010.h5 --trace "" >out &&
	sw-norms r1/ckpt-000020.h5 >a && sw-norms two/ckpt-000020.h5 >b &&
	sed "s|^r1/|two/|" a >a2 && numbers_close 1e-5 a2 b
'

test_expect_success 'resume on 2 ranks from a 1-rank checkpoint: the 1-rank run, 1e-5' '
	mkdir r2 && cp one/ckpt-000010.h5 r2/ &&
	mpirun -np 2 sw-train $RUN --out r2 --resume r2/ckpt-000010.h5 --trace "" >out &&
	sw-norms r2/ckpt-000020.h5 >a && sw-norms one/ckpt-000020.h5 >b &&
	sed "s|^r2/|one/|" a >a2 && numbers_close 1e-5 a2 b
'

test_expect_success 'a batch smaller than the ranks: one message, exit 64, nothing written' '
	test_expect_code 64 mpirun -np 2 sw-train $RUN --batch 1 --out small >out 2>err &&
	grep -c "^sw-train: a batch of 1 sequences cannot be split over 2 processes" err >n &&
	echo 1 >expect && test_cmp expect n &&
	test_line_count = 0 out && ! test -e small
'

test_expect_success '--device emu under mpirun: refused (one process per GPU run), exit 64, nothing written' '
	test_expect_code 64 mpirun -np 2 sw-train $RUN --device emu --out gpu2 >out 2>err &&
	grep -c "^sw-train: --device emu under mpirun: not built yet" err >n &&
	echo 1 >expect && test_cmp expect n &&
	test_line_count = 0 out && ! test -e gpu2
'

# the pid of rank R of the job mpirun (pid $1) started
rank_pid() {
	for p in $(pgrep -P "$1"); do
		if tr "\0" "\n" <"/proc/$p/environ" | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

test_expect_success 'rank 1 killed: the job stops, mpirun says so, every checkpoint whole' '
	mpirun -np 2 sw-train --data "$CORPUS" --d-model 64 --seq-len 32 --batch 8 --steps 100000 \
		--ckpt-every 5 --eval-every 0 --threads 1 --out killed >out 2>err &
	job=$! &&
	i=0 && while ! test -e killed/ckpt-000010.h5 && test $i -lt 600; do sleep 0.1; i=$((i + 1)); done &&
	victim=$(rank_pid $job 1) && kill -9 "$victim" &&
	{ wait $job; echo $? >status; } &&
	test_status 137 status &&
	grep -q "rank 1 .* exited on signal 9" err &&
	test_line_count = 0 out &&
	ls killed >files && grep -v "^ckpt-[0-9]*\.h5\$" files >other &&
	echo trace.h5 >expect && test_cmp expect other &&
	for c in killed/ckpt-*.h5; do sw-ls "$c" >/dev/null || return 1; done &&
	grep ckpt files >ckpts && last=$(tail -n 1 ckpts) &&
	sw-train --data "$CORPUS" --out killed --resume "killed/$last" --steps 0 >out &&
	echo "killed/$last" >expect && test_cmp expect out
'

# the means S within 1e-5; log10 quantiles within 1e-4 (a tiny entry of
# the gradient, a sum of larger terms of both signs, keeps fewer digits)
test_expect_success 'sw-sharpness, 2 ranks: the one-process estimate on the same labels' '
	SH="--recompute --data $CORPUS --seq-len 16 --batch-tokens 1040 --draws 2 --threads 1 --per-tensor" &&
	sw-sharpness $SH one/ckpt-000020.h5 >g1 &&
	mpirun -np 2 sw-sharpness $SH one/ckpt-000020.h5 >g2 &&
	test_line_count = 22 g2 &&
	cut -f1-8 g1 >m1 && cut -f1-8 g2 >m2 && numbers_close 1e-5 m1 m2 &&
	numbers_close 1e-4 g1 g2
'

test_expect_success 'sw-sharpness, 2 ranks, names on stdin: rank 0 reads them, one table' '
	printf "one/ckpt-000010.h5\none/ckpt-000020.h5\n" >names &&
	mpirun -np 2 sw-sharpness --recompute --data "$CORPUS" --seq-len 16 --batch-tokens 512 \
		--threads 1 <names >g2 &&
	sw-sharpness --recompute --data "$CORPUS" --seq-len 16 --batch-tokens 512 --threads 1 \
		one/ckpt-000010.h5 one/ckpt-000020.h5 >g1 &&
	test_line_count = 13 g2 && cut -f1-5 g1 >m1 && cut -f1-5 g2 >m2 && numbers_close 1e-5 m1 m2 &&
	numbers_close 1e-4 g1 g2
'

test_expect_success 'sw-sharpness, 2 ranks, a data file missing: one message, exit 66' '
	test_expect_code 66 mpirun -np 2 sw-sharpness --recompute --data nonexistent --seq-len 16 \
		one/ckpt-000020.h5 >out 2>err &&
	grep -c "^sw-sharpness: one/ckpt-000020.h5: nonexistent: No such file or directory\$" err >n &&
	echo 1 >expect && test_cmp expect n
'

test_expect_success 'a mixture of experts under mpirun: not built yet, exit 64 and no run directory' '
	mkdir -p moejob &&
	(cd moejob && test_expect_code 64 mpirun -np 2 sw-train --data "$CORPUS" --d-model 32 \
		--n-layers 2 --seq-len 16 --batch 4 --steps 2 --moe 4:2 --threads 1 \
		--out ../moe2 >../moeout 2>../moeerr) &&
	grep -q "^sw-train: a mixture of experts under mpirun: not built yet" moeerr && ! test -e moe2
'

test_done
