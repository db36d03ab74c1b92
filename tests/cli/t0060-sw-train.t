#!/bin/sh
# sw-train: it learns, writes what the tools read, is deterministic,
# resumes bit for bit, stops on NaN keeping the last good checkpoint, and
# survives SIGINT and SIGKILL the way the man page says.
. "$(dirname "$0")/../lib/tap.sh"

CORPUS=$FIX/corpus.txt
SMALL="--batch 4 --seq-len 32 --d-model 32 --n-layers 2 --n-heads 4 --n-kv-heads 2 --threads 2"

# value of attribute $2 of object $3 in HDF5 file $1, via h5dump
h5attr() {
	h5dump -a "$3/$2" "$1" >attr.dump && sed -n 's/^ *(0): *//p' attr.dump | tr -d '"'
}

# killed_run DIR DELAY: a run writing a checkpoint at every step (a
# 1M-parameter model: most of the time goes to writing them) killed with
# SIGKILL DELAY seconds after its first checkpoint; fails unless it died
# of that signal
killed_run() {
	rm -rf "$1"
	sw-train --data "$CORPUS" --out "$1" --batch 2 --seq-len 16 --d-model 128 --n-layers 4 \
		--n-heads 4 --steps 100000 --ckpt-every 1 --trace-every 1 --threads 2 >/dev/null 2>&1 &
	pid=$! i=0
	while [ ! -f "$1/ckpt-000001.h5" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
	sleep "$2"; kill -9 $pid; wait $pid
	test $? = 137 || { echo "$1: not killed by SIGKILL"; return 1; }
}

# thresholds, not one machine's digits: every build and BLAS kernel here
# ends near train 1.98, val 2.00, far below them
test_expect_success 'setup: a run of 120 steps (run/, read below) learns: loss falls well below log(vocab)' '
	sw-train --data "$CORPUS" --out run $SMALL --steps 120 --lr 3e-3 --warmup 10 \
		--eval-every 60 --ckpt-every 60 --trace-every 10 >last &&
	echo run/ckpt-000120.h5 >expect && test_cmp expect last &&
	test -f run/ckpt-000060.h5 && test -f run/trace.h5 &&
	loss=$(h5attr run/ckpt-000120.h5 train_loss /metrics) &&
	val=$(h5attr run/ckpt-000120.h5 val_loss /metrics) &&
	echo "train $loss val $val" &&
	awk -v l="$loss" -v v="$val" "BEGIN { exit !(l < 2.5 && v < 2.7) }"
'

test_expect_success 'checkpoints carry what the tools rely on' '
	sw-ls run/ckpt-000120.h5 >ls && test_line_count = 22 ls &&
	q=/params/model.layers.1.self_attn.q_proj.weight &&
	test "$(h5attr run/ckpt-000120.h5 block $q)" = qk &&
	test "$(h5attr run/ckpt-000120.h5 wd_mode $q)" = coupled &&
	test "$(h5attr run/ckpt-000120.h5 n_heads $q)" = 4 &&
	test "$(h5attr run/ckpt-000120.h5 norm_type /params/model.norm.weight)" = input &&
	test "$(h5attr run/ckpt-000120.h5 step /)" = 120 &&
	test "$(h5attr run/ckpt-000120.h5 tokens /)" = $((120 * 4 * 32)) &&
	test "$(h5attr run/ckpt-000120.h5 optimizer /optim)" = adamw &&
	sw-norms --role lm_head run/ckpt-000060.h5 run/ckpt-000120.h5 >norms && test_line_count = 5 norms
'

# h5dump prints 6 digits
test_expect_success 'the lr recorded per tensor is the schedule cosine to lr/20 gives' '
	lr=$(h5attr run/ckpt-000120.h5 lr /params/model.embed_tokens.weight) &&
	awk -v lr="$lr" "BEGIN { w = 3e-3 * (0.05 + 0.95 * 0.5 * (1 + cos(3.141592653589793 * 109 / 110)));
		d = lr - w; if (d < 0) d = -d; exit !(d < 1e-5 * w) }"
'

