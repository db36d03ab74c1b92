#!/bin/sh
# Two ways a checkpoint stores what the model computes with.
#
# nanoGPT's ckpt.pt (fixtures/nanogpt, fixtures/make-nanogpt.py: the
# dict train.py saves, keys under torch.compile's _orig_mod., no
# config.json): the architecture from model_args, GPT-2's names with the
# gpt2 family's roles, its nn.Linear weights as stored ([out, in]: not
# transposed as GPT2LMHeadModel's Conv1D), c_attn [3 n_embd, n_embd] and
# its bias split into q, k, v by rows (c_attn.weight:q, ...), the head tied to wte (one storage under two keys),
# the step iter_num and the tokens iter_num x the tokens of an iteration
# train.py's config says; norms equal those torch and numpy compute from
# the same file.
#
# Gemma's and Gemma2's RMSNorms multiply by 1 + w (fixtures/arch/gemma,
# gemma2: save_pretrained with random norm weights): their norms have
# their roles, and every gain reported (sw-norms --scale-vectors, the
# folded head, sw-qkdrift's column scale) is 1 + the stored weight,
# checked against numpy.
. "$(dirname "$0")/../lib/tap.sh"

N=$FIX/nanogpt/ckpt.pt
A=$FIX/arch

# name role layer block shape, from nanoGPT's model.py (n_layer 2,
# n_embd 16, vocab 64, block_size 32, bias True): c_attn is
# nn.Linear(n_embd, 3 n_embd), weight [48, 16], whose output model.py
# splits into q, k, v of n_embd each (split(self.n_embd, dim=2)): three
# [16, 16] parts, its bias three of 16; c_fc [64, 16]; the MLP's c_proj
# [16, 64]; each layer's the same; the tied head listed as GPT-2's is
{
	echo "transformer.wte.weight embed -1 emb 64x16"
	echo "transformer.wpe.weight pos_embed -1 emb 32x16"
	for l in 0 1; do
		while read -r name role block shape; do
			echo "transformer.h.$l.$name $role $l $block $shape"
		done <<-'EOF'
		ln_1.weight attn_norm norm 16
		ln_1.bias attn_norm_bias norm 16
		attn.c_attn.weight:q q qk 16x16
		attn.c_attn.weight:k k qk 16x16
		attn.c_attn.weight:v v vo 16x16
		attn.c_attn.bias:q q_bias qk 16
		attn.c_attn.bias:k k_bias qk 16
		attn.c_attn.bias:v v_bias vo 16
		attn.c_proj.weight o vo 16x16
		attn.c_proj.bias o_bias vo 16
		ln_2.weight ffn_norm norm 16
		ln_2.bias ffn_norm_bias norm 16
		mlp.c_fc.weight up ffn 64x16
		mlp.c_fc.bias up_bias ffn 64
		mlp.c_proj.weight down ffn 16x64
		mlp.c_proj.bias down_bias ffn 16
		EOF
	done
	echo "transformer.ln_f.weight final_norm -1 norm 16"
	echo "transformer.ln_f.bias final_norm_bias -1 norm 16"
	echo "lm_head.weight lm_head -1 out 64x16"
} >nanogpt.expect

test_expect_success 'nanoGPT: sw-ls names every tensor, shapes as stored, no config.json, nothing on stderr' '
	test_expect_code 1 test -e "$FIX/nanogpt/config.json" &&
	sw-ls "$N" >ls 2>err && test_line_count = 0 err &&
	sed 1d ls | awk -F"\t" "{ print \$2, \$4, \$5, \$3, \$8 }" | sort >got &&
	sort nanogpt.expect >expect && test_cmp expect got
'

test_expect_success 'nanoGPT: the head tied to wte is listed as a tied head, the embedding once' '
	awk -F"\t" "\$2 == \"lm_head.weight\" { print \$7, \$9 }" ls >head &&
	echo "tied 0" >want && test_cmp want head
'

test_expect_success 'nanoGPT: a config.json beside it is not read (model_args is the architecture)' '
	mkdir beside && cp "$N" beside/ && cp "$FIX/tiny-hf/config.json" beside/ &&
	sw-ls beside/ckpt.pt >beside.ls 2>err && test_line_count = 0 err &&
	cut -f2- beside.ls >a && cut -f2- ls >b && test_cmp b a
