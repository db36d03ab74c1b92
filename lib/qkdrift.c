/* qkdrift.c - the Q/K symmetry per head and its drift (see qkdrift.h). */
#include "qkdrift.h"
#include "fit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *qkdrift_source_name(enum qk_source s)
{
	switch (s) {
	case QK_SRC_MATRICES: return "matrices";
	case QK_SRC_GAINS: return "qk_norm_gains";
	case QK_SRC_UNIT: return "qk_norm_unit";
	}
	return "?";
}

enum mult_kind { MK_NONE, MK_SCALAR, MK_ROW, MK_COL };

/* One tensor of the layer, loaded when the checkpoint has it. */
struct part {
	const struct sw_tensor_info *t;  /* NULL: absent */
	struct ckpt_view v;
};

static int part_load(struct ckpt *ck, const char *role, int layer, struct part *p,
		     struct sw_err *err)
{
	long i = ckpt_find_role(ck, role, layer);
	int rc;

	memset(p, 0, sizeof *p);
	if (i < 0)
		return SW_OK;
	if ((rc = ckpt_load(ck, (size_t)i, &p->v, err)))
		return rc;
	p->t = ckpt_info(ck, (size_t)i);
	return SW_OK;
}

static void part_release(struct ckpt *ck, struct part *p)
{
	if (p->t)
		ckpt_release(ck, &p->v);
	p->t = NULL;
}

/* Which multiplier a tensor of numel entries is, for a matrix rows x cols:
 * the config says row or col where both sizes agree (a square matrix). */
static int mult_kind_of(const struct sw_config *c, const struct part *p, int64_t rows,
			int64_t cols, enum mult_kind *mk, struct sw_err *err)
{
	int64_t n;

	*mk = MK_NONE;
	if (!p->t)
		return SW_OK;
	n = p->t->numel;
	if (n == 1)
		*mk = MK_SCALAR;
	else if (n == rows && (rows != cols || !strcmp(c->multipliers, "row")))
		*mk = MK_ROW;
	else if (n == cols && (rows != cols || !strcmp(c->multipliers, "col")))
		*mk = MK_COL;
	else
		return sw_fail(err, SW_EDATA,
			       "%s: %lld entries: not a scalar, row or column multiplier of a %lldx%lld matrix%s",
			       p->t->name, (long long)n, (long long)rows, (long long)cols,
			       rows == cols ? " (config multipliers does not say which)" : "");
	return SW_OK;
}

/* RMS of v[lo, hi), in double. */
static double rms_range(const float *v, int64_t lo, int64_t hi)
{
	double s = 0;

	for (int64_t i = lo; i < hi; i++)
		s += (double)v[i] * v[i];
	return sqrt(s / (double)(hi - lo));
}

/* What a multiplier contributes to head h's rows (hd of them): |m| for a
 * scalar, the RMS of its rows for a row multiplier, of all its entries for
 * a column multiplier (the input space every head shares). */
static double mult_of_head(enum mult_kind mk, const struct part *p, int64_t h, int64_t hd)
{
	switch (mk) {
	case MK_SCALAR: return fabs((double)p->v.data[0]);
	case MK_ROW: return rms_range(p->v.data, h * hd, (h + 1) * hd);
	case MK_COL: return rms_range(p->v.data, 0, p->t->numel);
	case MK_NONE: break;
	}
	return NAN;
}

/*
 * ||rows [r0, r1) of diag(row mult) W diag(colscale)||_rms: W is rows x cols,
 * colscale the column factors (the attn_norm gain times a scalar or column
 * multiplier), sums in double.
 */
static double head_rms(const float *W, int64_t r0, int64_t r1, int64_t cols,
		       const double *colscale, enum mult_kind mk, const float *mult)
{
	double total = 0;

	for (int64_t i = r0; i < r1; i++) {
		const float *w = W + i * cols;
		double s = 0, rf = mk == MK_ROW ? mult[i] : 1.0;
		for (int64_t j = 0; j < cols; j++) {
			double x = w[j] * colscale[j];
			s += x * x;
		}
		total += s * rf * rf;
	}
	return sqrt(total / ((double)(r1 - r0) * (double)cols));
}

