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
 *
 * The header's "__metadata__" is a string -> string map (struct st_meta);
 * sw-convert keeps a scalewatch checkpoint's attributes there under
 * "scalewatch.*" keys (scalewatch-format(5)), each value a typed text
 * (st_value_encode: an integer, a real with 17 digits, or a string).
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

/* ---- __metadata__: a string -> string map ---- */

struct st_kv {
	char *key, *value;
};
struct st_meta {
	struct st_kv *kv;       /* (n) in insertion order */
	size_t n, cap;
};

void st_meta_init(struct st_meta *m);
void st_meta_free(struct st_meta *m);
/* Set key to value (copies; replaces an earlier value of key). */
int st_meta_set(struct st_meta *m, const char *key, const char *value,
		struct sw_err *err);
/* The value of key, or NULL. */
const char *st_meta_get(const struct st_meta *m, const char *key);

/* Add the "__metadata__" entries of a header (the bytes st_parse_header
 * takes) to m; SW_EDATA if it is not an object of strings. */
int st_parse_metadata(const char *json, size_t len, struct st_meta *m,
		      struct sw_err *err);

/*
 * A typed value as metadata text, so that HDF5 attributes come back with
 * their type: an integer is its decimal digits ("1200"); a real is %.17g,
 * with ".0" added when that looks like an integer ("10000.0", "0.001",
 * "nan", "inf"); a string is itself, unless it would read as a number or
 * starts with a quote, then it gets one leading "'" ("'1").
 */
enum st_vtype { ST_VSTR, ST_VINT, ST_VREAL };
struct st_value {
	enum st_vtype type;
	int64_t i;
	double d;
	const char *s;          /* ST_VSTR: points into the decoded text */
};
/* 0, or -1 if buf (len bytes) is too small. */
int st_value_encode(const struct st_value *v, char *buf, size_t len);
void st_value_decode(const char *text, struct st_value *v);

/* ---- writer ---- */

struct stw;

/* Start final_path with these tensors (names, shapes), every one stored as
 * dtype (F32 or BF16); the data follows in the same order. */
int stw_create(const char *final_path, const struct sw_tensor_info *t, size_t n,
	       enum sw_dtype dtype, struct stw **out, struct sw_err *err);
/* The same with a __metadata__ map (NULL: none). */
int stw_create_meta(const char *final_path, const struct sw_tensor_info *t, size_t n,
		    enum sw_dtype dtype, const struct st_meta *meta, struct stw **out,
		    struct sw_err *err);
/* The next tensor's numel float32 values, converted to the file's dtype. */
int stw_write(struct stw *w, const float *data, int64_t numel, struct sw_err *err);
int stw_commit(struct stw *w, struct sw_err *err);
void stw_abort(struct stw *w);

/* Write a Hugging Face config.json for c (LlamaForCausalLM family). */
int st_write_config(const char *final_path, const struct sw_config *c,
		    const char *torch_dtype, struct sw_err *err);

/* Write model.safetensors.index.json: metadata.total_size (bytes of
 * tensor data in all shards) and the weight_map name[i] -> shard[i]. */
int st_write_index(const char *final_path, uint64_t total_size,
		   const char *const *name, const char *const *shard, size_t n,
		   struct sw_err *err);

#endif
