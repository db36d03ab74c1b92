/* convert.c - HDF5 checkpoints to safetensors and back (see convert.h). */
#include "convert.h"
#include "../base/atomicfile.h"
#include "../base/elemmath.h"
#include "../base/family.h"
#include "ckpt.h"
#include "ckptfiles.h"
#include "h5write.h"
#include "stwrite.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"

void convert_opts_init(struct convert_opts *o)
{
	o->to = CONVERT_TO_AUTO;
	o->dtype = SW_DTYPE_F32;
	o->shard_size = 5000000000ULL;
	o->force = 0;
}

/* ---- names -------------------------------------------------------- */

int convert_hf_has_role(const char *arch, const char *role)
{
	const struct arch_role *r = arch_role_find(role);
	int own = family_names_role(arch, role);

	/* a family with names of its own (GPT-2, Gemma): what its table names */
	if (own >= 0)
		return own;

	/* Hugging Face's Llama family: what every model has (the head even
	 * when tied: it is written then), q, k, v biases and per-head
	 * QK-norm where the family's flags (family.c) say so (Qwen2's,
	 * Qwen3's); none of our own roles */
	switch (r ? r->when : ARCH_WHEN_OTHER) {
	case ARCH_WHEN_ALWAYS:
	case ARCH_WHEN_GAIN:
	case ARCH_WHEN_UNTIED:
		return 1;
	case ARCH_WHEN_QKV_BIAS:
		return (family_model_flags(arch) & FAMILY_QKV_BIAS) != 0;
	case ARCH_WHEN_QK_NORM:
		return (family_model_flags(arch) & FAMILY_QK_NORM) != 0;
	default:
		return 0;
	}
}

