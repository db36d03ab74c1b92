/* hessian.c - the loss Hessian per block of parameters (see hessian.h). */
#include "hessian.h"
#include "../formats/ckpt.h"
#include "../formats/h5write.h"
#include "../analysis/lanczos.h"
#include "../model/model.h"
#include "../model/modelhvp.h"
#include "../model/step.h"
#include "../model/cuda/gpumodel.h"
#include "../model/modelio.h"
#include "../model/optim.h"
#include "../base/rng.h"
#include "../analysis/traceest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What an operator product needs: the model and its tangent model, the
 * batch, the block, the preconditioner's scale. */
struct hop {
	struct blocksharp_setup *su;
	struct model *rm;
	const int *tok, *tgt;
	int nmb;                        /* micro-batches */
	int kept;                       /* one micro-batch: its forward pass kept */
	real *dlogits;                  /* (CPU) then its dL/dlogits, apart */
	struct model_rop_tape *tape;    /* (CPU) then its primal gradients, or NULL */
	int gn;
	const unsigned char *want;      /* (ntensors) the block */
	struct gpu_model *gpu;          /* --device: the products there, else NULL */
	real *v, *hv;                   /* with gpu: (nparams) host vectors */
	const float *dscale;            /* (nparams) P^-1/2, or NULL */
	/* reparameterized gains (modelhvp.h's model_rop_gains_*): the want
	 * the products run with, and the batch's dL/dgamma (NULL for G) */
	unsigned char *rop_want;        /* (ntensors) */
	const real *gain_grads;         /* (nparams) */
	struct hessian_block *b;
	hessian_progress_fn progress;
	void *pctx;
	int index, count;
};

/* Zero a (the direction or the product, on the CPU) over the tensors the
 * products touch for want: the block's, and the weights its multipliers
 * scale (model_rop_wanted). The rest of a is never written: calloc's
 * pages, untouched, take no memory, so that a block of a billion-
 * parameter model needs two vectors of the block's size, not the model's. */
static void zero_touched(real *a, const struct model *m, const unsigned char *want)
{
	for (int i = 0; i < m->ntensors; i++)
		if (model_rop_wanted(m, want, i))
			memset(a + m->tensors[i].offset, 0, m->tensors[i].numel * sizeof *a);
}

/* y = A x, A = H[B,B] (or G, or P^-1/2 H P^-1/2 on the block): x into the
 * direction's block entries, the R-operator over every micro-batch (each
 * loss is Nmb/N of the batch's mean), the product's block entries out. */
