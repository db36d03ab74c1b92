/* dp.c - data parallelism over the model (see dp.h). */
#include "dp.h"
#include "sharpness.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* the gradients' element type for the exchange */
#define REAL_TYPE (sizeof(real) == 4 ? COMM_F32 : COMM_F64)

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The bucket of a tensor: layer + 1; the top (L + 1) for what lies
 * outside the layers but the embedding (the final norm, the head). */
static int bucket_of(const struct model *m, const struct model_tensor *t)
{
	if (t->info.layer >= 0)
		return t->info.layer + 1;
	return t->info.block == SW_BLOCK_EMB ? 0 : (int)m->c.n_layers + 1;
}

/* Each bucket's range of the flat block; its tensors must lie together
 * (layout.c lays the block out in model order). */
static int plan_buckets(struct dp *d, struct sw_err *err)
{
	const struct model *m = d->m;
	size_t *count;

	d->nbuckets = (int)m->c.n_layers + 2;
	d->lo = malloc((size_t)d->nbuckets * sizeof *d->lo);
	d->hi = calloc((size_t)d->nbuckets, sizeof *d->hi);
	d->started = calloc((size_t)d->nbuckets, sizeof *d->started);
	count = calloc((size_t)d->nbuckets, sizeof *count);
	if (!d->lo || !d->hi || !d->started || !count) {
		free(count);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	for (int b = 0; b < d->nbuckets; b++)
		d->lo[b] = m->nparams;
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *t = &m->tensors[i];
		int b = bucket_of(m, t);
		d->lo[b] = t->offset < d->lo[b] ? t->offset : d->lo[b];
		d->hi[b] = t->offset + t->numel > d->hi[b] ? t->offset + t->numel : d->hi[b];
		count[b] += t->numel;
	}
	for (int b = 0; b < d->nbuckets; b++) {
		if (d->hi[b] < d->lo[b])
			d->lo[b] = d->hi[b] = 0;        /* empty (a tied head's top: the final norm only) */
		if (d->hi[b] - d->lo[b] != count[b]) {
			free(count);
			return sw_fail(err, SW_ESOFTWARE, "data parallel: the tensors of layer %d are not contiguous",
				       b - 1);
		}
	}
	free(count);
	return SW_OK;
}

/* ZeRO-1 shards: whole tensors, split where the running count of
 * parameters crosses each rank's share. */
static int plan_shards(struct dp *d, struct sw_err *err)
{
	const struct model *m = d->m;
	int n = d->size;

	d->shard_first = calloc((size_t)n, sizeof *d->shard_first);
	d->shard_count = calloc((size_t)n, sizeof *d->shard_count);
	d->part_count = calloc((size_t)n, sizeof *d->part_count);
	d->part_displ = calloc((size_t)n, sizeof *d->part_displ);
	if (!d->shard_first || !d->shard_count || !d->part_count || !d->part_displ)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (int r = 0, i = 0; r < n; r++) {
		size_t lo, hi;
		comm_split(m->nparams, r, n, &lo, &hi);
		d->shard_first[r] = i;
		d->part_displ[r] = i < m->ntensors ? m->tensors[i].offset : m->nparams;
		/* the tensors that start in [lo, hi) */
		while (i < m->ntensors && m->tensors[i].offset < hi)
			d->part_count[r] += m->tensors[i++].numel;
		d->shard_count[r] = i - d->shard_first[r];
	}
	return SW_OK;
}

int dp_open(struct dp *d, struct comm *comm, struct model *m, int zero, struct sw_err *err)
{
	int rc;

	memset(d, 0, sizeof *d);
	d->comm = comm;
	d->rank = comm_rank(comm);
	d->size = comm_size(comm);
	d->m = m;
	d->zero = zero && d->size > 1;
	if ((rc = plan_buckets(d, err)) || (d->zero && (rc = plan_shards(d, err))))
		dp_close(d);
	return rc;
}

void dp_close(struct dp *d)
{
	if (d->m && d->m->grads_ready_ctx == d) {
		d->m->grads_ready = NULL;
		d->m->grads_ready_ctx = NULL;
	}
	free(d->lo);
	free(d->hi);
	free(d->started);
	free(d->shard_first);
	free(d->shard_count);
	free(d->part_count);
	free(d->part_displ);
	memset(d, 0, sizeof *d);
}