'

if have_python_modules "numpy, torch"; then
	# the file as nanoGPT's sample.py reads it: torch.load, _orig_mod.
	# stripped; its keys, iter_num and the tokens per iteration
	cat >keys.py <<'EOF'
import sys, torch
ck = torch.load(sys.argv[1], map_location="cpu")
sd = {k[len("_orig_mod."):] if k.startswith("_orig_mod.") else k: v for k, v in ck["model"].items()}
if sys.argv[2] == "keys":
    for k in sorted(sd):
        print(k)
elif sys.argv[2] == "shared":
    print(sd["lm_head.weight"].data_ptr() == sd["transformer.wte.weight"].data_ptr(),
          all(k.startswith("_orig_mod.") for k in ck["model"]))
else:
    c = ck["config"]
    n = ck["iter_num"]
    print("%d\t%d" % (n, n * c["gradient_accumulation_steps"] * c["batch_size"] * c["block_size"]))
EOF
	test_expect_success 'nanoGPT: every key of its model dict listed, _orig_mod. stripped (torch.load)' '
		"$PY" keys.py "$N" shared >shared && echo "True True" >want && test_cmp want shared &&
		"$PY" keys.py "$N" keys >want &&
		sed 1d ls | cut -f2 | sed "s/:[qkv]\$//" | sort -u >got && test_cmp want got
	'

	test_expect_success 'nanoGPT: the step is iter_num, tokens iter_num x accumulation x batch x block' '
		"$PY" keys.py "$N" step >want &&
		sw-norms --role q --layer 0 "$N" >norms &&
		sed 1d norms | cut -f2,3 >got && test_cmp want got &&
		sw-spectrum --top 1 --role q --layer 0 "$N" >spec &&
		sed 1d spec | cut -f2,9 >got && test_cmp want got
	'

	# numpy on the tensors torch.load gives, in float64: every 2-D
	# tensor's spectral and Frobenius norms; of the linear weights, as
	# nn.Linear stores them [out, in], rows, cols and RMS->inf =
	# sqrt(in) max_i ||W_i,:||_2 (which a transposed read changes); the
	# tied head is wte. 1e-5 relative: sw-norms sums in double over the
	# same float32 values and stops Lanczos at 1e-6. c_attn as its three
	# parts, rows [0, 16), [16, 32), [32, 48), as model.py splits them
	cat >norms.py <<'EOF'
import sys
import numpy as np
import torch
ck = torch.load(sys.argv[1], map_location="cpu")
sd = {k[len("_orig_mod."):]: v.double().numpy() for k, v in ck["model"].items()}
for k in [k for k in sd if k.endswith("c_attn.weight")]:
    w = sd.pop(k)
    for i, p in enumerate("qkv"):
        sd[k + ":" + p] = w[i * 16:(i + 1) * 16]
for k in sorted(sd):
    w = sd[k]
    if w.ndim != 2:
        continue
    s = np.linalg.svd(w, compute_uv=False)[0]
    if sys.argv[2] == "linear" and (".attn.c_" in k or ".mlp.c_" in k):
        r2i = np.sqrt(w.shape[1]) * np.linalg.norm(w, axis=1).max()
        print("%s\t%d\t%d\t%.9g\t%.9g\t%.9g" % (k, w.shape[0], w.shape[1], r2i, s, np.linalg.norm(w)))
    elif sys.argv[2] == "all":
        print("%s\t%.9g\t%.9g" % (k, s, np.linalg.norm(w)))
    elif sys.argv[2] == "sigma" and ".h.1." in k and ("c_attn" in k or "c_fc" in k):
        print("%s\t%.9g" % (k, s))
