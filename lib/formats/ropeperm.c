/* ropeperm.c - interleaved RoPE rows to rotate-half (see ropeperm.h). */
#include "ropeperm.h"
#include "../base/dtype.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

int64_t ropeperm_source_row(int64_t row, int64_t head_dim)
{
	int64_t head = row / head_dim, p = row % head_dim, half = head_dim / 2;

	/* rotate-half position p = j*half + i holds pair i's component j */
	return head * head_dim + 2 * (p % half) + p / half;
}

int ropeperm_check_rows(int64_t rows, int64_t head_dim, struct sw_err *err)
{
	if (head_dim <= 0 || head_dim % 2 || rows % head_dim)
		return sw_fail(err, SW_EDATA,
			       "%lld rows are no whole number of heads of an even size %lld: "
			       "the RoPE pairs cannot be reordered", (long long)rows, (long long)head_dim);
	return SW_OK;
}

int ropeperm_to_f32(enum sw_dtype dtype, const unsigned char *src, size_t row_bytes,
		    int64_t rows, int64_t cols, int64_t head_dim, float *dst, struct sw_err *err)
{
	int rc = ropeperm_check_rows(rows, head_dim, err);

	for (int64_t r = 0; r < rows && !rc; r++) {
		int64_t s = ropeperm_source_row(r, head_dim);
		rc = sw_to_f32(dtype, src + (size_t)s * row_bytes, dst + (size_t)r * (size_t)cols,
			       (size_t)cols, err);
	}
	return rc;
}

int ropeperm_src_new(int fd, uint64_t size, size_t n, struct ropeperm_src **out,
		     struct sw_err *err)
{
	struct ropeperm_src *s = calloc(1, sizeof *s);

	*out = NULL;
	if (!s || !(s->t = calloc(n ? n : 1, sizeof *s->t))) {
		free(s);
		close(fd);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	s->fd = fd;
	s->size = size;
	s->n = n;
	attrmap_init(&s->attrs);
	*out = s;
	return SW_OK;
}

void ropeperm_close(void *src)
{
	struct ropeperm_src *s = src;

	if (!s)
		return;
	close(s->fd);
	free(s->t);
	attrmap_free(&s->attrs);
	free(s);
}

int ropeperm_load(void *src, size_t k, const struct sw_tensor_info *t,
		  struct ckpt_scratch *scratch, struct ckpt_view *v, struct sw_err *err)
{
	const struct ropeperm_src *s = src;
	const struct ropeperm_tensor *at = &s->t[k];
	const unsigned char *bytes;
	const void *mapped;
	float *buf;
	int rc;

	if ((rc = ckptsrc_map(s->fd, s->size, at->offset, at->nbytes, v, &mapped, err)))
		goto fail;
	bytes = mapped;
	/* float32 at a 4-byte aligned address is used in place */
	if (!at->permute && at->dtype == SW_DTYPE_F32 && ((uintptr_t)bytes & 3) == 0) {
		v->data = mapped;
		v->mapped = 1;
		return SW_OK;
	}
	if ((rc = ckptsrc_buffer(scratch, t->numel, v, &buf, err)))
		goto fail;
	if (at->permute && (t->rank != 2 || t->shape[0] <= 0))
		rc = sw_fail(err, SW_EDATA, "a q or k projection of rank %d", t->rank);
	else if (at->permute)
		rc = ropeperm_to_f32(at->dtype, bytes, (size_t)(at->nbytes / (uint64_t)t->shape[0]),
				     t->shape[0], t->shape[1], s->head_dim, buf, err);
	else
		rc = sw_to_f32(at->dtype, bytes, buf, (size_t)t->numel, err);
	if (rc)
		goto fail;
	ckptsrc_unmap(v);
	v->data = buf;
	return SW_OK;
fail:
	sw_err_prefix(err, "%s", t->name);
	return rc;
}

int ropeperm_attrs(void *src, const struct sw_tensor_info *info, size_t n,
		   struct attr_map *scratch, const struct attr_map **out, struct sw_err *err)
{
	(void)info, (void)n, (void)scratch, (void)err;
	*out = &((struct ropeperm_src *)src)->attrs;
	return SW_OK;
}

int ropeperm_record(struct ropeperm_src *s, const char *source, struct sw_err *err)
{
	int rc = attrmap_set(&s->attrs, ATTRMAP_PREFIX "source_format", source, err);

	if (!rc)
		rc = attrmap_set(&s->attrs, ATTRMAP_PREFIX "qk_rows",
				 "permuted from the file's interleaved RoPE pairs to rotate-half", err);
	return rc;
}
