#!/bin/sh
# GGUF's quantized tensors, as users download them: fixtures/gguf-quants/
# quants.gguf, written by gguf-py (fixtures/make-gguf-quants.py, gguf
# 0.19.0), holds one tensor of each quantization read (Q4_0, Q4_1, Q5_0,
# Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and a Llama q projection in
# Q4_0 with llama.cpp's permuted rows; beside it TYPE.npy, gguf-py's own
# dequantization of each (gguf.quants.dequantize). sw-ls lists each
# stored type; the float32 every tool reads (the tensor source all share,
# written out by sw-convert to scalewatch HDF5) is gguf-py's bit for bit;
# sw-norms agrees with numpy's norms on gguf-py's values; and a truncated
# file, rows of no whole block, and a quantization not read are each one
# line, exit 65. The values need numpy and h5py (skipped without), the
# bad files only Python's struct.
. "$(dirname "$0")/../lib/tap.sh"

Q=$SW_TOP/fixtures/gguf-quants
G=$Q/quants.gguf

test_expect_success 'sw-ls lists each tensor in its stored type' '
	sw-ls "$G" >ls.out && cut -f2,7,8 ls.out | sort >got &&
	printf "%s\t%s\t%s\n" name dtype shape \
		model.layers.0.self_attn.q_proj.weight Q4_0 32x32 \
		quant.q4_0.weight Q4_0 8x64 quant.q4_1.weight Q4_1 8x64 \
		quant.q5_0.weight Q5_0 8x64 quant.q5_1.weight Q5_1 8x64 \
		quant.q8_0.weight Q8_0 8x64 quant.q2_k.weight Q2_K 4x512 \
		quant.q3_k.weight Q3_K 4x512 quant.q4_k.weight Q4_K 4x512 \
		quant.q5_k.weight Q5_K 4x512 quant.q6_k.weight Q6_K 4x512 | sort >want &&
	test_cmp want got
'

if have_python_modules "numpy, h5py"; then
	# same.py H5: each tensor of H5's params bit for bit its reference
	# (the q projection's in rotate-half order: attn_q-Q4_0.npy); exit 1
	# naming the first that differs
	cat >"$TRASH/same.py" <<'EOF'
import sys, h5py, numpy as np
top = sys.argv[2]
with h5py.File(sys.argv[1], "r") as f:
    names = sorted(f["params"])
    assert len(names) == 11, names
    for name in names:
        got = np.array(f["params"][name])
        ref = np.load(top + "/" + ("attn_q-Q4_0" if "q_proj" in name else name.split(".")[1].upper()) + ".npy")
        if got.dtype != np.float32 or got.shape != ref.shape or not np.array_equal(got.view("<u4"), ref.view("<u4")):
            bad = np.flatnonzero(got.view("<u4") != ref.view("<u4")) if got.shape == ref.shape else []
            sys.exit("%s: %s differs from gguf-py's (%d values)" % (name, got.dtype, len(bad)))
print("%d tensors bit for bit" % len(names))
EOF
	# norms.py: sw-norms' columns (name, rows, cols, rms_to_inf,
	# rms_to_rms, one_to_rms, spectral, frobenius, rms, max_abs) by numpy
	# in float64 on gguf-py's values
	cat >"$TRASH/norms.py" <<'EOF'
import sys, numpy as np
top = sys.argv[1]
refs = {"model.layers.0.self_attn.q_proj.weight": "attn_q-Q4_0"}
for t in ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]:
    refs["quant.%s.weight" % t.lower()] = t
for name in sorted(refs):
    w = np.load(top + "/" + refs[name] + ".npy").astype(np.float64)
    dout, din = w.shape
    s = np.linalg.svd(w, compute_uv=False)[0]
    fro = np.linalg.norm(w)
    row = [dout, din, np.sqrt(din) * np.linalg.norm(w, axis=1).max(), np.sqrt(din / dout) * s,
           np.linalg.norm(w, axis=0).max() / np.sqrt(dout), s, fro, fro / np.sqrt(dout * din), np.abs(w).max()]
    print("\t".join([name] + [str(x) if isinstance(x, int) else "%.9g" % x for x in row]))
