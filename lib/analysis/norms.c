/* norms.c - operator norms of a weight matrix (see norms.h). */
#include "norms.h"
#include "../formats/ckpt.h"
#include "../base/dtype.h"
#include "linalg.h"
#include "matsched.h"
#include "../base/select.h"
#include "scalevec.h"
#include "spectrum.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Count the NaN/Inf entries (only when the fast pass found some). */
static int64_t count_nonfinite(const float *W, int64_t n)
{
	int64_t bad = 0;

	for (int64_t i = 0; i < n; i++)
		bad += !isfinite(W[i]);
	return bad;
}

/* Rows of a BF16/F16 view converted at a time: a few MiB of float32. */
#define PASS_TILE_VALUES ((int64_t)1 << 20)

/*
 * The row/column pass over a view: float32 in place directly; BF16/F16 a
 * tile of rows at a time widened to float32 (exactly), the tiles' sums
 * merged. *bad: the NaN/Inf values, counted only when a row has one.
 */
static int view_pass(const struct spec_view *v, double *row_sq, double *col_sq,
		     struct mat_pass *pass, int64_t *bad, struct sw_err *err)
{
	int64_t rows = v->rows, cols = v->cols, step;
	double *tile_col = NULL;
	float *tile = NULL;
	int rc = SW_OK;

	*bad = 0;
	if (v->dtype == SW_DTYPE_F32) {
		if ((rc = linalg_row_col_sumsq(v->W, rows, cols, v->col_scale, row_sq, col_sq, pass, err)))
			return rc;
		if (pass->bad_rows)
			*bad = count_nonfinite(v->W, rows * cols);
		return SW_OK;
	}
	step = cols > 0 && PASS_TILE_VALUES / cols > 0 ? PASS_TILE_VALUES / cols : 1;
	tile = malloc((size_t)(step * (cols > 0 ? cols : 1)) * sizeof *tile);
	tile_col = malloc((size_t)(cols > 0 ? cols : 1) * sizeof *tile_col);
	if (!tile || !tile_col) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	memset(pass, 0, sizeof *pass);
	memset(col_sq, 0, (size_t)cols * sizeof *col_sq);
	for (int64_t r0 = 0; r0 < rows; r0 += step) {
		int64_t nr = rows - r0 < step ? rows - r0 : step;
		size_t size = (size_t)sw_dtype_size(v->dtype);
		struct mat_pass tp;

		for (int64_t r = 0; r < nr; r++)
			if ((rc = sw_to_f32(v->dtype, (const unsigned char *)v->W +
					    (size_t)((r0 + r) * v->ld) * size,
					    tile + r * cols, (size_t)cols, err)))
				goto out;
		if ((rc = linalg_row_col_sumsq(tile, nr, cols, v->col_scale, row_sq + r0, tile_col,
					       &tp, err)))
			goto out;
		for (int64_t j = 0; j < cols; j++)
			col_sq[j] += tile_col[j];
		pass->frob_sq += tp.frob_sq;
		pass->max_abs = fmax(pass->max_abs, tp.max_abs);
		pass->bad_rows += tp.bad_rows;
		if (tp.bad_rows)
			*bad += count_nonfinite(tile, nr * cols);
	}
out:
	free(tile);
	free(tile_col);
	return rc;
}

