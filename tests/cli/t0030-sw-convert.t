#!/bin/sh
# sw-convert: HDF5 -> safetensors -> HDF5 round trips (every tensor bit for
# bit, every attribute, every number sw-norms, sw-spectrum --summary and
# sw-ls print), sharding, BF16, --force, and the inputs it must refuse.
. "$(dirname "$0")/../lib/tap.sh"

TRAIN="--data $FIX/corpus.txt --steps 3 --eval-every 0 --trace '' --threads 1 --seq-len 16 --batch 2 --d-model 32 --n-layers 2 --n-heads 4"

# the whole file as h5dump prints it (data and attributes), minus its name
dump() {
	h5dump "$1" >h5dump.out && sed 1d h5dump.out
}
# what a safetensors export carries: root step and tokens, /config,
# /optim, /metrics and /params (not /optim_state, /grads, /fisher)
dump_carried() {
	h5dump -a /step -a /tokens -g /config -g /optim -g /metrics -g /params "$1" >h5dump.out &&
	sed 1d h5dump.out
}
# the numbers the tools print, without the file column; same_numbers
# compares them exactly: the same binaries, on the same machine, on
# the same float32 values losslessly converted
tool_numbers() {
	sw-norms "$1" >"$2.out" && cut -f2- "$2.out" >"$2.norms" &&
	sw-spectrum --summary "$1" >"$2.out" && cut -f2- "$2.out" >"$2.spectrum" &&
	sw-ls "$1" >"$2.out" && cut -f2- "$2.out" >"$2.ls"
}
same_numbers() {
	cmp "$1.norms" "$2.norms" && cmp "$1.spectrum" "$2.spectrum" && cmp "$1.ls" "$2.ls"
}

test_expect_success 'tiny.h5 -> safetensors: config.json and model.safetensors, nothing else' '
	sw-convert "$FIX/tiny.h5" tiny-st >out 2>err &&
	test_line_count = 0 out && test_line_count = 0 err &&
	ls -a tiny-st >files && printf ".\n..\nconfig.json\nmodel.safetensors\n" >expect &&
	test_cmp expect files && ! ls -a | grep -q "\.tmp"
'

test_expect_success 'config.json says what LlamaForCausalLM needs' '
	sw-convert "$FIX/tiny.h5" cfg-st &&
	for k in "\"architectures\":	\[\"LlamaForCausalLM\"\]" "\"model_type\":	\"llama\"" \
		"\"hidden_size\":	16" "\"intermediate_size\":	40" "\"num_hidden_layers\":	12" \
		"\"num_attention_heads\":	4" "\"num_key_value_heads\":	2" "\"head_dim\":	4" \
		"\"vocab_size\":	48" "\"rms_norm_eps\":	1e-05" "\"rope_theta\":	10000" \
		"\"max_position_embeddings\":	32" "\"tie_word_embeddings\":	false" \
		"\"torch_dtype\":	\"float32\""; do
		grep -q "$k" cfg-st/config.json || { echo "missing $k"; exit 1; }
	done
'

test_expect_success 'the metadata: format pt and the scalewatch attributes' '
	sw-convert "$FIX/tiny.h5" meta-st &&
	h=$(od -An -tu8 -N8 meta-st/model.safetensors | tr -d " ") &&
	head -c $((8 + h)) meta-st/model.safetensors | tail -c "$h" | tr "," "\n" >header &&
	grep -q "\"format\":\"pt\"" header &&
	grep -q "\"scalewatch.step\":\"1200\"" header &&
	grep -q "\"scalewatch.config.arch\":\"llama\"" header &&
	grep -q "\"scalewatch.params.model.layers.0.self_attn.q_proj.weight.block\":\"qk\"" header &&
	grep -q "\"scalewatch.params.model.norm.weight.norm_type\":\"input\"" header &&
	grep -q "\"scalewatch.params.lm_head.weight.wd_mode\":\"coupled\"" header
'

test_expect_success 'tiny: back to HDF5, the same file as h5dump prints it (data and attributes)' '
	sw-convert "$FIX/tiny.h5" rt-st && sw-convert rt-st tiny-rt.h5 &&
	# exact: the stored values copied, bit for bit
	dump "$FIX/tiny.h5" >expect && dump tiny-rt.h5 >actual && test_cmp expect actual
'

test_expect_success 'tiny: sw-norms, sw-spectrum --summary, sw-ls print the same on all three' '
	sw-convert "$FIX/tiny.h5" nums-st && sw-convert nums-st nums-rt.h5 &&
	tool_numbers "$FIX/tiny.h5" orig && tool_numbers nums-rt.h5 rt && tool_numbers nums-st st &&
	same_numbers orig rt && same_numbers orig st
