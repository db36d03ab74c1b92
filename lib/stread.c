/*
 * stread.c - the Hugging Face safetensors checkpoint reader, a back end of
 * ckpt.c (see stread.h).
 */
#include "stread.h"
#include "dtype.h"
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct st_shard {
	char path[PATH_MAX];
	int fd;
	uint64_t size;
};

struct st_loc {                 /* where tensor k's bytes are */
	int shard;
	uint64_t offset;        /* absolute file offset */
	uint64_t nbytes;
};

struct stsrc {
	struct st_shard *shards;
	int nshards;
	struct st_loc *loc;             /* (n) */
	size_t n;
	struct attr_map meta;           /* __metadata__ of every shard, merged */
};

/* Read a whole small file (config.json, index) into a malloc'ed buffer. */
static int slurp(const char *path, size_t max, char **buf, size_t *len, struct sw_err *err)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got;

	*buf = NULL;
	if (fd < 0)
		return sw_fail(err, sw_errno_status(errno), "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		close(fd);
		return sw_fail(err, SW_EDATA, "%s: not a regular file of at most %zu bytes", path, max);
	}
	*buf = malloc((size_t)st.st_size + 1);
	if (!*buf) {
		close(fd);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	got = pread(fd, *buf, (size_t)st.st_size, 0);
	close(fd);
	if (got != st.st_size) {
		free(*buf);
		*buf = NULL;
		return sw_fail(err, SW_EIO, "%s: short read", path);
	}
	(*buf)[got] = '\0';
	*len = (size_t)got;
	return SW_OK;
}

static void dir_of(const char *path, char *dir, size_t len)
{
	char tmp[PATH_MAX];

	snprintf(tmp, sizeof tmp, "%s", path);
	snprintf(dir, len, "%s", dirname(tmp));
}

static int open_shard_(struct st_shard *sh, struct st_entry **e, size_t *n,
		       uint64_t *data_start, struct attr_map *meta, struct sw_err *err);

/* Open one shard: check the header, return its entries, add its
 * __metadata__ to meta. */
static int open_shard(struct st_shard *sh, struct st_entry **e, size_t *n,
		      uint64_t *data_start, struct attr_map *meta, int sharded,
		      struct sw_err *err)
{
	int rc = open_shard_(sh, e, n, data_start, meta, err);

	/* name the shard only when the user named another file */
	if (rc && sharded && !strstr(err->msg, sh->path))
		sw_err_prefix(err, "%s", sh->path);
	return rc;
}

static int open_shard_(struct st_shard *sh, struct st_entry **e, size_t *n,
		       uint64_t *data_start, struct attr_map *meta, struct sw_err *err)
{
	unsigned char lenbuf[8];
	uint64_t hlen = 0;
	struct stat st;
	char *json;
	int rc;

	sh->fd = open(sh->path, O_RDONLY | O_CLOEXEC);
	if (sh->fd < 0)
		return sw_fail(err, sw_errno_status(errno), "%s", strerror(errno));
	if (fstat(sh->fd, &st) < 0 || !S_ISREG(st.st_mode))
		return sw_fail(err, SW_ENOINPUT, "not a regular file");
	sh->size = (uint64_t)st.st_size;
	if (sh->size < 8 || pread(sh->fd, lenbuf, 8, 0) != 8)
		return sw_fail(err, SW_EDATA, "not a safetensors file (shorter than its 8-byte header length)");
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | lenbuf[i];
	if (hlen > ST_MAX_HEADER)
		return sw_fail(err, SW_EDATA,
			       "not a safetensors file (header length %llu exceeds 100 MB)",
			       (unsigned long long)hlen);
	if (hlen > sh->size - 8)
		return sw_fail(err, SW_EDATA,
			       "header length %llu runs past the end of the file (%llu bytes)",
			       (unsigned long long)hlen, (unsigned long long)sh->size);
	json = malloc(hlen ? hlen : 1);
	if (!json)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	if (pread(sh->fd, json, hlen, 8) != (ssize_t)hlen) {
		free(json);
		return sw_fail(err, SW_EIO, "short read of the header");
	}
	*data_start = 8 + hlen;
	rc = st_parse_header(json, hlen, sh->size - 8 - hlen, e, n, err);
	if (!rc)
		rc = st_parse_metadata(json, hlen, meta, err);
	free(json);
	return rc;
}

static int add_tensor(struct stsrc *s, const struct sw_config *c, struct sw_tensor_info *info,
		      size_t k, const struct st_entry *e, int shard, uint64_t data_start,
		      struct sw_err *err)
{
	struct sw_tensor_info *t = &info[k];
	int rc;