int norms_summarize_view(const struct spec_view *v, enum norms_what what, const double *start,
			 double *top_vec, struct mat_summary *s, struct sw_err *err)
{
	int64_t rows = v->rows, cols = v->cols, bad;
	double *row_sq = malloc((size_t)(rows > 0 ? rows : 1) * sizeof *row_sq);
	double *col_sq = malloc((size_t)(cols > 0 ? cols : 1) * sizeof *col_sq);
	struct mat_pass pass;
	struct sigma_info sig;
	int rc;

	s->rows = rows;
	s->cols = cols;
	if (!row_sq || !col_sq) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	if ((rc = view_pass(v, row_sq, col_sq, &pass, &bad, err)))
		goto out;
	if (pass.bad_rows) {
		/* products are taken in double: a finite W and scale give finite sums */
		if (bad || !v->col_scale)
			rc = sw_fail(err, SW_EDATA, "%lld of %lld values are NaN or Inf",
				     (long long)bad, (long long)(rows * cols));
		else
			rc = sw_fail(err, SW_EDATA, "%lld of the %lld column scales folded in "
				     "(the final norm's gain) are NaN or Inf",
				     (long long)count_nonfinite(v->col_scale, cols), (long long)cols);
		goto out;
	}
	s->max_row_sq = s->max_col_sq = 0;
	for (int64_t i = 0; i < rows; i++)
		s->max_row_sq = fmax(s->max_row_sq, row_sq[i]);
	for (int64_t j = 0; j < cols; j++)
		s->max_col_sq = fmax(s->max_col_sq, col_sq[j]);
	s->frob_sq = pass.frob_sq;
	s->max_abs = pass.max_abs;
	s->sigma_max = NAN;
	s->lanczos_steps = 0;
	s->have_top_vec = 0;
	if (what == NORMS_NO_SPECTRAL)
		goto out;
	/* every value was checked finite above, and the pass has ||W||_F */
	if ((rc = spectrum_sigma_max(v, NORMS_SIGMA_REL_TOL, start, pass.frob_sq, top_vec, &sig,
				     err)))
		goto out;
	s->sigma_max = sig.sigma;
	s->lanczos_steps = sig.iterations;
	s->have_top_vec = top_vec && sig.iterations > 0;
out:
	free(row_sq);
	free(col_sq);
	return rc;
}

int norms_summarize(const float *W, int64_t rows, int64_t cols,
		    const float *col_scale, enum norms_what what, struct mat_summary *s,
		    struct sw_err *err)
{
	struct spec_view v = spectrum_view(W, rows, cols);

	v.col_scale = col_scale;
	return norms_summarize_view(&v, what, NULL, NULL, s, err);
}

void norms_of_operator(const struct mat_summary *s, int transposed, struct op_norms *o)
{
	/* rows of the operator are columns of the stored matrix when transposed */
	double max_out_sq = transposed ? s->max_col_sq : s->max_row_sq;
	double max_in_sq = transposed ? s->max_row_sq : s->max_col_sq;

	o->d_out = transposed ? s->cols : s->rows;
	o->d_in = transposed ? s->rows : s->cols;
	o->rms_to_inf = sqrt((double)o->d_in) * sqrt(max_out_sq);
	o->rms_to_rms = sqrt((double)o->d_in / (double)o->d_out) * s->sigma_max;
	o->one_to_rms = sqrt(max_in_sq) / sqrt((double)o->d_out);
	o->spectral = s->sigma_max;
	o->frobenius = sqrt(s->frob_sq);
	o->rms = sqrt(s->frob_sq / ((double)o->d_out * (double)o->d_in));
	o->max_abs = s->max_abs;
}

static void op_norms_unknown(struct op_norms *o)
{
	o->d_out = o->d_in = 0;
	o->rms_to_inf = o->rms_to_rms = o->one_to_rms = NAN;
	o->spectral = o->frobenius = o->rms = o->max_abs = NAN;
}

/*
 * W and W diag(g) (the view's col_scale) summarized together: a pass each,
 * their sigma_max by spectrum_sigma_max_pair, which shares the passes over
 * W of the two Lanczos runs.
 */
static int summarize_pair(const struct spec_view *v, struct mat_summary *raw,
			  struct mat_summary *folded, struct sw_err *err)
{
	struct spec_view plain = *v;
	struct sigma_info a, b;
	int rc;

	plain.col_scale = NULL;
	if ((rc = norms_summarize_view(&plain, NORMS_NO_SPECTRAL, NULL, NULL, raw, err)) ||
	    (rc = norms_summarize_view(v, NORMS_NO_SPECTRAL, NULL, NULL, folded, err)))
		return rc;
	/* every value was checked finite by the passes, which have ||W||_F */
	if ((rc = spectrum_sigma_max_pair(v, NORMS_SIGMA_REL_TOL, raw->frob_sq, folded->frob_sq,
					  &a, &b, err)))
		return rc;
	raw->sigma_max = a.sigma;
	raw->lanczos_steps = a.iterations;
	folded->sigma_max = b.sigma;
	folded->lanczos_steps = b.iterations;
	return SW_OK;
}

/* Whether the folded head is computed with the raw head (summarize_pair):
 * not when |g_j| is the same for every j (W diag(g) is W scaled, and a
 * Lanczos run started from W's top vector ends in a step or two:
 * norms_compute), nor when a g_j is NaN or Inf (the folded row's error
 * is its own; the raw head is still computed) */