int convert_parse_size(const char *s, uint64_t *bytes)
{
	static const struct { const char *unit; double scale; } units[] = {
		{"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
		{"TiB", 1099511627776.0},
	};
	char *end;
	double v;

	if (!s[0] || !(s[0] == '.' || (s[0] >= '0' && s[0] <= '9')))
		return -1;
	v = strtod(s, &end);
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if (!strcasecmp(end, units[i].unit)) {
			v *= units[i].scale;
			if (!(v >= 1 && v < 9.2e18))
				return -1;
			*bytes = (uint64_t)v;
			return 0;
		}
	return -1;
}

/* ---- errors ------------------------------------------------------- */

/* The file a failure is about; a message that starts with that file's
 * path loses it (the tool prints the file first). */
static void blame(struct convert_result *r, struct sw_err *err, const char *file)
{
	size_t n = strlen(file);

	snprintf(r->culprit, sizeof r->culprit, "%s", file);
	if (err && !strncmp(err->msg, file, n) && !strncmp(err->msg + n, ": ", 2))
		memmove(err->msg, err->msg + n + 2, strlen(err->msg + n + 2) + 1);
}

/* A failure inside the temporary directory: name the file as it would
 * have been under out ("tmp/model.safetensors: write: ..." becomes the
 * culprit out/model.safetensors and the message "write: ..."). */
static void blame_in_tmpdir(struct convert_result *r, struct sw_err *err,
			    const char *tmpdir, const char *out)
{
	size_t n = strlen(tmpdir);
	const char *colon;

	if (strncmp(err->msg, tmpdir, n) || err->msg[n] != '/' ||
	    !(colon = strstr(err->msg + n, ": "))) {
		blame(r, err, out);
		return;
	}
	snprintf(r->culprit, sizeof r->culprit, "%s%.*s", out, (int)(colon - err->msg - n),
		 err->msg + n);
	memmove(err->msg, colon + 2, strlen(colon + 2) + 1);
}

/* A name an export writes into its directory, or removes there from the
 * export before it (publish). */
static int is_export_name(const char *name)
{
	return !strcmp(name, "config.json") || !strcmp(name, SINGLE_NAME) || !strcmp(name, INDEX_NAME) ||
	       !fnmatch("model-[0-9]*-of-[0-9]*.safetensors", name, 0);
}

/*
 * May out be written (atomic_check_output): never over an input, over an
 * existing out only with force. A directory out (want_dir) must be one,
 * and none of the files the export replaces or removes in it an input.
 * r->culprit: what the message is about.
 */
static int check_out(const struct ckpt *ck, const char *in, const char *path, const char *out,
		     const struct convert_opts *o, int want_dir, int *exists,
		     struct convert_result *r, struct sw_err *err)
{
	enum ckpt_format fmt = ckpt_meta(ck)->format;
	int beside = fmt == CKPT_SAFETENSORS || fmt == CKPT_PYTORCH;
	struct ckpt_files list = {0};
	struct stat st;
	struct dirent *de;
	DIR *d;
	int rc, i;

	/* in: a directory, or a file in one; path: the file opened; what
	 * beside them the safetensors and PyTorch readers read */
	if ((rc = ckpt_files_add(&list, in, beside, err)) ||
	    (rc = ckpt_files_add(&list, path, beside, err))) {
		ckpt_files_free(&list);
		blame(r, err, in);
		return rc;
	}
	*exists = lstat(out, &st) == 0;
	if (!want_dir || !*exists) {
		rc = atomic_check_output(out, o->force, (const char *const *)list.name, list.n, err);
	} else if ((i = atomic_input_index(out, (const char *const *)list.name, list.n)) >= 0) {
		rc = sw_fail(err, SW_ECANTCREAT, "is also an input (%s): not replaced, even with --force",
			     list.name[i]);
	} else if (S_ISLNK(st.st_mode)) {
		rc = sw_fail(err, SW_ECANTCREAT, "is a symbolic link: not followed, not replaced, even with --force");
	} else if (!o->force) {
		rc = sw_fail(err, SW_ECANTCREAT, "exists (--force replaces it)");
	} else if (!S_ISDIR(st.st_mode)) {
		rc = sw_fail(err, SW_ECANTCREAT, "exists and is not a directory");
	} else if ((d = opendir(out))) {
		while (!rc && (de = readdir(d))) {
			char p[PATH_MAX];
			if (snprintf(p, sizeof p, "%s/%s", out, de->d_name) < (int)sizeof p &&
			    is_export_name(de->d_name) &&
			    (i = atomic_input_index(p, (const char *const *)list.name, list.n)) >= 0) {
				blame(r, NULL, p);
				rc = sw_fail(err, SW_ECANTCREAT,
					     "is also an input (%s): not replaced, even with --force",
					     list.name[i]);
			}
		}
		closedir(d);
	}
	if (rc && !r->culprit[0])
		blame(r, NULL, out);
	ckpt_files_free(&list);
	return rc;
}

/* ---- HDF5 -> safetensors ------------------------------------------ */

/*
 * Learnable multipliers are folded into the matrix they scale: the export
 * holds W_eff = diag(r) W diag(c) (s W for a scalar), computed in float32
 * as sw-train's forward pass computes it, so transformers loads an
 * ordinary Llama with the same function, and the multipliers' tensors are
 * left out. The linear roles whose multipliers fold; the multipliers of
 * tensor i, mult and col (-1 where none), or its scale design's gains
 * (gains 1: gain_out as mult, gain_in as col).
 */
static const char *const fold_roles[] = {"q", "k", "v", "o", "gate", "up", "down", "lm_head"};

static void multipliers_of(const struct ckpt *ck, const struct sw_tensor_info *t, long *mult,
			   long *col, int *gains)
{
	char role[SW_ROLE_MAX + 16];

	*mult = *col = -1;
	*gains = 0;
	for (size_t k = 0; k < sizeof fold_roles / sizeof fold_roles[0]; k++)
		if (!strcmp(t->role, fold_roles[k])) {
			/* a scale design's gains, the output side as mult; else
			 * the multipliers (a model has one or the other) */
			snprintf(role, sizeof role, "%s_gain_out", t->role);
			*mult = ckpt_find_role(ck, role, t->layer);
			snprintf(role, sizeof role, "%s_gain_in", t->role);
			*col = ckpt_find_role(ck, role, t->layer);
			if ((*gains = *mult >= 0 || *col >= 0))
				return;
			snprintf(role, sizeof role, "%s_mult", t->role);
			*mult = ckpt_find_role(ck, role, t->layer);
			snprintf(role, sizeof role, "%s_mult_col", t->role);
			*col = ckpt_find_role(ck, role, t->layer);
		}
}

/* A multiplier (X_mult, X_mult_col) or a scale design's gain (X_gain_in,
 * X_gain_out) of a linear role X present in ck. */
static int foldable_multiplier(const struct ckpt *ck, const struct sw_tensor_info *t)
{
	const struct arch_role *r = arch_role_find(t->role);
	int gain = r && (r->place == ARCH_PLACE_BEFORE || r->place == ARCH_PLACE_AFTER);
	char base[SW_ROLE_MAX];

	if ((t->block != SW_BLOCK_MULT && !gain) ||
	    arch_base_role(t->role, base, sizeof base) < 0)
		return 0;
	for (size_t k = 0; k < sizeof fold_roles / sizeof fold_roles[0]; k++)
		if (!strcmp(base, fold_roles[k]))
			return ckpt_find_role(ck, base, t->layer) >= 0;
	return 0;
}

/* out = the matrix of tensor i (w, [dout, din]) with its multipliers
 * folded in: a scalar (1 value), a row one (dout), a column one (din), or
 * rowcol's pair (mult dout, col din; the config says which of row and
 * col a lone vector of a square matrix is). A scale design's gains come
 * as the pair (gain_out as mult, gain_in as col; either may be -1):
 * their roles say their sides. */
static int fold_multipliers(struct ckpt *ck, const struct sw_tensor_info *t, const float *w,
			    long mult, long col, int gains, float *out, struct sw_err *err)
{
	const char *mode = ckpt_meta(ck)->config.multipliers;
	int64_t dout = t->shape[0], din = t->shape[1];
	struct ckpt_view vm = {0}, vc = {0};
	const float *r = NULL, *cv = NULL;
	float s = 1;
	int rc = SW_OK;

	if (mult >= 0 && (rc = ckpt_load(ck, (size_t)mult, &vm, err)))
		return rc;
	if (col >= 0 && (rc = ckpt_load(ck, (size_t)col, &vc, err))) {
		if (mult >= 0)
			ckpt_release(ck, &vm);
		return rc;
	}
	if (gains) {
		if ((mult >= 0 && vm.numel != dout) || (col >= 0 && vc.numel != din))
			rc = sw_fail(err, SW_EDATA, "%s: its gains are not of its output (%lld) "
				     "and input (%lld)", t->name, (long long)dout, (long long)din);
		r = mult >= 0 ? vm.data : NULL;
		cv = col >= 0 ? vc.data : NULL;
	} else if (col >= 0) {
		if (mult < 0 || vm.numel != dout || vc.numel != din)
			rc = sw_fail(err, SW_EDATA, "%s: its multipliers are not a row (%lld) and a "
				     "column (%lld) one", t->name, (long long)dout, (long long)din);
		r = vm.data, cv = vc.data;
	} else if (vm.numel == 1) {
		s = vm.data[0];
	} else if (vm.numel == dout && (dout != din || strcmp(mode, "col"))) {
		r = vm.data;
	} else if (vm.numel == din) {
		cv = vm.data;
	} else {
		rc = sw_fail(err, SW_EDATA, "%s: a multiplier of %lld values fits no side of %lldx%lld",
			     t->name, (long long)vm.numel, (long long)dout, (long long)din);
	}
	for (int64_t i = 0; i < dout && !rc; i++) {
		float ri = r ? r[i] : s;
		for (int64_t j = 0; j < din; j++)
			out[i * din + j] = elem_mult_weff(w[i * din + j], ri, cv ? cv[j] : 1);
	}
	if (mult >= 0)
		ckpt_release(ck, &vm);
	if (col >= 0)
		ckpt_release(ck, &vc);
	return rc;
}

/* A reparameterized gain's direction or magnitude (arch.h): the export
 * has the gain they give (the checkpoint keeps it beside them), not them. */
static int reparam_part(const struct ckpt *ck, const struct sw_tensor_info *t)
{
	char base[SW_ROLE_MAX];

	return arch_reparam_base(t->role, base, sizeof base) &&
	       arch_reparam_of(ckpt_meta(ck)->config.scale_reparam, base);
}

/* What Hugging Face Llama cannot hold: the tensor, or the option, named. */
/* RoPE's scaling is kept by both formats for the types the model
 * computes (their parameters: arch.h); another type's parameters are in
 * neither, and a file written without them would be another model. */
static int check_rope_kept(const struct sw_config *c, struct sw_err *err)
{
	if (c->rope_type[0] && strcmp(c->rope_type, "linear") && strcmp(c->rope_type, "llama3"))
		return sw_fail(err, SW_EDATA, "rope_scaling type '%s' cannot be converted (its "
			       "parameters would be lost; linear and llama3 are kept)", c->rope_type);
	return SW_OK;
}

static int check_representable(const struct ckpt *ck, struct sw_err *err)
{
	const struct sw_config *c = &ckpt_meta(ck)->config;
	struct arch_scale_design d;
	char why[64];
	int rc;

	if ((rc = check_rope_kept(c, err)))
		return rc;
	if (c->n_experts)
		return sw_fail(err, SW_EUSAGE, "/config: a mixture of experts (n_experts %lld): its "
			       "export is not built yet", (long long)c->n_experts);

	/* DNP is the one design no matrix absorbs: a norm between W and its
	 * output gain */
	if (c->scale_design[0] && !arch_scale_design_parse(c->scale_design, &d, NULL, 0, why) &&
	    (d.dnp[ARCH_SV_ATTN] || d.dnp[ARCH_SV_FFN]))
		return sw_fail(err, SW_EDATA, "/config: scale_design = '%s': DNP normalizes each "
			       "projection's output, which no matrix can fold; Hugging Face %s has no "
			       "such norm", c->scale_design, c->arch);
	for (size_t i = 0; i < ckpt_count(ck); i++) {
		const struct sw_tensor_info *t = ckpt_info(ck, i);
		if (convert_hf_has_role(c->arch, t->role) || foldable_multiplier(ck, t) ||
		    reparam_part(ck, t))
			continue;
		if (t->block == SW_BLOCK_MULT)
			return sw_fail(err, SW_EDATA,
				       "%s: a learnable multiplier (role %s) of no matrix it can be folded "
				       "into; Hugging Face %s has none, so this model cannot be converted",
				       t->name, t->role, c->arch);
		return sw_fail(err, SW_EDATA, "%s: role %s has no place in Hugging Face %s",
			       t->name, t->role, c->arch);
	}
	if (c->norm_everywhere)
		return sw_fail(err, SW_EDATA, "/config: norm_everywhere; Hugging Face %s has no "
			       "RMSNorm before o_proj and down_proj", c->arch);
	if (!c->scale_vectors)
		return sw_fail(err, SW_EDATA, "/config: scale_vectors = 0; Hugging Face %s has no "
			       "RMSNorm without gains", c->arch);
	if (c->qk_norm && !(family_model_flags(c->arch) & FAMILY_QK_NORM))
		return sw_fail(err, SW_EDATA, "/config: qk_norm; Hugging Face %s has no QK-norm",
			       c->arch);
	return SW_OK;
}

/* The exported tensors keep[lo, hi) (indices into ck) form one file;
 * shard k of n. keep[k] UNIT_GAIN: a Pre-Norm gain of ones the export
 * adds (a scale design's Pre-Norm without one: Hugging Face's has one). */
#define UNIT_GAIN ((size_t)-1)
struct shard_plan {
	size_t lo, hi;
	char name[64];
};

/*
 * How an exported tensor is made where the family's Hugging Face files
 * store it otherwise than the model sees it (family.c's tables, read
 * backwards): the checkpoint's parts (GPT-2's c_attn.weight:q, :k, :v)
 * joined, each at its first row of the whole; turned to [in, out]
 * (GPT2LMHeadModel's Conv1D); a gain less the offset its class adds
 * (Gemma's 1 + w). nparts 0: the tensor keep[k] names, as it is.
 */
#define FORM_PARTS 3
struct form {
	size_t part[FORM_PARTS];
	int64_t first[FORM_PARTS];
	int nparts, transposed;
	float offset;
};

/* The stored name a part's name is of ("...c_attn.weight" of
 * "...c_attn.weight:q"), into base: 1, or 0 for a tensor that is no part. */
static int part_base(const char *name, char *base, size_t len)
{
	const char *colon = strrchr(name, ':');

	if (!colon || (size_t)(colon - name) >= len)
		return 0;
	memcpy(base, name, (size_t)(colon - name));
	base[colon - name] = '\0';
	return 1;
}

/* A joined tensor's parts each at its place in the whole, as the family
 * splits it (family_tensor_part): every part once, rows as the config
 * gives them. */
static int place_parts(const struct ckpt *ck, const struct sw_config *c,
		       struct sw_tensor_info *t, struct form *f, struct sw_err *err)
{
	size_t n = 0;
	int rc;

	t->shape[0] = 0;
	for (int p = 0; p < f->nparts; p++)
		t->shape[0] += ckpt_info(ck, f->part[p])->shape[0];
	t->numel = t->shape[0] * (t->rank > 1 ? t->shape[1] : 1);
	if ((rc = family_tensor_parts(c, t, &n, err)))
		return rc;
	if (n != (size_t)f->nparts)
		return sw_fail(err, SW_EDATA, "%s: %d of its %zu parts in the checkpoint", t->name,
			       f->nparts, n);
	for (int p = 0; p < f->nparts; p++) {
		const char *suffix = strrchr(ckpt_info(ck, f->part[p])->name, ':') + 1;
		size_t q = 0;
		struct family_part fp;
		for (; q < n; q++) {
			family_tensor_part(c, t, q, &fp);
			if (fp.suffix && !strcmp(fp.suffix, suffix))
				break;
		}
		if (q == n || fp.groups != 1 || fp.len != ckpt_info(ck, f->part[p])->shape[0])
			return sw_fail(err, SW_EDATA, "%s: no place for its part %s", t->name, suffix);
		f->first[p] = fp.first;
	}
	return SW_OK;
}

/*
 * The forms of the n exported tensors (keep, infos: the checkpoint's in
 * model order), the parts of one stored tensor joined in place of its
 * first part's: *n the count after.
 */
static int plan_forms(const struct ckpt *ck, const struct sw_config *c, size_t *keep,
		      struct sw_tensor_info *infos, struct form *forms, size_t *n,
		      struct sw_err *err)
{
	char base[SW_NAME_MAX];
	size_t out = 0;
	int rc;

	for (size_t k = 0; k < *n; k++) {
		size_t j = out;
		memset(&forms[out], 0, sizeof forms[out]);
		if (keep[k] == UNIT_GAIN || !part_base(infos[k].name, base, sizeof base)) {
			keep[out] = keep[k];
			infos[out++] = infos[k];
			continue;
		}
		for (j = 0; j < out && (!forms[j].nparts || strcmp(infos[j].name, base)); j++)
			;
		if (j == out) {         /* the first part: the whole's place */
			keep[out] = keep[k];
			infos[out] = infos[k];
			snprintf(infos[out].name, sizeof infos[out].name, "%s", base);
			out++;
		}
		if (forms[j].nparts == FORM_PARTS)
			return sw_fail(err, SW_EDATA, "%s: more than %d parts", base, FORM_PARTS);
		forms[j].part[forms[j].nparts++] = keep[k];
	}
	*n = out;
	for (size_t k = 0; k < out; k++) {
		struct sw_tensor_info *t = &infos[k];
		if (forms[k].nparts && (rc = place_parts(ck, c, t, &forms[k], err)))
			return rc;
		if (t->rank == 2 && family_tensor_layout(c, FAMILY_FROM_HF, t->name) ==
		    FAMILY_TRANSPOSED) {
			int64_t r = t->shape[0];
			t->shape[0] = t->shape[1];
			t->shape[1] = r;
			forms[k].transposed = 1;
		}
		forms[k].offset = (float)family_gain_offset(c, FAMILY_FROM_HF, t);
	}
	return SW_OK;
}

/* The values of exported tensor t as its form makes them (t's shape as
 * stored), into out (t->numel). */
static int load_formed(struct ckpt *ck, const struct sw_tensor_info *t, size_t keep,
		       const struct form *f, float *out, struct sw_err *err)
{
	int64_t rows = f->transposed ? t->shape[1] : t->shape[0],
		cols = t->rank > 1 ? (f->transposed ? t->shape[0] : t->shape[1]) : 1;
	float *whole = f->transposed ? malloc((size_t)t->numel * sizeof *whole) : out;
	int rc = SW_OK;

	if (!whole)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (int p = 0; p < (f->nparts ? f->nparts : 1) && !rc; p++) {
		size_t i = f->nparts ? f->part[p] : keep;
		int64_t at = f->nparts ? f->first[p] * cols : 0;
		struct ckpt_view v;
		if ((rc = ckpt_load(ck, i, &v, err)))
			break;
		if (at + v.numel > rows * cols)
			rc = sw_fail(err, SW_EDATA, "%s: its parts do not fit it", t->name);
		else
			memcpy(whole + at, v.data, (size_t)v.numel * sizeof *whole);
		if (ckptsrc_check(&v, err)) {
			sw_err_prefix(err, "%s", ckpt_info(ck, i)->name);
			rc = SW_EIO;
		}
		ckpt_release(ck, &v);
	}
	for (int64_t r = 0; f->transposed && !rc && r < rows; r++)
		for (int64_t q = 0; q < cols; q++)
			out[q * rows + r] = whole[r * cols + q];
	for (int64_t j = 0; f->offset != 0 && !rc && j < t->numel; j++)
		out[j] -= f->offset;
	if (whole != out)
		free(whole);
	return rc;
}

static int plan_shards(const struct sw_tensor_info *infos, size_t count, uint64_t limit,
		       int size, struct shard_plan **out, int *nout, struct sw_err *err)
{
	struct shard_plan *p = calloc(count ? count : 1, sizeof *p);
	uint64_t cur = 0;
	int n = 0;

	if (!p)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	/* as save_pretrained: a new file when the next tensor would pass the
	 * limit; a tensor larger than the limit gets a file of its own */
	for (size_t i = 0; i < count; i++) {
		uint64_t b = (uint64_t)infos[i].numel * (uint64_t)size;
		if (n == 0 || (cur > 0 && cur + b > limit)) {
			p[n].lo = i;
			n++;
			cur = 0;
		}
		p[n - 1].hi = i + 1;
		cur += b;
	}
	if (n == 0)
		n = 1;          /* no tensors: one empty file */
	for (int k = 0; k < n; k++)
		if (n == 1)
			snprintf(p[k].name, sizeof p[k].name, SINGLE_NAME);
		else
			snprintf(p[k].name, sizeof p[k].name, "model-%05d-of-%05d.safetensors",
				 k + 1, n);
	*out = p;
	*nout = n;
	return SW_OK;
}

/*
 * The tensor attributes of all (ckpt_attrs), grouped by tensor: key[i]
 * is an index into all, the keys of tensor t (model order) being
 * key[first[t]..first[t+1]), each group in all's order. Built once, by a
 * map of the names and a counting sort, so that a shard's metadata costs
 * its own keys however many shards and tensors there are.
 */
struct keys_by_tensor {
	size_t *key, *first;
};

static int group_keys(const struct ckpt *ck, const struct attr_map *all,
		      struct keys_by_tensor *g, struct sw_err *err)
{
	char obj[SW_NAME_MAX + 16], attr[64], num[32];
	size_t count = ckpt_count(ck);
	long *tensor = malloc((all->n ? all->n : 1) * sizeof *tensor);
	struct attr_map names;
	int rc = SW_OK;

	attrmap_init(&names);
	g->key = malloc((all->n ? all->n : 1) * sizeof *g->key);
	g->first = calloc(count + 2, sizeof *g->first);
	if (!tensor || !g->key || !g->first) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < count && !rc; i++) {
		snprintf(num, sizeof num, "%zu", i);
		rc = attrmap_set(&names, ckpt_info(ck, i)->name, num, err);
	}
	for (size_t i = 0; i < all->n && !rc; i++) {
		const char *k;
		tensor[i] = -1;
		if (attrmap_parse_key(all->kv[i].key, obj, sizeof obj, attr, sizeof attr) == 0 &&
		    !strncmp(obj, "/params/", 8) && (k = attrmap_get(&names, obj + 8)))
			tensor[i] = strtol(k, NULL, 10);
		if (tensor[i] >= 0)
			g->first[tensor[i] + 2]++;
	}
	if (rc)
		goto out;
	for (size_t t = 2; t < count + 2; t++)
		g->first[t] += g->first[t - 1];
	for (size_t i = 0; i < all->n; i++)
		if (tensor[i] >= 0)
			g->key[g->first[tensor[i] + 1]++] = i;
out:
	free(tensor);
	attrmap_free(&names);
	return rc;
}