static int block_product(void *vctx, const double *x, double *y, struct sw_err *err)
{
	struct hop *h = vctx;
	struct model *m = &h->su->m, *rm = h->rm;
	int T = h->su->T, mb = h->su->mb, Nmb = mb * T, N = h->nmb * Nmb;
	size_t pos = 0;

	real *v = h->gpu ? h->v : rm->params, *hv = h->gpu ? h->hv : rm->grads;
	int rc = SW_OK;

	if (h->gpu)     /* the last block's entries go */
		memset(v, 0, m->nparams * sizeof *v);
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *t = &m->tensors[i];
		if (!h->want[i])
			continue;
		for (size_t k = 0; k < t->numel; k++, pos++)
			v[t->offset + k] = (real)(x[pos] * (h->dscale ? h->dscale[t->offset + k] : 1));
	}
	if (m->nreparams)
		model_rop_gains_tangent(m, v, h->want, h->rop_want);
	if (h->gpu) {
		double loss;
		rc = gpumodel_hvp_begin(h->gpu, v, m->nreparams ? h->rop_want : h->want, err);
		for (int k = 0; k < h->nmb && !rc; k++) {
			if (!h->kept)
				rc = gpumodel_forward(h->gpu, h->tok + (size_t)k * Nmb, h->tgt + (size_t)k * Nmb,
						      mb, T, &loss, err);
			if (!rc)
				rc = gpumodel_hvp_add(h->gpu, (double)Nmb / N, h->gn, h->kept, err);
		}
		if (rc || (rc = gpumodel_hvp_end(h->gpu, hv, err)))
			return rc;
	} else {
		zero_touched(rm->grads, m, m->nreparams ? h->rop_want : h->want);
		for (int k = 0; k < h->nmb; k++) {
			const int *tok = h->tok + (size_t)k * Nmb, *tgt = h->tgt + (size_t)k * Nmb;
			if (!h->kept)
				model_forward(m, tok, tgt, mb, T);
			model_rop_forward(m, rm, tok, m->nreparams ? h->rop_want : h->want);
			model_rop_backward(m, rm, tok, tgt, (double)Nmb / N, h->gn,
					   m->nreparams ? h->rop_want : h->want, h->dlogits, h->tape);
		}
		/* streamed layers: a read that failed made this product wrong */
		if (h->su->ps && (rc = param_stream_status(h->su->ps, err)))
			return rc;
	}
	if (m->nreparams)
		model_rop_gains_backward(m, v, hv, h->gn ? NULL : h->gain_grads, h->want);
	pos = 0;
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *t = &m->tensors[i];
		if (!h->want[i])
			continue;
		for (size_t k = 0; k < t->numel; k++, pos++)
			y[pos] = (double)hv[t->offset + k] * (h->dscale ? h->dscale[t->offset + k] : 1);
	}
	h->b->products++;
	if (h->progress)
		h->progress(h->pctx, h->b, h->index, h->count);
	return SW_OK;
}

void hessian_free(struct hessian_result *r)
{
	for (int i = 0; r->b && i < r->nblocks; i++) {
		free(r->b[i].eig);
		free(r->b[i].node);
		free(r->b[i].weight);
		free(r->b[i].vec);
		free(r->b[i].vecs);
	}
	free(r->b);
	memset(r, 0, sizeof *r);
}

double hessian_memory(const struct sw_config *c, double params_bytes, int64_t nparams,
		      int64_t largest_block, int64_t largest_touched, int mb, int T,
		      int single_micro, int on_device, int reparams, const struct hessian_opts *o)
{
	double p = (double)nparams, n = (double)largest_block;

	return params_bytes + 2 * (on_device ? p : (double)largest_touched) * sizeof(real) +
	       (reparams && !o->gauss_newton ? 2 * p * sizeof(real) : 0) +
	       (o->preconditioned ? p * 4 : 0) +
	       2 * model_acts_bytes(c, mb, T, 0) +
	       (single_micro ? (double)mb * T * (double)c->vocab_size * sizeof(real) : 0) +
	       (single_micro && !on_device && !o->gauss_newton
		? (double)model_rop_tape_reals(c, mb, T) * sizeof(real) : 0) +
	       (double)(o->max_steps > o->slq_steps ? o->max_steps : o->slq_steps) * n * 4 +
	       n * 4 * sizeof(double) + (o->eigvecs ? (double)o->top * n * sizeof(double) : 0) +
	       (o->hutchpp ? (double)(o->probes / 3 + 2) * n * 8 : 0);
}

/* Do tensors a (index ia) and b (ib) fall in one block? */
static int same_block(enum hessian_by by, const struct sw_tensor_info *a, int ia,
		      const struct sw_tensor_info *b, int ib)
{
	switch (by) {
	case HESSIAN_BY_TYPE: return a->block == b->block;
	case HESSIAN_BY_LAYER: return a->block == b->block && a->layer == b->layer;
	case HESSIAN_BY_WHOLE: return 1;
	default: return ia == ib;
	}
}

/*
 * The blocks: want (nblocks x ntensors) flags; by type and by layer in
 * sw-sharpness's order (block type, then layer), by tensor in model
 * order; the whole selection last when more than one block, or alone
 * (HESSIAN_BY_WHOLE).
 */
