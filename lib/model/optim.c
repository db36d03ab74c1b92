/* optim.c - AdamW, Muon, Scion, schedules, per-tensor hparams (see optim.h). */
#include "optim.h"
#include "../base/elemmath.h"
#include "../base/isa.h"
#include "../base/par.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef SW_REAL_DOUBLE
#define GEMM cblas_dgemm
#else
#define GEMM cblas_sgemm
#endif

/* each optimizer's name, and the element-wise rule of the tensors it
 * updates element by element (Muon: all but the hidden matrices; Scion:
 * none) */
static const char *const kind_names[] = {"adamw", "muon", "scion", "lion", "adam-mini"};
static const enum elem_rule kind_rules[] = {ELEM_RULE_ADAMW, ELEM_RULE_ADAMW, ELEM_RULE_ADAMW,
					    ELEM_RULE_LION, ELEM_RULE_ADAM_MINI};
_Static_assert(sizeof kind_names / sizeof kind_names[0] == sizeof kind_rules / sizeof kind_rules[0],
	       "a rule per optimizer");
static const char *const sched_names[] = {"constant", "cosine", "wsd"};
static const char *const norm_wd_names[] = {"none", "all", "iwd"};
static const char *const wd_scaling_names[] = {"fixed", "sqrt", "linear"};

const char *optim_kind_name(enum opt_kind k) { return kind_names[k]; }
const char *optim_sched_name(enum sched_kind s) { return sched_names[s]; }
const char *optim_norm_wd_name(enum norm_wd n) { return norm_wd_names[n]; }
const char *optim_wd_scaling_name(enum wd_scaling w) { return wd_scaling_names[w]; }

static int name_index(const char *const *names, int n, const char *s)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(names[i], s))
			return i;
	return -1;
}

#define PARSER(fn, type, names)                                         \
	int fn(const char *s, type *out)                                \
	{                                                               \
		int k = name_index(names, sizeof names / sizeof names[0], s); \
		if (k >= 0)                                             \
			*out = (type)k;                                 \
		return k < 0 ? -1 : 0;                                  \
	}
PARSER(optim_kind_parse, enum opt_kind, kind_names)
PARSER(optim_sched_parse, enum sched_kind, sched_names)
PARSER(optim_norm_wd_parse, enum norm_wd, norm_wd_names)
PARSER(optim_wd_scaling_parse, enum wd_scaling, wd_scaling_names)
#undef PARSER

void optim_defaults(struct optim_config *oc)
{
	memset(oc, 0, sizeof *oc);
	oc->kind = OPT_ADAMW;
	oc->lr = 1e-3;
	oc->lr_min = NAN;               /* lr/20 (cosine), 0 (wsd), unless given */
	oc->beta1 = 0.9;
	oc->beta2 = NAN;                /* 0.99 (Lion), 0.95 (the others), unless given */
	oc->eps = 1e-8;
	oc->momentum = NAN;             /* 0.95 (Muon), 0 (Scion) */
	oc->wd = 0.1;
	oc->wd_mode = SW_WD_COUPLED;
	oc->norm_wd = NORM_WD_NONE;
	oc->mult_lr_ratio = 1;
	oc->mult_wd = 2e-3;
	for (int b = 0; b < SW_BLOCK_COUNT; b++)
		oc->block_ratio[b] = 1;
	oc->block_ratio[SW_BLOCK_EMB] = 10;
	oc->block_ratio[SW_BLOCK_QK] = 8;
	oc->block_ratio[SW_BLOCK_FFN] = 6;
	oc->block_ratio[SW_BLOCK_VO] = 4;
	for (int g = 0; g < SW_GROUP_COUNT; g++)
		oc->group_ratio[g] = 1;
	oc->grad_clip = 1.0;
	oc->sched = SCHED_COSINE;
	oc->warmup = 0;
	oc->steps = 1000;
	oc->decay_frac = 0.2;
}

static double lr_min_of(const struct optim_config *oc)
{
	if (!isnan(oc->lr_min))
		return oc->lr_min;
	return oc->sched == SCHED_WSD ? 0 : oc->lr / 20;
}

