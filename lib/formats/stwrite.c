/*
 * stwrite.c - the streaming safetensors writer, config.json and the
 * shard index (see stwrite.h).
 */
#include "stwrite.h"
#include "../base/atomicfile.h"
#include "../base/dtype.h"
#include "../base/family.h"
#include "../base/jsonstrict.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- writer --------------------------------------------------------- */

struct stw {
	int fd;
	char tmp[PATH_MAX];
	char final[PATH_MAX];
	enum sw_dtype dtype;
	size_t next, n;
	int64_t *numel;         /* (n) expected element counts, in order */
	void *chunk;            /* conversion buffer */
};

#define STW_CHUNK 65536

int stw_create(const char *final_path, const struct sw_tensor_info *t, size_t n,
	       enum sw_dtype dtype, struct stw **out, struct sw_err *err)
{
	return stw_create_meta(final_path, t, n, dtype, NULL, out, err);
}

int stw_create_meta(const char *final_path, const struct sw_tensor_info *t, size_t n,
		    enum sw_dtype dtype, const struct attr_map *meta, struct stw **out,
		    struct sw_err *err)
{
	struct stw *w;
	cJSON *root = NULL, *check;
	char *json = NULL;
	size_t hlen, pad;
	uint64_t offset = 0;
	unsigned char lenbuf[8];
	int rc, size = sw_dtype_size(dtype);

	*out = NULL;
	if (dtype != SW_DTYPE_F32 && dtype != SW_DTYPE_BF16)
		return sw_fail(err, SW_ESOFTWARE, "safetensors writer: F32 or BF16 only");
	w = calloc(1, sizeof *w);
	if (!w)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	w->fd = -1;
	w->dtype = dtype;
	w->n = n;
	w->numel = calloc(n ? n : 1, sizeof *w->numel);
	w->chunk = malloc(STW_CHUNK * 4);
	root = cJSON_CreateObject();
	if (!w->numel || !w->chunk || !root) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto fail;
	}
	if (meta && meta->n) {
		cJSON *md = cJSON_AddObjectToObject(root, "__metadata__");
		for (size_t i = 0; md && i < meta->n; i++)
			if (!cJSON_AddStringToObject(md, meta->kv[i].key, meta->kv[i].value))
				md = NULL;
		if (!md) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto fail;
		}
	}
	for (size_t i = 0; i < n; i++) {
		cJSON *e = cJSON_AddObjectToObject(root, t[i].name), *shape, *offs;
		uint64_t nbytes = (uint64_t)t[i].numel * (uint64_t)size;
		if (!e || !cJSON_AddStringToObject(e, "dtype", dtype == SW_DTYPE_F32 ? "F32" : "BF16") ||
		    !(shape = cJSON_AddArrayToObject(e, "shape")) ||
		    !(offs = cJSON_AddArrayToObject(e, "data_offsets"))) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto fail;
		}
		for (int d = 0; d < t[i].rank; d++)
			cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t[i].shape[d]));
		cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)offset));
		cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(offset + nbytes)));
		offset += nbytes;
		w->numel[i] = t[i].numel;
	}
	json = cJSON_PrintUnformatted(root);
	if (!json) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto fail;
	}
	/* never write a header the readers refuse: cJSON copies strings
	 * from the HDF5 file as bytes (invalid UTF-8 stays), and a tensor
	 * named __metadata__ would give that key twice */
	if ((rc = jsonstrict_parse(json, strlen(json), "the safetensors header to write", &check,
				   err))) {
		sw_err_prefix(err, "cannot be exported");
		goto fail;
	}
	cJSON_Delete(check);
	/* pad the header with spaces so the data starts 8-byte aligned */
	hlen = strlen(json);
	pad = (8 - (8 + hlen) % 8) % 8;
	for (int i = 0; i < 8; i++)
		lenbuf[i] = (unsigned char)((uint64_t)(hlen + pad) >> (8 * i));
	if (strlen(final_path) >= sizeof w->final) {
		rc = sw_fail(err, SW_ECANTCREAT, "path too long");
		goto fail;
	}
	strcpy(w->final, final_path);
	if ((rc = atomic_create(final_path, w->tmp, sizeof w->tmp, &w->fd, err)))
		goto fail;
	if ((rc = atomic_write_all(w->fd, lenbuf, 8, final_path, err)) ||
	    (rc = atomic_write_all(w->fd, json, hlen, final_path, err)) ||
	    (rc = atomic_write_all(w->fd, "        ", pad, final_path, err)))
		goto fail;
	free(json);
	cJSON_Delete(root);
	*out = w;
	return SW_OK;
