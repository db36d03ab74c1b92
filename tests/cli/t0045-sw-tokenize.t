#!/bin/sh
# sw-tokenize: train, encode, decode round trips on text and binary data,
# the token files sw-train reads, the tokenizer file, exact exit codes,
# and outputs that appear whole or not at all.
. "$(dirname "$0")/../lib/tap.sh"

CORPUS=$FIX/corpus.txt
SMALL="--batch 4 --seq-len 32 --d-model 32 --n-layers 2 --n-heads 4 --threads 2"

# no file NAME, nor a temporary NAME.tmp.*, in this directory
test_no_file() {
	for f in "$1" "$1".tmp.*; do
		if [ -e "$f" ]; then echo "$f exists"; return 1; fi
	done
}

# big.llmc: the corpus in the tokens of a vocabulary of 380 (ids beyond 300)
big_llmc() {
	sw-tokenize train --force --vocab 380 -o big.bpe "$CORPUS" >/dev/null &&
	sw-tokenize encode --force -t big.bpe -o big.llmc "$CORPUS" >/dev/null
}

test_expect_success 'setup: tok.bpe (vocabulary 300) and corpus.llmc, the corpus in its tokens' '
	sw-tokenize train --vocab 300 -o tok.bpe "$CORPUS" >/dev/null &&
	sw-tokenize encode -t tok.bpe -o corpus.llmc "$CORPUS" >/dev/null
'

test_expect_success 'train: the tokenizer file and its row' '
	sw-tokenize train --vocab 300 -o train.bpe "$CORPUS" >out 2>err &&
	test_line_count = 0 err && test_line_count = 2 out &&
	printf "file\tvocab\tmerges\tbytes\ttokens\tbytes_per_token\n" >expect &&
	head -n 1 out >header && test_cmp expect header &&
	awk -F"\t" "NR == 2 { exit !(\$1 == \"train.bpe\" && \$2 == 300 && \$3 == 44 && \$4 == 32768) }" out &&
	printf "scalewatch-bpe 1\npretokenizer words\nvocab 300\nmerges 44\n" >expect &&
	head -n 4 train.bpe >header && test_cmp expect header &&
	test_line_count = 48 train.bpe &&
	sed -n 5p train.bpe | grep -q "^256 [0-9]* [0-9]*$" && sed -n 48p train.bpe | grep -q "^299 "
'

test_expect_success 'encode: the trained segmentation, in an llm.c token file' '
	sw-tokenize train --vocab 300 -o enc.bpe "$CORPUS" >out &&
	sw-tokenize encode -t enc.bpe -o enc.llmc "$CORPUS" >enc 2>err &&
	test_line_count = 0 err &&
	tokens=$(awk -F"\t" "NR == 2 { print \$5 }" out) &&
	awk -F"\t" -v t="$tokens" "NR == 2 { exit !(\$2 == 32768 && \$3 == t) }" enc &&
	test "$(wc -c <enc.llmc)" = $((1024 + 2 * tokens)) &&
	od -An -t d4 -N 12 enc.llmc | awk -v t="$tokens" "{ exit !(\$1 == 20240520 && \$2 == 1 && \$3 == t) }"
'

test_expect_success 'decode: the same bytes' '
	sw-tokenize decode -t tok.bpe corpus.llmc >back &&
	cmp back "$CORPUS" &&
	sw-tokenize decode -t tok.bpe -o back2 corpus.llmc >out2 &&
	test_line_count = 0 out2 && cmp back2 "$CORPUS"
'

test_expect_success 'stdin: the same token file as from the file' '
	sw-tokenize encode -t tok.bpe -o stdin.llmc <"$CORPUS" >/dev/null &&
	cmp stdin.llmc corpus.llmc &&
	sw-tokenize encode -t tok.bpe -o dash.llmc - <"$CORPUS" >/dev/null &&
	cmp dash.llmc corpus.llmc &&
	sw-tokenize decode -t tok.bpe <corpus.llmc >back3 && cmp back3 "$CORPUS"
'

