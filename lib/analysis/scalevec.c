/* scalevec.c - statistics of scale vectors (scalevec.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scalevec.h"
#include "../base/arch.h"
#include "../base/family.h"

void scalevec_stats(const float *g, int64_t n, struct scalevec_stats *s)
{
	double sum = 0, sq = 0, amin = INFINITY, amax = 0;

	s->n = n;
	s->min = INFINITY, s->max = -INFINITY;
	for (int64_t i = 0; i < n; i++) {
		double x = g[i], a = fabs(x);
		sum += x;
		s->min = fmin(s->min, x), s->max = fmax(s->max, x);
		amin = fmin(amin, a), amax = fmax(amax, a);
	}
	s->mean = sum / (double)n;
	for (int64_t i = 0; i < n; i++)         /* two passes: no cancellation */
		sq += ((double)g[i] - s->mean) * ((double)g[i] - s->mean);
	s->sd = sqrt(sq / (double)n);
	s->anisotropy = amin > 0 ? amax / amin : INFINITY;
	s->cv = s->mean != 0 ? s->sd / fabs(s->mean) : NAN;
	s->coupling = NAN;
}

double scalevec_coupling(const float *g, const double *colnorm, int64_t n)
{
	double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;

	for (int64_t i = 0; i < n; i++)
		ma += fabs((double)g[i]), mb += colnorm[i];
	ma /= (double)n, mb /= (double)n;
	for (int64_t i = 0; i < n; i++) {
		double a = fabs((double)g[i]) - ma, b = colnorm[i] - mb;
		sab += a * b, saa += a * a, sbb += b * b;
	}
	return saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : NAN;
}

const char *scalevec_branch(const char *role)
{
	static const struct {
		const char *prefix, *branch;
	} map[] = {{"attn_", "attn"}, {"q_", "attn"}, {"k_", "attn"}, {"v_", "attn"},
		   {"o_", "attn"}, {"ffn_", "ffn"}, {"gate_", "ffn"}, {"up_", "ffn"},
		   {"down_", "ffn"}, {"final_", "head"}, {"lm_head", "head"}, {"embed", "emb"}};

	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		if (!strncmp(role, map[i].prefix, strlen(map[i].prefix)))
			return map[i].branch;
	return "other";
}

const char *scalevec_placement(const struct sw_tensor_info *t)
{
	static const char *const names[] = {
		[ARCH_PLACE_PRE] = "pre", [ARCH_PLACE_QK] = "qk", [ARCH_PLACE_DNP] = "dnp",
		[ARCH_PLACE_IN] = "in", [ARCH_PLACE_BEFORE] = "before",
		[ARCH_PLACE_AFTER] = "after", [ARCH_PLACE_POST] = "post",
	};
	const struct arch_role *r = arch_role_find(t->role);

	if (t->block == SW_BLOCK_MULT)
		return "mult";
	/* the table's place column (a reparameterized gain's direction and
	 * magnitude sit where it does); a role it does not know: pre */
	return names[r ? r->place : ARCH_PLACE_PRE];
}

const char *scalevec_param(const struct sw_tensor_info *t, int computed)
{
	char gain[SW_ROLE_MAX];

	switch (arch_reparam_base(t->role, gain, sizeof gain)) {
	case 1: return "direction";
	case 2: return "magnitude";
	}
	return t->block == SW_BLOCK_MULT ? "multiplier" : computed ? "computed" : "gain";
}

int scalevec_is_scale_vector(const struct sw_tensor_info *t)
{
	char gain[SW_ROLE_MAX];

	/* a reparameterized gain's magnitude too, one value */
	return (t->kind == SW_KIND_VECTOR && t->numel > 0 &&
		(t->block == SW_BLOCK_NORM || t->block == SW_BLOCK_MULT)) ||
	       (t->block == SW_BLOCK_NORM && t->numel == 1 &&
		arch_reparam_base(t->role, gain, sizeof gain) == 2);
}

int scalevec_coupling_readers(const char *role, const char *readers[4], char *base, size_t len,
			      int *by_rows)
{
	const char *const *pre = scalevec_readers(role);
	const struct arch_role *r = arch_role_find(role);
	enum arch_place place = r ? r->place : ARCH_PLACE_PRE;
	int n = 0;

	*by_rows = 0;
	if (pre)
		for (; *pre && n < 3; pre++)
			readers[n++] = *pre;
	else if ((place == ARCH_PLACE_BEFORE || place == ARCH_PLACE_AFTER) &&
		 arch_base_role(role, base, len) == 0) {
		/* a reader's own gain: of its input columns or its output rows */
		readers[n++] = base;
		*by_rows = place == ARCH_PLACE_AFTER;
	}
	readers[n] = NULL;
	return n;
}

void scalevec_add_row_squares(const float *w, int64_t rows, int64_t n, double *sq)
{
	for (int64_t r = 0; r < rows; r++)
		for (int64_t i = 0; i < n; i++)
			sq[r] += (double)w[r * n + i] * w[r * n + i];
}

void scalevec_add_column_squares(const float *w, int64_t rows, int64_t n, double *colsq)
{
	for (int64_t r = 0; r < rows; r++)
		for (int64_t i = 0; i < n; i++)
			colsq[i] += (double)w[r * n + i] * w[r * n + i];
}

