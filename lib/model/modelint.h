/*
 * modelint.h - inside the model: what model.c shares with modelhvp.c (the
 * R-operator), whose tangent passes run some of model.c's layers as they
 * are, on tangents or alongside as the primal backward. Not for other
 * modules: they use model.h and modelhvp.h. Each function is model.c's,
 * documented there; the shapes are model.h's letters.
 */
#ifndef SW_MODELINT_H
#define SW_MODELINT_H

#include <cblas.h>
#include <stddef.h>

#include "model.h"
#include "step.h"

#ifdef SW_REAL_DOUBLE
#define GEMM cblas_dgemm
#else
#define GEMM cblas_sgemm
#endif

/* rows [*r0, *r1) of n for this OpenMP thread (inside a parallel region) */
void model_rows_of(int n, int *r0, int *r1);

void model_encoder_forward(real *out, const int *tokens, const real *embed, int N, int C);
void model_encoder_backward(real *dembed, const real *dout, const int *tokens, int N, int C);
void model_rmsnorm_backward(real *dinp, real *dgain, const real *dout, const real *inp,
			    const real *gain, const real *rstd, int N, int C);
void model_matmul_backward(real *dinp, real *dw, const real *dout, const real *inp,
			   const real *w, int N, int din, int dout_);
void model_rope_forward(real *x, const real *cos_, const real *sin_, int B, int T, int nh, int hd);
void model_rope_backward(real *dx, const real *cos_, const real *sin_, int B, int T, int nh, int hd);
void model_causal_add_tn(real *dy, int ldy, const real *m, const real *x, int ldx, int T, int r0,
			 int r1, int hd);
void model_swiglu_backward(real *dgate, real *dup, const real *dh, const real *gate,
			   const real *up, size_t n);
void model_residual_forward(real *out, const real *a, const real *b, size_t n);
void model_softmax_crossentropy_backward(real *probs, const int *targets, int N, int V, real scale);

/* the CPU model as the step's back end (step.h) */
struct model_step model_cpu_step(struct model *m);
/* the attention backward's (B, KV, T, T) scratch in m's */
real *model_att_scratch(const struct model *m);

#endif
