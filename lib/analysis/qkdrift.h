/*
 * qkdrift.h - the Q/K multiplicative symmetry, per layer and head, across
 * the checkpoints of a run (learnable-multipliers paper section 4.1 and
 * Fig. 4a; docs/numerics.md).
 *
 * Attention logits of head h are q_h.k_h/sqrt(hd): under (Q_h, K_h) ->
 * (s Q_h, K_h/s) they do not change, so the product of the two scales is
 * what the model uses and their ratio is free to drift. For each head:
 *
 *   matrices (no QK-norm): Q_h = rows [h hd, (h+1) hd) of the effective q
 *     projection, diag(mult) W_q diag(gamma) (its multiplier folded in,
 *     and the attn_norm gain gamma: q and k both read the normed input
 *     gamma * x/rms(x), so gamma is a column scale of both; under a scale
 *     design (arch.h) the projection's own gains too: gain_in a column
 *     scale in gamma's place, gain_out a row scale); K_h the same rows of
 *     k for the KV head of h's group, h / (H/KV).
 *   gains (QK-norm with gains): the per-head RMSNorm of q and k removes
 *     the matrices' scale, and the logit scale is set by the q_norm and
 *     k_norm gains g_q, g_k: (g_q, g_k) -> (s g_q, g_k/s) is the symmetry.
 *     A gain of hd entries serves every head; one of H hd (KV hd) entries
 *     gives head h (KV head h/(H/KV)) its slice.
 *   unit (QK-norm without gains): both scales are fixed at 1.
 *
 *   q_rms = ||Q_h||_rms, k_rms = ||K_h||_rms, product = q_rms k_rms,
 *   log2_ratio = log2(q_rms/k_rms).
 *
 * The learnable multipliers themselves (the paper's own quantity), where
 * both q and k have one: q_mult, k_mult = the RMS of the multiplier entries
 * that reach head h (scalar: |m|; row: the head's hd entries, K's from its
 * KV head; col: all d_model entries, shared by every head), their product
 * and log2 ratio. Under QK-norm the norm removes them from the logits.
 *
 * The drift of a head: the least-squares slope of log2_ratio against
 * step/1000 (lib/analysis/fit.h), its standard error, and the relative change of
 * the product from the first to the last step.
 *
 * The numbers are computed in one place, qkdrift_layer, from a layer's
 * tensors: those of a checkpoint (qkdrift_heads) or those of the model
 * sw-train is training, which logs q_rms, k_rms, q_mult and k_mult of
 * every head in its trace (series qk_q_rms, qk_k_rms, qk_q_mult,
 * qk_k_mult), so that a trace row (qkdrift_read_trace) is, to the digit,
 * what the checkpoint of that step gives; qkdrift_head_derive makes the
 * product and ratios from those four for both.
 */
#ifndef SW_QKDRIFT_H
#define SW_QKDRIFT_H

#include <stddef.h>
#include <stdint.h>

#include "../formats/ckpt.h"
#include "../base/select.h"
#include "../base/status.h"
#include "../base/tensor.h"

enum qk_source { QK_SRC_MATRICES, QK_SRC_GAINS, QK_SRC_UNIT };

/* "matrices", "qk_norm_gains", "qk_norm_unit" */
const char *qkdrift_source_name(enum qk_source s);

struct qk_head {
	int layer, head, kv_head;
	enum qk_source source;
	double q_rms, k_rms, product, log2_ratio;
	/* the multipliers reduced to the head; NaN unless q and k have one */
	double q_mult, k_mult, mult_product, mult_log2_ratio;
};

/*
 * The tensors one layer's pairs read, by role (qkdrift_roles): metadata
 * and float32 values; t NULL where the layer has none.
 */
enum { QK_Q, QK_K, QK_QMULT, QK_KMULT, QK_ATTN_NORM, QK_QNORM, QK_KNORM, QK_QMULT_COL, QK_KMULT_COL,
       QK_QGAIN_IN, QK_KGAIN_IN, QK_QGAIN_OUT, QK_KGAIN_OUT, QK_NROLES };
