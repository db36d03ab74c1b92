/* train.c - the training loop (see train.h). */
#include "train.h"
#include "../model/dp.h"
#include "../base/elemmath.h"
#include "../analysis/norms.h"
#include "../analysis/linalg.h"
#include "../model/layout.h"
#include "../model/model.h"
#include "../model/modelio.h"
#include "../analysis/qkdrift.h"
#include "../analysis/scalevec.h"
#include "rundir.h"
#include "trainopts.h"
#include "../model/sharpness.h"
#include "../files/trace.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "NaN", "Inf" or the number, for messages */
static const char *num_str(double v, char *buf, size_t len)
{
	if (isnan(v))
		return "NaN";
	if (isinf(v))
		return v > 0 ? "Inf" : "-Inf";
	snprintf(buf, len, "%g", v);
	return buf;
}

static double sumsq(const real *x, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)x[i] * x[i];
	return s;
}

static double rms(const real *x, size_t n)
{
	return n ? sqrt(sumsq(x, n) / (double)n) : 0;
}

/* ---- the trace's series ------------------------------------------------ */

enum {
	S_LOSS, S_VAL_LOSS, S_LR, S_GRAD_NORM, S_TOKENS, S_SECONDS, S_OUT_NORM, S_OUT_NORM_FOLDED,
	S_AUX_LOSS, S_RESIDUAL, S_ATTN_OUT, S_MLP_OUT, S_GAIN, S_WEIGHT, S_QHEAD, S_KHEAD, S_MULT,
	S_QK_Q, S_QK_K, S_QK_QMULT, S_QK_KMULT, S_SCALE_SD, S_SCALE_ANISO, S_SCALE_COUPLING,
	/* a mixture of experts' layers: each expert's load, the max/mean of
	 * the loads, the router's entropy */
	S_MOE_LOAD, S_MOE_IMBALANCE, S_MOE_ENTROPY,
	S_COUNT
};

/* The linear layers whose sublayer gain ||y||rms/||x||rms is traced. */
static const char *const gain_roles[] = {"q", "k", "v", "o", "gate", "up", "down"};
#define NGAIN 7

struct trace_plan {
	struct trace_series s[S_COUNT]; /* the series written: multiplier only when there are some */
	int ns;
	int kind[S_COUNT];              /* series i is S_* kind[i] */
	char **names;                   /* every column name, to free */
	int nnames;
	double *row[S_COUNT];           /* by S_*: the values of the row being written */
	int nmult, nweight, nscale;
	int *weight_tensor, *mult_tensor, *scale_tensor;
	double *colsq;                  /* (d_ff or more) a gain's readers' column norms */
	struct qk_head *qk;             /* (n_heads) one layer's Q/K pairs (qkdrift.h) */
	double *sq;                     /* (L * ACT_COUNT + 1) sums of squares of activations */
};

/* The activations whose RMS the trace reports, per layer (their sums of
 * squares are summed over the ranks of a data-parallel run). */
enum { ACT_X_IN, ACT_ATTN_Y, ACT_MLP_Y, ACT_N1, ACT_N2, ACT_Q, ACT_K, ACT_V, ACT_O_X, ACT_GATE,
       ACT_UP, ACT_D_X, ACT_COUNT };

static char *name_fmt(struct trace_plan *tp, const char *fmt, int a, const char *b)
{
	char buf[SW_NAME_MAX];
	snprintf(buf, sizeof buf, fmt, a, b);
	return tp->names[tp->nnames++] = strdup(buf);
}

/* The most values of a vector of the model (a gain's column norms fit). */
static int64_t max_numel_vector(const struct model *m)
{
	int64_t n = 1;

	for (int i = 0; i < m->ntensors; i++)
		if (m->tensors[i].info.kind == SW_KIND_VECTOR && m->tensors[i].info.numel > n)
			n = m->tensors[i].info.numel;
	return n;
}