static void keys_by_tensor_free(struct keys_by_tensor *g)
{
	free(g->key);
	free(g->first);
}

/* The metadata of one shard: the checkpoint's (global), then its tensors'
 * attributes. */
static int shard_meta(const struct shard_plan *p, const size_t *keep, const struct form *forms,
		      const struct attr_map *global, const struct attr_map *all,
		      const struct keys_by_tensor *g, struct attr_map *m, struct sw_err *err)
{
	int rc = SW_OK;

	attrmap_init(m);
	for (size_t i = 0; i < global->n && !rc; i++)
		rc = attrmap_set(m, global->kv[i].key, global->kv[i].value, err);
	/* a joined tensor's: its parts', under their names */
	for (size_t k = p->lo; k < p->hi && !rc; k++)
		for (int q = 0; keep[k] != UNIT_GAIN && q < (forms[k].nparts ? forms[k].nparts : 1); q++) {
			size_t i = forms[k].nparts ? forms[k].part[q] : keep[k];
			for (size_t j = g->first[i]; j < g->first[i + 1] && !rc; j++)
				rc = attrmap_set(m, all->kv[g->key[j]].key, all->kv[g->key[j]].value, err);
		}
	if (rc)
		attrmap_free(m);
	return rc;
}

/* n ones: a Pre-Norm's gain where a scale design left it none (the
 * readers' gains are folded into their matrices) */
