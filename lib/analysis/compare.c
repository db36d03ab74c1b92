/* compare.c - how each matrix changed between two checkpoints (see compare.h). */
#include "compare.h"
#include "esdfit.h"
#include "matsched.h"
#include "spectrum.h"
#include "../base/select.h"
#include "../formats/ckpt.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Is t a matrix sel selects? */
static int selected_matrix(const struct sw_tensor_info *t, const struct sw_select *sel)
{
	return t->kind == SW_KIND_MATRIX && t->rank == 2 && select_match_info(sel, t);
}

/* Index of the selected matrix named name in ck, or -1. */
static long find_matrix(const struct ckpt *ck, const struct sw_select *sel, const char *name)
{
	for (size_t i = 0; i < ckpt_count(ck); i++) {
		const struct sw_tensor_info *t = ckpt_info(ck, i);

		if (selected_matrix(t, sel) && !strcmp(t->name, name))
			return (long)i;
	}
	return -1;
}

int compare_plan_make(const struct ckpt *a, const struct ckpt *b, const struct sw_select *sel,
		      struct compare_plan *p, struct sw_err *err)
{
	size_t nb = ckpt_count(b);

	memset(p, 0, sizeof *p);
	if (!(p->pairs = calloc(nb + 1, sizeof *p->pairs)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (size_t i = 0; i < nb; i++) {
		const struct sw_tensor_info *t = ckpt_info(b, i), *ta;
		long ia;

		if (!selected_matrix(t, sel))
			continue;
		if ((ia = find_matrix(a, sel, t->name)) < 0) {
			if (!p->only_b++)
				memcpy(p->first_only_b, t->name, sizeof p->first_only_b);
			continue;
		}
		ta = ckpt_info(a, (size_t)ia);
		if (ta->shape[0] != t->shape[0] || ta->shape[1] != t->shape[1]) {
			if (!p->shape_differs++) {
				memcpy(p->first_differs, t->name, sizeof p->first_differs);
				p->differs_shape[0] = ta->shape[0];
				p->differs_shape[1] = ta->shape[1];
				p->differs_shape[2] = t->shape[0];
				p->differs_shape[3] = t->shape[1];
			}
			continue;
		}
		p->pairs[p->n].ia = (size_t)ia;
		p->pairs[p->n].ib = i;
		p->pairs[p->n].info = *t;
		p->n++;
	}
	for (size_t i = 0; i < ckpt_count(a); i++) {
		const struct sw_tensor_info *t = ckpt_info(a, i);

		if (selected_matrix(t, sel) && find_matrix(b, sel, t->name) < 0 && !p->only_a++)
			memcpy(p->first_only_a, t->name, sizeof p->first_only_a);
	}
	return SW_OK;
}

void compare_plan_free(struct compare_plan *p)
{
	free(p->pairs);
	memset(p, 0, sizeof *p);
}

/* The working arrays of one matrix: its spectrum (m = min(rows, cols)
 * values), its top k vectors on the Gram matrix's side (m entries each)
 * and on the other (big = max(rows, cols) entries each). */
struct side_ws {
	double *s, *small, *big;
	double frob_sq;
};

static void side_free(struct side_ws *w)
{
	free(w->s);
	free(w->small);
	free(w->big);
}

static int side_alloc(struct side_ws *w, int64_t m, int64_t big, int64_t k, struct sw_err *err)
{
	w->s = malloc((size_t)(m > 0 ? m : 1) * sizeof *w->s);
	w->small = malloc((size_t)(k * m > 0 ? k * m : 1) * sizeof *w->small);
	w->big = malloc((size_t)(k * big > 0 ? k * big : 1) * sizeof *w->big);
	if (!w->s || !w->small || !w->big)
		return sw_fail(err, SW_ESOFTWARE, "out of memory for %lld singular vectors",
			       (long long)k);
	return SW_OK;
}

/*
 * The singular vectors of the other side from the Gram side's (sigma_j >
 * 0): tall W (the Gram side is the right one), u_j = W v_j / sigma_j; wide
 * W, v_j = W^T u_j / sigma_j. Sums in double.
 */
static void other_side(const float *W, int64_t rows, int64_t cols, int64_t k, struct side_ws *w)
{
	int tall = rows >= cols;
	int64_t big = tall ? rows : cols, m = tall ? cols : rows;

	memset(w->big, 0, (size_t)(k * big) * sizeof *w->big);
	for (int64_t i = 0; i < rows; i++) {
		const float *row = W + i * cols;

		for (int64_t j = 0; j < k; j++) {
			const double *x = w->small + j * m;

			if (tall) {
				double sum = 0;
				for (int64_t c = 0; c < cols; c++)
					sum += (double)row[c] * x[c];
				w->big[j * big + i] = sum;
			} else {
				double *y = w->big + j * big;
				for (int64_t c = 0; c < cols; c++)
					y[c] += (double)row[c] * x[i];
			}
		}
	}
	for (int64_t j = 0; j < k; j++)
		for (int64_t i = 0; i < big; i++)
			w->big[j * big + i] /= w->s[j];
}

/*
 * The principal angles between span(X) and span(Y), k orthonormal vectors
 * of len entries each (Bjorck and Golub 1973): the cosines are the
 * singular values of X^T Y. overlap = ||X^T Y||_F^2 / k, the mean cos^2;
 * min_cos the smallest cosine.
 */
static int principal_angles(const double *X, const double *Y, int64_t len, int64_t k,
			    double *overlap, double *min_cos, struct sw_err *err)
{
	double *M = malloc((size_t)(k * k) * sizeof *M), *c = malloc((size_t)k * sizeof *c);
	double sum = 0;
	lapack_int info;

	if (!M || !c) {
		free(M);
		free(c);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	for (int64_t i = 0; i < k; i++)
		for (int64_t j = 0; j < k; j++) {
			double d = 0;
			for (int64_t e = 0; e < len; e++)
				d += X[i * len + e] * Y[j * len + e];
			M[j * k + i] = d;       /* column-major (i, j) */
			sum += d * d;
		}
	info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', (lapack_int)k, (lapack_int)k, M, (lapack_int)k,
			      c, NULL, 1, NULL, 1);
	if (info == 0) {
		*overlap = sum / (double)k;
		/* rounding can put a cosine a hair above 1 */
		*min_cos = fmin(c[k - 1], 1.0);
	}
	free(M);
	free(c);
	if (info != 0)
		return sw_fail(err, SW_ESOFTWARE, "LAPACK dgesdd failed (info %d)", (int)info);
	return SW_OK;
}

/* One matrix's spectrum, top vectors and numbers; the file it is from
 * names a fault. */
static int side_compute(const float *W, int64_t rows, int64_t cols, int64_t k, const char *in,
			struct side_ws *w, struct compare_side *out, struct sw_err *err)
{
	struct spec_view v = spectrum_view(W, rows, cols);
	int64_t m = rows < cols ? rows : cols;
	struct spectrum_summary sm;
	struct esdfit_result f;
	struct sw_err ferr;
	int rc;

	if ((rc = spectrum_full_vectors(&v, w->s, &w->frob_sq, k, w->small, err))) {
		if (in)
			sw_err_prefix(err, "in %s", in);
		return rc;
	}
	spectrum_summarize(w->s, m, w->frob_sq, &sm);
	out->sigma_max = sm.sigma_max;
	out->stable_rank = sm.sigma_max > 0 ? sm.stable_rank : NAN;
	/* no fit (a zero matrix, one distinct value): no alpha, not a failure */
	out->alpha = esdfit_matrix(w->s, m, rows, cols, NULL, &f, &ferr) ? NAN : f.pl.alpha;
	return SW_OK;
}

static double rel(double b, double a)
{
	return a > 0 && isfinite(b) ? b / a - 1 : NAN;
}

int compare_matrices(const float *A, const float *B, int64_t rows, int64_t cols, int64_t top_k,
		     const char *name_a, struct compare_result *r, struct sw_err *err)
{
	int64_t m = rows < cols ? rows : cols, big = rows < cols ? cols : rows;
	int64_t k = top_k < m ? top_k : m;
	struct side_ws wa = {0}, wb = {0};
	double diff = 0;
	int rc;

	*r = (struct compare_result){
		rows, cols, k, NAN, {NAN, NAN, NAN}, {NAN, NAN, NAN}, NAN, NAN, NAN, NAN, NAN, NAN, NAN
	};
	if ((rc = side_alloc(&wa, m, big, k, err)) || (rc = side_alloc(&wb, m, big, k, err)) ||
	    (rc = side_compute(A, rows, cols, k, name_a ? name_a : "the first", &wa, &r->a, err)) ||
	    (rc = side_compute(B, rows, cols, k, NULL, &wb, &r->b, err)))
		goto out;
	for (int64_t i = 0; i < rows * cols; i++) {
		double d = (double)B[i] - (double)A[i];
		diff += d * d;
	}
	r->rel_change = wa.frob_sq > 0 ? sqrt(diff / wa.frob_sq) : NAN;
	r->sigma_max_change = rel(r->b.sigma_max, r->a.sigma_max);
	r->stable_rank_change = rel(r->b.stable_rank, r->a.stable_rank);
	r->alpha_change = r->b.alpha - r->a.alpha;
	/* a rank below k leaves the top-k subspace undefined */
	if (k < 1 || !(wa.s[k - 1] > 0) || !(wb.s[k - 1] > 0))
		goto out;
	other_side(A, rows, cols, k, &wa);
	other_side(B, rows, cols, k, &wb);
	if (rows >= cols)
		rc = principal_angles(wa.small, wb.small, m, k, &r->right_overlap, &r->right_min_cos, err) ||
		     principal_angles(wa.big, wb.big, big, k, &r->left_overlap, &r->left_min_cos, err);
	else
		rc = principal_angles(wa.small, wb.small, m, k, &r->left_overlap, &r->left_min_cos, err) ||
		     principal_angles(wa.big, wb.big, big, k, &r->right_overlap, &r->right_min_cos, err);
	if (rc)
		rc = SW_ESOFTWARE;
out:
	side_free(&wa);
	side_free(&wb);
	return rc;
}

int compare_compute(struct ckpt *a, struct ckpt *b, const struct compare_pair *p, int64_t top_k,
		    struct compare_result *r, struct sw_err *err)
{
	const struct sw_tensor_info *t = &p->info;
	int64_t rows = t->shape[0], cols = t->shape[1];
	struct ckpt_view va, vb;
	int rc, ra = 0, rb = 0;

	MATSCHED_CRITICAL
	{
		ra = ckpt_load(a, p->ia, &va, err);
		if (ra)
			sw_err_prefix(err, "in %s", ckpt_path(a));
		else if ((rb = ckpt_load(b, p->ib, &vb, err)))
			ckpt_release(a, &va);
	}
	if (ra || rb) {
		sw_err_prefix(err, "%s", t->name);
		return ra ? ra : rb;
	}
	rc = compare_matrices(va.data, vb.data, rows, cols, top_k, ckpt_path(a), r, err);
	if (rc)
		sw_err_prefix(err, "%s", t->name);
	/* a file that shrank meanwhile explains any result: none is kept */
	if (ckptsrc_check(&va, err) || ckptsrc_check(&vb, err)) {
		sw_err_prefix(err, "%s", t->name);
		rc = SW_EIO;
	}
	MATSCHED_CRITICAL
	{
		ckpt_release(a, &va);
		ckpt_release(b, &vb);
	}
	return rc;
}

void compare_pair_cost(const struct compare_pair *p, struct matsched_item *c)
{
	double rows = (double)p->info.shape[0], cols = (double)p->info.shape[1];
	double m = rows < cols ? rows : cols;

	/* both matrices in float32, and for each the Gram matrix twice (the
	 * values' and the vectors') and the vectors */
	c->after = 0;
	c->mem = 2 * (4.0 * rows * cols + 16.0 * m * m + 8.0 * COMPARE_TOP_K * (rows + cols)) +
		 32.0 * 1048576;
	c->work = 2 * (rows * cols * m + m * m * m);
}

/* ---- --summary ---------------------------------------------------------- */

struct acc {
	double sum, max_or_min;
	size_t n;
};

static void acc_add(struct acc *a, double v, int take_min)
{
	if (!isfinite(v))
		return;
	if (!a->n || (take_min ? v < a->max_or_min : v > a->max_or_min))
		a->max_or_min = v;
	a->sum += v;
	a->n++;
}

static double acc_mean(const struct acc *a)
{
	return a->n ? a->sum / (double)a->n : NAN;
}

static double acc_extreme(const struct acc *a)
{
	return a->n ? a->max_or_min : NAN;
}

/* One group's numbers over the pairs in it (in_group). */
static void group_fill(struct compare_group *g, const struct compare_pair *pairs,
		       const struct compare_result *res, const int *ok, size_t n)
{
	struct acc rc = {0}, sm = {0}, sr = {0}, al = {0}, ro = {0}, lo = {0};

	g->matrices = 0;
	for (size_t i = 0; i < n; i++) {
		const struct compare_result *r = &res[i];

		if (!ok[i] || (g->has_block && pairs[i].info.block != g->block) ||
		    (g->has_layer && pairs[i].info.layer != g->layer))
			continue;
		g->matrices++;
		acc_add(&rc, r->rel_change, 0);
		acc_add(&sm, r->sigma_max_change, 0);
		acc_add(&sr, r->stable_rank_change, 0);
		acc_add(&al, r->alpha_change, 0);
		acc_add(&ro, r->right_overlap, 1);
		acc_add(&lo, r->left_overlap, 1);
	}
	g->rel_change_mean = acc_mean(&rc);
	g->rel_change_max = acc_extreme(&rc);
	g->sigma_max_change_mean = acc_mean(&sm);
	g->stable_rank_change_mean = acc_mean(&sr);
	g->alpha_change_mean = acc_mean(&al);
	g->right_overlap_mean = acc_mean(&ro);
	g->right_overlap_min = acc_extreme(&ro);
	g->left_overlap_mean = acc_mean(&lo);
	g->left_overlap_min = acc_extreme(&lo);
}

int compare_summarize(const struct compare_pair *pairs, const struct compare_result *res,
		      const int *ok, size_t n, struct compare_group **out, size_t *nout,
		      struct sw_err *err)
{
	struct compare_group *g = calloc(SW_BLOCK_COUNT + n + 1, sizeof *g);
	size_t ng = 0;
	int have_last = 0, last = 0;

	*out = NULL;
	*nout = 0;
	if (!g)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (int b = 0; b < SW_BLOCK_COUNT; b++)
		for (size_t i = 0; i < n; i++)
			if (ok[i] && (int)pairs[i].info.block == b) {
				g[ng].has_block = 1;
				g[ng].block = (enum sw_block)b;
				group_fill(&g[ng], pairs, res, ok, n);
				ng++;
				break;
			}
	/* the layers ascending: the smallest above the last one, each time */
	for (;;) {
		int found = 0, next = 0;

		for (size_t i = 0; i < n; i++) {
			int l = pairs[i].info.layer;

			if (ok[i] && (!have_last || l > last) && (!found || l < next)) {
				next = l;
				found = 1;
			}
		}
		if (!found)
			break;
		g[ng].has_layer = 1;
		g[ng].layer = next;
		group_fill(&g[ng], pairs, res, ok, n);
		ng++;
		last = next;
		have_last = 1;
	}
	*out = g;
	*nout = ng;
	return SW_OK;
}