void dp_slice(const struct dp *d, int rows, int *r0, int *r1)
{
	size_t lo, hi;

	comm_split((size_t)rows, d->rank, d->size, &lo, &hi);
	*r0 = (int)lo;
	*r1 = (int)hi;
}

/* Start bucket b's all-reduce (once). */
static int start_bucket(struct dp *d, int b, struct sw_err *err)
{
	if (d->started[b])
		return SW_OK;
	d->started[b] = 1;
	if (d->hi[b] == d->lo[b])
		return SW_OK;
	return comm_iallreduce(d->comm, d->m->grads + d->lo[b], d->hi[b] - d->lo[b], REAL_TYPE, COMM_SUM,
			       COMM_HOST, err);
}

/* model_backward's hook: layer's gradients are final */
static void on_grads_ready(void *ctx, int layer)
{
	struct dp *d = ctx;

	if (d->rc)
		return;
	/* and let MPI move the started ones on while the backward goes on */
	if (!(d->rc = start_bucket(d, layer + 1, &d->err)))
		d->rc = comm_progress(d->comm, &d->err);
}

void dp_arm(struct dp *d)
{
	if (d->size == 1)
		return;
	memset(d->started, 0, (size_t)d->nbuckets * sizeof *d->started);
	d->rc = 0;
	d->m->grads_ready = on_grads_ready;
	d->m->grads_ready_ctx = d;
}

int dp_reduce_grads(struct dp *d, struct sw_err *err)
{
	double t0;
	int rc = SW_OK;

	if (d->size == 1)
		return SW_OK;
	d->m->grads_ready = NULL;
	d->m->grads_ready_ctx = NULL;
	t0 = now_s();
	if (d->rc) {
		*err = d->err;
		rc = d->rc;
	}
	/* the order of the backward: the top, the layers from the last, the embedding */
	for (int b = d->nbuckets - 1; b >= 0 && !rc; b--)
		rc = start_bucket(d, b, err);
	if (!rc)
		rc = comm_wait_all(d->comm, err);
	d->wait_s += now_s() - t0;
	return rc;
}

int dp_sum(struct dp *d, double *v, int n, struct sw_err *err)
{
	return comm_allreduce(d->comm, v, (size_t)n, COMM_F64, COMM_SUM, COMM_HOST, err);
}

int dp_shard_optim(struct dp *d, struct optim *o, struct sw_err *err)
{
	if (!d->zero)
		return SW_OK;
	return optim_shard(o, d->m, d->shard_first[d->rank], d->shard_count[d->rank], err);
}

int dp_gather_params(struct dp *d, struct sw_err *err)
{
	if (!d->zero)
		return SW_OK;
	return comm_allgather_parts(d->comm, d->m->params, d->part_count, d->part_displ, REAL_TYPE,
				    COMM_HOST, err);
}

int dp_full_optim(struct dp *d, const struct optim *o, struct optim *full, struct sw_err *err)
{
	const struct model *m = d->m;
	int rc = SW_OK, who;
	/* v's parts: each rank's tensors' v (optim.h's voff; Adam-mini's
	 * are one a block, Lion's none) */
	size_t *vcount = calloc((size_t)d->size, sizeof *vcount), *vdispl = NULL;

	if (!d->zero) {
		free(vcount);
		*full = *o;
		return SW_OK;
	}
	memset(full, 0, sizeof *full);
	vdispl = calloc((size_t)d->size, sizeof *vdispl);
	if (!vcount || !vdispl)
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (int r = 0; !rc && r < d->size; r++) {
		vdispl[r] = o->voff[d->shard_first[r]];
		vcount[r] = o->voff[d->shard_first[r] + d->shard_count[r]] - vdispl[r];
	}
	if (!rc && d->rank == 0) {
		*full = *o;
		full->first = 0;
		full->count = m->ntensors;
		full->base = full->vbase = 0;
		full->work = NULL;
		full->m = malloc(m->nparams * sizeof *full->m);
		full->v = malloc((optim_v_count(o) ? optim_v_count(o) : 1) * sizeof *full->v);
		if (!full->m || !full->v)
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory for the whole optimizer state");
	}
	/* every rank sends only once the root can take it */
	if (!(rc = comm_agree(d->comm, rc, &who)) &&
	    !(rc = comm_gather_parts(d->comm, o->m, full->m, d->part_count, d->part_displ, COMM_F32, 0,
				     COMM_HOST, err)))
		rc = comm_gather_parts(d->comm, o->v, full->v, vcount, vdispl, COMM_F32, 0, COMM_HOST, err);
	free(vcount);
	free(vdispl);
	if (rc)
		dp_full_optim_free(d, full);
	return rc;
}