test_expect_success 'sw-train trains on the token file' '
	sw-train --data corpus.llmc --vocab 300 --out run $SMALL --steps 3 --eval-every 3 \
		--trace "" >last &&
	echo run/ckpt-000003.h5 >expect && test_cmp expect last &&
	sw-ls run/ckpt-000003.h5 >ls &&
	awk -F"\t" "\$2 == \"model.embed_tokens.weight\" { print \$8 }" ls >shape &&
	echo 300x32 >expect && test_cmp expect shape
'

test_expect_success 'binary data: trained on one HDF5 file, another round-trips' '
	sw-tokenize train --vocab 600 -o bin.bpe "$FIX/tiny.h5" >/dev/null 2>err &&
	sw-tokenize encode -t bin.bpe -o wide.llmc "$FIX/wide.h5" >/dev/null &&
	sw-tokenize decode -t bin.bpe wide.llmc >wide.back &&
	cmp wide.back "$FIX/wide.h5" &&
	sw-tokenize encode -t tok.bpe -o wide2.llmc "$FIX/wide.h5" >/dev/null &&
	sw-tokenize decode -t tok.bpe wide2.llmc >wide2.back && cmp wide2.back "$FIX/wide.h5"
'

test_expect_success 'every byte value, NUL and invalid UTF-8, with words and none' '
	awk "BEGIN { for (i = 0; i < 3000; i++) printf \"%c\", (i * 7 + (i > 1500) * 3) % 256 }" >bytes &&
	printf "\303\050\000\000 \377\376 abc \000" >>bytes &&
	test "$(wc -c <bytes)" = 3013 &&
	sw-tokenize train --vocab 400 --pretokenize none -o none.bpe bytes >/dev/null 2>err &&
	grep -q "^pretokenizer none$" none.bpe &&
	sw-tokenize train --vocab 600 -o h5.bpe "$FIX/tiny.h5" >/dev/null &&
	for t in tok.bpe h5.bpe none.bpe; do
		sw-tokenize encode --force -t $t -o b.llmc bytes >/dev/null &&
		sw-tokenize decode -t $t b.llmc >b.back && cmp b.back bytes || exit 1
	done
'

test_expect_success 'empty input: zero tokens, decodes to nothing' '
	: >empty &&
	sw-tokenize encode -t tok.bpe -o empty.llmc empty >out &&
	test "$(wc -c <empty.llmc)" = 1024 &&
	awk -F"\t" "NR == 2 { exit !(\$2 == 0 && \$3 == 0) }" out &&
	sw-tokenize decode -t tok.bpe empty.llmc >empty.back &&
	test "$(wc -c <empty.back)" = 0
'

test_expect_success 'a corpus too small stops early: a note on stderr, exit 0' '
	sw-tokenize train -o small.bpe "$CORPUS" >out 2>err &&
	test_line_count = 1 err &&
	v=$(sed -n 3p small.bpe | cut -d" " -f2) && test "$v" -gt 300 && test "$v" -lt 2048 &&
	grep -q "^sw-tokenize: small.bpe: stopped at a vocabulary of $v, not 2048: no pair occurs twice" err &&
	awk -F"\t" -v v="$v" "NR == 2 { exit !(\$2 == v) }" out
'

test_expect_success 'words keeps merges within words; none crosses them' '
	sw-tokenize train -o words.bpe "$CORPUS" >/dev/null 2>err &&
	sw-tokenize train --vocab 400 --pretokenize none -o cross.bpe "$CORPUS" >/dev/null &&
	sw-tokenize info --tokens words.bpe >words.tokens && test_line_count -gt 300 words.tokens &&
	cut -f6 words.tokens >words.bytes && ! grep -q "[a-z] [a-z]" words.bytes &&
	sw-tokenize info --tokens cross.bpe >cross.tokens &&
	cut -f6 cross.tokens >cross.bytes && grep -q "[a-z] [a-z]" cross.bytes
'

