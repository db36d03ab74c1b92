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
 * data exactly. Every JSON document is read by jsonstrict.h's rules (valid
 * UTF-8, nothing after the value but whitespace, no key twice in an
 * object); the header and the index are then walked in place, never
 * made a tree, in time linear in their length. The parsers take bytes,
 * not files, so they can be fuzzed.
 *
 * The header's "__metadata__" is a string -> string map (attrmap.h);
 * sw-convert keeps a scalewatch checkpoint's attributes there under
 * "scalewatch.*" keys (scalewatch-format(5)), each value a typed text.
 */
#ifndef SW_SAFETENSORS_H
#define SW_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "../base/arch.h"
#include "attrmap.h"
#include "../base/status.h"
#include "../base/tensor.h"

#define ST_MAX_HEADER 100000000ULL
#define ST_SHARD_NAME_MAX 256        /* bytes of a shard's file name, NUL included */

struct st_entry {
	const char *name;       /* in the header's pool */
	enum sw_dtype dtype;
	const char *dtype_name; /* as written: "F32", "BF16", ... */
	int rank;
	int64_t shape[SW_MAX_RANK];
	int64_t numel;
	uint64_t begin, end;    /* relative to the start of the data */
};

/* A parsed header: the entries in header order, their names in pool. */
struct st_header {
	struct st_entry *e;     /* (n) */
	size_t n;
	char *pool;
};

/*
 * Parse and validate a header of len bytes (not NUL-terminated) for a file
 * whose data part is data_len bytes, adding its "__metadata__" entries to
 * meta (attrmap.h) when meta is not NULL. SW_EDATA with a message when it
 * is not valid. It takes about len bytes plus 100 a tensor, and time
 * linear in len (the tiling check sorts the ranges: n log n in n).
 */
int st_parse_header(const char *json, size_t len, uint64_t data_len, struct attr_map *meta,
		    struct st_header *h, struct sw_err *err);
void st_header_free(struct st_header *h);

/*
 * A tensor name the tools take: not empty, shorter than SW_NAME_MAX, not
 * "." and without '/' (what an HDF5 dataset name cannot be; no Hugging
 * Face checkpoint uses them). Valid UTF-8 comes with the JSON.
 */
int st_name_check(const char *name, struct sw_err *err);

/* The architecture and sizes from a config.json's bytes. */
int st_parse_config(const char *json, size_t len, struct sw_config *c,
		    struct sw_err *err);

/* model.safetensors.index.json's weight_map: tensor name -> shard file
 * (a plain file name in the same directory; paths are refused). The
 * strings point into one pool, so the entries take what the file does. */
struct st_index_entry {
	const char *name;
	const char *shard;
};
struct st_index {
	struct st_index_entry *e;       /* (n) in the file's order */
	size_t n;
	char *pool;
};
int st_parse_index(const char *json, size_t len, struct st_index *idx, struct sw_err *err);
void st_index_free(struct st_index *idx);

#endif
