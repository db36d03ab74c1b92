/* qkdrift.c - the Q/K symmetry per head and its drift (see qkdrift.h). */
#include "qkdrift.h"
#include "fit.h"
#include "scalevec.h"
#include "../files/trace.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
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

const char *const qkdrift_roles[QK_NROLES] = {
	"q", "k", "q_mult", "k_mult", "attn_norm", "q_norm", "k_norm", "q_mult_col", "k_mult_col",
	"q_gain_in", "k_gain_in", "q_gain_out", "k_gain_out"
};

enum mult_kind { MK_NONE, MK_SCALAR, MK_ROW, MK_COL, MK_ROWCOL };

/* Which multiplier a tensor of numel entries is, for a matrix rows x cols:
 * the config says row or col where both sizes agree (a square matrix);
 * with a column multiplier beside it (pcol), the pair of rowcol. */
static int mult_kind_of(const struct sw_config *c, const struct qk_tensor *p,
			const struct qk_tensor *pcol, int64_t rows, int64_t cols,
			enum mult_kind *mk, struct sw_err *err)
{
	int64_t n;

	*mk = MK_NONE;
	if (pcol->t) {
		if (!p->t || p->t->numel != rows || pcol->t->numel != cols)
			return sw_fail(err, SW_EDATA,
				       "%s: not the column multiplier of a %lldx%lld matrix beside a row multiplier of %lld",
				       pcol->t->name, (long long)rows, (long long)cols, (long long)rows);
		*mk = MK_ROWCOL;
		return SW_OK;
	}
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
 * a column multiplier (the input space every head shares), the product of
 * the two for rowcol (p the row multiplier, pcol the column one). */
static double mult_of_head(enum mult_kind mk, const struct qk_tensor *p,
			   const struct qk_tensor *pcol, int64_t h, int64_t hd)
{
	switch (mk) {
	case MK_SCALAR: return fabs((double)p->v[0]);
	case MK_ROW: return rms_range(p->v, h * hd, (h + 1) * hd);
	case MK_COL: return rms_range(p->v, 0, p->t->numel);
	case MK_ROWCOL: return rms_range(p->v, h * hd, (h + 1) * hd) * rms_range(pcol->v, 0, pcol->t->numel);
	case MK_NONE: break;
	}
	return NAN;
}

/*
 * ||rows [r0, r1) of diag(row mult) diag(gain_out) W diag(colscale)||_rms:
 * W is rows x cols, colscale the column factors (column_scale), gain_out
 * a scale design's output gain or NULL; sums in double.
 */
static double head_rms(const float *W, int64_t r0, int64_t r1, int64_t cols,
		       const double *colscale, enum mult_kind mk, const float *mult,
		       const float *gain_out)
{
	double total = 0;

	for (int64_t i = r0; i < r1; i++) {
		const float *w = W + i * cols;
		double s = 0, rf = mk == MK_ROW || mk == MK_ROWCOL ? mult[i] : 1.0;
		if (gain_out)
			rf *= gain_out[i];
		for (int64_t j = 0; j < cols; j++) {
			double x = w[j] * colscale[j];
			s += x * x;
		}
		total += s * rf * rf;
	}
	return sqrt(total / ((double)(r1 - r0) * (double)cols));
}

/* Column factors of a projection: gamma_j (the shared attn_norm gain, or
 * the projection's own gain_in under a scale design) times its scalar or
 * column multiplier (rowcol's: col). */
static void column_scale(double *cs, int64_t cols, const struct qk_tensor *gamma,
			 const struct qk_tensor *gain_in, enum mult_kind mk,
			 const struct qk_tensor *mult, const struct qk_tensor *col)
{
	for (int64_t j = 0; j < cols; j++) {
		double g = gamma->t ? gamma->v[j] : 1.0;
		if (gain_in->t)
			g *= gain_in->v[j];
		if (mk == MK_SCALAR)
			g *= mult->v[0];
		else if (mk == MK_COL)
			g *= mult->v[j];
		else if (mk == MK_ROWCOL)
			g *= col->v[j];
		cs[j] = g;
	}
}

/* A projection of the layer: present, [heads hd, d_model]. */
static int check_proj(const struct sw_config *c, const char *role, int layer,
		      const struct qk_tensor *p, int64_t rows, struct sw_err *err)
{
	if (!p->t)
		return sw_fail(err, SW_EDATA, "layer %d has no %s projection", layer, role);
	if (p->t->rank != 2 || p->t->shape[0] != rows || p->t->shape[1] != c->d_model)
		return sw_fail(err, SW_EDATA, "%s: not a %lldx%lld matrix", p->t->name,
			       (long long)rows, (long long)c->d_model);
	return SW_OK;
}

/* A QK-norm gain: hd entries shared by all heads, or heads x hd. */
static int gain_of_head(const struct qk_tensor *p, int64_t heads, int64_t hd, int64_t h,
			double *out, struct sw_err *err)
{
	if (!p->t) {
		*out = 1.0;     /* no gain: the norm's output has RMS 1 */
		return SW_OK;
	}
	if (p->t->numel == hd)
		*out = rms_range(p->v, 0, hd);
	else if (p->t->numel == heads * hd)
		*out = rms_range(p->v, h * hd, (h + 1) * hd);
	else
		return sw_fail(err, SW_EDATA, "%s: %lld entries fit no head layout (%lld or %lld)",
			       p->t->name, (long long)p->t->numel, (long long)hd,
			       (long long)(heads * hd));
	return SW_OK;
}

enum qk_source qkdrift_source(const struct sw_config *c, int has_gains)
{
	return !c->qk_norm ? QK_SRC_MATRICES : has_gains ? QK_SRC_GAINS : QK_SRC_UNIT;
}

void qkdrift_head_derive(struct qk_head *h)
{
	h->product = h->q_rms * h->k_rms;
	h->log2_ratio = log2(h->q_rms / h->k_rms);
	h->mult_product = h->mult_log2_ratio = NAN;
	if (!isnan(h->q_mult) && !isnan(h->k_mult)) {
		h->mult_product = h->q_mult * h->k_mult;
		h->mult_log2_ratio = log2(h->q_mult / h->k_mult);
	}
}

int qkdrift_layer(const struct sw_config *c, int layer, const struct qk_tensor in[QK_NROLES],
		  struct qk_head *out, struct sw_err *err)
{
	int64_t H = c->n_heads, KV = c->n_kv_heads, hd = c->head_dim, D = c->d_model;
	int64_t group = H / KV;
	enum qk_source src = qkdrift_source(c, in[QK_QNORM].t || in[QK_KNORM].t);
	enum mult_kind qmk, kmk;
	double *qcs = NULL, *kcs = NULL;
	int rc = SW_OK;

