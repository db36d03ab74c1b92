/*
 * dp.h - data parallelism over the model: the processes of a job
 * (comm.h) each run the model on their own slice of every batch, and the
 * gradients are summed across them, so every process holds the gradient
 * of the whole batch and takes the same update.
 *
 * The sum is bucketed by layer and overlaps the backward pass: armed
 * (dp_arm) before the last backward of a step, model_backward's
 * grads_ready hook starts a nonblocking all-reduce of each layer's
 * gradients as soon as they are final, from the output end (the final
 * norm and head, layer L-1, ..., layer 0, the embedding);
 * dp_reduce_grads starts any bucket not started yet, in the same order,
 * and waits for them all. Every rank starts the same buckets in the same
 * order, whether or not its backward ran (a rank that failed still takes
 * part, and the failure is agreed on after), so no rank waits forever.
 *
 * ZeRO-1 (dp_open with zero): the optimizer state is sharded by whole
 * tensors (Muon and Scion orthogonalize whole matrices), contiguous runs
 * of about nparams/size parameters each; each rank updates its shard and
 * dp_gather_params gives every rank every updated tensor. The arithmetic
 * of each tensor's update is the same, so the run is bit for bit the one
 * without ZeRO.
 *
 * One process (no comm, or a comm of one): every call is a no-op or the
 * plain single-process computation, with its numerics unchanged.
 */
#ifndef SW_DP_H
#define SW_DP_H

#include <stddef.h>
#include <stdint.h>

#include "../base/comm.h"
#include "model.h"
#include "optim.h"
#include "sharpness.h"
#include "../base/rng.h"
#include "../base/status.h"

struct dp {
	struct comm *comm;
	int rank, size;
	struct model *m;
	/* gradient buckets, indexed by layer + 1: 0 the embedding, l + 1
	 * layer l, L + 1 the final norm and head */
	int nbuckets;
	size_t *lo, *hi;                /* (nbuckets) ranges of m->grads */
	int *started;                   /* (nbuckets) this step */
	int rc;                         /* the first failure in the hook, with err */
	struct sw_err err;
	double wait_s;                  /* seconds waiting for the exchange, summed */
	/* ZeRO-1 */
	int zero;
	int *shard_first, *shard_count; /* (size) tensors of each rank */
	size_t *part_count, *part_displ;/* (size) their parameters in the flat block */
};

/* Plan the buckets (and the shards with zero) of model m over comm
 * (NULL: one process). m must stay where it is while d is used. */
int dp_open(struct dp *d, struct comm *comm, struct model *m, int zero, struct sw_err *err);
void dp_close(struct dp *d);

/* This rank's rows [*r0, *r1) of a batch of `rows` sequences. */
void dp_slice(const struct dp *d, int rows, int *r0, int *r1);

/* Exchange each layer's gradients as the next model_backward finishes it. */
void dp_arm(struct dp *d);

/* Sum the gradients of every rank into m->grads on every rank (what the
 * armed backward started, and the rest); disarms. */
int dp_reduce_grads(struct dp *d, struct sw_err *err);

/* In place: v[0, n) summed over the ranks (losses, counts). */
int dp_sum(struct dp *d, double *v, int n, struct sw_err *err);

/* ZeRO-1: keep this rank's shard of o (every rank's o holds all); after
 * optim_step updated the shard, give every rank every tensor. */
int dp_shard_optim(struct dp *d, struct optim *o, struct sw_err *err);
int dp_gather_params(struct dp *d, struct sw_err *err);

/*
 * For a checkpoint: on rank 0, *full becomes a whole optimizer (moments
 * gathered from every shard; free with optim_free); elsewhere it is
 * zeroed. Without ZeRO, *full is a shallow copy of o (not to be freed).
 */
int dp_full_optim(struct dp *d, const struct optim *o, struct optim *full, struct sw_err *err);
void dp_full_optim_free(struct dp *d, struct optim *full);

/* SW_ESOFTWARE unless every rank holds the same parameters, bit for bit
 * (a hash compared): the ranks must never drift apart. */
int dp_params_agree(struct dp *d, struct sw_err *err);

/*
 * The GNB estimate (sharpness.h) of a batch of B x T tokens with each
 * rank running its own contiguous rows, at most mb sequences a pass, and
 * the gradients summed before they are squared: the single-process
 * estimate on the same labels (every rank draws the whole batch's label
 * uniforms in order and keeps its own). h is added to on every rank. One
 * process: gnb_estimate itself (labels and probs_buf as there); several:
 * labels and probs_buf must be NULL.
 */
int dp_gnb_estimate(struct dp *d, const int *tokens, int B, int T, int mb, int draws,
		    struct sw_rng *r, float *h, int *labels, real *probs_buf,
		    const struct gnb_progress *progress, struct sw_err *err);

#endif
