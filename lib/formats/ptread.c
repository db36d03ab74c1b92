/*
 * ptread.c - the PyTorch checkpoint reader, a back end of ckpt.c (see
 * ptread.h).
 */
#include "ptread.h"
#include "attrmap.h"
#include "../base/dtype.h"
#include "../base/family.h"
#include "../base/grow.h"
#include "hfdir.h"
#include "metallama.h"
#include "nanogpt.h"
#include "pickle.h"
#include "ptzip.h"
#include "ropeperm.h"
#include "safetensors.h"

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PKL_MAX (64u << 20)     /* data.pkl: a state dict of 10^5 tensors takes 15 MB */
#define PKL_MAX_RATIO 50        /* a deflated pickle of tensor names compresses ~5-10x */
#define WALK_DEPTH 32

struct pt_file {
	char path[PATH_MAX];
	int fd;
	uint64_t size;
};

/* One tensor's data in one file: a view of a storage. */
struct pt_piece {
	int file;
	uint64_t data;          /* absolute offset of the storage's element 0 */
	enum sw_dtype dtype;
	char dtype_name[16];
	int esize;
	int64_t offset;         /* the view's first element */
	int rank;
	int64_t shape[SW_MAX_RANK], stride[SW_MAX_RANK];
	int64_t numel;
	uint64_t bytes;         /* the storage's record: its length, */
	uint32_t crc;           /* its CRC-32 (0: not computed), */
	char record[96];        /* its name, "data/KEY" */
};

struct pt_tensor {
	size_t first;           /* its pieces: pieces[first .. first + npieces) */
	int npieces;
	int cat_dim;            /* the pieces are concatenated along it; -1: the first alone */
	int head_dim;           /* > 0: Meta's q or k, rows permuted per head */
};

struct ptsrc {
	struct pt_file *files;
	int nfiles;
	struct pt_piece *pieces;
	size_t npieces;
	struct pt_tensor *t;    /* (n) in the order of info */
	size_t n;
	size_t files_cap, pieces_cap, t_cap, info_cap;  /* of those arrays, and of info */
	struct attr_map attrs;
};

/* A tensor found in one file's pickle. */
struct named {
	char name[SW_NAME_MAX];
	struct pt_piece p;
	const struct pk_storage *storage;       /* while the pickle is kept */
};

struct named_list {
	struct named *v;
	size_t n, cap;
};

static int named_cmp(const void *a, const void *b)
{
	return strcmp(((const struct named *)a)->name, ((const struct named *)b)->name);
}

/* ---- paths ----------------------------------------------------------- */

static void dir_of(const char *path, char *dir, size_t len)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(dir, len, ".");
	else if (slash == path)
		snprintf(dir, len, "/");
	else
		snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

/* ---- the pickle's tensors --------------------------------------------- */

/* The dict the tensors are in: KEY's path of keys, or the default. */
static int choose_dict(const struct pk_value *root, const char *key, const struct pk_value **out,
		       struct sw_err *err)
{
	const struct pk_value *d = root, *sd, *model;
	char part[SW_NAME_MAX];

	if (root->type != PK_DICT)
		return sw_fail(err, SW_EDATA, "the pickle holds a %s, not a dict of tensors",
			       root->type == PK_TENSOR ? "single tensor" :
			       root->type == PK_LIST ? "list" : "value of another kind");
	if (key[0]) {
		for (const char *p = key; *p;) {
			const char *dot = strchr(p, '.');
			size_t n = dot ? (size_t)(dot - p) : strlen(p);
			if (!n || (dot && !dot[1]))
				return sw_fail(err, SW_EDATA, "key '%s': an empty part (a dot at its start "
					       "or end, or two in a row)", key);
			snprintf(part, sizeof part, "%.*s", (int)n, p);
			if (!(d = pk_dict_get(d, part)))
				return sw_fail(err, SW_EDATA, "key '%s': no '%s' in the pickle's dict", key, part);
			if (d->type != PK_DICT)
				return sw_fail(err, SW_EDATA, "key '%s': '%s' is not a dict", key, part);
			p += n + (dot ? 1 : 0);
		}
		*out = d;
		return SW_OK;
	}
	sd = pk_dict_get(root, "state_dict");
	model = pk_dict_get(root, "model");
	sd = sd && sd->type == PK_DICT ? sd : NULL;
	model = model && model->type == PK_DICT ? model : NULL;
	if (sd && model)
		return sw_fail(err, SW_EDATA, "holds both a 'model' and a 'state_dict' dict: name one "
			       "as FILE:model or FILE:state_dict");
	*out = sd ? sd : model ? model : root;
	return SW_OK;
}

static int add_named(struct named_list *l, const char *name, const struct pk_tensor *t,
		     struct sw_err *err)
{
	const struct pk_storage *s = t->storage;
	struct named *x;
	int rc;