static int plan_trace(struct trace_plan *tp, const struct model *m, struct sw_err *err)
{
	int L = (int)m->c.n_layers, H = (int)m->c.n_heads, KV = (int)m->c.n_kv_heads;
	int E = (int)m->c.n_experts;
	int cap = 64 + 3 * (L + 1) + L * (NGAIN + H + KV) + m->ntensors * 2 + L * (E + 2), k;
	const char **cols[S_COUNT];
	int ncols[S_COUNT] = {0};

	memset(tp, 0, sizeof *tp);
	tp->names = calloc((size_t)cap, sizeof *tp->names);
	tp->weight_tensor = calloc((size_t)m->ntensors, sizeof(int));
	tp->mult_tensor = calloc((size_t)m->ntensors, sizeof(int));
	tp->scale_tensor = calloc((size_t)m->ntensors, sizeof(int));
	tp->colsq = calloc((size_t)max_numel_vector(m), sizeof *tp->colsq);
	tp->qk = calloc((size_t)H, sizeof *tp->qk);
	for (int i = 0; i < S_COUNT; i++)
		cols[i] = calloc((size_t)cap, sizeof(char *));
	tp->sq = calloc((size_t)L * ACT_COUNT + 1, sizeof *tp->sq);
	if (!tp->names || !tp->weight_tensor || !tp->mult_tensor || !tp->scale_tensor || !tp->colsq ||
	    !tp->qk || !tp->sq)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (int i = 0; i < S_COUNT; i++)
		if (!cols[i])
			return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (int l = 0; l <= L; l++)
		cols[S_RESIDUAL][ncols[S_RESIDUAL]++] = l < L ? name_fmt(tp, "layer%d%s", l, "") : "final";
	for (int l = 0; l < L; l++) {
		cols[S_ATTN_OUT][ncols[S_ATTN_OUT]++] = name_fmt(tp, "layer%d%s", l, "");
		cols[S_MLP_OUT][ncols[S_MLP_OUT]++] = name_fmt(tp, "layer%d%s", l, "");
		for (int g = 0; g < NGAIN; g++)
			cols[S_GAIN][ncols[S_GAIN]++] = name_fmt(tp, "layer%d.%s", l, gain_roles[g]);
		for (int h = 0; h < H; h++) {
			char b[24];
			snprintf(b, sizeof b, ".head%d", h);
			cols[S_QHEAD][ncols[S_QHEAD]++] = name_fmt(tp, "layer%d%s", l, b);
			/* the Q/K pair of every head: the same column names */
			for (k = S_QK_Q; k <= S_QK_KMULT; k++)
				cols[k][ncols[k]++] = cols[S_QHEAD][ncols[S_QHEAD] - 1];
		}
		for (int h = 0; h < KV; h++) {
			char b[24];
			snprintf(b, sizeof b, ".head%d", h);
			cols[S_KHEAD][ncols[S_KHEAD]++] = name_fmt(tp, "layer%d%s", l, b);
		}
	}
	for (int l = 0; l < L; l++) {
		if (!arch_layer_is_moe(&m->c, l))
			continue;
		cols[S_MOE_IMBALANCE][ncols[S_MOE_IMBALANCE]++] = name_fmt(tp, "layer%d%s", l, "");
		cols[S_MOE_ENTROPY][ncols[S_MOE_ENTROPY]++] = cols[S_MOE_IMBALANCE][ncols[S_MOE_IMBALANCE] - 1];
		for (int e = 0; e < E; e++) {
			char b[24];
			snprintf(b, sizeof b, ".expert%d", e);
			cols[S_MOE_LOAD][ncols[S_MOE_LOAD]++] = name_fmt(tp, "layer%d%s", l, b);
		}
	}
	for (int i = 0; i < m->ntensors; i++) {
		const struct sw_tensor_info *t = &m->tensors[i].info;
		if (t->kind == SW_KIND_MATRIX) {
			tp->weight_tensor[tp->nweight++] = i;
			cols[S_WEIGHT][ncols[S_WEIGHT]++] = t->name;
		}
		if (t->block == SW_BLOCK_MULT) {
			tp->mult_tensor[tp->nmult++] = i;
			cols[S_MULT][ncols[S_MULT]++] = t->name;
		}
		if (scalevec_is_scale_vector(t)) {
			tp->scale_tensor[tp->nscale++] = i;
			for (k = S_SCALE_SD; k <= S_SCALE_COUPLING; k++)
				cols[k][ncols[k]++] = t->name;
		}
	}
	static const char *const scalar_names[] = {
		"loss", "val_loss", "lr", "grad_norm", "tokens", "seconds", "out_norm", "out_norm_folded",
		"aux_loss"
	};
	static const char *const vector_names[] = {
		"residual_rms", "attn_out_rms", "mlp_out_rms", "sublayer_gain", "weight_rms",
		"q_head_rms", "k_head_rms", "multiplier", "qk_q_rms", "qk_k_rms", "qk_q_mult", "qk_k_mult",
		"scale_sd", "scale_anisotropy", "scale_coupling", "moe_load", "moe_load_max_mean",
		"moe_router_entropy"
	};
	for (k = 0; k < S_COUNT; k++) {
		if ((k == S_MULT && !tp->nmult) ||
		    (k >= S_SCALE_SD && k <= S_SCALE_COUPLING && !tp->nscale) ||
		    ((k == S_AUX_LOSS || k >= S_MOE_LOAD) && !E) || (k >= S_MOE_LOAD && !ncols[k]) ||
		    ((k == S_QK_QMULT || k == S_QK_KMULT) && m->mult == MULT_NONE)) {
			free(cols[k]);
			continue;
		}
		tp->kind[tp->ns] = k;
		tp->s[tp->ns].name = k < S_RESIDUAL ? scalar_names[k] : vector_names[k - S_RESIDUAL];
		tp->s[tp->ns].ncols = k < S_RESIDUAL ? 0 : ncols[k];
		tp->s[tp->ns].columns = k < S_RESIDUAL ? NULL : cols[k];
		if (k < S_RESIDUAL)
			free(cols[k]);
		tp->row[k] = calloc((size_t)(ncols[k] > 0 ? ncols[k] : 1), sizeof(double));
		if (!tp->row[k])
			return sw_fail(err, SW_ESOFTWARE, "out of memory");
		tp->ns++;
	}
	return SW_OK;
}

static void free_plan(struct trace_plan *tp)
{
	for (int i = 0; i < tp->ns; i++)
		free((void *)tp->s[i].columns);
	for (int k = 0; k < S_COUNT; k++)
		free(tp->row[k]);
	for (int i = 0; i < tp->nnames; i++)
		free(tp->names[i]);
	free(tp->names);
	free(tp->weight_tensor);
	free(tp->mult_tensor);
	free(tp->scale_tensor);
	free(tp->colsq);
	free(tp->qk);
	free(tp->sq);
}

/* ||rows [r0, r1) of W||_rms */
static double rows_rms(const real *w, int64_t r0, int64_t r1, int64_t cols)
{
	return rms(w + r0 * cols, (size_t)((r1 - r0) * cols));
}

/*
 * The Q/K pair of every head of layer l into the rows of the qk_* series,
 * as sw-qkdrift computes it from a checkpoint of these weights
 * (qkdrift_layer on the tensors as stored); NaN if it cannot be computed
 * (a NaN in the weights).
 */
static void trace_qk(struct trace_plan *tp, const struct model *m, int l)
{
	struct qk_tensor in[QK_NROLES];
	int H = (int)m->c.n_heads;
	int ok;

	for (int r = 0; r < QK_NROLES; r++) {
		int i = model_find(m, qkdrift_roles[r], l);
		in[r].t = i < 0 ? NULL : &m->tensors[i].info;
		in[r].v = i < 0 ? NULL : m->params + m->tensors[i].offset;
	}
	ok = qkdrift_layer(&m->c, l, in, tp->qk, NULL) == SW_OK;
	for (int h = 0; h < H; h++) {
		const struct qk_head *q = &tp->qk[h];
		tp->row[S_QK_Q][l * H + h] = ok ? q->q_rms : NAN;
		tp->row[S_QK_K][l * H + h] = ok ? q->k_rms : NAN;
		if (tp->row[S_QK_QMULT]) {     /* with multipliers */
			tp->row[S_QK_QMULT][l * H + h] = ok ? q->q_mult : NAN;
			tp->row[S_QK_KMULT][l * H + h] = ok ? q->k_mult : NAN;
		}
	}
}

/* Scale vector i of the plan into the scale_* series, as sw-norms
 * --scale-vectors computes it from a checkpoint of these weights
 * (scalevec.h). */
static void trace_scale_vector(struct trace_plan *tp, const struct model *m, int i)
{
	const struct model_tensor *mt = &m->tensors[tp->scale_tensor[i]];
	const struct sw_tensor_info *t = &mt->info;
	const real *g = m->params + mt->offset;
	const char *readers[4];
	char base[SW_ROLE_MAX];
	struct scalevec_stats s;
	int found = 0, by_rows;

	scalevec_stats(g, t->numel, &s);
	memset(tp->colsq, 0, (size_t)t->numel * sizeof *tp->colsq);
	scalevec_coupling_readers(t->role, readers, base, sizeof base, &by_rows);
	for (const char **r = readers; *r; r++) {
		const char *tied = scalevec_reader_tied(*r);
		int k = model_find(m, *r, t->layer);
		const struct sw_tensor_info *w;
		if (k < 0 && tied)
			k = model_find(m, tied, -1);
		if (k < 0)
			continue;
		w = &m->tensors[k].info;
		if (w->rank != 2 || w->shape[by_rows ? 0 : 1] != t->numel)
			continue;
		if (by_rows)
			scalevec_add_row_squares(m->params + m->tensors[k].offset, w->shape[0], w->shape[1],
						 tp->colsq);
		else
			scalevec_add_column_squares(m->params + m->tensors[k].offset, w->shape[0],
						    t->numel, tp->colsq);
		found = 1;
	}
	tp->row[S_SCALE_SD][i] = s.sd;
	tp->row[S_SCALE_ANISO][i] = s.anisotropy;
	tp->row[S_SCALE_COUPLING][i] = scalevec_coupling_of_squares(g, tp->colsq, t->numel, found);
}

