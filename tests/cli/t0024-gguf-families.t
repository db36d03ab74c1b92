#!/bin/sh
# GGUF files of the families the safetensors side knows (Qwen2, Qwen3,
# Gemma, Gemma2, Gemma3, Phi-3, GPT-2, GPT-NeoX, OLMo2, OLMoE, Qwen2-MoE,
# Qwen3-MoE, and Mixtral in llama.cpp's older layout, one tensor per
# expert) get the roles,
# layers and experts their GGUF names say, and the per-matrix tools run
# on them. fixtures/arch-gguf/FAMILY.gguf hold the weights of
# fixtures/arch/FAMILY as llama.cpp's converter stores them
# (fixtures/make-gguf-families.py, by gguf-py): Gemma's norms as 1 + w,
# GPT-2's Conv1D weights turned to [out, in], GPT-NeoX's attn_qkv as q,
# k, v of all heads in turn, Phi-3's attn_qkv and ffn_up
# (gate, up) fused, experts stacked in ffn_*_exps, Llama's q and k
# permuted. The rows expected below are written from gguf-py's table
# (constants.py: MODEL_TENSORS, TENSOR_NAMES), not from our output; the
# numbers are the safetensors fixture's (tested against numpy in t0016,
# t0021 and t0022) and numpy's on the GGUF's own bytes.
. "$(dirname "$0")/../lib/tap.sh"

A=$SW_TOP/fixtures/arch
G=$SW_TOP/fixtures/arch-gguf
FAMILIES="qwen2 qwen3 gemma gemma2 gemma3 phi3 gpt2 gptneox olmo2 olmoe qwen2moe qwen3moe mixtral-experts"

# the safetensors fixture of a GGUF fixture
st_of() {
	case $1 in
	qwen2moe) echo "$A/qwen2_moe" ;;
	qwen3moe) echo "$A/qwen3_moe" ;;
	mixtral-experts) echo "$A/mixtral" ;;
	gptneox) echo "$A/gpt_neox" ;;
	*) echo "$A/$1" ;;
	esac
}

# want FAMILY: the stored tensors' rows, "NAME ROLE LAYER EXPERT", as
# gguf-py names them for the architecture (a fused tensor as its parts
# NAME:q, ...; a stacked expert NAME:E), at the fixtures' 2 layers and 4
# experts; Qwen3-MoE's layer 0 is a dense MLP (decoder_sparse_step 2)
want() {
	f=$1
	echo "token_embd.weight embed -1 -1"
	echo "output_norm.weight final_norm -1 -1"
	case $f in
	gemma*) ;;
	*) echo "output.weight lm_head -1 -1" ;;
	esac
	[ "$f" = gpt2 ] && echo "position_embd.weight pos_embed -1 -1"
	case $f in gpt2|gptneox) echo "output_norm.bias final_norm_bias -1 -1" ;; esac
	for l in 0 1; do
		b=blk.$l
		if [ "$f" != olmo2 ]; then
			echo "$b.attn_norm.weight attn_norm $l -1"
			echo "$b.ffn_norm.weight ffn_norm $l -1"
		fi
		case $f in
		phi3|gpt2|gptneox)
			for r in q k v; do echo "$b.attn_qkv.weight:$r $r $l -1"; done ;;
		*)
			for r in q k v; do echo "$b.attn_$r.weight $r $l -1"; done ;;
		esac
		case $f in
		gpt2|gptneox)
			for r in q k v; do echo "$b.attn_qkv.bias:$r ${r}_bias $l -1"; done
			for t in attn_norm:attn_norm ffn_norm:ffn_norm attn_output:o ffn_up:up ffn_down:down; do
				echo "$b.${t%:*}.bias ${t#*:}_bias $l -1"
			done
			echo "$b.ffn_up.weight up $l -1" ;;
		phi3)
			echo "$b.ffn_up.weight:gate gate $l -1" && echo "$b.ffn_up.weight:up up $l -1" ;;
		esac
		echo "$b.attn_output.weight o $l -1"
		case $f in
		qwen2|qwen2moe)
			for r in q k v; do echo "$b.attn_$r.bias ${r}_bias $l -1"; done ;;
		esac
		case $f in
		qwen3|qwen3moe|gemma3|olmo2|olmoe)
			echo "$b.attn_q_norm.weight q_norm $l -1" && echo "$b.attn_k_norm.weight k_norm $l -1" ;;
		esac
		case $f in
		gemma2|gemma3|olmo2)
			echo "$b.post_attention_norm.weight attn_post_norm $l -1"
			echo "$b.post_ffw_norm.weight ffn_post_norm $l -1" ;;
		esac
		dense=1
		case $f in
		qwen2moe|olmoe|mixtral-experts) dense=0 ;;
		qwen3moe) [ $l = 1 ] && dense=0 ;;
		gpt2|gptneox|phi3) dense=2 ;;
		esac
		if [ $dense = 1 ]; then
			for r in gate up down; do echo "$b.ffn_$r.weight $r $l -1"; done
		elif [ $dense = 2 ]; then
			echo "$b.ffn_down.weight down $l -1"
		else
			echo "$b.ffn_gate_inp.weight router $l -1"
			for r in gate up down; do
				for e in 0 1 2 3; do
					if [ "$f" = mixtral-experts ]; then
						echo "$b.ffn_$r.$e.weight expert_$r $l $e"
					else
						echo "$b.ffn_${r}_exps.weight:$e expert_$r $l $e"
					fi
				done
			done
		fi
		if [ "$f" = qwen2moe ]; then
			echo "$b.ffn_gate_inp_shexp.weight shared_router $l -1"
			for r in gate up down; do echo "$b.ffn_${r}_shexp.weight shared_$r $l -1"; done
		fi
	done
}