	memset(t, 0, sizeof *t);
	if (arch_info_from_hf_name(c, e->name, t) < 0)
		return sw_fail(err, SW_EDATA, "%s: layer number outside 0..%lld",
			       e->name, (long long)c->n_layers - 1);
	t->dtype = e->dtype;
	memcpy(t->dtype_name, e->dtype_name, sizeof t->dtype_name);
	t->rank = e->rank;
	memcpy(t->shape, e->shape, sizeof t->shape);
	t->numel = e->numel;
	t->kind = sw_kind_of_shape(t->rank, t->shape);
	t->lr = t->wd = NAN;
	t->wd_mode = SW_WD_UNKNOWN;
	s->loc[k].shard = shard;
	s->loc[k].offset = data_start + e->begin;
	s->loc[k].nbytes = e->end - e->begin;
	rc = arch_check_shape(c, t, err);
	return rc;
}

/* The file name part of a path (no copy, unlike POSIX basename). */
static const char *base_name(const char *p)
{
	const char *slash = strrchr(p, '/');
	return slash ? slash + 1 : p;
}

/*
 * A checkpoint sw-convert exported carries its scalewatch attributes in
 * the metadata (scalewatch-format(5)): take step, tokens, the losses and
 * each tensor's lr, wd and wd_mode from there, as the HDF5 reader would.
 */
static int apply_scalewatch_meta(const struct attr_map *m, struct ckpt_meta *cm,
				 struct sw_tensor_info *info, size_t n, struct sw_err *err)
{
	char key[SW_NAME_MAX + 64], obj[SW_NAME_MAX + 16];
	int64_t step = 0, tokens = 0;
	int rc, has_step, has_tokens, present;

	if ((rc = attrmap_integer(m, "/", "step", &step, &has_step, err)) ||
	    (rc = attrmap_integer(m, "/", "tokens", &tokens, &has_tokens, err)) ||
	    (rc = attrmap_number(m, "/metrics", "train_loss", 0, &cm->train_loss, &present, err)) ||
	    (rc = attrmap_number(m, "/metrics", "val_loss", 0, &cm->val_loss, &present, err)))
		goto bad;
	cm->has_step = has_step && has_tokens;
	cm->step = step;
	cm->tokens = tokens;
	for (size_t i = 0; i < n; i++) {
		struct sw_tensor_info *t = &info[i];
		const char *mode;

		snprintf(obj, sizeof obj, "/params/%s", t->name);
		if ((rc = attrmap_number(m, obj, "lr", 0, &t->lr, &present, err)) ||
		    (rc = attrmap_number(m, obj, "wd", 0, &t->wd, &present, err)))
			goto bad;
		snprintf(key, sizeof key, ATTRMAP_PREFIX "params.%s.wd_mode", t->name);
		if ((mode = attrmap_get(m, key)) && sw_wd_mode_parse(mode, &t->wd_mode) < 0)
			return sw_fail(err, SW_EDATA, "__metadata__: %s = '%.40s' is not a wd_mode",
				       key, mode);
	}
	return SW_OK;
bad:
	sw_err_prefix(err, "__metadata__");
	return rc;
}

static int find_index(const struct st_index_entry *idx, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(idx[i].name, name))
			return (int)i;
	return -1;
}

void stsrc_close(struct stsrc *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->nshards; i++)
		if (s->shards[i].fd >= 0)
			close(s->shards[i].fd);
	free(s->shards);
	free(s->loc);
	attrmap_free(&s->meta);
	free(s);
}

/* The shards the index names, each once, in order of first appearance. */
static int list_shards(struct stsrc *s, const char *dir, const struct st_index_entry *idx,
		       size_t nidx, struct sw_err *err)
{
	s->shards = calloc(nidx ? nidx : 1, sizeof *s->shards);
	if (!s->shards)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (size_t i = 0; i < nidx; i++) {
		int seen = 0;
		for (int k = 0; k < s->nshards && !seen; k++)
			seen = !strcmp(base_name(s->shards[k].path), idx[i].shard);
		if (!seen) {
			struct st_shard *sh = &s->shards[s->nshards++];
			sh->fd = -1;
			if (snprintf(sh->path, sizeof sh->path, "%s/%s", dir,
				     idx[i].shard) >= (int)sizeof sh->path)
				return sw_fail(err, SW_ENOINPUT, "shard path too long");
		}
	}
	return SW_OK;
}