EOF
	test_expect_success 'nanoGPT: spectral and Frobenius norms of every matrix = numpy on torch.load, 1e-5' '
		"$PY" norms.py "$N" all >expect &&
		sw-norms "$N" >norms 2>err && test_line_count = 0 err &&
		awk -F"\t" "NR > 1 && \$6 != \"lm_head_folded\" { print \$4 \"\t\" \$13 \"\t\" \$14 }" norms |
			sort >actual &&
		test_line_count = 15 actual &&
		numbers_close 1e-5 expect actual
	'

	test_expect_success 'nanoGPT: the linear weights as stored, not transposed: rows, cols, RMS->inf = numpy, 1e-5' '
		"$PY" norms.py "$N" linear >expect &&
		awk -F"\t" "NR > 1 && \$4 ~ /\\.(attn|mlp)\\.c_/ { print \$4 \"\t\" \$8 \"\t\" \$9 \"\t\" \$10 \"\t\" \$13 \"\t\" \$14 }" norms |
			sort >actual &&
		test_line_count = 12 actual &&
		grep -q "^transformer.h.0.attn.c_attn.weight:q	16	16	" actual &&
		numbers_close 1e-5 expect actual
	'

	test_expect_success 'nanoGPT: sw-spectrum --top 1 = numpy sigma_max, the parts of c_attn and c_fc, 1e-5' '
		"$PY" norms.py "$N" sigma >expect &&
		sw-spectrum --top 1 --layer 1 --role q,k,v,up "$N" >spec &&
		sed 1d spec | cut -f3,8 | sort >actual &&
		test_line_count = 4 actual &&
		numbers_close 1e-5 expect actual
	'

	# variants of the file, written here by torch.save from its dict
	cat >variant.py <<'EOF'
import sys, torch
ck = torch.load(sys.argv[1], map_location="cpu")
what, out = sys.argv[2], sys.argv[3]
if what == "plain":         # saved without torch.compile: no prefix
    ck["model"] = {k[len("_orig_mod."):]: v for k, v in ck["model"].items()}
elif what == "twice":       # one tensor under both names
    ck["model"]["transformer.wpe.weight"] = ck["model"]["_orig_mod.transformer.wpe.weight"]
elif what == "untied":      # a head of its own
    ck["model"]["_orig_mod.lm_head.weight"] = ck["model"]["_orig_mod.lm_head.weight"].clone() * 2
elif what == "no-head":
    del ck["model_args"]["n_head"]
elif what == "odd-heads":
    ck["model_args"]["n_head"] = 3
elif what == "iter":
    ck["iter_num"] = "250"
elif what == "no-config":   # a fork that keeps no config: tokens unknown
    del ck["config"]
torch.save(ck, out)
EOF
	test_expect_success 'nanoGPT saved without torch.compile: the same rows' '
		"$PY" variant.py "$N" plain plain.pt &&
		sw-ls plain.pt >plain.ls && cut -f2- plain.ls >a && cut -f2- ls >b && test_cmp b a
	'

	test_expect_success 'nanoGPT: a name both with and without _orig_mod. is refused (65)' '
		"$PY" variant.py "$N" twice twice.pt &&
		test_expect_code 65 sw-ls twice.pt >out 2>err &&
		test_one_error sw-ls twice.pt &&
		grep -q "two tensors named transformer.wpe.weight" err
	'

	test_expect_success 'nanoGPT: a head of its own storage is its own row, its own norms' '
		"$PY" variant.py "$N" untied untied.pt &&
		sw-ls untied.pt >u.ls &&
		awk -F"\t" "\$2 == \"lm_head.weight\" { print \$3, \$7, \$9 }" u.ls >head &&
		echo "out F32 1024" >want && test_cmp want head &&
		sw-norms --role embed,lm_head untied.pt >u.norms &&
		sed 1d u.norms | cut -f14 >frob &&
		awk "NR == 1 { e = \$1 } NR == 2 { h = \$1 } END { d = h - 2 * e; if (d < 0) d = -d; exit !(d <= 1e-6 * h) }" frob
	'

	test_expect_success 'nanoGPT: model_args without n_head, or heads that do not divide n_embd: 65, named' '
		"$PY" variant.py "$N" no-head nohead.pt &&
		test_expect_code 65 sw-ls nohead.pt >out 2>err &&
		test_one_error sw-ls nohead.pt && grep -q "model_args has no n_head" err &&
		"$PY" variant.py "$N" odd-heads odd.pt &&
		test_expect_code 65 sw-norms odd.pt >out 2>err &&
		test_one_error sw-norms odd.pt && grep -q "model_args" err &&
		"$PY" variant.py "$N" iter iter.pt &&
		test_expect_code 65 sw-ls iter.pt >out 2>err &&
		test_one_error sw-ls iter.pt && grep -q "iter_num is not an integer" err
	'

	# the step is the file's iter_num (read here with torch); the tokens
	# need the config's batch and block size: unknown (empty)
	test_expect_success 'nanoGPT without its config: the step from iter_num, tokens unknown (empty)' '
		"$PY" variant.py "$N" no-config nocfg.pt &&
		sw-norms --role q --layer 0 nocfg.pt >norms &&
		"$PY" -c "import sys, torch; print(int(torch.load(sys.argv[1], map_location=\"cpu\", weights_only=False)[\"iter_num\"]))" nocfg.pt >iter &&
		test -s iter &&
		sed 1d norms | cut -f2,3 >got && printf "%s\t\n" "$(cat iter)" >want && test_cmp want got
	'
