/*
 * scalevec.h - statistics of a checkpoint's scale vectors: the gains of
 * its RMSNorms and its learnable multipliers (the scale-vectors paper's
 * gamma; the multipliers paper's row and column scales).
 *
 * For a vector g of n values: mean, sd (population, over n), min, max;
 * anisotropy max|g_i| / min|g_i| (inf when some g_i is 0) and the
 * coefficient of variation sd / |mean|; for a Pre-Norm gain (Input-Norm
 * type), its coupling with the matrices that read its output: the
 * Pearson correlation over the input channels i of |g_i| and the column
 * norm ||W[:, i]||_2 of those matrices stacked by rows (q, k, v after
 * attn_norm; gate, up after ffn_norm; o and down after their in-norms;
 * the head, or the embedding when tied, after the final norm). NaN where
 * it is undefined (no reader in the file, or either side constant).
 */
#ifndef SW_SCALEVEC_H
#define SW_SCALEVEC_H

#include <stddef.h>
#include <stdint.h>

#include "../base/select.h"
#include "../base/status.h"
#include "../base/tensor.h"
#include "../formats/ckpt.h"

struct scalevec_stats {
	int64_t n;
	double mean, sd, min, max, anisotropy, cv, coupling;
};

/* The statistics of g[0..n), coupling NaN; n > 0. */
void scalevec_stats(const float *g, int64_t n, struct scalevec_stats *s);

/* Pearson's r of |g_i| and colnorm_i over i < n; NaN if either is constant. */
double scalevec_coupling(const float *g, const double *colnorm, int64_t n);

/*
 * Where a scale vector sits, from its role: its branch (attn, ffn, head,
 * emb) and its placement: pre, the gain of the Pre-Norm that opens the
 * branch (attn_norm, ffn_norm, final_norm); qk, a QK-norm gain on the
 * queries or keys per head; dnp, a scale design's norm of a projection's
 * output (v_norm per head, gate_norm, up_norm); in, the gain of a norm inside the branch
 * before its last projection (o_in_norm, down_in_norm); post, the gain
 * of a norm of a branch's output (attn_post_norm, ffn_post_norm: OLMo2,
 * Gemma2); mult, a learnable
 * multiplier of a matrix's rows, columns or the whole matrix; before and
 * after, a scale design's gain of one reader (arch.h) on its input side
 * (X_gain_in) or its output side (X_gain_out). A reparameterized gain's
 * direction (X_dir) and magnitude (X_mag) have its branch and placement.
 */
const char *scalevec_branch(const char *role);
const char *scalevec_placement(const struct sw_tensor_info *t);

/* What a scale vector's values are: "gain" (a gain trained as it is),
 * "computed" (a reparameterized gain, computed = 1: from its direction
 * and magnitude), "direction", "magnitude" (X_dir, X_mag), "multiplier". */
const char *scalevec_param(const struct sw_tensor_info *t, int computed);

/* 1 if t is a scale vector: a vector of a norm gain or a multiplier, or
 * a reparameterized gain's magnitude (its one value). */
int scalevec_is_scale_vector(const struct sw_tensor_info *t);

/* The roles of the matrices that read the output of gain `role`, NULL
 * terminated, or NULL when it has none (not a Pre-Norm gain); and the role
 * standing for reader `role` when a model has none of it: the embedding
 * for a tied head, NULL otherwise. */
const char *const *scalevec_readers(const char *role);
const char *scalevec_reader_tied(const char *role);

/*
 * The matrices a gain's coupling is taken with, and their side: a
 * Pre-Norm gain's readers (scalevec_readers), their columns; a scale
 * design's X_gain_in, X's columns; X_gain_out, X's rows (the gain scales
 * them). Up to 3 roles into readers (NULL after the last; base holds a
 * gain's X), *by_rows 1 for rows. The count, 0 when the gain has none.
 */
int scalevec_coupling_readers(const char *role, const char *readers[4], char *base, size_t len,
			      int *by_rows);

/* colsq[i] += ||W[:, i]||^2 for the matrix w (rows x n, row-major). */
void scalevec_add_column_squares(const float *w, int64_t rows, int64_t n, double *colsq);
/* sq[r] += ||W[r, :]||^2 for the matrix w (rows x n, row-major). */
void scalevec_add_row_squares(const float *w, int64_t rows, int64_t n, double *sq);

/* The coupling of g with the norms sqrt(colsq) (columns or rows), NaN if
 * no reader was added (found 0); colsq is overwritten. */
double scalevec_coupling_of_squares(const float *g, double *colsq, int64_t n, int found);

/*
 * Tensor i of the file as ckpt_load gives it, except a norm gain its
 * family stores as the weight w with the model applying w + offset
 * (Gemma's 1 + w: family_gain_offset): then the gain, w + offset in
 * float32 as the model computes it, in a buffer of the view's own. Every
 * statistic of a gain, and every gain folded into a matrix, is of that.
 */
int scalevec_load(struct ckpt *ck, size_t i, struct ckpt_view *v, struct sw_err *err);

/* One row per selected scale vector of the file, in model order. */
struct scalevec_row {
	const struct sw_tensor_info *info;
	struct scalevec_stats stats;
};
int scalevec_file(struct ckpt *ck, const struct sw_select *sel, struct scalevec_row **rows,
		  size_t *n, struct sw_err *err);

#endif
