/*
 * gguf.h - GGUF files (llama.cpp's, ggml's docs/gguf.md, versions 2 and
 * 3): the parser of the header, the metadata and the tensor infos. The
 * reader that uses it is ggufread.c (a back end of ckpt.c). It takes the
 * file's bytes, not a file, so it can be fuzzed.
 *
 * A file is "GGUF", a uint32 version, uint64 tensor and metadata counts,
 * the metadata (key string, uint32 value type, value: integers, floats,
 * bools, strings of a uint64 length and bytes, arrays of a type and a
 * uint64 count), the tensor infos (name, uint32 n_dims, uint64 dims
 * fastest first, uint32 ggml type, uint64 offset), padding to the
 * alignment (general.alignment, default 32), then the tensors' data,
 * little-endian. Every length and count is checked against the file before
 * it is used, and nothing is allocated that the file's bytes do not
 * account for. What is refused is ggml's gguf.cpp's rule where the spec
 * leaves it open (a key or tensor name twice, an alignment that is no
 * power of two, offsets that do not follow each other in file order, each
 * padded to the alignment), plus: a bool other than 0 or 1 (the spec calls
 * it invalid), bytes after the padded end of the last tensor, every
 * tensor type but F32, F16, BF16, F64 and the quantizations Q4_0, Q4_1,
 * Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K (named: "IQ2_XS: a
 * quantization not read", with what to do), and a quantized tensor whose
 * rows (ne[0]) are no whole number of its blocks (ggml's rule).
 */
#ifndef SW_GGUF_H
#define SW_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"
#include "../base/tensor.h"

#define GGUF_NAME_MAX 64                /* a tensor name's bytes, NUL included (ggml's GGML_MAX_NAME) */
#define GGUF_KEY_MAX 65535              /* a metadata key's bytes (the spec's limit) */
#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_ALIGNMENT (1u << 20)   /* ggml's bound */
#define GGUF_MAX_NESTING 8              /* arrays of arrays of ...: the spec allows them */

enum gguf_vtype {
	GGUF_UINT8, GGUF_INT8, GGUF_UINT16, GGUF_INT16, GGUF_UINT32, GGUF_INT32,
	GGUF_FLOAT32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY, GGUF_UINT64, GGUF_INT64,
	GGUF_FLOAT64, GGUF_NVTYPES
};

/* ggml's tensor types the reader converts (ggml.h's enum ggml_type) */
enum {
	GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q4_1 = 3, GGML_Q5_0 = 6, GGML_Q5_1 = 7,
	GGML_Q8_0 = 8, GGML_Q2_K = 10, GGML_Q3_K = 11, GGML_Q4_K = 12, GGML_Q5_K = 13,
	GGML_Q6_K = 14, GGML_F64 = 28, GGML_BF16 = 30
};

struct gguf_kv {
	char *key;                      /* no NUL inside, printable ASCII */
	enum gguf_vtype type;
	enum gguf_vtype elem;           /* ARRAY: its elements' type (nested: the outer level's) */
	uint64_t count;                 /* ARRAY: its elements; 1 otherwise */
	uint64_t u;                     /* UINT*, BOOL */
	int64_t i;                      /* INT* */
	double d;                       /* FLOAT* */
	char *s;                        /* STRING: a NUL-terminated copy of its slen bytes */
	uint64_t slen;
};

struct gguf_tensor {
	char name[GGUF_NAME_MAX];
	int n_dims;
	int64_t ne[GGUF_MAX_DIMS];      /* fastest first: ne[0] is the row length */
	uint32_t type;                  /* a ggml type of the enum above */
	enum sw_dtype dtype;            /* the same as sw_to_f32 converts it */
	int64_t numel;
	uint64_t offset;                /* absolute, in the file */
	uint64_t nbytes;
};

struct gguf_file {
	uint32_t version;
	uint64_t alignment;
	uint64_t data_start;            /* absolute offset of the tensor data */
	struct gguf_kv *kv;             /* (nkv) sorted by key */
	size_t nkv;
	struct gguf_tensor *t;          /* (nt) in file order */
	size_t nt;
};

/* Parse and validate the size bytes of a file at p. On failure f is
 * empty and err says what is wrong (SW_EDATA, or SW_ESOFTWARE when out
 * of memory). */
int gguf_parse(const unsigned char *p, uint64_t size, struct gguf_file *f, struct sw_err *err);
void gguf_free(struct gguf_file *f);

/* ggml's name of a tensor type ("Q4_K"), or NULL for a number it has none for. */
const char *gguf_type_name(uint32_t type);
/* The spec's name of a value type ("uint32"), "?" outside the enum. */
const char *gguf_vtype_name(enum gguf_vtype t);

/* The metadata entry of key, or NULL. */
const struct gguf_kv *gguf_find(const struct gguf_file *f, const char *key);

/*
 * A metadata value of key; *present says whether it is there (v
 * unchanged if not; present NULL: it must be, SW_EDATA "missing metadata
 * KEY"). gguf_uint: a scalar of any integer type, nonnegative. gguf_real:
 * FLOAT32 or FLOAT64, finite. gguf_string: a STRING without NUL bytes,
 * pointed at (valid while f is). SW_EDATA naming the key otherwise.
 */
int gguf_uint(const struct gguf_file *f, const char *key, uint64_t *v, int *present,
	      struct sw_err *err);
int gguf_real(const struct gguf_file *f, const char *key, double *v, int *present,
	      struct sw_err *err);
int gguf_string(const struct gguf_file *f, const char *key, const char **v, int *present,
		struct sw_err *err);

#endif
