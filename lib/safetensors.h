/*
 * safetensors.h - Hugging Face safetensors: the parsers of the header,
 * model.safetensors.index.json and config.json. The reader that uses them
 * is stread.c (a back end of ckpt.c), the writer stwrite.c.
 *
 * A safetensors file is an 8-byte little-endian header length N, N bytes of
 * JSON ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
 * "__metadata__": {...}}), then the data. The parser validates what the
 * reference reader does: N <= 100 MB, the JSON well formed, every byte
 * range = numel x dtype size, the ranges contiguous from 0 and covering the
 * data exactly. The parsers take bytes, not files, so they can be fuzzed.
 *
 * The header's "__metadata__" is a string -> string map (attrmap.h);
 * sw-convert keeps a scalewatch checkpoint's attributes there under
 * "scalewatch.*" keys (scalewatch-format(5)), each value a typed text.
 */
#ifndef SW_SAFETENSORS_H
#define SW_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "arch.h"
#include "attrmap.h"
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

/* ---- __metadata__ ---- */

/* Add the "__metadata__" entries of a header (the bytes st_parse_header
 * takes) to m (attrmap.h); SW_EDATA if it is not an object of strings. */
int st_parse_metadata(const char *json, size_t len, struct attr_map *m,
		      struct sw_err *err);

#endif
