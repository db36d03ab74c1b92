/*
 * model.h - the Llama model on the CPU: parameters, forward, backward.
 *
 * Exactly what Hugging Face's LlamaForCausalLM computes, so a checkpoint
 * converts to safetensors and loads there unchanged: token embedding;
 * per layer x += o(attn(rope(q(n1(x))), rope(k(n1(x))), v(n1(x)))),
 * x += down(silu(gate(n2(x))) * up(n2(x))); logits = head(nf(x)).
 * RMSNorm y = g * x / sqrt(mean(x^2) + eps); RoPE in the rotate-half
 * convention (dimension i pairs with i + hd/2, theta_i = rope_theta^(-2i/hd),
 * scaled as the config's rope_scaling says: arch_rope_inv_freq's one table);
 * attention scale 1/sqrt(hd), causal; GQA by sharing each KV head across
 * its group of H/KV query heads. Options: QK-norm (per-head RMSNorm of q
 * and k before RoPE), learnable multipliers (scalar, row or column, on
 * every linear layer but the embedding), norms without gains
 * (scale_vectors = 0), norm-everywhere (also RMSNorm before o and down).
 *
 * Letters, used in every shape comment:
 *   B batch (sequences), T sequence length, C d_model, H query heads,
 *   KV key/value heads, hd head dim, Q = H*hd, K = KV*hd, F d_ff, V vocab,
 *   L layers, N = B*T tokens.
 *
 * As in llm.c, parameters, gradients and optimizer state live in flat
 * blocks with one table (struct model_tensor) of where each tensor is;
 * activations in another block. Backward adds into gradients (+=);
 * model_zero_grad clears them.
 *
 * `real` is float; compiled with -DSW_REAL_DOUBLE (the gradient check test
 * does) the same code runs in double (cpukern.h). The model is three
 * floors: the CPU's kernels (cpukern.h), the parameter layout (layout.h:
 * where each tensor is), and model.c above step.c, the CPU as the step's
 * back end. Hessian-vector products of the model (the R-operator):
 * modelhvp.h.
 */
#ifndef SW_MODEL_H
#define SW_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "../base/arch.h"
#include "../base/status.h"
#include "../base/tensor.h"
#include "cpukern.h"
#include "moe.h"

/*
 * The family's step (step.c runs its operations by these): the Llama
 * family's is all zeros but the activation and attn_scale. GPT-2:
 * LayerNorm (weight and bias) for the block and final norms, learned
 * position embeddings and no RoPE, the plain MLP down(act(up(x))),
 * biases on q, k, v, o, up and down, tanh GELU. Gemma: Gemma's gains are
 * kept as the (1 + w) they apply (the readers and sw-convert add and
 * take the 1), the embedding times sqrt(C) rounded to float, GeGLU.
 * Gemma2 adds a norm after each sublayer before its residual (attn_post_norm,
 * ffn_post_norm), soft-capped attention scores and final logits, and its
 * attention scale.
 */
enum model_act { MODEL_ACT_SILU, MODEL_ACT_GELU_TANH, MODEL_ACT_GELU };
struct model_arch {
	int layernorm;                  /* LayerNorm with a bias (GPT-2); else RMSNorm */
	int pos_embed;                  /* learned positions (pos_embed (T, C)), no RoPE */
	int gated;                      /* gate and up (SwiGLU, GeGLU); else up alone */
	enum model_act act;             /* the MLP's activation */
	int qkv_bias;                   /* q, k, v biases (Qwen2, GPT-2) */
	int linear_bias;                /* o, up (and gate), down biases too (GPT-2) */
	double embed_scale;             /* 0: none; Gemma: (float)sqrt(C) */
	int post_norms;                 /* Gemma2's attn_post_norm, ffn_post_norm */
	double attn_scale;              /* the scores' scale: 1/sqrt(hd) unless the family's */
	double attn_softcap, final_softcap;     /* 0: none (Gemma2's) */
};

/* arch_multipliers_parse's; ROWCOL: diag(r) W diag(c), two tensors */
enum mult_mode { MULT_NONE, MULT_SCALAR, MULT_ROW, MULT_COL, MULT_ROWCOL };

/* One parameter tensor: metadata as the checkpoint stores it, and where
 * its values are in the flat block. */
struct model_tensor {
	struct sw_tensor_info info;
	size_t offset;                  /* into params, grads, moments */
	size_t numel;
	int linear;                     /* index into the model's linears, or -1 */
	int derived;                    /* a reparameterized gain: computed, not trained */
	int bias;                       /* a linear's bias (Qwen2's q, k, v): starts at zero */
};