	/* a model under torch.compile names its tensors inside the
	 * compiled wrapper: the names are the model's */
	if (!strncmp(name, NANOGPT_COMPILED_PREFIX, strlen(NANOGPT_COMPILED_PREFIX)))
		name += strlen(NANOGPT_COMPILED_PREFIX);
	if ((rc = st_name_check(name, err)))
		return rc;
	if (SW_GROW(l->v, &l->cap, l->n + 1) < 0)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	x = &l->v[l->n++];
	memset(x, 0, sizeof *x);
	snprintf(x->name, sizeof x->name, "%s", name);
	x->storage = s;
	x->p.dtype = s->dtype;
	snprintf(x->p.dtype_name, sizeof x->p.dtype_name, "%s", s->dtype_name);
	x->p.esize = s->elem_size;
	x->p.offset = t->offset;
	x->p.rank = t->rank;
	memcpy(x->p.shape, t->shape, sizeof x->p.shape);
	memcpy(x->p.stride, t->stride, sizeof x->p.stride);
	x->p.numel = t->numel;
	return SW_OK;
}

/* The tensors of dict d (and of the dicts in it), named prefix + key. */
static int walk(struct named_list *l, const struct pk_value *d, const char *prefix, int depth,
		struct sw_err *err)
{
	char name[SW_NAME_MAX];
	int rc;

	if (depth > WALK_DEPTH)
		return sw_fail(err, SW_EDATA, "dicts nested deeper than %d", WALK_DEPTH);
	if (d->walked)
		return sw_fail(err, SW_EDATA, "%s: a dict reached twice (a cycle, or one dict under "
			       "two names)", prefix[0] ? prefix : "the top dict");
	((struct pk_value *)d)->walked = 1;     /* the arena's, ours to mark */
	for (size_t i = 0; i + 1 < d->u.seq.n; i += 2) {
		const struct pk_value *k = d->u.seq.v[i], *v = d->u.seq.v[i + 1];
		if (k->type != PK_STR || (v->type != PK_TENSOR && v->type != PK_DICT))
			continue;       /* an optimizer's step, a config string: not a tensor */
		if (strlen(k->u.str.s) != k->u.str.len)
			return sw_fail(err, SW_EDATA, "a key holding a NUL byte");
		if (snprintf(name, sizeof name, "%s%s%s", prefix, k->u.str.s,
			     v->type == PK_DICT ? "." : "") >= (int)sizeof name)
			return sw_fail(err, SW_EDATA, "a tensor name of more than %d bytes", SW_NAME_MAX - 1);
		rc = v->type == PK_DICT ? walk(l, v, name, depth + 1, err)
					: add_named(l, name, v->u.tensor, err);
		if (rc)
			return rc;
	}
	return SW_OK;
}

static int is_legacy(int fd, uint64_t size)
{
	/* PROTO, then the magic number 0x1950a86a20f9469cfc6c as LONG1 */
	static const unsigned char magic[12] = {0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20,
						0x6a, 0xa8, 0x50, 0x19};
	unsigned char b[14];

	return size >= 14 && pread(fd, b, 14, 0) == 14 && b[0] == 0x80 && !memcmp(b + 2, magic, 12);
}

/*
 * Where a tensor's storage is: the record data/KEY of the archive,
 * stored, holding exactly numel x element size bytes (pickle.c checked
 * the view inside numel).
 */
static int locate(const struct ptzip *z, struct named *v, int file, struct sw_err *err)
{
	const struct pk_storage *s = v->storage;
	const struct ptzip_entry *e;
	char rec[96];

	snprintf(rec, sizeof rec, "data/%s", s->key);
	if (!(e = ptzip_find(z, rec)))
		return sw_fail(err, SW_EDATA, "%s: its storage %s/%s is not in the archive", v->name,
			       z->top, rec);
	if (e->method != 0)
		return sw_fail(err, SW_EDATA, "%s/%s is compressed: torch.save stores storages "
			       "uncompressed", z->top, rec);
	if (e->size != (uint64_t)s->numel * (uint64_t)s->elem_size)
		return sw_fail(err, SW_EDATA, "%s: storage %s/%s holds %llu bytes, not the %lld x %d "
			       "its persistent id says", v->name, z->top, rec,
			       (unsigned long long)e->size, (long long)s->numel, s->elem_size);
	v->p.file = file;
	v->p.data = e->offset;
	v->p.bytes = e->size;
	v->p.crc = e->crc;
	snprintf(v->p.record, sizeof v->p.record, "%s", rec);
	v->storage = NULL;
	return SW_OK;
}

/* The tensors of file k's pickle, sorted by name; a name twice refused.
 * With ng, what the pickle says of a nanoGPT checkpoint too. */
