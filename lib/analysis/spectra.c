/* spectra.c - the spectra of a checkpoint's matrices (see spectra.h). */
#include "spectra.h"
#include "../formats/ckpt.h"
#include "../base/arch.h"
#include "../base/dtype.h"
#include "../base/grow.h"
#include "matsched.h"
#include "../base/select.h"
#include "spectrum.h"
#include "esdfit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Heads of an attention projection: q, k, v by rows, o by columns.
 * 1 with *by_cols set, 0 if t has no heads, -1 (err) if they do not fit. */
static int head_layout(const struct sw_tensor_info *t, int *by_cols, struct sw_err *err)
{
	int64_t span;

	enum arch_heads heads = arch_role_heads(t->role);

	*by_cols = heads == ARCH_HEADS_COLS;
	if (heads == ARCH_HEADS_NONE || t->n_heads <= 0 || t->head_dim <= 0)
		return 0;
	span = *by_cols ? t->shape[1] : t->shape[0];
	if ((int64_t)t->n_heads * t->head_dim != span) {
		sw_fail(err, SW_EDATA, "%s: %d heads of %d do not fill its %lld %s", t->name,
			t->n_heads, t->head_dim, (long long)span, *by_cols ? "columns" : "rows");
		return -1;
	}
	return 1;
}

static int any_tensor_has_lr(const struct ckpt *ck)
{
	for (size_t i = 0; i < ckpt_count(ck); i++)
		if (!isnan(ckpt_info(ck, i)->lr))
			return 1;
	return 0;
}

int spectra_plan(const struct ckpt *ck, const struct sw_select *sel,
		 const struct spectra_opts *o, struct spectra_job **out, size_t *nout,
		 struct sw_err *err)
{
	const struct ckpt_meta *m = ckpt_meta(ck);
	size_t count = ckpt_count(ck), n = 0;
	long embed = ckpt_find_role(ck, "embed", -1);
	struct sw_tensor_info tied;
	struct spectra_job *jobs;
	int want_tied = 0, by_cols;