void dp_full_optim_free(struct dp *d, struct optim *full)
{
	if (d->zero) {
		free(full->m);
		free(full->v);
	}
	memset(full, 0, sizeof *full);
}

int dp_params_agree(struct dp *d, struct sw_err *err)
{
	const unsigned char *p = (const unsigned char *)d->m->params;
	size_t n = d->m->nparams * sizeof(real);
	uint64_t h = 1469598103934665603ULL, lo, hi;    /* FNV-1a over the bytes */
	int rc;

	if (d->size == 1)
		return SW_OK;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	lo = hi = h;
	if ((rc = comm_allreduce(d->comm, &lo, 1, COMM_U64, COMM_MIN, COMM_HOST, err)) ||
	    (rc = comm_allreduce(d->comm, &hi, 1, COMM_U64, COMM_MAX, COMM_HOST, err)))
		return rc;
	if (lo != hi)
		return sw_fail(err, SW_ESOFTWARE, "data parallel: the ranks' parameters differ (the MPI "
			       "library's sum is not the same on every rank)");
	return SW_OK;
}

/* Skip n label draws: one uniform each (gnb_sample_labels' inverse CDF). */
static void skip_draws(struct sw_rng *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		(void)rng_uniform(r);
}

int dp_gnb_estimate(struct dp *d, const int *tokens, int B, int T, int mb, int draws,
		    struct sw_rng *r, float *h, int *labels, real *probs_buf,
		    const struct gnb_progress *progress, struct sw_err *err)
{
	struct model *m = d->m;
	int V = (int)m->c.vocab_size, N = B * T, b0, b1, rc = SW_OK, rc2;
	int *y;

	if (d->size == 1)
		return gnb_estimate(m, tokens, B, T, mb, draws, r, h, labels, probs_buf, progress, err);
	if (labels || probs_buf)
		return sw_fail(err, SW_ESOFTWARE, "data parallel GNB: no labels or softmax kept");
	dp_slice(d, B, &b0, &b1);
	int passes = (b1 - b0 + mb - 1) / (mb > 0 ? mb : 1), done = 0;
	if (!(y = malloc((size_t)(mb > 0 ? mb : 1) * T * sizeof *y)))
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (int k = 0; k < draws; k++) {
		model_zero_grad(m);
		/* the uniforms of the rows before ours, ours pass by pass, the rest */
		skip_draws(r, (size_t)b0 * T);
		for (int row = b0; row < b1; row += mb) {
			int n = b1 - row < mb ? b1 - row : mb;
			const int *tok = tokens + (size_t)row * T;
			if (rc || (rc = model_alloc_acts(m, n, T, err))) {
				skip_draws(r, (size_t)n * T);
				continue;
			}
			model_forward(m, tok, NULL, n, T);
			gnb_sample_labels(m->logits, n * T, V, r, y);
			/* these rows' mean loss is n T / N of the batch's mean */
			model_backward(m, tok, y, (double)n * T / N);
			if (progress && progress->fn)
				progress->fn(progress->ctx, ++done, draws * passes);
		}
		skip_draws(r, (size_t)(B - b1) * T);
		/* every rank sums, whatever happened here; then h += N g^2 / draws */
		if ((rc2 = comm_allreduce(d->comm, m->grads, m->nparams, REAL_TYPE, COMM_SUM, COMM_HOST,
					  rc ? NULL : err)) && !rc)
			rc = rc2;
		if (!rc)
			gnb_square_into(h, m->grads, m->nparams, (double)N / draws);
	}
	free(y);
	return rc;
}