static int plan_blocks(const struct model *m, const struct sw_select *sel, enum hessian_by by,
		       struct hessian_result *r, unsigned char **want_out, struct sw_err *err)
{
	int nt = m->ntensors, nb = 0, L = (int)m->c.n_layers;
	unsigned char *want = calloc((size_t)(nt + 1) * (nt + 1), 1);
	int *order = malloc((size_t)(nt + 1) * sizeof *order), no = 0;

	*want_out = NULL;
	r->b = calloc((size_t)nt + 1, sizeof *r->b);
	if (!want || !order || !r->b) {
		free(want);
		free(order);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	/* the selected tensors in the order their blocks are printed */
	for (int bt = 0; bt < SW_BLOCK_COUNT; bt++)
		for (int l = -1; l < L; l++)
			for (int i = 0; i < nt; i++) {
				const struct sw_tensor_info *t = &m->tensors[i].info;
				int key_layer = by == HESSIAN_BY_TYPE || by == HESSIAN_BY_WHOLE ? -1 : t->layer;
				/* a reparameterized gain is no parameter (its direction
				 * and magnitude are) */
				if (by == HESSIAN_BY_TENSOR || (int)t->block != bt || key_layer != l ||
				    !select_match_info(sel, t) || m->tensors[i].derived)
					continue;
				order[no++] = i;
			}
	for (int i = 0; by == HESSIAN_BY_TENSOR && i < nt; i++)
		if (select_match_info(sel, &m->tensors[i].info) && !m->tensors[i].derived)
			order[no++] = i;
	r->selected = no;
	for (int k = 0; k < no; k++) {
		const struct sw_tensor_info *t = &m->tensors[order[k]].info;
		int found = -1;
		for (int j = 0; j < nb && found < 0; j++)
			for (int i = 0; i < nt && found < 0; i++)
				if (want[(size_t)j * nt + i] &&
				    same_block(by, &m->tensors[i].info, i, t, order[k]))
					found = j;
		if (found < 0) {
			struct hessian_block *b = &r->b[nb];
			found = nb++;
			b->block = by == HESSIAN_BY_WHOLE ? -1 : (int)t->block;
			b->layer = by == HESSIAN_BY_TYPE || by == HESSIAN_BY_WHOLE ? -2 : t->layer;
			if (by == HESSIAN_BY_TENSOR) {
				snprintf(b->name, sizeof b->name, "%s", t->name);
				snprintf(b->role, sizeof b->role, "%s", t->role);
			}
		}
		want[(size_t)found * nt + order[k]] = 1;
		r->b[found].n += (int64_t)m->tensors[order[k]].numel;
	}
	if (nb > 1) {
		struct hessian_block *b = &r->b[nb];
		b->block = -1;
		b->layer = -2;
		for (int k = 0; k < no; k++) {
			want[(size_t)nb * nt + order[k]] = 1;
			b->n += (int64_t)m->tensors[order[k]].numel;
		}
		nb++;
	}
	r->nblocks = nb;
	free(order);
	*want_out = want;
	return SW_OK;
}

/* The per-tensor lr from the checkpoint (NaN where it has none), step. */
static void checkpoint_lrs(struct ckpt *ck, const struct model *m, double *lr,
			   struct hessian_result *r)
{
	r->has_step = ckpt_meta(ck)->has_step;
	r->step = ckpt_meta(ck)->step;
	r->tokens = ckpt_meta(ck)->tokens;
	for (int i = 0; i < m->ntensors; i++) {
		long k = ckpt_find_role(ck, m->tensors[i].info.role, m->tensors[i].info.layer);
		lr[i] = k < 0 ? NAN : ckpt_info(ck, (size_t)k)->lr;
	}
}

/* P^-1/2 with P = sqrt(v / (1 - beta2^t)) + eps, from /optim_state (Adam-mini:
 * each element's v its block's). */
static int preconditioner(struct ckpt *ck, const struct model *m, float *dscale, double *beta1,
			  struct sw_err *err)
{
	struct optim o;
	struct run_state rs;
	double bc2;
	int rc;