static int read_file(struct ptsrc *s, int k, const char *key, struct named_list *out,
		     struct nanogpt *ng, struct sw_err *err)
{
	struct pt_file *f = &s->files[k];
	struct pk_result pk = {0};
	const struct ptzip_entry *e;
	const struct pk_value *d = NULL;
	struct ptzip z;
	char *pkl = NULL;
	size_t len;
	int rc;

	memset(out, 0, sizeof *out);
	if (is_legacy(f->fd, f->size))
		return sw_fail(err, SW_EDATA, "a legacy PyTorch file (torch < 1.6: a bare pickle, "
			       "not a zip archive): not read; torch.save it again with torch >= 1.6");
	if ((rc = ptzip_open(f->fd, NULL, f->size, &z, err)))
		return rc;
	if (!(e = ptzip_find(&z, "data.pkl")))
		rc = sw_fail(err, SW_EDATA, "a zip archive without %s/data.pkl: not a PyTorch checkpoint",
			     z.top);
	/* torch stores its pickle; one that inflates more than a pickle can
	 * compress is a deflate bomb, refused before it is inflated */
	if (!rc && e->method != 0 && e->size / PKL_MAX_RATIO > e->csize)
		rc = sw_fail(err, SW_EDATA, "%s/data.pkl inflates %llu bytes to %llu, more than %d "
			     "times: refused as a deflate bomb (torch stores its pickle uncompressed)",
			     z.top, (unsigned long long)e->csize, (unsigned long long)e->size,
			     PKL_MAX_RATIO);
	if (!rc && !(rc = ptzip_read(&z, e, PKL_MAX, &pkl, &len, err)) &&
	    !(rc = pk_load(pkl, len, z.n, &pk, err)) && !(rc = choose_dict(pk.root, key, &d, err)) &&
	    !(rc = ng ? nanogpt_read(pk.root, ng, err) : SW_OK))
		rc = walk(out, d, "", 0, err);
	for (size_t i = 0; i < out->n && !rc; i++)
		rc = locate(&z, &out->v[i], k, err);
	if (!rc && !out->n)
		rc = sw_fail(err, SW_EDATA, "no tensors in its state dict");
	if (!rc) {
		qsort(out->v, out->n, sizeof *out->v, named_cmp);
		for (size_t i = 1; i < out->n && !rc; i++)
			if (!strcmp(out->v[i - 1].name, out->v[i].name))
				rc = sw_fail(err, SW_EDATA, "two tensors named %s: refused as ambiguous",
					     out->v[i].name);
	}
	pk_free(&pk);
	free(pkl);
	ptzip_close(&z);
	if (rc) {
		free(out->v);
		memset(out, 0, sizeof *out);
	}
	return rc;
}

/* ---- building the checkpoint ------------------------------------------ */