fail:
	free(json);
	cJSON_Delete(root);
	stw_abort(w);
	return rc;
}

int stw_write(struct stw *w, const float *data, int64_t numel, struct sw_err *err)
{
	if (w->next >= w->n || w->numel[w->next] != numel)
		return sw_fail(err, SW_ESOFTWARE, "safetensors writer: tensor %zu out of order", w->next);
	w->next++;
	if (w->dtype == SW_DTYPE_F32)
		return atomic_write_all(w->fd, data, (size_t)numel * 4, w->final, err);
	for (int64_t i = 0; i < numel; i += STW_CHUNK) {
		int64_t m = numel - i < STW_CHUNK ? numel - i : STW_CHUNK;
		uint16_t *h = w->chunk;
		int rc;
		for (int64_t k = 0; k < m; k++)
			h[k] = sw_f32_to_bf16(data[i + k]);
		if ((rc = atomic_write_all(w->fd, h, (size_t)m * 2, w->final, err)))
			return rc;
	}
	return SW_OK;
}

int stw_commit(struct stw *w, struct sw_err *err)
{
	int rc;

	if (w->next != w->n) {
		rc = sw_fail(err, SW_ESOFTWARE, "safetensors writer: %zu of %zu tensors written",
			     w->next, w->n);
		stw_abort(w);
		return rc;
	}
	if (close(w->fd) < 0) {
		w->fd = -1;
		rc = sw_fail(err, SW_EIO, "%s: close: %s", w->final, strerror(errno));
		stw_abort(w);
		return rc;
	}
	w->fd = -1;
	rc = atomic_commit(w->tmp, w->final, err);
	free(w->numel);
	free(w->chunk);
	free(w);
	return rc;
}

void stw_abort(struct stw *w)
{
	if (!w)
		return;
	if (w->fd >= 0) {
		close(w->fd);
		unlink(w->tmp);
	} else if (w->tmp[0]) {
		unlink(w->tmp);
	}
	free(w->numel);
	free(w->chunk);
	free(w);
}

/* Write root as pretty JSON to final_path, atomically; frees root. */
static int write_json(const char *final_path, cJSON *root, struct sw_err *err)
{
	char tmp[PATH_MAX], *json = cJSON_Print(root);
	int rc, fd = -1;

	cJSON_Delete(root);
	if (!json)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	rc = atomic_create(final_path, tmp, sizeof tmp, &fd, err);
	if (!rc) {
		rc = atomic_write_all(fd, json, strlen(json), final_path, err);
		if (!rc)
			rc = atomic_write_all(fd, "\n", 1, final_path, err);
		rc = atomic_finish(fd, tmp, final_path, rc, err);
	}
	free(json);
	return rc;
}

int st_write_index(const char *final_path, uint64_t total_size,
		   const char *const *name, const char *const *shard, size_t n,
		   struct sw_err *err)
{
	cJSON *root = cJSON_CreateObject(), *md, *map;