static int write_ones(struct stw *w, int64_t n, struct sw_err *err)
{
	float *ones = malloc((size_t)(n > 0 ? n : 1) * sizeof *ones);
	int rc;

	if (!ones)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (int64_t i = 0; i < n; i++)
		ones[i] = 1;
	rc = stw_write(w, ones, n, err);
	free(ones);
	return rc;
}

static int write_shard(struct ckpt *ck, const char *in, const struct shard_plan *p,
		       const size_t *keep, const struct form *forms,
		       const struct sw_tensor_info *infos, const char *path,
		       const struct attr_map *m, enum sw_dtype dtype, struct convert_result *r,
		       struct sw_err *err)
{
	struct stw *w;
	int rc = stw_create_meta(path, infos + p->lo, p->hi - p->lo, dtype, m, &w, err);

	for (size_t k = p->lo; k < p->hi && !rc; k++) {
		size_t i = keep[k];
		struct ckpt_view v;
		float *folded = NULL;
		long mult, col;
		int gains;
		if (i == UNIT_GAIN) {
			if ((rc = write_ones(w, infos[k].numel, err)))
				break;
			r->tensors++;
			r->bytes += (uint64_t)infos[k].numel * (uint64_t)sw_dtype_size(dtype);
			continue;
		}
		if (forms[k].nparts || forms[k].transposed || forms[k].offset != 0) {
			if (!(folded = malloc((size_t)infos[k].numel * sizeof *folded)))
				rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			else if (!(rc = load_formed(ck, &infos[k], i, &forms[k], folded, err)))
				rc = stw_write(w, folded, infos[k].numel, err);
			free(folded);
			if (rc) {
				blame(r, err, in);
				break;
			}
			r->tensors++;
			r->bytes += (uint64_t)infos[k].numel * (uint64_t)sw_dtype_size(dtype);
			continue;
		}
		if ((rc = ckpt_load(ck, i, &v, err))) {
			blame(r, err, in);
			break;
		}
		multipliers_of(ck, ckpt_info(ck, i), &mult, &col, &gains);
		if (mult >= 0 || col >= 0) {
			if (!(folded = malloc((size_t)v.numel * sizeof *folded)))
				rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			else
				rc = fold_multipliers(ck, ckpt_info(ck, i), v.data, mult, col, gains,
						      folded, err);
			if (rc) {
				blame(r, err, in);
				ckpt_release(ck, &v);
				free(folded);
				break;
			}
		}
		rc = stw_write(w, folded ? folded : v.data, v.numel, err);
		free(folded);
		/* a file that shrank explains a failed write too (EFAULT) */
		if (ckptsrc_check(&v, err)) {
			sw_err_prefix(err, "%s", ckpt_info(ck, i)->name);
			blame(r, err, in);
			rc = SW_EIO;
		}
		ckpt_release(ck, &v);
		r->tensors++;
		r->bytes += (uint64_t)ckpt_info(ck, i)->numel * (uint64_t)sw_dtype_size(dtype);
	}
	if (rc) {
		stw_abort(w);
		return rc;
	}
	return stw_commit(w, err);
}