double optim_schedule(const struct optim_config *oc, int64_t step)
{
	/* --lr 0 (a run that only evaluates) has no ratio: 0, not 0/0 */
	double lo = oc->lr > 0 ? lr_min_of(oc) / oc->lr : 0, p;
	int64_t start;

	if (step < oc->warmup)
		return (double)(step + 1) / (double)oc->warmup;
	switch (oc->sched) {
	case SCHED_COSINE:
		p = oc->steps > oc->warmup ? (double)(step - oc->warmup) / (double)(oc->steps - oc->warmup) : 1;
		p = p < 0 ? 0 : p > 1 ? 1 : p;
		return lo + (1 - lo) * 0.5 * (1 + cos(M_PI * p));
	case SCHED_WSD:
		start = oc->steps - (int64_t)llround(oc->decay_frac * (double)oc->steps);
		if (start < oc->warmup)
			start = oc->warmup;
		if (step < start)
			return 1;
		p = oc->steps > start ? (double)(step - start) / (double)(oc->steps - start) : 1;
		p = p > 1 ? 1 : p;
		return 1 + (lo - 1) * p;
	default:
		return 1;
	}
}

double optim_lr_at(const struct optim_config *oc, int64_t step)
{
	return oc->lr * optim_schedule(oc, step);
}

void optim_tensor_hparams(const struct optim_config *oc, const struct sw_tensor_info *t,
			  int64_t step, double *lr, double *wd, enum sw_wd_mode *mode)
{
	double f = optim_schedule(oc, step), base = optim_lr_at(oc, step), lo = lr_min_of(oc);

	if (t->block == SW_BLOCK_MULT) {
		*lr = oc->lr * oc->mult_lr_ratio * f;
		*wd = oc->mult_wd;
	} else {
		if (oc->blockwise && step >= oc->warmup) {
			/* eq. 5: only the peak is scaled; lr_min is shared */
			*lr = elem_blockwise_lr(lo, oc->block_ratio[t->block], oc->lr, base);
		} else {
			*lr = base;
		}
		*lr *= oc->group_ratio[t->group];
		if (oc->width_base > 0 && t->kind == SW_KIND_MATRIX) {
			/* the spectra paper's Table 2: the hidden (matrix-like)
			 * matrices' lr ~ 1/d and wd ~ d^p; the embedding and the
			 * head have d entries per token (vector-like): lr kept,
			 * no wd */
			double r = (double)oc->width / (double)oc->width_base;
			double p = oc->wd_scaling == WD_SCALING_SQRT ? 0.5 :
				   oc->wd_scaling == WD_SCALING_LINEAR ? 1 : 0;
			int hidden = optim_is_hidden_matrix(t);
			*lr *= hidden ? 1 / r : 1;
			*wd = hidden ? oc->wd * pow(r, p) : 0;
		} else if (t->kind == SW_KIND_MATRIX)
			*wd = oc->wd;
		else if (t->block == SW_BLOCK_NORM && t->norm_type != SW_NORM_NONE)
			/* a gain; a LayerNorm's bias (no norm type) is a bias:
			 * not decayed */
			*wd = oc->norm_wd == NORM_WD_ALL ? oc->wd :
			      oc->norm_wd == NORM_WD_IWD && t->norm_type == SW_NORM_INPUT ? oc->wd : 0;
		else
			*wd = 0;
	}
	*mode = *wd > 0 ? oc->wd_mode : SW_WD_NONE;
}

int optim_init(struct optim *o, const struct optim_config *cfg, const struct model *m,
	       struct sw_err *err)
{
	int64_t maxr = 1, maxn = 1;
	int matrices;

	memset(o, 0, sizeof *o);
	o->cfg = *cfg;
	o->cfg.width = m->c.d_model;
	if (isnan(o->cfg.momentum))
		o->cfg.momentum = cfg->kind == OPT_MUON ? 0.95 : 0;
	if (isnan(o->cfg.beta2))
		o->cfg.beta2 = cfg->kind == OPT_LION ? 0.99 : 0.95;
	for (int i = 0; i < m->ntensors; i++) {
		const struct sw_tensor_info *t = &m->tensors[i].info;
		if (t->kind == SW_KIND_MATRIX) {
			int64_t r = t->shape[0] < t->shape[1] ? t->shape[0] : t->shape[1];
			maxr = r > maxr ? r : maxr;
			maxn = t->numel > maxn ? t->numel : maxn;
		}
	}
	/* Newton-Schulz: 3 r^2 + 2 n; then the momentum view and the update, 2 n */
	o->work_size = (size_t)(3 * maxr * maxr + 4 * maxn);
	o->count = o->ntensors = m->ntensors;
	o->voff = malloc(((size_t)m->ntensors + 1) * sizeof *o->voff);
	if (!o->voff) {
		optim_free(o);
		return sw_fail(err, SW_ESOFTWARE, "out of memory for the optimizer state");
	}
	o->voff[0] = 0;
	for (int i = 0; i < m->ntensors; i++) {
		const struct sw_tensor_info *t = &m->tensors[i].info;
		size_t n = !optim_has_v(cfg->kind) ? 0 :
			   cfg->kind == OPT_ADAM_MINI ? (size_t)optim_block_count(t) : (size_t)t->numel;
		o->voff[i + 1] = o->voff[i] + n;
	}
	o->m = calloc(m->nparams, sizeof *o->m);
	o->v = calloc(optim_v_count(o) ? optim_v_count(o) : 1, sizeof *o->v);
	/* the matrix optimizers' scratch; the element-wise ones need none */
	matrices = cfg->kind == OPT_MUON || cfg->kind == OPT_SCION;
	o->work = matrices ? malloc(o->work_size * sizeof(real)) : NULL;
	if (!o->m || !o->v || (matrices && !o->work)) {
		optim_free(o);
		return sw_fail(err, SW_ESOFTWARE, "out of memory for the optimizer state");
	}
	return SW_OK;
}

