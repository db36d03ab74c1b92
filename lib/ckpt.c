/* ckpt.c - the tensor source: format detection, views, model order (ckpt.h). */
#include "ckpt_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const unsigned char hdf5_signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

/* HDF5 looks for its superblock at 0, 512, 1024, 2048, ... */
static int looks_like_hdf5(int fd, uint64_t size)
{
	unsigned char buf[8];

	for (uint64_t off = 0; off + 8 <= size; off = off ? off * 2 : 512) {
		if (pread(fd, buf, 8, (off_t)off) != 8)
			return 0;
		if (memcmp(buf, hdf5_signature, 8) == 0)
			return 1;
	}
	return 0;
}

/* A directory is a Hugging Face model directory: find the file to open. */
static int resolve_directory(const char *dir, char *out, size_t len, struct sw_err *err)
{
	static const char *const names[] = {"model.safetensors.index.json", "model.safetensors"};
	struct stat st;

	for (size_t i = 0; i < 2; i++) {
		int n = snprintf(out, len, "%s/%s", dir, names[i]);
		if (n < 0 || (size_t)n >= len)
			return sw_fail(err, SW_ENOINPUT, "path too long");
		if (stat(out, &st) == 0 && S_ISREG(st.st_mode))
			return SW_OK;
	}
	return sw_fail(err, SW_ENOINPUT,
		       "is a directory (no model.safetensors or model.safetensors.index.json in it)");
}

int ckpt_open(const char *path, struct ckpt **out, struct sw_err *err)
{
	struct ckpt *ck;
	struct stat st;
	int rc, fd;

	*out = NULL;
	if (stat(path, &st) < 0)
		return sw_fail(err, sw_errno_status(errno), "%s", strerror(errno));
	ck = calloc(1, sizeof *ck);
	if (!ck)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	ck->h5 = H5I_INVALID_HID;
	ck->h5fd = -1;
	st_meta_init(&ck->st_meta);
	ck->meta.train_loss = ck->meta.val_loss = NAN;
	if (S_ISDIR(st.st_mode)) {
		rc = resolve_directory(path, ck->path, sizeof ck->path, err);
		if (rc)
			goto fail;
		if (stat(ck->path, &st) < 0) {
			rc = sw_fail(err, sw_errno_status(errno), "%s: %s", ck->path, strerror(errno));
			goto fail;
		}
	} else {
		if (strlen(path) >= sizeof ck->path) {
			rc = sw_fail(err, SW_ENOINPUT, "path too long");
			goto fail;
		}
		strcpy(ck->path, path);
	}
	if (!S_ISREG(st.st_mode)) {
		/* never open a FIFO or a device: reading it could block forever */
		rc = sw_fail(err, SW_ENOINPUT, "not a regular file");
		goto fail;
	}
	if (st.st_size == 0) {
		rc = sw_fail(err, SW_EDATA, "empty file");
		goto fail;
	}
	fd = open(ck->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = sw_fail(err, sw_errno_status(errno), "%s", strerror(errno));
		goto fail;
	}
	if (looks_like_hdf5(fd, (uint64_t)st.st_size)) {
		ck->h5fd = fd;
		ck->h5size = (uint64_t)st.st_size;
		ck->meta.format = CKPT_HDF5;
		rc = h5ckpt_open(ck, err);
	} else {
		close(fd);
		ck->meta.format = CKPT_SAFETENSORS;
		rc = stckpt_open(ck, err);
	}
	if (rc)
		goto fail;
	*out = ck;
	return SW_OK;
fail:
	ckpt_close(ck);
	return rc;
}

void ckpt_close(struct ckpt *ck)
{
	if (!ck)
		return;
	h5ckpt_close(ck);
	stckpt_close(ck);
	st_meta_free(&ck->st_meta);
	free(ck->info);
	free(ck->loc);
	free(ck->scratch);
	free(ck);
}

const struct ckpt_meta *ckpt_meta(const struct ckpt *ck) { return &ck->meta; }
size_t ckpt_count(const struct ckpt *ck) { return ck->n; }
const struct sw_tensor_info *ckpt_info(const struct ckpt *ck, size_t i) { return &ck->info[i]; }
const struct st_meta *ckpt_st_meta(const struct ckpt *ck) { return &ck->st_meta; }

long ckpt_find_role(const struct ckpt *ck, const char *role, int layer)
{
	for (size_t i = 0; i < ck->n; i++)
		if (ck->info[i].layer == layer && strcmp(ck->info[i].role, role) == 0)
			return (long)i;
	return -1;
}

