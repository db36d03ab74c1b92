/*
 * ckpt.c - the tensor source: format detection, model order, views and
 * attributes over the two readers, h5read.c and stread.c (see ckpt.h).
 */
#include "ckpt.h"
#include "h5read.h"
#include "stread.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct ckpt {
	char path[PATH_MAX];            /* the file opened (a directory resolved) */
	struct ckpt_meta meta;
	size_t n;
	struct sw_tensor_info *info;    /* (n) in model order */
	size_t *src;                    /* (n) each tensor's index in its reader */
	struct h5src *h5;               /* one of the two readers */
	struct stsrc *st;
	struct ckpt_scratch scratch;
	struct attr_map attrs;          /* HDF5: built by the first ckpt_attrs */
	int attrs_built;
};

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

/* qsort context without globals: sort an array of (info, reader index) pairs. */
struct pair {
	struct sw_tensor_info info;
	size_t src;
};

static int pair_cmp(const void *a, const void *b)
{
	return arch_model_order_cmp(&((const struct pair *)a)->info,
				    &((const struct pair *)b)->info);
}

/*
 * Take the reader's tensors (file order) into model order, remembering
 * where each came from; refuse two tensors claiming one known role and
 * layer; say whether the head is the embedding.
 */
static int take_tensors(struct ckpt *ck, struct sw_tensor_info *info, size_t n, struct sw_err *err)
{
	struct pair *p = malloc((n ? n : 1) * sizeof *p);

	ck->info = info;
	ck->n = n;
	ck->src = malloc((n ? n : 1) * sizeof *ck->src);
	if (!p || !ck->src) {
		free(p);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		p[i].info = info[i];
		p[i].src = i;
	}
	qsort(p, n, sizeof *p, pair_cmp);
	for (size_t i = 0; i < n; i++) {
		info[i] = p[i].info;
		ck->src[i] = p[i].src;
	}
	free(p);
	/* after sorting, two tensors with one known role and layer are adjacent */
	for (size_t i = 1; i < n; i++) {
		const struct sw_tensor_info *a = &info[i - 1], *b = &info[i];
		if (arch_role_find(a->role) && a->layer == b->layer &&
		    strcmp(a->role, b->role) == 0)
			return sw_fail(err, SW_EDATA,
				       "%s and %s both claim role %s in layer %d",
				       a->name, b->name, a->role, a->layer);
	}
	ck->meta.head_tied = ckpt_find_role(ck, "lm_head", -1) < 0 &&
			     ckpt_find_role(ck, "embed", -1) >= 0 && ck->meta.config.tie_embeddings;
	return SW_OK;
}

int ckpt_open(const char *path, struct ckpt **out, struct sw_err *err)
{
	struct sw_tensor_info *info = NULL;
	struct ckpt *ck;
	struct stat st;
	size_t n = 0;
	int rc, fd;

	*out = NULL;
	if (stat(path, &st) < 0)
		return sw_fail(err, sw_errno_status(errno), "%s", strerror(errno));
	ck = calloc(1, sizeof *ck);
	if (!ck)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	attrmap_init(&ck->attrs);
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
	/* no wait on a FIFO swapped in since the stat; the reader checks fd */
	fd = open(ck->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		rc = sw_fail(err, sw_errno_status(errno), "%s", strerror(errno));
		goto fail;
	}
	if (looks_like_hdf5(fd, (uint64_t)st.st_size)) {
		rc = h5src_open(ck->path, fd, (uint64_t)st.st_size, &ck->h5, &ck->meta, &info, &n, err);
	} else {
		close(fd);
		rc = stsrc_open(ck->path, &ck->st, &ck->meta, &info, &n, err);
	}
	if (rc || (rc = take_tensors(ck, info, n, err)))
		goto fail;
	*out = ck;
	return SW_OK;
fail:
	if (!ck->info)
		free(info);
	ckpt_close(ck);
	return rc;
}

void ckpt_close(struct ckpt *ck)
{
	if (!ck)
		return;
	h5src_close(ck->h5);
	stsrc_close(ck->st);
	attrmap_free(&ck->attrs);
	ckptsrc_scratch_free(&ck->scratch);
	free(ck->info);
	free(ck->src);
	free(ck);
}

const struct ckpt_meta *ckpt_meta(const struct ckpt *ck) { return &ck->meta; }
const char *ckpt_path(const struct ckpt *ck) { return ck->path; }
size_t ckpt_count(const struct ckpt *ck) { return ck->n; }
const struct sw_tensor_info *ckpt_info(const struct ckpt *ck, size_t i) { return &ck->info[i]; }

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
	rc = ck->h5 ? h5src_load(ck->h5, &ck->info[i], &ck->scratch, v, err)
		    : stsrc_load(ck->st, ck->src[i], &ck->info[i], &ck->scratch, v, err);
	if (rc)
		ckptsrc_release(v);
	return rc;
}

void ckpt_release(struct ckpt *ck, struct ckpt_view *v)
{
	(void)ck;
	ckptsrc_release(v);
}

/* ---- attributes ----------------------------------------------------- */

int ckpt_attrs(struct ckpt *ck, const struct attr_map **out, struct sw_err *err)
{
	int rc;

	if (ck->st) {
		*out = stsrc_attrs(ck->st);
		return SW_OK;
	}
	if (!ck->attrs_built) {
		/* the tensors' keys in model order, as an export lists them */
		attrmap_free(&ck->attrs);
		if ((rc = h5src_attrs(ck->h5, ck->info, ck->n, &ck->attrs, err)))
			return rc;
		ck->attrs_built = 1;
	}
	*out = &ck->attrs;
	return SW_OK;
}

int ckpt_attr_number(struct ckpt *ck, const char *obj, const char *attr, int integer,
		     double *v, int *present, struct sw_err *err)
{
	const struct attr_map *m;
	int rc;

	if ((rc = ckpt_attrs(ck, &m, err)))
		return rc;
	return attrmap_number(m, obj, attr, integer, v, present, err);
}

int ckpt_attr_integer(struct ckpt *ck, const char *obj, const char *attr, int64_t *v,
		      int *present, struct sw_err *err)
{
	const struct attr_map *m;
	int rc;

	if ((rc = ckpt_attrs(ck, &m, err)))
		return rc;
	return attrmap_integer(m, obj, attr, v, present, err);
}

int ckpt_attr_string(struct ckpt *ck, const char *obj, const char *attr, char *buf,
		     size_t len, int *present, struct sw_err *err)
{
	const struct attr_map *m;
	int rc;

	if ((rc = ckpt_attrs(ck, &m, err)))
		return rc;
	return attrmap_string(m, obj, attr, buf, len, present, err);
}

/* ---- companions ----------------------------------------------------- */

int ckpt_has_aux(const struct ckpt *ck, const char *group, size_t i)
{
	return ck->h5 && i < ck->n && h5src_has_aux(ck->h5, group, ck->info[i].name);
}

int ckpt_load_aux(const struct ckpt *ck, const char *group, size_t i, float *out,
		  struct sw_err *err)
{
	if (!ck->h5 || i >= ck->n)
		return sw_fail(err, SW_EDATA, "no /%s for %s", group, i < ck->n ? ck->info[i].name : "?");
	return h5src_load_aux(ck->h5, group, &ck->info[i], out, err);
}

int64_t ckpt_aux_attr(const struct ckpt *ck, const char *group, size_t i, const char *attr)
{
	if (!ck->h5 || i >= ck->n)
		return -1;
	return h5src_aux_attr(ck->h5, group, ck->info[i].name, attr);
}
