/*
 * gpumodel.h - the model of model.h on a GPU (gpu.h: CUDA, or its host
 * emulation): the CUDA trainer's forward and backward passes, optimizer
 * step, gradient norm, GNB estimate and trace statistics, computed on the
 * device by the kernels of kernels.h and cuBLAS, in the order and with
 * the per-element math (elemmath.h) of the CPU reference in lib/model/cpukern.c,
 * lib/model/optim.c and lib/model/sharpness.c.
 *
 * Parameters, gradients, effective weights (multipliers applied) and the
 * optimizer's moments live in device memory in the host model's flat
 * layout: a tensor is at the same offset in both. The host model (struct
 * model, built as on the CPU) keeps the table of tensors, and it is what
 * checkpoints are written from: gpumodel_download copies the device's
 * parameters (and moments, gradients) into it, gpumodel_open copies them
 * from it (a new model, or one loaded from any checkpoint: /optim_state
 * resumes on either device). Activations stay on the device.
 *
 * fp32 by default (the products in plain float on cuBLAS, comparable to
 * the CPU's); SW_PRECISION_BF16 runs the model's matrix products in bf16
 * with float accumulation, the weights, gradients and moments staying
 * float (Newton-Schulz's products stay float). Errors: "cuda: ..."
 * (SW_ESOFTWARE), no usable GPU SW_EUNAVAILABLE; after an error the
 * model is unusable (every later call returns it).
 */
#ifndef SW_CUDA_GPUMODEL_H
#define SW_CUDA_GPUMODEL_H

#include <stddef.h>
#include <stdint.h>

#include "../device.h"
#include "../model.h"
#include "../optim.h"
#include "../../base/rng.h"
#include "../../base/status.h"

struct gpu_model;

/* Open the device (SW_EUNAVAILABLE if there is none), copy m's parameters
 * and, when o is given, the optimizer's moments there; room for the
 * activations of B sequences of T tokens. m must outlive the GPU model. */
int gpumodel_open(struct gpu_model **gm, enum sw_device dev, enum sw_precision prec,
		  const struct model *m, const struct optim *o, int B, int T, struct sw_err *err);
void gpumodel_close(struct gpu_model *gm);

/* The device's name and memory, for messages. */
const char *gpumodel_device_name(const struct gpu_model *gm);

/* As model_forward: tokens and targets (B, T) on the host, B x T within
 * what gpumodel_open made room for; with targets, *loss the mean loss. */
int gpumodel_forward(struct gpu_model *gm, const int *tokens, const int *targets, int B, int T,
		     double *loss, struct sw_err *err);
int gpumodel_zero_grad(struct gpu_model *gm, struct sw_err *err);
/* As model_backward, after gpumodel_forward on the same tokens. */
int gpumodel_backward(struct gpu_model *gm, const int *tokens, const int *targets, double loss_scale,
		      struct sw_err *err);
/* As optim_grad_norm. */
int gpumodel_grad_norm(struct gpu_model *gm, double *norm, struct sw_err *err);
/* As optim_step: o's configuration and update count (incremented here,
 * on the host), the moments on the device. */
int gpumodel_step(struct gpu_model *gm, struct optim *o, int64_t step, double clip_scale,
		  struct sw_err *err);
/* As model_update_effective, on the device. */
int gpumodel_update_effective(struct gpu_model *gm, struct sw_err *err);

/* Copy the parameters into m (the model gpumodel_open was given), with
 * grads the gradients too, with o the moments. */
int gpumodel_download(struct gpu_model *gm, struct model *m, struct optim *o, int grads,
		      struct sw_err *err);
/* Copy n values of one of m's blocks (params, grads, w_eff, dw_eff) from
 * the device into m, where host_ptr points: e.g. m->p.lm_head, the head
 * as the forward pass uses it. */
int gpumodel_download_at(struct gpu_model *gm, real *host_ptr, size_t n, struct sw_err *err);

/* As gnb_estimate (sharpness.h), the labels drawn from r in the same
 * order; h (host, nparams) += N g^2 / draws. keep_probs: with one
 * micro-batch, forward once and restore its softmax for every draw. */
int gpumodel_gnb(struct gpu_model *gm, const int *tokens, int B, int T, int mb, int draws,
		 struct sw_rng *r, float *h, int *labels, int keep_probs, struct sw_err *err);

/*
 * Hessian- (or Gauss-Newton-) vector products on the device, modelhvp.h's
 * R-operator through step.c's tangent sequence: gpumodel_hvp_begin takes
 * v (host, nparams; zero outside the tensors want flags, NULL: all; want
 * must live until gpumodel_hvp_end); after each gpumodel_forward with
 * targets (the batch's tokens stay on the device), gpumodel_hvp_add adds
 * that batch's H v times loss_scale (of the mean loss); gpumodel_hvp_end
 * downloads the sum into hv (host, nparams). keep_probs: the forward's
 * probabilities survive the product, so that the next product on the
 * same batch needs no forward. The primal gradients are overwritten.
 */
int gpumodel_hvp_begin(struct gpu_model *gm, const real *v, const unsigned char *want,
		       struct sw_err *err);
int gpumodel_hvp_add(struct gpu_model *gm, double loss_scale, int gauss_newton, int keep_probs,
		     struct sw_err *err);
int gpumodel_hvp_end(struct gpu_model *gm, real *hv, struct sw_err *err);

/* The trace's statistics read the device's activations and weights: the
 * views of model.h with device pointers, and their sums. */
struct gpumodel_view {
	const struct layer_acts *acts;  /* (L) */
	const real *x_final;            /* (N, C) */
	const struct layer_ptrs *w;     /* (L) effective weights */
	const real *params;             /* (nparams) */
};
void gpumodel_view(const struct gpu_model *gm, struct gpumodel_view *v);
/* The sum of x[0..n) (squares: of x^2), x a device pointer of the views. */
int gpumodel_sum(struct gpu_model *gm, const real *x, size_t n, int squares, double *out,
		 struct sw_err *err);

/* The first error, if any (SW_OK if none): for callers that ran
 * gpumodel_sum through a callback that cannot return one. */
int gpumodel_error(const struct gpu_model *gm, struct sw_err *err);

#endif
