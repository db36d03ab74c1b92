/*
 * optim.h - optimizers and learning-rate schedules for lib/model/model.c.
 *
 * AdamW (PyTorch's update order), with weight decay coupled
 * (W <- W - lr (G_hat + wd W), the spectra paper's AdamW) or independent
 * (W <- W - wd W, whatever the learning rate); Muon and Scion for the
 * hidden matrices (Newton-Schulz, 5 steps, coefficients 3.4445, -4.7750,
 * 2.0315); Lion (sign updates, one moment) and Adam-mini (AdamW with one
 * second moment per block of a tensor, optim_block_numel). Per-tensor learning rates and weight decays come from one
 * function, optim_tensor_hparams, which the checkpoint writer also uses to
 * record the lr/wd in force: Blockwise LR (sharpness paper eq. 5), the
 * per-group ratios input:hidden:output (optimal-norm paper), the
 * scale-vectors paper's IWD rule for norm gains, own lr/wd for learnable
 * multipliers, and the spectra paper's width rules (a base width d0: the
 * hidden matrices' lr times d0/d, their wd times (d/d0)^p, the embedding
 * and head vector-like, without wd). Gradient clipping by the global norm leaves the
 * multipliers out (the multipliers paper).
 */
#ifndef SW_OPTIM_H
#define SW_OPTIM_H

#include <stdint.h>

#include "model.h"
#include "../base/elemmath.h"
#include "../base/status.h"

/* the optimizers (optim.c names each, and gives its element-wise rule) */
enum opt_kind { OPT_ADAMW, OPT_MUON, OPT_SCION, OPT_LION, OPT_ADAM_MINI };
#define OPTIM_KINDS "adamw (default), muon, scion, lion, adam-mini"
enum sched_kind { SCHED_CONSTANT, SCHED_COSINE, SCHED_WSD };
enum norm_wd { NORM_WD_NONE, NORM_WD_ALL, NORM_WD_IWD };
/* the hidden matrices' wd against the width: (d/d0)^0, ^1/2, ^1 */
enum wd_scaling { WD_SCALING_FIXED, WD_SCALING_SQRT, WD_SCALING_LINEAR };

struct optim_config {
	enum opt_kind kind;
	double lr;                      /* peak learning rate lr_max */
	double lr_min;                  /* end of the decay (cosine, wsd) */
	double beta1, beta2, eps;       /* AdamW, Adam-mini, Lion (beta2 NaN: 0.99 Lion, else 0.95) */
	double momentum;                /* Muon: 0.95; Scion: EMA weight of the past */
	double wd;                      /* for matrices */
	enum sw_wd_mode wd_mode;        /* coupled or independent */
	enum norm_wd norm_wd;           /* gains: none, all, or IWD */
	double mult_lr_ratio, mult_wd;  /* learnable multipliers */
	int blockwise;                  /* Blockwise LR (eq. 5) */
	double block_ratio[SW_BLOCK_COUNT];
	double group_ratio[SW_GROUP_COUNT];
	int64_t width_base;             /* d0 of the width rules; 0: off */
	enum wd_scaling wd_scaling;     /* with width_base */
	int64_t width;                  /* the model's d_model (optim_init sets it) */
	double grad_clip;               /* 0: off */
	enum sched_kind sched;
	int64_t warmup, steps;
	double decay_frac;              /* wsd: the last fraction decays */
};

/* One-word names, as in /optim and on sw-train's command line; the
 * parsers return -1 for an unknown name. */
const char *optim_kind_name(enum opt_kind k);
const char *optim_sched_name(enum sched_kind s);
const char *optim_norm_wd_name(enum norm_wd n);
const char *optim_wd_scaling_name(enum wd_scaling w);
int optim_kind_parse(const char *s, enum opt_kind *out);
int optim_sched_parse(const char *s, enum sched_kind *out);
int optim_norm_wd_parse(const char *s, enum norm_wd *out);
int optim_wd_scaling_parse(const char *s, enum wd_scaling *out);

/*
 * The optimizers' policy for one tensor, the same on every device (optim.c
 * and cuda/gpumodel.c apply it): optim_is_hidden_matrix, the matrices Muon
 * and Scion orthogonalize (q, k, v, o and the MLP); optim_scion_lmo, the
 * linear minimization oracle Scion gives it, with its scale: a hidden
 * matrix (RMS->RMS) NS5(M) times sqrt(d_out/d_in); the embedding (1->RMS)
 * each token row to RMS 1 (no scale); any other matrix, the head
 * (RMS->inf), sign(M)/d_in; a vector sign(M).
 */
enum optim_lmo { OPTIM_LMO_ORTHO, OPTIM_LMO_ROWS, OPTIM_LMO_SIGN };
int optim_is_hidden_matrix(const struct sw_tensor_info *t);
enum optim_lmo optim_scion_lmo(const struct sw_tensor_info *t, double *scale);

/*
 * One tensor's update at a step, all of the policy in one place, which
 * both devices' loops (optim_step, gpumodel_optim_step) carry out: the
 * update (Scion for every tensor; Muon for the hidden matrices, an
 * element-wise rule, elemmath.h's, for the rest; that rule alone: AdamW's
 * for AdamW), the tensor's lr, wd and wd mode
 * (optim_tensor_hparams), the factor on its gradient (clip_scale; 1 for
 * multipliers, which clipping leaves out), and the update's scale: Muon's
 * sqrt(max(1, rows/cols)), or Scion's oracle and its scale.
 */