static int gain_pairs(const float *g, int64_t n)
{
	int uniform = 1;

	for (int64_t j = 0; j < n; j++) {
		if (!isfinite(g[j]))
			return 0;
		uniform &= fabsf(g[j]) == fabsf(g[0]);
	}
	return !uniform;
}

int norms_output_head(const float *head, int64_t vocab, int64_t d_model, const float *gamma,
		      enum norms_what what, struct head_norms *out, struct sw_err *err)
{
	struct mat_summary s, f;
	struct spec_view v;
	int rc;

	op_norms_unknown(&out->folded);
	if (gamma && what == NORMS_ALL) {
		v = spectrum_view(head, vocab, d_model);
		v.col_scale = gamma;
		if ((rc = summarize_pair(&v, &s, &f, err)))
			return rc;
		norms_of_operator(&s, 0, &out->raw);
		norms_of_operator(&f, 0, &out->folded);
		return SW_OK;
	}
	if ((rc = norms_summarize(head, vocab, d_model, NULL, what, &s, err)))
		return rc;
	norms_of_operator(&s, 0, &out->raw);
	if (!gamma)
		return SW_OK;
	if ((rc = norms_summarize(head, vocab, d_model, gamma, what, &s, err)))
		return rc;
	norms_of_operator(&s, 0, &out->folded);
	return SW_OK;
}

/* ---- over a checkpoint -------------------------------------------------- */

/* The tensor that stores the head: lm_head, or the embedding when tied. */
static long head_tensor(const struct ckpt *ck)
{
	long head = ckpt_find_role(ck, "lm_head", -1);

	if (head < 0 && ckpt_meta(ck)->head_tied)
		head = ckpt_find_role(ck, "embed", -1);
	return head;
}

/*
 * Load tensor i and summarize it with its columns scaled by the final
 * norm's gain when folded (checked to have one entry per column). With
 * pair not NULL (folded 0), the folded summary too, into pair, when the
 * gain is not uniform (summarize_pair); *pair_done says whether it was.
 */
static int summarize_tensor(struct ckpt *ck, size_t i, int folded, enum norms_what what,
			    const double *start, double *top_vec, struct mat_summary *s,
			    struct mat_summary *pair, int *pair_done, struct sw_err *err)
{
	const struct sw_tensor_info *t = ckpt_info(ck, i);
	struct ckpt_view v, gv;
	struct spec_view view;
	long g = -1;
	int rc;

	memset(&gv, 0, sizeof gv);
	if (t->rank != 2)
		return sw_fail(err, SW_EDATA, "%s is not a matrix", t->name);
	if (pair_done)
		*pair_done = 0;
	if (folded || pair) {
		g = ckpt_find_role(ck, "final_norm", -1);
		if (g < 0)
			return sw_fail(err, SW_EDATA, "no final norm gain to fold into %s", t->name);
		if (ckpt_info(ck, (size_t)g)->numel != t->shape[1])
			return sw_fail(err, SW_EDATA, "final norm gain has %lld entries, the head %lld columns",
				       (long long)ckpt_info(ck, (size_t)g)->numel, (long long)t->shape[1]);
		MATSCHED_CRITICAL
		rc = scalevec_load(ck, (size_t)g, &gv, err);
		if (rc)
			return rc;
	}
	MATSCHED_CRITICAL
	rc = ckpt_load_raw(ck, i, &v, err);
	if (rc) {
		MATSCHED_CRITICAL
		ckpt_release(ck, &gv);
		return rc;
	}
	view = gram_view(v.raw, v.raw_dtype, t->shape[0], t->shape[1]);
	view.col_scale = folded ? gv.data : NULL;
	if (pair && what == NORMS_ALL && gain_pairs(gv.data, t->shape[1])) {
		view.col_scale = gv.data;
		rc = summarize_pair(&view, s, pair, err);
		*pair_done = !rc;
	} else {
		rc = norms_summarize_view(&view, what, start, top_vec, s, err);
	}
	/* a file that shrank meanwhile explains any result: none is kept */
	if (ckptsrc_check(&v, err) || ckptsrc_check(&gv, err))
		rc = SW_EIO;
	MATSCHED_CRITICAL
	{
		ckpt_release(ck, &v);
		ckpt_release(ck, &gv);
	}
	if (rc && !strstr(err->msg, t->name))
		sw_err_prefix(err, "%s", t->name);
	return rc;
}