int ckpt_load(struct ckpt *ck, size_t i, struct ckpt_view *v, struct sw_err *err)
{
	int rc;

	memset(v, 0, sizeof *v);
	if (i >= ck->n)
		return sw_fail(err, SW_ESOFTWARE, "tensor index %zu out of range", i);
	if (ck->info[i].dtype == SW_DTYPE_UNSUPPORTED)
		return sw_fail(err, SW_EDATA, "%s: dtype %s cannot be read as float32",
			       ck->info[i].name, ck->info[i].dtype_name);
	v->numel = ck->info[i].numel;
	rc = ck->meta.format == CKPT_HDF5 ? h5ckpt_load(ck, i, v, err)
					   : stckpt_load(ck, i, v, err);
	if (rc)
		ckpt_release(ck, v);
	return rc;
}

void ckpt_release(struct ckpt *ck, struct ckpt_view *v)
{
	if (v->map_base)
		munmap(v->map_base, v->map_len);
	if (v->uses_scratch)
		ck->scratch_busy = 0;
	free(v->owned);
	memset(v, 0, sizeof *v);
}

int ckpt_map(int fd, uint64_t file_size, uint64_t offset, uint64_t len,
	     struct ckpt_view *v, const void **bytes, struct sw_err *err)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), start, delta;
	void *base;

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
	base = mmap(NULL, (size_t)(len + delta), PROT_READ, MAP_PRIVATE, fd, (off_t)start);
	if (base == MAP_FAILED)
		return sw_fail(err, SW_EIO, "mmap: %s", strerror(errno));
	/* one sequential pass first, then repeated ones: read ahead */
	madvise(base, (size_t)(len + delta), MADV_WILLNEED);
	v->map_base = base;
	v->map_len = (size_t)(len + delta);
	*bytes = (const unsigned char *)base + delta;
	return SW_OK;
}

int ckpt_buffer(struct ckpt *ck, int64_t numel, struct ckpt_view *v,
		float **buf, struct sw_err *err)
{
	size_t n = numel > 0 ? (size_t)numel : 1;

	if ((uint64_t)numel > SIZE_MAX / sizeof(float))
		return sw_fail(err, SW_EDATA, "tensor of %lld elements is too large", (long long)numel);
	if (!ck->scratch_busy) {
		if (ck->scratch_cap < n) {
			free(ck->scratch);
			ck->scratch = malloc(n * sizeof(float));
			ck->scratch_cap = ck->scratch ? n : 0;
			if (!ck->scratch)
				return sw_fail(err, SW_ESOFTWARE,
					       "out of memory for a tensor of %lld elements", (long long)numel);
		}
		ck->scratch_busy = 1;
		v->uses_scratch = 1;
		*buf = ck->scratch;
		return SW_OK;
	}
	v->owned = malloc(n * sizeof(float));
	if (!v->owned)
		return sw_fail(err, SW_ESOFTWARE,
			       "out of memory for a tensor of %lld elements", (long long)numel);
	*buf = v->owned;
	return SW_OK;
}

/* qsort context without globals: sort an array of (info, loc) pairs. */
struct pair {
	struct sw_tensor_info info;
	struct ckpt_loc loc;
};

static int pair_cmp(const void *a, const void *b)
{
	return arch_model_order_cmp(&((const struct pair *)a)->info,
				    &((const struct pair *)b)->info);
}

int ckpt_sort_and_check(struct ckpt *ck, struct sw_err *err)
{
	struct pair *p;

	if (ck->n == 0)
		return SW_OK;
	p = malloc(ck->n * sizeof *p);
	if (!p)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (size_t i = 0; i < ck->n; i++) {
		p[i].info = ck->info[i];
		p[i].loc = ck->loc[i];
	}
	qsort(p, ck->n, sizeof *p, pair_cmp);
	for (size_t i = 0; i < ck->n; i++) {
		ck->info[i] = p[i].info;
		ck->loc[i] = p[i].loc;
	}
	free(p);
	/* after sorting, two tensors with one known role and layer are adjacent */
	for (size_t i = 1; i < ck->n; i++) {
		const struct sw_tensor_info *a = &ck->info[i - 1], *b = &ck->info[i];
		if (arch_role_find(a->role) && a->layer == b->layer &&
		    strcmp(a->role, b->role) == 0)
			return sw_fail(err, SW_EDATA,
				       "%s and %s both claim role %s in layer %d",
				       a->name, b->name, a->role, a->layer);
	}
	return SW_OK;
}