static int add_file(struct ptsrc *s, const char *path, int fd, uint64_t size, struct sw_err *err)
{
	struct pt_file *f;

	if (SW_GROW(s->files, &s->files_cap, (size_t)s->nfiles + 1) < 0) {
		if (fd >= 0)
			close(fd);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	f = &s->files[s->nfiles++];
	f->fd = fd;
	if (strlen(path) >= sizeof f->path) {
		f->fd = -1;
		if (fd >= 0)
			close(fd);
		return sw_fail(err, SW_ENOINPUT, "path too long");
	}
	strcpy(f->path, path);
	f->size = size;
	if (fd < 0)
		return hfdir_open_regular(path, &f->fd, &f->size, err);
	return SW_OK;
}

/* Room for n more tensors (in info and s->t) and m more pieces. */
static int grow(struct ptsrc *s, struct sw_tensor_info **info, size_t n, size_t m,
		struct sw_err *err)
{
	if (sw_grow(info, &s->info_cap, s->n + n + 1, sizeof **info) < 0 ||
	    SW_GROW(s->t, &s->t_cap, s->n + n + 1) < 0 ||
	    SW_GROW(s->pieces, &s->pieces_cap, s->npieces + m + 1) < 0)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	return SW_OK;
}

static void info_shape(struct sw_tensor_info *t, const struct pt_piece *p)
{
	t->dtype = p->dtype;
	snprintf(t->dtype_name, sizeof t->dtype_name, "%s", p->dtype_name);
	t->rank = p->rank;
	memcpy(t->shape, p->shape, sizeof t->shape);
	t->numel = p->numel;
	t->kind = sw_kind_of_shape(t->rank, t->shape);
	t->lr = t->wd = NAN;
	t->wd_mode = SW_WD_UNKNOWN;
}

/* One file's tensors with Hugging Face names: one piece each. */
static int add_hf(struct ptsrc *s, const struct sw_config *c, enum family_source src,
		  struct named_list *l, struct sw_tensor_info **info, struct sw_err *err)
{
	int rc;

	if ((rc = grow(s, info, l->n, l->n, err)))
		return rc;
	for (size_t i = 0; i < l->n; i++) {
		struct sw_tensor_info *t = &(*info)[s->n];
		memset(t, 0, sizeof *t);
		if (family_tensor_info(c, l->v[i].name, t) < 0)
			return sw_fail(err, SW_EDATA, "%s: layer number outside 0..%lld", l->v[i].name,
				       (long long)c->n_layers - 1);
		info_shape(t, &l->v[i].p);
		if ((rc = family_check_shape(c, src, t, err)))
			return rc;
		s->pieces[s->npieces] = l->v[i].p;
		s->t[s->n] = (struct pt_tensor){s->npieces, 1, -1, 0};
		s->npieces++;
		s->n++;
	}
	return SW_OK;
}

/* pytorch_model.bin.index.json and its shards, by the rules of every
 * index (hfdir.h): each listed tensor in its shard, each shard's tensors
 * listed for it. */
static int open_index(struct ptsrc *s, const char *index, const char *dir, const char *key,
		      const struct sw_config *c, struct sw_tensor_info **info, struct sw_err *err)
{
	struct hfdir_index ix;
	char path[PATH_MAX + ST_SHARD_NAME_MAX];
	size_t found = 0;
	int rc;

	if ((rc = hfdir_index_open(index, &ix, err)))
		return rc;
	for (size_t i = 0; i < ix.nshards && !rc; i++) {
		const char *shard = ix.shard[i];
		struct named_list l;
		/* fits: dir is shorter than PATH_MAX, a shard's name than
		 * ST_SHARD_NAME_MAX; add_file refuses what is too long */
		(void)hfdir_shard_path(path, sizeof path, dir, shard);
		if ((rc = hfdir_check_link(path, dir, index, err)) ||
		    (rc = add_file(s, path, -1, 0, err))) {
			break;
		}
		if ((rc = read_file(s, s->nfiles - 1, key, &l, NULL, err))) {
			if (!strstr(err->msg, path))
				sw_err_prefix(err, "%s", path);
			break;
		}
		for (size_t j = 0; j < l.n && !rc; j++)
			rc = hfdir_index_holds(&ix, shard, path, l.v[j].name, NULL, err);
		found += l.n;
		if (!rc)
			rc = add_hf(s, c, FAMILY_FROM_HF, &l, info, err);
		free(l.v);
	}
	if (!rc && found != ix.idx.n)
		rc = sw_fail(err, SW_EDATA, "the index lists %zu tensors, its shards hold %zu", ix.idx.n,
			     found);
	hfdir_index_free(&ix);
	return rc;
}

/* ---- Meta's layout ---------------------------------------------------- */

static int pth_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The model-parallel shards: every *.pth file of dir, sorted by name, as
 * Meta's llama code globs them; the file opened (mine) must be one, and
 * none a symlink leading out of dir (hfdir.h).
 */
static int list_pth(struct ptsrc *s, const char *dir, const char *file, const struct stat *mine,
		    struct sw_err *err)
{
	struct stat st;
	struct dirent *de;
	char **names = NULL, path[PATH_MAX + 256];
	size_t n = 0, cap = 0;
	int rc = SW_OK, have = 0;
	DIR *d;

	if (!(d = opendir(dir)))
		return sw_fail(err, SW_ENOINPUT, "%s: cannot list the directory", dir);
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (de->d_name[0] == '.' || l < 5 || strcmp(de->d_name + l - 4, ".pth"))
			continue;
		if (SW_GROW(names, &cap, n + 1) < 0 || !(names[n] = strdup(de->d_name))) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			break;
		}
		n++;
	}
	closedir(d);
	if (!rc && n > 1)
		qsort(names, n, sizeof *names, pth_cmp);
	for (size_t i = 0; i < n && !rc; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		/* a slice is data of this checkpoint: a symlink must not lead out */
		if ((rc = hfdir_check_link(path, dir, file, err)) ||
		    (rc = add_file(s, path, -1, 0, err)))
			break;
		if (fstat(s->files[s->nfiles - 1].fd, &st) == 0 && st.st_dev == mine->st_dev &&
		    st.st_ino == mine->st_ino)
			have = 1;
	}
	if (!rc && !have)
		rc = sw_fail(err, SW_EDATA, "holds Meta's names, but is not one of the *.pth files of "
			     "its directory, which Meta's loader reads as one model");
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

/* The attributes saying where a tensor came from. */
static int meta_attrs(struct ptsrc *s, const char *hf, const char *meta, int permuted,
		      struct sw_err *err)
{
	char key[SW_NAME_MAX + 64];
	int rc;

