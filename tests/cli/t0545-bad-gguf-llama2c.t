#!/bin/sh
# Malformed GGUF and llama2.c files, crafted here byte by byte with printf
# (no Python): each is one line on stderr, "TOOL: FILE: what is wrong",
# exit 65, at most the header on stdout, for sw-ls, sw-norms and
# sw-spectrum, and sw-convert leaves nothing behind. The well-formed file
# each case breaks is read first, so a case fails for its fault alone.
. "$(dirname "$0")/../lib/tap.sh"

# le N BYTES: N as an unsigned little-endian integer of BYTES bytes
le() {
	le_n=$1 le_k=0
	while [ $le_k -lt "$2" ]; do
		printf "\\$(printf %o $((le_n % 256)))"
		le_n=$((le_n / 256)) le_k=$((le_k + 1))
	done
}

# str S [LEN]: a GGUF string, its length LEN (default: S's own)
str() {
	le "${2:-${#1}}" 8 && printf %s "$1"
}

# kv_u32 KEY N, kv_str KEY S [LEN]: a metadata pair
kv_u32() { str "$1" && le 4 4 && le "$2" 4; }
kv_str() { str "$1" && le 8 4 && str "$2" ${3:+"$3"}; }

# gguf TYPE ROWS [ARCH [ARCH_LEN [ALIGN [THETA_BITS]]]]: a GGUF v3 file of
# a Llama with d_model 4 (2 heads), one layer, vocabulary 3, whose one
# tensor is the embedding, token_embd.weight (dims 4, ROWS) of ggml type
# TYPE at offset 0: the header, zeros to a multiple of 32, 12 floats 1.0;
# with THETA_BITS, llama.rope.freq_base the float32 of those bits
gguf() {
	nkv=7 && { [ -z "${5:-}" ] || nkv=$((nkv + 1)); } && { [ -z "${6:-}" ] || nkv=$((nkv + 1)); } &&
	{
		printf GGUF && le 3 4 && le 1 8 && le $nkv 8 &&
		kv_str general.architecture "${3:-llama}" ${4:+"$4"} &&
		kv_u32 llama.embedding_length 4 && kv_u32 llama.block_count 1 &&
		kv_u32 llama.attention.head_count 2 && kv_u32 llama.feed_forward_length 4 &&
		kv_u32 llama.context_length 8 &&
		str llama.attention.layer_norm_rms_epsilon && le 6 4 && le 925353388 4 &&
		{ [ -z "${5:-}" ] || kv_u32 general.alignment "$5"; } &&
		{ [ -z "${6:-}" ] || { str llama.rope.freq_base && le 6 4 && le "$6" 4; }; } &&
		str token_embd.weight && le 2 4 && le 4 8 && le "$2" 8 && le "$1" 4 && le 0 8
	} >head.part &&
	size=$(wc -c <head.part) && cat head.part && head -c $(((32 - size % 32) % 32)) /dev/zero &&
	i=0 && while [ $i -lt 12 ]; do le 1065353216 4 && i=$((i + 1)); done
}

# refused FILE PATTERN: each tool fails on FILE alone, exit 65
refused() {
	for tool in sw-ls sw-norms sw-spectrum; do
		test_expect_code 65 $tool "$1" >out 2>err && test_one_error $tool "$1" &&
		grep -q -- "$2" err && test_line_count -le 1 out || return 1
	done
	for to in c.h5 c-hf; do
		test_expect_code 65 sw-convert "$1" $to >out 2>err && test_one_error sw-convert "$1" &&
		grep -q -- "$2" err && test_line_count = 0 out && ! ls -d c.h5* c-hf* 2>/dev/null || return 1
	done
}

test_expect_success 'setup: a well-formed GGUF, read' '
	gguf 0 3 >good.gguf &&
	sw-ls good.gguf >out && cut -f2,4,7,8 out >got &&
	printf "name\trole\tdtype\tshape\nmodel.embed_tokens.weight\tembed\tF32\t3x4\nlm_head.weight\tlm_head\ttied\t3x4\n" >want &&
	test_cmp want got && sw-norms good.gguf >out && test_line_count = 3 out
'

test_expect_success 'GGUF: a tensor past the end of the file' '
	gguf 0 300 >past.gguf &&
	refused past.gguf "token_embd.weight: data at offset [0-9]*, 4800 bytes, lies past the end of the file"
