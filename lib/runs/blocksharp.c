/* blocksharp.c - the blockwise sharpness of a checkpoint (see blocksharp.h). */
#include "blocksharp.h"
#include "../formats/ckpt.h"
#include "../model/cuda/gpumodel.h"
#include "../model/dp.h"
#include "../formats/h5write.h"
#include "../model/model.h"
#include "../model/modelio.h"
#include "../base/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void blocksharp_free(struct blocksharp_estimate *e)
{
	free(e->info);
	free(e->offset);
	free(e->h);
	memset(e, 0, sizeof *e);
}

/* Room for n tensors and total values (h too unless in_place: the
 * caller's model gradient will be it). */
static int estimate_alloc(struct blocksharp_estimate *e, size_t n, size_t total, int in_place,
			  struct sw_err *err)
{
	e->n = (int)n;
	e->total = (int64_t)total;
	e->info = calloc(n ? n : 1, sizeof *e->info);
	e->offset = calloc(n ? n : 1, sizeof *e->offset);
	e->h = in_place ? NULL : calloc(total ? total : 1, sizeof *e->h);
	if (!e->info || !e->offset || (!in_place && !e->h))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	return SW_OK;
}

/* /fisher from the checkpoint: 1 if every tensor has one, 0 if not. */
static int from_fisher(struct ckpt *ck, struct blocksharp_estimate *e, int *have,
		       struct sw_err *err)
{
	size_t n = ckpt_count(ck), total = 0;
	int rc;

	*have = 0;
	for (size_t i = 0; i < n; i++) {
		if (!ckpt_has_aux(ck, "fisher", i))
			return SW_OK;
		total += (size_t)ckpt_info(ck, i)->numel;
	}
	if ((rc = estimate_alloc(e, n, total, 0, err)))
		return rc;
	total = 0;
	for (size_t i = 0; i < n; i++) {
		e->info[i] = *ckpt_info(ck, i);
		e->offset[i] = total;
		if ((rc = ckpt_load_aux(ck, "fisher", i, e->h + total, err)))
			return rc;
		total += (size_t)e->info[i].numel;
	}
	e->source = "fisher";
	*have = 1;
	return SW_OK;
}

static double mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	double kb = 0;

	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024;
}

/* The inputs and sampled labels of every draw, for an independent check. */
static int dump_labels(const char *path, const int *inputs, const int *labels, int draws, int B,
		       int T, struct sw_err *err)
{
	struct h5w *w;
	int rc;

	if ((rc = h5w_create(path, "gnb-labels", &w, err)))
		return rc;
	if ((rc = h5w_write_i32(w, "/", "tokens", (int64_t)draws * B, T, inputs, err)) ||
	    (rc = h5w_write_i32(w, "/", "labels", (int64_t)draws * B, T, labels, err)) ||
	    (rc = h5w_set_i64(w, "/", "draws", draws, err)) ||
	    (rc = h5w_set_i64(w, "/", "batch_tokens", (int64_t)B * T, err))) {
		h5w_abort(w);
		return rc;
	}
	return h5w_commit(w, err);
}

/* The failure of some rank, on every rank; the reporter noted. */
static int agree(const struct blocksharp_opts *o, struct blocksharp_estimate *e, int rc)
{
	int who;

	if ((rc = comm_agree(o->comm, rc, &who)))
		e->reporter = who;
	return rc;
}

/* A fresh batch per draw is an estimate per draw: its passes counted
 * among every draw's. */
struct draw_passes {
	const struct gnb_progress *all;
	int draw, draws;
};

static void draw_pass_done(void *ctx, int done, int total)
{
	const struct draw_passes *d = ctx;

	d->all->fn(d->all->ctx, d->draw * total + done, d->draws * total);
}

/* The estimate of one batch: on the CPU (with several ranks, each its rows
 * of it: dp_gnb_estimate), or with --device on the GPU model mirroring m;
 * keep: one micro-batch, its softmax kept for every draw (in probs on the
 * CPU, on the device on a GPU); ps: the layers streamed, whose reading may
 * have failed during the passes. */