/* A gain under a reparameterization (c.scale_reparam, arch.h): the gain
 * tensor gamma, which model_update_effective computes from its direction
 * alpha and magnitude beta, and whose gradient the backward pass hands
 * on to them (the gain's own gradient stays 0). */
struct model_reparam {
	int gain, dir, mag;             /* indices into tensors */
	enum arch_reparam mode;         /* OR or ER */
};

/* A linear layer y = W_eff x: W (dout, din), its multiplier (scalar, row
 * or column; with rowcol the row one, and col_tensor the column one; -1
 * without), the effective weight the forward pass uses. A scale design's
 * gains (arch.h) are a linear's multipliers too: X_gain_out its row side,
 * X_gain_in its column side, mode row, col or rowcol as it has them. */
struct model_linear {
	int tensor, mult_tensor, col_tensor;    /* indices into tensors */
	enum mult_mode mode;            /* the multipliers' or the gains' (MULT_NONE: neither) */
	int64_t dout, din;
};

/* Every multiplier mode as one view (cpukern.h's struct mult_view). */
static inline struct mult_view model_mult_view(enum mult_mode mode, const real *mult,
					       const real *col)
{
	struct mult_view v = {NULL, NULL, 1};

	if (mode == MULT_SCALAR || mode == MULT_ROW || mode == MULT_ROWCOL)
		v.row = mult;
	v.row_step = mode != MULT_SCALAR;
	v.col = mode == MULT_COL ? mult : mode == MULT_ROWCOL ? col : NULL;
	return v;
}

/* Pointers into a flat block (params or grads) for one layer. */
struct layer_ptrs {
	real *attn_norm;                /* (C) or NULL without scale vectors */
	real *wq, *wk, *wv, *wo;        /* (Q, C) (K, C) (K, C) (C, Q) */
	real *attn_norm_bias;           /* (C) with LayerNorm */
	real *q_bias, *k_bias, *v_bias; /* (Q) (K) (K) with Qwen2's or GPT-2's biases, else NULL */
	real *o_bias;                   /* (C) with GPT-2's */
	real *q_norm, *k_norm;          /* (hd) with QK-norm */
	real *v_norm;                   /* (hd) with attn DNP (scale design) */
	real *o_in_norm;                /* (Q) with norm-everywhere */
	real *attn_post_norm;           /* (C) with Gemma2's post-norms */
	real *ffn_norm;                 /* (C) */
	real *ffn_norm_bias;            /* (C) with LayerNorm */
	real *wgate, *wup, *wdown;      /* (F, C) (F, C) (C, F); wgate NULL without a gate */
	real *up_bias, *down_bias;      /* (F) (C) with GPT-2's (no gate) */
	real *ffn_post_norm;            /* (C) with Gemma2's post-norms */
	real *gate_norm, *up_norm;      /* (F) with ffn DNP */
	real *down_in_norm;             /* (F) with norm-everywhere */
	/* a mixture of experts' layer (arch_layer_is_moe; else NULL): the
	 * router (E, C), expert 0's gate, and after it each expert's gate,
	 * up (Fe, C) and down (C, Fe) in turn (expert e's gate at experts + e
	 * 3 Fe C); the shared expert's gate, up (Fs, C), down (C, Fs) and
	 * its gate's (1, C) */
	real *router, *experts;
	real *shared_gate, *shared_up, *shared_down, *shared_router;
};

struct model_ptrs {
	real *embed;                    /* (V, C) */
	real *pos_embed;                /* (seq_len, C) with learned positions */
	real *final_norm;               /* (C) */
	real *final_norm_bias;          /* (C) with LayerNorm */
	real *lm_head;                  /* (V, C); the embedding when tied */
	struct layer_ptrs *layer;       /* (L) */
};

/*
 * Where the time of forward and backward passes goes (bench/train's
 * breakdown, sw-train --timing): wall seconds summed per phase while `on`
 * is set; off, no clock is read. The optimizer's phase is the caller's to
 * fill (train.c times its step); what no phase claims is "other".
 */
enum model_phase {
	MODEL_PHASE_GEMM,               /* the linear layers' products */
	MODEL_PHASE_ATTENTION,          /* scores, softmax, P V and their backward; RoPE */
	MODEL_PHASE_ELEMWISE,           /* norms, SwiGLU, residuals, the loss, the embedding */
	MODEL_PHASE_OPTIMIZER,
	MODEL_PHASE_COUNT
};