else
	test_skip 'nanoGPT against torch.load' 'python3-numpy or python3-torch not installed'
fi

# ---- Gemma's 1 + w ----------------------------------------------------

# name role layer block: from transformers' modeling_gemma.py and
# modeling_gemma2.py (GemmaRMSNorm: x / rms(x) * (1 + weight))
cat >gemma.expect <<'EOF'
gemma model.layers.0.input_layernorm.weight attn_norm 0 norm
gemma model.layers.0.post_attention_layernorm.weight ffn_norm 0 norm
gemma model.norm.weight final_norm -1 norm
gemma2 model.layers.1.input_layernorm.weight attn_norm 1 norm
gemma2 model.layers.1.post_attention_layernorm.weight attn_post_norm 1 norm
gemma2 model.layers.1.pre_feedforward_layernorm.weight ffn_norm 1 norm
gemma2 model.layers.1.post_feedforward_layernorm.weight ffn_post_norm 1 norm
gemma2 model.norm.weight final_norm -1 norm
EOF

for f in gemma gemma2; do
	test_expect_success "$f: its norms have their roles" "
		sw-ls \"\$A/$f\" >ls 2>err && test_line_count = 0 err &&
		grep '^$f ' gemma.expect | cut -d' ' -f2- | sort >expect &&
		sed 1d ls | awk -F'\t' '{ print \$2, \$4, \$5, \$3 }' >all &&
		grep -F -x -f expect all | sort >found && test_cmp expect found
	"
done