	if (!root || !(md = cJSON_AddObjectToObject(root, "metadata")) ||
	    !cJSON_AddNumberToObject(md, "total_size", (double)total_size) ||
	    !(map = cJSON_AddObjectToObject(root, "weight_map"))) {
		cJSON_Delete(root);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	for (size_t i = 0; i < n; i++)
		if (!cJSON_AddStringToObject(map, name[i], shard[i])) {
			cJSON_Delete(root);
			return sw_fail(err, SW_ESOFTWARE, "out of memory");
		}
	return write_json(final_path, root, err);
}

/*
 * RoPE's scaling and the sliding window as transformers reads them
 * (st_parse_config): rope_scaling {rope_type, factor, ...} for linear and
 * llama3 (convert.c refuses a type whose parameters it does not hold);
 * partial_rotary_factor where given; Mistral's sliding_window null when
 * there is none (its class's default is 4096), Qwen's with
 * use_sliding_window and max_window_layers. -1: out of memory.
 */
static int add_function_keys(cJSON *root, const struct sw_config *c)
{
	int qwen = !strncmp(c->arch, "qwen", 4), ok = 1;

	if (c->rope_type[0]) {
		cJSON *rs = cJSON_AddObjectToObject(root, "rope_scaling");
		ok = rs && cJSON_AddStringToObject(rs, "rope_type", c->rope_type) &&
		     cJSON_AddNumberToObject(rs, "factor", c->rope_factor);
		if (ok && !strcmp(c->rope_type, "llama3"))
			ok = cJSON_AddNumberToObject(rs, "low_freq_factor", c->rope_low_freq_factor) &&
			     cJSON_AddNumberToObject(rs, "high_freq_factor", c->rope_high_freq_factor) &&
			     cJSON_AddNumberToObject(rs, "original_max_position_embeddings",
						     (double)c->rope_original_max);
	}
	if (ok && c->rope_partial != 0)
		ok = cJSON_AddNumberToObject(root, "partial_rotary_factor", c->rope_partial) != NULL;
	if (ok && qwen) {
		ok = cJSON_AddBoolToObject(root, "use_sliding_window", c->sliding_window > 0) &&
		     cJSON_AddNumberToObject(root, "max_window_layers", (double)c->max_window_layers);
	}
	if (ok && c->sliding_window)
		ok = cJSON_AddNumberToObject(root, "sliding_window", (double)c->sliding_window) != NULL;
	else if (ok && (qwen || !strcmp(c->arch, "mistral")))
		ok = cJSON_AddNullToObject(root, "sliding_window") != NULL;
	return ok ? 0 : -1;
}

/*
 * GPT2Config's keys (transformers 4.47.1): sizes under its own names,
 * n_positions the position embeddings' rows, n_inner the MLP's width,
 * the tied head, no dropout (eval computes none either way). -1: out
 * of memory.
 */
static int add_gpt2_keys(cJSON *root, const struct sw_config *c)
{
	return cJSON_AddNumberToObject(root, "vocab_size", (double)c->vocab_size) &&
	       cJSON_AddNumberToObject(root, "n_embd", (double)c->d_model) &&
	       cJSON_AddNumberToObject(root, "n_layer", (double)c->n_layers) &&
	       cJSON_AddNumberToObject(root, "n_head", (double)c->n_heads) &&
	       cJSON_AddNumberToObject(root, "n_positions", (double)c->seq_len) &&
	       cJSON_AddNumberToObject(root, "n_inner", (double)c->d_ff) &&
	       cJSON_AddStringToObject(root, "activation_function", c->hidden_act) &&
	       cJSON_AddNumberToObject(root, "layer_norm_epsilon", c->norm_eps) &&
	       cJSON_AddBoolToObject(root, "tie_word_embeddings", 1) &&
	       cJSON_AddBoolToObject(root, "scale_attn_weights", 1) &&
	       cJSON_AddNumberToObject(root, "resid_pdrop", 0) &&
	       cJSON_AddNumberToObject(root, "embd_pdrop", 0) &&
	       cJSON_AddNumberToObject(root, "attn_pdrop", 0) ? 0 : -1;
}

/*
 * Gemma's and Gemma2's own keys: the activation also as
 * hidden_activation (Gemma2's MLP reads that one); Gemma2's soft-caps
 * (null: none), query_pre_attn_scalar, and its sliding window, which
 * sw-train does not compute: as long as the sequences at least (4096,
 * Gemma2Config's, or seq_len), where it changes nothing. -1: out of
 * memory.
 */
static int add_gemma_keys(cJSON *root, const struct sw_config *c, int flags)
{
	int ok = cJSON_AddStringToObject(root, "hidden_activation", c->hidden_act) != NULL;

	if (!(flags & FAMILY_POST_NORMS))
		return ok ? 0 : -1;
	ok = ok && (c->attn_softcap > 0 ?
		    cJSON_AddNumberToObject(root, "attn_logit_softcapping", c->attn_softcap) :
		    cJSON_AddNullToObject(root, "attn_logit_softcapping"));
	ok = ok && (c->final_softcap > 0 ?
		    cJSON_AddNumberToObject(root, "final_logit_softcapping", c->final_softcap) :
		    cJSON_AddNullToObject(root, "final_logit_softcapping"));
	/* the window in place of the one add_function_keys wrote */
	cJSON_DeleteItemFromObjectCaseSensitive(root, "sliding_window");
	ok = ok && cJSON_AddNumberToObject(root, "query_pre_attn_scalar",
					   c->query_pre_attn_scalar > 0 ? c->query_pre_attn_scalar :
					   (double)c->head_dim) &&
	     cJSON_AddNumberToObject(root, "sliding_window",
				     (double)(c->seq_len > 4096 ? c->seq_len : 4096)) &&
	     cJSON_AddStringToObject(root, "cache_implementation", "hybrid");
	return ok ? 0 : -1;
}

int st_write_config(const char *final_path, const struct sw_config *c,
		    const char *torch_dtype, struct sw_err *err)
{
	const struct arch_family *f = family_find(c->arch);
	int flags = family_model_flags(c->arch), ok;
	cJSON *root = cJSON_CreateObject(), *arr;

	if (!root || !(arr = cJSON_AddArrayToObject(root, "architectures"))) {
		cJSON_Delete(root);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	/* the family's class; a model of no family's is Llama's */
	cJSON_AddItemToArray(arr, cJSON_CreateString(f ? f->hf_class : "LlamaForCausalLM"));
	cJSON_AddStringToObject(root, "model_type", c->arch);
	if (flags & FAMILY_POS_EMBED) {
		ok = add_gpt2_keys(root, c) == 0;
	} else {
		cJSON_AddNumberToObject(root, "vocab_size", (double)c->vocab_size);
		cJSON_AddNumberToObject(root, "hidden_size", (double)c->d_model);
		cJSON_AddNumberToObject(root, "intermediate_size", (double)c->d_ff);
		cJSON_AddNumberToObject(root, "num_hidden_layers", (double)c->n_layers);
		cJSON_AddNumberToObject(root, "num_attention_heads", (double)c->n_heads);
		cJSON_AddNumberToObject(root, "num_key_value_heads", (double)c->n_kv_heads);
		cJSON_AddNumberToObject(root, "head_dim", (double)c->head_dim);
		cJSON_AddNumberToObject(root, "max_position_embeddings",
					(double)(c->seq_len ? c->seq_len : 2048));
		cJSON_AddNumberToObject(root, "rope_theta", c->rope_theta);
		cJSON_AddNumberToObject(root, "rms_norm_eps", c->norm_eps);
		cJSON_AddBoolToObject(root, "tie_word_embeddings", c->tie_embeddings);
		cJSON_AddBoolToObject(root, "attention_bias", 0);
		cJSON_AddBoolToObject(root, "mlp_bias", 0);
		cJSON_AddStringToObject(root, "hidden_act", c->hidden_act[0] ? c->hidden_act : "silu");
		ok = add_function_keys(root, c) == 0 &&
		     (!(flags & FAMILY_EMBED_SCALE) || add_gemma_keys(root, c, flags) == 0);
	}
	if (!ok) {
		cJSON_Delete(root);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	cJSON_AddStringToObject(root, "torch_dtype", torch_dtype);
	return write_json(final_path, root, err);
}

