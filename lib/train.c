/* train.c - the training loop (see train.h). */
#include "train.h"
#include "norms.h"
#include "linalg.h"
#include "model.h"
#include "modelio.h"
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

static double rms(const real *x, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)x[i] * x[i];
	return n ? sqrt(s / (double)n) : 0;
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
	struct trace_series s[S_COUNT];
	int ns;
	char **names;                   /* every column name, to free */
	int nnames;
	double *row[S_COUNT];
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
		tp->s[tp->ns].name = k < S_RESIDUAL ? scalar_names[k] : vector_names[k - S_RESIDUAL];
		tp->s[tp->ns].ncols = k < S_RESIDUAL ? 0 : ncols[k];
		tp->s[tp->ns].columns = k < S_RESIDUAL ? NULL : cols[k];
		if (k < S_RESIDUAL)
			free(cols[k]);
		tp->row[tp->ns] = calloc((size_t)(ncols[k] > 0 ? ncols[k] : 1), sizeof(double));
		if (!tp->row[tp->ns])
			return sw_fail(err, SW_ESOFTWARE, "out of memory");
		tp->ns++;
	}
	return SW_OK;
}

static void free_plan(struct trace_plan *tp)
{
	for (int i = 0; i < tp->ns; i++) {
		free((void *)tp->s[i].columns);
		free(tp->row[i]);
	}
	for (int i = 0; i < tp->nnames; i++)
		free(tp->names[i]);
	free(tp->names);
	free(tp->weight_tensor);
	free(tp->mult_tensor);
}

/* ||rows [r0, r1) of W||_rms */
static double rows_rms(const real *w, int64_t r0, int64_t r1, int64_t cols)
{
	return rms(w + r0 * cols, (size_t)((r1 - r0) * cols));
}

/* Fill the vector series from the last forward's activations (the last
 * micro-batch) and the weights after the update. */
