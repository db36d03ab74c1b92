#!/bin/sh
# Files a current PyTorch wrote (torch 2.15.0 from PyPI, by
# fixtures/make-pt-current.sh; committed, since that wheel needs 5.3 GB of
# CUDA libraries to import): the weights of fixtures/tiny-hf in F32, its
# state dict carrying a module's _metadata (a BUILD in the pickle), and in
# BF16 under a "model" key. torch 2 adds records (byteorder,
# .format_version, .storage_alignment, .data/serialization_id) and still
# names storages torch.FloatStorage, torch.BFloat16Storage. Every tool
# prints what it prints on the same weights in safetensors: F32 as
# tiny-hf, BF16 as tiny-hf-bf16 (both rounded to nearest even).
. "$(dirname "$0")/../lib/tap.sh"

P=$FIX/pt-current

# exact: the same binary on the same float32 (or BF16) values in two formats

for pair in "model.pt tiny-hf" "bf16.pt tiny-hf-bf16"; do
	set -- $pair
	test_expect_success "torch 2.15's $1: sw-ls, sw-norms, sw-spectrum, sw-qkdrift as on $2" "
		for tool in sw-ls sw-norms 'sw-spectrum --per-head' sw-qkdrift; do
			\$tool \"\$P/$1\" >pt.out && \$tool \"\$FIX/$2\" >st.out &&
			cut -f2- pt.out >pt.got && cut -f2- st.out >st.got &&
			test_line_count -gt 20 pt.got && test_cmp st.got pt.got || return 1
		done
	"
done

test_expect_success "torch 2.15's dtypes as stored" '
	sw-ls "$P/model.pt" "$P/bf16.pt" >ls.out && cut -f7 ls.out | sort | uniq -c | sed "s/^ *//" >got &&
	printf "%s\n" "111 BF16" "111 F32" "1 dtype" >want && test_cmp want got
'

test_done
