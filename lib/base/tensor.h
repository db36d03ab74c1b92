/*
 * tensor.h - what the tools know about one tensor of a checkpoint.
 *
 * struct sw_tensor_info is the metadata every tool relies on, whatever the
 * file format: the block type of the sharpness paper, the role, the layer,
 * the spectra paper's vector-like/matrix-like class, the scale-vectors
 * paper's Input-/Output-Norm type, the per-tensor lr/wd in force, the
 * stored dtype and the shape (PyTorch order: a linear weight is [out, in]).
 * The enums have one-word names, as stored in the HDF5 attributes.
 */
#ifndef SW_TENSOR_H
#define SW_TENSOR_H

#include <stdint.h>

#define SW_NAME_MAX 256
#define SW_ROLE_MAX 32
#define SW_MAX_RANK 8

enum sw_block {
	SW_BLOCK_EMB, SW_BLOCK_QK, SW_BLOCK_VO, SW_BLOCK_FFN, SW_BLOCK_NORM,
	SW_BLOCK_OUT, SW_BLOCK_MULT, SW_BLOCK_OTHER, SW_BLOCK_COUNT
};
enum sw_kind { SW_KIND_MATRIX, SW_KIND_VECTOR, SW_KIND_SCALAR, SW_KIND_COUNT };
enum sw_mup { SW_MUP_VECTOR_LIKE, SW_MUP_MATRIX_LIKE, SW_MUP_COUNT };
enum sw_norm_type { SW_NORM_NONE, SW_NORM_INPUT, SW_NORM_OUTPUT, SW_NORM_COUNT };
enum sw_wd_mode {
	SW_WD_UNKNOWN, SW_WD_COUPLED, SW_WD_INDEPENDENT, SW_WD_NONE, SW_WD_COUNT
};
enum sw_group {
	SW_GROUP_UNKNOWN, SW_GROUP_INPUT, SW_GROUP_HIDDEN, SW_GROUP_OUTPUT,
	SW_GROUP_COUNT
};
/* Stored element types. Q8_0 to Q6_K: GGUF's quantized blocks (ggml's
 * block_q8_0, ...: scales and packed integers, no size per element;
 * dtype.h's sw_dtype_block). UNSUPPORTED: a valid safetensors dtype (I64,
 * BOOL, F8_E4M3, ...) whose data the tools cannot turn into float32. */
enum sw_dtype {
	SW_DTYPE_F32, SW_DTYPE_F16, SW_DTYPE_BF16, SW_DTYPE_F64, SW_DTYPE_Q8_0,
	SW_DTYPE_Q4_0, SW_DTYPE_Q4_1, SW_DTYPE_Q5_0, SW_DTYPE_Q5_1,
	SW_DTYPE_Q2_K, SW_DTYPE_Q3_K, SW_DTYPE_Q4_K, SW_DTYPE_Q5_K, SW_DTYPE_Q6_K,
	SW_DTYPE_UNSUPPORTED
};

struct sw_tensor_info {
	char name[SW_NAME_MAX];       /* HF Llama name, e.g. model.norm.weight */
	char role[SW_ROLE_MAX];       /* embed, q, k, ..., lm_head, q_mult */
	enum sw_block block;
	enum sw_kind kind;
	enum sw_mup mup;
	enum sw_norm_type norm_type;  /* SW_NORM_NONE unless a norm gain */
	enum sw_group group;
	enum sw_wd_mode wd_mode;
	int layer;                    /* -1 outside the layer stack */
	int expert;                   /* a MoE expert's tensor: its index; else -1 */
	int n_heads, head_dim;        /* attention projections, else 0 */
	double lr, wd;                /* in force at this step; NaN: unknown */
	enum sw_dtype dtype;
	char dtype_name[16];          /* as stored: F32, BF16, I64, ... */
	int rank;
	int64_t shape[SW_MAX_RANK];
	int64_t numel;
};

/* One-word names, as in the HDF5 attributes and the tools' output. */
const char *sw_block_name(enum sw_block b);
const char *sw_kind_name(enum sw_kind k);
const char *sw_mup_name(enum sw_mup m);
const char *sw_norm_type_name(enum sw_norm_type t);  /* "" for NONE */
const char *sw_wd_mode_name(enum sw_wd_mode m);      /* "" for UNKNOWN */
const char *sw_group_name(enum sw_group g);          /* "" for UNKNOWN */

/* Parse a one-word name; return 0 and set *out, or -1 if unknown. */
int sw_block_parse(const char *s, enum sw_block *out);
int sw_kind_parse(const char *s, enum sw_kind *out);
int sw_mup_parse(const char *s, enum sw_mup *out);
int sw_norm_type_parse(const char *s, enum sw_norm_type *out);
int sw_wd_mode_parse(const char *s, enum sw_wd_mode *out);
int sw_group_parse(const char *s, enum sw_group *out);

/* Bytes per element of a float dtype; 0 for the quantized (blocks) and UNSUPPORTED. */
int sw_dtype_size(enum sw_dtype d);

/* Product of dims into *numel; -1 if a dim is negative or it overflows. */
int sw_shape_numel(int rank, const int64_t *shape, int64_t *numel);

/* "4096x1024" (rank 0: ""); returns buf. */
char *sw_shape_format(int rank, const int64_t *shape, char *buf, int len);

/* kind from the shape: rank 2 matrix, rank 0 or numel 1 scalar, else vector */
enum sw_kind sw_kind_of_shape(int rank, const int64_t *shape);

#endif