/* The files of one export, in the order they are published: the shards,
 * config.json, and last the file a reader opens (index or single file). */
struct export_files {
	const char **name;      /* (nshards + 2) */
	int n;
};

/* The files of an export in the order they are published: the shards,
 * config.json, the index; or config.json, model.safetensors. A reader
 * opens the last one, so it comes when the rest is there. */
static void export_list(const struct shard_plan *plan, int nshards, struct export_files *f)
{
	f->n = 0;
	for (int k = 0; k < nshards && nshards > 1; k++)
		f->name[f->n++] = plan[k].name;
	f->name[f->n++] = "config.json";
	f->name[f->n++] = nshards > 1 ? INDEX_NAME : SINGLE_NAME;
}

static int is_ours(const struct export_files *f, const char *name)
{
	for (int i = 0; i < f->n; i++)
		if (!strcmp(f->name[i], name))
			return 1;
	return 0;
}

/*
 * Put the finished export in tmpdir at out: a new out is the renamed
 * directory; an existing one (--force) gets the files moved in, the file
 * readers open last, then loses the previous export's other files
 * (model*.safetensors, the index) and nothing else of the user's.
 */
static int publish(const char *tmpdir, const char *out, int exists,
		   const struct export_files *f, struct sw_err *err)
{
	char from[PATH_MAX + 80], to[PATH_MAX + 80];
	struct dirent *de;
	DIR *d;

	if (!exists) {
		if (rename(tmpdir, out) < 0)
			return sw_fail(err, SW_ECANTCREAT, "%s: rename: %s", out, strerror(errno));
		atomic_fsync_parent(out);
		return SW_OK;
	}
	for (int i = 0; i < f->n; i++) {
		snprintf(from, sizeof from, "%s/%s", tmpdir, f->name[i]);
		snprintf(to, sizeof to, "%s/%s", out, f->name[i]);
		if (rename(from, to) < 0)
			return sw_fail(err, SW_ECANTCREAT, "%s: rename: %s", to, strerror(errno));
	}
	rmdir(tmpdir);
	if ((d = opendir(out))) {
		while ((de = readdir(d)))
			if (is_export_name(de->d_name) && strcmp(de->d_name, "config.json") &&
			    !is_ours(f, de->d_name)) {
				snprintf(to, sizeof to, "%s/%s", out, de->d_name);
				unlink(to);
			}
		closedir(d);
	}
	atomic_fsync_dir(out);
	return SW_OK;
}

