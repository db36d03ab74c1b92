/*
 * step.h - the model's step written once: the forward and backward
 * passes as a sequence of operations (embed, norm, products, RoPE,
 * attention, SwiGLU, residuals, the loss, and their backward forms) that
 * each back end implements in a table, struct model_ops: the CPU in
 * model.c, the GPU (and its emulation) in cuda/gpumodel.c. The sequence
 * reads top to bottom as llm.c's gpt2_forward; a back end decides how an
 * operation runs, never in which order the model runs them. The
 * R-operator's passes (Hessian-vector products, modelhvp.h) are written
 * here too, over a second table of the operations' tangent forms.
 *
 * Which operations run is the family's (struct model_arch, model.h):
 * RMSNorm or LayerNorm, RoPE or learned positions, a gated MLP (SwiGLU,
 * GeGLU) or GPT-2's plain one, the biases, Gemma's embedding scale and
 * Gemma2's post-norms and soft-capping.
 *
 * The buffers are the back end's (host or device pointers alike): the
 * weights the pass uses (the effective ones under multipliers), where the
 * gradients go, the activations the forward saves, and the backward's
 * scratch. Sizes as in model.h's letters.
 */
#ifndef SW_STEP_H
#define SW_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* compiled with real = double (the unit tests that include model.c do),
 * the sequence has other names, so that a test that forgets step.c fails
 * to link rather than pass doubles to float code */
#ifdef SW_REAL_DOUBLE
#define model_step_forward model_step_forward_f64
#define model_step_backward model_step_backward_f64
#define model_rop_step_forward model_rop_step_forward_f64
#define model_rop_step_backward model_rop_step_backward_f64
#endif

struct model_ops {
	/* the time since the last lap goes to phase (NULL: untimed) */
	void (*lap)(void *ctx, enum model_phase phase);
	/* W_eff from W and its multipliers (NULL without them) */
	void (*update_effective)(void *ctx);
	/* out (N, C) = embed's rows of tokens */
	void (*embed)(void *ctx, real *out, const int *tokens, const real *embed, int N, int C);
	/* out = gain * inp / rms(inp) per row of n; rstd (rows) saved; gain may be NULL */
	void (*rmsnorm)(void *ctx, real *out, real *rstd, const real *inp, const real *gain,
			int64_t rows, int n, double eps);
	/* LayerNorm (GPT-2): out = gain * (inp - mean) * rstd + bias per row of
	 * n, rstd = 1 / sqrt(var + eps) (the biased variance); mean, rstd
	 * (rows) saved; gain and bias may be NULL (none) */
	void (*layernorm)(void *ctx, real *out, real *mean, real *rstd, const real *inp,
			  const real *gain, const real *bias, int64_t rows, int n, double eps);
	/* x *= s over n (Gemma's sqrt(C) on the embedding, and its backward) */
	void (*scale)(void *ctx, real *x, size_t n, real s);
	/* soft-capping (Gemma2's final logits): forward x = cap tanh(x / cap)
	 * in place, t = tanh(x / cap) saved (n); backward x, the capped
	 * values' gradient, *= 1 - t^2 */
	void (*softcap)(void *ctx, real *x, real *t, size_t n, real cap, int backward);
	/* out (N, dout) = inp (N, din) W^T */
	void (*matmul)(void *ctx, real *out, const real *inp, const real *w, int N, int din, int dout);
	void (*copy)(void *ctx, real *dst, const real *src, size_t n);
	/* a linear's bias b (n) over rows of y (rows, n): y += b; backward:
	 * b, the bias's gradient, += y's column sums (y the output's gradient) */
	void (*bias)(void *ctx, real *y, real *b, int64_t rows, int n, int backward);
	/* RoPE in place on (B, T, nh, hd); backward turns the other way */
	void (*rope)(void *ctx, real *x, int B, int T, int nh, int hd, int backward);
	/* causal GQA attention: out (N, Q), att (B, H, T, T) the probabilities
	 * of the scores q k^T * scale (1/sqrt(hd), or Gemma2's
	 * query_pre_attn_scalar^-1/2); with softcap > 0 (Gemma2's
	 * attn_logit_softcapping) the scores are softcap tanh(s / softcap)
	 * before the mask and att_tanh (B, H, T, T) keeps tanh(s / softcap)
	 * for the backward (NULL without) */
	void (*attention)(void *ctx, real *out, real *att, real *att_tanh, const real *q,
			  const real *k, const real *v, int B, int T, int H, int KV, int hd,
			  real scale, real softcap);
	void (*residual)(void *ctx, real *out, const real *a, const real *b, size_t n);
	/* the gated unit: h = act(gate) * up (SwiGLU with silu, GeGLU with
	 * a GELU) */
	void (*swiglu)(void *ctx, real *h, const real *gate, const real *up, size_t n,
		       enum model_act act);
	/* dgate, dup += the gated unit's backward from dh (unfused: under ffn
	 * DNP, and beside the R-operator) */
	void (*swiglu_backward)(void *ctx, real *dgate, real *dup, const real *dh,
				const real *gate, const real *up, size_t n, enum model_act act);
	/* GPT-2's MLP: h = act(x); backward dx += act'(x) dh */
	void (*act)(void *ctx, real *h, const real *x, size_t n, enum model_act act);
	void (*act_backward)(void *ctx, real *dx, const real *dh, const real *x, size_t n,
			     enum model_act act);
	/* probs = softmax(logits) in place; losses (N) = -log p[target] (targets may be NULL) */
	void (*loss)(void *ctx, real *losses, real *probs, const int *targets, int N, int V);