'

test_expect_success 'GGUF: a quantization not read, named with what to do' '
	gguf 20 3 >iq4nl.gguf &&
	refused iq4nl.gguf "token_embd.weight: IQ4_NL: a quantization not read (.*Q2_K to Q6_K are read; .*llama-quantize" &&
	gguf 16 3 >iq2.gguf && refused iq2.gguf "IQ2_XXS: a quantization not read"
'

test_expect_success 'GGUF: quantized rows of no whole block (4 values)' '
	gguf 12 3 >q4k.gguf && refused q4k.gguf "token_embd.weight: Q4_K rows of 4 values are no whole number of blocks of 256" &&
	gguf 2 3 >q40.gguf && refused q40.gguf "Q4_0 rows of 4 values are no whole number of blocks of 32"
'

test_expect_success 'GGUF: a string length past the end' '
	gguf 0 3 llama 1099511627776 >string.gguf &&
	refused string.gguf "general.architecture: string length 1099511627776 at byte [0-9]* runs past the end"
'

test_expect_success 'GGUF: an alignment that is no power of two, or 0' '
	gguf 0 3 llama 5 48 >align.gguf && refused align.gguf "general.alignment 48 is not a power of two" &&
	gguf 0 3 llama 5 0 >align0.gguf && refused align0.gguf "general.alignment 0 is not a power of two"
'

test_expect_success 'GGUF: a truncated header, an architecture that is no name, or a family'"'"'s with no GGUF table' '
	printf "GGUF\003\000\000" >short.gguf && refused short.gguf "truncated file" &&
	gguf 0 3 "no/such" >nosuch.gguf && refused nosuch.gguf "general.architecture .no/such. is not supported (llama, qwen2, .* are read)" &&
	gguf 0 3 mistral >mistral.gguf && refused mistral.gguf "general.architecture .mistral. is not supported"
'

test_expect_success 'GGUF: an absurd RoPE base (0, 1) refused by name, a sane one read' '
	gguf 0 3 llama "" "" 0 >theta0.gguf && refused theta0.gguf "config: rope_theta = 0 is not a finite number above 1" &&
	gguf 0 3 llama "" "" 1065353216 >theta1.gguf && refused theta1.gguf "config: rope_theta = 1 is not" &&
	gguf 0 3 llama "" "" 1176256512 >theta.gguf && sw-ls theta.gguf >out && test_line_count = 3 out
'

test_expect_success 'llama2.c: the real .bin four bytes short' '
	head -c 1056536 "$FIX/real/stories260K.bin" >short.bin &&
	refused short.bin "the llama2.c header.s sizes need 1056540 bytes (1040156 without the RoPE tables), the file has 1056536"
'

test_expect_success 'llama2.c: the real .bin with four bytes more' '
	cat "$FIX/real/stories260K.bin" >long.bin && printf "\000\000\000\000" >>long.bin &&
	refused long.bin "the file has 1056544"
'

# v1 VERSION VOCAB FLOATS: a version VERSION header (ak42) of a model with
# dim 4 (2 heads, 1 KV head), hidden 4, one layer, VOCAB tokens, seq_len
# 8, a shared classifier, then FLOATS zeros
v1() {
	le 1634415666 4 && le "$1" 4 && le 4 4 && le 4 4 && le 1 4 && le 2 4 && le 1 4 &&
	le "$2" 4 && le 8 4 && le 1 1 && head -c $((219 + 4 * $3)) /dev/zero
}

# its weights: norms 4 + 4 + 4, embedding 4*VOCAB, wq 16, wk 8, wv 8, wo 16,
# w1, w2, w3 16 each: 120 floats for a vocabulary of 3
test_expect_success 'setup: a well-formed llama2.c v1 file, read' '
	v1 1 3 120 >good.bin && sw-ls good.bin >out && test_line_count = 13 out
'

test_expect_success 'llama2.c v1: sizes that disagree with the file' '
	v1 1 3 119 >v1short.bin && refused v1short.bin "need 736 bytes, the file has 732"
'

test_expect_success 'llama2.c v1: version 2 (int8 groups), refused by version' '
	v1 2 3 120 >v2.bin && refused v2.bin "llama2.c version 2 is not supported"
'

test_done