static int make_tmpdir(const char *out, char *tmpdir, size_t len, struct sw_err *err)
{
	mode_t mask;

	if (atomic_tmp_name(out, "XXXXXX", tmpdir, len) < 0)
		return sw_fail(err, SW_ECANTCREAT, "path too long");
	if (!mkdtemp(tmpdir))
		return sw_fail(err, SW_ECANTCREAT, "cannot create: %s", strerror(errno));
	/* a signal before the export is in place removes it, whatever it holds */
	atomic_remember(tmpdir, 1);
	/* mkdtemp makes it 0700; a directory the user made would be 0777 & ~umask */
	mask = umask(0);
	umask(mask);
	chmod(tmpdir, 0777 & ~mask);
	return SW_OK;
}

/* The Pre-Norm gains a scale design moved to the readers, as ones (keep
 * UNIT_GAIN), into the exported tensors in model order: n + the added. */
static size_t add_unit_gains(const struct ckpt *ck, const struct sw_config *c, size_t *keep,
			     struct sw_tensor_info *infos, size_t n)
{
	static const char *const norms[ARCH_SV_KINDS] = {"attn_norm", "ffn_norm", "final_norm"};
	struct arch_scale_design d;
	char why[64];
	size_t added = n;

	if (!c->scale_design[0] || arch_scale_design_parse(c->scale_design, &d, NULL, 0, why))
		return n;
	for (int k = 0; k < ARCH_SV_KINDS; k++)
		for (int l = k == ARCH_SV_HEAD ? -1 : 0; l < (k == ARCH_SV_HEAD ? 0 : c->n_layers); l++) {
			struct sw_tensor_info *t = &infos[added];
			if (d.shared[k] || ckpt_find_role(ck, norms[k], l) >= 0)
				continue;
			memset(t, 0, sizeof *t);
			family_info_for_role(c, norms[k], l, t);
			t->rank = 1;
			t->shape[0] = t->numel = c->d_model;
			t->kind = SW_KIND_VECTOR;
			t->dtype = SW_DTYPE_F32;
			strcpy(t->dtype_name, "F32");
			t->lr = t->wd = NAN;
			keep[added++] = UNIT_GAIN;
		}
	/* into model order with the rest (an insertion sort: few tensors move) */
	for (size_t i = n; i < added; i++)
		for (size_t j = i; j > 0 && arch_model_order_cmp(&infos[j - 1], &infos[j]) > 0; j--) {
			struct sw_tensor_info ti = infos[j];
			size_t tk = keep[j];
			infos[j] = infos[j - 1];
			keep[j] = keep[j - 1];
			infos[j - 1] = ti;
			keep[j - 1] = tk;
		}
	return added;
}

