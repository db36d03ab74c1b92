/*
 * compare.h - how each weight matrix changed between two checkpoints, for
 * sw-compare: the matrices of both (matched by name, model order of the
 * second: compare_plan), and per matrix (compare_compute) the relative
 * change ||B - A||_F / ||A||_F, sigma_max and the stable rank of each (the
 * numbers sw-spectrum --summary prints: spectrum_full and
 * spectrum_summarize), the overlap of the top-k right and left singular
 * subspaces by their principal angles (Bjorck and Golub 1973), and the
 * heavy-tail alpha of each (esdfit_matrix, sw-spectrum --esd-fit's), with
 * the summaries per block type and per layer (compare_summarize).
 * Definitions: docs/numerics.md.
 */
#ifndef SW_COMPARE_H
#define SW_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"
#include "../base/tensor.h"

struct ckpt;
struct sw_select;
struct matsched_item;

/* The default k of the singular subspaces compared (--top-k). */
#define COMPARE_TOP_K 8

/* One matrix of both: its index in each, B's info (it is printed with). */
struct compare_pair {
	size_t ia, ib;
	struct sw_tensor_info info;
};

/* What compare_plan matched: the pairs, the selected matrices of one
 * checkpoint only, and those of both whose shapes differ (each counted,
 * the first one's name kept for a message; the shapes of the first that
 * differs, A's then B's). */
struct compare_plan {
	struct compare_pair *pairs;
	size_t n;
	size_t only_a, only_b, shape_differs;
	char first_only_a[SW_NAME_MAX], first_only_b[SW_NAME_MAX], first_differs[SW_NAME_MAX];
	int64_t differs_shape[4];
};

/*
 * The matrices sel selects in both a and b with the same shape (a tied
 * head is the embedding, compared once under that name), in b's model
 * order. SW_ESOFTWARE for memory. Free with compare_plan_free.
 */
int compare_plan_make(const struct ckpt *a, const struct ckpt *b, const struct sw_select *sel,
		      struct compare_plan *p, struct sw_err *err);
void compare_plan_free(struct compare_plan *p);

/* The numbers of one matrix on its own. */
struct compare_side {
	double sigma_max, stable_rank;
	double alpha;           /* NaN when the power law cannot be fitted */
};

/* One pair's numbers. A number that is not defined (a zero A, a rank
 * below k) is NaN. */
struct compare_result {
	int64_t rows, cols, k;  /* k: the subspaces' dimension, min(top_k, rows, cols) */
	double rel_change;      /* ||B - A||_F / ||A||_F */
	struct compare_side a, b;
	double sigma_max_change;        /* sigma_max(B) / sigma_max(A) - 1 */
	double stable_rank_change;      /* srank(B) / srank(A) - 1 */
	double alpha_change;    /* alpha(B) - alpha(A) */
	/* principal angles theta_i between the spans of the top k singular
	 * vectors: overlap = mean cos^2 theta_i = ||X_A^T X_B||_F^2 / k,
	 * min_cos = cos of the largest angle */
	double right_overlap, right_min_cos, left_overlap, left_min_cos;
};

/*
 * The numbers of pair p (tensors read from a and b, one pair's two
 * matrices in memory at a time) with subspaces of top_k vectors.
 * SW_EDATA for NaN/Inf (named, and for A's "in" A's path), SW_EIO when a
 * file shrank, SW_ESOFTWARE for memory or LAPACK.
 */
int compare_compute(struct ckpt *a, struct ckpt *b, const struct compare_pair *p, int64_t top_k,
		    struct compare_result *r, struct sw_err *err);

/* The same for two float32 matrices in memory (rows x cols, row-major);
 * a fault of A's is said "in NAME_A" (NULL: "in the first"), B's
 * without a prefix (the caller names B). */
int compare_matrices(const float *A, const float *B, int64_t rows, int64_t cols, int64_t top_k,
		     const char *name_a, struct compare_result *r, struct sw_err *err);

/* What a pair holds and costs, for running pairs side by side (matsched.h). */
void compare_pair_cost(const struct compare_pair *p, struct matsched_item *c);

/*
 * The summary rows: one per block type present (has_block; all its
 * layers pooled), in block order, then one per layer (has_layer; all its
 * block types), ascending. Means, maxima and minima are over the pairs
 * where the number is defined; of none, NaN.
 */
struct compare_group {
	int has_block, has_layer;
	enum sw_block block;
	int layer;
	size_t matrices;
	double rel_change_mean, rel_change_max;
	double sigma_max_change_mean, stable_rank_change_mean, alpha_change_mean;
	double right_overlap_mean, right_overlap_min, left_overlap_mean, left_overlap_min;
};

/* Over the n pairs whose ok[i] is set. *groups malloc'ed. */
int compare_summarize(const struct compare_pair *pairs, const struct compare_result *res,
		      const int *ok, size_t n, struct compare_group **groups, size_t *ngroups,
		      struct sw_err *err);

#endif
