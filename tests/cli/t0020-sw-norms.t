#!/bin/sh
# sw-norms: operator norms against the values the fixtures were built with
# (fixtures/*.expect.tsv: sigma_max is the construction's s_1, row and
# column norms summed in double by the generator).
. "$(dirname "$0")/../lib/tap.sh"

# sw-norms output in the expect files' columns: name role rows cols norms...
project() {
	cut -f4,6,8-16 "$1"
}
# norms_of FILE OUT: sw-norms FILE, without the file, step and tokens, in OUT
norms_of() {
	sw-norms "$1" >"$2.out" && cut -f4- "$2.out" >"$2"
}

test_expect_success 'header: the columns, exactly' '
	sw-norms "$FIX/tiny.h5" >actual &&
	head -n 1 actual >header &&
	printf "file\tstep\ttokens\tname\tblock\trole\tlayer\trows\tcols\trms_to_inf\trms_to_rms\tone_to_rms\tspectral\tfrobenius\trms\tmax_abs\texpert\n" >expect &&
	test_cmp expect header
'

# against the construction (computed in double): row, column and Frobenius
# sums are taken in double, sigma_max by Lanczos stopped at 1e-6 relative
# (NORMS_SIGMA_REL_TOL) or the dense path in double; the float32 storage
# of the entries moves a norm by ~6e-8 relative: 1e-6 relative
test_expect_success 'tiny (LAPACK path): every norm within 1e-6 of the construction' '
	sw-norms "$FIX/tiny.h5" >actual &&
	project actual >got &&
	numbers_close 1e-6 "$FIX/tiny.expect.tsv" got
'

test_expect_success 'wide (Lanczos path, tied head, triple top sigma): within 1e-6' '
	sw-norms "$FIX/wide.h5" >actual &&
	project actual >got &&
	numbers_close 1e-6 "$FIX/wide.expect.tsv" got
'

test_expect_success 'step and tokens come from the file' '
	sw-norms --role lm_head "$FIX/tiny.h5" >out && awk -F"\t" "NR == 2 { print \$2 \"\t\" \$3 }" out >st &&
	printf "1200\t4915200\n" >expect && test_cmp expect st
'

# exact: the same binary on byte-identical float32 weights
test_expect_success 'safetensors F32, single and sharded: the same numbers as HDF5, exactly' '
	norms_of "$FIX/tiny.h5" h5 &&
	norms_of "$FIX/tiny-hf" st4 &&
	norms_of "$FIX/tiny-hf-sharded" sharded &&
	test_cmp h5 st4 && test_cmp h5 sharded
'

test_expect_success 'safetensors without step: step and tokens empty' '
	sw-norms "$FIX/tiny-hf" >st &&
	sed -n 2p st | cut -f2,3 >st23 &&
	printf "\t\n" >expect && test_cmp expect st23
'

# BF16 keeps 8 significant bits: each weight moves by at most 2^-9
# relative, so the row, column, Frobenius and max norms by at most that,
# sigma_max by about that (the rounding errors do not line up with its
# singular vectors); 2^-8 leaves a factor 2
test_expect_success 'BF16 copy: the same norms to BF16 precision (2^-8)' '
	norms_of "$FIX/tiny.h5" h5 && norms_of "$FIX/tiny-hf-bf16" bf16 &&
	numbers_close 0.00390625 h5 bf16
'

test_expect_success 'BF16 differs from F32 at all (the check is not vacuous)' '
	norms_of "$FIX/tiny.h5" h5 && norms_of "$FIX/tiny-hf-bf16" bf16 &&
	! cmp -s h5 bf16
'

test_expect_success 'the output head: lm_head and lm_head_folded rows' '
	sw-norms --role lm_head "$FIX/tiny.h5" >out && cut -f6 out >roles &&
	printf "role\nlm_head\nlm_head_folded\n" >expect && test_cmp expect roles
'

test_expect_success 'tied head: lm_head.weight from the embedding, as d_model -> vocab' '
	sw-norms --role lm_head "$FIX/wide.h5" >out && cut -f4-9 out >rows &&
	printf "name\tblock\trole\tlayer\trows\tcols\nlm_head.weight\tout\tlm_head\t-1\t100\t64\nlm_head.weight\tout\tlm_head_folded\t-1\t100\t64\n" >expect &&
	test_cmp expect rows
'

test_expect_success 'only matrices: norm gains are not rows' '
	test_expect_code 65 sw-norms --block norm "$FIX/tiny.h5" >out 2>err && test_line_count = 1 out &&
	grep -q "no matrix matches the selection (--block norm)" err
'

test_expect_success 'many files, one table: a norm-over-training series' '
	sw-norms --role lm_head "$FIX/tiny.h5" "$FIX/wide.h5" "$FIX/tiny-hf" >out &&
	test_line_count = 7 out &&
	grep -c "^file" out >n && echo 1 >expect && test_cmp expect n
'

test_expect_success '--json: JSON Lines, null for unknown step' '
	sw-norms --json --role lm_head "$FIX/tiny-hf" >out &&
	test_line_count = 2 out &&
	grep -q "\"step\": null, \"tokens\": null, \"name\": \"lm_head.weight\", \"block\": \"out\", \"role\": \"lm_head\", \"layer\": -1, \"rows\": 48, \"cols\": 16, \"rms_to_inf\": " out
'

test_expect_success 'closing the pipe early ends quietly' '
	# pipe-ok: the pipe is what is tested; the status is kept in status
	{ sw-norms "$FIX/tiny.h5" "$FIX/tiny.h5" "$FIX/tiny.h5" 2>err; echo $? >status; } | head -n 1 >out &&
	test_closed_quietly status && test_line_count = 1 out && test_line_count = 0 err
'

test_expect_success 'NaN in a tensor: exit 65, the tensor named, the rest printed' '
	test_expect_code 65 sw-norms "$FIX/bad/nan.h5" >out 2>err &&
	test_one_error sw-norms "$FIX/bad/nan.h5" &&
	grep -q "model.layers.0.mlp.down_proj.weight: 1 of 24 values are NaN or Inf" err &&
	! grep -q down_proj out && grep -q up_proj out
'

test_done