int optim_shard(struct optim *o, const struct model *m, int first, int count,
		struct sw_err *err)
{
	size_t lo = 0, n = 0, vlo = o->voff[first], vn = o->voff[first + count] - vlo;
	float *mm, *vv;

	if (count) {
		const struct model_tensor *last = &m->tensors[first + count - 1];
		lo = m->tensors[first].offset;
		n = last->offset + last->numel - lo;
	}
	mm = malloc((n ? n : 1) * sizeof *mm);
	vv = malloc((vn ? vn : 1) * sizeof *vv);

	if (!mm || !vv || o->first || o->count != m->ntensors) {
		free(mm);
		free(vv);
		return sw_fail(err, SW_ESOFTWARE, !mm || !vv ? "out of memory for the optimizer state"
							   : "optimizer state sharded twice");
	}
	memcpy(mm, o->m + lo, n * sizeof *mm);
	memcpy(vv, o->v + vlo, vn * sizeof *vv);
	free(o->m);
	free(o->v);
	o->m = mm;
	o->v = vv;
	o->first = first;
	o->count = count;
	o->base = lo;
	o->vbase = vlo;
	return SW_OK;
}

void optim_free(struct optim *o)
{
	free(o->m);
	free(o->v);
	free(o->voff);
	free(o->work);
	memset(o, 0, sizeof *o);
}

double optim_grad_norm(const struct model *m)
{
	double s = 0;

	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *t = &m->tensors[i];
		const real *g = m->grads + t->offset;
		double ts = 0;
		if (t->info.block == SW_BLOCK_MULT)
			continue;
#pragma omp parallel for simd reduction(+ : ts) schedule(static) PAR_IF(t->numel)
		for (size_t k = 0; k < t->numel; k++)
			ts += (double)g[k] * g[k];
		s += ts;
	}
	return sqrt(s);
}

/* dst = src (rows x cols), or its transpose (cols x rows) when transpose */
static void copy_transposed_if(real *dst, const real *src, int rows, int cols, int transpose)
{
	if (!transpose) {
		memcpy(dst, src, (size_t)rows * cols * sizeof(real));
		return;
	}
	for (int i = 0; i < rows; i++)
		for (int j = 0; j < cols; j++)
			dst[(size_t)j * rows + i] = src[(size_t)i * cols + j];
}

void optim_newton_schulz(real *X, const real *G, int rows, int cols, real *work)
{
	int tr = rows > cols, r = tr ? cols : rows, n = tr ? rows : cols;
	real *A = work, *AA = A + (size_t)r * r, *Bm = AA + (size_t)r * r, *Y = Bm + (size_t)r * r,
	     *Xr = Y + (size_t)r * n;
	double nrm = 0;

	/* Xr (r x n): G, or its transpose when tall */
	copy_transposed_if(Xr, G, rows, cols, tr);
	for (size_t k = 0; k < (size_t)r * n; k++)
		nrm += (double)Xr[k] * Xr[k];
	nrm = elem_ns_norm(nrm);
	for (size_t k = 0; k < (size_t)r * n; k++)
		Xr[k] = (real)(Xr[k] / nrm);
	for (int step = 0; step < 5; step++) {
		/* A = X X^T; B = b A + c A A; X = a X + B X */
		GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, r, r, n, 1, Xr, n, Xr, n, 0, A, r);
		GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, r, r, 1, A, r, A, r, 0, AA, r);
		for (size_t k = 0; k < (size_t)r * r; k++)
			Bm[k] = elem_ns_poly(A[k], AA[k]);
		memcpy(Y, Xr, (size_t)r * n * sizeof(real));
		GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, n, r, 1, Bm, r, Y, n, ELEM_NS_A, Xr, n);
	}
	copy_transposed_if(X, Xr, r, n, tr);      /* back to rows x cols */
}

