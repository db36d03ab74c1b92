#!/bin/sh
# Config keys that change the model ([hostile3] E, K, O): every key of a
# Hugging Face config.json that changes the function is computed (RoPE's
# rope_scaling, types linear and llama3, under rope_scaling or
# rope_parameters, rope_type or type) or refused by name, exit 65, by the
# tools that build a model (sw-sharpness, sw-hessian, sw-train --resume):
# another rope type, hidden_act other than silu, partial_rotary_factor, a
# sliding window shorter than the sequences, an odd head_dim (65, not
# 64). The tools that only read matrices (sw-ls, sw-norms, sw-spectrum)
# read such a file as it is. A config of more layers than its file is
# refused by every reader (65). sw-convert keeps rope_scaling, hidden_act
# and the sliding window both ways, and refuses what it cannot keep.
# The numbers of the scaled model against PyTorch: tests/e2e/t0212.
. "$(dirname "$0")/../lib/tap.sh"

SH="--data $FIX/corpus.txt --batch-tokens 64 --seq-len 32 --threads 1"
HS="--data $FIX/corpus.txt --batch-tokens 32 --seq-len 16 --max-steps 8 --probes 2 --threads 1"

# variant NAME CODE: NAME/ is plain/ with config.json's dict c edited by CODE
variant() {
	mkdir "$1" && cp plain/model.safetensors "$1/" && cp plain/config.json "$1/" &&
	"$PY" "$SW_TOP/tests/lib/jsonedit.py" "$1/config.json" "$2"
}

# numbers TOOL FLAGS DIR OUT: TOOL's table of DIR without the file column
numbers() {
	$1 $2 "$3" >"$4.raw" && cut -f2- "$4.raw" >"$4"
}

# model_refuses DIR PATTERN: sw-sharpness and sw-hessian fail on DIR, 65, one line
model_refuses() {
	test_expect_code 65 sw-sharpness $SH "$1" >out 2>err &&
	test_one_error sw-sharpness "$1" && grep -q -- "$2" err && test_line_count -le 1 out &&
	test_expect_code 65 sw-hessian $HS "$1" >out 2>err &&
	test_one_error sw-hessian "$1" && grep -q -- "$2" err && test_line_count -le 1 out
}

# listed DIR: sw-ls, sw-norms and sw-spectrum read DIR as they read plain/
listed() {
	for tool in sw-ls sw-norms sw-spectrum; do
		numbers $tool "" "$1" got && numbers $tool "" plain want && test_cmp want got || return 1
	done
}

# readers_refuse DIR PATTERN: every reader fails on DIR, 65, one line
readers_refuse() {
	for tool in sw-ls sw-norms sw-spectrum; do
		test_expect_code 65 $tool "$1" >out 2>err &&
		test_one_error $tool "$1" && grep -q -- "$2" err && test_line_count -le 1 out || return 1
	done &&
	test_expect_code 65 sw-convert "$1" conv.h5 >out 2>err &&
	grep -q -- "$2" err && test_line_count = 1 err && ! ls -d conv* 2>/dev/null
}

L3='{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16}'

test_expect_success 'setup: a trained model (head_dim 8, rope_theta 500), its export without scalewatch metadata, its numbers' '
	sw-train --data "$FIX/corpus.txt" --steps 2 --ckpt-every 2 --eval-every 0 --trace "" \
		--threads 1 --seq-len 32 --batch 2 --lr 1e-2 --d-model 32 --n-layers 2 --n-heads 4 \
		--n-kv-heads 2 --rope-theta 500 --out run >/dev/null &&
	sw-convert run/ckpt-000002.h5 exported &&
	mkdir plain && cp exported/config.json plain/ &&
	"$PY" -c "