/* Where the last forward's activations are (N tokens on this rank): the
 * CPU model's arrays, or the GPU model's (device pointers, summed there;
 * an error stays in the GPU model, gpumodel_error). */
struct stat_src {
	const struct layer_acts *acts;  /* (L) */
	const real *x_final;            /* (N, C) */
	size_t N;
	struct gpu_model *gpu;          /* NULL on the CPU */
};

/* The sum of squares of x (n values) in double, where x is. */
static double src_sumsq(const struct stat_src *src, const real *x, size_t n)
{
	double s = 0;

	if (src->gpu) {
		gpumodel_sum(src->gpu, x, n, 1, &s, NULL);
		return s;
	}
	return sumsq(x, n);
}

/* Fill the vector series from the last forward's activations (the last
 * micro-batch: its Nt = B T tokens, over every rank) and the weights after
 * the update, the effective ones brought up to date by the caller. */
static int trace_stats(struct trace_plan *tp, struct model *m, const struct stat_src *src, struct dp *dp,
		       size_t Nt, struct sw_err *err)
{
	const struct sw_config *c = &m->c;
	size_t N = src->N, C = (size_t)c->d_model, Q = (size_t)(c->n_heads * c->head_dim),
	       K = (size_t)(c->n_kv_heads * c->head_dim), F = (size_t)c->d_ff;
	int L = (int)c->n_layers, hd = (int)c->head_dim, rc;
	double *res = tp->row[S_RESIDUAL], *ao = tp->row[S_ATTN_OUT], *mo = tp->row[S_MLP_OUT],
	       *gain = tp->row[S_GAIN], *qh = tp->row[S_QHEAD], *kh = tp->row[S_KHEAD];

	for (int l = 0; l < L; l++) {
		const struct layer_acts *a = &src->acts[l];
		double *sq = tp->sq + (size_t)l * ACT_COUNT;
		sq[ACT_X_IN] = src_sumsq(src, a->x_in, N * C);
		sq[ACT_ATTN_Y] = src_sumsq(src, a->attn_y, N * C);
		sq[ACT_MLP_Y] = src_sumsq(src, a->mlp_y, N * C);
		sq[ACT_N1] = src_sumsq(src, a->n1, N * C);
		sq[ACT_N2] = src_sumsq(src, a->n2, N * C);
		sq[ACT_Q] = src_sumsq(src, a->q_lin, N * Q);
		sq[ACT_K] = src_sumsq(src, a->k_lin, N * K);
		sq[ACT_V] = src_sumsq(src, a->v, N * K);
		sq[ACT_O_X] = src_sumsq(src, c->norm_everywhere ? a->o_in : a->att_out, N * Q);
		/* GPT-2's MLP has no gate: its gain is NaN, no such thing; nor
		 * has a mixture of experts' layer one gate, up and down */
		sq[ACT_GATE] = a->gate && !a->moe ? src_sumsq(src, a->gate, N * F) : NAN;
		sq[ACT_UP] = a->moe ? NAN : src_sumsq(src, a->up, N * F);
		sq[ACT_D_X] = a->moe ? NAN : src_sumsq(src, c->norm_everywhere ? a->d_in : a->h, N * F);
	}
	tp->sq[(size_t)L * ACT_COUNT] = src_sumsq(src, src->x_final, N * C);
	if ((rc = dp_sum(dp, tp->sq, L * ACT_COUNT + 1, err)))
		return rc;
#define RMS(l, k, width) sqrt(tp->sq[(size_t)(l) * ACT_COUNT + (k)] / (double)(Nt * (width)))
	for (int l = 0; l < L; l++) {
		const struct layer_ptrs *w = &m->p.layer[l];
		double n1 = RMS(l, ACT_N1, C), n2 = RMS(l, ACT_N2, C);
		res[l] = RMS(l, ACT_X_IN, C);
		ao[l] = RMS(l, ACT_ATTN_Y, C);
		mo[l] = RMS(l, ACT_MLP_Y, C);
		gain[l * NGAIN + 0] = RMS(l, ACT_Q, Q) / n1;
		gain[l * NGAIN + 1] = RMS(l, ACT_K, K) / n1;
		gain[l * NGAIN + 2] = RMS(l, ACT_V, K) / n1;
		gain[l * NGAIN + 3] = RMS(l, ACT_ATTN_Y, C) / RMS(l, ACT_O_X, Q);
		gain[l * NGAIN + 4] = RMS(l, ACT_GATE, F) / n2;
		gain[l * NGAIN + 5] = RMS(l, ACT_UP, F) / n2;
		gain[l * NGAIN + 6] = RMS(l, ACT_MLP_Y, C) / RMS(l, ACT_D_X, F);
		/* per-head weight norms of the effective q and k projections */
		for (int h = 0; h < c->n_heads; h++)
			qh[l * c->n_heads + h] = rows_rms(w->wq, (int64_t)h * hd, (int64_t)(h + 1) * hd, (int64_t)C);
		for (int h = 0; h < c->n_kv_heads; h++)
			kh[l * c->n_kv_heads + h] = rows_rms(w->wk, (int64_t)h * hd, (int64_t)(h + 1) * hd, (int64_t)C);
		trace_qk(tp, m, l);
	}
	res[L] = RMS(L, 0, C);
#undef RMS
	/* a mixture of experts' routing in the last forward (one process:
	 * trainer_open) */
	for (int l = 0, j = 0; c->n_experts && l < L; l++) {
		const struct moe_acts *ma = src->acts[l].moe;
		double mx = 0, mean = 0;
		if (!ma)
			continue;
		for (int e = 0; e < ma->E; e++) {
			tp->row[S_MOE_LOAD][j * ma->E + e] = ma->load[e];
			mx = ma->load[e] > mx ? ma->load[e] : mx;
			mean += ma->load[e] / ma->E;
		}
		tp->row[S_MOE_IMBALANCE][j] = mean > 0 ? mx / mean : NAN;
		tp->row[S_MOE_ENTROPY][j] = ma->entropy;
		j++;
	}
	for (int i = 0; i < tp->nweight; i++) {
		const struct model_tensor *t = &m->tensors[tp->weight_tensor[i]];
		tp->row[S_WEIGHT][i] = rms(m->params + t->offset, t->numel);
	}
	for (int i = 0; i < tp->nmult; i++) {
		const struct model_tensor *t = &m->tensors[tp->mult_tensor[i]];
		double s = 0;
		for (size_t k = 0; k < t->numel; k++)
			s += m->params[t->offset + k];
		tp->row[S_MULT][i] = s / (double)t->numel;
	}
	for (int i = 0; i < tp->nscale; i++)
		trace_scale_vector(tp, m, i);
	return SW_OK;
}