	void (*zero)(void *ctx, real *x, size_t n);
	/* dlogits = (probs - onehot) * scale, in place */
	void (*loss_backward)(void *ctx, real *probs, const int *targets, int N, int V, real scale);
	/* dinp += dout W (dinp may be NULL); dW += dout^T inp */
	void (*matmul_backward)(void *ctx, real *dinp, real *dw, const real *dout, const real *inp,
				const real *w, int N, int din, int dout_);
	/* dinp += ...; dgain += ... (dgain NULL without a gain) */
	void (*rmsnorm_backward)(void *ctx, real *dinp, real *dgain, const real *dout,
				 const real *inp, const real *gain, const real *rstd, int64_t rows,
				 int n);
	/* dinp += ...; dgain, dbias += ... (NULL: not wanted, or none) */
	void (*layernorm_backward)(void *ctx, real *dinp, real *dgain, real *dbias,
				   const real *dout, const real *inp, const real *gain,
				   const real *mean, const real *rstd, int64_t rows, int n);
	/* dq, dk, dv += the attention's backward from dout (N, Q); scale,
	 * softcap and att_tanh as the forward's */
	void (*attention_backward)(void *ctx, real *dq, real *dk, real *dv, const real *dout,
				   const real *q, const real *k, const real *v, const real *att,
				   const real *att_tanh, int B, int T, int H, int KV, int hd,
				   real scale, real softcap);
	/* the MLP's input side from dh (N, F): through SwiGLU to the gate and
	 * up products, dn (N, C) += their input gradient, dgate, dup += their
	 * weights' (the CPU fuses the two products) */
	void (*gate_up_backward)(void *ctx, real *dn, real *dgate, real *dup, const real *dh,
				 const real *gate, const real *up, const real *inp,
				 const real *wgate, const real *wup, int N, int C, int F,
				 enum model_act act);
	/* the q, k, v products' backward: dn (N, C) += their input gradient,
	 * dwq, dwk, dwv += their weights' */
	void (*qkv_backward)(void *ctx, real *dn, real *dwq, real *dwk, real *dwv, const real *dq,
			     const real *dk, const real *dv, const real *inp, const real *wq,
			     const real *wk, const real *wv, int N, int C, int Q, int K);
	/* dembed's rows of tokens += dout */
	void (*embed_backward)(void *ctx, real *dembed, const real *dout, const int *tokens, int N,
			       int C);
	/* layer l's gradients are final (L: the head's, -1: the embedding's);
	 * NULL: no one is told */
	void (*grads_ready)(void *ctx, int layer);
	/* from dL/dW_eff to dL/dW and the multipliers' (NULL without them) */
	void (*mult_backward)(void *ctx);
	/* a mixture of experts' layer l (moe.h): y (N, C) from x (N, C), the
	 * layer's activations kept; backward dx (N, C) += its input gradient
	 * from dy, its weights' gradients added (the objective's scale
	 * loss_scale). NULL: a back end without them (sw-train refuses). */
	void (*moe)(void *ctx, int l, real *y, const real *x, int N);
	void (*moe_backward)(void *ctx, int l, real *dx, const real *dy, const real *x, int N,
			     double loss_scale);
	/* layer l's weights are about to be read: a back end that keeps
	 * only the layer in use in memory loads it here, in place of the last
	 * (NULL: every layer's always there). The R-operator's passes call it
	 * too. */
	void (*layer_weights)(void *ctx, int l);
};

