#!/bin/sh
# The bad-input table of PyTorch files (fixtures/bad/pt, written once by
# fixtures/make-bad-pt.py without torch, opcode by opcode): each broken
# file gives one line on stderr, "TOOL: FILE: what is wrong", exit 65 (66
# for what is missing beside it), nothing but the header on stdout, and
# sw-convert writes nothing. The same archive unbroken reads, with the
# values it holds. Nothing in a pickle is ever run: the one that calls
# os.system("touch PWNED") leaves no PWNED.
. "$(dirname "$0")/../lib/tap.sh"

B=$FIX/bad/pt

expect_error() {
	test_expect_code "$2" "$1" "$3" >out 2>err &&
	test_one_error "$1" "$3" &&
	grep -q -- "$4" err &&
	test_line_count -le 1 out
}

# exact by construction: the squares of small integers sum to 91 exactly in
# any order, and sqrt(91), sqrt(91 / 6) are correctly rounded
test_expect_success 'the unbroken archive reads: w = [[1, -2, 3], [-4, 5, -6]]' '
	sw-norms "$B/ok.pt" "$B/pkl-deflated-ok.pt" "$B/crc-zero-ok.pt" >out &&
	cut -f4,8,9,14-16 out >got &&
	printf "name\trows\tcols\tfrobenius\trms\tmax_abs\n" >want &&
	printf "w\t2\t3\t9.53939201\t3.89444048\t6\n" >>want &&
	printf "w\t2\t3\t9.53939201\t3.89444048\t6\n" >>want &&
	printf "w\t2\t3\t9.53939201\t3.89444048\t6\n" >>want &&
	test_cmp want got
'

# torch.save with compute_crc32=False writes every CRC-32 as 0 and
# torch.load reads the file: so do we; a CRC that is wrong and not 0 is
# still refused
test_expect_success 'CRC-32 0 (not computed) reads; a wrong one is refused' '
	sw-ls "$B/crc-zero-ok.pt" >out && test_line_count = 2 out &&
	cp "$B/pkl-deflated-ok.pt" badcrc.pt &&
	off=$(grep -abo "PK$(printf "\001\002")" badcrc.pt | head -n 1 | cut -d: -f1) &&
	printf "\001" | dd of=badcrc.pt bs=1 seek=14 conv=notrunc 2>/dev/null &&
	printf "\001" | dd of=badcrc.pt bs=1 seek=$((off + 16)) conv=notrunc 2>/dev/null &&
	expect_error sw-ls 65 badcrc.pt "its CRC-32 does not match its data"
'