enum optim_update { OPTIM_UPDATE_ELEM, OPTIM_UPDATE_MUON, OPTIM_UPDATE_SCION };
struct optim_plan {
	enum optim_update update;
	enum elem_rule rule;            /* OPTIM_UPDATE_ELEM's */
	double lr, wd, clip;
	enum sw_wd_mode mode;
	enum optim_lmo lmo;             /* Scion only */
	double scale;                   /* Muon's and Scion's; 1 for AdamW */
};
struct optim_plan optim_tensor_plan(const struct optim_config *oc, const struct sw_tensor_info *t,
				    int64_t step, double clip_scale);

/*
 * Adam-mini's blocks (its v1 partition, Zhang et al. 2024, Algorithm 3):
 * the number of elements sharing one second moment in tensor t. Each
 * block is contiguous (a matrix is out x in, row-major): q and k, one per
 * head (head_dim rows); any other matrix (v, o, the MLP's, the embedding,
 * the head), one per output row (a token's row for the embedding and the
 * head); a vector (gains, biases, multipliers), one for the whole tensor.
 * optim_block_count: numel / block_numel, the tensor's v values.
 */
int64_t optim_block_numel(const struct sw_tensor_info *t);
int64_t optim_block_count(const struct sw_tensor_info *t);
/* Whether kind keeps a second moment (AdamW, Adam-mini: in /optim_state/v;
 * Muon and Scion keep AdamW's zeros there; Lion has none) */
int optim_has_v(enum opt_kind kind);

/* The defaults: AdamW, betas 0.9/0.95 (Lion 0.9/0.99), eps 1e-8, wd 0.1 coupled, gains
 * without wd, multipliers at lr x 1 with wd 2e-3, Blockwise ratios emb 10,
 * qk 8, ffn 6, vo 4, norm 1 (out, mult 1), cosine to lr/20, clip 1. */
void optim_defaults(struct optim_config *oc);

struct optim {
	struct optim_config cfg;
	/* moments of tensors [first, first + count): m at each tensor's
	 * params offset (minus base); Muon/Scion/Lion use m. v at voff[i]
	 * (minus vbase): numel values a tensor (AdamW; Muon's and Scion's,
	 * unused), optim_block_count (Adam-mini: about 1/d_model of AdamW's),
	 * none (Lion). */
	float *m, *v;
	size_t *voff;                   /* (ntensors + 1), from 0 over every tensor */
	int ntensors;
	int first, count;               /* the tensors updated: all, or a shard (optim_shard) */
	size_t base;                    /* params offset of m[0]: 0, or the shard's start */
	size_t vbase;                   /* voff of v[0]: 0, or the shard's first tensor's */
	real *work;                     /* Newton-Schulz scratch */
	size_t work_size;
	int64_t t;                      /* updates done (bias correction) */
};

int optim_init(struct optim *o, const struct optim_config *cfg, const struct model *m,
	       struct sw_err *err);
/* The v values of every tensor (of the whole model, sharded or not). */
static inline size_t optim_v_count(const struct optim *o)
{
	return o->voff[o->ntensors];
}
void optim_free(struct optim *o);

/*
 * Keep the moments of tensors [first, first + count) only (ZeRO-1: each
 * process of a data-parallel job updates its own shard of the tensors);
 * optim_step then updates those alone. o must hold every tensor's.
 */
int optim_shard(struct optim *o, const struct model *m, int first, int count,
		struct sw_err *err);

/* The schedule's factor at step (0-based): lr(step) / lr_max in [0, 1]. */
double optim_schedule(const struct optim_config *oc, int64_t step);

/* The base learning rate of the update at step (0-based): lr_max times the
 * schedule. The update that produced a checkpoint of `steps` updates is
 * step steps - 1 (optim_last_update). Per-tensor rates:
 * optim_tensor_hparams. */
double optim_lr_at(const struct optim_config *oc, int64_t step);
static inline int64_t optim_last_update(int64_t steps)
{
	return steps > 0 ? steps - 1 : 0;
}

/* The lr, wd and wd mode tensor t gets at step. */
void optim_tensor_hparams(const struct optim_config *oc, const struct sw_tensor_info *t,
			  int64_t step, double *lr, double *wd, enum sw_wd_mode *mode);

/* The global L2 norm of the gradient over every tensor but the multipliers. */
double optim_grad_norm(const struct model *m);

/* One update at step from m->grads, which stay as they are: the update
 * uses them times clip_scale (1 when not clipping), multipliers excepted. */
void optim_step(struct optim *o, struct model *m, int64_t step, double clip_scale);

/* Newton-Schulz orthogonalization of G (rows x cols) into X, 5 steps:
 * X <- a X + (b A + c A A) X, A = X X^T, after X = G/||G||_F (on the
 * transpose when rows > cols). work holds 3 x min^2 + rows x cols reals. */
void optim_newton_schulz(real *X, const real *G, int rows, int cols, real *work);

#endif
