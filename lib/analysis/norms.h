/*
 * norms.h - the operator norms of one weight matrix (docs/numerics.md;
 * the optimal-norm paper's layer norms).
 *
 * For the operator W in R^{d_out x d_in}, with ||v||_rms = ||v||_2/sqrt(dim):
 *   RMS->inf  = sqrt(d_in) * max_i ||W_{i,:}||_2       (output layer)
 *   RMS->RMS  = sqrt(d_in/d_out) * sigma_max(W)        (hidden layers)
 *   1->RMS    = max_j ||W_{:,j}||_2 / sqrt(d_out)      (input layer)
 *   spectral sigma_max, Frobenius, RMS = ||W||_F/sqrt(d_out d_in), max|w|.
 * A tensor stored [out, in] is its own operator; the token embedding,
 * stored [vocab, d_model], acts as its transpose (one-hot token -> vector),
 * so its d_out = d_model, d_in = vocab and its 1->RMS norm is the largest
 * token vector's RMS.
 *
 * The output head is computed in one place, norms_output_head, for
 * sw-norms, sw-transfer and the trainer's trace: W_out (lm_head, or the
 * embedding when tied, stored [vocab, d_model] either way and acting as
 * d_model -> vocab) and W_out diag(gamma), gamma the final RMSNorm's gain:
 * the operator from the normalized residual stream to the logits.
 *
 * Over a checkpoint, norms_plan lists the rows sw-norms prints (every
 * selected matrix in model order; the head's folded row after it; a tied
 * head's two rows last) and norms_compute computes one.
 */
#ifndef SW_NORMS_H
#define SW_NORMS_H

#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"
#include "../base/tensor.h"

/* sigma_max's relative accuracy (Lanczos residual bound). */
#define NORMS_SIGMA_REL_TOL 1e-6

/* What one pass and one sigma_max give about a stored matrix. */
struct mat_summary {
	int64_t rows, cols;     /* as stored */
	double max_row_sq;      /* max_i ||W_{i,:}||^2 */
	double max_col_sq;      /* max_j ||W_{:,j}||^2 */
	double frob_sq;
	double max_abs;
	double sigma_max;
	int lanczos_steps;      /* 0 when LAPACK was used */
	int have_top_vec;       /* the top right singular vector was written */
};

struct op_norms {
	int64_t d_out, d_in;
	double rms_to_inf, rms_to_rms, one_to_rms;
	double spectral, frobenius, rms, max_abs;
};

/* What to compute: everything, or all but sigma_max (spectral and
 * RMS->RMS are then NaN: one pass over the matrix, no Lanczos). */
enum norms_what { NORMS_ALL, NORMS_NO_SPECTRAL };

/*
 * Summarize W (rows x cols, stored) with its columns scaled by col_scale
 * when not NULL. SW_EDATA naming how many values are NaN/Inf if any.
 */
int norms_summarize(const float *W, int64_t rows, int64_t cols,
		    const float *col_scale, enum norms_what what, struct mat_summary *s,
		    struct sw_err *err);
/* The same for a view (gram.h): BF16/F16 read in place, columns scaled
 * by its col_scale; sigma_max's Lanczos from start and its top right
 * singular vector into top_vec, as spectrum_sigma_max (either NULL). */
struct spec_view;
int norms_summarize_view(const struct spec_view *v, enum norms_what what, const double *start,
			 double *top_vec, struct mat_summary *s, struct sw_err *err);

/* The norms of the operator W (transposed = 0) or W^T (transposed = 1). */
void norms_of_operator(const struct mat_summary *s, int transposed,
		       struct op_norms *out);

/* The output head's norms, raw and gamma-folded. */
struct head_norms {
	struct op_norms raw;
	struct op_norms folded;         /* all NaN when there is no gamma */
};

/*
 * head: W_out as stored, vocab x d_model; gamma: the final norm's gain
 * (d_model values) or NULL.
 */
int norms_output_head(const float *head, int64_t vocab, int64_t d_model, const float *gamma,
		      enum norms_what what, struct head_norms *out, struct sw_err *err);

/* ---- over a checkpoint -------------------------------------------------- */

struct ckpt;
struct sw_select;

/* The head of ck (lm_head, or the tied embedding) and its final norm gain:
 * loaded, sizes checked, norms_output_head. SW_EDATA if it has no head. */
int norms_output_head_ckpt(struct ckpt *ck, enum norms_what what, struct head_norms *out,
			   struct sw_err *err);

enum norms_row_kind {
	NORMS_ROW_TENSOR,       /* a stored matrix as its operator */
	NORMS_ROW_TIED_HEAD,    /* the embedding as the map d_model -> vocab */
	NORMS_ROW_FOLDED_HEAD,  /* W_out diag(gamma) */
};

/* One row of sw-norms: which tensor, how, and the name, block, role and
 * layer it is printed with. */
struct norms_row {
	enum norms_row_kind kind;
	size_t tensor;          /* index in ck: the matrix, or the head's storage */
	struct sw_tensor_info info;
	int folded_follows;     /* the first row of the head's tensor, with a
				 * folded row after it: computes both */
};

/* The rows for the tensors sel selects, in print order (*rows malloc'ed;
 * *n may be 0). lm_head_folded is selected by --role lm_head_folded or
 * lm_head; a head of one row (1 x d_model: a vector by its shape) has
 * neither its lm_head row nor its lm_head_folded row, tied or not. */
int norms_plan(const struct ckpt *ck, const struct sw_select *sel, struct norms_row **rows,
	       size_t *n, struct sw_err *err);

/* Compute a planned row. cache keeps the embedding's summary between its
 * own row and a tied head's (one tensor, two operators, read once); the
 * folded head's, computed with the head's row where the gain is not
 * uniform (spectrum_sigma_max_pair: the two Lanczos runs share their
 * passes over W); else the head's top right singular vector for the
 * folded head's Lanczos to start from. Zeroed to begin, norms_cache_free
 * after the last row. */
struct norms_cache {
	int have_embed;
	struct mat_summary embed;
	int have_folded;
	struct mat_summary folded;
	int have_head_vec;
	double *head_vec;
};
void norms_cache_free(struct norms_cache *cache);
/* What a row holds and costs, for computing rows side by side
 * (matsched.h); a tied head's row runs after the embedding's. */
struct matsched_item;
void norms_row_cost(const struct norms_row *row, struct matsched_item *c);
int norms_compute(struct ckpt *ck, const struct norms_row *row, struct norms_cache *cache,
		  struct op_norms *out, struct sw_err *err);

#endif