/* ||W_out||_{RMS->inf} of the head as a checkpoint stores it (lm_head,
 * or the tied embedding), raw and with the final norm's gain folded in:
 * what sw-norms prints as lm_head and lm_head_folded (norms.h); NaN if
 * it has NaNs, folded NaN without a gain */
static void out_norms(const struct model *m, double *raw, double *folded)
{
	int i = model_find(m, m->c.tie_embeddings ? "embed" : "lm_head", -1);
	struct head_norms hn;

	*raw = *folded = NAN;
	if (i < 0 || norms_output_head(m->params + m->tensors[i].offset, m->c.vocab_size,
				       m->c.d_model, m->p.final_norm, NORMS_NO_SPECTRAL, &hn, NULL))
		return;
	*raw = hn.raw.rms_to_inf;
	*folded = hn.folded.rms_to_inf;
}

/* ---- the device: the CPU reference, or the model on a GPU (--device) ---- */

/*
 * Each of these runs on the CPU model, or, with --device cuda or emu, on
 * the GPU model that mirrors it (lib/model/cuda/gpumodel.h): the host model then
 * keeps the table of tensors and the optimizer its configuration and
 * update count; both receive the device's values before a checkpoint and
 * a trace row. A GPU run is one process (trainer_open refuses mpirun).
 */
static int dev_forward(struct model *m, struct gpu_model *gpu, const int *tok, const int *tgt, int B,
		       int T, struct sw_err *err)
{
	if (!gpu) {
		model_forward(m, tok, tgt, B, T);
		return SW_OK;
	}
	return gpumodel_forward(gpu, tok, tgt, B, T, &m->loss, err);
}

static int dev_zero_grad(struct model *m, struct gpu_model *gpu, struct sw_err *err)
{
	if (!gpu) {
		model_zero_grad(m);
		return SW_OK;
	}
	return gpumodel_zero_grad(gpu, err);
}

static int dev_backward(struct model *m, struct gpu_model *gpu, const int *tok, const int *tgt,
			double loss_scale, struct sw_err *err)
{
	if (!gpu) {
		model_backward(m, tok, tgt, loss_scale);
		return SW_OK;
	}
	return gpumodel_backward(gpu, tok, tgt, loss_scale, err);
}

static int dev_grad_norm(const struct model *m, struct gpu_model *gpu, double *norm, struct sw_err *err)
{
	if (!gpu) {
		*norm = optim_grad_norm(m);
		return SW_OK;
	}
	return gpumodel_grad_norm(gpu, norm, err);
}

static int dev_step(struct model *m, struct optim *o, struct gpu_model *gpu, int64_t step, double clip,
		    struct sw_err *err)
{
	if (!gpu) {
		optim_step(o, m, step, clip);
		return SW_OK;
	}
	return gpumodel_step(gpu, o, step, clip, err);
}

/* The trace's series: the activations where they are; the weights on the
 * host (on a GPU, its parameters copied to the host model first: the Q/K
 * pairs and the output norms are computed there, as from a checkpoint),
 * the effective ones brought up to date. */
static int dev_trace_stats(struct trace_plan *tp, struct model *m, struct gpu_model *gpu, struct dp *dp,
			   size_t Nt, struct sw_err *err)
{
	struct stat_src src = {m->acts, m->x_final, (size_t)m->B * m->T, NULL};
	struct gpumodel_view v;
	int rc;

	if (gpu) {
		gpumodel_view(gpu, &v);
		src = (struct stat_src){v.acts, v.x_final, Nt, gpu};
		if ((rc = gpumodel_download(gpu, m, NULL, 0, err)))
			return rc;
	}
	model_update_effective(m);
	if ((rc = trace_stats(tp, m, &src, dp, Nt, err)))
		return rc;
	return gpu ? gpumodel_error(gpu, err) : SW_OK;
}

/* Before a checkpoint: the device's parameters and moments (with grads,
 * its gradients) into the host's model and optimizer. */
static int dev_to_host(struct model *m, struct optim *o, struct gpu_model *gpu, int grads,
		       struct sw_err *err)
{
	return gpu ? gpumodel_download(gpu, m, o, grads, err) : SW_OK;
}

/* ---- the loop ----------------------------------------------------------- */

/*
 * Everything a run holds between steps. Letters as in model.h: B sequences
 * per micro-batch, A micro-batches per step, T tokens per sequence; this
 * rank runs sequences [b0, b0 + Bl) of each micro-batch (all of them in
 * one process).
 */
struct trainer {
	const struct train_config *tc;  /* &cfg */
	struct train_config cfg;        /* the caller's, with a resumed run's options */
	struct dataset d;
	struct model m;
	struct optim o;
	struct run_state rs;            /* step, tokens, the sampler: what a checkpoint resumes */
	struct trace_plan tp;
	struct trace_writer *tw;        /* NULL: no trace */
	struct gpu_model *gpu;          /* --device cuda, emu; NULL on the CPU */
	struct rundir_claim claim;      /* out_dir: what of an earlier run goes, the trace appended? */
	int B, A, T;
	int b0, Bl;                     /* this rank's slice of a micro-batch */
	struct dp dp;                   /* the other ranks (dp.h); one process: no-ops */
	int rank;
	int tracing;                    /* a trace is written (by rank 0) */
	int reporter;                   /* the rank whose message is shown; -2: each its own */
	double exch_last;               /* dp.wait_s at the last report */
	int64_t step_last;              /* step at the last report */
	int *tok, *tgt;                 /* (B, T) one validation batch */
	int *all_tok, *all_tgt;         /* (A*B, T) the step's batch: /batch and /fisher */
	float *fisher;                  /* (nparams) the GNB estimate, with fisher_every */
	char trace_path[4096];
	char ckpt[4096];                /* the checkpoint written at this step */
	char last_good[4096];           /* the last checkpoint written or resumed from */
	double t0, t_last;              /* run start, last progress report */
	double seconds0;                /* the trace's seconds at t0: a resumed run's last */
	char resumed[512];              /* the run options a resume took from its checkpoint */
	double step_s;                  /* with tc->timing: the steps' wall seconds */
	int64_t tok_last, first_step;   /* tokens at the last report, step at start */
	int64_t first_tokens;           /* tokens at start */
};

/* What one step did: for the trace, the checkpoint and the report. */
struct step_log {
	int64_t step;                   /* the update's index (the step before it) */
	double loss, grad_norm, lr;
	double val_loss;                /* NaN when not evaluated at this step */
	double aux_loss;                /* the experts' load-balancing loss (mean over the
					   micro-batches); NaN without experts */
	int checkpointed;
};