/* Column factors of a projection: gamma_j times its scalar or column
 * multiplier. */
static void column_scale(double *cs, int64_t cols, const struct part *gamma,
			 enum mult_kind mk, const struct part *mult)
{
	for (int64_t j = 0; j < cols; j++) {
		double g = gamma->t ? gamma->v.data[j] : 1.0;
		if (mk == MK_SCALAR)
			g *= mult->v.data[0];
		else if (mk == MK_COL)
			g *= mult->v.data[j];
		cs[j] = g;
	}
}

/* A projection of the layer: present, [heads hd, d_model]. */
static int check_proj(const struct sw_config *c, const char *role, int layer,
		      const struct part *p, int64_t rows, struct sw_err *err)
{
	if (!p->t)
		return sw_fail(err, SW_EDATA, "layer %d has no %s projection", layer, role);
	if (p->t->rank != 2 || p->t->shape[0] != rows || p->t->shape[1] != c->d_model)
		return sw_fail(err, SW_EDATA, "%s: not a %lldx%lld matrix", p->t->name,
			       (long long)rows, (long long)c->d_model);
	return SW_OK;
}

/* A QK-norm gain: hd entries shared by all heads, or heads x hd. */
static int gain_of_head(const struct part *p, int64_t heads, int64_t hd, int64_t h,
			double *out, struct sw_err *err)
{
	if (!p->t) {
		*out = 1.0;     /* no gain: the norm's output has RMS 1 */
		return SW_OK;
	}
	if (p->t->numel == hd)
		*out = rms_range(p->v.data, 0, hd);
	else if (p->t->numel == heads * hd)
		*out = rms_range(p->v.data, h * hd, (h + 1) * hd);
	else
		return sw_fail(err, SW_EDATA, "%s: %lld entries fit no head layout (%lld or %lld)",
			       p->t->name, (long long)p->t->numel, (long long)hd,
			       (long long)(heads * hd));
	return SW_OK;
}

enum { P_Q, P_K, P_QMULT, P_KMULT, P_GAMMA, P_QNORM, P_KNORM, NPARTS };