	snprintf(key, sizeof key, ATTRMAP_PREFIX "params.%s.source_name", hf);
	if ((rc = attrmap_set(&s->attrs, key, meta, err)) || !permuted)
		return rc;
	snprintf(key, sizeof key, ATTRMAP_PREFIX "params.%s.rope_permuted", hf);
	return attrmap_set(&s->attrs, key, "interleaved to rotate-half", err);
}

/*
 * The shape of the tensor the slices l[0..S)->v[i] make along dim (-1:
 * replicated, all equal): every other dimension equal, the dtypes too.
 */
static int combine(struct named_list *l, int S, size_t i, int dim, struct pt_piece *out,
		   struct sw_err *err)
{
	const struct pt_piece *a = &l[0].v[i].p;

	*out = *a;
	for (int k = 1; k < S; k++) {
		const struct pt_piece *b = &l[k].v[i].p;
		if (b->rank != a->rank || b->dtype != a->dtype || strcmp(b->dtype_name, a->dtype_name))
			return sw_fail(err, SW_EDATA, "%s: its slices differ in rank or dtype", l[0].v[i].name);
		for (int d = 0; d < a->rank; d++)
			if (d != dim && b->shape[d] != a->shape[d])
				return sw_fail(err, SW_EDATA, "%s: its slices' shapes do not fit together "
					       "along dimension %d", l[0].v[i].name, dim);
		if (dim >= 0 && __builtin_add_overflow(out->shape[dim], b->shape[dim], &out->shape[dim]))
			return sw_fail(err, SW_EDATA, "%s: too large", l[0].v[i].name);
	}
	if (dim >= a->rank)
		return sw_fail(err, SW_EDATA, "%s: rank %d, not a matrix", l[0].v[i].name, a->rank);
	if (sw_shape_numel(out->rank, out->shape, &out->numel) < 0)
		return sw_fail(err, SW_EDATA, "%s: too large", l[0].v[i].name);
	return SW_OK;
}

static int open_meta(struct ptsrc *s, const char *file, const char *dir, const struct stat *mine,
		     const char *key, struct sw_config *c, struct sw_tensor_info **info,
		     struct sw_err *err)
{
	char path[PATH_MAX + 16], *json, role[SW_ROLE_MAX];
	struct named_list *l = NULL;
	struct pt_piece *whole = NULL;  /* (n) each tensor's shape once joined */
	int *dims = NULL;               /* (n) the dimension its slices join along */
	int64_t vocab_said;
	size_t len, n;
	int rc, S, layer, first = s->nfiles;