static int estimate(struct dp *dp, struct gpu_model *gpu, const struct param_stream *ps,
		    const int *tok, int B, int T, int mb, int draws, struct sw_rng *r, float *h,
		    int *labels, int keep, real *probs, const struct gnb_progress *progress,
		    struct sw_err *err)
{
	int rc;

	if (!gpu) {
		rc = dp_gnb_estimate(dp, tok, B, T, mb, draws, r, h, labels, keep ? probs : NULL,
				     progress, err);
		return rc || !ps ? rc : param_stream_status(ps, err);
	}
	return gpumodel_gnb(gpu, tok, B, T, mb, draws, r, h, labels, keep, err);
}

int blocksharp_setup(struct ckpt *ck, const struct blocksharp_opts *o, int copies,
		     struct blocksharp_setup *s, struct sw_err *err)
{
	int rc;

	memset(s, 0, sizeof *s);
	s->mem_free = mem_available();
	if (!o->data)
		return sw_fail(err, SW_EUSAGE, "no /fisher in the checkpoint: give --data");
	if (o->low_memory && o->device != SW_DEVICE_CPU)
		return sw_fail(err, SW_EUSAGE, "--low-memory: on the CPU only");
	if (o->low_memory) {
		if ((rc = param_stream_open(ck, &s->m, &s->ps, err)))
			return rc;
	} else if ((rc = modelio_read(ck, &s->m, err))) {
		return rc;
	}
	if ((rc = data_open(o->data, o->fmt, 0, &s->d, err))) {
		sw_err_prefix(err, "%s", o->data);
		param_stream_close(s->ps);
		s->ps = NULL;
		model_free(&s->m);
		return rc;
	}
	s->T = o->seq_len ? o->seq_len
			  : (int)(s->m.c.seq_len && s->m.c.seq_len < 512 ? s->m.c.seq_len : 512);
	if (o->batch_tokens % s->T) {
		rc = sw_fail(err, SW_EUSAGE, "--batch-tokens %lld is not a multiple of the sequence length %d",
			     (long long)o->batch_tokens, s->T);
		goto out;
	}
	s->B = (int)(o->batch_tokens / s->T);
	if ((rc = data_check(&s->d, s->T, (int)s->m.c.vocab_size, err))) {
		sw_err_prefix(err, "%s", o->data);
		goto out;
	}
	/* the largest micro-batch dividing B whose activations (copies sets of
	 * them) take at most a quarter of the free memory (or the one asked
	 * for); on a GPU the whole batch unless asked for less */
	s->mb = o->micro ? o->micro : o->low_memory ? 1 : s->B;
	while (!o->micro && o->device == SW_DEVICE_CPU && s->mb > 1 &&
	       (s->B % s->mb || copies * model_acts_bytes(&s->m.c, s->mb, s->T, 0) > s->mem_free / 4))
		s->mb--;
	if (s->B % s->mb)
		rc = sw_fail(err, SW_EUSAGE, "--micro-batch %d does not divide the batch of %d sequences",
			     s->mb, s->B);
out:
	if (rc)
		blocksharp_setup_free(s);
	return rc;
}

void blocksharp_setup_free(struct blocksharp_setup *s)
{
	param_stream_close(s->ps);
	data_close(&s->d);
	model_free(&s->m);
	memset(s, 0, sizeof *s);
}

/* Compute the estimate with the model on tokens from the data file (with
 * several ranks, each its rows of every batch). */
static int compute(struct ckpt *ck, const struct blocksharp_opts *o,
		   struct blocksharp_estimate *e, struct sw_err *err)
{
	struct blocksharp_setup su;
	struct model *m = &su.m;
	struct sw_rng r;
	struct dp dp = {0};
	struct gpu_model *gpu = NULL;
	int rc, T, B, mb, keep, in_place = 0, many = comm_size(o->comm) > 1;
	float *h = NULL;
	int *tok = NULL, *tgt = NULL, *labels = NULL, *inputs = NULL;
	real *probs = NULL;
	double need;

