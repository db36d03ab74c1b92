/*
 * cpukern.h - the model's CPU kernels: each layer kind's forward and
 * backward over arrays of `real` (OpenMP loops, OpenBLAS products), with
 * no model around them. model.c's table of the step's operations runs
 * them; modelhvp.c's tangent passes run some as they are, on tangents or
 * beside the primal backward. The lowest floor of lib/model/: it knows
 * no model, no layout and no step. Shapes are model.h's letters.
 *
 * `real` is float; compiled with -DSW_REAL_DOUBLE (the gradient check
 * test does) the same code runs in double.
 */
#ifndef SW_CPUKERN_H
#define SW_CPUKERN_H

#include <stddef.h>
#include <stdint.h>

/* GEMM: the product of the precision (the caller includes <cblas.h>) */
#ifdef SW_REAL_DOUBLE
typedef double real;
#define GEMM cblas_dgemm
/* in double the kernels have other names, so that a test that forgets
 * cpukern.c fails to link rather than pass doubles to float code */
#define model_matmul_forward model_matmul_forward_f64
#define model_rmsnorm_forward model_rmsnorm_forward_f64
#else
typedef float real;
#define GEMM cblas_sgemm
#endif

/*
 * Every multiplier mode as W_eff[i][j] = row[i * row_step] W[i][j] col[j],
 * a side NULL where it is 1: scalar (row the scalar, row_step 0), row, col,
 * rowcol. The gradients go to the same places: drow[i * row_step] and
 * dcol[j]. One view for the CPU's forward, backward and R-operator.
 */
struct mult_view {
	const real *row, *col;
	int64_t row_step;
};

/* rows [*r0, *r1) of n for this OpenMP thread (inside a parallel region) */
void model_rows_of(int n, int *r0, int *r1);
/* x = 0 over the threads (a memset on one would leave the others idle) */
void model_zero(real *x, size_t n);

/* out[n] = embed[token[n]]; backward: dembed's rows += dout's (serial) */
void model_encoder_forward(real *out, const int *tokens, const real *embed, int N, int C);
void model_encoder_backward(real *dembed, const real *dout, const int *tokens, int N, int C);
/* out = gain * x / sqrt(mean(x^2) + eps), per row of C; gain may be NULL */
void model_rmsnorm_forward(real *out, real *rstd, const real *inp, const real *gain,
			   int N, int C, double eps);
void model_rmsnorm_backward(real *dinp, real *dgain, const real *dout, const real *inp,
			    const real *gain, const real *rstd, int N, int C);
/* LayerNorm: out = gain * (x - mean) * rstd + bias per row of C, rstd =
 * (var + eps)^(-1/2) (the biased variance); mean, rstd (N) saved; gain,
 * bias may be NULL. Backward adds into dinp, dgain, dbias (dgain, dbias
 * NULL: not formed). */
void model_layernorm_forward(real *out, real *mean, real *rstd, const real *inp, const real *gain,
			     const real *bias, int N, int C, double eps);
void model_layernorm_backward(real *dinp, real *dgain, real *dbias, const real *dout,
			      const real *inp, const real *gain, const real *mean,
			      const real *rstd, int N, int C);
/* out (N, dout) = inp (N, din) W^T, W (dout, din) */
void model_matmul_forward(real *out, const real *inp, const real *w, int N, int din, int dout);
/* dinp += dout W; dW += dout^T inp (dinp NULL: not formed) */
void model_matmul_backward(real *dinp, real *dw, const real *dout, const real *inp,
			   const real *w, int N, int din, int dout_);
/* the backward of products fused into one: the nparts W adjacent rows
 * of one block, dout's columns their outputs side by side */
void model_matmul_backward_parts(real *dinp, real *dw, const real *dout, const real *inp,
				 const real *w, int N, int din, const int *part, int nparts);
/* y (rows, n) += b per row; backward: b += y's column sums, rows in order */
void model_bias(real *y, real *b, int64_t rows, int n, int backward);
/* RoPE in place on (B, T, nh, hd), rotate-half; backward turns back */
void model_rope_forward(real *x, const real *cos_, const real *sin_, int B, int T, int nh, int hd);
void model_rope_backward(real *dx, const real *cos_, const real *sin_, int B, int T, int nh, int hd);
/* causal GQA attention: out (N, Q), att (B, H, T, T) the probabilities
 * of the scores q k^T * scale; softcap > 0: the scores softcap tanh(s /
 * softcap) before the mask, att_tanh (B, H, T, T) their tanh (unused
 * without); backward adds into dq, dk, dv, scratch (B, KV, T, T) */
