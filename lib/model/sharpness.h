/*
 * sharpness.h - blockwise diagonal Gauss-Newton (GNB) sharpness, the
 * sharpness-disparity paper's estimator (eq. 3, Sophia's; docs/numerics.md
 * gives the formulas from the authors' code).
 *
 * On a batch of N tokens (loss terms), draw every label y_b independently
 * from the model's own softmax at that position, take the mean loss
 * L = (1/N) sum_b l(f(theta, x_b), y_b) and its gradient g; the estimate
 * is h = N g * g (elementwise), unbiased for the diagonal of the Fisher
 * (= Gauss-Newton) matrix: E h = (1/N) sum_b E_y[grad l_b(y)^2], because
 * the score has zero mean under the model's own distribution. Averaged
 * over `draws` draws. The average sharpness of a block type (eq. 4) is
 * S = Tr(H[block]) / #[block], the mean of h over every parameter of that
 * type, pooled across layers; the paper's figures also use log10 h.
 */
#ifndef SW_SHARPNESS_H
#define SW_SHARPNESS_H

#include <stdint.h>

#include "model.h"
#include "../base/rng.h"
#include "../base/status.h"

/* A label per position, drawn from the softmax probs (N x V) by inverse CDF. */
void gnb_sample_labels(const real *probs, int N, int V, struct sw_rng *r, int *labels);

/* h += scale * g * g over the whole gradient block; h = scale * g * g
 * where h is g itself (a float model's gradient turned into the estimate,
 * which spares a copy of the model's size) */
void gnb_square_into(float *h, const real *g, size_t n, double scale);

/* Told after each forward and backward pass of an estimate: done of
 * total (micro-batches times draws); fn NULL: none. A 1B model's pass
 * takes half a minute on two cores, its estimate minutes. */
struct gnb_progress {
	void (*fn)(void *ctx, int done, int total);
	void *ctx;
};

/*
 * The estimate on a batch of B x T tokens (N = B T), run in micro-batches
 * of mb sequences (B % mb == 0) whose gradients add up to that of the
 * batch's mean loss: for each of `draws` label draws on these same inputs,
 * h (nparams) += N g*g / draws. labels, if not NULL, receives the sampled
 * labels (draws, B, T). probs_buf (mb*T x V reals, or NULL): with one
 * micro-batch, the forward pass runs once and its softmax is restored from
 * there for every draw. h may be m->grads itself (float only) for one
 * draw: the gradient becomes the estimate. progress may be NULL.
 */
int gnb_estimate(struct model *m, const int *tokens, int B, int T, int mb, int draws,
		 struct sw_rng *r, float *h, int *labels, real *probs_buf,
		 const struct gnb_progress *progress, struct sw_err *err);

/* Statistics of h over a set of parameters (eq. 4 and the log scale). */
struct gnb_stats {
	int64_t n;              /* parameters */
	double mean;            /* S: the mean of h (zeros included) */
	double mean_log10;      /* over the nonzero entries */
	double q10, median, q90;        /* quantiles of log10 h over nonzero entries */
	int64_t zeros;          /* exact zeros (tokens absent from the batch) */
};

/* Stats of the values in nseg runs (seg[j], len[j] of them), read in
 * place: one pass, and a second that counts the few near the quantiles,
 * each on every thread by fixed chunks (the same bits on any number of
 * threads); no copy of the values is made (a block of a 1B model is
 * gigabytes). gnb_stats_of: of one run. */
int gnb_stats(const float *const *seg, const int64_t *len, int nseg, struct gnb_stats *s,
	      struct sw_err *err);
int gnb_stats_of(const float *vals, int64_t n, struct gnb_stats *s, struct sw_err *err);

/* The sharpness paper's Blockwise LR ratios (eq. 5), for --ratios: 10, 8,
 * 6, 4, 1 for emb, qk, ffn, vo, norm; 0 for the rest (no ratio). */
double gnb_paper_ratio(enum sw_block b);

#endif