	if ((rc = mult_kind_of(c, &in[QK_QMULT], &in[QK_QMULT_COL], H * hd, D, &qmk, err)) ||
	    (rc = mult_kind_of(c, &in[QK_KMULT], &in[QK_KMULT_COL], KV * hd, D, &kmk, err)))
		return rc;
	if (src == QK_SRC_MATRICES) {
		const struct qk_tensor *gamma = &in[QK_ATTN_NORM];
		if ((rc = check_proj(c, "q", layer, &in[QK_Q], H * hd, err)) ||
		    (rc = check_proj(c, "k", layer, &in[QK_K], KV * hd, err)))
			return rc;
		const struct qk_tensor *sized[] = {gamma, &in[QK_QGAIN_IN], &in[QK_KGAIN_IN],
						   &in[QK_QGAIN_OUT], &in[QK_KGAIN_OUT]};
		const int64_t want[] = {D, D, D, H * hd, KV * hd};
		for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
			if (sized[i]->t && sized[i]->t->numel != want[i])
				return sw_fail(err, SW_EDATA, "%s: %lld entries, not %lld",
					       sized[i]->t->name, (long long)sized[i]->t->numel,
					       (long long)want[i]);
		qcs = malloc((size_t)D * sizeof *qcs);
		kcs = malloc((size_t)D * sizeof *kcs);
		if (!qcs || !kcs) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto out;
		}
		column_scale(qcs, D, gamma, &in[QK_QGAIN_IN], qmk, &in[QK_QMULT], &in[QK_QMULT_COL]);
		column_scale(kcs, D, gamma, &in[QK_KGAIN_IN], kmk, &in[QK_KMULT], &in[QK_KMULT_COL]);
	}
	for (int64_t h = 0; h < H; h++) {
		struct qk_head *o = &out[h];
		int64_t g = h / group;

		o->layer = layer;
		o->head = (int)h;
		o->kv_head = (int)g;
		o->source = src;
		if (src == QK_SRC_MATRICES) {
			o->q_rms = head_rms(in[QK_Q].v, h * hd, (h + 1) * hd, D, qcs, qmk,
					    qmk == MK_ROW || qmk == MK_ROWCOL ? in[QK_QMULT].v : NULL,
					    in[QK_QGAIN_OUT].v);
			o->k_rms = head_rms(in[QK_K].v, g * hd, (g + 1) * hd, D, kcs, kmk,
					    kmk == MK_ROW || kmk == MK_ROWCOL ? in[QK_KMULT].v : NULL,
					    in[QK_KGAIN_OUT].v);
		} else if ((rc = gain_of_head(&in[QK_QNORM], H, hd, h, &o->q_rms, err)) ||
			   (rc = gain_of_head(&in[QK_KNORM], KV, hd, g, &o->k_rms, err))) {
			goto out;
		}
		if (!isfinite(o->q_rms) || !isfinite(o->k_rms)) {
			rc = sw_fail(err, SW_EDATA, "layer %d head %lld: the %s hold NaN or Inf",
				     layer, (long long)h,
				     src == QK_SRC_MATRICES ? "q/k projections, gain or multipliers"
							    : "q_norm/k_norm gains");
			goto out;
		}
		o->q_mult = o->k_mult = NAN;
		if (qmk != MK_NONE && kmk != MK_NONE) {
			o->q_mult = mult_of_head(qmk, &in[QK_QMULT], &in[QK_QMULT_COL], h, hd);
			o->k_mult = mult_of_head(kmk, &in[QK_KMULT], &in[QK_KMULT_COL], g, hd);
		}
		qkdrift_head_derive(o);
	}
out:
	free(qcs);
	free(kcs);
	return rc;
}

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
	if ((rc = scalevec_load(ck, (size_t)i, &p->v, err)))
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

