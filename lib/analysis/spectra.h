/*
 * spectra.h - the spectra sw-spectrum prints for a checkpoint, over the
 * math of spectrum.h: which matrices (spectra_plan: every selected matrix
 * in model order, a tied head last under its own name; with per-head
 * spectra only the attention projections), and each one's spectrum
 * (spectra_compute: all values or the top K, whole or per attention head,
 * divided by the tensor's equilibrium scale sqrt(lr/wd) on request), and
 * the least-squares fit of sigma_top and ||W||_rms against the scale and
 * d_model across a sweep (spectra_fit_*).
 */
#ifndef SW_SPECTRA_H
#define SW_SPECTRA_H

#include <stddef.h>
#include <stdint.h>

#include "fit.h"
#include "../base/status.h"
#include "../base/tensor.h"

struct ckpt;
struct sw_select;

struct spectra_opts {
	int64_t top;            /* 0: every value */
	int per_head;           /* each head of q, k, v (rows) and o (columns) */
	int normalize;          /* values divided by the equilibrium scale */
	int need_scale;         /* the scale is wanted (normalize, or a fit) */
	int randomize;          /* also the spectrum of the matrix shuffled (whole matrices) */
	uint64_t seed;          /* its shuffle's: with the tensor's index, esdfit_shuffle's seed */
};

/* One matrix to compute: tensor index and the info it is printed with
 * (a tied head's is computed from the embedding's). */
struct spectra_job {
	size_t tensor;
	struct sw_tensor_info info;
	int tied_head;          /* the embedding as the output head */
	int keep;               /* the embedding: keep its spectrum for the tied head */
};

/*
 * The jobs for the matrices sel selects (*jobs malloc'ed; *n may be 0).
 * SW_EDATA when o needs per-tensor lr and wd and a safetensors checkpoint
 * has none (said once for the file, not per matrix).
 */
int spectra_plan(const struct ckpt *ck, const struct sw_select *sel,
		 const struct spectra_opts *o, struct spectra_job **jobs, size_t *n,
		 struct sw_err *err);

struct spectra_result {
	int64_t count;          /* spectra: 1, or the heads with per_head */
	int64_t n;              /* values in each, descending */
	double *s;              /* (count x n), divided by the scale when normalizing */
	double *frob_sq;        /* (count) squared Frobenius norms, likewise divided */
	double scale;           /* the equilibrium scale (NaN when not needed) */
	double *rand_s;         /* with randomize: the shuffled matrix's n values, likewise */
};
void spectra_result_free(struct spectra_result *r);

/* The embedding's spectrum, kept for a tied head: one tensor, two roles. */
struct spectra_cache {
	double *s;
	int64_t n;
	double frob_sq;
};
void spectra_cache_free(struct spectra_cache *c);

/*
 * The spectrum (spectra) of a job into r. SW_EDATA for NaN/Inf (named for
 * the tensor, not per head), heads that do not fill the matrix, or a
 * missing lr/wd when the scale is needed.
 */
int spectra_compute(struct ckpt *ck, const struct spectra_job *job, const struct spectra_opts *o,
		    struct spectra_cache *cache, struct spectra_result *r, struct sw_err *err);

/* What a job holds and costs, for running jobs side by side
 * (matsched.h); a tied head runs after the embedding it copies. */
struct matsched_item;
void spectra_job_cost(const struct spectra_job *job, const struct spectra_opts *o,
		      struct matsched_item *c);
/* The shape of the matrix (or with per_head, of one head's slice) whose
 * spectrum spectra_compute gives for t. */
void spectra_dims(const struct sw_tensor_info *t, int per_head, int64_t *rows, int64_t *cols);

/* ---- --fit: sigma_top and ||W||_rms across a sweep -------------------- */

struct spectra_fit_point {
	char role[SW_ROLE_MAX];
	double sigma_top, rms, scale, d_model;
};

struct spectra_fit_set {
	struct spectra_fit_point *p;
	size_t n, cap;
};

/* Add one matrix: r computed with top 1 (or more) and the scale. */
int spectra_fit_add(struct spectra_fit_set *f, const struct sw_tensor_info *t,
		    const struct spectra_result *r, int64_t d_model, struct sw_err *err);

/*
 * The fits, per role in order of first appearance, sigma_top then rms:
 * ln y = c + a1 ln(scale) + a2 ln(d_model) (powerfit_fit, fit.h). A fit that
 * cannot be made has rc != 0 and err says why.
 */
struct spectra_fit_row {
	char role[SW_ROLE_MAX];
	const char *quantity;   /* "sigma_top" or "rms" */
	int rc;
	struct sw_err err;
	struct powerfit fit;
};
int spectra_fit_rows(const struct spectra_fit_set *f, struct spectra_fit_row **rows, size_t *n,
		     struct sw_err *err);
void spectra_fit_free(struct spectra_fit_set *f);

#endif
