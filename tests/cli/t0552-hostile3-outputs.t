#!/bin/sh
# Outputs, third hostile round ([hostile3] C, I, F, N): this script extends
# the bad-input table (tests/cli/t0500-bad-input.t) with what a writer
# must refuse and what it must be able to write.
#   C  an output that is one of the inputs (the same file by device and
#      inode: by name, ./name, a hard link, a symbolic link, a glob, the
#      standard input) is refused, --force or not; an existing file is
#      replaced only with --force. Every writer: sw-tokenize train, encode
#      and decode -o, sw-plot -o, sw-convert (a file and a directory),
#      sw-sharpness --dump-labels, sw-hessian --dump-batch. Exit 73, one
#      line, the inputs' checksums the same after.
#   I  a name of 236 to 255 bytes can be written (its temporary name is
#      cut to fit), no temporary file left; 256 bytes is 73.
#   F  sw-plot draws the same figure, byte for byte, under a decimal-comma
#      locale (de_DE.UTF-8, made here with localedef) as under C.
#   N  bytes_per_token of no token is empty (null in JSON), not 0.
. "$(dirname "$0")/../lib/tap.sh"

# the model tools' batch: the data, a batch of two sequences
SH="--data corpus.txt --batch-tokens 32 --seq-len 16"

# sums NAME FILE...: the checksums of FILEs into NAME
sums() {
	out=$1 && shift && cksum "$@" >"$out"
}

# no_temp: no temporary file (*.tmp.*) anywhere under .
no_temp() {
	find . -name "*.tmp.*" >temps && test_line_count = 0 temps
}

# refused FILE TEXT: stderr is one line "TOOL: FILE: ..." ending in TEXT
# (the tool from $tool)
refused() {
	test_one_error "$tool" "$1" && grep -q -- "$2\$" err
}

test_expect_success 'setup: a corpus, a tokenizer, tokens, a run with two checkpoints, tables' '
	cp "$FIX/corpus.txt" corpus.txt &&
	sw-tokenize train --vocab 300 -o tok.bpe corpus.txt >/dev/null &&
	sw-tokenize encode -t tok.bpe -o corpus.llmc corpus.txt >/dev/null &&
	sw-train --data corpus.txt --out run --steps 4 --ckpt-every 2 --eval-every 2 \
		--trace-every 1 --batch 2 --seq-len 16 --d-model 16 --n-layers 1 >/dev/null &&
	test -f run/ckpt-000002.h5 && test -f run/ckpt-000004.h5 &&
	cp run/ckpt-000004.h5 c.h5 && mkdir figrun && cp run/ckpt-*.h5 run/trace.h5 figrun &&
	sw-norms --role lm_head run/ckpt-*.h5 >norms.tsv &&
	sw-convert c.h5 hf >/dev/null && test -f hf/model.safetensors
'

# ---- C: an output that is an input ---------------------------------------

test_expect_success 'sw-sharpness --dump-labels run/ckpt-*.h5 (the glob makes the first checkpoint the labels file): 73, both untouched' '
	tool=sw-sharpness && sums before run/ckpt-*.h5 &&
	test_expect_code 73 sw-sharpness $SH --dump-labels run/ckpt-*.h5 >out 2>err &&
	refused run/ckpt-000002.h5 "exists (--force replaces it)" &&
	sums after run/ckpt-*.h5 && test_cmp before after
'

test_expect_success 'sw-sharpness --force --dump-labels onto its checkpoint (name, ./name, a/../name, hard link, symlink) or --data: 73 each' '
	tool=sw-sharpness && ln c.h5 hard.h5 && ln -s c.h5 sym.h5 &&
	sums before c.h5 corpus.txt &&
	for out in c.h5 ./c.h5 run/../c.h5 hard.h5 sym.h5; do
		test_expect_code 73 sw-sharpness $SH --force --dump-labels "$out" c.h5 >out 2>err &&
		refused "$out" "is also an input (c.h5): not replaced, even with --force" || exit 1
	done &&
	test_expect_code 73 sw-sharpness $SH --force --dump-labels corpus.txt c.h5 >out 2>err &&
	refused corpus.txt "is also an input (corpus.txt): not replaced, even with --force" &&
	sums after c.h5 corpus.txt && test_cmp before after && test -L sym.h5 && no_temp
'