/* The heads of one layer of a checkpoint into out[0..H): the tensors its
 * source reads, loaded, then qkdrift_layer. */
static int layer_heads(struct ckpt *ck, int layer, struct qk_head *out, struct sw_err *err)
{
	const struct sw_config *c = &ckpt_meta(ck)->config;
	struct part p[QK_NROLES];
	struct qk_tensor in[QK_NROLES];
	int rc = SW_OK, need_matrices;

	memset(p, 0, sizeof p);
	need_matrices = qkdrift_source(c, ckpt_find_role(ck, "q_norm", layer) >= 0 ||
					      ckpt_find_role(ck, "k_norm", layer) >= 0) == QK_SRC_MATRICES;
	for (int i = 0; i < QK_NROLES; i++) {
		if (!need_matrices && (i == QK_Q || i == QK_K || i == QK_ATTN_NORM || i >= QK_QGAIN_IN))
			continue;
		if (need_matrices && (i == QK_QNORM || i == QK_KNORM))
			continue;
		if ((rc = part_load(ck, qkdrift_roles[i], layer, &p[i], err)))
			goto out;
	}
	for (int i = 0; i < QK_NROLES; i++) {
		in[i].t = p[i].t;
		in[i].v = p[i].t ? p[i].v.data : NULL;
	}
	rc = qkdrift_layer(c, layer, in, out, err);
out:
	/* a file that shrank meanwhile explains any result: none is kept */
	for (int i = 0; i < QK_NROLES; i++)
		if (p[i].t && ckptsrc_check(&p[i].v, err)) {
			sw_err_prefix(err, "%s", p[i].t->name);
			rc = SW_EIO;
			break;
		}
	for (int i = QK_NROLES - 1; i >= 0; i--)
		part_release(ck, &p[i]);
	return rc;
}