EOF
	test_expect_success 'every value as gguf-py dequantizes it, bit for bit (sw-convert to HDF5)' '
		sw-convert "$G" c.h5 >out && "$PY" same.py c.h5 "$Q" >same.out &&
		echo "11 tensors bit for bit" >want && test_cmp want same.out
	'

	# one value of the Q4_K reference one ulp off: the comparison sees it
	test_expect_success 'the check can fail: a reference value one ulp off' '
		cp -R "$Q" ulp && "$PY" -c "import numpy as np; r = np.load(\"ulp/Q4_K.npy\"); r.view(\"<u4\")[3, 500] ^= 1; np.save(\"ulp/Q4_K.npy\", r)" &&
		test_expect_code 1 "$PY" same.py c.h5 ulp >out 2>err &&
		grep -q "quant.q4_k.weight: float32 differs from gguf-py.s (1 values)" err
	'

	# numpy in float64 on the same float32 values; sw-norms sums in double
	# and stops Lanczos at 1e-6 relative (NORMS_SIGMA_REL_TOL): 1e-6
	# relative, as t0272 (the 9 digits printed are 5e-9)
	test_expect_success 'sw-norms on each quantized tensor agrees with numpy on gguf-py s values' '
		"$PY" norms.py "$Q" >expect && sw-norms "$G" >n.tsv &&
		sed 1d n.tsv | cut -f4,8-16 | sort >actual && numbers_close 1e-6 expect actual &&
		test_line_count = 11 actual
	'
else
	test_skip 'the values against gguf-py s' 'python3-numpy or python3-h5py not installed'
fi

# refused FILE PATTERN: each tool fails on FILE alone, one line, exit 65
refused() {
	for tool in sw-ls sw-norms sw-spectrum; do
		test_expect_code 65 $tool "$1" >out 2>err && test_one_error $tool "$1" &&
		grep -q -- "$2" err && test_line_count -le 1 out || return 1
	done
	test_expect_code 65 sw-convert "$1" c2.h5 >out 2>err && test_one_error sw-convert "$1" &&
	grep -q -- "$2" err && ! ls -d c2.h5* 2>/dev/null
}

# patch FILE WHAT VALUE: quant.q4_k.weight's first dim (ne0) or its type
# set to VALUE in FILE's tensor info
patch() {
	"$PY" - "$@" <<-\EOF
	import struct, sys
	path, what, v = sys.argv[1], sys.argv[2], int(sys.argv[3])
	b = bytearray(open(path, "rb").read())
	n = b.find(b"quant.q4_k.weight") + len("quant.q4_k.weight")
	assert struct.unpack_from("<IQQI", b, n) == (2, 512, 4, 12)
	struct.pack_into("<Q" if what == "ne0" else "<I", b, n + 4 if what == "ne0" else n + 20, v)
	open(path, "wb").write(b)
	EOF
}

if have_python_modules struct; then
	test_expect_success 'a truncated file: the last tensor past the end' '
		size=$(wc -c <"$G") && head -c $((size - 100)) "$G" >cut.gguf &&
		refused cut.gguf "data at offset [0-9]*, [0-9]* bytes, lies past the end of the file ($((size - 100)) bytes)"
	'

	test_expect_success 'Q4_K rows of 384 values: no whole number of blocks of 256' '
		cp "$G" rows.gguf && patch rows.gguf ne0 384 &&
		refused rows.gguf "quant.q4_k.weight: Q4_K rows of 384 values are no whole number of blocks of 256"
	'

	test_expect_success 'a quantization not read (IQ4_NL, IQ2_XXS): named, with what to do' '
		cp "$G" iq.gguf && patch iq.gguf type 20 &&
		refused iq.gguf "quant.q4_k.weight: IQ4_NL: a quantization not read (.*Q2_K to Q6_K are read; read the model.s safetensors instead, or requantize the file: llama-quantize --allow-requantize IN OUT Q8_0)" &&
		cp "$G" iq2.gguf && patch iq2.gguf type 16 &&
		refused iq2.gguf "quant.q4_k.weight: IQ2_XXS: a quantization not read"
	'
else
	test_skip 'the bad files' 'python3 not installed'
fi

test_done
