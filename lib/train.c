/* train.c - the training loop (see train.h). */
#include "train.h"
#include "elemmath.h"
#include "norms.h"
#include "linalg.h"
#include "model.h"
#include "modelio.h"
#include "rundir.h"
#include "sharpness.h"
#include "trace.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* ---- the trace's series ------------------------------------------------ */

enum {
	S_LOSS, S_VAL_LOSS, S_LR, S_GRAD_NORM, S_TOKENS, S_SECONDS, S_OUT_NORM,
	S_RESIDUAL, S_ATTN_OUT, S_MLP_OUT, S_GAIN, S_WEIGHT, S_QHEAD, S_KHEAD, S_MULT,
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
	int nmult, nweight;
	int *weight_tensor, *mult_tensor;
};

static char *name_fmt(struct trace_plan *tp, const char *fmt, int a, const char *b)
{
	char buf[SW_NAME_MAX];
	snprintf(buf, sizeof buf, fmt, a, b);
	return tp->names[tp->nnames++] = strdup(buf);
}

static int plan_trace(struct trace_plan *tp, const struct model *m, struct sw_err *err)
{
	int L = (int)m->c.n_layers, H = (int)m->c.n_heads, KV = (int)m->c.n_kv_heads;
	int cap = 64 + 3 * (L + 1) + L * (NGAIN + H + KV) + m->ntensors * 2, k;
	const char **cols[S_COUNT];
	int ncols[S_COUNT] = {0};

	memset(tp, 0, sizeof *tp);
	tp->names = calloc((size_t)cap, sizeof *tp->names);
	tp->weight_tensor = calloc((size_t)m->ntensors, sizeof(int));
	tp->mult_tensor = calloc((size_t)m->ntensors, sizeof(int));
	for (int i = 0; i < S_COUNT; i++)
		cols[i] = calloc((size_t)cap, sizeof(char *));
	if (!tp->names || !tp->weight_tensor || !tp->mult_tensor)
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
		}
		for (int h = 0; h < KV; h++) {
			char b[24];
			snprintf(b, sizeof b, ".head%d", h);
			cols[S_KHEAD][ncols[S_KHEAD]++] = name_fmt(tp, "layer%d%s", l, b);
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
	}
	static const char *const scalar_names[] = {
		"loss", "val_loss", "lr", "grad_norm", "tokens", "seconds", "out_norm"
	};
	static const char *const vector_names[] = {
		"residual_rms", "attn_out_rms", "mlp_out_rms", "sublayer_gain", "weight_rms",
		"q_head_rms", "k_head_rms", "multiplier"
	};
	for (k = 0; k < S_COUNT; k++) {
		if (k == S_MULT && !tp->nmult) {
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
}

/* What trace_stats reads: the activations of the last forward (N tokens),
 * the effective weights and the parameters, where the model computes:
 * the CPU model's arrays, or the GPU model's (device pointers, summed
 * there; an error stays in the GPU model, gpumodel_error). */
struct stat_src {
	const struct layer_acts *acts;  /* (L) */
	const real *x_final;            /* (N, C) */
	const struct layer_ptrs *w;     /* (L) */
	const real *params;
	size_t N;
	struct gpu_model *gpu;          /* NULL on the CPU */
};

/* The sum of x (squares: of x^2) over n values, in double. */
static double src_sum(const struct stat_src *src, const real *x, size_t n, int squares)
{
	double s = 0;

	if (src->gpu) {
		gpumodel_sum(src->gpu, x, n, squares, &s, NULL);
		return s;
	}
	for (size_t i = 0; i < n; i++)
		s += squares ? (double)x[i] * x[i] : (double)x[i];
	return s;
}

static double rms(const struct stat_src *src, const real *x, size_t n)
{
	return n ? sqrt(src_sum(src, x, n, 1) / (double)n) : 0;
}

/* ||rows [r0, r1) of W||_rms */
static double rows_rms(const struct stat_src *src, const real *w, int64_t r0, int64_t r1, int64_t cols)
{
	return rms(src, w + r0 * cols, (size_t)((r1 - r0) * cols));
}

/* Fill the vector series from the last forward's activations (the last
 * micro-batch) and the weights after the update (effective weights
 * brought up to date by the caller). */
static void trace_stats(struct trace_plan *tp, const struct model *m, const struct stat_src *src)
{
	const struct sw_config *c = &m->c;
	size_t N = src->N, C = (size_t)c->d_model, Q = (size_t)(c->n_heads * c->head_dim),
	       K = (size_t)(c->n_kv_heads * c->head_dim), F = (size_t)c->d_ff;
	int L = (int)c->n_layers, hd = (int)c->head_dim;
	double *res = tp->row[S_RESIDUAL], *ao = tp->row[S_ATTN_OUT], *mo = tp->row[S_MLP_OUT],
	       *gain = tp->row[S_GAIN], *qh = tp->row[S_QHEAD], *kh = tp->row[S_KHEAD];

	for (int l = 0; l < L; l++) {
		const struct layer_acts *a = &src->acts[l];
		const struct layer_ptrs *w = &src->w[l];
		const real *o_x = c->norm_everywhere ? a->o_in : a->att_out;
		const real *d_x = c->norm_everywhere ? a->d_in : a->h;
		double n1 = rms(src, a->n1, N * C), n2 = rms(src, a->n2, N * C);
		res[l] = rms(src, a->x_in, N * C);
		ao[l] = rms(src, a->attn_y, N * C);
		mo[l] = rms(src, a->mlp_y, N * C);
		gain[l * NGAIN + 0] = rms(src, a->q_lin, N * Q) / n1;
		gain[l * NGAIN + 1] = rms(src, a->k_lin, N * K) / n1;
		gain[l * NGAIN + 2] = rms(src, a->v, N * K) / n1;
		gain[l * NGAIN + 3] = rms(src, a->attn_y, N * C) / rms(src, o_x, N * Q);
		gain[l * NGAIN + 4] = rms(src, a->gate, N * F) / n2;
		gain[l * NGAIN + 5] = rms(src, a->up, N * F) / n2;
		gain[l * NGAIN + 6] = rms(src, a->mlp_y, N * C) / rms(src, d_x, N * F);
		/* per-head weight norms of the effective q and k projections */
		for (int h = 0; h < c->n_heads; h++)
			qh[l * c->n_heads + h] = rows_rms(src, w->wq, (int64_t)h * hd, (int64_t)(h + 1) * hd,
							  (int64_t)C);
		for (int h = 0; h < c->n_kv_heads; h++)
			kh[l * c->n_kv_heads + h] = rows_rms(src, w->wk, (int64_t)h * hd, (int64_t)(h + 1) * hd,
							     (int64_t)C);
	}
	res[L] = rms(src, src->x_final, N * C);
	for (int i = 0; i < tp->nweight; i++) {
		const struct model_tensor *t = &m->tensors[tp->weight_tensor[i]];
		tp->row[S_WEIGHT][i] = rms(src, src->params + t->offset, t->numel);
	}
	for (int i = 0; i < tp->nmult; i++) {
		const struct model_tensor *t = &m->tensors[tp->mult_tensor[i]];
		tp->row[S_MULT][i] = src_sum(src, src->params + t->offset, t->numel, 0) / (double)t->numel;
	}
}

/* ||W_out||_{RMS->inf} of the head as used (norms.h); NaN if it has NaNs */
static double out_norm(const struct model *m)
{
	struct head_norms hn;

	if (norms_output_head(m->p.lm_head, m->c.vocab_size, m->c.d_model, NULL,
			      NORMS_NO_SPECTRAL, &hn, NULL))
		return NAN;
	return hn.raw.rms_to_inf;
}

/* ---- the device: the CPU reference, or the model on a GPU (--device) ---- */

/*
 * Each of these runs on the CPU model, or, with --device cuda or emu, on
 * the GPU model that mirrors it (lib/cuda/gpumodel.h): the host model then
 * keeps the table of tensors and the optimizer its configuration and
 * update count; both receive the device's values before a checkpoint.
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

/* The trace's series of N tokens' activations, the effective weights
 * brought up to date first; on a GPU also the head as used copied to the
 * host model, for out_norm. */
static int dev_trace_stats(struct trace_plan *tp, struct model *m, struct gpu_model *gpu, size_t N,
			   struct sw_err *err)
{
	struct stat_src src = {m->acts, m->x_final, m->p.layer, m->params, N, NULL};
	struct gpumodel_view v;
	int rc;

	if (!gpu) {
		model_update_effective(m);
		trace_stats(tp, m, &src);
		return SW_OK;
	}
	gpumodel_view(gpu, &v);
	src = (struct stat_src){v.acts, v.x_final, v.w, v.params, N, gpu};
	if ((rc = gpumodel_update_effective(gpu, err)))
		return rc;
	trace_stats(tp, m, &src);
	if ((rc = gpumodel_error(gpu, err)))
		return rc;
	return gpumodel_download_at(gpu, m->p.lm_head, (size_t)(m->c.vocab_size * m->c.d_model), err);
}

/* A GNB estimate of one draw on B sequences in micro-batches of mb. */
static int dev_gnb(struct model *m, struct gpu_model *gpu, const int *tokens, int B, int T, int mb,
		   struct sw_rng *r, float *h, struct sw_err *err)
{
	if (!gpu)
		return gnb_estimate(m, tokens, B, T, mb, 1, r, h, NULL, NULL, err);
	return gpumodel_gnb(gpu, tokens, B, T, mb, 1, r, h, NULL, 0, err);
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
 * per micro-batch, A micro-batches per step, T tokens per sequence.
 */
struct trainer {
	const struct train_config *tc;
	struct dataset d;
	struct model m;
	struct optim o;
	struct run_state rs;            /* step, tokens, the sampler: what a checkpoint resumes */
	struct trace_plan tp;
	struct trace_writer *tw;        /* NULL: no trace */
	struct gpu_model *gpu;          /* --device cuda, emu; NULL on the CPU */
	struct rundir_claim claim;      /* out_dir: what of an earlier run goes, the trace appended? */
	int B, A, T;
	int *tok, *tgt;                 /* (B, T) one micro-batch */
	int *all_tok, *all_tgt;         /* (A*B, T) the step's batch: /batch and /fisher */
	float *fisher;                  /* (nparams) the GNB estimate, with fisher_every */
	char trace_path[4096];
	char ckpt[4096];                /* the checkpoint written at this step */
	char last_good[4096];           /* the last checkpoint written or resumed from */
	double t0, t_last;              /* run start, last progress report */
	int64_t tok_last, first_step;   /* tokens at the last report, step at start */
	int64_t first_tokens;           /* tokens at start */
};

/* What one step did: for the trace, the checkpoint and the report. */
struct step_log {
	int64_t step;                   /* the update's index (the step before it) */
	double loss, grad_norm, lr;
	double val_loss;                /* NaN when not evaluated at this step */
	int checkpointed;
};

/* SW_EDATA: the loss is not finite; SW_EIO (err set): the data file
 * shrank; a device's error */
static int eval_loss(struct model *m, struct gpu_model *gpu, const struct dataset *d, int nbatches,
		     int B, int T, int *tok, int *tgt, double *out, struct sw_err *err)
{
	double sum = 0;
	int rc;

	for (int i = 0; i < nbatches; i++) {
		if ((rc = data_val_batch(d, i, B, T, tok, tgt, err)) ||
		    (rc = dev_forward(m, gpu, tok, tgt, B, T, err)))
			return rc;
		sum += m->loss;
	}
	*out = sum / nbatches;
	return isfinite(*out) ? SW_OK : SW_EDATA;
}

/* mkdir -p: the output directory and any missing parents */
static int ensure_dir(const char *dir, struct sw_err *err)
{
	char path[4096];
	struct stat st;
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof path)
		return sw_fail(err, SW_ECANTCREAT, "%s: bad output directory name", dir);
	memcpy(path, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		path[i] = '\0';
		if (mkdir(path, 0777) < 0 && errno != EEXIST)
			return sw_fail(err, SW_ECANTCREAT, "%s: cannot create the output directory: %s",
				       dir, strerror(errno));
		if (i < n)
			path[i] = '/';
	}
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return sw_fail(err, SW_ECANTCREAT, "%s: cannot create the output directory: %s", dir,
			       strerror(errno ? errno : ENOTDIR));
	return SW_OK;
}

/* "stopped; the last good checkpoint is ..." after a non-finite value */
static int stopped(struct trainer *t, const char *what, double v, int64_t step, struct sw_err *err)
{
	char nb[32];

	return sw_fail(err, SW_EDATA, "%s is %s at step %lld: stopped; the last good checkpoint is %s",
		       what, num_str(v, nb, sizeof nb), (long long)step,
		       t->last_good[0] ? t->last_good : "(none yet)");
}

/* The model, optimizer and run state: from the checkpoint to resume, or
 * new from the configuration and the seed. */
static int start_model(struct trainer *t, struct sw_err *err)
{
	const struct train_config *tc = t->tc;
	struct sw_config c = tc->model;
	int rc;

	if (tc->resume) {
		if ((rc = modelio_load(tc->resume, &t->m, err)) ||
		    (rc = modelio_load_state(tc->resume, &t->m, &t->o, &t->rs, err))) {
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
	if (!c.vocab_size)
		c.vocab_size = t->d.max_token + 1;
	if ((rc = model_build(&t->m, &c, err)) || (rc = optim_init(&t->o, &tc->optim, &t->m, err)))
		return rc;
	model_init(&t->m, tc->seed);
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
	int rc;

	if (tc->trace_path && !tc->trace_path[0])
		return SW_OK;
	if (tc->trace_path)
		snprintf(t->trace_path, sizeof t->trace_path, "%s", tc->trace_path);
	else
		snprintf(t->trace_path, sizeof t->trace_path, "%s/trace.h5", tc->out_dir);
	rc = t->claim.append ? trace_reopen(t->trace_path, t->tp.s, t->tp.ns, t->rs.step, &t->tw, err)
			     : trace_create(t->trace_path, &t->m.c, t->tp.s, t->tp.ns, &t->tw, err);
	if (rc)
		sw_err_prefix(err, "%s", t->trace_path);
	return rc;
}

/* Everything before the first step: data, model, checks, the output
 * directory, buffers, the trace; then, the run started, what --force
 * replaces of an earlier run is removed. */
static int trainer_open(struct trainer *t, const struct train_config *tc, struct sw_err *err)
{
	char note[1024];
	size_t bt;
	int rc;

	memset(t, 0, sizeof *t);
	t->tc = tc;
	t->B = tc->batch;
	t->A = tc->grad_accum;
	t->t0 = t->t_last = now_s();
	if ((rc = data_open(tc->data_path, tc->data_format, tc->val_fraction, &t->d, err))) {
		sw_err_prefix(err, "%s", tc->data_path);
		return rc;
	}
	if ((rc = start_model(t, err)))
		return rc;
	t->T = (int)t->m.c.seq_len;
	t->rs.train_loss = t->rs.val_loss = NAN;
	if ((rc = data_check(&t->d, t->T, (int)t->m.c.vocab_size, err))) {
		sw_err_prefix(err, "%s", tc->data_path);
		return rc;
	}
	/* the device before the directory: a run it refuses leaves none */
	if (tc->device != SW_DEVICE_CPU &&
	    (rc = gpumodel_open(&t->gpu, tc->device, tc->precision, &t->m, &t->o, t->B, t->T, err)))
		return rc;
	if ((rc = rundir_claim(tc->out_dir, tc->trace_path, tc->resume, t->rs.step, tc->force,
			       &t->claim, err)))
		return rc;
	/* only now: a run refused for its data leaves no directory behind */
	if ((rc = ensure_dir(tc->out_dir, err)) ||
	    (!t->gpu && (rc = model_alloc_acts(&t->m, t->B, t->T, err))))
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
	if ((rc = open_trace(t, err)) || (rc = rundir_clear(&t->claim, note, sizeof note, err)))
		return rc;
	if (note[0] && tc->note)
		tc->note(tc->ctx, note);
	t->first_step = t->rs.step;
	t->first_tokens = t->tok_last = t->rs.tokens;
	return SW_OK;
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
		}
	}
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

/* Micro-batch a of the step: the next B sequences of the sampler, kept in
 * the step's batch. */
static int next_batch(struct trainer *t, int a, struct sw_err *err)
{
	size_t bt = (size_t)t->B * t->T;
	int rc;

	if ((rc = data_train_batch(&t->d, &t->rs.rng, t->B, t->T, t->tok, t->tgt, err))) {
		sw_err_prefix(err, "%s", t->tc->data_path);
		return rc;
	}
	memcpy(t->all_tok + a * bt, t->tok, bt * sizeof *t->tok);
	memcpy(t->all_tgt + a * bt, t->tgt, bt * sizeof *t->tgt);
	return SW_OK;
}

/* Zero grad, then per micro-batch: next batch, forward, backward; the
 * gradient is of the mean loss over the A micro-batches. */
static int forward_backward(struct trainer *t, struct step_log *s, struct sw_err *err)
{
	struct model *m = &t->m;
	int rc;

	s->loss = 0;
	if ((rc = dev_zero_grad(m, t->gpu, err)))
		return rc;
	for (int a = 0; a < t->A; a++) {
		if ((rc = next_batch(t, a, err)) || (rc = dev_forward(m, t->gpu, t->tok, t->tgt, t->B, t->T, err)))
			return rc;
		if (!isfinite(m->loss))
			return stopped(t, "loss", m->loss, s->step + 1, err);
		s->loss += m->loss / t->A;
		if ((rc = dev_backward(m, t->gpu, t->tok, t->tgt, 1.0 / t->A, err)))
			return rc;
	}
	return SW_OK;
}

/* Clip and update; the step is done. */
static int update(struct trainer *t, struct step_log *s, struct sw_err *err)
{
	double clip;
	int rc;

	if ((rc = dev_grad_norm(&t->m, t->gpu, &s->grad_norm, err)))
		return rc;
	if (!isfinite(s->grad_norm))
		return stopped(t, "gradient norm", s->grad_norm, s->step + 1, err);
	clip = elem_clip_scale(s->grad_norm, t->o.cfg.grad_clip);
	s->lr = optim_lr_at(&t->o.cfg, s->step);
	/* m.grads stay raw for /grads */
	if ((rc = dev_step(&t->m, &t->o, t->gpu, s->step, clip, err)))
		return rc;
	t->rs.step++;
	t->rs.tokens += (int64_t)t->A * t->B * t->T;
	t->rs.train_loss = s->loss;
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
	rc = eval_loss(&t->m, t->gpu, &t->d, t->tc->eval_batches, t->B, t->T, t->tok, t->tgt, &val, err);
	if (rc == SW_EIO) {
		sw_err_prefix(err, "%s", t->tc->data_path);
		return rc;
	}
	if (rc && rc != SW_EDATA)       /* the device's */
		return rc;
	if (rc)
		return stopped(t, "validation loss", val, t->rs.step, err);
	t->rs.val_loss = s->val_loss = val;
	return SW_OK;
}

/* A trace row: the scalars of the step and the series trace_stats filled. */
static int trace_row(struct trainer *t, const struct step_log *s, struct sw_err *err)
{
	struct trace_plan *tp = &t->tp;
	const double *rowp[S_COUNT];
	int rc;

	tp->row[S_LOSS][0] = s->loss;
	tp->row[S_VAL_LOSS][0] = s->val_loss;
	tp->row[S_LR][0] = s->lr;
	tp->row[S_GRAD_NORM][0] = s->grad_norm;
	tp->row[S_TOKENS][0] = (double)t->rs.tokens;
	tp->row[S_SECONDS][0] = now_s() - t->t0;
	tp->row[S_OUT_NORM][0] = out_norm(&t->m);
	for (int i = 0; i < tp->ns; i++)
		rowp[i] = tp->row[tp->kind[i]];
	/* the rows flushed before stay: the trace is the run's log */
	if ((rc = trace_append(t->tw, t->rs.step, rowp, err)))
		sw_err_prefix(err, "%s", t->trace_path);
	return rc;
}

/* A checkpoint when due, at the end, or when stopping; /fisher in it at
 * multiples of fisher_every. */
static int checkpoint(struct trainer *t, struct step_log *s, int stop, struct sw_err *err)
{
	const struct train_config *tc = t->tc;
	struct run_state *rs = &t->rs;
	struct modelio_extras x = {t->all_tok, t->all_tgt, t->A * t->B, t->T, tc->save_grads,
				   NULL, 0, 0, 0};
	int rc;

	if (!due(t, tc->ckpt_every) && rs->step != t->o.cfg.steps && !stop)
		return SW_OK;
	if (tc->fisher_every > 0 && rs->step % tc->fisher_every == 0) {
		/* GNB on this step's batch at the new parameters, with its own
		 * RNG: the run's data order is untouched */
		struct sw_rng fr;
		x.fisher_seed = rs->seed * 1000003ULL + (uint64_t)rs->step;
		rng_seed(&fr, x.fisher_seed);
		memset(t->fisher, 0, t->m.nparams * sizeof *t->fisher);
		if ((rc = dev_gnb(&t->m, t->gpu, t->all_tok, t->A * t->B, t->T, t->B, &fr, t->fisher, err)))
			return rc;
		x.fisher = t->fisher;
		x.fisher_batch_tokens = (int64_t)t->A * t->B * t->T;
		x.fisher_draws = 1;
	}
	snprintf(t->ckpt, sizeof t->ckpt, "%s/ckpt-%06lld.h5", tc->out_dir, (long long)rs->step);
	if ((rc = dev_to_host(&t->m, &t->o, t->gpu, tc->save_grads, err)) ||
	    (rc = modelio_save(t->ckpt, &t->m, &t->o, rs, &x, err)))
		return rc;
	snprintf(t->last_good, sizeof t->last_good, "%s", t->ckpt);
	s->checkpointed = 1;
	return SW_OK;
}

/* The progress callback: the step, its rates since the last report. */
static void report(struct trainer *t, const struct step_log *s)
{
	double now = now_s();
	struct train_progress p = {
		.step = t->rs.step, .steps = t->o.cfg.steps, .tokens = t->rs.tokens,
		.tokens_run = t->rs.tokens - t->first_tokens,
		.loss = s->loss, .val_loss = s->val_loss, .lr = s->lr, .grad_norm = s->grad_norm,
		.tokens_per_s = (double)(t->rs.tokens - t->tok_last) / (now - t->t_last + 1e-12),
		.elapsed_s = now - t->t0,
		.checkpoint = s->checkpointed ? t->ckpt : NULL,
	};

	if (!t->tc->progress)
		return;
	p.eta_s = p.elapsed_s / (double)(t->rs.step - t->first_step) * (double)(t->o.cfg.steps - t->rs.step);
	t->t_last = now;
	t->tok_last = t->rs.tokens;
	t->tc->progress(t->tc->ctx, &p);
}

int train_run(const struct train_config *tc, struct train_result *res, struct sw_err *err)
{
	struct trainer t;
	int rc = trainer_open(&t, tc, err);

	while (!rc && t.rs.step < t.o.cfg.steps) {
		struct step_log s = {.step = t.rs.step, .val_loss = NAN};
		int trace_now, stop;

		if ((rc = forward_backward(&t, &s, err)) || (rc = update(&t, &s, err)))
			break;
		/* the trace's activation statistics are this step's, before
		 * evaluation reuses the activations */
		trace_now = t.tw && due(&t, tc->trace_every);
		if ((trace_now && (rc = dev_trace_stats(&t.tp, &t.m, t.gpu, (size_t)t.B * t.T, err))) ||
		    (rc = evaluate(&t, &s, err)) || (trace_now && (rc = trace_row(&t, &s, err))))
			break;
		stop = tc->interrupt && *tc->interrupt;
		if ((rc = checkpoint(&t, &s, stop, err)))
			break;
		report(&t, &s);
		if (stop)
			rc = sw_fail(err, SW_EINTERRUPTED, "interrupted at step %lld; wrote %s",
				     (long long)t.rs.step, t.last_good);
	}
	if (res) {
		snprintf(res->checkpoint, sizeof res->checkpoint, "%s", t.last_good);
		res->step = t.rs.step;
		res->loss = t.rs.train_loss;
		res->val_loss = t.rs.val_loss;
	}
	return trainer_close(&t, rc, err);
}
