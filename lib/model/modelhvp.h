/*
 * modelhvp.h - Hessian- and Gauss-Newton-vector products of the model of
 * model.h by the R-operator: a tangent forward pass and a second-order
 * backward pass (step.c's sequence) over the CPU's kernels (cpukern.h),
 * for sw-hessian (hessian.h) and the tests that check them against
 * finite differences and PyTorch; cuda/gpumodel.h runs the same sequence
 * on the device.
 */
#ifndef SW_MODELHVP_H
#define SW_MODELHVP_H

#include "model.h"
#include "../base/status.h"

struct model_rop_tape;

/*
 * Exact products of the loss's Hessian H with a direction v (Pearlmutter
 * 1994): every value f the forward and backward passes compute is
 * differentiated along v, R{f} = d/de f(theta + e v) at e = 0, so the
 * backward pass's R{dL/dtheta} is H v, exact up to float rounding (no
 * step, no cancellation). The tangents live in a second model rm built
 * for the same config and batch shape (model_rop_build): rm->params holds
 * v, rm's activations and scratch the tangents of m's, rm->grads receives
 * H v (added, +=, as model_backward adds; model_zero_grad(rm) clears).
 *
 * Gauss-Newton (gauss_newton != 0): G v with G = J^T H_z J, J the Jacobian
 * of the logits and H_z = (diag p - p p^T) loss_scale / N the cross
 * entropy's Hessian in the logits: the Hessian without the network's own
 * curvature, which is the Hessian's expectation over labels drawn from
 * the model's softmax (the Fisher matrix; sw-sharpness's GNB estimates
 * its diagonal). It needs no primal backward pass and no targets.
 *
 * want (one flag per tensor, m->tensors order; NULL: all): v is zero
 * outside the wanted tensors and only their rows of H v are wanted. The
 * passes skip what that makes zero or unused: the tangent forward starts
 * at the lowest layer holding a wanted tensor, the backward stops there,
 * and tangent weight gradients of other tensors are not formed (their
 * entries of rm->grads are left as they were).
 */
int model_rop_build(struct model *rm, const struct model *m, struct sw_err *err);

/* After model_forward(m, tokens, ...): the tangents of its activations
 * for v = rm->params. m is not changed. */
void model_rop_forward(const struct model *m, struct model *rm, const int *tokens,
		       const unsigned char *want);

/*
 * After model_rop_forward: rm->grads += H v (or G v). The primal backward
 * pass it needs runs alongside, in m's scratch; m's gradients are
 * overwritten (with multipliers they hold this batch's gradient of the
 * effective weights). dlogits (N x V reals, may be NULL) receives the
 * primal dL/dlogits so that m's softmax probabilities stay for the next
 * product on the same batch; NULL computes it over them, and
 * model_forward must then run again before the next product.
 *
 * tape (may be NULL; step.h's struct model_rop_tape): the primal
 * backward's input gradients of the linear layers and of attention, kept
 * for the next products on the same batch and forward pass (with
 * dlogits): the layers it holds skip those products, the others fill
 * it, the same bits either way. Unused for Gauss-Newton and with
 * multipliers. Zero its kept flags (or allocate it anew) when the batch
 * or the parameters change.
 */
void model_rop_backward(struct model *m, struct model *rm, const int *tokens, const int *targets,
			double loss_scale, int gauss_newton, const unsigned char *want,
			real *dlogits, struct model_rop_tape *tape);
/* the tape's size for batches of B x T, in reals; allocate it empty for
 * m's batch shape (model_alloc_acts's); free it */
size_t model_rop_tape_reals(const struct sw_config *c, int B, int T);
int model_rop_tape_alloc(struct model_rop_tape *tape, const struct model *m, struct sw_err *err);
void model_rop_tape_free(struct model_rop_tape *tape);

/*
 * What v reaches, for a back end's tangent step (step.h's struct
 * model_rop_step): the lowest layer holding a wanted tensor (-1: the
 * embedding, L: only the final norm and head); layer l's pointers of the
 * tangent model's full views rp, rg where v reaches (NULL elsewhere) and
 * eg, m->g's dL/dW_eff of the linears whose multipliers need it; the same
 * for the embedding, final norm and head. rp, rg may be any block laid
 * out as m's (a device maps them after).
 */
int model_rop_first(const struct model *m, const unsigned char *want);

/*
 * The reparameterized gains (model.h's reparams) around the products, on
 * flat blocks laid out as m's params (the CPU's rm->params and rm->grads,
 * or a device's host copies): v and H v over the trained tensors (want),
 * each gain computed from its direction alpha and magnitude beta.
 * model_rop_gains_tangent, before the products: each gain's tangent
 * R{gamma} into v from the tangents of its alpha and beta, and the gain
 * flagged in rop_want (want, and those gains), the want to run the
 * products with. model_rop_gains_backward, after them: H v's entries of
 * alpha and beta from R{dL/dgamma} (hv's gain entries), written; for the
 * Hessian gain_grads holds the batch's dL/dgamma (model_backward with
 * keep_gain_grads), for Gauss-Newton NULL.
 */
void model_rop_gains_tangent(const struct model *m, real *v, const unsigned char *want,
			     unsigned char *rop_want);
void model_rop_gains_backward(const struct model *m, const real *v, real *hv, const real *gain_grads,
			      const unsigned char *want);
/* does v move tensor i (or, for a linear, its multipliers)? */
int model_rop_wanted(const struct model *m, const unsigned char *want, int i);
void model_rop_views(const struct model *m, const unsigned char *want, const struct model_ptrs *rp,
		     const struct model_ptrs *rg, int l, struct layer_ptrs *rw, struct layer_ptrs *rgl,
		     struct layer_ptrs *eg);
void model_rop_top_views(const struct model *m, const unsigned char *want,
			 const struct model_ptrs *rp, const struct model_ptrs *rg,
			 struct model_ptrs *rw, struct model_ptrs *rgo, struct model_ptrs *eg);

#endif