static int to_safetensors(struct ckpt *ck, const char *given, const char *in, const char *out,
			  const struct convert_opts *o, struct convert_result *r, struct sw_err *err)
{
	struct sw_config c = ckpt_meta(ck)->config;
	struct shard_plan *plan = NULL;
	struct export_files files = {0};
	const struct attr_map *all = NULL;
	struct attr_map global;
	char obj[SW_NAME_MAX + 16], attr[64];
	size_t count = ckpt_count(ck);
	char tmpdir[PATH_MAX] = "", path[PATH_MAX + 80];
	const char **names = NULL, **shard_of = NULL;
	struct keys_by_tensor g = {0};
	size_t *keep = NULL, nkeep = 0;
	struct sw_tensor_info *infos = NULL;
	struct form *forms = NULL;
	int rc, nshards = 0, exists, made = 0;

	attrmap_init(&global);
	r->to_safetensors = 1;
	if ((rc = check_representable(ck, err))) {
		blame(r, err, in);
		return rc;
	}
	if ((rc = check_out(ck, given, in, out, o, 1, &exists, r, err)))
		return rc;
	rc = attrmap_set(&global, "format", "pt", err);     /* transformers wants it */
	if (!rc)
		rc = ckpt_attrs(ck, &all, err);
	/* the root, /config, /optim, /metrics: what a model needs, not how to
	 * resume it; not a scale design, whose gains are folded (below), nor
	 * a reparameterization, whose gains are exported as they are */
	for (size_t i = 0; !rc && i < all->n; i++)
		if (attrmap_parse_key(all->kv[i].key, obj, sizeof obj, attr, sizeof attr) == 0 &&
		    (!strcmp(obj, "/") || !strcmp(obj, "/config") || !strcmp(obj, "/optim") ||
		     !strcmp(obj, "/metrics")) &&
		    (strcmp(obj, "/config") || (strcmp(attr, "scale_design") && strcmp(attr, "scale_reparam"))))
			rc = attrmap_set(&global, all->kv[i].key, all->kv[i].value, err);
	/* the multipliers and a scale design's gains are folded: the export
	 * has neither, and every Pre-Norm has its gain */
	if (!rc && attrmap_get(&global, ATTRMAP_PREFIX "config.multipliers"))
		rc = attrmap_set(&global, ATTRMAP_PREFIX "config.multipliers", "none", err);
	if (!rc) {
		size_t cap = count + 2 * (size_t)c.n_layers + 1;
		keep = malloc(cap * sizeof *keep);
		infos = malloc(cap * sizeof *infos);
		forms = malloc(cap * sizeof *forms);
		if (!keep || !infos || !forms)
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		for (size_t i = 0; !rc && i < count; i++)
			if (!foldable_multiplier(ck, ckpt_info(ck, i)) && !reparam_part(ck, ckpt_info(ck, i))) {
				infos[nkeep] = *ckpt_info(ck, i);
				keep[nkeep++] = i;
			}
		if (!rc)
			nkeep = add_unit_gains(ck, &c, keep, infos, nkeep);
		if (!rc)
			rc = plan_forms(ck, &c, keep, infos, forms, &nkeep, err);
	}
	if (!rc)
		rc = plan_shards(infos, nkeep, o->shard_size, sw_dtype_size(o->dtype), &plan,
				 &nshards, err);
	if (!rc)
		rc = group_keys(ck, all, &g, err);
	if (!rc) {
		files.name = calloc((size_t)nshards + 2, sizeof *files.name);
		names = calloc(nkeep + 1, sizeof *names);
		shard_of = calloc(nkeep + 1, sizeof *shard_of);
		if (!files.name || !names || !shard_of)
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	if (rc) {
		blame(r, err, in);
		goto out;
	}
	export_list(plan, nshards, &files);
	if ((rc = make_tmpdir(out, tmpdir, sizeof tmpdir, err))) {
		blame(r, err, out);
		goto out;
	}
	made = 1;
	c.tie_embeddings = ckpt_find_role(ck, "lm_head", -1) < 0;
	snprintf(path, sizeof path, "%s/config.json", tmpdir);
	rc = st_write_config(path, &c, o->dtype == SW_DTYPE_BF16 ? "bfloat16" : "float32", err);
	for (int k = 0; k < nshards && !rc; k++) {
		struct attr_map m;
		if ((rc = shard_meta(&plan[k], keep, forms, &global, all, &g, &m, err))) {
			blame(r, err, in);
			goto out;
		}
		snprintf(path, sizeof path, "%s/%s", tmpdir, plan[k].name);
		rc = write_shard(ck, in, &plan[k], keep, forms, infos, path, &m, o->dtype, r, err);
		attrmap_free(&m);
		for (size_t i = plan[k].lo; i < plan[k].hi; i++) {
			names[i] = infos[i].name;
			shard_of[i] = plan[k].name;
		}
	}
	if (!rc && nshards > 1) {
		snprintf(path, sizeof path, "%s/" INDEX_NAME, tmpdir);
		rc = st_write_index(path, r->bytes, names, shard_of, nkeep, err);
	}
	if (!rc)
		rc = publish(tmpdir, out, exists, &files, err);
	if (rc) {
		if (!r->culprit[0])
			blame_in_tmpdir(r, err, tmpdir, out);
		goto out;
	}
	made = 0;
	r->shards = nshards;
out:
	if (made)       /* nothing of a failed export stays, under any name */
		atomic_remove_dir(tmpdir);
	else if (tmpdir[0])
		atomic_forget(tmpdir);
	attrmap_free(&global);
	keys_by_tensor_free(&g);
	free(keep);
	free(infos);
	free(forms);
	free(plan);
	free(files.name);
	free(names);
	free(shard_of);
	return rc;
}

/* ---- safetensors -> HDF5 ------------------------------------------ */

/* The metadata's model sizes must be config.json's: a config.json edited
 * since the export would make the restored /config lie. */
static int check_meta_config(const struct ckpt *ck, const struct attr_map *m, struct sw_err *err)
{
	const struct sw_config *c = &ckpt_meta(ck)->config;
	const struct { const char *key; int64_t v; } sizes[] = {
		{"vocab_size", c->vocab_size}, {"d_model", c->d_model},
		{"n_layers", c->n_layers}, {"n_heads", c->n_heads},
		{"n_kv_heads", c->n_kv_heads}, {"head_dim", c->head_dim}, {"d_ff", c->d_ff},
	};
	/* and the architecture and the keys that change the function (a
	 * metadata key config.json no longer has disagrees with its default) */
	const struct { const char *key; const char *s; double d; } fn[] = {
		{"arch", c->arch, 0}, {"rope_scaling", c->rope_type, 0}, {"hidden_act", c->hidden_act, 0},
		{"rope_factor", NULL, c->rope_factor},
		{"rope_low_freq_factor", NULL, c->rope_low_freq_factor},
		{"rope_high_freq_factor", NULL, c->rope_high_freq_factor},
		{"rope_original_max_position_embeddings", NULL, (double)c->rope_original_max},
		{"partial_rotary_factor", NULL, c->rope_partial},
		{"sliding_window", NULL, (double)c->sliding_window},
		{"max_window_layers", NULL, (double)c->max_window_layers},
	};
	char key[80];

	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		const char *text;
		struct attr_value v;
		snprintf(key, sizeof key, ATTRMAP_PREFIX "config.%s", sizes[i].key);
		if (!(text = attrmap_get(m, key)))
			continue;
		attrmap_decode(text, &v);
		if (v.type != ATTR_INT || v.i != sizes[i].v)
			return sw_fail(err, SW_EDATA, "__metadata__: %s = %.32s disagrees with "
				       "config.json (%lld)", key, text, (long long)sizes[i].v);
	}
	for (size_t i = 0; i < sizeof fn / sizeof fn[0]; i++) {
		const char *text;
		struct attr_value v;
		int same;
		snprintf(key, sizeof key, ATTRMAP_PREFIX "config.%s", fn[i].key);
		if (!(text = attrmap_get(m, key)))
			continue;
		attrmap_decode(text, &v);
		same = fn[i].s ? v.type == ATTR_STR && !strcmp(v.s, fn[i].s) :
		       v.type == ATTR_INT ? (double)v.i == fn[i].d : v.type == ATTR_REAL && v.d == fn[i].d;
		if (!same)
			return sw_fail(err, SW_EDATA, "__metadata__: %s = %.32s disagrees with "
				       "config.json", key, text);
	}
	return SW_OK;
}

/* A tensor's block, role, layer and kind in the metadata must be what its
 * name and shape say: the tools trust these attributes. */
static int check_meta_tensor(const struct attr_map *m, const struct sw_tensor_info *t,
			     struct sw_err *err)
{
	char want[4][SW_ROLE_MAX], key[SW_NAME_MAX + 64];
	const char *attrs[4] = {"block", "role", "layer", "kind"};

	snprintf(want[0], sizeof want[0], "%s", sw_block_name(t->block));
	snprintf(want[1], sizeof want[1], "%s", t->role);
	snprintf(want[2], sizeof want[2], "%d", t->layer);
	snprintf(want[3], sizeof want[3], "%s", sw_kind_name(t->kind));
	for (int a = 0; a < 4; a++) {
		const char *got;
		snprintf(key, sizeof key, ATTRMAP_PREFIX "params.%s.%s", t->name, attrs[a]);
		if ((got = attrmap_get(m, key)) && strcmp(got, want[a]))
			return sw_fail(err, SW_EDATA, "__metadata__: %s = '%.32s' disagrees with "
				       "the tensor (%s)", key, got, want[a]);
	}
	return SW_OK;
}