static void trace_stats(struct trace_plan *tp, struct model *m)
{
	const struct sw_config *c = &m->c;
	size_t N = (size_t)m->B * m->T, C = (size_t)c->d_model, Q = (size_t)(c->n_heads * c->head_dim),
	       K = (size_t)(c->n_kv_heads * c->head_dim), F = (size_t)c->d_ff;
	int L = (int)c->n_layers, hd = (int)c->head_dim;
	double *res = tp->row[S_RESIDUAL], *ao = tp->row[S_ATTN_OUT], *mo = tp->row[S_MLP_OUT],
	       *gain = tp->row[S_GAIN], *qh = tp->row[S_QHEAD], *kh = tp->row[S_KHEAD];

	/* the per-head weight norms are of the weights after this update */
	model_update_effective(m);

	for (int l = 0; l < L; l++) {
		const struct layer_acts *a = &m->acts[l];
		const struct layer_ptrs *w = &m->p.layer[l];
		const real *o_x = c->norm_everywhere ? a->o_in : a->att_out;
		const real *d_x = c->norm_everywhere ? a->d_in : a->h;
		double n1 = rms(a->n1, N * C), n2 = rms(a->n2, N * C);
		res[l] = rms(a->x_in, N * C);
		ao[l] = rms(a->attn_y, N * C);
		mo[l] = rms(a->mlp_y, N * C);
		gain[l * NGAIN + 0] = rms(a->q_lin, N * Q) / n1;
		gain[l * NGAIN + 1] = rms(a->k_lin, N * K) / n1;
		gain[l * NGAIN + 2] = rms(a->v, N * K) / n1;
		gain[l * NGAIN + 3] = rms(a->attn_y, N * C) / rms(o_x, N * Q);
		gain[l * NGAIN + 4] = rms(a->gate, N * F) / n2;
		gain[l * NGAIN + 5] = rms(a->up, N * F) / n2;
		gain[l * NGAIN + 6] = rms(a->mlp_y, N * C) / rms(d_x, N * F);
		/* per-head weight norms of the effective q and k projections */
		for (int h = 0; h < c->n_heads; h++)
			qh[l * c->n_heads + h] = rows_rms(w->wq, (int64_t)h * hd, (int64_t)(h + 1) * hd, (int64_t)C);
		for (int h = 0; h < c->n_kv_heads; h++)
			kh[l * c->n_kv_heads + h] = rows_rms(w->wk, (int64_t)h * hd, (int64_t)(h + 1) * hd, (int64_t)C);
	}
	res[L] = rms(m->x_final, N * C);
	for (int i = 0; i < tp->nweight; i++) {
		const struct model_tensor *t = &m->tensors[tp->weight_tensor[i]];
		tp->row[S_WEIGHT][i] = rms(m->params + t->offset, t->numel);
	}
	for (int i = 0; i < tp->nmult; i++) {
		const struct model_tensor *t = &m->tensors[tp->mult_tensor[i]];
		double s = 0;
		for (size_t k = 0; k < t->numel; k++)
			s += m->params[t->offset + k];
		tp->row[S_MULT][i] = s / (double)t->numel;     /* present: there are multipliers */
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

/* ---- the loop ----------------------------------------------------------- */

/* SW_EDATA: the loss is not finite; SW_EIO (err set): the data file shrank */
static int eval_loss(struct model *m, const struct dataset *d, int nbatches, int B, int T,
		     int *tok, int *tgt, double *out, struct sw_err *err)
{
	double sum = 0;
	int rc;

	for (int i = 0; i < nbatches; i++) {
		if ((rc = data_val_batch(d, i, B, T, tok, tgt, err)))
			return rc;
		model_forward(m, tok, tgt, B, T);
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

int train_run(const struct train_config *tc, struct train_result *res, struct sw_err *err)
{
	struct dataset d;
	struct model m;
	struct optim o;
	struct run_state rs;
	struct trace_plan tp;
	struct trace_writer *tw = NULL;
	char ckpt[4096], last_good[4096] = "", trace_path[4096], nb[32];
	int *tok = NULL, *tgt = NULL, *all_tok = NULL, *all_tgt = NULL, rc;
	float *fisher = NULL;
	int B = tc->batch, A = tc->grad_accum, T;
	double t0 = now_s(), t_last = t0, val = NAN;
	int64_t tok_last = 0, first_step = 0;

	memset(&m, 0, sizeof m);
	memset(&o, 0, sizeof o);
	memset(&tp, 0, sizeof tp);
	memset(&rs, 0, sizeof rs);
	if ((rc = data_open(tc->data_path, tc->data_format, tc->val_fraction, &d, err))) {
		sw_err_prefix(err, "%s", tc->data_path);
		return rc;
	}
	if (tc->resume) {
		if ((rc = modelio_load(tc->resume, &m, err)) ||
		    (rc = modelio_load_state(tc->resume, &m, &o, &rs, err))) {
			sw_err_prefix(err, "%s", tc->resume);
			goto out;
		}
		if (tc->steps_given)
			o.cfg.steps = tc->optim.steps;
		B = rs.batch;
		A = rs.grad_accum;
		snprintf(last_good, sizeof last_good, "%s", tc->resume);
	} else {
		struct sw_config c = tc->model;
		if (!c.vocab_size)
			c.vocab_size = d.max_token + 1;
		if ((rc = model_build(&m, &c, err)) || (rc = optim_init(&o, &tc->optim, &m, err)))
			goto out;
		model_init(&m, tc->seed);
		memset(&rs, 0, sizeof rs);
		rng_seed(&rs.rng, tc->seed ^ 0xda7a5eedULL);
		rs.batch = B;
		rs.grad_accum = A;
		rs.seq_len = (int)c.seq_len;
		rs.seed = tc->seed;
	}
	T = (int)m.c.seq_len;
	rs.train_loss = rs.val_loss = NAN;
	if ((rc = data_check(&d, T, (int)m.c.vocab_size, err))) {
		sw_err_prefix(err, "%s", tc->data_path);
		goto out;
	}
	/* only now: a run refused for its data leaves no directory behind */
	if ((rc = ensure_dir(tc->out_dir, err)))
		goto out;
	if ((rc = model_alloc_acts(&m, B, T, err)))
		goto out;
	tok = malloc((size_t)B * T * sizeof *tok);
	tgt = malloc((size_t)B * T * sizeof *tgt);
	all_tok = malloc((size_t)A * B * T * sizeof *all_tok);
	all_tgt = malloc((size_t)A * B * T * sizeof *all_tgt);
	if (!tok || !tgt || !all_tok || !all_tgt) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	if ((rc = plan_trace(&tp, &m, err)))
		goto out;
	if (tc->fisher_every > 0 && !(fisher = malloc(m.nparams * sizeof *fisher))) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory for /fisher");
		goto out;
	}
	if (!tc->trace_path || tc->trace_path[0]) {
		if (tc->trace_path)
			snprintf(trace_path, sizeof trace_path, "%s", tc->trace_path);
		else
			snprintf(trace_path, sizeof trace_path, "%s/trace.h5", tc->out_dir);
		rc = tc->resume ? trace_reopen(trace_path, tp.s, tp.ns, rs.step, &tw, err)
				: trace_create(trace_path, &m.c, tp.s, tp.ns, &tw, err);
		if (rc) {
			sw_err_prefix(err, "%s", trace_path);
			goto out;
		}
	}

	first_step = rs.step;
	tok_last = rs.tokens;
	while (rs.step < o.cfg.steps) {
		int64_t step = rs.step;
		double loss = 0, gnorm, clip = 1, lr;
		int evaluated = 0, checkpointed = 0;

		/* next batch, forward, backward: A micro-batches, mean loss */
		model_zero_grad(&m);
		for (int a = 0; a < A; a++) {
			if ((rc = data_train_batch(&d, &rs.rng, B, T, tok, tgt, err))) {
				sw_err_prefix(err, "%s", tc->data_path);
				goto out;
			}
			memcpy(all_tok + (size_t)a * B * T, tok, (size_t)B * T * sizeof *tok);
			memcpy(all_tgt + (size_t)a * B * T, tgt, (size_t)B * T * sizeof *tgt);
			model_forward(&m, tok, tgt, B, T);
			if (!isfinite(m.loss)) {
				rc = sw_fail(err, SW_EDATA,
					     "loss is %s at step %lld: stopped; the last good checkpoint is %s",
					     num_str(m.loss, nb, sizeof nb), (long long)step + 1,
					     last_good[0] ? last_good : "(none yet)");
				goto out;
			}
			loss += m.loss / A;
			model_backward(&m, tok, tgt, 1.0 / A);
		}
		/* clip, update */
		gnorm = optim_grad_norm(&m);
		if (!isfinite(gnorm)) {
			rc = sw_fail(err, SW_EDATA,
				     "gradient norm is %s at step %lld: stopped; the last good checkpoint is %s",
				     num_str(gnorm, nb, sizeof nb), (long long)step + 1,
				     last_good[0] ? last_good : "(none yet)");
			goto out;
		}
		if (o.cfg.grad_clip > 0 && gnorm > o.cfg.grad_clip)
			clip = o.cfg.grad_clip / gnorm;
		lr = optim_lr_at(&o.cfg, step);
		optim_step(&o, &m, step, clip);         /* m.grads stay raw for /grads */
		rs.step++;
		rs.tokens += (int64_t)A * B * T;
		rs.train_loss = loss;

		/* trace stats come from this step's last forward, before eval
		 * reuses the activations */
		int trace_now = tw && tc->trace_every > 0 &&
				(rs.step % tc->trace_every == 0 || rs.step == o.cfg.steps);
		if (trace_now)
			trace_stats(&tp, &m);
		if (tc->eval_every > 0 && d.n > d.n_train &&
		    (rs.step % tc->eval_every == 0 || rs.step == o.cfg.steps)) {
			if ((rc = eval_loss(&m, &d, tc->eval_batches, B, T, tok, tgt, &val, err))) {
				if (rc == SW_EIO) {
					sw_err_prefix(err, "%s", tc->data_path);
					goto out;
				}
				rc = sw_fail(err, SW_EDATA,
					     "validation loss is %s at step %lld: stopped; the last good checkpoint is %s",
					     num_str(val, nb, sizeof nb), (long long)rs.step,
					     last_good[0] ? last_good : "(none yet)");
				goto out;
			}
			rs.val_loss = val;
			evaluated = 1;
		} else {
			rs.val_loss = NAN;
		}
		if (trace_now) {
			const double *rowp[S_COUNT];
			tp.row[S_LOSS][0] = loss;
			tp.row[S_VAL_LOSS][0] = evaluated ? val : NAN;
			tp.row[S_LR][0] = lr;
			tp.row[S_GRAD_NORM][0] = gnorm;
			tp.row[S_TOKENS][0] = (double)rs.tokens;
			tp.row[S_SECONDS][0] = now_s() - t0;
			tp.row[S_OUT_NORM][0] = out_norm(&m);
			for (int i = 0; i < tp.ns; i++)
				rowp[i] = tp.row[i];
			/* the rows flushed before stay: the trace is the run's log */
			if ((rc = trace_append(tw, rs.step, rowp, err))) {
				sw_err_prefix(err, "%s", trace_path);
				goto out;
			}
		}
		int stop = tc->interrupt && *tc->interrupt;
		if ((tc->ckpt_every > 0 && rs.step % tc->ckpt_every == 0) || rs.step == o.cfg.steps || stop) {
			struct modelio_extras x = {all_tok, all_tgt, A * B, T, tc->save_grads,
						   NULL, 0, 0, 0};
			if (tc->fisher_every > 0 && rs.step % tc->fisher_every == 0) {
				/* GNB on this step's batch at the new parameters, with
				 * its own RNG: the run's data order is untouched */
				struct sw_rng fr;
				x.fisher_seed = rs.seed * 1000003ULL + (uint64_t)rs.step;
				rng_seed(&fr, x.fisher_seed);
				memset(fisher, 0, m.nparams * sizeof *fisher);
				if ((rc = gnb_estimate(&m, all_tok, A * B, T, B, 1, &fr, fisher, NULL, NULL, err)))
					goto out;
				x.fisher = fisher;
				x.fisher_batch_tokens = (int64_t)A * B * T;
				x.fisher_draws = 1;
			}
			snprintf(ckpt, sizeof ckpt, "%s/ckpt-%06lld.h5", tc->out_dir, (long long)rs.step);
			if ((rc = modelio_save(ckpt, &m, &o, &rs, &x, err)))
				goto out;
			snprintf(last_good, sizeof last_good, "%s", ckpt);
			checkpointed = 1;
		}
		if (tc->progress) {
			double t = now_s();
			struct train_progress p = {
				.step = rs.step, .steps = o.cfg.steps, .loss = loss,
				.val_loss = evaluated ? val : NAN, .lr = lr, .grad_norm = gnorm,
				.tokens_per_s = (double)(rs.tokens - tok_last) / (t - t_last + 1e-12),
				.elapsed_s = t - t0,
				.checkpoint = checkpointed ? ckpt : NULL,
			};
			p.eta_s = p.elapsed_s / (double)(rs.step - first_step) *
				  (double)(o.cfg.steps - rs.step);
			t_last = t;
			tok_last = rs.tokens;
			tc->progress(tc->ctx, &p);
		}
		if (stop) {
			rc = sw_fail(err, SW_EINTERRUPTED, "interrupted at step %lld; wrote %s",
				(long long)rs.step, last_good);
			goto out;
		}
	}
	rc = SW_OK;
out:
	if (res) {
		snprintf(res->checkpoint, sizeof res->checkpoint, "%s", last_good);
		res->step = rs.step;
		res->loss = rs.train_loss;
		res->val_loss = rs.val_loss;
	}
	if (tw) {
		struct sw_err e2;
		if (trace_close(tw, &e2) && !rc) {
			*err = e2;
			sw_err_prefix(err, "%s", trace_path);
			rc = e2.code;
		}
	}
	free_plan(&tp);
	free(fisher);
	free(tok);
	free(tgt);
	free(all_tok);
	free(all_tgt);
	optim_free(&o);
	if (m.tensors)
		model_free(&m);
	data_close(&d);
	return rc;
}