'

test_expect_success 'wide.h5 (tied head): no lm_head.weight, tie_word_embeddings true, round trip exact' '
	sw-convert "$FIX/wide.h5" wide-st &&
	grep -q "\"tie_word_embeddings\":	true" wide-st/config.json &&
	! grep -q "\"lm_head.weight\":{" wide-st/model.safetensors &&
	sw-convert wide-st wide-rt.h5 &&
	dump "$FIX/wide.h5" >expect && dump wide-rt.h5 >actual && test_cmp expect actual &&
	tool_numbers "$FIX/wide.h5" orig && tool_numbers wide-rt.h5 rt && same_numbers orig rt
'

while IFS='|' read -r name flags; do
	test_expect_success "sw-train, $name: round trip keeps tensors, attributes, numbers" "
		eval sw-train \$TRAIN --out run $flags >/dev/null &&
		sw-convert run/ckpt-000003.h5 st &&
		sw-convert st rt.h5 &&
		# exact: the stored values copied, bit for bit
		dump_carried run/ckpt-000003.h5 >expect && dump_carried rt.h5 >actual &&
		test_cmp expect actual &&
		tool_numbers run/ckpt-000003.h5 orig && tool_numbers rt.h5 rt && same_numbers orig rt &&
		rm -rf run st rt.h5
	"
done <<'VARIANTS'
GQA, untied|--n-kv-heads 2
tied head|--tie
MQA, tied, Muon, independent wd|--n-kv-heads 1 --tie --optimizer muon --wd-mode independent
VARIANTS

test_expect_success 'sharded: --shard-size 50KB writes 5 shards and an index' '
	sw-convert --shard-size 50KB "$FIX/wide.h5" wide-sh &&
	ls wide-sh >files &&
	printf "%s\n" config.json model-00001-of-00005.safetensors model-00002-of-00005.safetensors \
		model-00003-of-00005.safetensors model-00004-of-00005.safetensors \
		model-00005-of-00005.safetensors model.safetensors.index.json >expect &&
	test_cmp expect files
'

test_expect_success 'sharded: no shard over 50 kB of tensors; total_size is the sum' '
	sw-convert --shard-size 50KB "$FIX/wide.h5" sizes-sh &&
	total=0 &&
	for f in sizes-sh/model-*.safetensors; do
		h=$(od -An -tu8 -N8 "$f" | tr -d " ") &&
		data=$(( $(wc -c <"$f") - 8 - h )) &&
		test "$data" -le 50000 && total=$((total + data)) || exit 1
	done &&
	grep -q "\"total_size\":	$total" sizes-sh/model.safetensors.index.json
'

test_expect_success 'sharded: read back (directory and index), the same as the original' '
	sw-convert --shard-size 50KB "$FIX/wide.h5" back-sh &&
	sw-convert back-sh sh-rt.h5 &&
	sw-convert back-sh/model.safetensors.index.json sh-rt2.h5 &&
	dump "$FIX/wide.h5" >expect && dump sh-rt.h5 >actual && test_cmp expect actual &&
	dump sh-rt2.h5 >actual2 && test_cmp expect actual2 &&
	tool_numbers back-sh sh && tool_numbers "$FIX/wide.h5" orig && same_numbers orig sh
'

test_expect_success '--dtype bf16: BF16 tensors, torch_dtype bfloat16, norms to 2^-8' '
	sw-convert --dtype bf16 "$FIX/tiny.h5" bf16 &&
	grep -q "\"torch_dtype\":	\"bfloat16\"" bf16/config.json &&
	sw-ls bf16 >ls && cut -f7 ls | sort -u >dtypes && printf "BF16\ndtype\n" >expect &&
	test_cmp expect dtypes &&
	sw-norms "$FIX/tiny.h5" >norms && cut -f2- norms >f32 &&
	sw-norms bf16 >norms && cut -f2- norms >b16 &&
	# BF16 keeps 8 significant bits: each value within 2^-9 relative, the
	# norms within 2^-8 (and not the same as float32)
	numbers_close 0.00390625 f32 b16 && ! cmp -s f32 b16
'

test_expect_success '--dtype bf16 and back: the widened BF16 values, exactly' '
	sw-convert --dtype bf16 "$FIX/tiny.h5" bf16-back && sw-convert bf16-back bf16.h5 &&
	sw-norms bf16-back >norms && cut -f2- norms >b16 &&
	sw-norms bf16.h5 >norms && cut -f2- norms >back &&
	# exact: the same binary on the same BF16 values, converted losslessly
	test_cmp b16 back
'