import json, struct
b = open(\"exported/model.safetensors\", \"rb\").read()
n = struct.unpack(\"<Q\", b[:8])[0]
h = json.loads(b[8:8 + n])
h[\"__metadata__\"] = {\"format\": \"pt\"}
h = json.dumps(h).encode()
open(\"plain/model.safetensors\", \"wb\").write(struct.pack(\"<Q\", len(h)) + h + b[8 + n:])
" &&
	numbers sw-ls "" plain ls-plain && numbers sw-ls "" exported ls-exported &&
	test_cmp ls-exported ls-plain &&
	numbers sw-sharpness "$SH" plain sharp-plain &&
	numbers sw-hessian "$HS" plain hess-plain
'

# ---- E: rope_scaling computed ----

test_expect_success 'llama3 and linear: other numbers than without, exit 0 (sw-sharpness, sw-hessian)' '
	variant l3 "c[\"rope_scaling\"] = json.loads(\"\"\"$L3\"\"\")" &&
	variant lin "c[\"rope_scaling\"] = {\"rope_type\": \"linear\", \"factor\": 4.0}" &&
	for v in l3 lin; do
		numbers sw-sharpness "$SH" $v sharp-$v && ! cmp -s sharp-plain sharp-$v &&
		numbers sw-hessian "$HS" $v hess-$v && ! cmp -s hess-plain hess-$v || return 1
	done
'

test_expect_success 'rope_parameters (transformers 5) and the older key type: the same numbers' '
	variant l3p "c[\"rope_parameters\"] = json.loads(\"\"\"$L3\"\"\"); c[\"rope_parameters\"][\"rope_theta\"] = c.pop(\"rope_theta\")" &&
	numbers sw-sharpness "$SH" l3p got && test_cmp sharp-l3 got &&
	variant lint "c[\"rope_scaling\"] = {\"type\": \"linear\", \"factor\": 4.0}" &&
	numbers sw-sharpness "$SH" lint got && test_cmp sharp-lin got &&
	variant l3def "c[\"rope_scaling\"] = {\"rope_type\": \"default\"}" &&
	numbers sw-sharpness "$SH" l3def got && test_cmp sharp-plain got
'

test_expect_success 'llama3 kept by sw-convert both ways: the same numbers from the HDF5 and the round trip (step and tokens apart)' '
	sw-convert l3 l3.h5 && sw-convert l3.h5 l3-back &&
	grep -q "\"rope_type\":	\"llama3\"" l3-back/config.json &&
	grep -q "\"original_max_position_embeddings\":	16" l3-back/config.json &&
	cut -f2-10 sharp-l3 >want &&
	numbers sw-sharpness "$SH" l3.h5 got && cut -f2-10 got >got-h5 && test_cmp want got-h5 &&
	numbers sw-sharpness "$SH" l3-back got && cut -f2-10 got >got-back && test_cmp want got-back
'

test_expect_success 'a config.json edited after the export disagrees with the metadata: refused' '
	cp -r l3-back l3-edited &&
	"$PY" "$SW_TOP/tests/lib/jsonedit.py" l3-edited/config.json "del c[\"rope_scaling\"]" &&
	test_expect_code 65 sw-convert l3-edited edited.h5 2>err &&
	test_one_error sw-convert l3-edited/model.safetensors &&
	grep -q "scalewatch.config.rope_scaling = llama3 disagrees with config.json" err &&
	! ls -d edited* 2>/dev/null
'

# ---- E: what the model does not compute, refused by name ----

while IFS='|' read -r name code pattern; do
	test_expect_success "$name: read by sw-ls, sw-norms, sw-spectrum; refused by the model tools" "
		variant v-$name '$code' && listed v-$name && model_refuses v-$name \"$pattern\"
	"
done <<'CASES'
yarn|c["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}|rope_scaling type 'yarn' is not supported (default, linear and llama3 are)
dynamic|c["rope_scaling"] = {"type": "dynamic", "factor": 2.0}|rope_scaling type 'dynamic' is not supported
relu|c["hidden_act"] = "relu"|hidden_act 'relu' is not supported (silu, gelu_new, gelu_pytorch_tanh or gelu are)
partial|c["partial_rotary_factor"] = 0.5|partial_rotary_factor 0.5 is not supported
oddhead|c.update(num_attention_heads=32, num_key_value_heads=16, head_dim=1)|head_dim 1 is odd: RoPE rotates pairs
bands|c["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0, "original_max_position_embeddings": 16}|low_freq_factor = 4 and high_freq_factor = 1
negative|c["rope_scaling"] = {"rope_type": "linear", "factor": -2.0}|rope_scaling linear: factor = -2 is not a finite positive number
CASES

test_expect_success 'hidden_act swish (SiLU by its other name): the numbers of silu' '
	variant swish "c[\"hidden_act\"] = \"swish\"" &&
	numbers sw-sharpness "$SH" swish got && test_cmp sharp-plain got
'

# transformers' LlamaMLP takes ACT2FN[hidden_act]: a GELU Llama is GeGLU,
# which the model computes as Gemma's (t-gradcheck holds it to finite
# differences); here only that the activation is read and used
test_expect_success 'hidden_act gelu, gelu_pytorch_tanh on a Llama: computed, not the numbers of silu' '
	variant v-gelu "c[\"hidden_act\"] = \"gelu\"" &&
	variant v-gelutanh "c[\"hidden_act\"] = \"gelu_pytorch_tanh\"" &&
	numbers sw-sharpness "$SH" v-gelu sharp-gelu && numbers sw-sharpness "$SH" v-gelutanh sharp-tanh &&
	test_expect_code 1 cmp -s sharp-plain sharp-gelu && test_expect_code 1 cmp -s sharp-gelu sharp-tanh
'

test_expect_success 'hidden_act kept by sw-convert both ways (not rewritten as silu), the same numbers' '
	sw-convert v-gelu gelu.h5 && sw-convert gelu.h5 gelu-back &&
	grep -q "\"hidden_act\":	\"gelu\"" gelu-back/config.json &&
	cut -f2-10 sharp-gelu >want &&
	numbers sw-sharpness "$SH" gelu.h5 got && cut -f2-10 got >got-h5 && test_cmp want got-h5
'

test_expect_success 'a rope type whose parameters no format keeps: sw-convert refuses, writes nothing' '
	test_expect_code 65 sw-convert v-yarn yarn.h5 >out 2>err &&
	test_one_error sw-convert v-yarn/model.safetensors &&
	grep -q "rope_scaling type .yarn. cannot be converted" err && ! ls -d yarn* 2>/dev/null
'

while IFS='|' read -r name pattern code; do
	test_expect_success "contradictory or broken rope_scaling ($name): every reader refuses" "
		variant b-$name '$code' && readers_refuse b-$name \"$pattern\"
	"
done <<'CASES'
types-differ|rope_type 'llama3' and type 'linear' differ|c["rope_scaling"] = {"rope_type": "llama3", "type": "linear", "factor": 4.0}
no-type|rope_scaling has no rope_type|c["rope_scaling"] = {"factor": 4.0}
linear-no-factor|rope_scaling linear has no factor|c["rope_scaling"] = {"rope_type": "linear"}
llama3-no-bands|llama3 needs low_freq_factor and high_freq_factor|c["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0}
not-an-object|rope_scaling is not an object|c["rope_scaling"] = "llama3"
both-keys|rope_scaling and rope_parameters both given|c["rope_scaling"] = {"rope_type": "linear", "factor": 2.0}; c["rope_parameters"] = {"rope_type": "default"}
hidden_act-a-number|hidden_act is not a name|c["hidden_act"] = 3
CASES

# ---- E: the sliding window ----

test_expect_success 'Mistral, sliding_window 16: sequences of 16 the same as no window, of 32 refused' '
	variant mw "c.update(architectures=[\"MistralForCausalLM\"], model_type=\"mistral\", sliding_window=16)" &&
	variant mnull "c.update(architectures=[\"MistralForCausalLM\"], model_type=\"mistral\", sliding_window=None)" &&
	numbers sw-hessian "$HS" mw got && numbers sw-hessian "$HS" mnull want && test_cmp want got &&
	test_expect_code 65 sw-sharpness $SH mw >out 2>err &&
	test_one_error sw-sharpness mw &&
	grep -q "sliding_window 16 is shorter than the sequences of 32 tokens" err &&
	listed mw
'

test_expect_success 'Mistral without sliding_window: its class default, 4096, longer than 32' '
	variant mdef "c.update(architectures=[\"MistralForCausalLM\"], model_type=\"mistral\")" &&
	numbers sw-sharpness "$SH" mdef got && test_cmp sharp-plain got &&
	sw-convert mdef mdef.h5 && sw-convert mdef.h5 mdef-back &&
	grep -q "\"sliding_window\":	4096" mdef-back/config.json
'

test_expect_success 'the window kept by sw-convert both ways; no window stays null (not 4096)' '
	sw-convert mw mw.h5 && sw-convert mw.h5 mw-back &&
	grep -q "\"sliding_window\":	16" mw-back/config.json &&
	test_expect_code 65 sw-sharpness $SH mw.h5 2>err && grep -q "sliding_window 16 is shorter" err &&
	sw-convert mnull mnull.h5 && sw-convert mnull.h5 mnull-back &&
	grep -q "\"sliding_window\":	null" mnull-back/config.json
'

# Qwen2's variants start from a Qwen2 checkpoint (fixtures/arch/qwen2,
# by save_pretrained: its q, k, v biases, which a Qwen2 model must have),
# on tokens below its vocabulary of 64
qvariant() {
	mkdir "$1" && cp "$FIX/arch/qwen2/model.safetensors" "$FIX/arch/qwen2/config.json" "$1/" &&
	"$PY" "$SW_TOP/tests/lib/jsonedit.py" "$1/config.json" "$2"
}
QSH="--data qtok.txt --batch-tokens 64 --seq-len 32 --threads 1"

test_expect_success 'Qwen2: the window only under use_sliding_window, from max_window_layers on' '
	awk "BEGIN { srand(3); for (i = 0; i < 3000; i++) printf \"%c\", 1 + int(rand() * 60) }" >qtok.txt &&
	qvariant qplain "c[\"use_sliding_window\"] = False" &&
	qvariant qoff "c.update(sliding_window=8, use_sliding_window=False)" &&
	qvariant qon "c.update(sliding_window=8, use_sliding_window=True, max_window_layers=0)" &&
	qvariant qlate "c.update(sliding_window=8, use_sliding_window=True, max_window_layers=2)" &&
	numbers sw-sharpness "$QSH" qplain qsharp-plain &&
	numbers sw-sharpness "$QSH" qoff got && test_cmp qsharp-plain got &&
	numbers sw-sharpness "$QSH" qlate got && test_cmp qsharp-plain got &&
	test_expect_code 65 sw-sharpness $QSH qon 2>err && grep -q "sliding_window 8 is shorter" err
'

test_expect_success 'Llama reads no sliding_window (LlamaConfig has none): the numbers without it' '
	variant lw "c[\"sliding_window\"] = 4" &&
	numbers sw-sharpness "$SH" lw got && test_cmp sharp-plain got
'

# ---- O: a config of more layers than the file ----

test_expect_success 'a config of 3 layers over a file of 2: every reader refuses, 65' '
	variant layers3 "c[\"num_hidden_layers\"] = 3" &&
	readers_refuse layers3 "the config has 3 layers, but the file holds no tensor of layer 2"
'

test_expect_success 'one shard of a sharded export, read alone: its layers are some of the config'"'"'s' '
	sw-convert --shard-size 20KB run/ckpt-000002.h5 sharded &&
	test -f sharded/model-00001-of-00008.safetensors &&
	for f in sharded/model-0000*.safetensors; do
		sw-ls "$f" >out || return 1
	done &&
	sw-ls sharded >all && test_line_count -gt 10 all
'

test_expect_success 'the same shard without the index that lists it: the config disagrees, 65' '
	mkdir lone && cp sharded/config.json sharded/model-00001-of-00008.safetensors lone/ &&
	test_expect_code 65 sw-ls lone/model-00001-of-00008.safetensors >out 2>err &&
	test_one_error sw-ls lone/model-00001-of-00008.safetensors &&
	grep -q "the config has 2 layers, but the file holds no tensor of layer" err
'

# ---- sw-train --resume from such a checkpoint ----

if have_python_modules h5py; then
	test_expect_success 'sw-train --resume: llama3 resumes; hidden_act relu is refused, 65' '
		cp run/ckpt-000002.h5 r3.h5 && cp run/ckpt-000002.h5 rg.h5 &&
		"$PY" -c "
import h5py
with h5py.File(\"r3.h5\", \"r+\") as f:
    a = f[\"config\"].attrs
    a[\"rope_scaling\"] = \"llama3\"
    a[\"rope_factor\"] = 8.0
    a[\"rope_low_freq_factor\"] = 1.0
    a[\"rope_high_freq_factor\"] = 4.0
    a[\"rope_original_max_position_embeddings\"] = 16
with h5py.File(\"rg.h5\", \"r+\") as f:
    f[\"config\"].attrs[\"hidden_act\"] = \"relu\"
" &&
		sw-train --data "$FIX/corpus.txt" --out r3 --resume r3.h5 --steps 3 --eval-every 0 \
			--trace "" --threads 1 >/dev/null &&
		numbers sw-sharpness "$SH" r3/ckpt-000003.h5 got && test -s got &&
		test_expect_code 65 sw-train --data "$FIX/corpus.txt" --out rg --resume rg.h5 --steps 3 \
			--eval-every 0 --trace "" --threads 1 >out 2>err &&
		test_one_error sw-train rg.h5 && grep -q "hidden_act .relu. is not supported" err
	'
else
	test_skip 'sw-train --resume from an edited /config' 'python3-h5py not installed'
fi

test_done
