#!/bin/sh
# bench/scale's inputs, small: bench/mkscale.py writes a sharded BF16
# Hugging Face checkpoint the tools read as the shapes say; the numbers of
# bench/scale_numpy.py (the shards read by hand through the index) agree
# with sw-norms'; mkscale's BF16 rounding is PyTorch's (round to nearest
# even). Skipped without numpy (and the last without PyTorch).
. "$(dirname "$0")/../lib/tap.sh"

MKSCALE=$SW_TOP/bench/mkscale.py

if ! have_python_modules numpy; then
	test_skip 'bench/scale inputs' 'python3-numpy not installed'
	test_done
fi

# vocab 96, d_model 64, 2 layers, 4 heads of 16, 2 KV heads, d_ff 160,
# tied; shards of at most 40000 bytes
test_expect_success 'setup: a small checkpoint in 7 shards' '
	"$PY" "$MKSCALE" ck --vocab 96 --d 64 --layers 2 --heads 4 --kv-heads 2 \
		--head-dim 16 --ffn 160 --shard-bytes 40000 &&
	ls ck >actual &&
	cat >expect <<-\EOF &&
	config.json
	model-00001-of-00007.safetensors
	model-00002-of-00007.safetensors
	model-00003-of-00007.safetensors
	model-00004-of-00007.safetensors
	model-00005-of-00007.safetensors
	model-00006-of-00007.safetensors
	model-00007-of-00007.safetensors
	model.safetensors.index.json
	EOF
	test_cmp expect actual
'

test_expect_success 'sw-ls counts the parameters the shapes give, tied head' '
	sw-ls --summary ck >sum &&
	# embedding 96*64; per layer q, o 64*64, k, v 32*64, gate, up, down
	# 160*64, two gains of 64; the final gain
	echo "total	20	$((96 * 64 + 2 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 160 * 64 + 2 * 64) + 64))	1" >expect &&
	sed -n "\$p" sum | cut -f2- >actual &&
	test_cmp expect actual &&
	sw-ls --role lm_head ck >ls &&
	printf "ck\tlm_head.weight\tout\tlm_head\t-1\tmatrix\ttied\t96x64\t0\t-1\n" >expect &&
	sed 1d ls >actual &&
	test_cmp expect actual
'

# scale_numpy.py computes in float32 (sgesdd, float32 norms of up to
# 10240 terms: a few ulps times sqrt(n), ~1e-6 relative); sw-norms sums
# in double and stops Lanczos at 1e-6: 1e-5 relative covers both
test_expect_success 'scale_numpy.py (shards read by hand) = sw-norms to 1e-5' '
	names="model.embed_tokens.weight" &&
	for l in 0 1; do
		for m in self_attn.q_proj self_attn.k_proj self_attn.v_proj self_attn.o_proj \
			mlp.gate_proj mlp.up_proj mlp.down_proj; do
			names="$names model.layers.$l.$m.weight"
		done
	done &&
	"$PY" "$SW_TOP/bench/scale_numpy.py" ck $names >np &&
	cut -f1,7-9 np >expect &&
	test_line_count = 15 expect &&
	sw-norms ck >norms &&
	awk -F"\t" "NR > 1 && \$6 !~ /^lm_head/ { print \$4 \"\t\" \$13 \"\t\" \$14 \"\t\" \$16 }" norms >actual &&
	numbers_close 1e-5 expect actual
'

# a statistical band, not digits: the rms of 6144 or 10240 samples of
# std 0.02 has a standard error 0.02 / sqrt(2 n) of 1.4e-4 to 1.8e-4, and
# the band 0.02 +- 2% is over 2 of them (numpy's seeded draws, the same
# on every machine)
test_expect_success 'Gaussian weights of std 0.02, gains 1' '
	sw-norms --role gate,embed ck >norms &&
	awk -F"\t" "NR > 1 && (\$15 < 0.0196 || \$15 > 0.0204) { print; bad = 1 } END { exit bad }" norms &&
	"$PY" - <<-\EOF
	import json
	import numpy as np
	index = json.load(open("ck/model.safetensors.index.json"))["weight_map"]
	gains = [n for n in index if n.endswith("norm.weight")]
	assert len(gains) == 5, gains
	for n in gains:
	    raw = open("ck/" + index[n], "rb").read()
	    size = int.from_bytes(raw[:8], "little")
	    b, e = json.loads(raw[8:8 + size])[n]["data_offsets"]
	    bits = np.frombuffer(raw[8 + size + b:8 + size + e], dtype="<u2")
	    assert bits.size == 64 and (bits == 0x3F80).all(), n   # BF16 1.0
	EOF
'

if have_python_modules "numpy, torch"; then
	test_expect_success 'BF16 rounding = PyTorch, ties to even included' '
		"$PY" - "$SW_TOP/bench" <<-\EOF
		import sys
		import numpy as np
		import torch
		sys.dont_write_bytecode = True
		sys.path.insert(0, sys.argv[1])
		from mkscale import bf16
		rng = np.random.default_rng(3)
		x = np.concatenate([rng.standard_normal(100000).astype(np.float32) * np.float32(0.02),
		                    rng.standard_normal(1000).astype(np.float32) * np.float32(1e30)])
		# the low half exactly 0x8000 (a tie) under an even and an odd high half,
		# and just under and over it
		ties = np.array([0x3F808000, 0x3F818000, 0xBF818000, 0x3F817FFF, 0x3F808001, 0x7F7F8000],
		                dtype=np.uint32)
		x = np.concatenate([x, ties.view(np.float32)])
		want = torch.from_numpy(x.copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
		got = bf16(x.copy())
		bad = np.flatnonzero(got != want)
		if bad.size:
		    sys.exit("%d differ, first %r: %04x vs %04x" % (bad.size, x[bad[0]], got[bad[0]], want[bad[0]]))
		EOF
	'
else
	test_skip 'BF16 rounding = PyTorch' 'python3-torch not installed'
fi

test_done