	/* another format's optimizer state (a torch.save's exp_avg_sq) is
	 * not read: say that, not that the file cannot be resumed */
	if (ckpt_meta(ck)->format == CKPT_PYTORCH)
		return sw_fail(err, SW_EDATA, "--preconditioned needs Adam's second moments, from a scalewatch "
			       "checkpoint's /optim_state/v: a PyTorch file's optimizer state (torch's "
			       "exp_avg_sq) is not read");
	if (ckpt_meta(ck)->format != CKPT_HDF5)
		return sw_fail(err, SW_EDATA, "--preconditioned needs Adam's second moments, from a scalewatch "
			       "checkpoint's /optim_state/v: %s holds none", ckpt_format_name(ck));
	/* modelio_read_state frees what it made when it fails */
	memset(&o, 0, sizeof o);
	if ((rc = modelio_read_state(ck, m, &o, &rs, err))) {
		sw_err_prefix(err, "--preconditioned needs Adam's second moments");
		return rc;
	}
	if (o.cfg.kind != OPT_ADAMW && o.cfg.kind != OPT_ADAM_MINI) {
		rc = sw_fail(err, SW_EDATA, "--preconditioned needs Adam's second moments; the optimizer is %s",
			     optim_kind_name(o.cfg.kind));
	} else if (o.t < 1) {
		rc = sw_fail(err, SW_EDATA, "--preconditioned: no update was made yet (t = 0), Adam has no second moments");
	} else {
		bc2 = 1 - pow(o.cfg.beta2, (double)o.t);
		for (int i = 0; i < m->ntensors; i++) {
			/* Adam-mini: each element its block's v (AdamW: its own) */
			const struct model_tensor *mt = &m->tensors[i];
			int64_t bn = o.cfg.kind == OPT_ADAM_MINI ? optim_block_numel(&mt->info) : 1;
			for (size_t j = 0; j < mt->numel; j++)
				dscale[mt->offset + j] = (float)(1 / sqrt(sqrt((double)o.v[o.voff[i] + j / (size_t)bn] / bc2) +
									 o.cfg.eps));
		}
		*beta1 = o.cfg.beta1;
	}
	optim_free(&o);
	return rc;
}

static int dump_batch(const char *path, const int *tok, const int *tgt, int B, int T,
		      struct sw_err *err)
{
	struct h5w *w;
	int rc;