test_expect_success 'info: the summary and the tokens' '
	sw-tokenize train --force --vocab 400 --pretokenize none -o cross.bpe "$CORPUS" >/dev/null &&
	sw-tokenize info tok.bpe cross.bpe >info &&
	printf "file\tvocab\tmerges\tpretokenizer\tlongest\n" >expect && head -n 1 info >header &&
	test_cmp expect header &&
	awk -F"\t" "NR == 2 { exit !(\$2 == 300 && \$3 == 44 && \$4 == \"words\") } NR == 3 { exit !(\$4 == \"none\") }" info &&
	sw-tokenize info --tokens tok.bpe >toks && test_line_count = 301 toks &&
	awk -F"\t" "\$2 == 10 { print \$6 } \$2 == 92 { print \$6 } \$2 == 65 { print \$6 } \$2 == 255 { print \$6 }" toks >got &&
	printf "\\\\n\nA\n\\\\\\\\\n\\\\xff\n" >expect && test_cmp expect got &&
	awk -F"\t" "NR > 1 { len[\$2] = \$5; b[\$2] = \$6 }
		NR > 257 { if (b[\$2] != b[\$3] b[\$4] || len[\$2] != len[\$3] + len[\$4]) bad = 1 }
		END { exit bad }" toks &&
	sw-tokenize info --json --tokens tok.bpe >json && test_line_count = 300 json &&
	sed -n 11p json | grep -q "\"bytes\": \"\\\\\\\\n\"" &&
	echo tok.bpe | sw-tokenize info >stdin.info && test_line_count = 2 stdin.info &&
	sw-tokenize encode --json -t tok.bpe -o j.llmc "$CORPUS" >json && test_line_count = 1 json &&
	grep -q "^{\"file\": \".*corpus.txt\", \"bytes\": 32768, \"tokens\": [0-9]*, \"bytes_per_token\": " json
'

test_expect_success 'a malformed tokenizer: exit 65 with the line, no output' '
	{ head -n 6 tok.bpe && echo "258 256 256" && sed -n "8,48p" tok.bpe; } >dup.bpe &&
	sed -n 5p tok.bpe | cut -d" " -f2- | sed "s/^/258 /" >l7 && sed -i "7s/.*/$(cat l7)/" dup.bpe &&
	test_expect_code 65 sw-tokenize encode -t dup.bpe -o x.llmc "$CORPUS" 2>err &&
	test_one_error sw-tokenize dup.bpe && grep -q "line 7: token 258 merges .* again (token 256 does)" err &&
	test_no_file x.llmc &&
	test_expect_code 65 sw-tokenize decode -t "$CORPUS" corpus.llmc >out 2>err &&
	test_one_error sw-tokenize "$CORPUS" && grep -q "not a scalewatch BPE tokenizer" err &&
	test_line_count = 0 out &&
	head -c 100 tok.bpe >cut.bpe &&
	test_expect_code 65 sw-tokenize info cut.bpe >out 2>err && test_one_error sw-tokenize cut.bpe
'

test_expect_success 'a malformed token file, ids beyond the vocabulary: exit 65' '
	test_expect_code 65 sw-tokenize decode -t tok.bpe "$CORPUS" >out 2>err &&
	test_one_error sw-tokenize "$CORPUS" && test_line_count = 0 out &&
	big_llmc &&
	test_expect_code 65 sw-tokenize decode -t tok.bpe big.llmc >out 2>err &&
	test_one_error sw-tokenize big.llmc && grep -q "is not below the vocabulary size 300" err &&
	test_line_count = 0 out &&
	test_expect_code 65 sw-tokenize decode -t tok.bpe -o nope big.llmc 2>err && test_no_file nope
'

test_expect_success 'decode to stdout goes on after a bad file; -o does not' '
	big_llmc &&
	test_expect_code 65 sw-tokenize decode -t tok.bpe big.llmc corpus.llmc >out 2>err &&
	test_one_error sw-tokenize big.llmc && cmp out "$CORPUS" &&
	test_expect_code 65 sw-tokenize decode -t tok.bpe -o nope corpus.llmc big.llmc 2>err &&
	test_no_file nope
'