	snprintf(path, sizeof path, "%s/params.json", dir);
	if (access(path, F_OK) < 0)
		return sw_fail(err, SW_ENOINPUT, "holds Meta's names but no params.json is beside it "
			       "(needed for the architecture)");
	if ((rc = hfdir_read_small(path, 1u << 20, &json, &len, err)))
		return rc;
	rc = meta_parse_params(json, len, c, &vocab_said, err);
	free(json);
	if (rc)
		return rc;
	if (strlen(file) > 4 && !strcmp(file + strlen(file) - 4, ".pth"))
		rc = list_pth(s, dir, file, mine, err);
	else
		rc = add_file(s, file, -1, 0, err);
	if (rc)
		return rc;
	S = s->nfiles - first;
	if (!(l = calloc((size_t)S, sizeof *l)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (int k = 0; k < S && !rc; k++)
		if ((rc = read_file(s, first + k, key, &l[k], NULL, err)) && !strstr(err->msg, s->files[first + k].path))
			sw_err_prefix(err, "%s", s->files[first + k].path);
	n = rc ? 0 : l[0].n;
	/* every slice holds the same names */
	for (int k = 1; k < S && !rc; k++) {
		if (l[k].n != n)
			rc = sw_fail(err, SW_EDATA, "%s and %s hold different tensors",
				     s->files[first].path, s->files[first + k].path);
		for (size_t i = 0; i < n && !rc; i++)
			if (strcmp(l[k].v[i].name, l[0].v[i].name))
				rc = sw_fail(err, SW_EDATA, "%s has %s, %s does not", s->files[first].path,
					     l[0].v[i].name, s->files[first + k].path);
	}
	if (!rc && (!(whole = calloc(n + 1, sizeof *whole)) || !(dims = calloc(n + 1, sizeof *dims))))
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
	/* first the whole shapes: the vocabulary and d_ff come from them */
	for (size_t i = 0; i < n && !rc; i++) {
		int known = meta_role(l[0].v[i].name, role, sizeof role, &layer), dim = -1;
		if (known == 0)
			continue;
		if (known < 0 && S > 1) {
			rc = sw_fail(err, SW_EDATA, "%s: not one of Meta's names, so how its %d slices "
				     "combine is unknown", l[0].v[i].name, S);
			break;
		}
		if (known > 0 && S > 1)
			dim = meta_split_dim(role, l[0].v[i].p.rank, l[0].v[i].p.shape, c->d_model);
		if ((rc = combine(l, S, i, dim, &whole[i], err)))
			break;
		dims[i] = dim;
		/* the vocabulary from the embedding's rows, d_ff from gate's */
		if (known > 0)
			arch_size_from_rows(c, role, whole[i].shape[0]);
	}
	if (!rc && vocab_said > 0 && vocab_said != c->vocab_size)
		rc = sw_fail(err, SW_EDATA, "params.json: vocab_size %lld disagrees with "
			     "tok_embeddings (%lld rows)", (long long)vocab_said, (long long)c->vocab_size);
	if (!rc && (rc = arch_config_check(c, err)))
		sw_err_prefix(err, "params.json");
	if (!rc)
		rc = grow(s, info, n, n * (size_t)S, err);
	for (size_t i = 0; i < n && !rc; i++) {
		struct sw_tensor_info *t = &(*info)[s->n];
		const char *mname = l[0].v[i].name;
		int known = meta_role(mname, role, sizeof role, &layer), dim = dims[i];
		int qk = known > 0 && arch_role_heads(role) == ARCH_HEADS_ROWS_ROPE;

		if (known == 0)
			continue;
		memset(t, 0, sizeof *t);
		if (known > 0 && (layer >= c->n_layers ||
				  arch_info_for_role(c, role, layer, t) < 0)) {
			rc = sw_fail(err, SW_EDATA, "%s: layer number outside 0..%lld", mname,
				     (long long)c->n_layers - 1);
			break;
		}
		if (known < 0)
			arch_info_from_hf_name(c, mname, t);
		info_shape(t, &whole[i]);
		if ((rc = arch_check_shape(c, t, err)))
			break;
		/* every slice of q or k whole heads: their rows are permuted
		 * a slice at a time */
		for (int k = 0; qk && k < (dim < 0 ? 1 : S) && !rc; k++)
			if (c->head_dim % 2 || l[k].v[i].p.shape[0] % c->head_dim)
				rc = sw_fail(err, SW_EDATA, "%s: slices of %lld rows are not whole heads "
					     "of an even head_dim %lld", mname,
					     (long long)l[k].v[i].p.shape[0], (long long)c->head_dim);
		if (rc)
			break;
		s->t[s->n] = (struct pt_tensor){s->npieces, dim < 0 ? 1 : S, dim,
						qk ? (int)c->head_dim : 0};
		for (int k = 0; k < (dim < 0 ? 1 : S); k++)
			s->pieces[s->npieces++] = l[k].v[i].p;
		s->n++;
		rc = meta_attrs(s, t->name, mname, qk, err);
	}
	for (int k = 0; k < S; k++)
		free(l[k].v);
	free(l);
	free(whole);
	free(dims);
	return rc;
}

/* ---- nanoGPT's tied head ----------------------------------------------- */

static int same_view(const struct pt_piece *a, const struct pt_piece *b)
{
	return a->file == b->file && a->data == b->data && a->offset == b->offset &&
	       a->rank == b->rank && a->dtype == b->dtype &&
	       !memcmp(a->shape, b->shape, sizeof a->shape) &&
	       !memcmp(a->stride, b->stride, sizeof a->stride);
}

/*
 * nanoGPT ties lm_head to wte (one Parameter): its state dict holds both
 * names, views of one storage. A tensor of a role that may be tied
 * (arch.c's tied column: lm_head to embed) and is the very view of its
 * partner is that tie: dropped, the head the embedding, as when a file
 * leaves it out; one of its own storage unties the head.
 */
static void untie_or_drop(struct named_list *l, struct sw_config *c)
{
	struct sw_tensor_info a, b;

	for (size_t i = 0; i < l->n; i++) {
		const struct arch_role *r;
		if (family_tensor_info(c, l->v[i].name, &a) < 0 || !(r = arch_role_find(a.role)) ||
		    !r->tied)
			continue;
		for (size_t j = 0; j < l->n; j++) {
			if (j == i || family_tensor_info(c, l->v[j].name, &b) < 0 ||
			    strcmp(b.role, r->tied) || b.layer != a.layer)
				continue;
			if (same_view(&l->v[i].p, &l->v[j].p)) {
				memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof *l->v);
				l->n--;
				return;
			}
		}
		c->tie_embeddings = 0;
		return;
	}
}

/* ---- the reader ------------------------------------------------------- */

static void pt_close(void *src)
{
	struct ptsrc *s = src;

	if (!s)
		return;
	for (int i = 0; i < s->nfiles; i++)
		if (s->files[i].fd >= 0)
			close(s->files[i].fd);
	free(s->files);
	free(s->pieces);
	free(s->t);
	attrmap_free(&s->attrs);
	free(s);
}

int ptsrc_sniff(int fd, uint64_t size)
{
	return ptzip_sniff(fd, size) || is_legacy(fd, size);
}

static int pt_open(const char *path, int fd, uint64_t size, void **src, struct ckpt_meta *m,
		   struct sw_tensor_info **info_out, size_t *n_out, struct sw_err *err)
{
	struct sw_tensor_info *info = NULL;
	struct named_list l = {0};
	struct nanogpt ng = {0};
	char dir[PATH_MAX];
	struct ptsrc *s;
	int rc, meta = 0;