# numpy's statistics of each gain g = 1 + w (w the stored float32
# weight, the sum in float32 as GemmaRMSNorm's 1.0 + weight.float()),
# in float64: mean, sd over n, min, max, anisotropy, and the coupling
# (Pearson's r over the input channels of |g_i| and the column norms of
# the matrices reading the norm: q, k, v; gate, up; the tied head);
# placement post for Gemma2's post-norms, no coupling. Also the folded
# head's norms (the embedding, tied, times diag(g_final)) and
# sw-qkdrift's per-head q and k RMS with the attn_norm gain as a column
# scale.
cat >gemma.py <<'EOF'
import json, struct, sys
import numpy as np
path, what = sys.argv[1], sys.argv[2]
raw = open(path, "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
head = json.loads(raw[8:8 + n])
def get(k):
    b, end = head[k]["data_offsets"]
    return np.frombuffer(raw[8 + n + b:8 + n + end], dtype="<f4").reshape(head[k]["shape"])
def gain(k):
    return (np.float32(1) + get(k)).astype(np.float64)
L = "model.layers.%d."
readers = {"input_layernorm": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"],
           "post_attention_layernorm": ["mlp.gate_proj", "mlp.up_proj"],
           "pre_feedforward_layernorm": ["mlp.gate_proj", "mlp.up_proj"]}
if "pre_feedforward_layernorm" in " ".join(head):
    del readers["post_attention_layernorm"]     # Gemma2's: a post-norm
if what == "gains":
    for k in sorted(head):
        if not k.endswith("norm.weight"):
            continue
        g = gain(k)
        a = np.abs(g)
        coupling = ""
        if k == "model.norm.weight":
            mats = [get("model.embed_tokens.weight")]
        else:
            layer = int(k.split(".")[2])
            mats = [get((L % layer) + r + ".weight") for r in readers.get(k.split(".")[3], [])]
        if mats:
            col = np.sqrt(sum((m.astype(np.float64) ** 2).sum(axis=0) for m in mats))
            coupling = "%.9g" % np.corrcoef(a, col)[0, 1]
        print("%s\t%d\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%s" % (k, g.size, g.mean(), g.std(), g.min(),
              g.max(), a.max() / a.min(), coupling))
elif what == "folded":
    w = get("model.embed_tokens.weight").astype(np.float64) * gain("model.norm.weight")
    print("%.9g\t%.9g\t%.9g" % (np.sqrt(w.shape[1]) * np.linalg.norm(w, axis=1).max(),
                                np.linalg.svd(w, compute_uv=False)[0], np.linalg.norm(w)))
else:
    cfg = json.load(open(path.rsplit("/", 1)[0] + "/config.json"))
    hd, H, KV = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    for layer in range(cfg["num_hidden_layers"]):
        g = gain((L % layer) + "input_layernorm.weight")
        q = get((L % layer) + "self_attn.q_proj.weight").astype(np.float64) * g
        k = get((L % layer) + "self_attn.k_proj.weight").astype(np.float64) * g
        for h in range(H):
            kh = h // (H // KV)
            rms = lambda m, i: np.sqrt((m[i * hd:(i + 1) * hd] ** 2).mean())
            print("%d\t%d\t%d\t%.9g\t%.9g" % (layer, h, kh, rms(q, h), rms(k, kh)))
EOF

if have_python_modules numpy; then
	test_expect_success 'the Gemma fixtures have random norm weights (so 1 + w is seen)' '
		"$PY" -c "
import json, struct, sys
import numpy as np
for path in sys.argv[1:]:
    raw = open(path, \"rb\").read()
    (n,) = struct.unpack(\"<Q\", raw[:8])
    h = json.loads(raw[8:8 + n])
    for k, e in h.items():
        if k.endswith(\"norm.weight\"):
            b, end = e[\"data_offsets\"]
            w = np.frombuffer(raw[8 + n + b:8 + n + end], dtype=\"<f4\")
            assert np.abs(w).min() > 0 and w.std() > 0.1, k" "$A/gemma/model.safetensors" "$A/gemma2/model.safetensors"
	'
	for f in gemma gemma2; do
		# 1e-6 relative: the same float32 sums, statistics in double
		# on both sides; printed to 9 digits
		test_expect_success "$f: sw-norms --scale-vectors reports 1 + w (numpy), with its coupling" "
			\"\$PY\" gemma.py \"\$A/$f/model.safetensors\" gains >expect &&
			sw-norms --scale-vectors \"\$A/$f\" >sv &&
			awk -F'\t' 'NR > 1 { print \$4 \"\t\" \$11 \"\t\" \$12 \"\t\" \$13 \"\t\" \$14 \"\t\" \$15 \"\t\" \$16 \"\t\" \$18 }' sv |
				sort >actual &&
			test_line_count = \$(wc -l <expect) actual &&
			numbers_close 1e-6 expect actual
		"
		test_expect_success "$f: the folded head is the embedding times diag(1 + w_final) (numpy, 1e-5)" "
			\"\$PY\" gemma.py \"\$A/$f/model.safetensors\" folded >expect &&
			sw-norms --role lm_head_folded \"\$A/$f\" >folded &&
			sed 1d folded | cut -f10,13,14 >actual &&
			numbers_close 1e-5 expect actual
		"
		test_expect_success "$f: sw-qkdrift's q and k RMS per head with the gain 1 + w folded (numpy, 1e-5)" "
			\"\$PY\" gemma.py \"\$A/$f/model.safetensors\" qk >expect &&
			sw-qkdrift \"\$A/$f\" >qk &&
			sed 1d qk | cut -f4,5,6,8,9 >actual &&
			numbers_close 1e-5 expect actual
		"
	done
	test_expect_success 'gemma2: its post-norms are placed post, its pre-norms pre' '
		sw-norms --scale-vectors "$A/gemma2" >sv &&
		awk -F"\t" "NR > 1 && \$7 == 1 { print \$6, \$10 }" sv >places &&
		printf "%s\n" "attn_norm pre" "attn_post_norm post" "ffn_norm pre" "ffn_post_norm post" >want &&
		test_cmp want places
	'
else
	test_skip 'Gemma against numpy' 'python3-numpy not installed'
fi

test_done