/* Restore the attributes the metadata carries, typed, on the objects
 * written: the root, /config, /optim, /metrics and /params datasets. */
static int restore_attrs(struct h5w *w, const struct attr_map *m, struct sw_err *err)
{
	char obj[SW_NAME_MAX + 16], attr[64];
	hid_t file = h5w_file(w);

	for (size_t i = 0; i < m->n; i++) {
		struct attr_value v;
		hid_t o;
		int rc;

		if (attrmap_parse_key(m->kv[i].key, obj, sizeof obj, attr, sizeof attr) < 0)
			continue;
		if (!strcmp(obj, "/") && (!strcmp(attr, "scalewatch_format") ||
					  !strcmp(attr, "format_version")))
			continue;
		if (!strcmp(obj, "/") || !strncmp(obj, "/params/", 8)) {
			/* a tensor the file does not hold: nothing to restore */
			if (strcmp(obj, "/") && H5Lexists(file, obj, H5P_DEFAULT) <= 0)
				continue;
			o = H5Oopen(file, obj, H5P_DEFAULT);
		} else if (!strcmp(obj, "/config") || !strcmp(obj, "/optim") ||
			   !strcmp(obj, "/metrics")) {
			o = h5io_group(file, obj);
		} else {
			continue;       /* not a group of the format (scalewatch-format(5)) */
		}
		if (o < 0)
			return sw_fail(err, SW_EIO, "%s: cannot open", obj);
		attrmap_decode(m->kv[i].value, &v);
		rc = v.type == ATTR_INT ? h5io_put_i64(o, attr, v.i, err) :
		     v.type == ATTR_REAL ? h5io_put_f64(o, attr, v.d, err) :
					  h5io_put_str(o, attr, v.s, err);
		H5Oclose(o);
		if (rc) {
			sw_err_prefix(err, "%s", obj);
			return rc;
		}
	}
	return SW_OK;
}

static int to_hdf5(struct ckpt *ck, const char *given, const char *in, const char *out,
		   const struct convert_opts *o, struct convert_result *r, struct sw_err *err)
{
	const struct ckpt_meta *cm = ckpt_meta(ck);
	const struct attr_map *m;
	struct h5w *w = NULL;
	int rc, exists;

	r->to_safetensors = 0;
	if ((rc = check_rope_kept(&cm->config, err)) || (rc = ckpt_attrs(ck, &m, err)) ||
	    (rc = check_meta_config(ck, m, err))) {
		blame(r, err, in);
		return rc;
	}
	for (size_t i = 0; i < ckpt_count(ck); i++)
		if ((rc = check_meta_tensor(m, ckpt_info(ck, i), err))) {
			blame(r, err, in);
			return rc;
		}
	if ((rc = check_out(ck, given, in, out, o, 0, &exists, r, err)))
		return rc;
	if ((rc = h5w_create(out, "checkpoint", &w, err))) {
		blame(r, err, out);
		return rc;
	}
	/* what the safetensors do not say: step 0, tokens 0 */
	rc = h5w_set_i64(w, "/", "step", cm->has_step ? cm->step : 0, err);
	if (!rc)
		rc = h5w_set_i64(w, "/", "tokens", cm->has_step && cm->tokens >= 0 ? cm->tokens : 0, err);
	if (!rc)
		rc = h5w_write_config(w, &cm->config, err);
	for (size_t i = 0; i < ckpt_count(ck) && !rc; i++) {
		/* the gain the model applies, where the file holds w of 1 + w */
		float offset = (float)family_gain_offset(&cm->config, cm->source, ckpt_info(ck, i));
		float *gain = NULL;
		struct ckpt_view v;
		if ((rc = ckpt_load(ck, i, &v, err))) {
			blame(r, err, in);
			h5w_abort(w);
			return rc;
		}
		if (offset != 0 && !(gain = malloc((size_t)v.numel * sizeof *gain)))
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		for (int64_t j = 0; gain && j < v.numel; j++)
			gain[j] = v.data[j] + offset;
		if (!rc)
			rc = h5w_write_tensor(w, "/params", ckpt_info(ck, i), gain ? gain : v.data, 1, err);
		free(gain);
		if (ckptsrc_check(&v, err)) {
			sw_err_prefix(err, "%s", ckpt_info(ck, i)->name);
			ckpt_release(ck, &v);
			blame(r, err, in);
			h5w_abort(w);
			return SW_EIO;
		}
		ckpt_release(ck, &v);
		r->tensors++;
		r->bytes += (uint64_t)ckpt_info(ck, i)->numel * 4;
	}
	if (!rc)
		rc = restore_attrs(w, m, err);
	if (rc)
		h5w_abort(w);
	else
		rc = h5w_commit(w, err);
	if (rc)
		blame(r, err, out);
	else
		r->shards = 1;
	return rc;
}

int convert_to_hdf5(enum convert_to to, enum ckpt_format in, const char *out)
{
	size_t n = strlen(out);

	if (to != CONVERT_TO_AUTO)
		return to == CONVERT_TO_HDF5;
	if (in == CKPT_HDF5 || in == CKPT_SAFETENSORS)
		return in == CKPT_SAFETENSORS;
	return (n > 3 && !strcmp(out + n - 3, ".h5")) || (n > 5 && !strcmp(out + n - 5, ".hdf5"));
}

int convert_run(const char *in, const char *out, const struct convert_opts *o,
		struct convert_result *r, struct sw_err *err)
{
	struct ckpt *ck;
	int rc;

	memset(r, 0, sizeof *r);
	if ((rc = ckpt_open(in, &ck, err))) {
		blame(r, err, in);
		return rc;
	}
	/* both formats it writes name tensors as the Llama family does */
	if (!family_computed(ckpt_meta(ck)->config.arch)) {
		const char *a = ckpt_meta(ck)->config.arch;
		rc = sw_fail(err, SW_EDATA, "architecture '%s' is read for its matrices only: "
			     "sw-convert writes %s", a[0] ? a : "(none)", FAMILY_COMPUTED_LIST);
		blame(r, err, in);
	} else if (convert_to_hdf5(o->to, ckpt_meta(ck)->format, out))
		rc = to_hdf5(ck, in, ckpt_path(ck), out, o, r, err);
	else
		rc = to_safetensors(ck, in, ckpt_path(ck), out, o, r, err);
	ckpt_close(ck);
	return rc;
}