/* Does sel select layer l (matched on its q projection)? */
static int layer_selected(const struct sw_config *c, const struct sw_select *sel, int l)
{
	struct sw_tensor_info q;

	if (!sel)
		return 1;
	memset(&q, 0, sizeof q);
	arch_info_for_role(c, "q", l, &q);
	return select_match(sel, q.name, q.block, q.role, l, q.expert);
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
		if (!layer_selected(c, sel, l))
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

/* ---- from a trace ------------------------------------------------------ */

/* The series of a trace that hold the pair: q_rms, k_rms, q_mult, k_mult. */
static const char *const trace_names[4] = {"qk_q_rms", "qk_k_rms", "qk_q_mult", "qk_k_mult"};

/* Series i of the trace (ncols = n_layers n_heads columns layerL.headH,
 * in that order) into *out, or *out NULL when the trace has none. */
static int read_head_series(struct trace_reader *r, const struct sw_config *c, int i,
			    double **out, struct sw_err *err)
{
	int64_t H = c->n_heads, ncols = c->n_layers * H;
	int present, rc, s;

	if ((rc = trace_read_series(r, trace_names[i], (int)ncols, out, &present, err)) || !present)
		return rc;
	s = trace_find_series(r, trace_names[i]);
	for (int64_t j = 0; j < ncols; j++) {
		char want[64];
		const char *got = trace_column_name(r, s, (int)j);
		snprintf(want, sizeof want, "layer%lld.head%lld", (long long)(j / H), (long long)(j % H));
		if (strcmp(got, want)) {
			free(*out);
			*out = NULL;
			return sw_fail(err, SW_EDATA, "/series/%s: column %lld is '%s', not %s",
				       trace_names[i], (long long)j, got, want);
		}
	}
	return SW_OK;
}

void qkdrift_steps_free(struct qk_step *s, size_t n)
{
	for (size_t i = 0; s && i < n; i++)
		free(s[i].heads);
	free(s);
}

int qkdrift_read_trace(const char *path, const struct sw_select *sel, struct sw_config *cfg,
		       struct qk_step **out, size_t *nsteps, size_t *nheads, struct sw_err *err)
{
	struct trace_reader *r = NULL;
	double *v[4] = {NULL, NULL, NULL, NULL}, *tok = NULL;
	int64_t *stepv = NULL, rows = 0, H, ncols;
	struct qk_step *steps = NULL;
	int *layers = NULL, nsel = 0, present, has_tok, rc;
	enum qk_source src;

	*out = NULL;
	*nsteps = *nheads = 0;
	if ((rc = trace_open(path, &r, err)))
		return rc;
	if ((rc = trace_read_config(r, cfg, &present, err)))
		goto out;
	if (!present) {
		rc = sw_fail(err, SW_EDATA, "no /config: the trace does not say how many layers and heads the model has");
		goto out;
	}
	H = cfg->n_heads;
	ncols = cfg->n_layers * H;
	if (ncols > INT_MAX) {
		rc = sw_fail(err, SW_EDATA, "/config: %lld layers x %lld heads: more columns than a trace holds",
			     (long long)cfg->n_layers, (long long)H);
		goto out;
	}
	for (int i = 0; i < 4; i++)
		if ((rc = read_head_series(r, cfg, i, &v[i], err)))
			goto out;
	for (int i = 0; i < 2; i++)
		if (!v[i]) {
			rc = sw_fail(err, SW_EDATA,
				     "no series %s: a trace of an older sw-train (its q_head_rms leaves out the attn_norm gain); give the run's checkpoints",
				     trace_names[i]);
			goto out;
		}
	if (!v[2] != !v[3]) {
		rc = sw_fail(err, SW_EDATA, "series %s without %s", trace_names[v[2] ? 2 : 3],
			     trace_names[v[2] ? 3 : 2]);
		goto out;
	}
	if ((rc = trace_read_series(r, "tokens", 0, &tok, &has_tok, err)))
		goto out;
	rows = trace_rows(r);
	if (rows == 0) {
		rc = sw_fail(err, SW_EDATA, "the trace has no rows");
		goto out;
	}
	stepv = malloc((size_t)rows * sizeof *stepv);
	layers = malloc((size_t)cfg->n_layers * sizeof *layers);
	steps = calloc((size_t)rows, sizeof *steps);
	if (!stepv || !layers || !steps) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	/* the rows read are the run's: no other writer took the trace over */
	if ((rc = trace_read_steps(r, 0, rows, stepv, err)) || (rc = trace_verify(r, err)))
		goto out;
	for (int l = 0; l < cfg->n_layers; l++)
		if (layer_selected(cfg, sel, l))
			layers[nsel++] = l;
	src = qkdrift_source(cfg, cfg->scale_vectors);
	for (int64_t row = 0; row < rows && nsel; row++) {
		struct qk_step *st = &steps[row];
		size_t j = 0;

		st->step = stepv[row];
		st->has_tokens = has_tok && isfinite(tok[row]) && tok[row] >= 0 && tok[row] < 9e18;
		st->tokens = st->has_tokens ? (int64_t)tok[row] : 0;
		if (!(st->heads = malloc((size_t)nsel * (size_t)H * sizeof *st->heads))) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto out;
		}
		for (int k = 0; k < nsel; k++)
			for (int64_t h = 0; h < H; h++, j++) {
				struct qk_head *o = &st->heads[j];
				size_t at = (size_t)row * (size_t)ncols + (size_t)(layers[k] * H + h);
				o->layer = layers[k];
				o->head = (int)h;
				o->kv_head = (int)(h / (H / cfg->n_kv_heads));
				o->source = src;
				o->q_rms = v[0][at];
				o->k_rms = v[1][at];
				o->q_mult = v[2] ? v[2][at] : NAN;
				o->k_mult = v[3] ? v[3][at] : NAN;
				if (!isfinite(o->q_rms) || !isfinite(o->k_rms) ||
				    (v[2] && (!isfinite(o->q_mult) || !isfinite(o->k_mult)))) {
					rc = sw_fail(err, SW_EDATA,
						     "step %lld: layer %d head %d: the Q/K scales are not known (NaN or Inf)",
						     (long long)st->step, o->layer, o->head);
					goto out;
				}
				qkdrift_head_derive(o);
			}
	}
	if (nsel) {
		*out = steps;
		*nsteps = (size_t)rows;
		steps = NULL;
	}
	*nheads = (size_t)nsel * (size_t)H;
out:
	qkdrift_steps_free(steps, (size_t)rows);
	for (int i = 0; i < 4; i++)
		free(v[i]);
	free(tok);
	free(stepv);
	free(layers);
	trace_reader_close(r);
	return rc;
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
				       "another model: %s is %lld here, %lld in %s (the checkpoints and traces must be of one run)",
				       f[i].name, (long long)f[i].y, (long long)f[i].x, first_name);
	if (strcmp(a->multipliers, b->multipliers))
		return sw_fail(err, SW_EDATA,
			       "another model: multipliers is %s here, %s in %s (the checkpoints and traces must be of one run)",
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