/* Every rank's status of a stretch of work: the lowest failing rank's, on
 * all (comm_agree); that rank's message is the one shown. */
static int agree(struct trainer *t, int rc)
{
	int who;

	if ((rc = comm_agree(t->tc->comm, rc, &who)))
		t->reporter = who;
	return rc;
}

/* The validation loss: this rank's slice of every validation batch, its
 * share of the mean summed over the ranks. SW_EIO (err set on the rank
 * that saw it): the data file shrank. */
static int eval_loss(struct trainer *t, double *out, struct sw_err *err)
{
	size_t off = (size_t)t->b0 * t->T;
	double sum[1] = {0};
	int rc = SW_OK;

	for (int i = 0; i < t->tc->eval_batches && !rc; i++) {
		if ((rc = data_val_batch(&t->d, i, t->B, t->T, t->tok, t->tgt, err)))
			sw_err_prefix(err, "%s", t->tc->data_path);
		else {
			rc = dev_forward(&t->m, t->gpu, t->tok + off, t->tgt + off, t->Bl, t->T, err);
			sum[0] += t->m.loss * ((double)t->Bl / t->B);
		}
	}
	if ((rc = agree(t, rc)) || (rc = dp_sum(&t->dp, sum, 1, err)))
		return rc;
	*out = sum[0] / t->tc->eval_batches;
	return SW_OK;
}

/* "stopped; the last good checkpoint is ..." after a non-finite value */
static int stopped(struct trainer *t, const char *what, double v, int64_t step, struct sw_err *err)
{
	char nb[32];

	t->reporter = 0;        /* every rank stops here alike: one message */
	return sw_fail(err, SW_EDATA, "%s is %s at step %lld: stopped; the last good checkpoint is %s",
		       what, num_str(v, nb, sizeof nb), (long long)step,
		       t->last_good[0] ? t->last_good : "(none yet)");
}

/* A run from --init's model: its sequences of T tokens (--seq-len), at
 * most the context the checkpoint's config gives (0: none said); learned
 * positions (GPT-2) are a table of exactly its context's rows, which
 * fixes T. */
static int init_seq_len(struct model *m, int64_t T, struct sw_err *err)
{
	if (m->arch.pos_embed)
		return SW_OK;
	if (m->c.seq_len > 0 && T > m->c.seq_len)
		return sw_fail(err, SW_EUSAGE, "--seq-len %lld: longer than the --init model's "
			       "context (%lld)", (long long)T, (long long)m->c.seq_len);
	m->c.seq_len = T;
	return SW_OK;
}

/* The model, optimizer and run state: from the checkpoint to resume (ck,
 * open), or new from the configuration and the seed, or from --init's
 * model. */
static int start_model(struct trainer *t, struct ckpt *ck, struct sw_err *err)
{
	const struct train_config *tc = t->tc;
	struct sw_config c = tc->model;
	int rc;

	if (tc->resume) {
		/* one open: the run's options, the model and the optimizer's
		 * state from one reading of the file */
		if (!(rc = modelio_read(ck, &t->m, err)))
			rc = modelio_read_state(ck, &t->m, &t->o, &t->rs, err);
		if (rc) {
			sw_err_prefix(err, "%s", tc->resume);
			return rc;
		}
		if (tc->steps_given)
			t->o.cfg.steps = tc->optim.steps;
		t->B = t->rs.batch;
		t->A = t->rs.grad_accum;
		snprintf(t->last_good, sizeof t->last_good, "%s", tc->resume);
		return SW_OK;
	}
	if (tc->init) {
		/* the model of any checkpoint the tools read, from step 0 */
		if ((rc = modelio_load(tc->init, &t->m, err))) {
			sw_err_prefix(err, "%s", tc->init);
			return rc;
		}
		if ((rc = init_seq_len(&t->m, c.seq_len, err)) ||
		    (rc = optim_init(&t->o, &tc->optim, &t->m, err)))
			return rc;
		c.seq_len = t->m.c.seq_len;
	} else {
		if (!c.vocab_size)
			c.vocab_size = t->d.max_token + 1;
		if ((rc = model_build(&t->m, &c, err)) ||
		    (rc = optim_init(&t->o, &tc->optim, &t->m, err)))
			return rc;
		model_init(&t->m, tc->seed);
	}
	memset(&t->rs, 0, sizeof t->rs);
	rng_seed(&t->rs.rng, tc->seed ^ 0xda7a5eedULL);
	t->rs.batch = t->B;
	t->rs.grad_accum = t->A;
	t->rs.seq_len = (int)c.seq_len;
	t->rs.seed = tc->seed;
	return SW_OK;
}

/* The trace: the resumed run's, appended to, or a new one. */
static int open_trace(struct trainer *t, struct sw_err *err)
{
	const struct train_config *tc = t->tc;
	/* what sw-transfer ranks a run by, as a checkpoint's /optim has it */
	const struct trace_attr run[] = {
		{"/optim", "lr_max", 0, t->o.cfg.lr},
		{"/optim", "batch_size", 1, (double)t->rs.batch * t->rs.grad_accum},
	};
	int rc;

	if (tc->trace_path && !tc->trace_path[0])
		return SW_OK;
	if (tc->trace_path)
		snprintf(t->trace_path, sizeof t->trace_path, "%s", tc->trace_path);
	else
		snprintf(t->trace_path, sizeof t->trace_path, "%s/trace.h5", tc->out_dir);
	rc = t->claim.append ? trace_reopen(t->trace_path, t->tp.s, t->tp.ns, t->rs.step, &t->tw, err)
			     : trace_create(t->trace_path, &t->m.c, run, 2, t->tp.s, t->tp.ns, &t->tw, err);
	/* a resumed run's clock goes on from the trace's last row */
	for (int i = 0; !rc && t->claim.append && i < t->tp.ns; i++) {
		double s;
		if (t->tp.kind[i] == S_SECONDS && !(rc = trace_writer_last(t->tw, i, &s, err)) && isfinite(s))
			t->seconds0 = s;
	}
	if (rc)
		sw_err_prefix(err, "%s", t->trace_path);
	return rc;
}

/* --resume: the checkpoint open (*ck), the run's options it recorded
 * into t->cfg where the command line did not give them (t->resumed says
 * which, once the run starts). */
static int resume_options(struct trainer *t, struct ckpt **ck, struct sw_err *err)
{
	int rc;

	if ((rc = ckpt_open(t->cfg.resume, ck, err)))
		goto fail;
	if ((rc = trainopts_resume(&t->cfg, *ck, t->resumed, sizeof t->resumed, err))) {
		ckpt_close(*ck);
		*ck = NULL;
		goto fail;
	}
	return SW_OK;
fail:
	sw_err_prefix(err, "%s", t->cfg.resume);
	return rc;
}