	*src = NULL;
	if (!(s = calloc(1, sizeof *s))) {
		close(fd);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	attrmap_init(&s->attrs);
	m->format = CKPT_PYTORCH;
	dir_of(path, dir, sizeof dir);
	if (!ptsrc_sniff(fd, size)) {
		/* an index ckpt.c found to name PyTorch shards */
		close(fd);
		if (!(rc = hfdir_config(dir, &m->config, err)))
			rc = open_index(s, path, dir, m->key, &m->config, &info, err);
		goto out;
	}
	if ((rc = add_file(s, path, fd, size, err)) || (rc = read_file(s, 0, m->key, &l, &ng, err)))
		goto out;
	for (size_t i = 0; i < l.n && !meta; i++)
		meta = meta_is_meta_name(l.v[i].name);
	if (meta) {
		/* the slices are read again, each from its own file */
		struct stat mine;
		if (fstat(s->files[0].fd, &mine) < 0)
			memset(&mine, 0, sizeof mine);
		close(s->files[0].fd);
		s->nfiles = 0;
		rc = open_meta(s, path, dir, &mine, m->key, &m->config, &info, err);
	} else if (ng.found) {
		/* nanoGPT's: model_args is the architecture (no config.json) */
		m->config = ng.config;
		m->source = FAMILY_FROM_NANOGPT;
		m->has_step = ng.has_step;
		m->step = ng.step;
		m->tokens = ng.tokens;
		untie_or_drop(&l, &m->config);
		rc = add_hf(s, &m->config, m->source, &l, &info, err);
	} else if (!(rc = hfdir_config(dir, &m->config, err))) {
		/* a training script's torch.save({'model': ..., 'step': N}) */
		m->has_step = ng.has_step;
		m->step = ng.step;
		m->tokens = ng.tokens;
		rc = add_hf(s, &m->config, FAMILY_FROM_HF, &l, &info, err);
	}
out:
	free(l.v);
	if (rc) {
		free(info);
		pt_close(s);
		return rc;
	}
	*src = s;
	*info_out = info;
	*n_out = s->n;
	return SW_OK;
}

/* ---- tensor data ------------------------------------------------------ */

/*
 * Element idx of a view (src: its first element; sstride in elements of
 * dtype) goes to dst[sum idx_i * dstride_i]: runs contiguous on both
 * sides are converted at once, the rest element by element.
 */
static int gather(const unsigned char *src, enum sw_dtype dtype, int esize, int rank,
		  const int64_t *shape, const int64_t *sstride, float *dst, const int64_t *dstride,
		  struct sw_err *err)
{
	int64_t idx[SW_MAX_RANK] = {0}, n = 1, run;
	int last = rank - 1, rc;

