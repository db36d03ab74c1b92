/*
 * ckpt.c - the tensor source: format detection, model order, views and
 * attributes over the readers of the formats table below (see ckpt.h).
 */
#include "ckpt.h"
#include "../base/family.h"
#include "ggufread.h"
#include "h5read.h"
#include "hfdir.h"
#include "llama2c.h"
#include "ptread.h"
#include "safetensors.h"
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

/*
 * The formats, each a reader (ckptsrc.h). A file is the one format whose
 * sniff claims its bytes. A file no format claims but whose ninth byte
 * opens a JSON object is given to the last, whose reader says what is
 * wrong with it (safetensors: a header length out of bounds); any other
 * is refused, saying what its first bytes look like (unknown_file).
 */
static const struct ckpt_format_ops *const formats[] = {
	&h5src_format,
	&ptsrc_format,
	&ggufsrc_format,
	&l2c_format,
	&l2c_misfit_format,
	&stsrc_format,
};
#define NFORMATS (sizeof formats / sizeof formats[0])

struct ckpt {
	char path[PATH_MAX];            /* the file opened (a directory resolved) */
	struct ckpt_meta meta;
	size_t n;
	struct sw_tensor_info *info;    /* (n) in model order */
	size_t *src;                    /* (n) each tensor's index in its reader */
	unsigned char *transposed;      /* (n) 1: stored [in, out], seen [out, in] */
	const struct ckpt_format_ops *fmt;      /* the reader, and what it opened */
	void *reader;
	struct ckpt_scratch scratch;
	struct attr_map attrs;          /* scratch of the first ckpt_attrs */
	const struct attr_map *attrs_out;       /* what it gave, kept */
};

/*
 * A directory is a Hugging Face model directory: find the file to open.
 * transformers' from_pretrained tries model.safetensors, then
 * model.safetensors.index.json, then pytorch_model.bin, then
 * pytorch_model.bin.index.json (modeling_utils.py), so a directory that
 * holds several is read as transformers reads it. Then Meta's layout: a
 * directory with params.json is read from consolidated.00.pth (and the
 * other *.pth beside it, lib/formats/ptread.c).
 */
static int resolve_directory(const char *dir, char *out, size_t len, struct sw_err *err)
{
	static const char *const names[] = {
		"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
		"pytorch_model.bin.index.json", "params.json",
	};
	struct stat st;

	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		int n = snprintf(out, len, "%s/%s", dir, names[i]);
		if (n < 0 || (size_t)n >= len)
			return sw_fail(err, SW_ENOINPUT, "path too long");
		if (stat(out, &st) == 0 && S_ISREG(st.st_mode)) {
			if (strcmp(names[i], "params.json"))
				return SW_OK;
			n = snprintf(out, len, "%s/consolidated.00.pth", dir);
			if (n >= 0 && (size_t)n < len && stat(out, &st) == 0 && S_ISREG(st.st_mode))
				return SW_OK;
		}
	}
	return sw_fail(err, SW_ENOINPUT,
		       "is a directory (no model.safetensors, model.safetensors.index.json, "
		       "pytorch_model.bin, pytorch_model.bin.index.json, or params.json and "
		       "consolidated.00.pth in it)");
}

/* qsort context without globals: each tensor's model-order key, computed
 * once, beside a pointer to it (arch.h) */
struct keyed {
	struct arch_order_key key;
	const struct sw_tensor_info *t;
};

static int keyed_cmp(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;
	int c = arch_model_order_key_cmp(&x->key, &y->key);

	return c ? c : strcmp(x->t->name, y->t->name);
}

/*
 * Take the reader's tensors (file order) into model order, remembering
 * where each came from; refuse two tensors claiming one known role and
 * layer; say whether the head is the embedding. Sorted by keys computed
 * once (a million tensors: no role lookup per comparison) and permuted in
 * place, with no second copy of the tensors.
 */
/*
 * A file that holds layers holds every layer of its config: a config of
 * more layers than the file is the two disagreeing (a reader of the
 * config would build another model). A file of no layer at all (an
 * embedding or a head alone) is what it says it is. In model order the
 * tensors inside layers come by layer, so one walk finds the first layer
 * missing.
 */