test_expect_success 'an existing OUT: exit 73, one line, untouched' '
	sw-convert "$FIX/tiny.h5" mine && cp -r mine keep &&
	test_expect_code 73 sw-convert "$FIX/wide.h5" mine 2>err &&
	test_one_error sw-convert mine && grep -q "force" err &&
	diff -r keep mine &&
	echo "the user s file" >user.h5 &&
	test_expect_code 73 sw-convert mine user.h5 2>err &&
	test_one_error sw-convert user.h5 && echo "the user s file" >expect && test_cmp expect user.h5
'

test_expect_success '--force: a sharded export replaces a single one and back; the user s files stay' '
	sw-convert "$FIX/tiny.h5" forced && echo "{}" >forced/tokenizer.json &&
	sw-convert --force --shard-size 100KB "$FIX/tiny.h5" forced &&
	ls forced >files &&
	printf "%s\n" config.json model-00001-of-00002.safetensors model-00002-of-00002.safetensors \
		model.safetensors.index.json tokenizer.json >expect && test_cmp expect files &&
	sw-convert --force "$FIX/tiny.h5" forced && ls forced >files &&
	printf "%s\n" config.json model.safetensors tokenizer.json >expect && test_cmp expect files &&
	echo "the user s file" >users.h5 &&
	sw-convert --force forced users.h5 && dump users.h5 >actual && dump "$FIX/tiny.h5" >expect &&
	test_cmp expect actual
'

test_expect_success '--force does not put a directory over a file' '
	echo "the user s file" >afile.h5 &&
	test_expect_code 73 sw-convert --force "$FIX/tiny.h5" afile.h5 2>err &&
	test_one_error sw-convert afile.h5 && echo "the user s file" >expect && test_cmp expect afile.h5
'

test_expect_success 'a Hugging Face checkpoint without scalewatch metadata: attributes from the architecture' '
	sw-convert "$FIX/tiny-hf" hf.h5 &&
	sw-ls hf.h5 >ls && cut -f2- ls >a && sw-ls "$FIX/tiny-hf" >ls && cut -f2- ls >b && test_cmp b a &&
	sw-norms hf.h5 >norms && sed -n 2p norms | cut -f2,3 >st && printf "0\t0\n" >expect && test_cmp expect st &&
	h5dump -a /params/model.norm.weight/norm_type hf.h5 >attr && grep -q "\"input\"" attr
'

test_expect_success 'learnable multipliers: folded into their matrices, none exported, none said' '
	eval sw-train $TRAIN --out mult --multipliers rowcol >/dev/null &&
	sw-convert mult/ckpt-000003.h5 m-st &&
	sw-ls mult/ckpt-000003.h5 >ls && awk -F"\t" "\$3 != \"mult\"" ls >kept &&
	cut -f2- kept >expect && sw-ls m-st >ls && cut -f2- ls >actual && test_cmp expect actual &&
	sw-convert m-st back.h5 && h5dump -a /config/multipliers back.h5 >attr && grep -q "\"none\"" attr
'

test_expect_success 'norm-everywhere, no scale vectors: exit 65 naming what' '
	eval sw-train $TRAIN --out ne --norm-everywhere --steps 1 >/dev/null &&
	test_expect_code 65 sw-convert ne/ckpt-000001.h5 ne-st 2>err &&
	test_one_error sw-convert ne/ckpt-000001.h5 && grep -q "o_in_norm" err &&
	eval sw-train $TRAIN --out nsv --no-scale-vectors --steps 1 >/dev/null &&
	test_expect_code 65 sw-convert nsv/ckpt-000001.h5 nsv-st 2>err &&
	test_one_error sw-convert nsv/ckpt-000001.h5 && grep -q "scale_vectors" err &&
	! test -e ne-st && ! test -e nsv-st
'

test_expect_success 'a scale design with DNP: exit 65, one line naming the design, nothing written' '
	eval sw-train $TRAIN --out dnp --scale-design ffn=dnp --steps 1 >/dev/null &&
	test_expect_code 65 sw-convert dnp/ckpt-000001.h5 dnp-st 2>err &&
	test_one_error sw-convert dnp/ckpt-000001.h5 &&
	grep -q "scale_design = .ffn=dnp.: DNP normalizes" err && ! test -e dnp-st
'

test_expect_success 'no config.json: exit 66, one line' '
	mkdir nocfg && cp "$FIX/tiny-hf/model.safetensors" nocfg/ &&
	test_expect_code 66 sw-convert nocfg x.h5 2>err &&
	test_one_error sw-convert nocfg && grep -q config.json err && ! test -e x.h5
'