/* Everything before the first step: data, model, checks, the output
 * directory (rank 0), buffers, the trace (rank 0). What --force replaces
 * of an earlier run is removed once every rank got this far
 * (trainer_start). */
static int trainer_open(struct trainer *t, const struct train_config *caller, struct sw_err *err)
{
	const struct train_config *tc = &t->cfg;
	struct ckpt *ck = NULL;
	size_t bt;
	int rc, b1;

	memset(t, 0, sizeof *t);
	t->cfg = *caller;
	t->tc = tc;
	t->rank = comm_rank(tc->comm);
	/* a resumed run goes on with the options it recorded, before its
	 * data is split by them */
	if (tc->resume && (rc = resume_options(t, &ck, err)))
		return rc;
	t->B = tc->batch;
	t->A = tc->grad_accum;
	t->reporter = -2;
	t->tracing = !(tc->trace_path && !tc->trace_path[0]);
	t->t0 = t->t_last = now_s();
	if ((rc = data_open(tc->data_path, tc->data_format, tc->val_fraction, &t->d, err))) {
		sw_err_prefix(err, "%s", tc->data_path);
		ckpt_close(ck);
		return rc;
	}
	rc = start_model(t, ck, err);
	ckpt_close(ck);
	if (rc)
		return rc;
	t->T = (int)t->m.c.seq_len;
	t->rs.train_loss = t->rs.val_loss = t->rs.aux_loss = NAN;
	if ((rc = data_check(&t->d, t->T, (int)t->m.c.vocab_size, err))) {
		sw_err_prefix(err, "%s", tc->data_path);
		return rc;
	}
	if (t->B < comm_size(tc->comm))
		return sw_fail(err, SW_EUSAGE, "a batch of %d sequences cannot be split over %d processes "
			       "(each needs at least one)", t->B, comm_size(tc->comm));
	if ((rc = dp_open(&t->dp, tc->comm, &t->m, tc->zero1, err)) ||
	    (rc = dp_shard_optim(&t->dp, &t->o, err)))
		return rc;
	dp_slice(&t->dp, t->B, &t->b0, &b1);
	t->Bl = b1 - t->b0;
	/* a mixture of experts (a checkpoint's, resumed, or --moe's) */
	if (t->m.c.n_experts && (tc->device != SW_DEVICE_CPU || comm_size(tc->comm) > 1 || tc->zero1))
		return sw_fail(err, SW_EUSAGE, "a mixture of experts under %s: not built yet (one "
			       "process on the CPU trains it)", tc->device != SW_DEVICE_CPU ?
			       "--device" : comm_size(tc->comm) > 1 ? "mpirun" : "--zero1");
	if (tc->device != SW_DEVICE_CPU && comm_size(tc->comm) > 1)
		return sw_fail(err, SW_EUSAGE, "--device %s under mpirun: not built yet (one process per GPU run)",
			       tc->device == SW_DEVICE_CUDA ? "cuda" : "emu");
	/* the device before the directory: a run it refuses leaves none */
	if (tc->device != SW_DEVICE_CPU &&
	    (rc = gpumodel_open(&t->gpu, tc->device, tc->precision, &t->m, &t->o, t->B, t->T, err)))
		return rc;
	/* only now: a run refused for its data leaves no directory behind;
	 * the directory's lock (rundir.h), taken here, is held to the end */
	if ((t->rank == 0 &&
	     (rc = rundir_claim(tc->out_dir, tc->trace_path, tc->resume, t->rs.step, tc->force,
				&t->claim, err))) ||
	    (!t->gpu && (rc = model_alloc_acts(&t->m, t->Bl, t->T, err))))
		return rc;
	bt = (size_t)t->B * t->T;
	t->tok = malloc(bt * sizeof *t->tok);
	t->tgt = malloc(bt * sizeof *t->tgt);
	t->all_tok = malloc(t->A * bt * sizeof *t->all_tok);
	t->all_tgt = malloc(t->A * bt * sizeof *t->all_tgt);
	if (!t->tok || !t->tgt || !t->all_tok || !t->all_tgt)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	if ((rc = plan_trace(&t->tp, &t->m, err)))
		return rc;
	if (tc->fisher_every > 0 && !(t->fisher = malloc(t->m.nparams * sizeof *t->fisher)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory for /fisher");
	if (t->rank == 0 && (rc = open_trace(t, err)))
		return rc;
	t->first_step = t->step_last = t->rs.step;
	t->first_tokens = t->tok_last = t->rs.tokens;
	return SW_OK;
}

/* Every rank is ready: the run starts, and what --force replaces goes. */
static int trainer_start(struct trainer *t, int rc, struct sw_err *err)
{
	char note[1024] = "";

	if ((rc = agree(t, rc)))
		return rc;
	if (t->rank == 0 && t->resumed[0] && t->tc->note) {
		const char *ck = t->tc->resume, *base = strrchr(ck, '/') ? strrchr(ck, '/') + 1 : ck;
		char msg[1024];
		snprintf(msg, sizeof msg, "--resume: as %s records: %s", base, t->resumed);
		t->tc->note(t->tc->ctx, msg);
	}
	if (t->rank == 0)
		rc = rundir_clear(&t->claim, note, sizeof note, err);
	if (!rc && note[0] && t->tc->note) {
		char msg[1100];
		snprintf(msg, sizeof msg, "--force: %s", note);
		t->tc->note(t->tc->ctx, msg);
	}
	return agree(t, rc);
}

/* Free everything; the trace's close may fail (rc is returned if set). */
static int trainer_close(struct trainer *t, int rc, struct sw_err *err)
{
	if (t->tw) {
		struct sw_err e2;
		if (trace_close(t->tw, &e2) && !rc) {
			*err = e2;
			sw_err_prefix(err, "%s", t->trace_path);
			rc = e2.code;
			t->reporter = -2;
		}
	}
	dp_close(&t->dp);
	rundir_claim_free(&t->claim);
	gpumodel_close(t->gpu);
	free_plan(&t->tp);
	free(t->fisher);
	free(t->tok);
	free(t->tgt);
	free(t->all_tok);
	free(t->all_tgt);
	optim_free(&t->o);
	if (t->m.tensors)
		model_free(&t->m);
	data_close(&t->d);
	return rc;
}

/* Micro-batch a of the step: the next B sequences of the sampler (every
 * rank draws them all), into the step's batch. */
static int next_batch(struct trainer *t, int a, struct sw_err *err)
{
	size_t bt = (size_t)t->B * t->T;
	int rc;

	if ((rc = data_train_batch(&t->d, &t->rs.rng, t->B, t->T, t->all_tok + a * bt,
				   t->all_tgt + a * bt, err)))
		sw_err_prefix(err, "%s", t->tc->data_path);
	return rc;
}

/* Zero grad, then per micro-batch: next batch, forward and backward of
 * this rank's slice; the gradient is of its share of the mean loss over
 * the A micro-batches (Bl/B of each), and *loss its share of that mean.
 * *nonfinite: a loss was NaN or Inf (the rest is skipped). The last
 * backward exchanges the gradients as it goes (dp_arm). */
static int forward_backward(struct trainer *t, double *loss, double *aux, int *nonfinite,
			    struct sw_err *err)
{
	struct model *m = &t->m;
	double share = (double)t->Bl / t->B;
	size_t off = (size_t)t->b0 * t->T;
	int rc;

	*loss = 0;
	*aux = m->c.n_experts ? 0 : NAN;
	*nonfinite = 0;
	if ((rc = dev_zero_grad(m, t->gpu, err)))
		return rc;
	for (int a = 0; a < t->A; a++) {
		const int *tok = t->all_tok + (size_t)a * t->B * t->T + off,
			  *tgt = t->all_tgt + (size_t)a * t->B * t->T + off;
		if ((rc = next_batch(t, a, err)) || (rc = dev_forward(m, t->gpu, tok, tgt, t->Bl, t->T, err)))
			return rc;
		*loss += m->loss * share / t->A;
		if (m->c.n_experts)
			*aux += m->aux_loss / t->A;     /* one process (trainer_open) */
		if (!isfinite(m->loss)) {
			*nonfinite = 1;
			return SW_OK;
		}
		if (a == t->A - 1)
			dp_arm(&t->dp);
		if ((rc = dev_backward(m, t->gpu, tok, tgt, share / t->A, err)))
			return rc;
	}
	return SW_OK;
}

/* The step's gradient of the whole batch, on every rank: this rank's
 * forward and backward, the exchange (every rank takes part, whatever
 * happened on it), then the agreement on how it went. */
static int gradient(struct trainer *t, struct step_log *s, int *stop, struct sw_err *err)
{
	double sums[3];                 /* loss, a NaN or Inf loss, interrupted */
	int nonfinite = 0, rc, rc2;

	rc = forward_backward(t, &sums[0], &s->aux_loss, &nonfinite, err);
	rc2 = dp_reduce_grads(&t->dp, rc ? NULL : err);
	if ((rc = agree(t, rc ? rc : rc2)))
		return rc;
	sums[1] = nonfinite;
	sums[2] = t->tc->interrupt && *t->tc->interrupt;
	if ((rc = dp_sum(&t->dp, sums, 3, err)))
		return rc;
	s->loss = sums[0];
	*stop = sums[2] > 0;
	if (sums[1] > 0 || !isfinite(s->loss))
		return stopped(t, "loss", s->loss, s->step + 1, err);
	return SW_OK;
}

/* Clip and update; the step is done. */
static int update(struct trainer *t, struct step_log *s, struct sw_err *err)
{
	double clip;
	int rc;

	model_timing_mark(&t->m.timing);
	if ((rc = dev_grad_norm(&t->m, t->gpu, &s->grad_norm, err)))
		return rc;
	if (!isfinite(s->grad_norm))
		return stopped(t, "gradient norm", s->grad_norm, s->step + 1, err);
	clip = elem_clip_scale(s->grad_norm, t->o.cfg.grad_clip);
	s->lr = optim_lr_at(&t->o.cfg, s->step);
	/* m.grads stay raw for /grads */
	if ((rc = dev_step(&t->m, &t->o, t->gpu, s->step, clip, err)))
		return rc;
	model_timing_lap(&t->m.timing, MODEL_PHASE_OPTIMIZER);
	if ((rc = dp_gather_params(&t->dp, err)))       /* ZeRO-1: every rank's shard */
		return rc;
	t->rs.step++;
	t->rs.tokens += (int64_t)t->A * t->B * t->T;
	t->rs.train_loss = s->loss;
	t->rs.aux_loss = s->aux_loss;
	return SW_OK;
}

/* Is this (done) step one of every n, or the last? */
static int due(const struct trainer *t, int64_t every)
{
	return every > 0 && (t->rs.step % every == 0 || t->rs.step == t->o.cfg.steps);
}

/* The validation loss when due (and there is a validation split). */
static int evaluate(struct trainer *t, struct step_log *s, struct sw_err *err)
{
	double val;
	int rc;

	t->rs.val_loss = NAN;
	if (!due(t, t->tc->eval_every) || t->d.n <= t->d.n_train)
		return SW_OK;
	if ((rc = eval_loss(t, &val, err)))
		return rc;
	if (!isfinite(val))
		return stopped(t, "validation loss", val, t->rs.step, err);
	t->rs.val_loss = s->val_loss = val;
	return SW_OK;
}

/* A trace row (rank 0): the scalars of the step and the series
 * trace_stats filled. */
static int trace_row(struct trainer *t, const struct step_log *s, struct sw_err *err)
{
	struct trace_plan *tp = &t->tp;
	const double *rowp[S_COUNT];
	int rc;

	if (!t->tw)
		return SW_OK;
	tp->row[S_LOSS][0] = s->loss;
	if (tp->row[S_AUX_LOSS])
		tp->row[S_AUX_LOSS][0] = s->aux_loss;
	tp->row[S_VAL_LOSS][0] = s->val_loss;
	tp->row[S_LR][0] = s->lr;
	tp->row[S_GRAD_NORM][0] = s->grad_norm;
	tp->row[S_TOKENS][0] = (double)t->rs.tokens;
	tp->row[S_SECONDS][0] = t->seconds0 + (now_s() - t->t0);
	out_norms(&t->m, &tp->row[S_OUT_NORM][0], &tp->row[S_OUT_NORM_FOLDED][0]);
	for (int i = 0; i < tp->ns; i++)
		rowp[i] = tp->row[tp->kind[i]];
	/* the rows flushed before stay: the trace is the run's log */
	if ((rc = trace_append(t->tw, t->rs.step, rowp, err)))
		sw_err_prefix(err, "%s", t->trace_path);
	return rc;
}

/* GNB on this step's batch at the new parameters, with its own RNG (the
 * run's data order is untouched), split over the ranks like the batch. */
static int fisher(struct trainer *t, struct modelio_extras *x, struct sw_err *err)
{
	struct run_state *rs = &t->rs;
	struct sw_rng fr;
	int rc;

	x->fisher_seed = rs->seed * 1000003ULL + (uint64_t)rs->step;
	rng_seed(&fr, x->fisher_seed);
	memset(t->fisher, 0, t->m.nparams * sizeof *t->fisher);
	if (t->gpu)
		rc = gpumodel_gnb(t->gpu, t->all_tok, t->A * t->B, t->T, t->B, 1, &fr, t->fisher, NULL, 0, err);
	else
		rc = dp_gnb_estimate(&t->dp, t->all_tok, t->A * t->B, t->T, t->Bl, 1, &fr, t->fisher, NULL,
				     NULL, NULL, err);
	/* the training slice's activations back (a no-op in one process) */
	if (!rc && !t->gpu)
		rc = model_alloc_acts(&t->m, t->Bl, t->T, err);
	x->fisher = t->fisher;
	x->fisher_batch_tokens = (int64_t)t->A * t->B * t->T;
	x->fisher_draws = 1;
	return rc;
}

/* A checkpoint when due, at the end, or when stopping, written by rank 0;
 * /fisher in it at multiples of fisher_every. rc: a failure before, on
 * this rank (the checkpoint is not written, but the rank takes part). */
static int checkpoint(struct trainer *t, struct step_log *s, int stop, int rc, struct sw_err *err)
{
	const struct train_config *tc = t->tc;
	struct run_state *rs = &t->rs;
	struct modelio_attr run[TRAINOPTS_RUN_MAX];
	struct modelio_extras x = {t->all_tok, t->all_tgt, t->A * t->B, t->T, tc->save_grads,
				   NULL, 0, 0, 0, run, trainopts_run_attrs(tc, run)};
	struct optim full;
	int rc2;

	if (!due(t, tc->ckpt_every) && rs->step != t->o.cfg.steps && !stop)
		return agree(t, rc);
	if (tc->fisher_every > 0 && rs->step % tc->fisher_every == 0 &&
	    (rc2 = fisher(t, &x, rc ? NULL : err)) && !rc)
		rc = rc2;
	if (!rc)
		rc = dev_to_host(&t->m, &t->o, t->gpu, tc->save_grads, err);
	if ((rc = agree(t, rc)) || (rc = dp_params_agree(&t->dp, err)) ||
	    (rc = dp_full_optim(&t->dp, &t->o, &full, err)))
		return agree(t, rc);
	snprintf(t->ckpt, sizeof t->ckpt, "%s/ckpt-%06lld.h5", tc->out_dir, (long long)rs->step);
	if (t->rank == 0) {
		model_update_gains(&t->m);      /* gamma of the parameters saved */
		rc = modelio_save(t->ckpt, &t->m, &full, rs, &x, err);
	}
	dp_full_optim_free(&t->dp, &full);
	if ((rc = agree(t, rc)))
		return rc;
	snprintf(t->last_good, sizeof t->last_good, "%s", t->ckpt);
	s->checkpointed = 1;
	return SW_OK;
}

/* The progress callback (rank 0): the step, its rates since the last
 * report. */
static void report(struct trainer *t, const struct step_log *s)
{
	double now = now_s();
	int64_t steps = t->rs.step - t->step_last;
	struct train_progress p = {
		.step = t->rs.step, .steps = t->o.cfg.steps, .tokens = t->rs.tokens,
		.tokens_run = t->rs.tokens - t->first_tokens,
		.loss = s->loss, .val_loss = s->val_loss, .lr = s->lr, .grad_norm = s->grad_norm,
		.tokens_per_s = (double)(t->rs.tokens - t->tok_last) / (now - t->t_last + 1e-12),
		.elapsed_s = now - t->t0,
		.checkpoint = s->checkpointed ? t->ckpt : NULL,
		.ranks = t->dp.size,
		.exchange_s = steps > 0 ? (t->dp.wait_s - t->exch_last) / (double)steps : 0,
	};

	if (!t->tc->progress || t->rank != 0)
		return;
	p.eta_s = p.elapsed_s / (double)(t->rs.step - t->first_step) * (double)(t->o.cfg.steps - t->rs.step);
	t->t_last = now;
	t->tok_last = t->rs.tokens;
	t->exch_last = t->dp.wait_s;
	t->step_last = t->rs.step;
	t->tc->progress(t->tc->ctx, &p);
}

void train_config_defaults(struct train_config *tc)
{
	struct sw_config *c = &tc->model;

	memset(tc, 0, sizeof *tc);
	optim_defaults(&tc->optim);
	strcpy(c->arch, "llama");
	c->d_model = 128;
	c->n_layers = 2;
	c->n_heads = 4;
	c->seq_len = 64;
	c->rope_theta = 10000;
	c->norm_eps = 1e-5;
	c->scale_vectors = 1;
	strcpy(c->multipliers, "none");
	tc->val_fraction = 0.1;
	tc->eval_every = 100;
	tc->eval_batches = 4;
	tc->batch = 8;
	tc->grad_accum = 1;
	tc->seed = 1;
	tc->trace_every = 10;
}

int train_run(const struct train_config *tc, struct train_result *res, struct sw_err *err)
{
	struct trainer t;
	int rc = trainer_open(&t, tc, err);

	rc = trainer_start(&t, rc, err);
	while (!rc && t.rs.step < t.o.cfg.steps) {
		struct step_log s = {.step = t.rs.step, .val_loss = NAN};
		int stop = 0, trace_now;
		double t_step = now_s();

		/* the phases of the step alone are timed (an evaluation's
		 * forward passes are not) */
		t.m.timing.on = t.tc->timing;
		rc = gradient(&t, &s, &stop, err);
		if (!rc)
			rc = update(&t, &s, err);
		t.m.timing.on = 0;
		t.step_s += now_s() - t_step;
		if (rc)
			break;
		/* the trace's activation statistics are this step's, before
		 * evaluation reuses the activations */
		/* and at every evaluation, so that no validation loss is
		 * missing from the trace whatever the two periods */
		trace_now = t.tracing && (due(&t, t.tc->trace_every) ||
					  (due(&t, t.tc->eval_every) && t.d.n > t.d.n_train));
		if ((trace_now && (rc = dev_trace_stats(&t.tp, &t.m, t.gpu, &t.dp, (size_t)t.B * t.T, err))) ||
		    (rc = evaluate(&t, &s, err)))
			break;
		/* a trace row that failed (rank 0) stops every rank before the checkpoint */
		rc = trace_now ? trace_row(&t, &s, err) : SW_OK;
		if ((rc = checkpoint(&t, &s, stop, rc, err)))
			break;
		report(&t, &s);
		if (stop) {
			t.reporter = 0;         /* every rank stops here alike */
			rc = sw_fail(err, SW_EINTERRUPTED, "interrupted at step %lld; wrote %s",
				     (long long)t.rs.step, t.last_good);
		}
	}
	if (res) {
		/* read before trainer_close frees the model */
		res->step_s = t.step_s;
		memcpy(res->phase_s, t.m.timing.s, sizeof res->phase_s);
	}
	rc = trainer_close(&t, rc, err);
	if (res) {
		snprintf(res->checkpoint, sizeof res->checkpoint, "%s", t.last_good);
		res->step = t.rs.step;
		res->loss = t.rs.train_loss;
		res->val_loss = t.rs.val_loss;
		res->reporter = !rc ? -1 : t.reporter == -2 ? t.rank : t.reporter;
	}
	return rc;
}
