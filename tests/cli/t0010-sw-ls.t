#!/bin/sh
# sw-ls: tensors in model order with their metadata, in both formats.
. "$(dirname "$0")/../lib/tap.sh"

test_expect_success 'header names the columns' '
	sw-ls "$FIX/tiny.h5" >actual &&
	head -n 1 actual >header &&
	printf "file\tname\tblock\trole\tlayer\tkind\tdtype\tshape\tnumel\texpert\n" >expect &&
	test_cmp expect header
'

test_expect_success 'every tensor once: 1 + 12x9 + 1 + 1' '
	sw-ls "$FIX/tiny.h5" >actual &&
	test_line_count = 112 actual
'

test_expect_success 'layers in numeric order (10 after 9, not after 1)' '
	sw-ls "$FIX/tiny.h5" >actual &&
	awk -F"\t" "NR > 1 && \$5 >= 0 { print \$5 }" actual | uniq >layers &&
	seq 0 11 >expect &&
	test_cmp expect layers
'

test_expect_success 'model order: embedding first, final norm, head last' '
	sw-ls "$FIX/tiny.h5" >actual &&
	sed -n "2p" actual | cut -f2 >first &&
	tail -n 2 actual | cut -f2 >last &&
	echo model.embed_tokens.weight >expect1 &&
	printf "model.norm.weight\nlm_head.weight\n" >expect2 &&
	test_cmp expect1 first && test_cmp expect2 last
'

test_expect_success 'metadata of a GQA k projection' '
	sw-ls "$FIX/tiny.h5" >actual &&
	grep "model.layers.10.self_attn.k_proj.weight" actual | cut -f3-9 >row &&
	printf "qk\tk\t10\tmatrix\tF32\t8x16\t128\n" >expect &&
	test_cmp expect row
'

test_expect_success '--summary: parameters per block type add up' '
	sw-ls --summary "$FIX/tiny.h5" >actual &&
	cut -f2-4 actual >counts &&
	printf "block\ttensors\tparams\nemb\t1\t768\nqk\t24\t4608\nvo\t24\t4608\nffn\t36\t23040\nnorm\t25\t400\nout\t1\t768\ntotal\t111\t34192\n" >expect &&
	test_cmp expect counts
'

test_expect_success 'safetensors: same tensors, same order, same metadata' '
	sw-ls "$FIX/tiny.h5" >h5.out && cut -f2-9 h5.out >h5 &&
	sw-ls "$FIX/tiny-hf" >st.out && cut -f2-9 st.out >st &&
	sw-ls "$FIX/tiny-hf-sharded/model.safetensors.index.json" >sharded.out &&
	cut -f2-9 sharded.out >sharded &&
	test_cmp h5 st && test_cmp h5 sharded
'

test_expect_success 'BF16 safetensors: dtype BF16' '
	sw-ls --role q --layer 0 "$FIX/tiny-hf-bf16" >actual &&
	test_line_count = 2 actual &&
	tail -n 1 actual | cut -f7 >dtype &&
	echo BF16 >expect && test_cmp expect dtype
'

test_expect_success 'a tied head is listed as the embedding, without parameters' '
	sw-ls --role lm_head "$FIX/wide.h5" >actual &&
	tail -n 1 actual | cut -f2-9 >row &&
	printf "lm_head.weight\tout\tlm_head\t-1\tmatrix\ttied\t100x64\t0\n" >expect &&
	test_cmp expect row
'

test_expect_success 'selection: --block, --layer, --role, --name combine' '
	sw-ls --block ffn --layer 2-3 "$FIX/tiny.h5" >a && test_line_count = 7 a &&
	sw-ls --role q,k --layer 0 "$FIX/tiny.h5" >b && test_line_count = 3 b &&
	sw-ls --name "*.norm.*" "$FIX/tiny.h5" >c && test_line_count = 2 c &&
	sw-ls --layer -1 "$FIX/tiny.h5" >d && test_line_count = 4 d
'

test_expect_success 'file names from stdin, with no FILE and with -' '
	printf "%s\n%s\n" "$FIX/tiny.h5" "$FIX/wide.h5" | sw-ls --summary >a &&
	printf "%s\n" "$FIX/wide.h5" | sw-ls --summary - >b &&
	grep -c total a >n && echo 2 >expect && test_cmp expect n &&
	test_line_count = 7 b
'

test_expect_success '--json: one object per tensor with the same fields' '
	sw-ls --json --role embed "$FIX/tiny.h5" >actual &&
	echo "{\"file\": \"$FIX/tiny.h5\", \"name\": \"model.embed_tokens.weight\", \"block\": \"emb\", \"role\": \"embed\", \"layer\": -1, \"kind\": \"matrix\", \"dtype\": \"F32\", \"shape\": [48, 16], \"numel\": 768, \"expert\": -1}" >expect &&
	test_cmp expect actual
'

test_expect_success '--help and --version exit 0 on stdout' '
	sw-ls --help >out && grep -q "^usage: sw-ls" out &&
	sw-ls --version >v && grep -q "^sw-ls (scalewatch) " v
'

test_expect_success 'usage errors exit 64' '
	test_expect_code 64 sw-ls --bogus "$FIX/tiny.h5" 2>err &&
	test_expect_code 64 sw-ls --block attention "$FIX/tiny.h5" 2>err &&
	grep -q "unknown block .attention." err
'

test_expect_success 'a bad file among good ones: rows for the good, one line, exit 65' '
	test_expect_code 65 sw-ls "$FIX/wide.h5" "$FIX/bad/unknown-block.h5" "$FIX/tiny.h5" >out 2>err &&
	test_one_error sw-ls "$FIX/bad/unknown-block.h5" &&
	grep -c "^$FIX/tiny.h5" out >n && echo 111 >expect && test_cmp expect n
'

test_done