void model_attention_forward(real *out, real *att, real *att_tanh, const real *q, const real *k,
			     const real *v, int B, int T, int H, int KV, int hd, real scale,
			     real softcap);
void model_attention_backward(real *dq, real *dk, real *dv, real *scratch,
			      const real *dout, const real *q, const real *k, const real *v,
			      const real *att, const real *att_tanh, int B, int T, int H, int KV,
			      int hd, real scale, real softcap);
/* dY's rows r0..r1 += M^T X over M's rows from r0 on (M (T, T) causal) */
void model_causal_add_tn(real *dy, int ldy, const real *m, const real *x, int ldx, int T, int r0,
			 int r1, int hd);
/* the gated unit h = act(gate) * up, act elemmath.h's ELEM_ACT_ (model.h's
 * enum model_act: SwiGLU with SiLU, GeGLU with a GELU); backward adds
 * into dgate, dup; fused: writes dgu (N, 2F), the gate's and up's
 * gradients side by side */
void model_swiglu_forward(real *h, const real *gate, const real *up, size_t n, int act);
void model_swiglu_backward(real *dgate, real *dup, const real *dh, const real *gate,
			   const real *up, size_t n, int act);
void model_swiglu_backward_fused(real *dgu, const real *dh, const real *gate, const real *up,
				 int N, int F, int act);
/* GPT-2's MLP: h = act(x); backward dx += dh act'(x) */
void model_act_forward(real *h, const real *x, size_t n, int act);
void model_act_backward(real *dx, const real *dh, const real *x, size_t n, int act);
/* x *= s */
void model_scale(real *x, size_t n, real s);
/* soft-capping: x = cap tanh(x / cap) in place, t = tanh(x / cap) (n);
 * backward dx *= 1 - t^2 in place */
void model_softcap_forward(real *x, real *t, size_t n, real cap);
void model_softcap_backward(real *dx, const real *t, size_t n);
/* dq, dk, dv side by side in dqkv (N, Q + 2K) */
void model_qkv_join(real *dqkv, const real *dq, const real *dk, const real *dv, int N, int Q, int K);
void model_residual_forward(real *out, const real *a, const real *b, size_t n);
/* probs = softmax(logits) in place per row of V; losses = -log p[target]
 * (targets NULL: none); backward: (probs - onehot) * scale in place */
void model_softmax_crossentropy_forward(real *losses, real *probs, const int *targets,
					int N, int V);
void model_softmax_crossentropy_backward(real *probs, const int *targets, int N, int V, real scale);
/* W_eff = diag(row) W diag(col); backward: dW, drow, dcol from dL/dW_eff */
void model_mult_apply(real *weff, const real *w, struct mult_view v, int64_t dout, int64_t din);
void model_mult_backward(real *dw, real *drow, real *dcol, const real *dweff, const real *w,
			 struct mult_view v, int64_t dout, int64_t din);

/*
 * Attention's causal products in blocks (the CPU's kernels, and the CUDA
 * path alike, so that both add in the same order): the T x T scores split
 * into nb row blocks (and as many column blocks), so that the products
 * skip the blocks above the diagonal, all zero: (nb + 1) / (2 nb) of the
 * square's work. Blocks of at least 8 rows, at most 4 of them (the
 * products stay large). Each element adds the products of the whole
 * square less zero terms at the end (row blocks) or the start (column
 * blocks); OpenBLAS still rounds some otherwise than over the square.
 */
static inline int model_causal_nblocks(int T)
{
	return T >= 32 ? 4 : T >= 16 ? T / 8 : 1;
}

/* rows [*r0, *r1) of block i */
static inline void model_causal_block(int T, int nb, int i, int *r0, int *r1)
{
	*r0 = (int)((long)T * i / nb);
	*r1 = (int)((long)T * (i + 1) / nb);
}

#endif