	if (rank == 0)
		return sw_to_f32(dtype, src, dst, 1, err);
	for (int i = 0; i < rank; i++)
		n *= shape[i];
	if (n == 0)
		return SW_OK;
	run = shape[last];
	for (;;) {
		int64_t so = 0, d = 0;
		for (int i = 0; i < last; i++) {
			so += idx[i] * sstride[i];
			d += idx[i] * dstride[i];
		}
		if (sstride[last] == 1 && dstride[last] == 1) {
			if ((rc = sw_to_f32(dtype, src + so * esize, dst + d, (size_t)run, err)))
				return rc;
		} else {
			for (int64_t j = 0; j < run; j++)
				if ((rc = sw_to_f32(dtype, src + (so + j * sstride[last]) * esize,
						    dst + d + j * dstride[last], 1, err)))
					return rc;
		}
		/* the next index of the outer dimensions */
		int i = last - 1;
		while (i >= 0 && ++idx[i] == shape[i])
			idx[i--] = 0;
		if (i < 0)
			return SW_OK;
	}
}

static int contiguous(const struct pt_piece *p)
{
	int64_t want = 1;

	for (int i = p->rank - 1; i >= 0; i--) {
		if (p->shape[i] != 1 && p->stride[i] != want)
			return 0;
		want *= p->shape[i];
	}
	return 1;
}

/* The bytes piece p's view spans in its file: offset and length. */
static void span(const struct pt_piece *p, uint64_t *off, uint64_t *len)
{
	int64_t last = p->offset;

	for (int i = 0; i < p->rank; i++)
		last += (p->shape[i] - 1) * p->stride[i];
	*off = p->data + (uint64_t)p->offset * (uint64_t)p->esize;
	*len = p->numel ? (uint64_t)(last - p->offset + 1) * (uint64_t)p->esize : 0;
}

/*
 * A view that spans its whole storage (bytes mapped at off, len) reads
 * every byte of the record: its CRC-32 is checked on the way, one more
 * pass over bytes just mapped (docs/trust.md has the cost). A view of
 * part of a storage is read without: the check would read the rest. A
 * file that shrank while mapped reads zeros: that (74) is said, not a
 * wrong CRC.
 */
static int check_storage(const struct pt_piece *p, uint64_t off, uint64_t len, const void *bytes,
			 const struct ckpt_view *v, struct sw_err *err)
{
	int rc;

	if (off != p->data || len != p->bytes || ptzip_crc_ok(p->crc, 0, bytes, len))
		return SW_OK;
	if ((rc = ckptsrc_check(v, err)))
		return rc;
	return sw_fail(err, SW_EDATA, "storage %s: its CRC-32 does not match its data", p->record);
}

static int pt_load(void *src, size_t k, const struct sw_tensor_info *t,
		   struct ckpt_scratch *scratch, struct ckpt_view *v, struct sw_err *err)
{
	struct ptsrc *s = src;
	const struct pt_tensor *pt = &s->t[k];
	int64_t dstride[SW_MAX_RANK], along = 0;
	float *buf = NULL;
	int rc = SW_OK;

	dstride[t->rank ? t->rank - 1 : 0] = 1;
	for (int i = t->rank - 2; i >= 0; i--)
		dstride[i] = dstride[i + 1] * t->shape[i + 1];
	for (int j = 0; j < pt->npieces && !rc; j++) {
		const struct pt_piece *p = &s->pieces[pt->first + (size_t)j];
		const struct pt_file *f = &s->files[p->file];
		int64_t base = 0;
		const void *bytes;
		uint64_t off, len;

		span(p, &off, &len);
		if ((rc = ckptsrc_map(f->fd, f->size, off, len, v, &bytes, err)))
			break;
		if ((rc = check_storage(p, off, len, bytes, v, err))) {
			ckptsrc_unmap(v);
			break;
		}
		/* contiguous float32 alone, aligned: read in place */
		if (pt->npieces == 1 && !pt->head_dim && p->dtype == SW_DTYPE_F32 && contiguous(p) &&
		    ((uintptr_t)bytes & 3) == 0) {
			v->data = bytes;
			v->mapped = 1;
			return SW_OK;
		}
		if (!buf && (rc = ckptsrc_buffer(scratch, t->numel, v, &buf, err)))
			break;
		if (pt->cat_dim >= 0)
			base = along * dstride[pt->cat_dim];
		if (pt->head_dim) {
			/* Meta's q or k (a matrix of whole heads): rotate-half row
			 * r is the slice's interleaved row ropeperm_source_row(r) */
			const unsigned char *rows = bytes;
			const int64_t one = 1;

			rc = ropeperm_check_rows(p->shape[0], pt->head_dim, err);
			for (int64_t r = 0; r < p->shape[0] && !rc; r++)
				rc = gather(rows + ropeperm_source_row(r, pt->head_dim) * p->stride[0] * p->esize,
					    p->dtype, p->esize, 1, &p->shape[1], &p->stride[1],
					    buf + base + r * dstride[0], &one, err);
		} else {
			rc = gather(bytes, p->dtype, p->esize, p->rank, p->shape, p->stride, buf + base,
				    dstride, err);
		}
		ckptsrc_unmap(v);
		if (pt->cat_dim >= 0)
			along += p->shape[pt->cat_dim];
	}
	if (rc) {
		sw_err_prefix(err, "%s", t->name);
		return rc;
	}
	v->data = buf;
	return SW_OK;
}

static int pt_attrs(void *src, const struct sw_tensor_info *info, size_t n,
		    struct attr_map *scratch, const struct attr_map **out, struct sw_err *err)
{
	(void)info, (void)n, (void)scratch, (void)err;
	*out = &((struct ptsrc *)src)->attrs;
	return SW_OK;
}

const struct ckpt_format_ops ptsrc_format = {
	.name = "a PyTorch file",
	.sniff = ptsrc_sniff,
	.open = pt_open,
	.load = pt_load,
	.attrs = pt_attrs,
	.close = pt_close,
	.reads_index = 1,
	.reads_key = 1,
};