# sw-ls's stored rows (no tied head) as "NAME ROLE LAYER EXPERT"
ls_rows() {
	awk -F"\t" "NR > 1 && \$7 != \"tied\" { print \$2, \$4, \$5, \$10 }" "$1" | sort
}

test_expect_success 'sw-ls: every tensor its role, layer and expert as gguf-py names it (llama.cpp'"'"'s names kept)' '
	for f in $(echo $FAMILIES | tr " " "\n" | grep -v "^qwen[23]\$"); do
		sw-ls "$G/$f.gguf" >ls 2>err && test_line_count = 0 err &&
		ls_rows ls >got && want $f | sort >want && test_cmp want got || exit 1
	done
'

test_expect_success 'Qwen2 and Qwen3 (computed by the model): the same roles under their Hugging Face names' '
	for f in qwen2 qwen3; do
		sw-ls "$G/$f.gguf" >ls 2>err && test_line_count = 0 err &&
		ls_rows ls | cut -d" " -f2- | sort >got && want $f | cut -d" " -f2- | sort >want &&
		test_cmp want got &&
		sw-ls "$A/$f" >st && cut -f2- ls >a && cut -f2- st >b && test_cmp b a || exit 1
	done
'

test_expect_success 'a tied head: Gemma'"'"'s GGUF has no output.weight, and lists the embedding as the head' '
	for f in gemma gemma2 gemma3; do
		sw-ls "$G/$f.gguf" >ls &&
		grep -q "	out	lm_head	-1	matrix	tied	64x16	" ls || exit 1
	done
'

# sw-norms' rows keyed "ROLE LAYER EXPERT" with their numbers (rows,
# cols, rms_to_inf, rms_to_rms, one_to_rms, spectral, frobenius, rms,
# max_abs), for a join of two files whose names differ
norm_rows() {
	awk -F"\t" "NR > 1 { print \$6 \":\" \$7 \":\" \$17 \"\t\" \$8 \"\t\" \$9 \"\t\" \$10 \"\t\" \$11 \"\t\" \$12 \"\t\" \$13 \"\t\" \$14 \"\t\" \$15 \"\t\" \$16 }" "$1" |
		sort
}

# 1e-6 relative: the same float32 values in both files, so the same sums
# in the same order, except Gemma's gains: 1 + w in float32 in the GGUF
# (llama.cpp's converter) against float32 w + 1 in double here (a
# rounding of 6e-8 relative)
test_expect_success 'sw-norms: every row equals the safetensors fixture'"'"'s row of the same role, layer and expert (1e-6)' '
	for f in $FAMILIES; do
		sw-norms "$G/$f.gguf" >g 2>err && test_line_count = 0 err &&
		sw-norms "$(st_of $f)" >s &&
		norm_rows g >gr && norm_rows s >sr &&
		test "$(wc -l <gr)" -gt 10 && numbers_close 1e-6 sr gr || { echo "in $f"; exit 1; }
	done
'

# sw-norms --scale-vectors' rows keyed "ROLE LAYER EXPERT" with their
# numbers (n, mean, sd, min, max, anisotropy, cv, coupling)
sv_rows() {
	awk -F"\t" "NR > 1 { print \$6 \":\" \$7 \":\" \$19 \"\t\" \$11 \"\t\" \$12 \"\t\" \$13 \"\t\" \$14 \"\t\" \$15 \"\t\" \$16 \"\t\" \$17 \"\t\" \$18 }" "$1" |
		sort
}