/* The heads of one layer into out[0..H). */
static int layer_heads(struct ckpt *ck, int layer, struct qk_head *out, struct sw_err *err)
{
	static const char *const roles[NPARTS] = {
		"q", "k", "q_mult", "k_mult", "attn_norm", "q_norm", "k_norm"
	};
	const struct sw_config *c = &ckpt_meta(ck)->config;
	int64_t H = c->n_heads, KV = c->n_kv_heads, hd = c->head_dim, D = c->d_model;
	int64_t group = H / KV;
	enum mult_kind qmk, kmk;
	enum qk_source src;
	struct part p[NPARTS];
	double *qcs = NULL, *kcs = NULL;
	int rc = SW_OK, need_matrices;

	memset(p, 0, sizeof p);
	src = !c->qk_norm ? QK_SRC_MATRICES
	      : ckpt_find_role(ck, "q_norm", layer) >= 0 || ckpt_find_role(ck, "k_norm", layer) >= 0
	      ? QK_SRC_GAINS : QK_SRC_UNIT;
	need_matrices = src == QK_SRC_MATRICES;
	for (int i = 0; i < NPARTS; i++) {
		if (!need_matrices && (i == P_Q || i == P_K || i == P_GAMMA))
			continue;
		if (need_matrices && (i == P_QNORM || i == P_KNORM))
			continue;
		if ((rc = part_load(ck, roles[i], layer, &p[i], err)))
			goto out;
	}
	if ((rc = mult_kind_of(c, &p[P_QMULT], H * hd, D, &qmk, err)) ||
	    (rc = mult_kind_of(c, &p[P_KMULT], KV * hd, D, &kmk, err)))
		goto out;
	if (need_matrices) {
		if ((rc = check_proj(c, "q", layer, &p[P_Q], H * hd, err)) ||
		    (rc = check_proj(c, "k", layer, &p[P_K], KV * hd, err)))
			goto out;
		if (p[P_GAMMA].t && p[P_GAMMA].t->numel != D) {
			rc = sw_fail(err, SW_EDATA, "%s: %lld entries, not d_model = %lld",
				     p[P_GAMMA].t->name, (long long)p[P_GAMMA].t->numel, (long long)D);
			goto out;
		}
		qcs = malloc((size_t)D * sizeof *qcs);
		kcs = malloc((size_t)D * sizeof *kcs);
		if (!qcs || !kcs) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto out;
		}
		column_scale(qcs, D, &p[P_GAMMA], qmk, &p[P_QMULT]);
		column_scale(kcs, D, &p[P_GAMMA], kmk, &p[P_KMULT]);
	}
	for (int64_t h = 0; h < H; h++) {
		struct qk_head *o = &out[h];
		int64_t g = h / group;

		o->layer = layer;
		o->head = (int)h;
		o->kv_head = (int)g;
		o->source = src;
		if (src == QK_SRC_MATRICES) {
			o->q_rms = head_rms(p[P_Q].v.data, h * hd, (h + 1) * hd, D, qcs, qmk,
					    qmk == MK_ROW ? p[P_QMULT].v.data : NULL);
			o->k_rms = head_rms(p[P_K].v.data, g * hd, (g + 1) * hd, D, kcs, kmk,
					    kmk == MK_ROW ? p[P_KMULT].v.data : NULL);
		} else if ((rc = gain_of_head(&p[P_QNORM], H, hd, h, &o->q_rms, err)) ||
			   (rc = gain_of_head(&p[P_KNORM], KV, hd, g, &o->k_rms, err))) {
			goto out;
		}
		if (!isfinite(o->q_rms) || !isfinite(o->k_rms)) {
			rc = sw_fail(err, SW_EDATA, "layer %d head %lld: the %s hold NaN or Inf",
				     layer, (long long)h,
				     src == QK_SRC_MATRICES ? "q/k projections, gain or multipliers"
							    : "q_norm/k_norm gains");
			goto out;
		}
		o->product = o->q_rms * o->k_rms;
		o->log2_ratio = log2(o->q_rms / o->k_rms);
		o->q_mult = o->k_mult = o->mult_product = o->mult_log2_ratio = NAN;
		if (qmk != MK_NONE && kmk != MK_NONE) {
			o->q_mult = mult_of_head(qmk, &p[P_QMULT], h, hd);
			o->k_mult = mult_of_head(kmk, &p[P_KMULT], g, hd);
			o->mult_product = o->q_mult * o->k_mult;
			o->mult_log2_ratio = log2(o->q_mult / o->k_mult);
		}
	}
out:
	/* a file that shrank meanwhile explains any result: none is kept */
	for (int i = 0; i < NPARTS; i++)
		if (p[i].t && ckptsrc_check(&p[i].v, err)) {
			sw_err_prefix(err, "%s", p[i].t->name);
			rc = SW_EIO;
			break;
		}
	free(qcs);
	free(kcs);
	for (int i = NPARTS - 1; i >= 0; i--)
		part_release(ck, &p[i]);
	return rc;
}

int qkdrift_heads(struct ckpt *ck, const struct sw_select *sel,
		  struct qk_head **out, size_t *n, struct sw_err *err)
{
	const struct sw_config *c = &ckpt_meta(ck)->config;
	struct qk_head *rows;
	size_t used = 0;
	int rc = SW_OK;

	*out = NULL;
	*n = 0;
	rows = calloc((size_t)(c->n_layers * c->n_heads), sizeof *rows);
	if (!rows)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (int l = 0; l < c->n_layers; l++) {
		struct sw_tensor_info q;

		memset(&q, 0, sizeof q);
		arch_info_for_role(c, "q", l, &q);
		if (sel && !select_match(sel, q.name, q.block, q.role, l))
			continue;
		if ((rc = layer_heads(ck, l, rows + used, err))) {
			free(rows);
			return rc;
		}
		used += (size_t)c->n_heads;
	}
	*out = rows;
	*n = used;
	return SW_OK;
}