/* the backward's scratch: dres, dn (N, C); dF1, dF2, dF3 (N, F); dq, dq2
 * (N, Q); dk, dk2, dv (N, K) */
struct model_step_scratch {
	real *dres, *dn, *dF1, *dF2, *dF3, *dq, *dq2, *dk, *dk2, *dv;
};

/* One back end's model: its operations, their context, and its buffers. */
struct model_step {
	const struct model_ops *ops;
	void *ctx;
	const struct sw_config *c;
	const struct model_arch *a;     /* which operations the family's step runs */
	const struct model_ptrs *p;     /* the weights the pass uses */
	const struct model_ptrs *g;     /* where their gradients go */
	struct layer_acts *acts;        /* (L) */
	real *x_final, *nf, *nf_rstd;   /* (N, C) (N, C) (N) */
	real *nf_mean;                  /* (N) with LayerNorm, else NULL */
	real *logits, *losses;          /* (N, V) (N) */
	real *logits_tanh;              /* (N, V) with a final soft-cap, else NULL */
	struct model_step_scratch s;
	/* the scale design's DNP (arch.h): v normalized per head (beside
	 * QK-norm), gate and up over d_ff */
	int dnp_attn, dnp_ffn;
	/* the forward keeps each layer's input and its matrix products'
	 * outputs (q, k, v, x_mid, gate, up: model_alloc_acts), the layers
	 * sharing one set of the rest, and the backward runs layer l's
	 * norms, RoPE, attention and SwiGLU again before its own: about 1 %
	 * more arithmetic at Llama's sizes, the activations that grow with
	 * d_ff and the attention's T x T of one layer instead of all. Not for
	 * the R-operator's passes, which read every layer's. */
	int recompute;
};

/* The forward pass over tokens (B, T): per-token losses with targets
 * (targets NULL: the probabilities only). */
void model_step_forward(const struct model_step *st, const int *tokens, const int *targets,
			int B, int T);

/* The backward pass after model_step_forward with targets on the same
 * (B, T): adds dL/dtheta into the gradients, L the mean loss times
 * loss_scale. */
void model_step_backward(const struct model_step *st, const int *tokens, const int *targets,
			 int B, int T, double loss_scale);

/*
 * The R-operator's step (modelhvp.h): the tangents R{f} = d/de f(theta +
 * e v) of the forward pass, then of the backward pass, whose R{dL/dtheta}
 * is H v (or G v, Gauss-Newton). The tangent forms of the operations, a
 * back end's second table; the primal operations they run beside (the
 * primal backward, RoPE, residuals, copies) are its struct model_ops. A
 * NULL tangent weight is zero; a NULL primal derivative (dout, dh) means
 * Gauss-Newton, where every term pairing a primal derivative with a
 * tangent drops.
 */