struct model_timing {
	int on;
	double mark;                    /* the clock at the end of the last lap */
	double s[MODEL_PHASE_COUNT];    /* seconds per phase */
};

/* Start a lap now; model_timing_lap adds the time since to a phase and
 * starts the next. No-ops while t->on is 0. */
void model_timing_mark(struct model_timing *t);
void model_timing_lap(struct model_timing *t, enum model_phase phase);

/* Activations saved by the forward pass for the backward pass, per layer. */
struct layer_acts {
	real *x_in;                     /* (N, C) residual stream in */
	real *n1, *n1_rstd;             /* (N, C), (N) */
	real *n1_mean;                  /* (N) with LayerNorm */
	real *q_lin, *k_lin;            /* (N, Q), (N, K) before QK-norm */
	real *q_rstd, *k_rstd;          /* (N, H), (N, KV) QK-norm */
	real *q, *k, *v;                /* (N, Q), (N, K), (N, K) as attention sees them */
	real *v_lin, *v_rstd;           /* (N, K), (N, KV) before attn DNP's v_norm; NULL without */
	real *att;                      /* (B, H, T, T) softmax probabilities */
	real *att_tanh;                 /* (B, H, T, T) with soft-capped scores */
	real *att_out;                  /* (N, Q) before the o_in norm */
	real *o_in, *o_in_rstd;         /* (N, Q), (N) with norm-everywhere */
	real *attn_y;                   /* (N, C) attention sublayer output (o's) */
	real *attn_post, *attn_post_rstd;       /* (N, C), (N) its post-norm, with post-norms */
	real *x_mid;                    /* (N, C) residual after attention */
	real *n2, *n2_rstd;             /* (N, C), (N) */
	real *n2_mean;                  /* (N) with LayerNorm */
	real *gate, *up;                /* (N, F) as the gated unit sees them; up alone, the
					   activation's input, in GPT-2's MLP */
	real *gate_lin, *up_lin;        /* (N, F) before ffn DNP's norms; NULL without */
	real *gate_rstd, *up_rstd;      /* (N) */
	real *h;                        /* (N, F) act(gate) * up, or act(up) */
	real *d_in, *d_in_rstd;         /* (N, F), (N) with norm-everywhere */
	real *mlp_y;                    /* (N, C) MLP sublayer output (down's) */
	real *mlp_post, *mlp_post_rstd; /* (N, C), (N) its post-norm, with post-norms */
	struct moe_acts *moe;           /* a mixture of experts' layer's (moe.h), else NULL */
};

struct model {
	struct sw_config c;
	struct model_arch arch;         /* the family's step (model_arch_of) */
	enum mult_mode mult;            /* the learnable multipliers' (every linear but the embedding) */
	struct arch_scale_design design;  /* the scale design's gains (c.scale_design) */
	int eff;                        /* some linear has multipliers or gains: w_eff, dw_eff */
	int nreparams;
	struct model_reparam *reparams; /* (nreparams) the gains c.scale_reparam reparameterizes */
	int keep_gain_grads;            /* model_backward leaves dL/dgamma in those gains' own
					   gradients, not handed on (the Hessian needs it) */
	/* tensors */
	int ntensors, tensors_cap;
	struct model_tensor *tensors;   /* NULL while model_layout counts them */
	int nlinears, linears_cap;
	struct model_linear *linears;
	size_t nparams;
	real *params, *grads;           /* (nparams) */
	struct model_ptrs p, g;         /* views into params and grads */
	real *w_eff;                    /* effective linear weights with multipliers */
	real *dw_eff;                   /* their gradients */
	size_t *eff_offset;             /* (nlinears) into w_eff */
	size_t eff_size;
	/* activations for a batch of B x T */
	int B, T;
	/* set before model_alloc_acts: the backward recomputes each layer's
	 * activations but its matrix products' (struct model_step's
	 * recompute): every layer's input, x_mid and products' outputs are
	 * kept, one layer's rest */
	int recompute;
	int acts_recompute;             /* what the activations were allocated for */
	real *acts_block;
	struct layer_acts *acts;        /* (L) */
	real *x_final;                  /* (N, C) */
	real *nf, *nf_rstd;             /* (N, C), (N) */
	real *nf_mean;                  /* (N) with LayerNorm */
	real *logits;                   /* (N, V), softmax probabilities after forward */
	real *logits_tanh;              /* (N, V) with a final soft-cap */
	real *losses;                   /* (N) per-token loss */
	real *rope_cos, *rope_sin;      /* (T, hd/2) */
	real *scratch;                  /* backward scratch */
	size_t scratch_size;
	double loss;                    /* mean loss of the last forward */
	/* with a mixture of experts: the last forward's load-balancing loss
	 * (moe.h, unweighted; the objective adds c.moe_aux_coef times it) and
	 * its F_e (n_experts) */
	double aux_loss;
	double *moe_fbar;
	struct moe_acts **moe_list;     /* (n_layers) the MoE layers' activations, in order */
	int moe_count;
	/* Told by model_backward as gradients become final, from the output
	 * end: layer L (the final norm and an untied head), each layer l from
	 * L-1 down, then -1 (the embedding), so that their exchange between
	 * processes overlaps the rest of the pass; with multipliers all at
	 * the end. NULL: not told. */
	void (*grads_ready)(void *ctx, int layer);
	void *grads_ready_ctx;
	/* Told before the passes read layer l's weights, so that a caller
	 * may keep only the layer in use in memory (paramstream.h). NULL:
	 * every layer's weights stay in params. */
	void (*layer_weights)(void *ctx, int layer);
	void *layer_weights_ctx;
	struct model_timing timing;     /* off unless the caller sets timing.on */
};