int stsrc_open(const char *file, struct stsrc **out, struct ckpt_meta *cm,
	       struct sw_tensor_info **info_out, size_t *n_out, struct sw_err *err)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];
	struct st_index_entry *idx = NULL;
	struct sw_tensor_info *info = NULL;
	struct stsrc *s;
	size_t nidx = 0, total = 0;
	char *json = NULL;
	size_t len;
	int rc, is_index;

	*out = NULL;
	*info_out = NULL;
	*n_out = 0;
	if (!(s = calloc(1, sizeof *s)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	attrmap_init(&s->meta);
	cm->format = CKPT_SAFETENSORS;
	dir_of(file, dir, sizeof dir);
	snprintf(path, sizeof path, "%s/config.json", dir);
	if (access(path, F_OK) < 0) {
		rc = sw_fail(err, SW_ENOINPUT, "no config.json beside it (needed for the architecture)");
		goto out;
	}
	if ((rc = slurp(path, 16u << 20, &json, &len, err)))
		goto out;
	rc = st_parse_config(json, len, &cm->config, err);
	free(json);
	if (rc)
		goto out;

	is_index = strlen(file) >= 5 && !strcmp(file + strlen(file) - 5, ".json");
	if (is_index) {
		if ((rc = slurp(file, 64u << 20, &json, &len, err)))
			goto out;
		rc = st_parse_index(json, len, &idx, &nidx, err);
		free(json);
		if (rc || (rc = list_shards(s, dir, idx, nidx, err)))
			goto out;
	} else {
		s->shards = calloc(1, sizeof *s->shards);
		if (!s->shards) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto out;
		}
		snprintf(s->shards[0].path, sizeof s->shards[0].path, "%s", file);
		s->shards[0].fd = -1;
		s->nshards = 1;
	}
	for (int k = 0; k < s->nshards; k++) {
		struct st_entry *e = NULL;
		size_t n = 0;
		uint64_t data_start = 0;
		void *p;

		if ((rc = open_shard(&s->shards[k], &e, &n, &data_start, &s->meta, is_index, err)))
			goto out;
		p = realloc(info, (total + n + 1) * sizeof *info);
		if (p)
			info = p;
		p = p ? realloc(s->loc, (total + n + 1) * sizeof *s->loc) : NULL;
		if (p)
			s->loc = p;
		if (!p) {
			free(e);
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto out;
		}
		for (size_t i = 0; i < n && !rc; i++) {
			if (is_index) {
				int j = find_index(idx, nidx, e[i].name);
				if (j < 0 || strcmp(idx[j].shard, base_name(s->shards[k].path)))
					rc = sw_fail(err, SW_EDATA,
						     "%s holds %s, which the index does not list there",
						     s->shards[k].path, e[i].name);
			}
			if (!rc)
				rc = add_tensor(s, &cm->config, info, total + i, &e[i], k, data_start, err);
		}
		free(e);
		total += n;
		s->n = total;
		if (rc)
			goto out;
	}
	if (is_index && total != nidx) {
		/* every listed tensor must be in its shard */
		for (size_t i = 0; i < nidx; i++) {
			int found = 0;
			for (size_t k = 0; k < total && !found; k++)
				found = !strcmp(info[k].name, idx[i].name);
			if (!found) {
				rc = sw_fail(err, SW_EDATA, "the index lists %s in %s, which does not hold it",
					     idx[i].name, idx[i].shard);
				goto out;
			}
		}
	}
	if ((rc = apply_scalewatch_meta(&s->meta, cm, info, total, err)))
		goto out;
	*info_out = info;
	*n_out = total;
	info = NULL;
	*out = s;
	s = NULL;
out:
	free(idx);
	free(info);
	stsrc_close(s);
	return rc;
}

int stsrc_load(struct stsrc *s, size_t k, const struct sw_tensor_info *t,
	       struct ckpt_scratch *scratch, struct ckpt_view *v, struct sw_err *err)
{
	const struct st_loc *l = &s->loc[k];
	const struct st_shard *sh = &s->shards[l->shard];
	const void *bytes;
	float *buf;
	int rc;

	rc = ckptsrc_map(sh->fd, sh->size, l->offset, l->nbytes, v, &bytes, err);
	if (rc) {
		sw_err_prefix(err, "%s", t->name);
		return rc;
	}
	/* float32 at a 4-byte aligned address is used in place */
	if (t->dtype == SW_DTYPE_F32 && ((uintptr_t)bytes & 3) == 0) {
		v->data = bytes;
		v->mapped = 1;
		return SW_OK;
	}
	if ((rc = ckptsrc_buffer(scratch, t->numel, v, &buf, err)))
		return rc;
	if ((rc = sw_to_f32(t->dtype, bytes, buf, (size_t)t->numel, err))) {
		sw_err_prefix(err, "%s", t->name);
		return rc;
	}
	ckptsrc_unmap(v);
	v->data = buf;
	return SW_OK;
}

const struct attr_map *stsrc_attrs(const struct stsrc *s)
{
	return &s->meta;
}