cat >cases <<'CASES'
65 truncated.pt no valid end of central directory; truncated?
65 eocd-outside.pt no valid end of central directory
65 cd-outside.pt its local header is missing or disagrees with the central directory
65 local-name.pt archive/data.pkl: its local header names another record
65 local-encrypted.pt its local header's flags (0x1) disagree with the central directory's (0x0)
65 local-descriptor.pt its local header's flags (0x8) disagree with the central directory's (0x0)
65 eocd-cut.pt the end of central directory record is cut short or followed by other bytes
65 encrypted.pt archive/data.pkl is encrypted
65 record-twice.pt two records named archive/data/0: refused as ambiguous
65 record-outside.pt record 'elsewhere/x' is not under 'archive/'
65 no-data-pkl.pt a zip archive without archive/data.pkl: not a PyTorch checkpoint
65 storage-short.pt storage archive/data/0 holds 24 bytes, not the 8 x 4 its persistent id says
65 storage-missing.pt its storage archive/data/0 is not in the archive
65 storage-deflated.pt archive/data/0 is compressed
65 view-outside.pt a tensor addressing element 7 of storage 0, which has 6
65 opcode-inst.pt opcode INST (0x69) is not one torch.save writes: refused, nothing executed
65 global-os-system.pt global posix.system is not one a state dict needs: refused, nothing executed
65 global-eval.pt global builtins.eval is not one a state dict needs
65 reduce-storage.pt REDUCE of torch.FloatStorage is not allowed
65 pickle-truncated.pt data.pkl: byte 154:
65 memo-unset.pt a memo fetch of an index never stored
65 not-a-dict.pt the pickle holds a list, not a dict of tensors
65 name-twice.pt two tensors named w: refused as ambiguous
65 name-slash.pt tensor name 'a/b' is not a valid name
65 dict-cycle.pt a dict reached twice
65 legacy.pt a legacy PyTorch file (torch < 1.6
65 no-tensors.pt no tensors in its state dict
66 meta-no-params/consolidated.00.pth no params.json is beside it
CASES

# every reading tool, then sw-convert, on one case
each_tool() {
	for tool in sw-ls sw-norms sw-spectrum; do
		expect_error $tool "$1" "$B/$2" "$3" || return 1
	done
	test_expect_code "$1" sw-convert "$B/$2" converted >out 2>err &&
	test_one_error sw-convert "$B/$2" && grep -q -- "$3" err &&
	test_line_count = 0 out && ! ls -d converted* 2>/dev/null
}

while read -r code file pattern; do
	test_expect_success "$file: exit $code, '$pattern' (sw-ls, sw-norms, sw-spectrum, sw-convert)" "
		each_tool $code $file \"$pattern\"
	"
done <cases

test_expect_success 'the pickle calling os.system ran nothing' '
	test ! -e PWNED && test ! -e "$B/PWNED"
'

test_expect_success 'a .pt with Hugging Face names needs config.json beside it: exit 66' '
	cp "$B/ok.pt" alone.pt &&
	expect_error sw-ls 66 alone.pt "no config.json beside it"
'

test_expect_success 'a pytorch_model.bin.index.json listing what its shard lacks (65), or a shard missing (66)' '
	mkdir idx && cp "$B/ok.pt" "$B/config.json" idx/ &&
	printf "{\"weight_map\": {\"w\": \"ok.pt\", \"v\": \"ok.pt\"}}" >idx/pytorch_model.bin.index.json &&
	expect_error sw-ls 65 idx "the index lists 2 tensors, its shards hold 1" &&
	printf "{\"weight_map\": {\"w\": \"gone.bin\"}}" >idx/pytorch_model.bin.index.json &&
	expect_error sw-ls 66 idx "gone.bin: No such file or directory"
'

test_expect_success 'a Meta slice that is a symlink leading out of the directory: refused' '
	mkdir -p meta outside && cp "$B/meta-no-params/consolidated.00.pth" meta/ &&
	cp "$B/meta-no-params/consolidated.00.pth" outside/x.pth &&
	printf "{\"dim\": 3, \"n_layers\": 1, \"n_heads\": 1}" >meta/params.json &&
	ln -s ../outside/x.pth meta/consolidated.01.pth &&
	expect_error sw-ls 65 meta "consolidated.01.pth: a symlink to .*outside" &&
	expect_error sw-ls 65 meta/consolidated.00.pth "a symlink to"
'

test_expect_success 'Meta params.json: vocab_size 0 refused by name (-1 means the tokenizer.s)' '
	mkdir -p meta0 && cp "$B/meta-no-params/consolidated.00.pth" meta0/ &&
	printf "{\"dim\": 3, \"n_layers\": 1, \"n_heads\": 1, \"vocab_size\": 0}" >meta0/params.json &&
	expect_error sw-ls 65 meta0 "params.json: vocab_size = 0 is not a valid size (-1 or positive)"
'

# Pickle bombs: data.pkl of 63 MiB of EMPTY_LIST deflated into 64 KB, and
# 8 MiB of it stored. The first is refused before it is inflated (torch
# stores its pickle; a deflated one 50 times smaller than itself is no
# state dict), the second when its values outgrow what an archive of two
# records can hold (64 KiB a record plus 1 MiB), never by running out of
# memory: under a 600 MB address-space limit (not under ASan, which
# reserves terabytes) the refusal is still the one line, exit 65 (the old
# limit of 32 bytes a pickle byte ran out of memory there, exit 70). One
# thread: OpenBLAS maps a buffer per thread when it loads, and spins
# forever when a limit refuses it (hence the timeout too).
if [ -n "${SW_SANITIZED:-}" ]; then
	memlimit=:
else
	memlimit="ulimit -v 600000"
fi
test_expect_success 'pickle bombs: deflated and stored, refused in bounded memory' '
	cat >mkbomb.py <<-\EOF &&
	import sys, zipfile
	n = 63 << 20 if sys.argv[1] == "deflated" else 8 << 20
	with zipfile.ZipFile(sys.argv[2], "w") as z:
	    info = zipfile.ZipInfo("archive/data.pkl", date_time=(1980, 1, 1, 0, 0, 0))
	    if sys.argv[1] == "deflated":
	        info.compress_type = zipfile.ZIP_DEFLATED
	    z.writestr(info, b"\x80\x02" + b"]" * n + b".")
	    z.writestr(zipfile.ZipInfo("archive/version", date_time=(1980, 1, 1, 0, 0, 0)), b"3\n")
	EOF
	"$PY" mkbomb.py deflated deflated.pt && "$PY" mkbomb.py stored stored.pt &&
	test $(wc -c <deflated.pt) -lt 100000 &&
	(eval "$memlimit" && OMP_NUM_THREADS=1 exec timeout 60 sw-ls deflated.pt) >out 2>err; echo $? >status &&
	echo 65 >want && test_cmp want status && test_one_error sw-ls deflated.pt &&
	grep -q "archive/data.pkl inflates [0-9]* bytes to 66060291, more than 50 times: refused as a deflate bomb" err &&
	(eval "$memlimit" && OMP_NUM_THREADS=1 exec timeout 60 sw-ls stored.pt) >out 2>err; echo $? >status &&
	test_cmp want status && test_one_error sw-ls stored.pt &&
	grep -q "builds more than an archive of 2 records can justify (1179648 bytes)" err
'

test_expect_success 'a zip archive of a storage file is read only whole: every truncation refused' '
	size=$(wc -c <"$B/ok.pt") && i=1 && : >codes &&
	while [ $i -lt $size ]; do
		head -c $i "$B/ok.pt" >cut.pt && cp "$B/config.json" . &&
		{ sw-ls cut.pt >/dev/null 2>&1; echo $? >>codes; } && i=$((i + 7))
	done &&
	sort -u codes >got && echo 65 >want && test_cmp want got
'

test_done
