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
#include "llmcgpt2.h"
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
	&llmc_gpt2_format,
	&l2c_format,
	&l2c_misfit_format,
	&stsrc_format,
};
#define NFORMATS (sizeof formats / sizeof formats[0])

/*
 * How a tensor the tools see is stored: the reader's tensor src, as it
 * is (reshaped 0), or read whole as float32 and of it the rows a part
 * takes (family.h's family_part: groups runs of len rows, run g from row
 * first + g stride), rows of [out, in] where the stored tensor is
 * [in, out] (transposed). A tensor transposed whole is one run of all
 * its rows. rank, shape and the first name_len bytes of the name are the
 * stored tensor's, what its reader loads.
 */
struct ckpt_store {
	size_t src;
	unsigned char reshaped, transposed;
	unsigned char rank;             /* 1..3 where reshaped */
	unsigned short name_len;
	int64_t shape[3];
	int64_t first, len, stride, groups;
};

struct ckpt {
	char path[PATH_MAX];            /* the file opened (a directory resolved) */
	struct ckpt_meta meta;
	size_t n;
	struct sw_tensor_info *info;    /* (n) in model order */
	struct ckpt_store *store;       /* (n) how each is stored */
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

/*
 * The tensors the tools see, from the reader's n (file order): each as
 * stored, or, where its family stores it otherwise, turned to [out, in]
 * (family_tensor_layout) and split into its parts (family_tensor_parts),
 * each part a tensor of its own in place of the whole. *vis: info itself
 * when nothing splits (no second copy), else a new array of *nvis (info
 * freed).
 */
static int expand_tensors(struct ckpt *ck, struct sw_tensor_info *info, size_t n,
			  struct sw_tensor_info **vis, size_t *nvis, struct sw_err *err)
{
	const struct sw_config *c = &ck->meta.config;
	size_t *parts = malloc((n ? n : 1) * sizeof *parts), total = 0, at = 0;
	unsigned char *turned = calloc(n ? n : 1, 1);
	struct sw_tensor_info *out = info;
	int rc = SW_OK, split = 0;