	/* every rank read the same files: the same way on */
	if ((rc = agree(o, e, blocksharp_setup(ck, o, 1, &su, err))))
		return rc;
	T = su.T;
	B = su.B;
	mb = su.mb;
	/* streamed, the activations too are one layer's at a time (the
	 * R-operator, sw-hessian's, reads every layer's: not there) */
	m->recompute = su.ps != NULL;
	keep = mb == B && !many;
	if (o->device != SW_DEVICE_CPU && many) {
		rc = sw_fail(err, SW_EUSAGE, "--device under mpirun: not built yet (one process per GPU)");
		goto setup;
	}
	if (o->device != SW_DEVICE_CPU &&
	    (rc = gpumodel_open(&gpu, o->device, SW_PRECISION_FP32, m, NULL, mb, T, err)))
		goto setup;
	/* one draw on the CPU: the float gradient becomes the estimate in
	 * place (at 1B parameters that spares 5 GB) */
	in_place = !gpu && o->draws == 1 && sizeof(real) == sizeof(float);
	/* the host's part: the parameters (streamed: those outside the
	 * layers and one layer), the gradient, the estimate unless in the
	 * gradient's place, the effective weights; on a GPU the parameters
	 * and the estimate */
	need = (su.ps ? param_stream_resident_bytes(su.ps) : (double)m->nparams * sizeof(float)) +
	       (2.0 - in_place) * (double)m->nparams * sizeof(float) +
	       2.0 * (double)m->eff_size * sizeof(real) +
	       (gpu ? 0 : model_acts_bytes(&m->c, mb, T, m->recompute) +
			  (keep ? (double)mb * T * m->c.vocab_size * sizeof(real) : 0));
	if (su.mem_free > 0 && need > su.mem_free) {
		rc = sw_fail(err, SW_ESOFTWARE,
			     "needs %.1f GB (parameters, gradient and estimate, activations), %.1f GB available",
			     need / 1e9, su.mem_free / 1e9);
		goto setup;
	}
	if ((rc = estimate_alloc(e, (size_t)m->ntensors, m->nparams, in_place, err)))
		goto setup;
	h = in_place ? (float *)(void *)m->grads : e->h;
	tok = malloc((size_t)B * T * sizeof *tok);
	tgt = malloc((size_t)B * T * sizeof *tgt);
	if (o->dump) {
		labels = malloc((size_t)o->draws * B * T * sizeof *labels);
		inputs = malloc((size_t)o->draws * B * T * sizeof *inputs);
	}
	if (keep && !gpu)
		probs = malloc((size_t)B * T * m->c.vocab_size * sizeof *probs);
	if (!tok || !tgt || (o->dump && (!labels || !inputs)) || (keep && !gpu && !probs)) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto setup;
	}
	if ((rc = dp_open(&dp, o->comm, m, 0, err)))
		goto setup;
	for (int i = 0; i < m->ntensors; i++) {
		e->info[i] = m->tensors[i].info;
		e->offset[i] = m->tensors[i].offset;
	}
	rng_seed(&r, o->seed);
setup:
	/* every rank set up alike, or all stop */
	if ((rc = agree(o, e, rc)))
		goto out;
	if (o->same_batch) {
		if ((rc = agree(o, e, data_train_batch(&su.d, &r, B, T, tok, tgt, err))))
			sw_err_prefix(err, "%s", o->data);
		else
			rc = agree(o, e, estimate(&dp, gpu, su.ps, tok, B, T, mb, o->draws, &r, h, labels, keep,
						  probs, &o->progress, err));
		for (int k = 0; inputs && k < o->draws; k++)
			memcpy(inputs + (size_t)k * B * T, tok, (size_t)B * T * sizeof *tok);
	} else {
		/* a fresh batch for every draw; each adds N g^2, averaged at the end */
		for (int k = 0; k < o->draws && !rc; k++) {
			if ((rc = agree(o, e, data_train_batch(&su.d, &r, B, T, tok, tgt, err)))) {
				sw_err_prefix(err, "%s", o->data);
				break;
			}
			struct draw_passes dr = {&o->progress, k, o->draws};
			struct gnb_progress pr = {o->progress.fn ? draw_pass_done : NULL, &dr};
			rc = agree(o, e, estimate(&dp, gpu, su.ps, tok, B, T, mb, 1, &r, h,
						  labels ? labels + (size_t)k * B * T : NULL, keep, probs,
						  &pr, err));
			if (inputs)
				memcpy(inputs + (size_t)k * B * T, tok, (size_t)B * T * sizeof *tok);
		}
		/* the mean of the draws' sums (one draw: already it) */
		for (size_t i = 0; !rc && o->draws > 1 && i < m->nparams; i++)
			h[i] /= (float)o->draws;
	}
	if (!rc && in_place) {
		/* the gradient is the estimate now: it outlives the model */
		e->h = h;
		m->grads = NULL;
	}
	if (!rc && o->dump)
		rc = dump_labels(o->dump, inputs, labels, o->draws, B, T, err);
	e->source = "computed";