static int check_layers(const struct ckpt *ck, struct sw_err *err)
{
	int64_t next = 0;
	int any = 0;

	for (size_t i = 0; i < ck->n && next < ck->meta.config.n_layers; i++) {
		struct arch_order_key k;
		arch_model_order_key(&ck->info[i], &k);
		if (k.section != 1)
			continue;
		any = 1;
		if (k.layer > next)
			break;
		if (k.layer == next)
			next++;
	}
	if (any && next < ck->meta.config.n_layers)
		return sw_fail(err, SW_EDATA, "the config has %lld layers, but the file holds no "
			       "tensor of layer %lld", (long long)ck->meta.config.n_layers,
			       (long long)next);
	return SW_OK;
}

static int take_tensors(struct ckpt *ck, struct sw_tensor_info *info, size_t n, struct sw_err *err)
{
	struct keyed *order = malloc((n ? n : 1) * sizeof *order);
	unsigned char *done = calloc(n ? n : 1, 1);
	int rc;

	ck->info = info;
	ck->n = n;
	ck->src = malloc((n ? n : 1) * sizeof *ck->src);
	if (!order || !done || !ck->src) {
		free(order);
		free(done);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		arch_model_order_key(&info[i], &order[i].key);
		order[i].t = &info[i];
	}
	if (n > 1)
		qsort(order, n, sizeof *order, keyed_cmp);
	for (size_t i = 0; i < n; i++)
		ck->src[i] = (size_t)(order[i].t - info);
	free(order);
	/* position i takes the tensor at src[i]: follow each cycle once */
	for (size_t i = 0; i < n; i++) {
		struct sw_tensor_info tmp;
		size_t j = i;

		if (done[i])
			continue;
		tmp = info[i];
		for (;;) {
			size_t k = ck->src[j];
			done[j] = 1;
			if (k == i) {
				info[j] = tmp;
				break;
			}
			info[j] = info[k];
			j = k;
		}
	}
	free(done);
	/* a tensor its family stores transposed is seen as [out, in]; load
	 * turns the values */
	if (!(ck->transposed = calloc(n ? n : 1, 1)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (size_t i = 0; i < n; i++) {
		if (info[i].rank != 2 ||
		    family_tensor_layout(&ck->meta.config, ck->meta.source, info[i].name) !=
		    FAMILY_TRANSPOSED)
			continue;
		int64_t r = info[i].shape[0];
		info[i].shape[0] = info[i].shape[1];
		info[i].shape[1] = r;
		ck->transposed[i] = 1;
	}
	/* after sorting, two tensors with one known role and layer are adjacent */
	for (size_t i = 1; i < n; i++) {
		const struct sw_tensor_info *a = &info[i - 1], *b = &info[i];
		if (arch_role_find(a->role) && a->layer == b->layer && a->expert == b->expert &&
		    strcmp(a->role, b->role) == 0)
			return sw_fail(err, SW_EDATA,
				       "%s and %s both claim role %s in layer %d",
				       a->name, b->name, a->role, a->layer);
	}
	if (!ck->meta.one_shard && (rc = check_layers(ck, err)))
		return rc;
	ck->meta.head_tied = ckpt_find_role(ck, "lm_head", -1) < 0 &&
			     ckpt_find_role(ck, "embed", -1) >= 0 && ck->meta.config.tie_embeddings;
	return SW_OK;
}

/*
 * The format of the open file: the one whose sniff claims it. Two that
 * claim it are refused: an HDF5 userblock can hold a whole safetensors
 * file, and h5py and the safetensors reader would see two models.
 */
/* What a file no reader claims looks like, from its first bytes b (n of
 * them): SW_EDATA with a message naming the near miss, if any. */
static int unknown_file(const unsigned char *b, size_t n, struct sw_err *err)
{
	static const char what[] = "not a checkpoint scalewatch reads (HDF5, safetensors, PyTorch, "
				   "GGUF, llama2.c)";
	char hex[3 * 8 + 1] = "";
	size_t text = 0;

	if (n >= 4 && (!memcmp(b, "lmgg", 4) || !memcmp(b, "tjgg", 4) || !memcmp(b, "fmgg", 4) ||
		       !memcmp(b, "ggml", 4) || !memcmp(b, "ggjt", 4)))
		return sw_fail(err, SW_EDATA, "%s: a GGML/GGJT file, llama.cpp's format before GGUF", what);
	if (n >= 4 && ((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]) == L2C_MAGIC)
		return sw_fail(err, SW_EDATA, "%s: llama2.c's magic in big-endian byte order "
			       "(llama2.c files are little-endian)", what);
	if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b)
		return sw_fail(err, SW_EDATA, "%s: gzip-compressed (uncompress it first)", what);
	if (n >= 2 && b[0] == 'P' && b[1] == 'K')
		return sw_fail(err, SW_EDATA, "%s: a zip archive, but not one torch.save writes "
			       "(no local file header first)", what);
	while (text < n && ((b[text] >= 0x20 && b[text] < 0x7f) || b[text] == '\n' || b[text] == '\t' ||
			    b[text] == '\r'))
		text++;
	if (text == n)
		return sw_fail(err, SW_EDATA, "%s: text", what);
	for (size_t i = 0, len = 0; i < n && i < 8; i++)
		len += (size_t)snprintf(hex + len, sizeof hex - len, "%s%02x", i ? " " : "", b[i]);
	return sw_fail(err, SW_EDATA, "%s: its first bytes are %s", what, hex);
}

static int which_format(int fd, uint64_t size, const struct ckpt_format_ops **out,
			struct sw_err *err)
{
	const struct ckpt_format_ops *found = NULL;
	unsigned char head[64];
	ssize_t got;

	for (size_t i = 0; i < NFORMATS; i++) {
		if (!formats[i]->sniff(fd, size))
			continue;
		if (found)
			return sw_fail(err, SW_EDATA, "is both %s and %s: refused as ambiguous",
				       found->name, formats[i]->name);
		found = formats[i];
	}
	if (found) {
		*out = found;
		return SW_OK;
	}
	got = pread(fd, head, size < sizeof head ? (size_t)size : sizeof head, 0);
	if (got < 0)
		return sw_fail(err, sw_errno_status(errno), "%s", strerror(errno));
	if (got >= 9 && head[8] == '{') {
		*out = formats[NFORMATS - 1];
		return SW_OK;
	}
	return unknown_file(head, (size_t)got, err);
}

/*
 * An index names its shards in JSON (model.safetensors.index.json and
 * pytorch_model.bin.index.json alike): it is read by the format whose
 * sniff claims its first shard's bytes, when that format reads indexes;
 * otherwise by the one that claimed the index, which says what is wrong.
 */
static void index_format(const char *index, int fd, uint64_t size,
			 const struct ckpt_format_ops **fmt)
{
	const struct ckpt_format_ops *f = NULL;
	struct st_index idx = {0};
	struct sw_err ignored;
	char shard[PATH_MAX + ST_SHARD_NAME_MAX];
	const char *slash = strrchr(index, '/');
	struct stat st;
	char *json;
	int sfd;

	if (size > (64u << 20) || !(json = malloc((size_t)size)))
		return;
	if (pread(fd, json, (size_t)size, 0) == (ssize_t)size &&
	    st_parse_index(json, (size_t)size, &idx, &ignored) == SW_OK && idx.n) {
		snprintf(shard, sizeof shard, "%.*s%s", slash ? (int)(slash - index + 1) : 0, index,
			 idx.e[0].shard);
		sfd = open(shard, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (sfd >= 0 && fstat(sfd, &st) == 0 && S_ISREG(st.st_mode) &&
		    which_format(sfd, (uint64_t)st.st_size, &f, &ignored) == SW_OK && f->reads_index)
			*fmt = f;
		if (sfd >= 0)
			close(sfd);
	}
	st_index_free(&idx);
	free(json);
}

/*
 * FILE:KEY names the dict KEY inside FILE (a PyTorch checkpoint holding
 * {"model": ..., "optimizer": ...}): when path names nothing, the longest
 * prefix before a ':' that exists is the file. A file whose name holds a
 * ':' is still opened as named.
 */
static int split_key(const char *path, char *file, size_t flen, char *key, size_t klen,
		     struct stat *st)
{
	for (size_t n = strlen(path); n-- > 1;) {
		if (path[n] != ':' || n >= flen || !path[n + 1] || strlen(path + n + 1) >= klen)
			continue;
		memcpy(file, path, n);
		file[n] = '\0';
		if (stat(file, st) == 0) {
			strcpy(key, path + n + 1);
			return 0;
		}
	}
	return -1;
}

int ckpt_open(const char *path, struct ckpt **out, struct sw_err *err)
{
	struct sw_tensor_info *info = NULL;
	char file[PATH_MAX];
	struct ckpt *ck;
	struct stat st;
	size_t n = 0;
	int rc, fd;

	*out = NULL;
	ck = calloc(1, sizeof *ck);
	if (!ck)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	attrmap_init(&ck->attrs);
	ck->meta.train_loss = ck->meta.val_loss = NAN;
	if (stat(path, &st) == 0) {
		snprintf(file, sizeof file, "%s", path);
	} else {
		int e = errno;
		if (split_key(path, file, sizeof file, ck->meta.key, sizeof ck->meta.key, &st) < 0) {
			rc = sw_fail(err, sw_errno_status(e), "%s", strerror(e));
			goto fail;
		}
	}
	if (strlen(path) >= sizeof ck->path) {
		rc = sw_fail(err, SW_ENOINPUT, "path too long");
		goto fail;
	}
	if (S_ISDIR(st.st_mode)) {
		rc = resolve_directory(file, ck->path, sizeof ck->path, err);
		if (rc)
			goto fail;
	} else {
		strcpy(ck->path, file);
	}
	/* O_NONBLOCK: a FIFO put there since the stat must not block the
	 * open; it is refused by the fstat (regular files ignore the flag) */
	fd = open(ck->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		rc = sw_fail(err, sw_errno_status(errno), "%s", strerror(errno));
		goto fail;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		/* never read a FIFO or a device: reading it could block forever */
		close(fd);
		rc = sw_fail(err, SW_ENOINPUT, "not a regular file");
		goto fail;
	}
	if (st.st_size == 0) {
		close(fd);
		rc = sw_fail(err, SW_EDATA, "empty file");
		goto fail;
	}
	if ((rc = which_format(fd, (uint64_t)st.st_size, &ck->fmt, err))) {
		close(fd);
		goto fail;
	}
	if (ck->fmt->reads_index && hfdir_sniff_index(fd, (uint64_t)st.st_size))
		index_format(ck->path, fd, (uint64_t)st.st_size, &ck->fmt);
	if (ck->meta.key[0] && !ck->fmt->reads_key) {
		close(fd);
		rc = sw_fail(err, SW_EDATA, "is %s: it holds no dict for ':%s' to name (FILE:KEY is "
			     "for PyTorch files)", ck->fmt->name, ck->meta.key);
		goto fail;
	}
	rc = ck->fmt->open(ck->path, fd, (uint64_t)st.st_size, &ck->reader, &ck->meta, &info, &n, err);
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
	if (ck->fmt && ck->reader)
		ck->fmt->close(ck->reader);
	attrmap_free(&ck->attrs);
	ckptsrc_scratch_free(&ck->scratch);
	free(ck->info);
	free(ck->src);
	free(ck->transposed);
	free(ck);
}

const struct ckpt_meta *ckpt_meta(const struct ckpt *ck) { return &ck->meta; }
const char *ckpt_path(const struct ckpt *ck) { return ck->path; }
size_t ckpt_count(const struct ckpt *ck) { return ck->n; }
const char *ckpt_format_name(const struct ckpt *ck) { return ck->fmt->name; }
const struct sw_tensor_info *ckpt_info(const struct ckpt *ck, size_t i) { return &ck->info[i]; }

long ckpt_find_role(const struct ckpt *ck, const char *role, int layer)
{
	for (size_t i = 0; i < ck->n; i++)
		if (ck->info[i].layer == layer && strcmp(ck->info[i].role, role) == 0)
			return (long)i;
	return -1;
}

/* Tensor i, stored [in, out]: read as stored (float32), then copied to
 * [out, in]; the peak is the stored tensor and its copy. */
static int load_transposed(struct ckpt *ck, size_t i, struct ckpt_view *v, struct sw_err *err)
{
	struct sw_tensor_info stored = ck->info[i];
	int64_t out = stored.shape[0], in = stored.shape[1];
	float *t;
	int rc;

	stored.shape[0] = in;
	stored.shape[1] = out;
	v->raw_ok = 0;
	rc = ck->fmt->load(ck->reader, ck->src[i], &stored, &ck->scratch, v, err);
	if (rc) {
		ckptsrc_release(v);
		return rc;
	}
	if (!(t = malloc((size_t)(out * in) * sizeof *t))) {
		ckptsrc_release(v);
		return sw_fail(err, SW_ESOFTWARE, "%s: out of memory", stored.name);
	}
	for (int64_t a = 0; a < in; a++)
		for (int64_t b = 0; b < out; b++)
			t[b * in + a] = v->data[a * out + b];
	/* the stored view's mapping is given back here: whether the file
	 * shrank while it was read is asked of it before (ckptsrc_check) */
	if ((rc = ckptsrc_check(v, err))) {
		free(t);
		ckptsrc_release(v);
		sw_err_prefix(err, "%s", stored.name);
		return rc;
	}
	ckptsrc_release(v);
	v->numel = out * in;
	v->data = v->raw = v->owned = t;
	v->raw_dtype = SW_DTYPE_F32;
	return SW_OK;
}

static int load(struct ckpt *ck, size_t i, int raw_ok, struct ckpt_view *v, struct sw_err *err)
{
	int rc;

	memset(v, 0, sizeof *v);
	v->raw_ok = raw_ok;
	if (i >= ck->n)
		return sw_fail(err, SW_ESOFTWARE, "tensor index %zu out of range", i);
	if (ck->info[i].dtype == SW_DTYPE_UNSUPPORTED)
		return sw_fail(err, SW_EDATA, "%s: dtype %s cannot be read as float32",
			       ck->info[i].name, ck->info[i].dtype_name);
	v->numel = ck->info[i].numel;
	if (ck->transposed[i])
		return load_transposed(ck, i, v, err);
	rc = ck->fmt->load(ck->reader, ck->src[i], &ck->info[i], &ck->scratch, v, err);
	if (rc) {
		ckptsrc_release(v);
		return rc;
	}
	if (!v->raw) {
		v->raw = v->data;
		v->raw_dtype = SW_DTYPE_F32;
	}
	return SW_OK;
}

int ckpt_load(struct ckpt *ck, size_t i, struct ckpt_view *v, struct sw_err *err)
{
	return load(ck, i, 0, v, err);
}

int ckpt_load_raw(struct ckpt *ck, size_t i, struct ckpt_view *v, struct sw_err *err)
{
	return load(ck, i, 1, v, err);
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

	if (!ck->attrs_out) {
		/* the tensors in model order: their keys as an export lists them */
		attrmap_free(&ck->attrs);
		attrmap_init(&ck->attrs);
		if ((rc = ck->fmt->attrs(ck->reader, ck->info, ck->n, &ck->attrs, &ck->attrs_out, err))) {
			ck->attrs_out = NULL;
			return rc;
		}
	}
	*out = ck->attrs_out;
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
	return ck->fmt->has_aux && i < ck->n && ck->fmt->has_aux(ck->reader, group, ck->info[i].name);
}

int ckpt_load_aux(const struct ckpt *ck, const char *group, size_t i, float *out,
		  struct sw_err *err)
{
	if (!ck->fmt->load_aux || i >= ck->n)
		return sw_fail(err, SW_EDATA, "no /%s for %s", group, i < ck->n ? ck->info[i].name : "?");
	return ck->fmt->load_aux(ck->reader, group, &ck->info[i], out, err);
}

int64_t ckpt_aux_attr(const struct ckpt *ck, const char *group, size_t i, const char *attr)
{
	if (!ck->fmt->aux_attr || i >= ck->n)
		return -1;
	return ck->fmt->aux_attr(ck->reader, group, ck->info[i].name, attr);
}