# the spectra paper's width rules at d_model 128 from a base width 32
# (r = 4): hidden matrices lr 1e-2 / 4 and wd 0.2 * 4^p; the embedding,
# the head and the gains lr 1e-2 and no wd
lr_wd() {
	echo "$(h5attr $1 lr /params/$2) $(h5attr $1 wd /params/$2)"
}
test_expect_success '--width-base: the hidden matrices lr x d0/d and wd x sqrt(d/d0), the vector-like lr kept, wd 0' '
	sw-train --data "$CORPUS" --out wb --batch 2 --seq-len 16 --d-model 128 --n-layers 1 --n-heads 4 \
		--steps 1 --schedule constant --lr 1e-2 --wd 0.2 --width-base 32 --wd-scaling sqrt \
		--eval-every 0 --trace "" >/dev/null &&
	test "$(lr_wd wb/ckpt-000001.h5 model.layers.0.self_attn.q_proj.weight)" = "0.0025 0.4" &&
	test "$(lr_wd wb/ckpt-000001.h5 model.layers.0.mlp.down_proj.weight)" = "0.0025 0.4" &&
	test "$(lr_wd wb/ckpt-000001.h5 model.embed_tokens.weight)" = "0.01 0" &&
	test "$(lr_wd wb/ckpt-000001.h5 lm_head.weight)" = "0.01 0" &&
	test "$(lr_wd wb/ckpt-000001.h5 model.layers.0.input_layernorm.weight)" = "0.01 0" &&
	test "$(h5attr wb/ckpt-000001.h5 wd_scaling /optim)" = sqrt
'

test_expect_success '--wd-scaling linear and fixed; a resume keeps the rule the run began with' '
	sw-train --data "$CORPUS" --out wl --batch 2 --seq-len 16 --d-model 128 --n-layers 1 --n-heads 4 \
		--steps 1 --schedule constant --lr 1e-2 --wd 0.2 --width-base 32 --wd-scaling linear \
		--eval-every 0 --trace "" >/dev/null &&
	test "$(lr_wd wl/ckpt-000001.h5 model.layers.0.mlp.up_proj.weight)" = "0.0025 0.8" &&
	sw-train --data "$CORPUS" --out wl --resume wl/ckpt-000001.h5 --steps 2 --eval-every 0 --trace "" >/dev/null &&
	test "$(lr_wd wl/ckpt-000002.h5 model.layers.0.mlp.up_proj.weight)" = "0.0025 0.8" &&
	sw-train --data "$CORPUS" --out wf --batch 2 --seq-len 16 --d-model 128 --n-layers 1 --n-heads 4 \
		--steps 1 --schedule constant --lr 1e-2 --wd 0.2 --width-base 32 \
		--eval-every 0 --trace "" >/dev/null &&
	test "$(lr_wd wf/ckpt-000001.h5 model.layers.0.self_attn.v_proj.weight)" = "0.0025 0.2"
'

test_expect_success '--wd-scaling without --width-base is a usage error' '
	test_expect_code 64 sw-train --data "$CORPUS" --out x --wd-scaling sqrt 2>err &&
	grep -q "give --width-base" err
'

# exact: the same binary on the same data twice, the same threads
test_expect_success 'same seed, same threads: the same bytes' '
	sw-train --data "$CORPUS" --out a $SMALL --steps 12 --eval-every 6 --trace "" >/dev/null &&
	sw-train --data "$CORPUS" --out b $SMALL --steps 12 --eval-every 6 --trace "" >/dev/null &&
	cmp a/ckpt-000012.h5 b/ckpt-000012.h5
'

test_expect_success '--timing: one line of the steps and their phases, the same bytes as without' '
	sw-train --data "$CORPUS" --out t1 $SMALL --steps 12 --eval-every 6 --trace "" >out 2>err &&
	test_line_count = 0 err &&
	sw-train --data "$CORPUS" --out t2 $SMALL --steps 12 --eval-every 6 --trace "" --timing >out 2>err &&
	# exact: the same binary, data and threads; --timing only reads clocks
	cmp t1/ckpt-000012.h5 t2/ckpt-000012.h5 &&
	echo t2/ckpt-000012.h5 >expect && test_cmp expect out &&
	test_line_count = 1 err &&
	grep -E "^sw-train: timing: steps [0-9.]+ s, gemm [0-9.]+, attention [0-9.]+, elementwise [0-9.]+, optimizer [0-9.]+, other -?[0-9.]+$" err &&
	tr -d "," <err >fields &&
	# each of the six figures is rounded to 0.0005 s: the phases sum to
	# at most steps + 5 of those, and steps = phases + other within 6
	awk "{ steps = \$4; sum = \$7 + \$9 + \$11 + \$13; other = \$15;
		d = steps - sum - other; if (d < 0) d = -d
		exit !(\$7 > 0 && \$9 > 0 && \$11 > 0 && \$13 > 0 && sum <= steps + 0.0026 && d < 0.0031) }" fields
