#!/bin/sh
# Hostile safetensors, JSON and ambiguous files: this script extends the
# bad-input table (t0500-bad-input.t) with the safetensors side of issue
# [hostile]: FIFOs in place of a shard, config.json or index (D4), a file
# that is both HDF5 and safetensors and a directory with both a single
# file and an index (D7), huge headers parsed in O(n log n) (D11), inf
# rates in __metadata__ (D12), JSON the reference readers refuse:
# trailing bytes, invalid UTF-8, an escaped NUL, keys given twice (D14),
# names no HDF5 dataset can have, control bytes in names (D15). Every
# input is crafted here. Each refusal is checked in every reader (sw-ls,
# sw-norms, sw-spectrum, sw-convert) under `timeout 10` (124: a hang): one
# line "TOOL: FILE: what is wrong", the exit status, nothing on stdout but
# the TSV header, and no output of sw-convert left under any name.
. "$(dirname "$0")/../lib/tap.sh"

# refused CODE FILE PATTERN: every reader refuses FILE alike, in time
refused() {
	for tool in sw-ls sw-norms sw-spectrum; do
		test_expect_code "$1" timeout 10 "$tool" "$2" >out 2>err &&
		test_one_error "$tool" "$2" && grep -q -- "$3" err &&
		test_line_count -le 1 out || return 1
	done &&
	test_expect_code "$1" timeout 10 sw-convert "$2" converted.h5 >out 2>err &&
	test_one_error sw-convert "$2" && grep -q -- "$3" err &&
	test_line_count = 0 out && ! ls -d converted* 2>/dev/null
}

test_expect_success 'setup: mkst.py, a model to edit, an export with metadata' '
	cat >mkst.py <<-\EOF &&
	# mkst.py SRC DST CODE: DST is the safetensors file SRC with its header
	# h (JSON bytes, padding stripped) and data d as CODE leaves them
	import json, struct, sys
	src, dst, code = sys.argv[1:4]
	b = open(src, "rb").read()
	n = struct.unpack("<Q", b[:8])[0]
	env = {"h": b[8:8 + n].rstrip(b" "), "d": b[8 + n:], "json": json}
	exec(code, env)
	open(dst, "wb").write(struct.pack("<Q", len(env["h"])) + env["h"] + env["d"])
	EOF
	cp -r "$FIX/tiny-hf" base &&
	sw-ls base >expect-base &&
	sw-convert "$FIX/tiny.h5" exp &&
	sw-convert --shard-size 70000 "$FIX/tiny.h5" exp2 &&
	test -f exp2/model-00002-of-00002.safetensors
'

# edit NAME CODE: NAME/ is base with its model.safetensors edited by CODE
edit() {
	mkdir "$1" && cp base/config.json "$1/" &&
	"$PY" mkst.py base/model.safetensors "$1/model.safetensors" "$2"
}

test_expect_success 'the header padded with spaces (as the reference writer pads it) is read' '
	edit padded "h = h + b\"       \"" &&
	sw-ls padded >out && cut -f2- out >got && cut -f2- expect-base >want && test_cmp want got
'

# ---- D14: JSON the reference readers refuse ----

# D14 and D15 in the header: NAME|what the message says|the edit of h
# (Python); the reference readers refuse each (serde_json: trailing
# characters, invalid UTF-8; a key twice is a second model), and no HDF5
# dataset can have the names of the last four
while IFS='|' read -r name pattern code; do
	test_expect_success "$name: exit 65, '$pattern'" '
		edit "$name" "$code" &&
		refused 65 "$name/model.safetensors" "$pattern"
	'