struct model_rop_ops {
	/* layer l's tangent weights rw and where their H v goes, rg (NULL
	 * where v does not reach: the sequence skips what that makes zero),
	 * and eg the primal dL/dW_eff of the linears whose multipliers need
	 * it (NULL elsewhere: the primal backward forms no other weight
	 * gradient) */
	void (*layer_views)(void *ctx, int l, struct layer_ptrs *rw, struct layer_ptrs *rg,
			    struct layer_ptrs *eg);
	/* R{W_eff} of the linears v reaches (NULL without multipliers) */
	void (*effective)(void *ctx);
	/* R{y} of rmsnorm, R{rstd} saved */
	void (*rmsnorm)(void *ctx, real *ry, real *rrstd, const real *inp, const real *rinp,
			const real *gain, const real *rgain, const real *rstd, int64_t rows, int n);
	/* R{y} of layernorm (rbias NULL: zero), R{mean}, R{rstd} saved */
	void (*layernorm)(void *ctx, real *ry, real *rmean, real *rrstd, const real *inp,
			  const real *rinp, const real *gain, const real *rgain, const real *rbias,
			  const real *mean, const real *rstd, int64_t rows, int n);
	/* R{x_capped} = (1 - t^2) R{x} in place (the forward's t) */
	void (*softcap)(void *ctx, real *rx, const real *t, size_t n, real cap);
	/* R{dx} = (1 - t^2) R{dx_capped} - 2 t (1 - t^2) / cap * dx_capped * R{x}
	 * in place over R{dx_capped} (rx the pre-cap tangent; dcapped NULL:
	 * Gauss-Newton, the second term drops) */
	void (*softcap_backward)(void *ctx, real *rdx, const real *dcapped, const real *t,
				 const real *rx, size_t n, real cap);
	/* R{y} = R{x} W^T + x R{W}^T */
	void (*matmul)(void *ctx, real *ry, const real *inp, const real *rinp, const real *w,
		       const real *rw, int N, int din, int dout);
	/* R{out}, R{att} (B, H, T, T) kept for the backward; scale, softcap
	 * and att_tanh as model_ops' attention */
	void (*attention)(void *ctx, real *rout, real *ratt, const real *att, const real *att_tanh,
			  const real *q, const real *k, const real *v, const real *rq,
			  const real *rk, const real *rv, int B, int T, int H, int KV, int hd,
			  real scale, real softcap);
	void (*swiglu)(void *ctx, real *rh, const real *gate, const real *up, const real *rgate,
		       const real *rup, size_t n, enum model_act act);
	/* GPT-2's MLP: R{h} = act'(x) R{x} */
	void (*act)(void *ctx, real *rh, const real *x, const real *rx, size_t n,
		    enum model_act act);
	/* R{dlogits} = scale p (R{z} - sum p R{z}) in place over R{z} */
	void (*loss_backward)(void *ctx, real *rz, const real *probs, int N, int V, real scale);
	/* R{dx} += R{dy} W + dy R{W}, R{dW} += R{dy}^T x + dy^T R{x}; rdinp,
	 * rdw NULL: not wanted */
	void (*matmul_backward)(void *ctx, real *rdinp, real *rdw, const real *dout,
				const real *rdout, const real *inp, const real *rinp, const real *w,
				const real *rw, int N, int din, int dout_);
	void (*rmsnorm_backward)(void *ctx, real *rdinp, real *rdgain, const real *dout,
				 const real *rdout, const real *inp, const real *rinp,
				 const real *gain, const real *rgain, const real *rstd,
				 const real *rrstd, int64_t rows, int n);
	/* R{dinp} += ..., R{dgain}, R{dbias} += ... (NULL: not wanted) */
	void (*layernorm_backward)(void *ctx, real *rdinp, real *rdgain, real *rdbias,
				   const real *dout, const real *rdout, const real *inp,
				   const real *rinp, const real *gain, const real *rgain,
				   const real *mean, const real *rstd, const real *rmean,
				   const real *rrstd, int64_t rows, int n);
	/* R{dq}, R{dk}, R{dv} += ...; with dout, the primal dq, dk, dv += too
	 * (dq, dk, dv NULL: not wanted, the tape has them) */
	void (*attention_backward)(void *ctx, real *dq, real *dk, real *dv, real *rdq, real *rdk,
				   real *rdv, const real *dout, const real *rdout, const real *q,
				   const real *k, const real *v, const real *rq, const real *rk,
				   const real *rv, const real *att, const real *ratt,
				   const real *att_tanh, int B, int T, int H, int KV, int hd,
				   real scale, real softcap);
	void (*swiglu_backward)(void *ctx, real *rdgate, real *rdup, const real *dh,
				const real *rdh, const real *gate, const real *up,
				const real *rgate, const real *rup, size_t n, enum model_act act);
	/* R{dx} += act'(x) R{dh} + act''(x) R{x} dh (dh NULL: Gauss-Newton,
	 * the second term drops) */
	void (*act_backward)(void *ctx, real *rdx, const real *dh, const real *rdh, const real *x,
			     const real *rx, size_t n, enum model_act act);
	/* R{} of mult_backward: R{dW}, R{dmult} of the tensors v reaches
	 * (NULL without multipliers) */
	void (*mult_backward)(void *ctx);
};

