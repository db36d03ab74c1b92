/*
 * fuzz-st-config - a Hugging Face config.json (st_parse_config). The input
 * is the file. Beyond "no crash": an accepted config of another family,
 * or of an architecture no table knows, is for a listing (family.h): its
 * arch a string, not the model's, its sizes in 0 .. 2^31 - 1 (0:
 * unknown), QK-norm exactly where its family's table names q_norm gains
 * (sw-qkdrift reads them); one of the Llama family
 * describes a model the tools can size without overflow: every
 * size in 1 .. 2^31 - 1 (seq_len may be 0), n_heads a multiple of
 * n_kv_heads, n_heads x head_dim below 2^31, finite nonnegative norm_eps
 * and rope_theta, no multipliers, gains present, QK-norm exactly for qwen3;
 * and the architecture's own check (arch_config_check) agrees; the file
 * is valid UTF-8, one object and nothing after it but blanks, no key twice
 * in any object (fuzz_json_clean). A refusal is SW_EDATA with a message.
 */
#include <math.h>
#include <string.h>

#include "../../lib/base/family.h"
#include "../../lib/formats/safetensors.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const int64_t big = (int64_t)1 << 31;
	struct sw_config c;
	struct sw_err err = {0};
	char *json = fuzz_copy(data, size);
	int rc;

	rc = st_parse_config(json, size, &c, &err);
	free(json);
	if (rc) {
		FUZZ_REFUSED(rc, err);
		return 0;
	}
	fuzz_json_clean(data, size);
	FUZZ_ASSERT(memchr(c.arch, '\0', sizeof c.arch));
	if (!family_computed(c.arch)) {
		const int64_t sizes[] = {c.vocab_size, c.d_model, c.n_layers, c.n_heads,
					 c.n_kv_heads, c.head_dim, c.d_ff};
		const struct arch_family *f = family_find(c.arch);
		int names_qk_norm = 0;
		for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
			FUZZ_ASSERT(sizes[i] >= 0 && sizes[i] < big);
		for (size_t i = 0; f && i < f->n_names; i++)
			names_qk_norm |= !strcmp(f->names[i].role, "q_norm");
		FUZZ_ASSERT(!strcmp(c.multipliers, "none") && c.qk_norm == names_qk_norm);
		return 0;
	}
	FUZZ_ASSERT(c.vocab_size > 0 && c.vocab_size < big);
	FUZZ_ASSERT(c.d_model > 0 && c.d_model < big);
	FUZZ_ASSERT(c.n_layers > 0 && c.n_layers < big);
	FUZZ_ASSERT(c.n_heads > 0 && c.n_heads < big);
	FUZZ_ASSERT(c.n_kv_heads > 0 && c.n_heads % c.n_kv_heads == 0);
	FUZZ_ASSERT(c.head_dim > 0 && c.n_heads * c.head_dim < big);
	FUZZ_ASSERT(c.d_ff > 0 && c.d_ff < big);
	FUZZ_ASSERT(c.seq_len >= 0 && c.seq_len < big);
	FUZZ_ASSERT(isfinite(c.norm_eps) && c.norm_eps >= 0);
	FUZZ_ASSERT(isfinite(c.rope_theta) && c.rope_theta >= 0);
	FUZZ_ASSERT(!strcmp(c.multipliers, "none") && c.scale_vectors && !c.norm_everywhere);
	FUZZ_ASSERT(c.qk_norm == !strcmp(c.arch, "qwen3"));
	FUZZ_ASSERT(arch_config_check(&c, &err) == SW_OK);
	return 0;
}