out:
	dp_close(&dp);
	free(tok);
	free(tgt);
	free(labels);
	free(inputs);
	free(probs);
	gpumodel_close(gpu);
	blocksharp_setup_free(&su);
	return agree(o, e, rc);
}

int blocksharp_estimate(const char *path, const struct blocksharp_opts *o,
			struct blocksharp_estimate *e, struct sw_err *err)
{
	struct ckpt *ck;
	int rc, have = 0;

	memset(e, 0, sizeof *e);
	e->reporter = -2;
	if ((rc = ckpt_open(path, &ck, err)))
		return agree(o, e, rc);
	e->has_step = ckpt_meta(ck)->has_step;
	e->step = ckpt_meta(ck)->step;
	e->tokens = ckpt_meta(ck)->tokens;
	snprintf(e->reparam, sizeof e->reparam, "%s", ckpt_meta(ck)->config.scale_reparam);
	/* --data given is data to use: a checkpoint's /fisher only without it */
	if (!o->recompute && !o->dump && !o->data)
		rc = from_fisher(ck, e, &have, err);
	/* every rank read the same file: the same way on; the model from
	 * the same open checkpoint */
	if (!(rc = agree(o, e, rc)) && !have)
		rc = compute(ck, o, e, err);
	ckpt_close(ck);
	return rc;
}

/* The runs of h of the tensors matching (block, layer, tensor, sel):
 * pointers into e->h, not copies (seg and len hold e->n); returns how many. */
static int runs_of(const struct blocksharp_estimate *e, const struct sw_select *sel, int block,
		   int layer, int tensor, const float **seg, int64_t *len)
{
	int n = 0;

	for (int i = 0; i < e->n; i++) {
		const struct sw_tensor_info *t = &e->info[i];
		if ((block >= 0 && (int)t->block != block) || (layer != -2 && t->layer != layer) ||
		    (tensor >= 0 && i != tensor) || !select_match_info(sel, t) ||
		    arch_reparam_of(e->reparam, t->role))
			continue;
		seg[n] = e->h + e->offset[i];
		len[n++] = t->numel;
	}
	return n;
}

/* Room for the runs of every tensor. */
static int runs_alloc(const struct blocksharp_estimate *e, const float ***seg, int64_t **len,
		      struct sw_err *err)
{
	*seg = malloc((size_t)(e->n + 1) * sizeof **seg);
	*len = malloc((size_t)(e->n + 1) * sizeof **len);
	if (*seg && *len)
		return SW_OK;
	free(*seg);
	free(*len);
	return sw_fail(err, SW_ESOFTWARE, "out of memory");
}

int blocksharp_stats(const struct blocksharp_estimate *e, const struct sw_select *sel,
		     int block, int layer, int tensor, struct gnb_stats *s, int64_t *count,
		     struct sw_err *err)
{
	const float **seg;
	int64_t *len;
	int rc = runs_alloc(e, &seg, &len, err), nseg;

	if (rc)
		return rc;
	nseg = runs_of(e, sel, block, layer, tensor, seg, len);
	*count = 0;
	for (int j = 0; j < nseg; j++)
		*count += len[j];
	if (*count)
		rc = gnb_stats(seg, len, nseg, s, err);
	free(seg);
	free(len);
	return rc;
}

