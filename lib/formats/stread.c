/*
 * stread.c - the Hugging Face safetensors checkpoint reader, a back end of
 * ckpt.c (see stread.h).
 */
#include "stread.h"
#include "../base/dtype.h"
#include "../base/family.h"
#include "../base/grow.h"
#include "hfdir.h"
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
	size_t n, loc_cap;
	struct attr_map meta;           /* __metadata__ of every shard, merged */
};

/*
 * Open path for reading if it is a regular file. O_NONBLOCK: opening a
 * FIFO would block until a writer came, and one is refused here anyway;
 * a regular file ignores the flag.
 */
static int open_regular(const char *path, int *fd, struct stat *st, struct sw_err *err)
{
	*fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (*fd < 0)
		return sw_fail(err, sw_errno_status(errno), "%s", strerror(errno));
	if (fstat(*fd, st) < 0 || !S_ISREG(st->st_mode)) {
		close(*fd);
		*fd = -1;
		return sw_fail(err, SW_ENOINPUT, "not a regular file");
	}
	return SW_OK;
}

int stsrc_sniff(int fd, uint64_t size)
{
	unsigned char buf[9];
	uint64_t hlen = 0;

	if (size < 9 || pread(fd, buf, 9, 0) != 9)
		return 0;
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | buf[i];
	return hlen <= ST_MAX_HEADER && hlen <= size - 8 && buf[8] == '{';
}

/* Is file an index (by its bytes)? Opened without blocking: ckpt.c has
 * already checked it is a regular file. */
static int fd_is_index(const char *file)
{
	struct stat st;
	int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK), yes = 0;

	if (fd < 0)
		return 0;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		yes = !stsrc_sniff(fd, (uint64_t)st.st_size) &&
		      hfdir_sniff_index(fd, (uint64_t)st.st_size);
	close(fd);
	return yes;
}

static void dir_of(const char *path, char *dir, size_t len)
{
	char tmp[PATH_MAX];

	snprintf(tmp, sizeof tmp, "%s", path);
	snprintf(dir, len, "%s", dirname(tmp));
}

static int open_shard_(struct st_shard *sh, struct st_header *h, uint64_t *data_start,
		       struct attr_map *meta, struct sw_err *err);

/* Open one shard: check the header, return its entries, add its
 * __metadata__ to meta. */
static int open_shard(struct st_shard *sh, struct st_header *h, uint64_t *data_start,
		      struct attr_map *meta, int sharded, struct sw_err *err)
{
	int rc = open_shard_(sh, h, data_start, meta, err);

	/* name the shard only when the user named another file */
	if (rc && sharded && !strstr(err->msg, sh->path))
		sw_err_prefix(err, "%s", sh->path);
	return rc;
}

/*
 * Add a shard's __metadata__ to the checkpoint's: a key two shards both
 * carry must have one value (sw-convert repeats the checkpoint's keys in
 * every shard), else the checkpoint says two things.
 */
static int merge_meta(struct attr_map *meta, const struct attr_map *shard, struct sw_err *err)
{
	for (size_t i = 0; i < shard->n; i++) {
		const char *have = attrmap_get(meta, shard->kv[i].key);
		int rc;
		if (have && strcmp(have, shard->kv[i].value))
			return sw_fail(err, SW_EDATA,
				       "__metadata__: '%.100s' is '%.40s' here but '%.40s' in an earlier shard",
				       shard->kv[i].key, shard->kv[i].value, have);
		if (!have && (rc = attrmap_set(meta, shard->kv[i].key, shard->kv[i].value, err)))
			return rc;
	}
	return SW_OK;
}

static int open_shard_(struct st_shard *sh, struct st_header *h, uint64_t *data_start,
		       struct attr_map *meta, struct sw_err *err)
{
	unsigned char lenbuf[8];
	uint64_t hlen = 0;
	struct attr_map mine;
	struct stat st;
	char *json;
	int rc;

	if ((rc = open_regular(sh->path, &sh->fd, &st, err)))
		return rc;
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
	/* a file HDF5 would also open (a userblock holding these bytes) is
	 * two checkpoints at once: which one a reader sees depends on it */
	if (ckptsrc_sniff_hdf5(sh->fd, sh->size))
		return sw_fail(err, SW_EDATA, "is both a safetensors and an HDF5 file: refused as ambiguous");
	json = malloc(hlen ? hlen : 1);
	if (!json)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	if (pread(sh->fd, json, hlen, 8) != (ssize_t)hlen) {
		free(json);
		return sw_fail(err, SW_EIO, "short read of the header");
	}
	*data_start = 8 + hlen;
	attrmap_init(&mine);
	rc = st_parse_header(json, hlen, sh->size - 8 - hlen, &mine, h, err);
	free(json);
	if (!rc && (rc = merge_meta(meta, &mine, err)))
		st_header_free(h);
	attrmap_free(&mine);
	return rc;
}