extern const char *const qkdrift_roles[QK_NROLES];
struct qk_tensor {
	const struct sw_tensor_info *t;
	const float *v;
};

/*
 * Where a layer's pair comes from: its QK-norm gains when the model has
 * QK-norm and the layer has a q_norm or k_norm gain (has_gains), the
 * fixed unit scales under QK-norm without them, else the matrices.
 */
enum qk_source qkdrift_source(const struct sw_config *c, int has_gains);

/*
 * The n_heads heads of layer `layer` into out from its tensors (only
 * those the source reads need be there: q, k and attn_norm for the
 * matrices, q_norm and k_norm for the gains; the multipliers in both).
 * SW_EDATA for a missing q or k projection, a gain or multiplier whose
 * size fits no head layout, or NaN/Inf in what a head reads.
 */
int qkdrift_layer(const struct sw_config *c, int layer, const struct qk_tensor in[QK_NROLES],
		  struct qk_head *out, struct sw_err *err);

/* product, log2_ratio, mult_product, mult_log2_ratio of h from its
 * q_rms, k_rms, q_mult, k_mult (the multipliers' NaN unless both are
 * known). */
void qkdrift_head_derive(struct qk_head *h);

/*
 * Every head of the layers sel selects (sel NULL or empty: all; the match
 * is on the layer's q projection), in layer then head order; *out is
 * malloc'd, *n = selected layers x n_heads. SW_EDATA for a missing q or k
 * projection, a gain or multiplier whose size fits no head layout, or
 * NaN/Inf in what a head reads.
 */
int qkdrift_heads(struct ckpt *ck, const struct sw_select *sel,
		  struct qk_head **out, size_t *n, struct sw_err *err);

/*
 * Is c the model of first (every dimension and option that shapes the
 * tensors)? SW_OK, or SW_EDATA naming the first field that differs, with
 * first_name (the first checkpoint's file) in the message.
 */
int qkdrift_same_model(const struct sw_config *first, const char *first_name,
		       const struct sw_config *c, struct sw_err *err);

/* One step of a run: a trace row's heads. */
struct qk_step {
	int64_t step, tokens;
	int has_tokens;                 /* the trace has a tokens series */
	struct qk_head *heads;          /* (nheads) malloc'd */
};

/*
 * Every row of the trace at path as a step (in the trace's order):
 * the heads of the layers sel selects (in layer then head order, *nheads
 * of them, 0 when sel matches no layer), from the series qk_q_rms and
 * qk_k_rms, and qk_q_mult and qk_k_mult where the run has both; tokens
 * from the series tokens where there is one. *cfg is the trace's
 * /config, the source is the trainer's (qkdrift_source with the gains
 * that the scale vectors give: sw-train builds q_norm and k_norm gains
 * with them). As trace_open for the file; SW_EDATA, one line naming what
 * is missing, for a trace without /config or without those series
 * (written before sw-train logged them), series whose columns are not
 * layerL.headH for the config's layers and heads, or a value that is not
 * finite.
 */
int qkdrift_read_trace(const char *path, const struct sw_select *sel, struct sw_config *cfg,
		       struct qk_step **steps, size_t *nsteps, size_t *nheads,
		       struct sw_err *err);
void qkdrift_steps_free(struct qk_step *s, size_t n);

struct qk_drift {
	int layer, head, kv_head;
	enum qk_source source;
	size_t n;                       /* points fitted: checkpoints and trace rows */
	int64_t first_step, last_step;
	double slope, slope_se;         /* of log2_ratio per 1000 steps */
	double product_change;          /* product(last)/product(first) - 1 */
	/* the same for the multipliers' pair; NaN without */
	double mult_slope, mult_slope_se, mult_product_change;
};

/*
 * The drift of head j from heads[c][j], c = 0..nckpt-1, at steps[c]
 * (checkpoints or trace rows, any order; the first and last are the
 * smallest and largest step, the earliest given on ties). SW_EDATA when
 * fewer than two distinct steps or a value is not finite.
 */
int qkdrift_drift(const int64_t *steps, struct qk_head *const *heads,
		  size_t nckpt, size_t j, struct qk_drift *d, struct sw_err *err);

#endif