	*out = NULL;
	*nout = 0;
	if (o->need_scale && m->format != CKPT_HDF5 && !any_tensor_has_lr(ck))
		/* an export by sw-convert carries lr, wd and wd_mode in its metadata */
		return sw_fail(err, SW_EDATA, "%s%s carries no per-tensor lr, wd and wd_mode: %s "
			       "needs them", ckpt_format_name(ck),
			       m->format == CKPT_SAFETENSORS ? " without scalewatch metadata" : "",
			       o->normalize ? "--normalize" : "--fit");
	if (!(jobs = calloc(count + 1, sizeof *jobs)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	if (m->head_tied && embed >= 0) {
		tied = *ckpt_info(ck, (size_t)embed);
		arch_info_for_role(&m->config, "lm_head", -1, &tied);
		want_tied = select_match_info(sel, &tied) && !o->per_head;
	}
	for (size_t i = 0; i < count; i++) {
		const struct sw_tensor_info *t = ckpt_info(ck, i);

		if (t->kind != SW_KIND_MATRIX || !select_match_info(sel, t))
			continue;
		/* per head: the attention projections (a bad layout is reported
		 * when computed) */
		if (o->per_head && !head_layout(t, &by_cols, NULL))
			continue;
		jobs[n].tensor = i;
		jobs[n].info = *t;
		jobs[n].keep = (long)i == embed && want_tied && !o->top;
		n++;
	}
	if (want_tied) {
		jobs[n].tensor = (size_t)embed;
		jobs[n].info = tied;
		jobs[n].tied_head = 1;
		n++;
	}
	*out = jobs;
	*nout = n;
	return SW_OK;
}

void spectra_result_free(struct spectra_result *r)
{
	free(r->s);
	free(r->frob_sq);
	free(r->rand_s);
	memset(r, 0, sizeof *r);
}

void spectra_cache_free(struct spectra_cache *c)
{
	free(c->s);
	memset(c, 0, sizeof *c);
}

/* The spectrum of one view: every value, or the top K, into s; its
 * squared Frobenius norm into *frob_sq; how many values into *n. */
static int view_spectrum(const struct spec_view *v, int64_t top, double *s,
			 int64_t *n, double *frob_sq, struct sw_err *err)
{
	int64_t k = v->rows < v->cols ? v->rows : v->cols;
	struct spectrum_top_info info;

	if (!top) {
		*n = k;
		return spectrum_full(v, s, frob_sq, err);
	}
	*n = top < k ? top : k;
	return spectrum_top(v, *n, SPECTRUM_TOP_REL_TOL, s, frob_sq, &info, err);
}

/* r's arrays for count spectra of up to k values each. */
static int result_alloc(struct spectra_result *r, int64_t count, int64_t k, struct sw_err *err)
{
	r->count = count;
	r->s = malloc((size_t)(count * k > 0 ? count * k : 1) * sizeof *r->s);
	r->frob_sq = malloc((size_t)(count > 0 ? count : 1) * sizeof *r->frob_sq);
	if (!r->s || !r->frob_sq)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	return SW_OK;
}

/* Divide the values (and the squared norms by its square) by the scale. */
static void divide_by_scale(struct spectra_result *r)
{
	for (int64_t j = 0; j < r->count * r->n; j++)
		r->s[j] /= r->scale;
	for (int64_t h = 0; h < r->count; h++)
		r->frob_sq[h] /= r->scale * r->scale;
	for (int64_t j = 0; r->rand_s && j < r->n; j++)
		r->rand_s[j] /= r->scale;
}

/* --randomize: the spectrum of the job's matrix with its elements
 * shuffled (in float32, to which every stored type widens exactly: the
 * same multiset of values), into r->rand_s. The shuffle's seed is o's
 * with the tensor's index, so a matrix's shuffle is the same whichever
 * others are selected or run beside it (a tied head's is the embedding's). */
static int randomized_spectrum(struct ckpt *ck, const struct spectra_job *job,
			       const struct spectra_opts *o, struct spectra_result *r, struct sw_err *err)
{
	const struct sw_tensor_info *t = &job->info;
	int64_t rows = t->shape[0], cols = t->shape[1], k = rows < cols ? rows : cols, n;
	float *w = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof *w);
	struct ckpt_view cv;
	struct spec_view v;
	double frob_sq;
	int rc;

	if (!w || !(r->rand_s = malloc((size_t)(k > 0 ? k : 1) * sizeof *r->rand_s))) {
		free(w);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	MATSCHED_CRITICAL
	rc = ckpt_load_raw(ck, job->tensor, &cv, err);
	if (rc) {
		free(w);
		return rc;
	}
	rc = sw_to_f32(cv.raw_dtype, cv.raw, w, (size_t)(rows * cols), err);
	if (!rc && ckptsrc_check(&cv, err))
		rc = SW_EIO;
	MATSCHED_CRITICAL
	ckpt_release(ck, &cv);
	if (!rc) {
		/* splitmix64 (rng_seed) spreads seed + index over the state */
		esdfit_shuffle(w, rows * cols, o->seed + 0x9E3779B97F4A7C15ULL * (uint64_t)(job->tensor + 1));
		v = gram_view(w, SW_DTYPE_F32, rows, cols);
		rc = view_spectrum(&v, 0, r->rand_s, &n, &frob_sq, err);
	}
	if (rc)
		sw_err_prefix(err, "%s: randomized", ckpt_info(ck, job->tensor)->name);
	free(w);
	return rc;
}

/* Every head's spectrum: NaN/Inf is the tensor's fault, said once. */
static int heads_spectra(const struct spec_view *whole, const struct sw_tensor_info *t,
			 int by_cols, int64_t top, struct spectra_result *r, struct sw_err *err)
{
	int64_t rows = t->shape[0], cols = t->shape[1];
	struct spec_scan sc;
	int64_t k = by_cols ? (rows < t->head_dim ? rows : t->head_dim)
			    : (cols < t->head_dim ? cols : t->head_dim);
	int rc;

	if ((rc = spectrum_scan(whole, &sc, err)))
		return rc;
	if (sc.nonfinite)
		return sw_fail(err, SW_EDATA, "%s: %lld of %lld values are NaN or Inf", t->name,
			       (long long)sc.nonfinite, (long long)(rows * cols));
	if ((rc = result_alloc(r, t->n_heads, k, err)))
		return rc;
	for (int64_t h = 0; h < t->n_heads; h++) {
		struct spec_view v = gram_head_view(whole, by_cols, h, t->head_dim);
		if ((rc = view_spectrum(&v, top, r->s + h * k, &r->n, &r->frob_sq[h], err))) {
			sw_err_prefix(err, "%s: head %lld", t->name, (long long)h);
			return rc;
		}
		/* top may give fewer than k: keep the rows of r->s n apart */
		if (r->n < k)
			memmove(r->s + h * r->n, r->s + h * k, (size_t)r->n * sizeof *r->s);
	}
	return SW_OK;
}

int spectra_compute(struct ckpt *ck, const struct spectra_job *job, const struct spectra_opts *o,
		    struct spectra_cache *cache, struct spectra_result *r, struct sw_err *err)
{
	const struct sw_tensor_info *t = &job->info;
	int64_t rows = t->shape[0], cols = t->shape[1], k = rows < cols ? rows : cols;
	struct ckpt_view cv;
	int by_cols = 0, heads, rc;

	memset(r, 0, sizeof *r);
	r->scale = NAN;
	if (o->need_scale && (rc = spectrum_equilibrium_scale(t, &r->scale, err)))
		return rc;
	heads = o->per_head ? head_layout(t, &by_cols, err) : 0;
	if (heads < 0)
		return SW_EDATA;
	if (job->tied_head && cache->s) {
		/* one tensor, two roles: the spectrum is the embedding's */
		if ((rc = result_alloc(r, 1, cache->n, err)))
			return rc;
		r->n = cache->n;
		memcpy(r->s, cache->s, (size_t)cache->n * sizeof *r->s);
		r->frob_sq[0] = cache->frob_sq;
	} else {
		struct spec_view v;

		/* BF16 and F16 in place: the kernels widen a tile at a time */
		MATSCHED_CRITICAL
		rc = ckpt_load_raw(ck, job->tensor, &cv, err);
		if (rc)
			return rc;
		v = gram_view(cv.raw, cv.raw_dtype, rows, cols);
		if (heads) {
			rc = heads_spectra(&v, t, by_cols, o->top, r, err);
		} else {
			/* a fault of the data is the stored tensor's (a tied head's
			 * is the embedding's, said under its name) */
			if (!(rc = result_alloc(r, 1, k, err)) &&
			    (rc = view_spectrum(&v, o->top, r->s, &r->n, &r->frob_sq[0], err)))
				sw_err_prefix(err, "%s", ckpt_info(ck, job->tensor)->name);
		}
		/* a file that shrank meanwhile explains any result: none is kept */
		if (ckptsrc_check(&cv, err)) {
			sw_err_prefix(err, "%s", ckpt_info(ck, job->tensor)->name);
			rc = SW_EIO;
		}
		MATSCHED_CRITICAL
		ckpt_release(ck, &cv);
		if (rc)
			return rc;
		if (job->keep) {
			spectra_cache_free(cache);
			if ((cache->s = malloc((size_t)(r->n > 0 ? r->n : 1) * sizeof *cache->s))) {
				memcpy(cache->s, r->s, (size_t)r->n * sizeof *r->s);
				cache->n = r->n;
				cache->frob_sq = r->frob_sq[0];
			}
		}
	}
	if (o->randomize && !o->per_head && !o->top && (rc = randomized_spectrum(ck, job, o, r, err)))
		return rc;
	if (o->normalize)
		divide_by_scale(r);
	return SW_OK;
}

void spectra_job_cost(const struct spectra_job *job, const struct spectra_opts *o,
		      struct matsched_item *c)
{
	const struct sw_tensor_info *t = &job->info;
	double rows = (double)t->shape[0], cols = (double)t->shape[1];
	double n = rows < cols ? rows : cols;

	/* the matrix (BF16/F16 in place, else float32), and the dense Gram
	 * matrix or the Lanczos basis of about 140 vectors; a tied head
	 * copies the embedding's values */
	c->after = job->tied_head;
	c->mem = job->tied_head ? 0 : (t->dtype == SW_DTYPE_BF16 || t->dtype == SW_DTYPE_F16 ? 2.0 : 4.0) * rows * cols +
		 (o->top ? 8.0 * n * 140 : 8.0 * n * n + 32.0 * 1048576);
	c->work = job->tied_head ? 0 : o->top ? rows * cols * 64 : rows * cols * n + n * n * n;
	if (o->randomize) {
		/* the shuffled float32 copy and its spectrum, a tied head's too */
		c->mem += 4.0 * rows * cols + 8.0 * n * n + 32.0 * 1048576;
		c->work += rows * cols * n + n * n * n;
	}
}

void spectra_dims(const struct sw_tensor_info *t, int per_head, int64_t *rows, int64_t *cols)
{
	int by_cols;

	*rows = t->shape[0];
	*cols = t->shape[1];
	if (per_head && head_layout(t, &by_cols, NULL) == 1) {
		if (by_cols)
			*cols = t->head_dim;
		else
			*rows = t->head_dim;
	}
}

/* ---- --fit ------------------------------------------------------------ */

int spectra_fit_add(struct spectra_fit_set *f, const struct sw_tensor_info *t,
		    const struct spectra_result *r, int64_t d_model, struct sw_err *err)
{
	struct spectra_fit_point *p;

	if (r->n < 1)
		return SW_OK;
	if (SW_GROW(f->p, &f->cap, f->n + 1) < 0)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	p = &f->p[f->n++];
	snprintf(p->role, sizeof p->role, "%s", t->role);
	p->sigma_top = r->s[0];
	p->rms = sqrt(r->frob_sq[0] / ((double)t->shape[0] * (double)t->shape[1]));
	p->scale = r->scale;
	p->d_model = (double)d_model;
	return SW_OK;
}

void spectra_fit_free(struct spectra_fit_set *f)
{
	free(f->p);
	memset(f, 0, sizeof *f);
}

int spectra_fit_rows(const struct spectra_fit_set *f, struct spectra_fit_row **out, size_t *nout,
		     struct sw_err *err)
{
	double *y = malloc((f->n ? f->n : 1) * 4 * sizeof *y), *y2, *x1, *x2;
	struct spectra_fit_row *rows = calloc(2 * f->n + 1, sizeof *rows);
	size_t nrows = 0;

	*out = NULL;
	*nout = 0;
	if (!y || !rows) {
		free(y);
		free(rows);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	y2 = y + f->n;
	x1 = y2 + f->n;
	x2 = x1 + f->n;
	for (size_t i = 0; i < f->n; i++) {
		int64_t n = 0;
		int first = 1;

		for (size_t j = 0; j < i && first; j++)
			first = strcmp(f->p[j].role, f->p[i].role) != 0;
		if (!first)
			continue;
		for (size_t j = i; j < f->n; j++) {
			if (strcmp(f->p[j].role, f->p[i].role))
				continue;
			y[n] = f->p[j].sigma_top;
			y2[n] = f->p[j].rms;
			x1[n] = f->p[j].scale;
			x2[n] = f->p[j].d_model;
			n++;
		}
		for (int q = 0; q < 2; q++) {
			struct spectra_fit_row *row = &rows[nrows++];

			snprintf(row->role, sizeof row->role, "%s", f->p[i].role);
			row->quantity = q ? "rms" : "sigma_top";
			row->rc = powerfit_fit(q ? y2 : y, x1, x2, n, &row->fit, &row->err);
			if (row->rc)
				sw_err_prefix(&row->err, "--fit: role %s, %s", row->role, row->quantity);
		}
	}
	free(y);
	*out = rows;
	*nout = nrows;
	return SW_OK;
}