int norms_output_head_ckpt(struct ckpt *ck, enum norms_what what, struct head_norms *out,
			   struct sw_err *err)
{
	long head = head_tensor(ck);
	struct mat_summary s, f;
	int rc, paired;

	op_norms_unknown(&out->folded);
	if (head < 0)
		return sw_fail(err, SW_EDATA, "no output head (lm_head, or an embedding tied to it)");
	if (ckpt_find_role(ck, "final_norm", -1) < 0) {
		/* no final norm gain: nothing to fold */
		if ((rc = summarize_tensor(ck, (size_t)head, 0, what, NULL, NULL, &s, NULL, NULL,
					   err)))
			return rc;
		norms_of_operator(&s, 0, &out->raw);
		return SW_OK;
	}
	if ((rc = summarize_tensor(ck, (size_t)head, 0, what, NULL, NULL, &s, &f, &paired, err)))
		return rc;
	norms_of_operator(&s, 0, &out->raw);
	if (!paired &&
	    (rc = summarize_tensor(ck, (size_t)head, 1, what, NULL, NULL, &f, NULL, NULL, err)))
		return rc;
	norms_of_operator(&f, 0, &out->folded);
	return SW_OK;
}

static void add_row(struct norms_row *rows, size_t *n, enum norms_row_kind kind, size_t tensor,
		    const struct sw_tensor_info *info, const char *role)
{
	struct norms_row *r = &rows[(*n)++];

	r->kind = kind;
	r->tensor = tensor;
	r->info = *info;
	snprintf(r->info.role, sizeof r->info.role, "%s", role);
}

/* The folded head's row goes with --role lm_head_folded and with lm_head. */
static int folded_selected(const struct sw_select *sel, const struct sw_tensor_info *h)
{
	return select_match(sel, h->name, h->block, "lm_head_folded", -1, h->expert) ||
	       select_match(sel, h->name, h->block, "lm_head", -1, h->expert);
}

int norms_plan(const struct ckpt *ck, const struct sw_select *sel, struct norms_row **out,
	       size_t *nout, struct sw_err *err)
{
	size_t count = ckpt_count(ck), n = 0;
	long head = head_tensor(ck), gain = ckpt_find_role(ck, "final_norm", -1);
	struct norms_row *rows = malloc((count + 3) * sizeof *rows);
	struct sw_tensor_info h;

	*out = NULL;
	*nout = 0;
	if (!rows)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (size_t i = 0; i < count; i++) {
		const struct sw_tensor_info *t = ckpt_info(ck, i);
		if (t->kind == SW_KIND_MATRIX && select_match_info(sel, t))
			add_row(rows, &n, NORMS_ROW_TENSOR, i, t, t->role);
		/* the folded head is the head's second row: a head of one row
		 * is a vector (kind by shape), and has neither */
		if ((long)i == head && !ckpt_meta(ck)->head_tied && gain >= 0 &&
		    t->kind == SW_KIND_MATRIX && folded_selected(sel, t))
			add_row(rows, &n, NORMS_ROW_FOLDED_HEAD, i, t, "lm_head_folded");
	}
	for (size_t r = 0; r < n; r++)
		rows[r].folded_follows = 0;
	if (head >= 0 && ckpt_meta(ck)->head_tied &&
	    ckpt_info(ck, (size_t)head)->kind == SW_KIND_MATRIX) {
		/* the tied head is listed under its own name, after the
		 * layers; an embedding of one row is a vector: neither row,
		 * as it has none of its own */
		h = *ckpt_info(ck, (size_t)head);
		arch_info_for_role(&ckpt_meta(ck)->config, "lm_head", -1, &h);
		if (select_match_info(sel, &h))
			add_row(rows, &n, NORMS_ROW_TIED_HEAD, (size_t)head, &h, "lm_head");
		if (gain >= 0 && folded_selected(sel, &h))
			add_row(rows, &n, NORMS_ROW_FOLDED_HEAD, (size_t)head, &h, "lm_head_folded");
	}
	/* the first row that reads the head's tensor computes the folded
	 * head with it (norms_compute), the passes over W shared */
	for (size_t r = 0; r < n; r++)
		if (rows[r].kind == NORMS_ROW_FOLDED_HEAD)
			for (size_t q = 0; q < r; q++)
				if ((long)rows[q].tensor == head) {
					rows[q].folded_follows = 1;
					break;
				}
	*out = rows;
	*nout = n;
	return SW_OK;
}