/*
 * The tangent model: its operations and their context; the embedding's,
 * final norm's and head's tangent weights, H v's gradients and primal
 * dL/dW_eff as layer_views gives a layer's (their .layer unused); the
 * tangents of the activations and the backward's scratch, as struct
 * model_step's. first: the lowest layer v reaches (-1: the embedding, L:
 * only the final norm and head).
 */
struct model_rop_step {
	const struct model_rop_ops *ops;
	void *ctx;
	struct model_ptrs p, g, eff_grads;
	struct layer_acts *acts;
	real *x_final, *nf, *nf_rstd, *logits;
	real *nf_mean;                  /* (N) with LayerNorm */
	real *logits_pre;               /* (N, V) R{logits} before a final soft-cap */
	struct model_step_scratch s;
	int first;
	struct model_rop_tape *tape;    /* NULL: none */
};

/*
 * The primal backward's input gradients of the linear layers and of
 * attention, kept between products on one batch: they do not depend on
 * v, so every product after the first copies them back instead of
 * forming them again (one of the seven matrix products a linear layer
 * costs a product, three of attention's twelve). Per layer l, at buf +
 * l N MODEL_ROP_TAPE_WIDTH, in the backward's order: down's (N x F), the
 * ffn's input (gate's and up's, N x C), o's (N x Q), attention's q, k, v
 * (N x Q, N x K, N x K), attention's input (q's, k's and v's, N x C);
 * the head's (N x C) after the last layer. kept[l] (kept[L]: the head's):
 * layer l's are in buf. The sequence reads and fills it; its owner
 * forgets it (kept zeroed) when the batch changes. Not with multipliers
 * (their dL/dW_eff comes from the same products).
 */
#define MODEL_ROP_TAPE_WIDTH(c) ((size_t)(c)->d_ff + 2 * (size_t)(c)->n_heads * (c)->head_dim + \
				 2 * (size_t)(c)->n_kv_heads * (c)->head_dim + 2 * (size_t)(c)->d_model)
struct model_rop_tape {
	real *buf;      /* N (L MODEL_ROP_TAPE_WIDTH + C) reals */
	unsigned char *kept;    /* (L + 1) */
};

/* After model_step_forward(st) on tokens (B, T): the tangents of its
 * activations. */
void model_rop_step_forward(const struct model_step *st, const struct model_rop_step *rt,
			    const int *tokens, int B, int T);

/*
 * After model_rop_step_forward: rt's g += H v, L the mean loss times
 * loss_scale (gauss_newton: G v, no primal pass, no targets). The primal
 * backward runs beside it in st's scratch; dlogits (N, V) receives the
 * primal dL/dlogits so that st's probabilities stay (NULL: over them).
 * With rt->tape, the primal input gradients of the layers it keeps are
 * copied from it, and the others' put there.
 */
void model_rop_step_backward(const struct model_step *st, const struct model_rop_step *rt,
			     const int *tokens, const int *targets, int B, int T,
			     double loss_scale, int gauss_newton, real *dlogits);

#endif
