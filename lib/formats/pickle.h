/*
 * pickle.h - a restricted unpickler: the data.pkl of a PyTorch checkpoint
 * read into a tree of plain values, with nothing in it ever executed.
 *
 * torch.load runs whatever a pickle says; this machine knows the opcodes
 * torch.save emits (protocol 2, and the framing of protocol 4 for
 * pickle_protocol=4, each frame's length what it holds, as CPython's
 * picklers write frames: pickle.c) and only the globals a state dict needs:
 * collections.OrderedDict (called with no arguments),
 * torch._utils._rebuild_tensor_v2 and torch._utils._rebuild_parameter
 * (which become a tensor value), and the torch.*Storage types, which
 * only tag a storage's persistent id ('storage', TYPE, KEY, LOCATION,
 * NUMEL): FloatStorage, HalfStorage, BFloat16Storage and DoubleStorage
 * are read; the integer and bool ones (LongStorage, ...) are kept as
 * tensors of a dtype the tools cannot read (listed, refused on load, as
 * safetensors' I64 is). Any other global, a REDUCE of anything but the
 * three callables, a BUILD on anything but a dict (whose state, the
 * _metadata of a state dict, is dropped), or any other opcode is refused
 * (SW_EDATA) in one line that names it and its byte.
 *
 * Every tensor is checked when it is built: rank <= SW_MAX_RANK, sizes
 * and strides nonnegative, and every element it addresses inside its
 * storage. A storage KEY is a plain name ([A-Za-z0-9_-]); two persistent
 * ids of one KEY must agree on its type and size.
 *
 * Bounded by what the checkpoint can hold, not by the pickle's length (a
 * deflated data.pkl of repeated opcodes inflates a thousandfold): the
 * values built, the stack, the marks and the memo may each take at most
 * PK_BYTES_PER_RECORD per record of the archive the pickle came from (a
 * tensor's storage is one; a real state dict builds about 1.2 KB of values
 * a tensor, so this leaves room for 50 views of each storage) plus 1 MiB;
 * memo indices stay below the pickle's length, and nothing here recurses; a dict is a list of pairs as the pickle gave
 * them (duplicate keys are the walker's to refuse, lib/formats/ptread.c).
 */
#ifndef SW_PICKLE_H
#define SW_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"
#include "../base/tensor.h"

enum pk_type {
	PK_NONE, PK_BOOL, PK_INT, PK_BIGINT, PK_FLOAT, PK_STR, PK_BYTES, PK_TUPLE, PK_LIST,
	PK_DICT, PK_GLOBAL, PK_STORAGE, PK_TENSOR
};

struct pk_storage {
	const char *key;        /* the record data/KEY of the archive */
	enum sw_dtype dtype;    /* SW_DTYPE_UNSUPPORTED: integer or bool */
	const char *dtype_name; /* "F32", "BF16", "I64", ... */
	int elem_size;
	int64_t numel;
};

struct pk_tensor {
	const struct pk_storage *storage;
	int64_t offset;         /* in elements of the storage */
	int rank;
	int64_t shape[SW_MAX_RANK], stride[SW_MAX_RANK];
	int64_t numel;
};

struct pk_value {
	enum pk_type type;
	unsigned walked;        /* free for the walker of the tree (ptread.c) */
	union {
		int64_t i;      /* BOOL, INT */
		double f;
		struct {
			const char *s;  /* NUL-terminated copy; may hold NULs (len) */
			size_t len;
		} str;          /* STR, BYTES */
		struct {
			struct pk_value **v;
			size_t n, cap;
		} seq;          /* TUPLE, LIST; DICT: n/2 pairs, key then value */
		int global;     /* GLOBAL: which allowed global (pickle.c) */
		const struct pk_storage *storage;
		const struct pk_tensor *tensor;
	} u;
};

struct pk_arena;

struct pk_result {
	const struct pk_value *root;
	struct pk_arena *arena;         /* everything the values hold */
};

#define PK_BYTES_PER_RECORD ((size_t)64 << 10)

/* Run the len bytes of a pickle from an archive of records records; *out
 * holds its value until pk_free. */
int pk_load(const void *buf, size_t len, size_t records, struct pk_result *out,
	    struct sw_err *err);
void pk_free(struct pk_result *r);

/* The dict d's value for string key, or NULL (d not a dict, or no key). */
const struct pk_value *pk_dict_get(const struct pk_value *d, const char *key);

#endif
