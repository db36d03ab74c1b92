#!/bin/sh
# llm.c's GPT-2 checkpoints (gpt2_124M.bin's format, versions 3 and 5):
# fixtures/llmc/ holds transformers' tiny GPT-2 (fixtures/arch/gpt2)
# exported as llm.c's train_gpt2.py exports one (fixtures/make-llmc-gpt2.py:
# Conv1D transposed, the vocabulary padded to 128 rows, float32 and
# bfloat16). The float32 file is the same model, so every tool prints
# the same bytes for it as for transformers' directory (the same binary
# on the same float32 values); the bfloat16 file's values are torch's
# rounding of them; bad headers are refused in one line, exit 65.
. "$(dirname "$0")/../lib/tap.sh"

L=$FIX/llmc

test_expect_success 'sw-ls: the tensors of transformers GPT-2, in its names, shapes and blocks' '
	sw-ls "$L/gpt2_tiny.bin" >llmc.ls && cut -f2- llmc.ls >llmc.cols &&
	sw-ls "$FIX/arch/gpt2" >hf.ls && cut -f2- hf.ls >hf.cols &&
	test_cmp hf.cols llmc.cols &&
	grep -q "	transformer.h.1.attn.c_attn.weight:v	vo	v	1	matrix	F32	16x16	" llmc.ls &&
	grep -q "	transformer.wte.weight	emb	embed	-1	matrix	F32	64x16	" llmc.ls
'

test_expect_success 'float32: sw-norms, sw-spectrum and sw-sharpness print what they print for transformers files' '
	tr "a-zA-Z" "!-:!-:" <"$FIX/corpus.txt" >c64.txt &&
	for f in "$L/gpt2_tiny.bin" "$FIX/arch/gpt2"; do
		n=$(basename "$f") &&
		sw-norms "$f" >"$n.out" && cut -f2- "$n.out" >"$n.norms" &&
		sw-spectrum --summary "$f" >"$n.out" && cut -f2- "$n.out" >"$n.spec" &&
		sw-sharpness --data c64.txt --seq-len 16 --batch-tokens 128 --threads 1 "$f" >"$n.out" &&
		cut -f2- "$n.out" >"$n.sharp" || return 1
	done &&
	test_cmp gpt2.norms gpt2_tiny.bin.norms && test_cmp gpt2.spec gpt2_tiny.bin.spec &&
	test_cmp gpt2.sharp gpt2_tiny.bin.sharp &&
	test_line_count = 6 gpt2_tiny.bin.sharp
'

test_expect_success 'bfloat16: every value is torch'"'"'s bfloat16 rounding of the float32 model' '
	sw-convert "$L/gpt2_tiny_bf16.bin" bf16.h5 && sw-convert "$L/gpt2_tiny.bin" f32.h5 &&
	/usr/bin/python3 - bf16.h5 f32.h5 <<-\PY >checked
	import sys, h5py, numpy as np, torch
	a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
	assert a.attrs["source_format"] == "llm.c GPT-2 v5 (bfloat16)", a.attrs["source_format"]
	assert b.attrs["source_format"] == "llm.c GPT-2 v3", b.attrs["source_format"]
	names = []
	a["params"].visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
	assert len(names) == 36, len(names)
	for n in names:
	    want = torch.from_numpy(b["params"][n][()]).to(torch.bfloat16).float().numpy()
	    assert np.array_equal(a["params"][n][()], want), n
	print(len(names), "tensors")
	PY
	echo "36 tensors" >expect && test_cmp expect checked
'

# a header of the fixture with int32 i set to v, at file f
patch_int() {
	/usr/bin/python3 -c '
import sys, struct
src, dst, i, v = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
b = bytearray(open(src, "rb").read())
b[4 * i:4 * i + 4] = struct.pack("<i", v)
open(dst, "wb").write(b)' "$L/gpt2_tiny.bin" "$1" "$2" "$3"
}

test_expect_success 'an older version is refused by number' '
	patch_int v1.bin 1 1 &&
	test_expect_code 65 sw-ls v1.bin >out 2>err &&
	test_line_count = 1 err &&
	grep -q "v1.bin: llm.c GPT-2 checkpoint version 1 is not read (3, float32, and 5, bfloat16, are" err
'

test_expect_success 'a truncated file, a lie about the sizes and dirty padding: one line, exit 65' '
	head -c 30000 "$L/gpt2_tiny.bin" >short.bin &&
	test_expect_code 65 sw-norms short.bin >out 2>err && test_line_count = 1 err &&
	grep -q "short.bin: the llm.c GPT-2 header.s sizes need 39680 bytes, the file has 30000" err &&
	patch_int layers.bin 4 100000 &&
	test_expect_code 65 sw-norms layers.bin >out 2>err && test_line_count = 1 err &&
	grep -q "implausible sizes" err &&
	patch_int heads.bin 5 3 &&
	test_expect_code 65 sw-norms heads.bin >out 2>err && test_line_count = 1 err &&
	grep -q "implausible sizes" err &&
	patch_int pad.bin 100 7 &&
	test_expect_code 65 sw-ls pad.bin >out 2>err && test_line_count = 1 err &&
	grep -q "int 100 of the padding is not 0" err &&
	head -c 8 "$L/gpt2_tiny.bin" >magic.bin &&
	test_expect_code 65 sw-ls magic.bin >out 2>err && test_line_count = 1 err &&
	grep -q "truncated llm.c GPT-2 header (8 of 1024 bytes)" err
'

test_done