int64_t optim_block_numel(const struct sw_tensor_info *t)
{
	if (t->kind != SW_KIND_MATRIX || t->rank != 2)
		return t->numel > 0 ? t->numel : 1;
	if (t->block == SW_BLOCK_QK && t->head_dim > 0 && t->shape[0] % t->head_dim == 0)
		return (int64_t)t->head_dim * t->shape[1];
	return t->shape[1];
}

int64_t optim_block_count(const struct sw_tensor_info *t)
{
	return t->numel > 0 ? t->numel / optim_block_numel(t) : 0;
}

int optim_has_v(enum opt_kind kind)
{
	return kind != OPT_LION;
}

/* An element-wise optimizer's rule over one tensor (elemmath.h: AdamW is
 * PyTorch's, decay first, then p -= lr m_hat / (sqrt(v_hat) + eps);
 * Adam-mini the same with its blocks' v, which a pass over the blocks
 * updates first; Lion's sign). */
ISA_VECTOR_CLONES
static void elem_tensor(const struct optim *o, real *p, const real *g, float *m, float *v,
			const struct sw_tensor_info *t, const struct optim_plan *pl)
{
	size_t n = (size_t)t->numel;
	struct elem_rule_coef c = elem_rule_coef(pl->rule, o->cfg.beta1, o->cfg.beta2, o->cfg.eps,
						 o->t, pl->lr, elem_wd_decay(pl->mode, pl->lr, pl->wd));
	double clip = pl->clip;

	/* one loop per rule (elemmath.h's elem_rule_update is the device's
	 * dispatch): a switch inside the loop keeps it from vectorizing */
	switch (c.rule) {
	case ELEM_RULE_ADAMW:
#pragma omp parallel for simd schedule(static) PAR_IF(n)
		for (size_t k = 0; k < n; k++)
			elem_adamw(&p[k], &m[k], &v[k], g[k], clip, &c.adamw);
		break;
	case ELEM_RULE_LION:
#pragma omp parallel for simd schedule(static) PAR_IF(n)
		for (size_t k = 0; k < n; k++)
			elem_lion(&p[k], &m[k], g[k], clip, &c.lion);
		break;
	case ELEM_RULE_ADAM_MINI: {
		int64_t bn = optim_block_numel(t), nb = optim_block_count(t);
#pragma omp parallel for schedule(static) PAR_IF(n)
		for (int64_t b = 0; b < nb; b++) {
			double s = 0;
			for (int64_t j = 0; j < bn; j++)
				s += elem_clipped_sq(g[b * bn + j], clip);
			elem_adam_mini_block_v(&v[b], s, bn, o->cfg.beta2);
		}
#pragma omp parallel for schedule(static) PAR_IF(n)
		for (int64_t b = 0; b < nb; b++)
			for (int64_t j = b * bn; j < (b + 1) * bn; j++)
				elem_adam_mini(&p[j], &m[j], &v[b], g[j], clip, &c.adamw);
		break;
	}
	}
}

/* p <- p * decay - lr * u */
static void apply_update(real *p, const real *u, size_t n, const struct optim_plan *pl)
{
	double decay = elem_wd_decay(pl->mode, pl->lr, pl->wd), lr = pl->lr;

#pragma omp parallel for simd schedule(static) PAR_IF(n)
	for (size_t k = 0; k < n; k++)
		p[k] = elem_apply_update(p[k], u[k], decay, lr);
}

/* Muon (Keller Jordan's): buf <- mom buf + (1 - mom) g; Nesterov
 * g' = (1 - mom) g + mom buf; u = NS5(g') sqrt(max(1, rows/cols)). */
static void muon_tensor(struct optim *o, real *p, const real *g, float *buf,
			const struct sw_tensor_info *t, const struct optim_plan *pl)
{
	int rows = (int)t->shape[0], cols = (int)t->shape[1];
	size_t n = (size_t)t->numel;
	double mom = o->cfg.momentum;
	real *geff = o->work + o->work_size - 2 * n, *u = geff + n;

	for (size_t k = 0; k < n; k++)
		geff[k] = elem_muon_momentum(&buf[k], g[k], pl->clip, mom);
	optim_newton_schulz(u, geff, rows, cols, o->work);
	for (size_t k = 0; k < n; k++)
		u[k] *= (real)pl->scale;
	apply_update(p, u, n, pl);
}