static int add_tensor(struct stsrc *s, const struct sw_config *c, struct sw_tensor_info *info,
		      size_t k, const struct st_entry *e, int shard, uint64_t data_start,
		      struct sw_err *err)
{
	struct sw_tensor_info *t = &info[k];
	int rc;

	memset(t, 0, sizeof *t);
	if (family_tensor_info(c, e->name, t) < 0)
		return sw_fail(err, SW_EDATA, "%s: layer number outside 0..%lld",
			       e->name, (long long)c->n_layers - 1);
	t->dtype = e->dtype;
	snprintf(t->dtype_name, sizeof t->dtype_name, "%s", e->dtype_name);
	t->rank = e->rank;
	memcpy(t->shape, e->shape, sizeof t->shape);
	t->numel = e->numel;
	t->kind = sw_kind_of_shape(t->rank, t->shape);
	t->lr = t->wd = NAN;
	t->wd_mode = SW_WD_UNKNOWN;
	s->loc[k].shard = shard;
	s->loc[k].offset = data_start + e->begin;
	s->loc[k].nbytes = e->end - e->begin;
	rc = family_check_shape(c, FAMILY_FROM_HF, t, err);
	return rc;
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
		    (present && (rc = attrmap_check_rate(obj, "lr", t->lr, err))) ||
		    (rc = attrmap_number(m, obj, "wd", 0, &t->wd, &present, err)) ||
		    (present && (rc = attrmap_check_rate(obj, "wd", t->wd, err))))
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

/* The shards the index names (hfdir.h), each a path in dir. */
static int list_shards(struct stsrc *s, const char *dir, const struct hfdir_index *ix,
		       struct sw_err *err)
{
	s->shards = calloc(ix->nshards ? ix->nshards : 1, sizeof *s->shards);
	if (!s->shards)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (size_t i = 0; i < ix->nshards; i++) {
		struct st_shard *sh = &s->shards[s->nshards++];
		sh->fd = -1;
		if (hfdir_shard_path(sh->path, sizeof sh->path, dir, ix->shard[i]) < 0)
			return sw_fail(err, SW_ENOINPUT, "shard path too long");
	}
	return SW_OK;
}

/* Room for want tensors in info (*cap of them) and s->loc, grown geometrically. */
static int grow_tensors(struct stsrc *s, struct sw_tensor_info **info, size_t *cap,
			size_t want, struct sw_err *err)
{
	if (sw_grow(info, cap, want, sizeof **info) < 0 || SW_GROW(s->loc, &s->loc_cap, want) < 0)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	return SW_OK;
}

/*
 * Each tensor of the shard (file name shard, at path) must be listed for
 * it; seen marks the index entries found.
 */
static int check_listed(const struct hfdir_index *ix, unsigned char *seen, const char *shard,
			const char *path, const struct st_entry *e, size_t n, struct sw_err *err)
{
	for (size_t i = 0; i < n; i++) {
		size_t at;
		int rc = hfdir_index_holds(ix, shard, path, e[i].name, &at, err);
		if (rc)
			return rc;
		seen[at] = 1;
	}
	return SW_OK;
}

/* Is file a shard the index beside it (in dir) lists? An index that does
 * not read says no: the file is then checked as a whole checkpoint. */
static int listed_shard(const char *dir, const char *file)
{
	char path[PATH_MAX + 40], tmp[PATH_MAX];
	struct hfdir_index ix;
	struct sw_err e;
	const char *base;
	int yes = 0;

	if (snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir) >= (int)sizeof path ||
	    access(path, F_OK) < 0 || hfdir_index_open(path, &ix, &e))
		return 0;
	snprintf(tmp, sizeof tmp, "%s", file);
	base = basename(tmp);
	for (size_t i = 0; i < ix.nshards && !yes; i++)
		yes = !strcmp(ix.shard[i], base);
	hfdir_index_free(&ix);
	return yes;
}

int stsrc_open(const char *file, struct stsrc **out, struct ckpt_meta *cm,
	       struct sw_tensor_info **info_out, size_t *n_out, struct sw_err *err)
{
	char dir[PATH_MAX];
	struct hfdir_index ix = {0};
	struct sw_tensor_info *info = NULL;
	unsigned char *seen = NULL;
	struct stsrc *s;
	size_t total = 0, cap = 0;
	int rc, is_index;