int qkdrift_same_model(const struct sw_config *a, const char *first_name,
		       const struct sw_config *b, struct sw_err *err)
{
	const struct { const char *name; int64_t x, y; } f[] = {
		{"vocab_size", a->vocab_size, b->vocab_size},
		{"d_model", a->d_model, b->d_model},
		{"n_layers", a->n_layers, b->n_layers},
		{"n_heads", a->n_heads, b->n_heads},
		{"n_kv_heads", a->n_kv_heads, b->n_kv_heads},
		{"head_dim", a->head_dim, b->head_dim},
		{"d_ff", a->d_ff, b->d_ff},
		{"qk_norm", a->qk_norm, b->qk_norm},
		{"tie_embeddings", a->tie_embeddings, b->tie_embeddings},
		{"norm_everywhere", a->norm_everywhere, b->norm_everywhere},
		{"scale_vectors", a->scale_vectors, b->scale_vectors},
	};

	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
		if (f[i].x != f[i].y)
			return sw_fail(err, SW_EDATA,
				       "another model: %s is %lld here, %lld in %s (the checkpoints must be of one run)",
				       f[i].name, (long long)f[i].y, (long long)f[i].x, first_name);
	if (strcmp(a->multipliers, b->multipliers))
		return sw_fail(err, SW_EDATA,
			       "another model: multipliers is %s here, %s in %s (the checkpoints must be of one run)",
			       b->multipliers, a->multipliers, first_name);
	return SW_OK;
}

int qkdrift_drift(const int64_t *steps, struct qk_head *const *heads,
		  size_t nckpt, size_t j, struct qk_drift *d, struct sw_err *err)
{
	double *x = malloc((nckpt ? nckpt : 1) * sizeof *x);
	double *y = malloc((nckpt ? nckpt : 1) * sizeof *y);
	size_t first = 0, last = 0;
	struct fit_line f;
	int rc, has_mult;

	memset(d, 0, sizeof *d);
	if (!x || !y) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	d->layer = heads[0][j].layer;
	d->head = heads[0][j].head;
	d->kv_head = heads[0][j].kv_head;
	d->source = heads[0][j].source;
	d->n = nckpt;
	d->mult_slope = d->mult_slope_se = d->mult_product_change = NAN;
	for (size_t c = 0; c < nckpt; c++) {
		if (steps[c] < steps[first])
			first = c;
		if (steps[c] > steps[last])
			last = c;
	}
	d->first_step = steps[first];
	d->last_step = steps[last];
	if (steps[first] == steps[last]) {
		rc = sw_fail(err, SW_EDATA, "%zu checkpoint%s, all at step %lld: a drift needs two steps or more",
			     nckpt, nckpt == 1 ? "" : "s", (long long)steps[first]);
		goto out;
	}
	for (size_t c = 0; c < nckpt; c++) {
		x[c] = (double)steps[c] / 1000.0;
		y[c] = heads[c][j].log2_ratio;
	}
	if ((rc = fit_line(x, y, nckpt, &f, err)))
		goto out;
	d->slope = f.slope;
	d->slope_se = f.slope_se;
	d->product_change = heads[last][j].product / heads[first][j].product - 1;
	has_mult = 1;
	for (size_t c = 0; c < nckpt; c++) {
		y[c] = heads[c][j].mult_log2_ratio;
		has_mult &= !isnan(y[c]);
	}
	if (has_mult) {
		if ((rc = fit_line(x, y, nckpt, &f, err)))
			goto out;
		d->mult_slope = f.slope;
		d->mult_slope_se = f.slope_se;
		d->mult_product_change = heads[last][j].mult_product / heads[first][j].mult_product - 1;
	}
out:
	if (rc)
		sw_err_prefix(err, "layer %d head %d", d->layer, d->head);
	free(x);
	free(y);
	return rc;
}