test_expect_success 'sw-hessian --dump-batch c.h5 c.h5, and the checkpoint named on stdin: 73, untouched' '
	tool=sw-hessian && sums before c.h5 corpus.txt &&
	test_expect_code 73 sw-hessian $SH --top 1 --dump-batch c.h5 c.h5 >out 2>err &&
	refused c.h5 "is also an input (c.h5): not replaced, even with --force" &&
	test_expect_code 73 sw-hessian $SH --top 1 --force --dump-batch hard.h5 c.h5 >out 2>err &&
	refused hard.h5 "is also an input (c.h5): not replaced, even with --force" &&
	echo c.h5 >names &&
	test_expect_code 73 sw-hessian $SH --top 1 --force --dump-batch sym.h5 - <names >out 2>err &&
	refused sym.h5 "is also an input (c.h5): not replaced, even with --force" &&
	test_expect_code 73 sw-hessian $SH --top 1 --force --dump-batch ./corpus.txt c.h5 >out 2>err &&
	refused ./corpus.txt "is also an input (corpus.txt): not replaced, even with --force" &&
	sums after c.h5 corpus.txt && test_cmp before after && no_temp
'

test_expect_success 'a Hugging Face directory read by the model tools: its shard and config.json as the --dump file are 73' '
	sums before hf/model.safetensors hf/config.json &&
	tool=sw-hessian &&
	test_expect_code 73 sw-hessian $SH --top 1 --force --dump-batch hf/model.safetensors hf >out 2>err &&
	refused hf/model.safetensors "is also an input (hf/model.safetensors): not replaced, even with --force" &&
	tool=sw-sharpness &&
	test_expect_code 73 sw-sharpness $SH --force --dump-labels hf/config.json hf/model.safetensors >out 2>err &&
	refused hf/config.json "is also an input (hf/config.json): not replaced, even with --force" &&
	sums after hf/model.safetensors hf/config.json && test_cmp before after && no_temp
'

test_expect_success 'sw-tokenize train and encode -o corpus.txt corpus.txt: 73, with --force too, the corpus untouched' '
	tool=sw-tokenize && sums before corpus.txt tok.bpe corpus.llmc &&
	for force in "" --force; do
		test_expect_code 73 sw-tokenize train $force -o corpus.txt corpus.txt >out 2>err &&
		refused corpus.txt "is also an input (corpus.txt): not replaced, even with --force" &&
		test_expect_code 73 sw-tokenize encode $force -t tok.bpe -o corpus.txt corpus.txt >out 2>err &&
		refused corpus.txt "is also an input (corpus.txt): not replaced, even with --force" &&
		test_line_count = 0 out || exit 1
	done &&
	sums after corpus.txt tok.bpe corpus.llmc && test_cmp before after && no_temp
'

test_expect_success 'sw-tokenize: the output as the tokenizer, a token file, stdin, a hard or symbolic link of the corpus: 73 each' '
	tool=sw-tokenize && ln corpus.txt corpus.hard && ln -s corpus.txt corpus.sym &&
	sums before corpus.txt tok.bpe corpus.llmc &&
	test_expect_code 73 sw-tokenize encode --force -t tok.bpe -o tok.bpe corpus.txt >out 2>err &&
	refused tok.bpe "is also an input (tok.bpe): not replaced, even with --force" &&
	test_expect_code 73 sw-tokenize decode --force -t tok.bpe -o corpus.llmc corpus.llmc >out 2>err &&
	refused corpus.llmc "is also an input (corpus.llmc): not replaced, even with --force" &&
	test_expect_code 73 sw-tokenize decode --force -t tok.bpe -o ./tok.bpe corpus.llmc >out 2>err &&
	refused ./tok.bpe "is also an input (tok.bpe): not replaced, even with --force" &&
	test_expect_code 73 sw-tokenize train --force -o corpus.txt <corpus.txt >out 2>err &&
	refused corpus.txt "is also an input (stdin): not replaced, even with --force" &&
	test_expect_code 73 sw-tokenize train --force -o corpus.hard corpus.txt >out 2>err &&
	refused corpus.hard "is also an input (corpus.txt): not replaced, even with --force" &&
	test_expect_code 73 sw-tokenize encode --force -t tok.bpe -o corpus.sym corpus.txt >out 2>err &&
	refused corpus.sym "is also an input (corpus.txt): not replaced, even with --force" &&
	sums after corpus.txt tok.bpe corpus.llmc && test_cmp before after && test -L corpus.sym && no_temp
'