	*out = NULL;
	*info_out = NULL;
	*n_out = 0;
	if (!(s = calloc(1, sizeof *s)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	attrmap_init(&s->meta);
	cm->format = CKPT_SAFETENSORS;
	dir_of(file, dir, sizeof dir);
	if ((rc = hfdir_config(dir, &cm->config, err)))
		goto out;

	is_index = fd_is_index(file);
	if (is_index) {
		if ((rc = hfdir_index_open(file, &ix, err)) || (rc = list_shards(s, dir, &ix, err)))
			goto out;
		if (!(seen = calloc(ix.idx.n ? ix.idx.n : 1, 1))) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto out;
		}
	} else {
		s->shards = calloc(1, sizeof *s->shards);
		if (!s->shards) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto out;
		}
		snprintf(s->shards[0].path, sizeof s->shards[0].path, "%s", file);
		s->shards[0].fd = -1;
		s->nshards = 1;
		cm->one_shard = listed_shard(dir, file);
	}
	for (int k = 0; k < s->nshards; k++) {
		struct st_header h = {0};
		uint64_t data_start = 0;

		if (is_index && (rc = hfdir_check_link(s->shards[k].path, dir, file, err)))
			goto out;
		if ((rc = open_shard(&s->shards[k], &h, &data_start, &s->meta, is_index, err)))
			goto out;
		if (is_index)
			rc = check_listed(&ix, seen, ix.shard[k], s->shards[k].path, h.e, h.n, err);
		/* the table grows as tensors are taken: a header refused at
		 * its first tensor costs no table of all the others */
		for (size_t i = 0; i < h.n && !rc; i++)
			if (!(rc = grow_tensors(s, &info, &cap, total + i + 1, err)))
				rc = add_tensor(s, &cm->config, info, total + i, &h.e[i], k, data_start, err);
		total += h.n;
		st_header_free(&h);
		if (rc)
			goto out;
		s->n = total;
	}
	/* every listed tensor must be in its shard */
	for (size_t i = 0; is_index && i < ix.idx.n; i++)
		if (!seen[i]) {
			rc = sw_fail(err, SW_EDATA, "the index lists %s in %s, which does not hold it",
				     ix.idx.e[i].name, ix.idx.e[i].shard);
			goto out;
		}
	if ((rc = apply_scalewatch_meta(&s->meta, cm, info, total, err)))
		goto out;
	*info_out = info;
	*n_out = total;
	info = NULL;
	*out = s;
	s = NULL;
out:
	hfdir_index_free(&ix);
	free(seen);
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
	/* float32 at a 4-byte aligned address is used in place; BF16 and
	 * F16 too when the caller reads them itself */
	if (t->dtype == SW_DTYPE_F32 && ((uintptr_t)bytes & 3) == 0) {
		v->data = bytes;
		v->mapped = 1;
		return SW_OK;
	}
	if (v->raw_ok && (t->dtype == SW_DTYPE_BF16 || t->dtype == SW_DTYPE_F16) &&
	    ((uintptr_t)bytes & 1) == 0) {
		v->raw = bytes;
		v->raw_dtype = t->dtype;
		v->mapped = 1;
		return SW_OK;
	}
	if ((rc = ckptsrc_buffer(scratch, t->numel, v, &buf, err)))
		return rc;
	if ((rc = ckptsrc_convert(t->dtype, bytes, buf, t->numel, v, err))) {
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

/* ---- the format entry (ckptsrc.h) ---------------------------------------- */

static int st_sniff(int fd, uint64_t size)
{
	return stsrc_sniff(fd, size) || hfdir_sniff_index(fd, size);
}

static int st_open(const char *path, int fd, uint64_t size, void **src, struct ckpt_meta *m,
		   struct sw_tensor_info **info, size_t *n, struct sw_err *err)
{
	(void)size;
	close(fd);      /* the reader opens the file and its shards itself */
	return stsrc_open(path, (struct stsrc **)src, m, info, n, err);
}

static int st_load(void *src, size_t k, const struct sw_tensor_info *t,
		   struct ckpt_scratch *scratch, struct ckpt_view *v, struct sw_err *err)
{
	return stsrc_load(src, k, t, scratch, v, err);
}

static int st_attrs(void *src, const struct sw_tensor_info *info, size_t n,
		    struct attr_map *scratch, const struct attr_map **out, struct sw_err *err)
{
	(void)info, (void)n, (void)scratch, (void)err;
	*out = stsrc_attrs(src);
	return SW_OK;
}

static void st_close(void *src) { stsrc_close(src); }

const struct ckpt_format_ops stsrc_format = {
	.name = "a safetensors file",
	.sniff = st_sniff,
	.open = st_open,
	.load = st_load,
	.attrs = st_attrs,
	.close = st_close,
	.reads_index = 1,
};