void norms_row_cost(const struct norms_row *row, struct matsched_item *c)
{
	double rows = (double)row->info.shape[0], cols = (double)row->info.shape[1];

	/* the matrix (BF16/F16 in place, else float32), its row and column
	 * sums, the Lanczos basis; a tied head reuses the embedding's pass */
	/* the folded head reads the head's tensor again: after the others,
	 * so its mapping is not held twice at once */
	c->after = row->kind == NORMS_ROW_TIED_HEAD || row->kind == NORMS_ROW_FOLDED_HEAD;
	c->mem = c->after ? 0 : (row->info.dtype == SW_DTYPE_BF16 || row->info.dtype == SW_DTYPE_F16 ? 2.0 : 4.0) *
		 rows * cols + 8.0 * (rows + cols) * 150;
	c->work = c->after ? 0 : rows * cols;
}

/* the head's top right singular vector, kept by the head's own row for the
 * folded head's (cols entries; NULL when out of memory: no warm start) */
static double *head_vec_for(struct norms_cache *cache, struct ckpt *ck, const struct norms_row *row)
{
	if (row->kind == NORMS_ROW_FOLDED_HEAD || (long)row->tensor != head_tensor(ck))
		return NULL;
	free(cache->head_vec);
	cache->head_vec = malloc((size_t)row->info.shape[1] * sizeof *cache->head_vec);
	cache->have_head_vec = 0;
	return cache->head_vec;
}

/*
 * A row that reads its tensor: the head's also computes the folded head
 * when that row follows (into cache->folded), or else keeps its top right
 * singular vector. Rows run side by side: only the head's row writes
 * these parts of the cache.
 */
static int summarize_row(struct ckpt *ck, const struct norms_row *row, struct norms_cache *cache,
			 struct mat_summary *s, struct sw_err *err)
{
	double *vec = head_vec_for(cache, ck, row);
	int rc = summarize_tensor(ck, row->tensor, 0, NORMS_ALL, NULL, vec, s,
				  row->folded_follows ? &cache->folded : NULL,
				  row->folded_follows ? &cache->have_folded : NULL, err);

	if (vec)
		cache->have_head_vec = !rc && s->have_top_vec;
	return rc;
}

int norms_compute(struct ckpt *ck, const struct norms_row *row, struct norms_cache *cache,
		  struct op_norms *out, struct sw_err *err)
{
	const struct sw_tensor_info *t = ckpt_info(ck, row->tensor);
	const struct arch_role *r = arch_role_find(t->role);
	/* the embedding, a lookup table: kept for a head tied to it */
	int is_embed = r && r->shape.kind == ARCH_SHAPE_LOOKUP, rc;
	struct mat_summary s;

	switch (row->kind) {
	case NORMS_ROW_TENSOR:
		if ((rc = summarize_row(ck, row, cache, &s, err)))
			return rc;
		if (is_embed) {
			cache->embed = s;
			cache->have_embed = 1;
		}
		/* the embedding maps one-hot tokens to vectors: its transpose */
		norms_of_operator(&s, is_embed, out);
		return SW_OK;
	case NORMS_ROW_TIED_HEAD:
		if (cache->have_embed)
			s = cache->embed;       /* one tensor, two operators */
		else if ((rc = summarize_row(ck, row, cache, &s, err)))
			return rc;
		norms_of_operator(&s, 0, out);
		return SW_OK;
	case NORMS_ROW_FOLDED_HEAD:
		if (cache->have_folded) {
			/* computed with the head's own row */
			norms_of_operator(&cache->folded, 0, out);
			return SW_OK;
		}
		/* W diag(g) starts from W's top right singular vector: with g
		 * uniform it is the answer (the same bound holds) */
		if ((rc = summarize_tensor(ck, row->tensor, 1, NORMS_ALL,
					   cache->have_head_vec ? cache->head_vec : NULL, NULL, &s, NULL,
					   NULL, err)))
			return rc;
		norms_of_operator(&s, 0, out);
		return SW_OK;
	}
	return sw_fail(err, SW_ESOFTWARE, "unknown norms row kind %d", (int)row->kind);
}

void norms_cache_free(struct norms_cache *cache)
{
	free(cache->head_vec);
	memset(cache, 0, sizeof *cache);
}
