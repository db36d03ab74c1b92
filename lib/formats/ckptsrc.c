/* ckptsrc.c - views of tensor data for the checkpoint readers (ckptsrc.h). */
#include "ckptsrc.h"
#include "../base/dtype.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int ckptsrc_map(int fd, uint64_t file_size, uint64_t offset, uint64_t len,
		struct ckpt_view *v, const void **bytes, struct sw_err *err)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), start, delta;
	int rc;

	if (offset > file_size || len > file_size - offset)
		return sw_fail(err, SW_EDATA,
			       "data at offset %llu, %llu bytes, lies beyond the end of the file (%llu bytes)",
			       (unsigned long long)offset, (unsigned long long)len,
			       (unsigned long long)file_size);
	if (len == 0) {
		static const float none[1];
		*bytes = none;
		return SW_OK;
	}
	start = offset / page * page;
	delta = offset - start;
	if ((rc = mapguard_map(fd, start, (size_t)(len + delta), &v->map, err)))
		return rc;
	/* one sequential pass first, then repeated ones: read ahead */
	madvise(v->map.base, v->map.len, MADV_WILLNEED);
	*bytes = (const unsigned char *)v->map.base + delta;
	return SW_OK;
}

int ckptsrc_buffer(struct ckpt_scratch *s, int64_t numel, struct ckpt_view *v,
		   float **buf, struct sw_err *err)
{
	size_t n = numel > 0 ? (size_t)numel : 1;

	if ((uint64_t)numel > SIZE_MAX / sizeof(float))
		return sw_fail(err, SW_EDATA, "tensor of %lld elements is too large", (long long)numel);
	if (!s->busy) {
		if (s->cap < n) {
			free(s->buf);
			s->buf = malloc(n * sizeof(float));
			s->cap = s->buf ? n : 0;
			if (!s->buf)
				return sw_fail(err, SW_ESOFTWARE,
					       "out of memory for a tensor of %lld elements", (long long)numel);
		}
		s->busy = 1;
		v->scratch = s;
		*buf = s->buf;
		return SW_OK;
	}
	v->owned = malloc(n * sizeof(float));
	if (!v->owned)
		return sw_fail(err, SW_ESOFTWARE,
			       "out of memory for a tensor of %lld elements", (long long)numel);
	*buf = v->owned;
	return SW_OK;
}

int ckptsrc_convert(enum sw_dtype dtype, const void *src, float *dst, int64_t numel,
		    struct ckpt_view *v, struct sw_err *err)
{
	const int64_t chunk = (int64_t)4 << 20;        /* values */
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	size_t size = (size_t)sw_dtype_size(dtype);
	int rc;

	/* F64's errors name the value's index in the tensor: one call */
	if (dtype != SW_DTYPE_BF16 && dtype != SW_DTYPE_F16)
		return sw_to_f32(dtype, src, dst, (size_t)numel, err);
	for (int64_t at = 0; at < numel; at += chunk) {
		int64_t n = numel - at < chunk ? numel - at : chunk;
		const unsigned char *p = (const unsigned char *)src + (size_t)at * size;
		uintptr_t lo, hi;

		if ((rc = sw_to_f32(dtype, p, dst + at, (size_t)n, err)))
			return rc;
		/* the whole pages of this chunk inside the mapping */
		lo = ((uintptr_t)p + page - 1) / page * page;
		hi = ((uintptr_t)p + (size_t)n * size) / page * page;
		if (v->map.base && hi > lo && lo >= (uintptr_t)v->map.base &&
		    hi <= (uintptr_t)v->map.base + v->map.len)
			madvise((void *)lo, hi - lo, MADV_DONTNEED);
	}
	return SW_OK;
}

void ckptsrc_unmap(struct ckpt_view *v)
{
	if (mapguard_shrank(&v->map))
		v->shrank = 1;
	mapguard_unmap(&v->map);
}

int ckptsrc_check(const struct ckpt_view *v, struct sw_err *err)
{
	if (v->shrank)
		return sw_fail(err, SW_EIO, "the file shrank while it was read");
	return mapguard_check(&v->map, err);
}

void ckptsrc_release(struct ckpt_view *v)
{
	ckptsrc_unmap(v);
	if (v->scratch)
		v->scratch->busy = 0;
	free(v->owned);
	memset(v, 0, sizeof *v);
}

void ckptsrc_scratch_free(struct ckpt_scratch *s)
{
	free(s->buf);
	memset(s, 0, sizeof *s);
}

int ckptsrc_sniff_hdf5(int fd, uint64_t size)
{
	static const unsigned char signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
	unsigned char buf[8];

	for (uint64_t off = 0; off + 8 <= size; off = off ? off * 2 : 512) {
		if (pread(fd, buf, 8, (off_t)off) != 8)
			return 0;
		if (memcmp(buf, signature, 8) == 0)
			return 1;
	}
	return 0;
}
