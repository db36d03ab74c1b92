/*
 * hessian.h - the loss Hessian of a checkpoint on a batch of data, per
 * block of parameters, as sw-hessian reports it: the top K eigenvalues by
 * Lanczos (lanczos.h), the trace by Hutchinson's estimator with its
 * standard error, the spectral density by stochastic Lanczos quadrature,
 * the edge-of-stability ratio; of H, of the Gauss-Newton matrix G, or of
 * Adam's preconditioned P^-1/2 H P^-1/2.
 *
 * The loss is the mean cross entropy over one batch of B x T tokens drawn
 * from the data with the seed (blocksharp_setup: the model, the data, the
 * micro-batches), with the true next tokens as labels: the Hessian of the
 * training loss on that batch, a fixed matrix. Products H v are exact
 * (modelhvp.h's R-operator, in float32, no step), restricted to the block: v
 * is zero outside it and only its rows of H v are kept, so a block's
 * operator is H[B,B], its diagonal block, as in Zhang et al. ("Why
 * transformers need Adam: a Hessian perspective").
 *
 * Blocks: per block type pooled over layers (the sharpness paper's
 * Emb, QK, VO, FFN, Norm, out, mult), per block type and layer, or per
 * tensor, of the tensors the selection keeps; and the whole selection
 * ("all") when that makes more than one block.
 *
 * Trace: tr(H[B,B]) ~ mean over probes z of z^T H z, z Rademacher on the
 * block (unbiased; variance 2 sum_{i != j} H_ij^2 per probe), standard
 * error sd/sqrt(probes). Density: SLQ with `density` Rademacher vectors of
 * slq_steps steps each; the first of them are also trace probes (n alpha_1
 * = z^T H z).
 *
 * Preconditioned: P = sqrt(v_hat) + eps from the checkpoint's Adam second
 * moments (/optim_state/v, v_hat = v / (1 - beta2^t)); the operator is
 * P^-1/2 H P^-1/2, similar to P^-1 H (same eigenvalues). Edge of
 * stability (Cohen et al.): gradient descent is stable while lambda_max <
 * 2/eta, so the ratio printed is lambda_max eta / 2; Adam while
 * lambda_max(P^-1 H) < (2 + 2 beta1) / ((1 - beta1) eta), so the ratio is
 * lambda_max eta (1 - beta1) / (2 + 2 beta1). eta is the block's tensors'
 * lr at this step (the checkpoint's per-tensor lr); unknown (NaN) when
 * they differ or the checkpoint has none.
 *
 * The smallest eigenvalue comes from the same Krylov space as the top K
 * (lanczos_extremes), with its own bound; Lanczos stops on the top K's.
 * Eigenvectors (o->eigvecs): each block's top K Ritz vectors, unit norm
 * over the block, the sign making the largest-magnitude entry positive,
 * written per tensor in the model's layout (sw-hessian(1) gives the file).
 *
 * Deterministic for a seed and a thread count: the batch, the Lanczos
 * start and probes of block i come from the seed (block i's own stream).
 */
#ifndef SW_HESSIAN_H
#define SW_HESSIAN_H

#include <stdint.h>

#include "blocksharp.h"
#include "../base/select.h"
#include "../base/status.h"
#include "../base/tensor.h"

/* the blocks: by type (and the whole selection), by type and layer, by
 * tensor, or the whole selection alone (one block, 'all') */
enum hessian_by { HESSIAN_BY_TYPE, HESSIAN_BY_LAYER, HESSIAN_BY_TENSOR, HESSIAN_BY_WHOLE };