done <<'CASES'
D14-trailing-garbage|safetensors header is not valid JSON (byte [0-9]*: bytes after the JSON value)|h = h + b"}}garbage"
D14-name-invalid-utf8|safetensors header is not valid JSON (byte [0-9]*: invalid UTF-8)|h = h.replace(b'"model.norm.weight"', b'"model.norm.\xffweight"')
D14-name-escaped-nul|safetensors header is not valid JSON (byte [0-9]*: an escaped NUL|h = h.replace(b'"model.norm.weight"', b'"model.norm.weight\\u0000x"')
D14-tensor-twice|safetensors header: key 'model.norm.weight' appears twice|h = h.replace(b'"model.layers.0.input_layernorm.weight"', b'"model.norm.weight"')
D14-name-twice-escaped|safetensors header: key 'model.norm.weight' appears twice|h = h.replace(b'"model.layers.0.input_layernorm.weight"', b'"model.norm.weigh\\u0074"')
D14-metadata-key-twice|safetensors header: key 'a' appears twice|h = h[:-1] + b',"__metadata__":{"a":"1","a":"2"}}'
D15-name-slash|tensor name 'a/b' is not a valid name|h = h.replace(b'"model.norm.weight"', b'"a/b"')
D15-name-rooted|tensor name '/x' is not a valid name|h = h.replace(b'"model.norm.weight"', b'"/x"')
D15-name-empty|a tensor has an empty name|h = h.replace(b'"model.norm.weight"', b'""')
D15-name-dot|tensor name '.' is not a valid name|h = h.replace(b'"model.norm.weight"', b'"."')
CASES

# config.json: NAME|what the message says|the edit of its bytes d; the
# model read must be the one transformers loads, or none
config_case() {
	mkdir "$1" && cp base/model.safetensors "$1/" &&
	"$PY" -c "import sys; d = open('base/config.json', 'rb').read().rstrip(); exec(sys.argv[1]); open('$1/config.json', 'wb').write(d)" "$2"
}

while IFS='|' read -r name pattern code; do
	test_expect_success "$name: exit 65, '$pattern'" '
		config_case "$name" "$code" &&
		refused 65 "$name" "$pattern"
	'
done <<'CASES'
D14-config-rope-theta-twice|config.json: key 'rope_theta' appears twice|d = d[:-1] + b',"rope_theta":1000000.0}'
D14-config-garbage|config.json is not valid JSON (byte [0-9]*: bytes after the JSON value)|d = d + b"\n}garbage"
D14-config-invalid-utf8|config.json is not valid JSON (byte [0-9]*: invalid UTF-8)|d = d.replace(b"silu", b"s\xc0\xafu")
CASES

test_expect_success 'D14: config.json followed by blank lines is read (Python json takes it)' '
	config_case cfgblank "d = d + b\"\\n\\n\\t \\r\\n\"" &&
	sw-ls cfgblank >out && cut -f2- out >got && cut -f2- expect-base >want && test_cmp want got
'

test_expect_success 'D14: an index listing a tensor twice: exit 65' '
	cp -r "$FIX/tiny-hf-sharded" idxtwice &&
	"$PY" -c "
import sys
p = \"idxtwice/model.safetensors.index.json\"
t = open(p).read()
line = [l for l in t.splitlines() if \"model.norm.weight\" in l][0]
open(p, \"w\").write(t.replace(line, line.replace(\"00002\", \"00001\").rstrip(\",\") + \",\\n\" + line))
" &&
	refused 65 idxtwice "index: key .model.norm.weight. appears twice"
'

# ---- D15: control bytes in names ----

test_expect_success 'D15: a name holding ESC and CR: escaped in TSV, valid JSON' '
	edit esc "h = h.replace(b\"\\\"model.norm.weight\\\"\", b\"\\\"model.norm.weight\\\\u001b[31m\\\\r\\\"\")" &&
	sw-ls esc >out &&
	grep -q "	model.norm.weight\\\\x1b\\[31m\\\\r	" out &&
	! grep -q "$(printf "\\033")" out && ! grep -q "$(printf "\\r")" out &&
	sw-ls --json esc >json &&
	"$PY" -c "
import json
names = [json.loads(l)[\"name\"] for l in open(\"json\", encoding=\"utf-8\")]
assert \"model.norm.weight\\x1b[31m\\r\" in names, names
"
'

test_expect_success 'D15: a name with control bytes in an error message is escaped' '
	edit escerr "h = h.replace(b\"\\\"model.norm.weight\\\":{\\\"dtype\\\":\\\"F32\\\"\", b\"\\\"bad\\\\u001b]0;x\\\\u0007\\\":{\\\"dtype\\\":\\\"F13\\\"\")" &&
	refused 65 escerr/model.safetensors "bad\\\\x1b\]0;x\\\\x07: unknown dtype" &&
	! grep -q "$(printf "\\033")" err
'

# ---- D12: one rate check for both readers ----

# the tensors of exp with one metadata value replaced
meta_case() {
	mkdir "$1" && cp exp/config.json "$1/" &&
	"$PY" mkst.py exp/model.safetensors "$1/model.safetensors" "
j = json.loads(h); j['__metadata__']['$2'] = '$3'; h = json.dumps(j, separators=(',', ':')).encode()"
}

test_expect_success 'D12: lr = "inf" in __metadata__: exit 65 as from HDF5' '
	meta_case lrinf scalewatch.params.lm_head.weight.lr inf &&
	refused 65 lrinf "__metadata__: /params/lm_head.weight: lr = inf is not a finite nonnegative number" &&
	test_expect_code 65 timeout 10 sw-spectrum --normalize lrinf >out 2>err &&
	test_one_error sw-spectrum lrinf && test_line_count -le 1 out
'

test_expect_success 'D12: wd = "nan" and wd = "-1" in __metadata__: exit 65' '
	meta_case wdnan scalewatch.params.model.norm.weight.wd nan &&
	refused 65 wdnan "/params/model.norm.weight: wd = nan is not a finite nonnegative number" &&
	meta_case wdneg scalewatch.params.model.norm.weight.wd -1 &&
	refused 65 wdneg "/params/model.norm.weight: wd = -1 is not a finite nonnegative number"
'

test_expect_success 'a __metadata__ key two shards give different values: exit 65' '
	cp -r exp2 conflict &&
	"$PY" mkst.py exp2/model-00002-of-00002.safetensors conflict/model-00002-of-00002.safetensors "
j = json.loads(h); j[\"__metadata__\"][\"scalewatch.step\"] = \"7\"; h = json.dumps(j, separators=(\",\", \":\")).encode()" &&
	refused 65 conflict "__metadata__: .scalewatch.step. is .7. here but .1200. in an earlier shard"
'

# ---- D4: only regular files are opened ----

test_expect_success 'D4: config.json a FIFO: exit 66, no hang' '
	mkdir cfgfifo && cp base/model.safetensors cfgfifo/ && mkfifo cfgfifo/config.json &&
	refused 66 cfgfifo "cfgfifo/config.json: not a regular file"
'

test_expect_success 'D4: config.json a directory: exit 66' '
	mkdir cfgdir && cp base/model.safetensors cfgdir/ && mkdir cfgdir/config.json &&
	refused 66 cfgdir/model.safetensors "config.json: not a regular file"
'

test_expect_success 'D4: an index naming a shard that is a FIFO: exit 66, no hang' '
	cp -r "$FIX/tiny-hf-sharded" shardfifo && rm shardfifo/model-00002-of-00002.safetensors &&
	mkfifo shardfifo/model-00002-of-00002.safetensors &&
	refused 66 shardfifo/model.safetensors.index.json "model-00002-of-00002.safetensors: not a regular file"
'

test_expect_success 'D4: the index itself a FIFO, named: exit 66, no hang' '
	mkdir idxfifo && cp "$FIX"/tiny-hf-sharded/*.safetensors "$FIX/tiny-hf-sharded/config.json" idxfifo/ &&
	mkfifo idxfifo/model.safetensors.index.json &&
	refused 66 idxfifo/model.safetensors.index.json "not a regular file"
'

test_expect_success 'D4: a shard that is a symlink out of the directory: exit 65' '
	mkdir elsewhere && cp "$FIX/tiny-hf-sharded/model-00001-of-00002.safetensors" elsewhere/s1 &&
	cp -r "$FIX/tiny-hf-sharded" linkout && rm linkout/model-00001-of-00002.safetensors &&
	ln -s ../elsewhere/s1 linkout/model-00001-of-00002.safetensors &&
	refused 65 linkout "a symlink to .*/elsewhere/s1, outside the index.s directory"
'

test_expect_success 'D4: a shard symlinked inside its directory is read' '
	cp -r "$FIX/tiny-hf-sharded" linkin && mv linkin/model-00001-of-00002.safetensors linkin/s1 &&
	ln -s s1 linkin/model-00001-of-00002.safetensors &&
	sw-ls "$FIX/tiny-hf-sharded" >ref && cut -f2- ref >want && sw-ls linkin >out && cut -f2- out >got &&
	test_cmp want got
'

test_expect_success 'D4: the Hugging Face cache layout (snapshots/REV -> ../../blobs) is read' '
	mkdir -p hub/blobs hub/snapshots/rev &&
	for f in "$FIX"/tiny-hf-sharded/*; do
		b=$(basename "$f") && cp "$f" "hub/blobs/h-$b" && ln -s "../../blobs/h-$b" "hub/snapshots/rev/$b" || exit 1
	done &&
	sw-ls "$FIX/tiny-hf-sharded" >ref && cut -f2- ref >want && sw-ls hub/snapshots/rev >out && cut -f2- out >got &&
	test_cmp want got
'

# ---- D7: one file, two models; one directory, two models ----

test_expect_success 'D7: an HDF5 file whose userblock is a safetensors file: exit 65' '
	"$PY" - "$FIX/tiny.h5" <<-\EOF &&
	import json, os, struct, sys
	# the safetensors part: one F32 tensor in the userblock, then a U8
	# tensor over the rest of the file (the HDF5 part), so the file is
	# valid safetensors to the last byte and valid HDF5 (h5jam below)
	ub, h5 = 4096, os.path.getsize(sys.argv[1])
	norm = struct.pack("<16f", *([1.0] * 16))
	for n in range(100, 400):
	    hdr = {"model.norm.weight": {"dtype": "F32", "shape": [16], "data_offsets": [0, 64]},
	           "pad": {"dtype": "U8", "shape": [ub + h5 - 8 - n - 64], "data_offsets": [64, ub + h5 - 8 - n]}}
	    h = json.dumps(hdr, separators=(",", ":")).encode()
	    if len(h) <= n:
	        h += b" " * (n - len(h))
	        break
	blob = struct.pack("<Q", len(h)) + h + norm
	open("userblock", "wb").write(blob + b"\0" * (ub - len(blob)))
	EOF
	h5jam -i "$FIX/tiny.h5" -u userblock -o poly.h5 &&
	h5dump -H poly.h5 >/dev/null &&
	refused 65 poly.h5 "is both an HDF5 file and a safetensors file: refused as ambiguous" &&
	mkdir polydir && cp base/config.json polydir/ && cp poly.h5 polydir/model.safetensors &&
	refused 65 polydir "is both an HDF5 file and a safetensors file"
'

test_expect_success 'D7: a directory with model.safetensors and an index is read as transformers reads it: the single file' '
	mkdir both && cp "$FIX"/tiny-hf-sharded/* both/ && cp "$FIX/tiny-hf-bf16/model.safetensors" both/ &&
	sw-ls both >out && test_line_count = 112 out &&
	cut -f7 out | sort -u >dtypes && printf "BF16\ndtype\n" >want && test_cmp want dtypes &&
	sw-ls both/model.safetensors.index.json >out && cut -f7 out | sort -u >dtypes &&
	printf "F32\ndtype\n" >want && test_cmp want dtypes
'

# ---- D11: O(n log n) parsing; the figures are printed ----

# time_ls FILE: sw-ls reads FILE; print the seconds, fail past 60 s
time_ls() {
	start=$(date +%s.%N) &&
	sw-ls "$1" >out 2>err &&
	end=$(date +%s.%N) &&
	secs=$(awk -v a="$start" -v b="$end" "BEGIN { printf \"%.2f\", b - a }") &&
	echo "# sw-ls $1: $secs s" >&3 &&
	awk -v s="$secs" "BEGIN { exit !(s < 60) }"
}

test_expect_success 'D11: a header of 200000 metadata keys and 50000 tensors reads in < 60 s' '
	mkdir bigmeta && cp base/config.json bigmeta/ &&
	"$PY" - <<-\EOF &&
	import json, struct
	hdr = {"x.%d" % i: {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
	       for i in range(50000)}
	hdr["__metadata__"] = {"key.%08d" % i: "v" * 40 for i in range(200000)}
	h = json.dumps(hdr, separators=(",", ":")).encode()
	open("bigmeta/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + bytes(200000))
	EOF
	time_ls bigmeta && test_line_count = 50001 out
' 3>&1

test_expect_success 'D11: an index of 150000 entries reads in < 60 s' '
	mkdir bigidx && cp base/config.json bigidx/ &&
	"$PY" - <<-\EOF &&
	import json, struct
	names = ["x.%d" % i for i in range(150000)]
	wm = {}
	for k in (1, 2):
	    part, shard = names[k - 1::2], "model-%05d-of-00002.safetensors" % k
	    hdr = {n: {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
	           for i, n in enumerate(part)}
	    h = json.dumps(hdr, separators=(",", ":")).encode()
	    open("bigidx/" + shard, "wb").write(struct.pack("<Q", len(h)) + h + bytes(4 * len(part)))
	    wm.update({n: shard for n in part})
	json.dump({"metadata": {"total_size": 600000}, "weight_map": wm},
	          open("bigidx/model.safetensors.index.json", "w"))
	EOF
	time_ls bigidx && test_line_count = 150001 out
' 3>&1

# hostile2 #15: the header is checked and walked in place, no tree of it
# built; at 500,000 tensors the reader needs about 250 MB of address
# space where the tree needed over 600 MB. The bound holds the tools to
# that (600,000 KiB of address space; measured: refused at 400,000 KiB,
# passed at 600,000, where the tree ran out of memory). One thread:
# OpenBLAS reserves a buffer per thread. Unbounded under the sanitizers,
# whose shadow memory is address space too.
if [ -n "${SW_SANITIZED:-}" ]; then
	memlimit=:
else
	memlimit="ulimit -v 600000"
fi
test_expect_success 'hostile2 #15: 500000 tensors in layers the config lacks: refused in bounded memory' '
	mkdir dense && cp base/config.json dense/ &&
	"$PY" - <<-\EOF &&
	import json, struct
	n = 500000
	hdr = {"model.layers.%d.x.weight" % i: {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
	       for i in range(n)}
	h = json.dumps(hdr, separators=(",", ":")).encode()
	open("dense/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + bytes(4 * n))
	EOF
	(eval "$memlimit" && OMP_NUM_THREADS=1 exec timeout 60 sw-ls dense) >out 2>err; echo $? >status &&
	echo 65 >want && test_cmp want status && test_one_error sw-ls dense &&
	grep -q "model.layers.12.x.weight: layer number outside 0..11" err && test_line_count -le 1 out
'

test_done