if command -v gnuplot >/dev/null 2>&1; then
	test_expect_success 'sw-plot --force with the table as the figure: 73, the table untouched' '
		tool=sw-plot && cp norms.tsv table.svg && sums before table.svg &&
		test_expect_code 73 sw-plot --force norms table.svg -o table.svg >out 2>err &&
		refused table.svg "is also an input (table.svg): not replaced, even with --force" &&
		test_expect_code 73 sw-plot --force norms - -o table.svg <table.svg >out 2>err &&
		refused table.svg "is also an input (stdin): not replaced, even with --force" &&
		sums after table.svg && test_cmp before after && no_temp
	'
else
	test_skip 'sw-plot --force with the table as the figure: 73, the table untouched' 'gnuplot not installed'
fi

test_expect_success 'sw-convert --force: out the input, its file, its config.json, or its own directory: 73 each, untouched' '
	tool=sw-convert && sums before c.h5 hf/model.safetensors hf/config.json &&
	test_expect_code 73 sw-convert --force --to hdf5 c.h5 c.h5 >out 2>err &&
	refused c.h5 "is also an input (c.h5): not replaced, even with --force" &&
	test_expect_code 73 sw-convert --force --to hdf5 c.h5 sym.h5 >out 2>err &&
	refused sym.h5 "is also an input (c.h5): not replaced, even with --force" &&
	test_expect_code 73 sw-convert --force hf hf/model.safetensors >out 2>err &&
	refused hf/model.safetensors "is also an input (hf/model.safetensors): not replaced, even with --force" &&
	test_expect_code 73 sw-convert --force hf hf/config.json >out 2>err &&
	refused hf/config.json "is also an input (hf/config.json): not replaced, even with --force" &&
	test_expect_code 73 sw-convert --force --to safetensors hf hf >out 2>err &&
	refused hf "is also an input (hf): not replaced, even with --force" &&
	test_expect_code 73 sw-convert --force --to safetensors hf/model.safetensors hf >out 2>err &&
	refused hf/model.safetensors "is also an input (hf/model.safetensors): not replaced, even with --force" &&
	sums after c.h5 hf/model.safetensors hf/config.json && test_cmp before after && no_temp
'