'

test_expect_success 'another seed: other weights' '
	sw-train --data "$CORPUS" --out c1 $SMALL --steps 12 --seed 1 --trace "" >/dev/null &&
	sw-train --data "$CORPUS" --out c $SMALL --steps 12 --seed 2 --trace "" >/dev/null &&
	! cmp -s c1/ckpt-000012.h5 c/ckpt-000012.h5
'

# exact: a resume, the same binary and threads (--threads 2 both times)
test_expect_success 'resume from a checkpoint: bit for bit the uninterrupted run' '
	for opt in adamw:--multipliers=row muon:--multipliers=rowcol scion:--multipliers=col \
		adamw:--scale-design=attn=hg+dp,head=ap scion:--scale-design=hg+dnp \
		adamw:--scale-reparam=or muon:--scale-reparam=er; do
		rm -rf full half &&
		sw-train --data "$CORPUS" --out full $SMALL --steps 16 --ckpt-every 8 --optimizer ${opt%%:*} \
			--qk-norm ${opt#*:} --warmup 3 --eval-every 4 --trace-every 4 >/dev/null &&
		mkdir half && cp full/ckpt-000008.h5 half/ &&
		sw-train --data "$CORPUS" --out half --resume half/ckpt-000008.h5 --threads 2 \
			--trace "" >/dev/null &&
		cmp full/ckpt-000016.h5 half/ckpt-000016.h5 || { echo "$opt differs"; exit 1; }
	done
'

test_expect_success '--multipliers rowcol: a row (d_out) and a column (d_in) multiplier per matrix' '
	sw-train --data "$CORPUS" --out rc $SMALL --steps 2 --multipliers rowcol --trace "" >/dev/null &&
	sw-ls --role o_mult,o_mult_col,down_mult_col rc/ckpt-000002.h5 >ls &&
	cut -f2,4,8 ls >actual &&
	cat >expect <<-\EOF &&
	name	role	shape
	model.layers.0.self_attn.o_proj.multiplier	o_mult	32
	model.layers.0.self_attn.o_proj.multiplier_col	o_mult_col	32
	model.layers.0.mlp.down_proj.multiplier_col	down_mult_col	88
	model.layers.1.self_attn.o_proj.multiplier	o_mult	32
	model.layers.1.self_attn.o_proj.multiplier_col	o_mult_col	32
	model.layers.1.mlp.down_proj.multiplier_col	down_mult_col	88
	EOF
	test_cmp expect actual
'

test_expect_success '--scale-design: each kind s gains where its design puts them, the Pre-Norm gain where it stays' '
	sw-train --data "$CORPUS" --out sd $SMALL --steps 2 --scale-design ffn=dp,attn=hg,head=ap \
		--norm-wd iwd --wd 0.1 --trace "" >/dev/null &&
	sw-ls --layer 0,-1 --block norm sd/ckpt-000002.h5 >ls &&
	cut -f2,3,4,8 ls >actual &&
	cat >expect <<-\EOF &&
	name	block	role	shape
	model.layers.0.self_attn.q_proj.gain_in	norm	q_gain_in	32
	model.layers.0.self_attn.k_proj.gain_in	norm	k_gain_in	32
	model.layers.0.self_attn.v_proj.gain_in	norm	v_gain_in	32
	model.layers.0.post_attention_layernorm.weight	norm	ffn_norm	32
	model.layers.0.mlp.gate_proj.gain_out	norm	gate_gain_out	88
	model.layers.0.mlp.up_proj.gain_out	norm	up_gain_out	88
	lm_head.gain_out	norm	lm_head_gain_out	122
	EOF
	test_cmp expect actual &&
	"$PY" -c "
import h5py
f = h5py.File(\"sd/ckpt-000002.h5\", \"r\")
assert f[\"config\"].attrs[\"scale_design\"] == \"attn=hg,ffn=dp,head=ap\"
for n, d in f[\"params\"].items():
    if \"gain_\" in n:
        # Input-Norm type: IWD decays them as it decays a Pre-Norm gain
        assert d.attrs[\"norm_type\"] == \"input\" and d.attrs[\"wd\"] == 0.1, n
"
'

test_expect_success '--scale-design dnp: QK-norm on, v normalized per head and gate, up over d_ff, each with an Output-Norm gain' '
	sw-train --data "$CORPUS" --out dnp $SMALL --steps 2 --scale-design dnp --norm-wd iwd --wd 0.1 \
		--trace "" >/dev/null &&
	sw-ls --layer 0,-1 --block norm dnp/ckpt-000002.h5 >ls &&
	cut -f2,4,8 ls >actual &&
	cat >expect <<-\EOF &&
	name	role	shape
	model.layers.0.input_layernorm.weight	attn_norm	32
	model.layers.0.self_attn.q_norm.weight	q_norm	8
	model.layers.0.self_attn.k_norm.weight	k_norm	8
	model.layers.0.self_attn.v_norm.weight	v_norm	8
	model.layers.0.post_attention_layernorm.weight	ffn_norm	32
	model.layers.0.mlp.gate_norm.weight	gate_norm	88
	model.layers.0.mlp.up_norm.weight	up_norm	88
	model.norm.weight	final_norm	32
	EOF
	test_cmp expect actual &&
	"$PY" -c "
import h5py
f = h5py.File(\"dnp/ckpt-000002.h5\", \"r\")
assert f[\"config\"].attrs[\"scale_design\"] == \"attn=dnp,ffn=dnp\"
assert f[\"config\"].attrs[\"qk_norm\"] == 1
for n, d in f[\"params\"].items():
    if any(k in n for k in (\"q_norm\", \"k_norm\", \"v_norm\", \"gate_norm\", \"up_norm\")):
        # Output-Norm type: IWD leaves them undecayed
        assert d.attrs[\"norm_type\"] == \"output\" and d.attrs[\"wd\"] == 0, n
"
'

test_expect_success '--scale-reparam or, er: each gain beside its direction and magnitude, gamma = 1 at the start' '
	for r in or er; do
		sw-train --data "$CORPUS" --out rp-$r $SMALL --steps 1 --lr 0 --scale-design dnp --scale-reparam $r \
			--norm-wd iwd --wd 0.1 --trace "" >/dev/null || return 1
	done &&
	sw-ls --layer 1 --block norm rp-or/ckpt-000001.h5 >ls &&
	cut -f4,8 ls >actual &&
	cat >expect <<-\EOF &&
	role	shape
	attn_norm_dir	32
	attn_norm_mag	1
	attn_norm	32
	q_norm_dir	8
	q_norm_mag	1
	q_norm	8
	k_norm_dir	8
	k_norm_mag	1
	k_norm	8
	v_norm_dir	8
	v_norm_mag	1
	v_norm	8
	ffn_norm_dir	32
	ffn_norm_mag	1
	ffn_norm	32
	gate_norm_dir	88
	gate_norm_mag	1
	gate_norm	88
	up_norm_dir	88
	up_norm_mag	1
	up_norm	88
	EOF
	test_cmp expect actual &&
	"$PY" -c "
import h5py
for r, start in ((\"or\", 1.0), (\"er\", 0.0)):
    f = h5py.File(\"rp-%s/ckpt-000001.h5\" % r, \"r\")
    assert f[\"config\"].attrs[\"scale_reparam\"] == r
    for n, d in f[\"params\"].items():
        if d.attrs[\"block\"] == \"norm\":
            # the classification beside norm_type: branch, placement, param
            param = n.rsplit(\".\", 1)[1]
            param = {\"weight\": \"computed\"}.get(param, param)
            assert d.attrs[\"param\"] == param, (n, d.attrs[\"param\"])
            assert d.attrs[\"branch\"] == (\"ffn\" if \"mlp\" in n or \"post_att\" in n else
                                        \"head\" if n.startswith(\"model.norm\") else \"attn\"), n
            assert d.attrs[\"placement\"] == (\"pre\" if \"layernorm\" in n or \"model.norm\" in n else
                                           \"qk\" if \"q_norm\" in n or \"k_norm\" in n else \"dnp\"), n
        if n.endswith((\".direction\", \".magnitude\")):
            assert (d[()] == start).all(), n
            # a direction and magnitude decay as their gain would (IWD)
            assert d.attrs[\"wd\"] == (0.1 if d.attrs[\"norm_type\"] == \"input\" else 0), n
        elif d.attrs[\"block\"] == \"norm\":
            assert (d[()] == 1).all(), n
"
'

test_expect_success '--lr 0: the parameters stay as they are (no 0/0 in the schedule)' '
	sw-train --data "$CORPUS" --out lr0 $SMALL --steps 2 --lr 0 --ckpt-every 1 --trace "" >/dev/null &&
	sw-ls lr0/ckpt-000002.h5 >/dev/null &&
	"$PY" -c "
import h5py, numpy as np
a, b = (h5py.File(\"lr0/ckpt-00000%d.h5\" % i, \"r\") for i in (1, 2))
for n in a[\"params\"]:
    assert np.array_equal(a[\"params\"][n][()], b[\"params\"][n][()]), n
assert not np.isnan(b[\"optim\"].attrs[\"lr\"])
"
'

test_expect_success '--scale-reparam: another name, a bad kind, or no scale vectors: exit 64' '
	for bad in xr attn=xr mlp=or attn=or,attn=er ""; do
		test_expect_code 64 sw-train --data "$CORPUS" --out x --scale-reparam "$bad" 2>err &&
		head -n 1 err | grep -q "^sw-train: --scale-reparam: " || return 1
	done &&
	test_expect_code 64 sw-train --data "$CORPUS" --out x --scale-reparam or --no-scale-vectors 2>err &&
	! test -e x
'

test_expect_success '--scale-reparam per kind: only the kinds named, the canonical form recorded' '
	sw-train --data "$CORPUS" --out rpk $SMALL --steps 1 --scale-reparam ffn=er,head=or --trace "" >/dev/null &&
	sw-ls --role attn_norm_dir,ffn_norm_dir,final_norm_mag rpk/ckpt-000001.h5 >ls &&
	cut -f4,5 ls >actual &&
	printf "role\tlayer\nffn_norm_dir\t0\nffn_norm_dir\t1\nfinal_norm_mag\t-1\n" >expect &&
	test_cmp expect actual &&
	"$PY" -c "
import h5py
assert h5py.File(\"rpk/ckpt-000001.h5\", \"r\")[\"config\"].attrs[\"scale_reparam\"] == \"ffn=er,head=or\"
"
'

test_expect_success 'a head_dim other than d_model/n_heads is read back from the checkpoint' '
	sw-train --data "$CORPUS" --out hd $SMALL --n-heads 4 --head-dim 16 --steps 1 --trace "" >/dev/null &&
	sw-ls --role q hd/ckpt-000001.h5 >ls &&
	sw-train --data "$CORPUS" --out hd --resume hd/ckpt-000001.h5 --steps 2 --trace "" >/dev/null &&
	test -f hd/ckpt-000002.h5
'

test_expect_success '--scale-design: a bad design, or one beside multipliers, no gains or a tied head: exit 64' '
	for bad in "attn=xx" "mlp=hg" "hg,ffn=ap" "attn=hg," "attn=hg,attn=ap" "head=dnp"; do
		test_expect_code 64 sw-train --data "$CORPUS" --out x --scale-design "$bad" 2>err &&
		head -n 1 err | grep -q "^sw-train: --scale-design: " || return 1
	done &&
	test_expect_code 64 sw-train --data "$CORPUS" --out x --scale-design hg --multipliers row 2>err &&
	test_expect_code 64 sw-train --data "$CORPUS" --out x --scale-design dp --no-scale-vectors 2>err &&
	test_expect_code 64 sw-train --data "$CORPUS" --out x --scale-design head=ap --tie 2>err &&
	grep -q "untied" err && ! test -e x
'

test_expect_success 'the optimizer state is saved: resuming without it is refused' '
	sw-ls run/ckpt-000060.h5 >/dev/null &&
	test_expect_code 65 sw-train --data "$CORPUS" --out r2 --resume "$FIX/tiny.h5" 2>err &&
	grep -q "tiny.h5" err
'

test_expect_success 'a NaN stops the run, exit 65, the last good checkpoint kept' '
	test_expect_code 65 sw-train --data "$CORPUS" --out nan $SMALL --steps 60 --ckpt-every 2 \
		--lr 1000 --grad-clip 0 --optimizer muon --trace "" >out 2>err &&
	test_line_count = 1 err && grep -q "is NaN at step" err &&
	last=$(sed -n "s/.*last good checkpoint is //p" err) &&
	sw-ls "$last" >/dev/null && test_line_count = 0 out &&
	n=$(ls nan/ckpt-*.h5 | wc -l) && test "$last" = "$(ls nan/ckpt-*.h5 | tail -n 1)"
'

test_expect_success 'SIGINT writes a checkpoint and exits 130' '
	sw-train --data "$CORPUS" --out int $SMALL --steps 100000 --trace "" >out 2>err &
	pid=$! &&
	i=0 && while [ ! -s int/trace.h5 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done &&
	sleep 0.5 && kill -INT $pid &&
	{ wait $pid; code=$?; } && test $code = 130 &&
	grep -q "interrupted at step" err &&
	ck=$(ls int/ckpt-*.h5) && sw-ls "$ck" >/dev/null
'

# kill -9 at several moments once checkpoints are being written
test_expect_success 'SIGKILL while checkpoints are written: never a torn file' '
	for delay in 0.05 0.2 0.35 0.5 0.65; do
		killed_run kill $delay &&
		ls kill/ckpt-*.h5 >names && test -s names &&
		while read -r f; do
			sw-ls "$f" >/dev/null && h5dump -H "$f" >/dev/null || { echo "torn: $f"; exit 1; }
		done <names || exit 1
	done
'

test_expect_success 'the trace of a killed run reads back' '
	killed_run kill 0.2 &&
	{ h5dump -H kill/trace.h5 >/dev/null 2>&1 ||
	  "$PY" -c "import h5py; h5py.File(\"kill/trace.h5\", \"r\", swmr=True)[\"series/loss\"][:]"; }
'

test_expect_success 'bad data: a token file whose count disagrees, exit 65' '
	test_expect_code 65 sw-train --data "$FIX/bad/tokens-count.llmc" --out x $SMALL 2>err &&
	test_line_count = 1 err && grep -q "header says" err
'

test_expect_success 'bad data: token ids beyond --vocab, exit 65' '
	test_expect_code 65 sw-train --data "$CORPUS" --vocab 100 --out x $SMALL 2>err &&
	grep -q "token id 121 is not below the vocabulary size 100" err
'

# exact: the same binary and threads on the same tokens in three formats
test_expect_success 'llm.c and nanoGPT token files read the same tokens as the text' '
	sw-train --data "$FIX/corpus.llmc" --out l $SMALL --steps 3 --trace "" >/dev/null &&
	sw-train --data "$FIX/corpus.bin" --out n $SMALL --steps 3 --trace "" >/dev/null &&
	sw-train --data "$CORPUS" --out t $SMALL --steps 3 --trace "" >/dev/null &&
	cmp l/ckpt-000003.h5 t/ckpt-000003.h5 && cmp n/ckpt-000003.h5 t/ckpt-000003.h5
'

test_expect_success 'usage errors exit 64' '
	test_expect_code 64 sw-train --out x 2>err &&
	test_expect_code 64 sw-train --data "$CORPUS" --out x --optimizer sgd 2>err &&
	test_expect_code 64 sw-train --data "$CORPUS" --out x --n-heads 4 --n-kv-heads 3 2>err &&
	test_expect_code 64 sw-train --data "$CORPUS" --out x --lr -1 2>err
'

test_expect_success 'missing input: exit 66; unwritable output: exit 73' '
	test_expect_code 66 sw-train --data nonexistent --out x 2>err &&
	test_expect_code 73 sw-train --data "$CORPUS" --out /proc/nope $SMALL 2>err
'

test_expect_success '--save-grads: /grads and the batch in the checkpoint' '
	sw-train --data "$CORPUS" --out g $SMALL --steps 1 --save-grads --trace "" >/dev/null &&
	h5dump -H g/ckpt-000001.h5 >h &&
	grep -q "GROUP \"grads\"" h && grep -q "DATASET \"tokens\"" h && grep -q "DATASET \"targets\"" h
'

test_expect_success 'an evaluation off the trace period is traced too: no validation loss lost' '
	sw-train --data "$CORPUS" --out evals $SMALL --steps 30 --eval-every 15 --trace-every 10 \
		--ckpt-every 30 >/dev/null &&
	sw-trace --series val_loss evals/trace.h5 >rows &&
	cut -f1 rows >steps && printf "step\n10\n15\n20\n30\n" >expect && test_cmp expect steps &&
	awk -F"\t" "NR > 1 && (\$1 == 15 || \$1 == 30) && \$2 == \"\" { bad = 1 }
		NR > 1 && (\$1 == 10 || \$1 == 20) && \$2 != \"\" { bad = 1 } END { exit bad }" rows
'

test_done