struct hessian_opts {
	struct blocksharp_opts data;    /* data, fmt, batch_tokens, seq_len, micro, seed */
	enum hessian_by by;
	int top;                /* eigenvalues per block (K) */
	int max_steps;          /* Lanczos products at most, per block */
	double tol;             /* stop when every top-K residual <= tol max|theta| */
	int probes;             /* trace products: Hutchinson's probes, or Hutch++'s */
	int hutchpp;            /* the trace by Hutch++ (traceest.h); not with density */
	int density;            /* SLQ vectors (0: no density) */
	int slq_steps;          /* Lanczos steps per SLQ vector */
	int gauss_newton;       /* G instead of H */
	int preconditioned;     /* P^-1/2 H P^-1/2 */
	const char *dump;       /* the batch (tokens, targets) to this HDF5 file, or NULL */
	const char *eigvecs;    /* the top-K eigenvectors to this HDF5 file, or NULL */
};

struct hessian_block {
	char name[SW_NAME_MAX]; /* the tensor (by tensor); else empty */
	char role[SW_ROLE_MAX]; /* the tensor's role (by tensor) */
	int block;              /* enum sw_block; -1: the whole selection */
	int layer;              /* by layer or tensor: its layer; else -2 */
	int64_t n;              /* parameters */
	int neig;               /* eigenvalues found (K, or n if smaller) */
	double *eig;            /* (neig) descending */
	int steps;              /* Lanczos products */
	double bound;           /* each eig within this of an eigenvalue */
	double eig_min;         /* the smallest eigenvalue (Lanczos's smallest Ritz value) */
	double bound_min;       /* eig_min within this of an eigenvalue */
	int converged;          /* the top K within tol max|theta| */
	double *vecs;           /* with eigvecs, while the block is written: (neig x n) */
	double trace, trace_se; /* trace_se NaN with one probe */
	int probes;
	double lr, eos;         /* NaN: unknown */
	int nodes;              /* SLQ: nodes and weights of every vector */
	double *node, *weight;  /* (nodes) */
	int *vec;               /* (nodes) the vector each belongs to */
	int products;           /* operator products in all */
};

struct hessian_result {
	int has_step;            /* step and tokens known */
	int64_t step, tokens;
	int T, B, mb;           /* the batch: B sequences of T, micro-batches of mb */
	int64_t nparams;
	double mem_bytes;       /* the estimate checked against the free memory */
	double beta1;           /* preconditioned: Adam's */
	int nblocks;
	struct hessian_block *b;
	int64_t selected;       /* tensors the selection kept */
};

/* Called after each operator product: the block (index, count, and its
 * running count of products). May be NULL. */
typedef void (*hessian_progress_fn)(void *ctx, const struct hessian_block *b, int index,
				    int count);

/*
 * The blocks of the checkpoint at path (see above). r->selected 0 (and no
 * blocks) when the selection keeps no tensor. SW_EUSAGE for options that
 * do not fit (no data, a batch that is not whole sequences),
 * SW_EDATA for a checkpoint without what --preconditioned needs (Adam's
 * /optim_state), SW_ESOFTWARE when the memory estimate exceeds what is
 * free.
 */
int hessian_run(const char *path, const struct sw_select *sel, const struct hessian_opts *o,
		hessian_progress_fn progress, void *ctx, struct hessian_result *r,
		struct sw_err *err);
void hessian_free(struct hessian_result *r);

/* The memory hessian_run needs, in bytes: the parameters (params_bytes:
 * all of them, or a param_stream's resident part); on the CPU the
 * direction and the product over the tensors the products touch (the
 * block's, and the weights its multipliers scale: largest_touched), on
 * a device both over every parameter; with reparameterized gains
 * (reparams, not Gauss-Newton) the gradient and its copy; activations of
 * one micro-batch (twice: primal and tangent); with a single micro-batch
 * its logits and, for the Hessian on the CPU, the primal gradients kept
 * between products (modelhvp.h's tape; not allocated, though counted,
 * with multipliers); the preconditioner, the Lanczos basis of the
 * largest block (max_steps + 1 float32 vectors), and with eigvecs its
 * top K Ritz vectors (K float64 vectors). */
double hessian_memory(const struct sw_config *c, double params_bytes, int64_t nparams,
		      int64_t largest_block, int64_t largest_touched, int mb, int T,
		      int single_micro, int on_device, int reparams, const struct hessian_opts *o);

#endif
