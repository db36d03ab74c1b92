/* tensor.c - names of the metadata enums, shapes (see tensor.h). */
#include "tensor.h"

#include <stdio.h>
#include <string.h>

static const char *const block_names[SW_BLOCK_COUNT] = {
	"emb", "qk", "vo", "ffn", "norm", "out", "mult", "other"
};
static const char *const kind_names[SW_KIND_COUNT] = {
	"matrix", "vector", "scalar"
};
static const char *const mup_names[SW_MUP_COUNT] = {
	"vector-like", "matrix-like"
};
static const char *const norm_type_names[SW_NORM_COUNT] = {
	"", "input", "output"
};
static const char *const wd_mode_names[SW_WD_COUNT] = {
	"", "coupled", "independent", "none"
};
static const char *const group_names[SW_GROUP_COUNT] = {
	"", "input", "hidden", "output"
};

static const char *name_of(const char *const *names, int n, int v)
{
	return v >= 0 && v < n ? names[v] : "?";
}

static int parse_in(const char *const *names, int n, const char *s, int *out)
{
	for (int i = 0; i < n; i++)
		if (names[i][0] && strcmp(names[i], s) == 0) {
			*out = i;
			return 0;
		}
	return -1;
}

const char *sw_block_name(enum sw_block b) { return name_of(block_names, SW_BLOCK_COUNT, b); }
const char *sw_kind_name(enum sw_kind k) { return name_of(kind_names, SW_KIND_COUNT, k); }
const char *sw_mup_name(enum sw_mup m) { return name_of(mup_names, SW_MUP_COUNT, m); }
const char *sw_norm_type_name(enum sw_norm_type t) { return name_of(norm_type_names, SW_NORM_COUNT, t); }
const char *sw_wd_mode_name(enum sw_wd_mode m) { return name_of(wd_mode_names, SW_WD_COUNT, m); }
const char *sw_group_name(enum sw_group g) { return name_of(group_names, SW_GROUP_COUNT, g); }

#define PARSER(fn, type, names, n)                                 \
	int fn(const char *s, type *out)                           \
	{                                                          \
		int v;                                             \
		if (parse_in(names, n, s, &v) < 0)                 \
			return -1;                                 \
		*out = (type)v;                                    \
		return 0;                                          \
	}
PARSER(sw_block_parse, enum sw_block, block_names, SW_BLOCK_COUNT)
PARSER(sw_kind_parse, enum sw_kind, kind_names, SW_KIND_COUNT)
PARSER(sw_mup_parse, enum sw_mup, mup_names, SW_MUP_COUNT)
PARSER(sw_norm_type_parse, enum sw_norm_type, norm_type_names, SW_NORM_COUNT)
PARSER(sw_wd_mode_parse, enum sw_wd_mode, wd_mode_names, SW_WD_COUNT)
PARSER(sw_group_parse, enum sw_group, group_names, SW_GROUP_COUNT)

int sw_dtype_size(enum sw_dtype d)
{
	switch (d) {
	case SW_DTYPE_F32: return 4;
	case SW_DTYPE_F16: return 2;
	case SW_DTYPE_BF16: return 2;
	case SW_DTYPE_F64: return 8;
	default: return 0;
	}
}

int sw_shape_numel(int rank, const int64_t *shape, int64_t *numel)
{
	int64_t n = 1;

	if (rank < 0 || rank > SW_MAX_RANK)
		return -1;
	for (int i = 0; i < rank; i++) {
		if (shape[i] < 0 || __builtin_mul_overflow(n, shape[i], &n))
			return -1;
	}
	*numel = n;
	return 0;
}

char *sw_shape_format(int rank, const int64_t *shape, char *buf, int len)
{
	int used = 0;

	buf[0] = '\0';
	for (int i = 0; i < rank && used < len; i++)
		used += snprintf(buf + used, (size_t)(len - used), "%s%lld",
				 i ? "x" : "", (long long)shape[i]);
	return buf;
}

enum sw_kind sw_kind_of_shape(int rank, const int64_t *shape)
{
	int64_t n;

	if (rank == 2 && shape[0] > 1 && shape[1] > 1)
		return SW_KIND_MATRIX;
	if (rank == 0 || (sw_shape_numel(rank, shape, &n) == 0 && n == 1))
		return SW_KIND_SCALAR;
	return SW_KIND_VECTOR;
}