/* The multipliers of linear layer l as a view over a flat block (params,
 * or a tangent's), and where their gradients go in another (grads): drow
 * NULL for col, dcol NULL unless col or rowcol. */
static inline struct mult_view model_linear_mult_view(const struct model *m,
						      const struct model_linear *l,
						      const real *block)
{
	return model_mult_view(l->mode, block + m->tensors[l->mult_tensor].offset,
			       l->col_tensor >= 0 ? block + m->tensors[l->col_tensor].offset : NULL);
}
static inline void model_linear_mult_grads(const struct model *m, const struct model_linear *l,
					   real *block, real **drow, real **dcol)
{
	real *mult = block + m->tensors[l->mult_tensor].offset;

	*drow = l->mode == MULT_COL ? NULL : mult;
	*dcol = l->mode == MULT_COL ? mult :
		l->mode == MULT_ROWCOL ? block + m->tensors[l->col_tensor].offset : NULL;
}

/* The family's step for config c (its family's flags, hidden_act, the
 * soft-caps; c checked by arch_model_check). */
struct model_arch model_arch_of(const struct sw_config *c);

/* Build a model for config c (vocab, sizes, options) with multipliers
 * mode from c->multipliers; parameters zero until model_init. */
int model_build(struct model *m, const struct sw_config *c, struct sw_err *err);
void model_free(struct model *m);

/* Initialize: matrices N(0, 0.02^2) (o and down scaled by 1/sqrt(2L), as
 * GPT-2/Llama reference code does), gains and multipliers 1. */
void model_init(struct model *m, uint64_t seed);

/* Bytes model_alloc_acts needs for B x T (to check memory first), with
 * recompute as struct model's. */
double model_acts_bytes(const struct sw_config *c, int B, int T, int recompute);

/* Make room for activations of B sequences of T tokens (T <= seq_len). */
int model_alloc_acts(struct model *m, int B, int T, struct sw_err *err);

/*
 * Forward pass on tokens (B, T). With targets (B, T) computes the loss
 * (mean over the B*T tokens, in m->loss) and leaves softmax probabilities
 * in m->logits; targets may be NULL (logits only). Token ids are checked
 * against V by the caller (data.c).
 */
void model_forward(struct model *m, const int *tokens, const int *targets, int B, int T);

/* The mean of n per-token losses, summed in double in order: the batch's
 * loss on every device, so that a GPU run's equals the CPU's. */
double model_mean_loss(const real *losses, size_t n);

/* Recompute the reparameterized gains from their directions and
 * magnitudes, then the effective weights (multipliers and gains applied)
 * from the parameters; model_forward does it first. Call after an update
 * when the gains or effective weights are read before the next forward
 * (trace statistics, a checkpoint). */
void model_update_effective(struct model *m);
/* The reparameterized gains alone (before a checkpoint is written). */
void model_update_gains(struct model *m);

/* Zero every gradient. */
void model_zero_grad(struct model *m);

/*
 * Backward pass after model_forward with targets: adds dL/dtheta into
 * m->grads, where L is the mean loss times loss_scale (1/accumulation
 * steps for gradient accumulation). Calls m->grads_ready as it goes.
 */
void model_backward(struct model *m, const int *tokens, const int *targets,
		    double loss_scale);

#endif