int blocksharp_type_means(const struct blocksharp_estimate *e, const struct sw_select *sel,
			  double S[SW_BLOCK_COUNT], struct sw_err *err)
{
	for (int b = 0; b < SW_BLOCK_COUNT; b++) {
		struct gnb_stats s;
		int64_t n;
		int rc;

		S[b] = NAN;
		if ((rc = blocksharp_stats(e, sel, b, -2, -1, &s, &n, err)))
			return rc;
		if (n)
			S[b] = s.mean;
	}
	return SW_OK;
}

int blocksharp_hist(const struct blocksharp_estimate *e, const struct sw_select *sel, int bins,
		    int64_t *count, double *density, int present[SW_BLOCK_COUNT], double *lo_out,
		    double *width, struct sw_err *err)
{
	const float **seg;
	int64_t *len;
	double lo = INFINITY, hi = -INFINITY, w;
	int nseg, rc = runs_alloc(e, &seg, &len, err);

	if (rc)
		return rc;
	nseg = runs_of(e, sel, -1, -2, -1, seg, len);
	for (int j = 0; j < nseg; j++)
		for (int64_t i = 0; i < len[j]; i++)
			if (seg[j][i] > 0) {
				double x = log10((double)seg[j][i]);
				lo = x < lo ? x : lo;
				hi = x > hi ? x : hi;
			}
	if (!(hi >= lo)) {
		free(seg);
		free(len);
		return sw_fail(err, SW_EDATA, "every estimate is zero: no distribution to print");
	}
	w = hi > lo ? (hi - lo) / bins : 1;
	for (int b = 0; b < SW_BLOCK_COUNT; b++) {
		int64_t nz = 0, *c = count + (size_t)b * bins;

		nseg = runs_of(e, sel, b, -2, -1, seg, len);
		present[b] = nseg > 0;
		memset(c, 0, (size_t)bins * sizeof *c);
		for (int j = 0; j < nseg; j++)
			for (int64_t i = 0; i < len[j]; i++)
				if (seg[j][i] > 0) {
					int k = (int)((log10((double)seg[j][i]) - lo) / w);
					c[k >= bins ? bins - 1 : k < 0 ? 0 : k]++;
					nz++;
				}
		for (int k = 0; k < bins; k++)
			density[(size_t)b * bins + k] = nz ? (double)c[k] / ((double)nz * w) : 0;
	}
	free(seg);
	free(len);
	*lo_out = lo;
	*width = w;
	return SW_OK;
}

int blocksharp_principle(const double S[SW_BLOCK_COUNT], int strict,
			 struct blocksharp_violation v[16], int *nv, struct sw_err *err)
{
	static const enum sw_block five[] = {
		SW_BLOCK_EMB, SW_BLOCK_QK, SW_BLOCK_VO, SW_BLOCK_FFN, SW_BLOCK_NORM
	};
	static const enum sw_block chain[] = {SW_BLOCK_QK, SW_BLOCK_FFN, SW_BLOCK_VO};
	int n = 0;

	*nv = 0;
	for (size_t i = 0; i < 5; i++)
		if (isnan(S[five[i]]))
			return sw_fail(err, SW_EDATA, "no %s parameters: Principle (1) needs all five types",
				       sw_block_name(five[i]));
	for (size_t i = 0; i < 5; i++) {
		enum sw_block b = five[i];
		if (b != SW_BLOCK_NORM && !(S[b] < S[SW_BLOCK_NORM]))
			v[n++] = (struct blocksharp_violation){b, SW_BLOCK_NORM, 1};
		if (b != SW_BLOCK_EMB && !(S[SW_BLOCK_EMB] < S[b]))
			v[n++] = (struct blocksharp_violation){SW_BLOCK_EMB, b, 0};
	}
	for (int i = 0; strict && i + 1 < 3; i++)
		if (!(S[chain[i]] < S[chain[i + 1]]))
			v[n++] = (struct blocksharp_violation){chain[i], chain[i + 1], 0};
	*nv = n;
	return SW_OK;
}

void blocksharp_opts_defaults(struct blocksharp_opts *o)
{
	memset(o, 0, sizeof *o);
	o->batch_tokens = BLOCKSHARP_BATCH_TOKENS;
	o->draws = 1;
	o->seed = 1;
}
