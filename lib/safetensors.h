/*
 * safetensors.h - Hugging Face safetensors: header, index and config.json
 * parsing (the safetensors back end of ckpt.c), and a streaming writer.
 *
 * A safetensors file is an 8-byte little-endian header length N, N bytes of
 * JSON ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
 * "__metadata__": {...}}), then the data. The parser validates what the
 * reference reader does: N <= 100 MB, the JSON well formed, every byte
 * range = numel x dtype size, the ranges contiguous from 0 and covering the
 * data exactly. The parsers take bytes, not files, so they can be fuzzed.
 */
#ifndef SW_SAFETENSORS_H
#define SW_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "arch.h"
#include "status.h"
#include "tensor.h"

#define ST_MAX_HEADER 100000000ULL

struct st_entry {
	char name[SW_NAME_MAX];
	enum sw_dtype dtype;
	char dtype_name[16];
	int rank;
	int64_t shape[SW_MAX_RANK];
	int64_t numel;
	uint64_t begin, end;    /* relative to the start of the data */
};

/* Parse and validate a header of len bytes (not NUL-terminated) for a file
 * whose data part is data_len bytes. On success *out is a malloc'ed array
 * of *n entries in header order. SW_EDATA with a message otherwise. */
int st_parse_header(const char *json, size_t len, uint64_t data_len,
		    struct st_entry **out, size_t *n, struct sw_err *err);

/* The architecture and sizes from a config.json's bytes. */
int st_parse_config(const char *json, size_t len, struct sw_config *c,
		    struct sw_err *err);

/* model.safetensors.index.json's weight_map: tensor name -> shard file
 * (a plain file name in the same directory; paths are refused). */
struct st_index_entry {
	char name[SW_NAME_MAX];
	char shard[256];
};
int st_parse_index(const char *json, size_t len, struct st_index_entry **out,
		   size_t *n, struct sw_err *err);

/* ---- writer ---- */

struct stw;

/* Start final_path with these tensors (names, shapes), every one stored as
 * dtype (F32 or BF16); the data follows in the same order. */
int stw_create(const char *final_path, const struct sw_tensor_info *t, size_t n,
	       enum sw_dtype dtype, struct stw **out, struct sw_err *err);
/* The next tensor's numel float32 values, converted to the file's dtype. */
int stw_write(struct stw *w, const float *data, int64_t numel, struct sw_err *err);
int stw_commit(struct stw *w, struct sw_err *err);
void stw_abort(struct stw *w);

/* Write a Hugging Face config.json for c (LlamaForCausalLM family). */
int st_write_config(const char *final_path, const struct sw_config *c,
		    const char *torch_dtype, struct sw_err *err);

#endif