test_expect_success 'missing input: exit 66, and no output, not even a temporary one' '
	test_expect_code 66 sw-tokenize train -o new.bpe nonexistent 2>err &&
	test_one_error sw-tokenize nonexistent && test_no_file new.bpe &&
	test_expect_code 66 sw-tokenize encode -t tok.bpe -o part.llmc "$CORPUS" nonexistent >out 2>err &&
	test_one_error sw-tokenize nonexistent && test_no_file part.llmc && test_line_count = 0 out &&
	test_expect_code 66 sw-tokenize encode -t nonexistent -o part.llmc "$CORPUS" 2>err &&
	test_one_error sw-tokenize nonexistent &&
	test_expect_code 66 sw-tokenize decode -t tok.bpe nonexistent 2>err &&
	test_expect_code 66 sw-tokenize encode -t tok.bpe -o part.llmc . 2>err &&
	test_one_error sw-tokenize . && test_no_file part.llmc
'

test_expect_success 'a failed run leaves an existing output as it was' '
	cp corpus.llmc keep.llmc &&
	test_expect_code 66 sw-tokenize encode --force -t tok.bpe -o keep.llmc "$FIX/wide.h5" nonexistent 2>err &&
	cmp keep.llmc corpus.llmc && test_no_file keep.llmc.tmp &&
	cp tok.bpe keep.bpe &&
	test_expect_code 66 sw-tokenize train --force -o keep.bpe nonexistent 2>err && cmp keep.bpe tok.bpe
'

test_expect_success 'cannot create the output: exit 73' '
	test_expect_code 73 sw-tokenize train -o /nonexistent/t.bpe "$CORPUS" 2>err &&
	test_line_count = 1 err &&
	test_expect_code 73 sw-tokenize encode -t tok.bpe -o /nonexistent/t.llmc "$CORPUS" 2>err &&
	test_expect_code 73 sw-tokenize decode -t tok.bpe -o /nonexistent/t corpus.llmc 2>err
'

test_expect_success 'usage errors: exit 64' '
	test_expect_code 64 sw-tokenize 2>err &&
	test_expect_code 64 sw-tokenize frobnicate 2>err && grep -q "unknown command" err &&
	test_expect_code 64 sw-tokenize train --vocab 256 -o x "$CORPUS" 2>err &&
	test_expect_code 64 sw-tokenize train --vocab 65537 -o x "$CORPUS" 2>err &&
	test_expect_code 64 sw-tokenize train --vocab 2k -o x "$CORPUS" 2>err &&
	test_expect_code 64 sw-tokenize train --pretokenize gpt2 -o x "$CORPUS" 2>err &&
	test_expect_code 64 sw-tokenize train "$CORPUS" 2>err && grep -q "needs -o" err &&
	test_expect_code 64 sw-tokenize encode -o x "$CORPUS" 2>err && grep -q "needs -t" err &&
	test_expect_code 64 sw-tokenize encode -t tok.bpe "$CORPUS" 2>err &&
	test_expect_code 64 sw-tokenize decode -t tok.bpe --vocab 300 corpus.llmc 2>err &&
	test_expect_code 64 sw-tokenize info --bogus tok.bpe 2>err &&
	test_expect_code 64 sw-tokenize decode --json -t tok.bpe corpus.llmc 2>err &&
	test_expect_code 64 sw-tokenize encode --tokens -t tok.bpe -o x "$CORPUS" 2>err &&
	test_no_file x
'

test_expect_success '--help and --version' '
	sw-tokenize --help >out && grep -q "^usage: sw-tokenize train" out &&
	sw-tokenize train --help >out && grep -q "^usage: sw-tokenize train" out &&
	sw-tokenize --version >out && grep -q "^sw-tokenize (scalewatch) " out
'

test_expect_success 'closing the pipe early ends decode quietly' '
	for i in 1 2 3 4 5 6 7 8; do echo corpus.llmc; done >names &&
	# pipe-ok: the pipe is what is tested; the status is kept in status
	{ sw-tokenize decode -t tok.bpe $(cat names) 2>err; echo $? >status; } | head -c 10 >/dev/null &&
	test_closed_quietly status && test_line_count = 0 err
'

test_done
