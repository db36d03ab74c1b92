/*
 * moe.h - a mixture of experts' feed-forward layer on the CPU (sw_config's
 * n_experts; arch_layer_is_moe's layers), forward and backward, for
 * model.c's table of the step's operations:
 *
 *   p = softmax(x Wr^T) over E experts; the top K of p (ties to the lower
 *   index), weights w_k = p_k, or p_k / sum of the K (renormalized,
 *   Mixtral; Qwen2-MoE's norm_topk_prob false: not);
 *   y = sum_k w_k down_e(silu(gate_e x) * up_e x)
 *       [+ sigmoid(x ws) down_s(silu(gate_s x) * up_s x), the shared expert]
 *
 * computed grouped: the tokens routed to each expert gathered, one product
 * per expert and matrix, the weighted outputs scattered back. The
 * load-balancing loss (Switch Transformer's, as transformers'
 * load_balancing_loss_func computes it over every MoE layer's router at
 * once) is E sum_e F_e P_e, F_e the fraction of (token, choice) pairs
 * routed to e over the layers' tokens (summing to K), P_e the mean router
 * probability: moe_aux_loss. The backward holds the top-k choice fixed
 * (as autograd does) and takes the loss's gradient through p.
 */
#ifndef SW_MOE_H
#define SW_MOE_H

#include <stddef.h>

#include "cpukern.h"

struct sw_config;
struct layer_ptrs;

/* compiled with real = double (the unit tests that include model.c do),
 * other names, as step.h's */
#ifdef SW_REAL_DOUBLE
#define moe_acts_alloc moe_acts_alloc_f64
#define moe_acts_free moe_acts_free_f64
#define moe_acts_bytes moe_acts_bytes_f64
#define moe_forward moe_forward_f64
#define moe_aux_loss moe_aux_loss_f64
#define moe_backward moe_backward_f64
#endif

/* A layer's activations for N tokens (moe_acts_alloc), the rows its
 * forward gathered, and what the trace reports of it. */
struct moe_acts {
	int N, E, K, F, S, FS, C;       /* tokens, experts, active, width, shared, its width */
	real *probs;                    /* (N, E) the router's softmax */
	int *sel;                       /* (N, K) the chosen experts, by probability */
	real *wts;                      /* (N, K) their weights */
	int *start;                     /* (E + 1) expert e's gathered rows start[e]..start[e+1] */
	int *slot;                      /* (N K) the slot t K + k each gathered row is */
	int *fill;                      /* (E) the gather's next row per expert */
	real *xg, *gate, *up, *h, *out; /* (N K, C), (N K, F) x 3, (N K, C) gathered rows */
	real *sgate, *sup, *sh, *sout;  /* (N, FS) x 3, (N, C) the shared expert */
	real *sg;                       /* (N) sigmoid of its gate */
	double *load, *pmean;           /* (E) F_e of this layer (sums K), P_e */
	double entropy;                 /* the router's mean entropy over tokens, nats */
	/* the backward's scratch */
	real *dout, *dh, *dgate, *dup, *dxg, *dp, *dsout, *dsh, *dsgate, *dsup;
	real *dw;                       /* (N K) */
	real *dsl;                      /* (N) the shared gate's logit gradient */
};

/* A layer's activations for N tokens of c (NULL: out of memory);
 * moe_acts_free frees them (NULL: nothing). */
struct moe_acts *moe_acts_alloc(const struct sw_config *c, int N);
void moe_acts_free(struct moe_acts *a);
/* The bytes moe_acts_alloc takes per MoE layer. */
double moe_acts_bytes(const struct sw_config *c, int N);

/* y (N, C) = the layer's output from x (N, C) under weights w (layer_ptrs'
 * router, experts and shared expert), a's activations and statistics
 * kept; act the experts' activation (model_act: SiLU). */
void moe_forward(const struct sw_config *c, const struct layer_ptrs *w, struct moe_acts *a,
		 real *y, const real *x, int N, int act, int renorm);

/* The load-balancing loss over the nl layers' activations: E sum_e F_e P_e
 * with F_e, P_e the layers' means; fbar (E) gets the F_e. */
double moe_aux_loss(struct moe_acts *const *layers, int nl, double *fbar);

/* dx (N, C) += the layer's input gradient from dy (N, C), and the
 * weights' gradients into g's; aux_scale times fbar[e] is the gradient
 * of the objective's load-balancing term by each token's p_e (its
 * coefficient, E, 1 / (layers N), the loss scale). */
void moe_backward(const struct sw_config *c, const struct layer_ptrs *w, const struct layer_ptrs *g,
		  struct moe_acts *a, real *dx, const real *dy, const real *x, int N, int act,
		  int renorm, const double *fbar, double aux_scale);

#endif