	if (!parts || !turned) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	for (size_t j = 0; j < n; j++) {
		if (info[j].rank == 2 && family_tensor_layout(c, ck->meta.source, info[j].name) ==
		    FAMILY_TRANSPOSED) {
			int64_t r = info[j].shape[0];
			info[j].shape[0] = info[j].shape[1];
			info[j].shape[1] = r;
			turned[j] = 1;
		}
		if ((rc = family_tensor_parts(c, &info[j], &parts[j], err)))
			goto out;
		/* room for ":" and an expert's number */
		if (parts[j] && strlen(info[j].name) + 12 >= SW_NAME_MAX) {
			rc = sw_fail(err, SW_EDATA, "%s: name too long to name its parts", info[j].name);
			goto out;
		}
		total += parts[j] ? parts[j] : 1;
		split |= parts[j] > 0;
	}
	/* a part is made from its whole: never in place (a stack of one
	 * expert is one part) */
	if ((split && !(out = malloc(total * sizeof *out))) ||
	    !(ck->store = calloc(total ? total : 1, sizeof *ck->store))) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	for (size_t j = 0; j < n; j++) {
		const struct sw_tensor_info *t = &info[j];

		for (size_t p = 0; p < (parts[j] ? parts[j] : 1); p++, at++) {
			struct ckpt_store *st = &ck->store[at];
			struct sw_tensor_info *v = &out[at];
			struct family_part fp;

			st->src = j;
			if (out != info)
				*v = *t;
			if (!parts[j] && !turned[j])
				continue;
			st->reshaped = 1;
			st->transposed = turned[j];
			st->rank = (unsigned char)t->rank;
			st->name_len = (unsigned short)strlen(t->name);
			for (int k = 0; k < t->rank && k < 3; k++)
				st->shape[k] = t->shape[k];
			if (turned[j]) {        /* stored [in, out], as its reader has it */
				st->shape[0] = t->shape[1];
				st->shape[1] = t->shape[0];
			}
			if (!parts[j]) {        /* turned whole: one run of all its rows */
				st->len = t->shape[0];
				st->groups = 1;
				continue;
			}
			family_tensor_part(c, t, p, &fp);
			st->first = fp.first;
			st->len = fp.len;
			st->stride = fp.stride;
			st->groups = fp.groups;
			arch_info_for_role(c, fp.role, fp.layer, v);
			if (fp.suffix)
				snprintf(v->name, sizeof v->name, "%s:%s", t->name, fp.suffix);
			else
				snprintf(v->name, sizeof v->name, "%s:%d", t->name, fp.expert);
			if (fp.expert >= 0)
				v->expert = fp.expert;
			/* a vector's part is a vector; a matrix's or a stack's, a matrix */
			memset(v->shape, 0, sizeof v->shape);
			v->rank = t->rank == 1 ? 1 : 2;
			v->shape[0] = fp.len * fp.groups;
			if (t->rank > 1)
				v->shape[1] = t->shape[t->rank - 1];
			v->numel = v->shape[0] * (t->rank > 1 ? v->shape[1] : 1);
			v->kind = sw_kind_of_shape(v->rank, v->shape);
		}
	}
	if (out != info)
		free(info);
	*vis = out;
	*nvis = total;
out:
	if (rc && out != info)
		free(out);
	free(parts);
	free(turned);
	return rc;
}

static int take_tensors(struct ckpt *ck, struct sw_tensor_info *info, size_t n, struct sw_err *err)
{
	struct keyed *order;
	unsigned char *done;
	size_t *from;
	int rc;

	if ((rc = expand_tensors(ck, info, n, &info, &n, err)))
		return rc;      /* the reader's info is freed by ckpt_open */
	ck->info = info;
	ck->n = n;
	order = malloc((n ? n : 1) * sizeof *order);
	done = calloc(n ? n : 1, 1);
	from = malloc((n ? n : 1) * sizeof *from);
	if (!order || !done || !from) {
		free(order);
		free(done);
		free(from);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		arch_model_order_key(&info[i], &order[i].key);
		order[i].t = &info[i];
	}
	if (n > 1)
		qsort(order, n, sizeof *order, keyed_cmp);
	for (size_t i = 0; i < n; i++)
		from[i] = (size_t)(order[i].t - info);
	free(order);
	/* position i takes the tensor at from[i] (its info and how it is
	 * stored): follow each cycle once */
	for (size_t i = 0; i < n; i++) {
		struct sw_tensor_info tmp;
		struct ckpt_store stmp;
		size_t j = i;

		if (done[i])
			continue;
		tmp = info[i];
		stmp = ck->store[i];
		for (;;) {
			size_t k = from[j];
			done[j] = 1;
			if (k == i) {
				info[j] = tmp;
				ck->store[j] = stmp;
				break;
			}
			info[j] = info[k];
			ck->store[j] = ck->store[k];
			j = k;
		}
	}
	free(done);
	free(from);
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
	free(ck->store);
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

long ckpt_find_expert(const struct ckpt *ck, const char *role, int layer, int expert)
{
	for (size_t i = 0; i < ck->n; i++)
		if (ck->info[i].layer == layer && ck->info[i].expert == expert &&
		    strcmp(ck->info[i].role, role) == 0)
			return (long)i;
	return -1;
}

/* B x B tiles: a tile of the source's columns and of its rows fit in
 * the cache together (32 x 32 floats: 4 KiB), so the transpose reads
 * and writes each cache line once rather than once per element */
#define TILE 32

/* dst[k, a] = src[a, r0 + k] for k < len, a < cols: rows r0..r0+len of
 * the transpose of src [cols, rows], tile by tile. */
static void transpose_rows(const float *src, int64_t rows, int64_t cols, int64_t r0, int64_t len,
			   float *dst)
{
	for (int64_t a0 = 0; a0 < cols; a0 += TILE)
		for (int64_t k0 = 0; k0 < len; k0 += TILE) {
			int64_t a1 = a0 + TILE < cols ? a0 + TILE : cols;
			int64_t k1 = k0 + TILE < len ? k0 + TILE : len;
			for (int64_t a = a0; a < a1; a++) {
				const float *s = src + a * rows + r0;
				for (int64_t k = k0; k < k1; k++)
					dst[k * cols + a] = s[k];
			}
		}
}

/*
 * Tensor i, stored otherwise (ck->store[i]): the stored tensor read
 * whole as float32, then its rows the tensor takes copied out (turned
 * from [in, out] where stored so); the peak is the stored tensor and the
 * copy.
 */
static int load_rows(struct ckpt *ck, size_t i, struct ckpt_view *v, struct sw_err *err)
{
	const struct ckpt_store *st = &ck->store[i];
	struct sw_tensor_info stored = ck->info[i];
	int64_t rows, cols, k = 0;
	size_t bytes;
	float *t;
	int rc;

	stored.name[st->name_len] = '\0';
	stored.rank = st->rank;
	memset(stored.shape, 0, sizeof stored.shape);
	memcpy(stored.shape, st->shape, sizeof st->shape);
	if (sw_shape_numel(stored.rank, stored.shape, &stored.numel) < 0)
		return sw_fail(err, SW_ESOFTWARE, "%s: stored shape out of range", stored.name);
	/* the stored tensor as rows of cols values, as the tools see it */
	cols = st->transposed ? stored.shape[0] : stored.rank > 1 ? stored.shape[stored.rank - 1] : 1;
	rows = cols ? stored.numel / cols : 0;
	v->raw_ok = 0;
	rc = ck->fmt->load(ck->reader, st->src, &stored, &ck->scratch, v, err);
	if (rc) {
		ckptsrc_release(v);
		return rc;
	}
	bytes = (size_t)(st->len * st->groups * cols) * sizeof *t;
	if (!(t = malloc(bytes ? bytes : 1))) {
		ckptsrc_release(v);
		return sw_fail(err, SW_ESOFTWARE, "%s: out of memory", stored.name);
	}
	for (int64_t g = 0; g < st->groups; g++, k += st->len) {
		int64_t r0 = st->first + g * st->stride;
		if (st->transposed)
			transpose_rows(v->data, rows, cols, r0, st->len, t + k * cols);
		else
			memcpy(t + k * cols, v->data + r0 * cols, (size_t)(st->len * cols) * sizeof *t);
	}
	/* the stored view's mapping is given back here: whether the file
	 * shrank while it was read is asked of it before (ckptsrc_check) */
	if ((rc = ckptsrc_check(v, err))) {
		free(t);
		ckptsrc_release(v);
		sw_err_prefix(err, "%s", stored.name);
		return rc;
	}
	ckptsrc_release(v);
	v->numel = ck->info[i].numel;
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
	if (ck->store[i].reshaped)
		return load_rows(ck, i, v, err);
	rc = ck->fmt->load(ck->reader, ck->store[i].src, &ck->info[i], &ck->scratch, v, err);
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

int ckpt_load_aux_n(const struct ckpt *ck, const char *group, size_t i, int64_t n, float *out,
		    struct sw_err *err)
{
	struct sw_tensor_info t;

	if (!ck->fmt->load_aux || i >= ck->n)
		return sw_fail(err, SW_EDATA, "no /%s for %s", group, i < ck->n ? ck->info[i].name : "?");
	t = ck->info[i];
	t.rank = 1;
	t.shape[0] = t.numel = n;
	return ck->fmt->load_aux(ck->reader, group, &t, out, err);
}

int64_t ckpt_aux_attr(const struct ckpt *ck, const char *group, size_t i, const char *attr)
{
	if (!ck->fmt->aux_attr || i >= ck->n)
		return -1;
	return ck->fmt->aux_attr(ck->reader, group, ck->info[i].name, attr);
}