double scalevec_coupling_of_squares(const float *g, double *colsq, int64_t n, int found)
{
	if (!found)
		return NAN;
	for (int64_t i = 0; i < n; i++)
		colsq[i] = sqrt(colsq[i]);
	return scalevec_coupling(g, colsq, n);
}

const char *const *scalevec_readers(const char *role)
{
	static const char *const attn[] = {"q", "k", "v", NULL}, *const ffn[] = {"gate", "up", NULL},
				 *const o[] = {"o", NULL}, *const down[] = {"down", NULL},
				 *const head[] = {"lm_head", NULL};
	static const struct {
		const char *gain;
		const char *const *readers;
	} map[] = {{"attn_norm", attn}, {"ffn_norm", ffn}, {"o_in_norm", o},
		   {"down_in_norm", down}, {"final_norm", head}};

	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		if (!strcmp(map[i].gain, role))
			return map[i].readers;
	return NULL;
}

const char *scalevec_reader_tied(const char *role)
{
	const struct arch_role *r = arch_role_find(role);
	return r ? r->tied : NULL;
}

int scalevec_load(struct ckpt *ck, size_t i, struct ckpt_view *v, struct sw_err *err)
{
	const struct ckpt_meta *m = ckpt_meta(ck);
	double offset = family_gain_offset(&m->config, m->source, ckpt_info(ck, i));
	int64_t n;
	float *g;
	int rc;

	if ((rc = ckpt_load(ck, i, v, err)) || offset == 0)
		return rc;
	n = v->numel;
	if (!(g = malloc((size_t)(n ? n : 1) * sizeof *g))) {
		ckpt_release(ck, v);
		return sw_fail(err, SW_ESOFTWARE, "%s: out of memory", ckpt_info(ck, i)->name);
	}
	/* float32's sum, as the model's (1.0 + weight.float()): the double
	 * sum of two floats rounded once is the same */
	for (int64_t k = 0; k < n; k++)
		g[k] = (float)((double)v->data[k] + offset);
	/* the stored view's mapping goes back here: whether the file shrank
	 * meanwhile is asked of it first */
	if ((rc = ckptsrc_check(v, err))) {
		free(g);
		ckpt_release(ck, v);
		sw_err_prefix(err, "%s", ckpt_info(ck, i)->name);
		return rc;
	}
	ckpt_release(ck, v);
	v->numel = n;
	v->data = v->raw = v->owned = g;
	v->raw_dtype = SW_DTYPE_F32;
	return SW_OK;
}

/* sq += the squared column (or row) norms of matrix k of the file, if its
 * columns (rows) are n */
static int add_line_squares(struct ckpt *ck, long k, int64_t n, int by_rows, double *sq,
			    int *found, struct sw_err *err)
{
	const struct sw_tensor_info *t = ckpt_info(ck, (size_t)k);
	struct ckpt_view v;

	if (t->rank != 2 || t->shape[by_rows ? 0 : 1] != n)
		return 0;
	if (ckpt_load(ck, (size_t)k, &v, err))
		return -1;
	if (by_rows)
		scalevec_add_row_squares(v.data, t->shape[0], t->shape[1], sq);
	else
		scalevec_add_column_squares(v.data, t->shape[0], n, sq);
	ckpt_release(ck, &v);
	*found = 1;
	return 0;
}

/* The coupling of gain t (index k, values g) with the matrices it scales. */
static int coupling_of(struct ckpt *ck, const struct sw_tensor_info *t, const float *g,
		       double *out, struct sw_err *err)
{
	const char *readers[4];
	char base[SW_ROLE_MAX];
	int64_t n = t->numel;
	double *sq;
	int found = 0, by_rows;

	*out = NAN;
	if (!scalevec_coupling_readers(t->role, readers, base, sizeof base, &by_rows))
		return 0;
	if (!(sq = calloc((size_t)n, sizeof *sq)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (const char **r = readers; *r; r++) {
		const char *tied = scalevec_reader_tied(*r);
		long k = ckpt_find_role(ck, *r, t->layer);
		if (k < 0 && tied)
			k = ckpt_find_role(ck, tied, -1);
		if (k >= 0 && add_line_squares(ck, k, n, by_rows, sq, &found, err)) {
			free(sq);
			return -1;
		}
	}
	*out = scalevec_coupling_of_squares(g, sq, n, found);
	free(sq);
	return 0;
}

int scalevec_file(struct ckpt *ck, const struct sw_select *sel, struct scalevec_row **rows,
		  size_t *n, struct sw_err *err)
{
	size_t count = ckpt_count(ck), k = 0;
	struct scalevec_row *r = calloc(count ? count : 1, sizeof *r);

	if (!r)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (size_t i = 0; i < count; i++) {
		const struct sw_tensor_info *t = ckpt_info(ck, i);
		struct ckpt_view v;

		if (!scalevec_is_scale_vector(t) || !select_match_info(sel, t))
			continue;
		if (scalevec_load(ck, i, &v, err))
			goto fail;
		scalevec_stats(v.data, t->numel, &r[k].stats);
		if (coupling_of(ck, t, v.data, &r[k].stats.coupling, err)) {
			ckpt_release(ck, &v);
			goto fail;
		}
		ckpt_release(ck, &v);
		r[k++].info = t;
	}
	*rows = r, *n = k;
	return 0;
fail:
	free(r);
	return -1;
}