test_expect_success 'an architecture the model does not compute: exit 65, one line' '
	mkdir phi3 && cp "$FIX/tiny-hf/"* phi3/ &&
	sed -i "s/LlamaForCausalLM/Phi3ForCausalLM/; s/\"llama\"/\"phi3\"/" phi3/config.json &&
	test_expect_code 65 sw-convert phi3 x.h5 2>err &&
	test_one_error sw-convert phi3 && grep -q ".phi3. is read for its matrices only" err && ! test -e x.h5
'

test_expect_success 'a truncated safetensors file: exit 65, one line' '
	mkdir trunc && cp "$FIX/tiny-hf/config.json" trunc/ &&
	head -c 100000 "$FIX/tiny-hf/model.safetensors" >trunc/model.safetensors &&
	test_expect_code 65 sw-convert trunc x.h5 2>err &&
	test_one_error sw-convert trunc && grep -q truncated err && ! test -e x.h5 &&
	! ls -a | grep -q "\.tmp"
'

test_expect_success 'metadata that disagrees with config.json: exit 65' '
	sw-convert "$FIX/tiny.h5" edited &&
	sed -i "s/\"intermediate_size\":	40/\"intermediate_size\":	41/" edited/config.json &&
	test_expect_code 65 sw-convert edited x.h5 2>err && test_one_error sw-convert edited
'

test_expect_success 'usage: no OUT, bad --dtype, bad --shard-size: exit 64' '
	test_expect_code 64 sw-convert "$FIX/tiny.h5" 2>err &&
	test_expect_code 64 sw-convert --dtype f16 "$FIX/tiny.h5" o 2>err &&
	test_expect_code 64 sw-convert --shard-size 10XB "$FIX/tiny.h5" o 2>err &&
	test_expect_code 64 sw-convert --frobnicate "$FIX/tiny.h5" o 2>err &&
	! test -e o
'

test_expect_success '--help and --version' '
	sw-convert --help >out && grep -q "^usage: sw-convert" out &&
	sw-convert --version >out && grep -q "^sw-convert (scalewatch)" out
'

# ---- disk full: a 64 KiB tmpfs when we may mount one, else ulimit -f ----
mkdir -p full
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=64k tmpfs full 2>/dev/null; then
	FULL_HOW=tmpfs
	limited() { "$@"; }
else
	FULL_HOW=ulimit
	limited() { (ulimit -f 1 && exec "$@"); }
fi

test_expect_success "disk full ($FULL_HOW): safetensors out: exit 74, nothing left" '
	test_expect_code 74 limited sw-convert "$FIX/tiny.h5" full/st 2>err &&
	test_one_error sw-convert full/st/model.safetensors && grep -q "No space\|too large" err &&
	test -z "$(ls -a full | grep -v "^\.\.\?$")"
'

test_expect_success "disk full ($FULL_HOW): HDF5 out: exit 74, nothing left" '
	test_expect_code 74 limited sw-convert "$FIX/tiny-hf" full/x.h5 2>err &&
	test_one_error sw-convert full/x.h5 &&
	test -z "$(ls -a full | grep -v "^\.\.\?$")"
'
[ "$FULL_HOW" = tmpfs ] && umount full

test_expect_success '-o OUT: the same export as the operand OUT' '
	sw-convert "$FIX/tiny.h5" as-operand && sw-convert "$FIX/tiny.h5" -o as-option &&
	diff -r as-operand as-option &&
	test_expect_code 64 sw-convert -o x "$FIX/tiny.h5" y >out 2>err &&
	grep -q "not a second OUT" err && ! test -e x && ! test -e y
'

test_expect_success '--json: one object saying what was written, counted independently' '
	sw-convert --json "$FIX/tiny.h5" -o js >report &&
	sw-ls "$FIX/tiny.h5" >ls && tensors=$(($(wc -l <ls) - 1)) &&
	bytes=$(awk -F"\t" "NR > 1 { s += \$9 * 4 } END { print s }" ls) &&
	"$PY" -c "import json, sys; r = json.load(open(sys.argv[1])); \
		assert r == {\"in\": sys.argv[2], \"out\": \"js\", \"to\": \"safetensors\", \
		\"tensors\": int(sys.argv[3]), \"shards\": 1, \"bytes\": int(sys.argv[4])}, r" \
		report "$FIX/tiny.h5" "$tensors" "$bytes" &&
	sw-convert --json js js.h5 >report &&
	"$PY" -c "import json, sys; r = json.load(open(sys.argv[1])); \
		assert r[\"to\"] == \"hdf5\" and r[\"shards\"] is None and r[\"tensors\"] == int(sys.argv[2]), r" \
		report "$tensors" &&
	sw-convert "$FIX/tiny.h5" quiet >out && test_line_count = 0 out
'

test_done