	if ((rc = h5w_create(path, "hessian-batch", &w, err)))
		return rc;
	if ((rc = h5w_write_i32(w, "/", "tokens", B, T, tok, err)) ||
	    (rc = h5w_write_i32(w, "/", "targets", B, T, tgt, err))) {
		h5w_abort(w);
		return rc;
	}
	return h5w_commit(w, err);
}

/*
 * Block j's eigenvectors into w: group /block_J (attributes block, layer,
 * name, nparams), in it /block_J/v_K for K = 1..neig (attribute
 * eigenvalue) holding the block's tensors in the model's layout, as
 * /params does. Each vector is normalized over the block and its sign
 * chosen so that its largest-magnitude entry (the first of equals) is
 * positive: the same file for the same run.
 */
static int write_vectors(struct h5w *w, const struct model *m, const unsigned char *want, int j,
			 const struct hessian_block *b, struct sw_err *err)
{
	char g[32], gv[48];
	float *buf = NULL;
	size_t most = 0;
	int rc;

	for (int i = 0; i < m->ntensors; i++)
		if (want[i] && m->tensors[i].numel > most)
			most = m->tensors[i].numel;
	if (!(buf = malloc((most ? most : 1) * sizeof *buf)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	snprintf(g, sizeof g, "/block_%d", j);
	if ((rc = h5w_set_str(w, g, "block", b->block < 0 ? "all" : sw_block_name((enum sw_block)b->block), err)) ||
	    (rc = h5w_set_i64(w, g, "layer", b->layer < -1 ? -2 : b->layer, err)) ||
	    (rc = h5w_set_str(w, g, "name", b->name, err)) ||
	    (rc = h5w_set_i64(w, g, "nparams", b->n, err)))
		goto out;
	for (int k = 0; k < b->neig && !rc; k++) {
		double *x = b->vecs + (size_t)k * (size_t)b->n, ss = 0, big = 0, sign;
		int64_t at = 0;
		size_t pos = 0;

		for (int64_t t = 0; t < b->n; t++) {
			ss += x[t] * x[t];
			if (fabs(x[t]) > big) {
				big = fabs(x[t]);
				at = t;
			}
		}
		sign = (x[at] < 0 ? -1 : 1) / sqrt(ss);
		snprintf(gv, sizeof gv, "%s/v_%d", g, k + 1);
		if ((rc = h5w_set_f64(w, gv, "eigenvalue", b->eig[k], err)))
			break;
		for (int i = 0; i < m->ntensors && !rc; i++) {
			const struct model_tensor *t = &m->tensors[i];
			if (!want[i])
				continue;
			for (size_t e = 0; e < t->numel; e++, pos++)
				buf[e] = (float)(x[pos] * sign);
			rc = h5w_write_tensor(w, gv, &t->info, buf, 1, err);
		}
	}
out:
	free(buf);
	return rc;
}

/* One block: Lanczos, the probes, SLQ. */
static int run_block(struct hop *h, const struct hessian_opts *o, const double *lr, double beta1,
		     uint64_t seed, struct sw_err *err)
{
	struct hessian_block *b = h->b;
	const struct model *m = &h->su->m;
	int64_t n = b->n;
	int nvec = o->density, S = o->probes > nvec ? o->probes : nvec, rc = SW_OK;
	double *z = malloc((size_t)n * sizeof *z), *y = malloc((size_t)n * sizeof *y);
	double *samples = malloc((size_t)(S > 0 ? S : 1) * sizeof *samples), sum = 0, ss = 0;
	struct lanczos_top info;
	struct sw_rng r;

	b->eig = malloc((size_t)(o->top > 0 ? o->top : 1) * sizeof *b->eig);
	if (nvec) {
		b->node = malloc((size_t)nvec * o->slq_steps * sizeof *b->node);
		b->weight = malloc((size_t)nvec * o->slq_steps * sizeof *b->weight);
		b->vec = malloc((size_t)nvec * o->slq_steps * sizeof *b->vec);
	}
	if (!z || !y || !samples || !b->eig || (nvec && (!b->node || !b->weight || !b->vec))) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	/* the direction is zero outside the block: calloc's zeros, and each
	 * block clears what it wrote when it ends (on the device,
	 * block_product clears its host copy) */
	rng_seed(&r, seed);
	/* the top K: Lanczos from a Gaussian start */
	for (int64_t i = 0; i < n; i++)
		z[i] = rng_normal(&r);
	if (o->eigvecs && !(b->vecs = malloc((size_t)o->top * (size_t)n * sizeof *b->vecs))) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory for %d eigenvectors of %lld", o->top,
			     (long long)n);
		goto out;
	}
	if ((rc = lanczos_extremes(n, block_product, h, z, o->top, o->max_steps, o->tol, b->eig,
				   b->vecs, &info, err)))
		goto out;
	b->neig = info.k;
	b->eig_min = info.min;
	b->bound_min = info.min_bound;
	b->steps = info.steps;
	b->bound = info.bound;
	b->converged = info.converged;
	/* Hutch++: its own products (no SLQ with it) */
	if (o->hutchpp) {
		if ((rc = trace_hutchpp(n, block_product, h, o->probes, &r, &b->trace, &b->trace_se,
					err)))
			goto out;
		b->probes = o->probes;
	}
	/* Hutchinson's probes; the first nvec start SLQ runs, whose first
	 * step gives the same z^T A z (n alpha_1 = n sum tau theta) */
	for (int s = 0; s < S && !o->hutchpp; s++) {
		double q = 0;
		trace_rademacher(&r, z, n);
		if (s < nvec) {
			int mm;
			double *nd = b->node + b->nodes, *wt = b->weight + b->nodes;
			if ((rc = lanczos_quadrature(n, block_product, h, z, o->slq_steps, nd, wt, &mm, err)))
				goto out;
			for (int k = 0; k < mm; k++) {
				q += wt[k] * nd[k];
				b->vec[b->nodes + k] = s;
			}
			b->nodes += mm;
			q *= (double)n;
		} else {
			if ((rc = block_product(h, z, y, err)))
				goto out;
			for (int64_t i = 0; i < n; i++)
				q += z[i] * y[i];
		}
		samples[s] = q;
		sum += q;
	}
	if (!o->hutchpp) {
		b->probes = S;
		b->trace = S ? sum / S : NAN;
		for (int s = 0; s < S; s++)
			ss += (samples[s] - b->trace) * (samples[s] - b->trace);
		b->trace_se = S > 1 ? sqrt(ss / (S - 1) / S) : NAN;
	}
	/* eta: the block's tensors' lr, when they share one */
	b->lr = NAN;
	for (int i = 0, first = 1; i < m->ntensors; i++) {
		if (!h->want[i])
			continue;
		if (first)
			b->lr = lr[i];
		else if (!(lr[i] == b->lr))
			b->lr = NAN;
		first = 0;
	}
	b->eos = NAN;
	if (b->neig && isfinite(b->lr))
		b->eos = o->preconditioned ? b->eig[0] * b->lr * (1 - beta1) / (2 + 2 * beta1)
					   : b->eig[0] * b->lr / 2;
out:
	/* the next block's direction starts from zeros */
	if (!h->gpu)
		zero_touched(h->rm->params, m, m->nreparams ? h->rop_want : h->want);
	free(z);
	free(y);
	free(samples);
	return rc;
}

/*
 * The batch's dL/dgamma of the reparameterized gains, for the Hessian's
 * second derivatives of gamma(alpha, beta) (modelhvp.h): a primal pass
 * over every micro-batch, each Nmb/N of the mean as the products weigh
 * them, the gains' gradients kept (keep_gain_grads). NULL without such
 * gains or for Gauss-Newton, which leaves that curvature out.
 */
static int gains_gradient(struct blocksharp_setup *su, struct gpu_model *gpu, const int *tok,
			  const int *tgt, int gauss_newton, real **out, struct sw_err *err)
{
	struct model *m = &su->m;
	int T = su->T, mb = su->mb, Nmb = mb * T, nmb = su->B / su->mb, rc = SW_OK;

	*out = NULL;
	if (!m->nreparams || gauss_newton)
		return SW_OK;
	if (!(*out = malloc(m->nparams * sizeof **out)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	m->keep_gain_grads = 1;
	if (gpu) {
		double loss;
		rc = gpumodel_zero_grad(gpu, err);
		for (int k = 0; k < nmb && !rc; k++)
			if (!(rc = gpumodel_forward(gpu, tok + (size_t)k * Nmb, tgt + (size_t)k * Nmb, mb, T,
						    &loss, err)))
				rc = gpumodel_backward(gpu, tok + (size_t)k * Nmb, tgt + (size_t)k * Nmb,
						       (double)Nmb / (nmb * Nmb), err);
		if (!rc)
			rc = gpumodel_download(gpu, m, NULL, 1, err);
	} else {
		model_zero_grad(m);
		for (int k = 0; k < nmb; k++) {
			model_forward(m, tok + (size_t)k * Nmb, tgt + (size_t)k * Nmb, mb, T);
			model_backward(m, tok + (size_t)k * Nmb, tgt + (size_t)k * Nmb,
				       (double)Nmb / (nmb * Nmb));
		}
	}
	m->keep_gain_grads = 0;
	if (!rc)
		memcpy(*out, m->grads, m->nparams * sizeof **out);
	return rc;
}

int hessian_run(const char *path, const struct sw_select *sel, const struct hessian_opts *o,
		hessian_progress_fn progress, void *ctx, struct hessian_result *r,
		struct sw_err *err)
{
	struct blocksharp_setup su;
	struct ckpt *ck;
	struct model rm;
	struct sw_rng rng;
	unsigned char *want = NULL;
	int *tok = NULL, *tgt = NULL, rc, nt;
	double *lr = NULL, need;
	float *dscale = NULL;
	real *dlogits = NULL, *v = NULL, *hv = NULL, *gain_grads = NULL;
	struct model_rop_tape tape = {0};
	unsigned char *rop_want = NULL;
	struct gpu_model *gpu = NULL;
	struct h5w *vw = NULL;
	int64_t largest = 0, largest_touched = 0;

	memset(r, 0, sizeof *r);
	memset(&rm, 0, sizeof rm);
	r->beta1 = NAN;
	if (o->top < 1 || o->max_steps < 1 || o->probes < 0 || o->density < 0 ||
	    (o->density && o->slq_steps < 1))
		return sw_fail(err, SW_EUSAGE, "hessian: bad options");
	if (o->hutchpp && (o->probes < 3 || o->density))
		return sw_fail(err, SW_EUSAGE, "Hutch++ takes 3 products at least, and no density");
	/* one open: the model, the lr in force and Adam's moments from one
	 * reading of the file */
	if ((rc = ckpt_open(path, &ck, err)))
		return rc;
	if ((rc = blocksharp_setup(ck, &o->data, 2, &su, err))) {
		ckpt_close(ck);
		return rc;
	}
	nt = su.m.ntensors;
	r->T = su.T;
	r->B = su.B;
	r->mb = su.mb;
	r->nparams = (int64_t)su.m.nparams;
	lr = malloc((size_t)nt * sizeof *lr);
	tok = malloc((size_t)su.B * su.T * sizeof *tok);
	tgt = malloc((size_t)su.B * su.T * sizeof *tgt);
	if (!lr || !tok || !tgt) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	checkpoint_lrs(ck, &su.m, lr, r);
	if ((rc = plan_blocks(&su.m, sel, o->by, r, &want, err)))
		goto out;
	if (!r->selected)
		goto out;
	for (int j = 0; j < r->nblocks; j++) {
		int64_t touched = 0;
		for (int i = 0; i < nt; i++)
			if (model_rop_wanted(&su.m, want + (size_t)j * nt, i))
				touched += (int64_t)su.m.tensors[i].numel;
		largest = r->b[j].n > largest ? r->b[j].n : largest;
		largest_touched = touched > largest_touched ? touched : largest_touched;
	}
	need = hessian_memory(&su.m.c, su.ps ? param_stream_resident_bytes(su.ps)
					     : (double)su.m.nparams * sizeof(real),
			      r->nparams, largest, largest_touched, su.mb, su.T, su.mb == su.B,
			      o->data.device != SW_DEVICE_CPU, su.m.nreparams > 0, o);
	r->mem_bytes = need;
	if (su.mem_free > 0 && need > su.mem_free) {
		rc = sw_fail(err, SW_ESOFTWARE, "needs %.2f GB (parameters, activations, Lanczos vectors), %.2f GB available",
			     need / 1e9, su.mem_free / 1e9);
		goto out;
	}
	if (o->preconditioned) {
		if (!(dscale = malloc(su.m.nparams * sizeof *dscale))) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto out;
		}
		if ((rc = preconditioner(ck, &su.m, dscale, &r->beta1, err)))
			goto out;
	}
	rng_seed(&rng, o->data.seed);
	if ((rc = data_train_batch(&su.d, &rng, su.B, su.T, tok, tgt, err))) {
		sw_err_prefix(err, "%s", o->data.data);
		goto out;
	}
	if (o->dump && (rc = dump_batch(o->dump, tok, tgt, su.B, su.T, err)))
		goto out;
	if (o->data.device != SW_DEVICE_CPU) {
		/* the products on the device: the host keeps v and H v */
		if ((rc = gpumodel_open(&gpu, o->data.device, SW_PRECISION_FP32, &su.m, NULL, su.mb, su.T,
					err)))
			goto out;
		v = calloc(su.m.nparams, sizeof *v);
		hv = malloc(su.m.nparams * sizeof *hv);
		if (!v || !hv) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto out;
		}
		if ((rc = gains_gradient(&su, gpu, tok, tgt, o->gauss_newton, &gain_grads, err)))
			goto out;
		if (su.mb == su.B) {
			double loss;
			/* one micro-batch: its forward pass serves every product (the
			 * device keeps dL/dlogits apart) */
			if ((rc = gpumodel_forward(gpu, tok, tgt, su.B, su.T, &loss, err)))
				goto out;
		}
	} else {
		if ((rc = model_alloc_acts(&su.m, su.mb, su.T, err)) ||
		    (rc = model_rop_build(&rm, &su.m, err)) ||
		    (rc = gains_gradient(&su, NULL, tok, tgt, o->gauss_newton, &gain_grads, err)))
			goto out;
		if (su.mb == su.B) {
			/* one micro-batch: its forward pass serves every product */
			if (!(dlogits = malloc((size_t)su.B * su.T * su.m.c.vocab_size * sizeof *dlogits))) {
				rc = sw_fail(err, SW_ESOFTWARE, "out of memory for the logits");
				goto out;
			}
			model_forward(&su.m, tok, tgt, su.B, su.T);
			/* and the primal backward's products, kept after the first */
			if (!o->gauss_newton && !su.m.eff && (rc = model_rop_tape_alloc(&tape, &su.m, err)))
				goto out;
		}
	}
	if (su.m.nreparams && !(rop_want = calloc((size_t)nt, 1))) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	if (o->eigvecs) {
		if ((rc = h5w_create(o->eigvecs, "hessian-eigenvectors", &vw, err)) ||
		    (rc = h5w_write_config(vw, &su.m.c, err)) ||
		    (rc = h5w_set_str(vw, "/", "operator", o->gauss_newton ? "gauss-newton" :
					   o->preconditioned ? "preconditioned" : "hessian", err)) ||
		    (r->has_step && (rc = h5w_set_i64(vw, "/", "step", r->step, err))))
			goto out;
	}
	for (int j = 0; j < r->nblocks && !rc; j++) {
		struct hop h = {
			.su = &su, .rm = &rm, .tok = tok, .tgt = tgt, .nmb = su.B / su.mb,
			.kept = su.mb == su.B, .dlogits = dlogits, .tape = tape.buf ? &tape : NULL,
			.gn = o->gauss_newton,
			.want = want + (size_t)j * nt, .gpu = gpu, .v = v, .hv = hv,
			.dscale = dscale, .b = &r->b[j], .progress = progress, .pctx = ctx,
			.index = j, .count = r->nblocks, .rop_want = rop_want, .gain_grads = gain_grads,
		};
		/* block j's own stream: a block's numbers do not depend on the others */
		rc = run_block(&h, o, lr, r->beta1, o->data.seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(j + 1)),
			       err);
		if (!rc && vw)
			rc = write_vectors(vw, &su.m, want + (size_t)j * nt, j, &r->b[j], err);
		free(r->b[j].vecs);
		r->b[j].vecs = NULL;
	}
	if (vw) {
		struct h5w *done = vw;
		vw = NULL;
		if (rc)
			h5w_abort(done);
		else
			rc = h5w_commit(done, err);
	}
out:
	if (vw)
		h5w_abort(vw);
	free(lr);
	free(tok);
	free(tgt);
	free(want);
	free(rop_want);
	free(gain_grads);
	free(dscale);
	free(dlogits);
	model_rop_tape_free(&tape);
	free(v);
	free(hv);
	gpumodel_close(gpu);
	if (rm.params)
		model_free(&rm);
	blocksharp_setup_free(&su);
	ckpt_close(ck);
	if (rc)
		hessian_free(r);
	return rc;
}