test_expect_success 'sw-convert --force: an HDF5 file exported into its own directory, over an earlier export there: exit 0' '
	mkdir own && cp c.h5 own/c.h5 && sw-convert c.h5 own/earlier >/dev/null &&
	cp own/earlier/* own/ && sums before own/c.h5 &&
	sw-convert --force own/c.h5 own >out 2>err && test_line_count = 0 err &&
	sw-convert --force own/c.h5 own >out 2>err && test_line_count = 0 err &&
	cmp own/model.safetensors own/earlier/model.safetensors &&
	sums after own/c.h5 && test_cmp before after && no_temp
'

# ---- C: an existing file is replaced only with --force ------------------

# keeps TOOL OUT CMD...: CMD (which writes OUT) is 73 with OUT kept as the
# user's, then with --force added at its end replaces it
keeps() {
	tool=$1 && out=$2 && shift 2 &&
	echo "the user s file" >"$out" && cp "$out" user.copy &&
	test_expect_code 73 "$@" >out 2>err &&
	refused "$out" "exists (--force replaces it)" && cmp "$out" user.copy &&
	"$@" --force >out 2>err && test -s "$out" && ! cmp -s "$out" user.copy
}

test_expect_success 'every writer keeps an existing file without --force (73) and replaces it with --force' '
	keeps sw-tokenize t.bpe sw-tokenize train --vocab 260 -o t.bpe corpus.txt &&
	keeps sw-tokenize t.llmc sw-tokenize encode -t tok.bpe -o t.llmc corpus.txt &&
	keeps sw-tokenize t.txt sw-tokenize decode -t tok.bpe -o t.txt corpus.llmc && cmp t.txt corpus.txt &&
	keeps sw-sharpness labels.h5 sw-sharpness $SH --dump-labels labels.h5 c.h5 &&
	keeps sw-hessian batch.h5 sw-hessian $SH --top 1 --probes 1 --dump-batch batch.h5 c.h5 &&
	keeps sw-convert back.h5 sw-convert hf back.h5 &&
	if command -v gnuplot >/dev/null 2>&1; then
		keeps sw-plot f.svg sw-plot norms norms.tsv -o f.svg
	fi &&
	no_temp
'

test_expect_success 'sw-convert: an existing directory kept without --force, its own files replaced with it' '
	tool=sw-convert && sw-convert c.h5 dir >/dev/null && sums before dir/model.safetensors &&
	echo "the user s notes" >dir/README && sums notes dir/README &&
	test_expect_code 73 sw-convert c.h5 dir >out 2>err && refused dir "exists (--force replaces it)" &&
	sums after dir/model.safetensors && test_cmp before after &&
	sw-convert --force "$FIX/tiny.h5" dir >out 2>err && test_line_count = 0 err &&
	sums after dir/README && test_cmp notes after && no_temp
'

test_expect_success 'a directory or a FIFO as the output: 73 with --force too, nothing replaced' '
	mkdir -p adir && mkfifo fifo &&
	tool=sw-tokenize &&
	test_expect_code 73 sw-tokenize train --force -o adir corpus.txt >out 2>err && refused adir "is a directory" &&
	test_expect_code 73 sw-tokenize decode --force -t tok.bpe -o fifo corpus.llmc >out 2>err &&
	refused fifo "exists and is not a regular file" && test -p fifo && test -d adir &&
	tool=sw-hessian &&
	test_expect_code 73 sw-hessian $SH --force --dump-batch adir c.h5 >out 2>err && refused adir "is a directory" &&
	tool=sw-convert &&
	test_expect_code 73 sw-convert --force --to hdf5 c.h5 fifo >out 2>err &&
	refused fifo "exists and is not a regular file" && test -p fifo && no_temp
'

test_expect_success 'a symbolic link as the output (to a file, dangling): 73 with --force too, neither followed nor replaced' '
	echo "the user s notes" >notes.txt && sums before notes.txt &&
	ln -s notes.txt link.bpe && ln -s nowhere/x dangling.svg &&
	tool=sw-tokenize &&
	test_expect_code 73 sw-tokenize train --force --vocab 260 -o link.bpe corpus.txt >out 2>err &&
	refused link.bpe "is a symbolic link: not followed, not replaced, even with --force" &&
	test_expect_code 73 sw-tokenize decode -t tok.bpe -o link.bpe corpus.llmc >out 2>err &&
	refused link.bpe "is a symbolic link: not followed, not replaced, even with --force" &&
	tool=sw-sharpness &&
	test_expect_code 73 sw-sharpness $SH --force --dump-labels dangling.svg c.h5 >out 2>err &&
	refused dangling.svg "is a symbolic link: not followed, not replaced, even with --force" &&
	test -L link.bpe && test -L dangling.svg && test ! -e nowhere &&
	sums after notes.txt && test_cmp before after && no_temp
'

test_expect_success '--force is an option of the output: without one, 64' '
	test_expect_code 64 sw-tokenize decode --force -t tok.bpe corpus.llmc >out 2>err &&
	grep -q "^sw-tokenize: --force goes with -o FILE$" err &&
	test_expect_code 64 sw-sharpness $SH --force c.h5 >out 2>err &&
	grep -q "^sw-sharpness: --force goes with --dump-labels$" err &&
	test_expect_code 64 sw-hessian $SH --force c.h5 >out 2>err &&
	grep -q "^sw-hessian: --force goes with --dump-batch or --eigenvectors$" err
'

# ---- I: names of 236 to 255 bytes ---------------------------------------

# name N EXT: a file name of N bytes ending in EXT
name() {
	awk -v n="$1" -v e="$2" "BEGIN { s = \"\"; while (length(s) < n - length(e)) s = s \"n\"; print s e }"
}

test_expect_success 'names of 236, 250 and 255 bytes: every writer writes them, no temporary left' '
	for n in 236 250 255; do
		bpe=$(name $n .bpe) && llmc=$(name $n .llmc) && txt=$(name $n .txt) &&
		h5=$(name $n .h5) && dir=$(name $n .hf) && svg=$(name $n .svg) &&
		sw-tokenize train --vocab 260 -o "$bpe" corpus.txt >out &&
		sw-tokenize encode -t tok.bpe -o "$llmc" corpus.txt >out &&
		sw-tokenize decode -t tok.bpe -o "$txt" corpus.llmc && cmp "$txt" corpus.txt &&
		sw-convert c.h5 "$dir" && test -f "$dir/model.safetensors" &&
		sw-convert "$dir" "$h5" && test -s "$h5" &&
		sw-sharpness $SH --force --dump-labels "$h5" c.h5 >out && test -s "$h5" &&
		sw-hessian $SH --top 1 --probes 1 --force --dump-batch "$h5" c.h5 >out && test -s "$h5" &&
		if command -v gnuplot >/dev/null 2>&1; then
			sw-plot norms norms.tsv -o "$svg" && grep -q "<svg" "$svg"
		fi &&
		test -s "$bpe" && test -s "$llmc" && no_temp || exit 1
	done
'

test_expect_success 'a name of 256 bytes: 73, one line, nothing written' '
	bpe=$(name 256 .bpe) && dir=$(name 256 .hf) && mkdir -p lists && ls >lists/before &&
	test_expect_code 73 sw-tokenize train --vocab 260 -o "$bpe" corpus.txt >out 2>err &&
	test_line_count = 1 err && grep -q "File name too long$" err &&
	test_expect_code 73 sw-convert c.h5 "$dir" >out 2>err &&
	test_line_count = 1 err && grep -q "File name too long$" err &&
	ls >lists/after && test_cmp lists/before lists/after && no_temp
'

# ---- F: the same figure in any locale -----------------------------------

# A decimal-comma locale made here (localedef, into a directory of this
# test's, read through LOCPATH: nothing installed); skipped where it
# cannot be made or does not change awk's numbers.
mkdir -p locales
if command -v gnuplot >/dev/null 2>&1 &&
   localedef -i de_DE -f UTF-8 locales/de_DE.UTF-8 >/dev/null 2>&1 &&
   [ "$(LOCPATH=$TRASH/locales LC_ALL=de_DE.UTF-8 awk 'BEGIN { printf "%.1f", 1.5 }')" = "1,5" ]; then
	test_expect_success 'setup: the tables of figures that read numbers through awk and sort -g' '
		sw-trace --series loss,val_loss,lr,grad_norm,out_norm figrun/trace.h5 >training.tsv &&
		sw-spectrum --esd-fit --hist 20 --role down figrun/ckpt-000004.h5 >esd-fit.tsv &&
		sw-qkdrift figrun/ckpt-*.h5 >qkdrift.tsv &&
		sw-norms --role lm_head figrun/ckpt-*.h5 >norms.tsv &&
		awk "BEGIN { print \"lr\tbatch\ttokens\td_model\tloss\tout_norm\";
			for (d = 1; d <= 3; d++) for (e = -4; e <= -1; e++) for (b = 8; b <= 32; b *= 2)
				printf \"%g\t%d\t%d\t64\t%g\t%g\n\", 2.5 * 10^e, b, 1000 * 4^d, 3 + (e + 2 + d / 4)^2 + (b / 16 - d / 2)^2 / 10, 2^(7 + e + 2 + d / 4) }" >runs.tsv &&
		sw-transfer --table - <runs.tsv >transfer.tsv &&
		sw-transfer - <runs.tsv >transfer-fits.tsv
	'
	for kind in training esd-fit qkdrift norms transfer transfer-fits; do
		test_expect_success "sw-plot $kind under LC_ALL=de_DE.UTF-8 (and LC_NUMERIC): exit 0, the SVG of the C locale, byte for byte" '
			LC_ALL=C sw-plot $kind $kind.tsv -o $kind-c.svg &&
			LOCPATH=$TRASH/locales LC_ALL=de_DE.UTF-8 sw-plot $kind $kind.tsv -o $kind-de.svg 2>err &&
			test_line_count = 0 err && cmp $kind-c.svg $kind-de.svg &&
			LOCPATH=$TRASH/locales LC_ALL= LANG=de_DE.UTF-8 LC_NUMERIC=de_DE.UTF-8 \
				sw-plot $kind $kind.tsv -o $kind-num.svg &&
			cmp $kind-c.svg $kind-num.svg
		'
	done
else
	test_skip 'sw-plot under a decimal-comma locale: the SVG of the C locale' \
		'gnuplot missing, or localedef cannot make de_DE.UTF-8 (Debian: the locales package)'
fi

# ---- N: bytes_per_token of no token -------------------------------------

test_expect_success 'bytes_per_token of 0 bytes over 0 tokens: an empty cell, null in JSON' '
	: >empty.txt &&
	sw-tokenize encode -t tok.bpe -o empty.llmc empty.txt >tsv &&
	printf "file\tbytes\ttokens\tbytes_per_token\nempty.txt\t0\t0\t\n" >expect && test_cmp expect tsv &&
	sw-tokenize encode --force --json -t tok.bpe -o empty.llmc empty.txt >json &&
	echo "{\"file\": \"empty.txt\", \"bytes\": 0, \"tokens\": 0, \"bytes_per_token\": null}" >expect &&
	test_cmp expect json &&
	sw-tokenize train --json -o empty.bpe empty.txt >json 2>err &&
	grep -q "\"bytes\": 0, \"tokens\": 0, \"bytes_per_token\": null}$" json &&
	sw-tokenize encode --force -t tok.bpe -o empty.llmc corpus.txt empty.txt >tsv &&
	awk -F"\t" "NR == 2 { exit !(\$4 > 1) } NR == 3 { exit !(\$4 == \"\") }" tsv
'

test_done