int optim_is_hidden_matrix(const struct sw_tensor_info *t)
{
	return t->kind == SW_KIND_MATRIX &&
	       (t->block == SW_BLOCK_QK || t->block == SW_BLOCK_VO || t->block == SW_BLOCK_FFN);
}

enum optim_lmo optim_scion_lmo(const struct sw_tensor_info *t, double *scale)
{
	*scale = 1;
	if (optim_is_hidden_matrix(t)) {
		*scale = sqrt((double)t->shape[0] / (double)t->shape[1]);
		return OPTIM_LMO_ORTHO;
	}
	if (t->block == SW_BLOCK_EMB)
		return OPTIM_LMO_ROWS;
	if (t->kind == SW_KIND_MATRIX)
		*scale = 1.0 / (double)t->shape[1];
	return OPTIM_LMO_SIGN;
}

/*
 * Scion, unconstrained: M <- mom M + (1 - mom) g; W <- W - lr lmo(M) with
 * the linear minimization oracle of each layer's norm (optim_scion_lmo).
 */
static void scion_tensor(struct optim *o, real *p, const real *g, float *mbuf,
			 const struct sw_tensor_info *t, const struct optim_plan *pl)
{
	size_t n = (size_t)t->numel;
	double mom = o->cfg.momentum;
	real *mr = o->work + o->work_size - 2 * n, *u = mr + n;

	for (size_t k = 0; k < n; k++)
		mr[k] = elem_scion_momentum(&mbuf[k], g[k], pl->clip, mom);
	if (pl->lmo == OPTIM_LMO_ORTHO) {
		int rows = (int)t->shape[0], cols = (int)t->shape[1];
		optim_newton_schulz(u, mr, rows, cols, o->work);
		for (size_t k = 0; k < n; k++)
			u[k] *= (real)pl->scale;
	} else if (pl->lmo == OPTIM_LMO_ROWS) {
		int64_t V = t->shape[0], C = t->shape[1];
		for (int64_t i = 0; i < V; i++) {
			double s = 0;
			for (int64_t j = 0; j < C; j++)
				s += (double)mr[i * C + j] * mr[i * C + j];
			double f = elem_scion_row_factor(s, C);
			for (int64_t j = 0; j < C; j++)
				u[i * C + j] = (real)(mr[i * C + j] * f);
		}
	} else {
		for (size_t k = 0; k < n; k++)
			u[k] = elem_scion_sign(mr[k], pl->scale);
	}
	apply_update(p, u, n, pl);
}

struct optim_plan optim_tensor_plan(const struct optim_config *oc, const struct sw_tensor_info *t,
				    int64_t step, double clip_scale)
{
	struct optim_plan pl = {.update = OPTIM_UPDATE_ELEM, .rule = kind_rules[oc->kind],
				.lmo = OPTIM_LMO_SIGN, .scale = 1,
				.clip = t->block == SW_BLOCK_MULT ? 1 : clip_scale};

	optim_tensor_hparams(oc, t, step, &pl.lr, &pl.wd, &pl.mode);
	if (oc->kind == OPT_SCION) {
		pl.update = OPTIM_UPDATE_SCION;
		pl.lmo = optim_scion_lmo(t, &pl.scale);
	} else if (oc->kind == OPT_MUON && optim_is_hidden_matrix(t)) {
		pl.update = OPTIM_UPDATE_MUON;
		pl.scale = elem_muon_scale((int)t->shape[0], (int)t->shape[1]);
	}
	return pl;
}

void optim_step(struct optim *o, struct model *m, int64_t step, double clip_scale)
{
	o->t++;
	for (int i = o->first; i < o->first + o->count; i++) {
		const struct model_tensor *mt = &m->tensors[i];
		const struct sw_tensor_info *t = &mt->info;
		real *p = m->params + mt->offset;
		const real *g = m->grads + mt->offset;
		size_t k = mt->offset - o->base;        /* the tensor's moments */
		struct optim_plan pl = optim_tensor_plan(&o->cfg, t, step, clip_scale);

		if (mt->derived)        /* a gain its direction and magnitude give */
			continue;
		switch (pl.update) {
		case OPTIM_UPDATE_SCION:
			scion_tensor(o, p, g, o->m + k, t, &pl);
			break;
		case OPTIM_UPDATE_MUON:
			muon_tensor(o, p, g, o->m + k, t, &pl);
			break;
		case OPTIM_UPDATE_ELEM:
			elem_tensor(o, p, g, o->m + k, o->v + (o->voff[i] - o->vbase), t, &pl);
			break;
		}
	}
}