# 1e-6 as above; Gemma's gains are 1 + w from either file (the
# safetensors' offset by family.c's gain_offsets[], the GGUF's stored so
# by llama.cpp's converter and not offset again)
test_expect_success 'sw-norms --scale-vectors: every gain and bias as on the safetensors fixture; Gemma'"'"'s 1 + w once' '
	for f in $FAMILIES; do
		sw-norms --scale-vectors "$G/$f.gguf" >g 2>err && test_line_count = 0 err &&
		sw-norms --scale-vectors "$(st_of $f)" >s &&
		sv_rows g >gr && sv_rows s >sr &&
		test "$(wc -l <gr)" -ge 5 && numbers_close 1e-6 sr gr || { echo "in $f"; exit 1; }
	done
'

# sw-spectrum's rows keyed "ROLE LAYER EXPERT" and what follows the
# layer (index and sigma; --esd-fit's fit), for a join of two files
spec_rows() {
	awk -F"\t" "NR == 1 { for (i = 1; i <= NF; i++) if (\$i == \"expert\") x = i; next }
		{ k = \$5 \":\" \$6 \":\" \$x; \$1 = \$2 = \$3 = \$4 = \$5 = \$6 = \"\"; print k \$0 }" OFS="\t" "$1" |
		sort
}

# 1e-6 as sw-norms' (the same float32 values, the same singular values)
test_expect_success 'sw-spectrum and --esd-fit: every row as on the safetensors fixture (fused and stacked included)' '
	for f in phi3 gpt2 qwen2moe gemma2; do
		for o in "" --esd-fit; do
			sw-spectrum $o "$G/$f.gguf" >g 2>err && test_line_count = 0 err &&
			sw-spectrum $o "$(st_of $f)" >s && spec_rows g >gr && spec_rows s >sr &&
			test "$(wc -l <gr)" -gt 10 && numbers_close 1e-6 sr gr || { echo "in $f $o"; exit 1; }
		done
	done
'

# sw-qkdrift's rows without the file column
test_expect_success 'sw-qkdrift: each head as on the safetensors fixture (q and k split from attn_qkv, un-permuted)' '
	for f in $FAMILIES; do
		sw-qkdrift "$G/$f.gguf" >g 2>err && test_line_count = 0 err &&
		sw-qkdrift "$(st_of $f)" >s &&
		cut -f2- g >gc && cut -f2- s >sc && test "$(wc -l <gc)" -ge 5 &&
		numbers_close 1e-6 sc gc || { echo "in $f"; exit 1; }
	done
'

# The GGUF's arrays from its bytes (gguf.md v3: header, key-value pairs,
# tensor infos with dims fastest first, data at general.alignment, 32 by
# default): F32 only, as these fixtures are. ggufarr.py FILE NAME...
cat >ggufarr.py <<'EOF'
import struct, sys
import numpy as np
b = open(sys.argv[1], "rb").read()
pos = 4
def u(fmt):
    global pos
    v = struct.unpack_from("<" + fmt, b, pos)[0]
    pos += struct.calcsize(fmt)
    return v
def s():
    global pos
    n = u("Q")
    pos += n
    return b[pos - n:pos].decode()
size = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def skip(t):
    global pos
    if t == 8:
        s()
    elif t == 9:
        et, n = u("I"), u("Q")
        for _ in range(n):
            skip(et)
    else:
        pos += size[t]
_, nt, nkv = u("I"), u("Q"), u("Q")
align = 32
for _ in range(nkv):
    k, t = s(), u("I")
    if k == "general.alignment":
        align = u("I")
    else:
        skip(t)
info = {}
for _ in range(nt):
    name = s()
    ne = [u("Q") for _ in range(u("I"))]
    assert u("I") == 0
    info[name] = (ne, u("Q"))
start = (pos + align - 1) // align * align
for name in sys.argv[2:]:
    ne, off = info[name]
    a = np.frombuffer(b, "<f4", int(np.prod(ne)), start + off).reshape(ne[::-1]).astype(np.float64)
    if a.ndim == 3:
        mats = [("%s:%d" % (name, e), m) for e, m in enumerate(a)]
    else:
        cut = [16, 32] if "attn_qkv" in name else [32]
        sfx = ["q", "k", "v"] if "attn_qkv" in name else ["gate", "up"]
        mats = [("%s:%s" % (name, x), m) for x, m in zip(sfx, np.split(a, cut))]
    for n, m in mats:
        print("%s\t%d\t%d\t%.9g\t%.9g" % (n, m.shape[0], m.shape[1],
              np.linalg.svd(m, compute_uv=False)[0], np.linalg.norm(m)))
EOF

if have_python_modules numpy; then
	# 1e-6: the float32 gain stored (1 + w rounded) against 1 + w in double
	test_expect_success 'Gemma'"'"'s GGUF gains are 1 + w, numpy'"'"'s on the safetensors'"'"' w (not offset again)' '
		for f in gemma gemma2 gemma3; do
			sw-norms --scale-vectors --role attn_norm "$G/$f.gguf" >g &&
			cut -f12 g | sed 1d >got &&
			# numpy: the mean of 1 + w, w the safetensors'"'"' input_layernorm
			"$PY" -c "
import json, struct, sys
import numpy as np
b = open(sys.argv[1], \"rb\").read()
n = struct.unpack_from(\"<Q\", b)[0]
h = json.loads(b[8:8 + n])
for l in (0, 1):
    t = h[\"model.layers.%d.input_layernorm.weight\" % l]
    w = np.frombuffer(b, \"<f4\", t[\"shape\"][0], 8 + n + t[\"data_offsets\"][0])
    print(\"%.9g\" % (1 + w.astype(np.float64)).mean())" "$A/$f/model.safetensors" >want &&
			test_line_count = 2 got && numbers_close 1e-6 want got || exit 1
		done
	'
	# 1e-5 relative: float32 values widened exactly; our spectral norm
	# is iterated in float32 to ~1e-6 relative
	test_expect_success 'numpy on the GGUF'"'"'s bytes: Phi-3'"'"'s attn_qkv and ffn_up (gate first), Qwen2-MoE'"'"'s stacked experts' '
		"$PY" ggufarr.py "$G/phi3.gguf" blk.0.attn_qkv.weight blk.1.ffn_up.weight >expect &&
		"$PY" ggufarr.py "$G/qwen2moe.gguf" blk.1.ffn_gate_exps.weight blk.0.ffn_down_exps.weight >>expect &&
		sort expect >want &&
		{ sw-norms "$G/phi3.gguf" && sw-norms "$G/qwen2moe.gguf"; } >norms &&
		awk -F"\t" "\$4 ~ /^(blk.0.attn_qkv|blk.1.ffn_up|blk.1.ffn_gate_exps|blk.0.ffn_down_exps).weight:/ { print \$4 \"\t\" \$8 \"\t\" \$9 \"\t\" \$13 \"\t\" \$14 }" norms |
			sort >got &&
		test_line_count = 13 got && numbers_close 1e-5 want got
	'
else
	test_skip 'numpy on the GGUF'"'"'s bytes' 'python3-numpy not installed'
fi

test_expect_success 'the model tools refuse the families the model does not compute, by name (65)' '
	for f in gemma gemma2 gemma3 phi3 gpt2 gptneox olmo2 olmoe qwen2moe qwen3moe; do
		test_expect_code 65 sw-sharpness --data "$FIX/corpus.txt" "$G/$f.gguf" >out 2>err &&
		test_one_error sw-sharpness "$G/$f.gguf" &&
		case $f in
		gemma|gemma2|gpt2) grep -q "$f from GGUF (read for its matrices only" err ;;
		*) grep -q "architecture .[a-z0-9_]*. is read for its matrices only" err ;;
		esac || exit 1
	done &&
	test_expect_code 65 sw-sharpness --data "$FIX/corpus.txt" "$G/mixtral-experts.gguf" >out 2>err &&
	grep -q "architecture .mixtral. is read for its matrices only" err &&
	test_expect_code 65 sw-convert "$G/phi3.gguf" x.h5 >out 2>err && test_one_error sw-convert "$G/phi3.gguf" &&
	test_expect_code 1 test -e x.h5
'

test_expect_success 'Qwen2 and Qwen3 GGUF: sw-convert writes the weights of the safetensors fixture (HDF5 and safetensors)' '
	for f in qwen2 qwen3; do
		sw-convert "$G/$f.gguf" g.h5 >/dev/null && sw-convert "$A/$f" s.h5 >/dev/null &&
		sw-norms g.h5 >g && sw-norms s.h5 >s && cut -f4- g >gc && cut -f4- s >sc && test_cmp sc gc &&
		rm -rf g-hf && sw-convert "$G/$f.gguf" g-hf >/dev/null &&
		sw-norms g-hf >g && sw-norms "$A/$f" >s && cut -f4- g >gc && cut -f4- s >sc && test_cmp sc gc &&
		rm -f g.h5 s.h5 || exit 1
	done
'

# the same run on the same weights: the GGUF's q and k as stored (Qwen2's
# converter does not permute them; reading them permuted back would
# change every RoPE product), its biases and QK-norm gains
test_expect_success 'Qwen2 and Qwen3 GGUF in the model: sw-sharpness per tensor as on the safetensors fixture' '
	"$PY" -c "open(\"tok.bin\", \"wb\").write(bytes((i * 13 + i // 7) % 64 for i in range(4000)))" &&
	for f in qwen2 qwen3; do
		sw-sharpness --data tok.bin --data-format bytes --batch-tokens 96 --seq-len 16 --draws 2 \
			--per-tensor "$G/$f.gguf" >g &&
		sw-sharpness --data tok.bin --data-format bytes --batch-tokens 96 --seq-len 16 --draws 2 \
			--per-tensor "$A/$f" >s &&
		cut -f2- g >gc && cut -f2- s >sc && test_line_count -gt 20 gc && test_cmp sc gc || exit 1
	done
'

# addkey.py IN OUT KEY N: IN with one more metadata pair, KEY the uint32 N
# (gguf.md v3: the pairs after the header's counts, then the tensor
# infos, then the data at the next multiple of 32)
cat >addkey.py <<'EOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
pos = 24
def skip(t):
    global pos
    if t == 8:
        pos += 8 + struct.unpack_from("<Q", b, pos)[0]
    elif t == 9:
        et, n = struct.unpack_from("<IQ", b, pos)
        pos += 12
        for _ in range(n):
            skip(et)
    else:
        pos += {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}[t]
nt, nkv = struct.unpack_from("<QQ", b, 8)
for _ in range(nkv):
    skip(8)
    t = struct.unpack_from("<I", b, pos)[0]
    pos += 4
    skip(t)
kv_end = pos
for _ in range(nt):
    skip(8)
    pos += 4 + 8 * struct.unpack_from("<I", b, pos)[0] + 4 + 8
data = (pos + 31) // 32 * 32
key = sys.argv[3].encode()
new = struct.pack("<Q", len(key)) + key + struct.pack("<II", 4, int(sys.argv[4]))
head = b[:16] + struct.pack("<Q", nkv + 1) + b[24:kv_end] + new + b[kv_end:pos]
open(sys.argv[2], "wb").write(head + bytes(-len(head) % 32) + b[data:])
EOF

test_expect_success 'a Qwen2 GGUF'"'"'s qwen2.attention.sliding_window is honoured as config.json'"'"'s: refused over longer sequences (65)' '
	"$PY" addkey.py "$G/qwen2.gguf" win.gguf qwen2.attention.sliding_window 8 &&
	sw-norms win.gguf >w && sw-norms "$G/qwen2.gguf" >n && cut -f2- w >a && cut -f2- n >b && test_cmp b a &&
	test_expect_code 65 sw-sharpness --data tok.bin --data-format bytes --batch-tokens 96 --seq-len 16 \
		--draws 2 win.gguf >out 2>err && test_one_error sw-sharpness win.gguf &&
	grep -q "sliding_window 8 is shorter than the sequences of 16 tokens" err &&
	sw-sharpness --data tok.bin --data-format bytes --batch-tokens 96 --seq-len 8 --draws 2 win.gguf >out
'

test_expect_success 'an architecture no table knows: every tensor listed, block and role other, one line on stderr' '
	"$PY" -c "import sys; b = open(sys.argv[1], \"rb\").read()
open(\"x.gguf\", \"wb\").write(b.replace(b\"qwen2\", b\"xwen2\"))" "$G/qwen2.gguf" &&
	sw-ls x.gguf >ls 2>err && test_line_count = 1 err &&
	grep -q "^sw-ls: x.gguf: architecture .xwen2. is not known: its tensors are listed with block and role other" err &&
	awk -F"\t" "NR > 1 && (\$3 != \"other\" || \$4 != \"other\") { bad = 1 } END { exit bad || NR != 28 }" ls &&
	sw-norms x.gguf >norms 2>err && test_line_count = 1 err &&
	sed 1d norms | cut -f14 | sort >got && sw-norms "$G/qwen2.gguf" >n &&
	# the stored matrices: not the head folded with the final norm
	awk -F"\t" "NR > 1 && \$6 != \"lm_head_folded\" { print \$14 }" n | sort >want &&
	test_line_count = 16 got && test_cmp want got &&
	test_expect_code 65 sw-sharpness --data "$FIX/corpus.txt" x.gguf >out 2>err &&
	grep -q "architecture .xwen2. is read for its matrices only" err &&
	test_expect_code 65 sw-convert x.gguf y.h5 >out 2>err && test_one_error sw-convert x.gguf
'

test_done
