/*
 * modelio.h - a model and its training state to and from checkpoints.
 *
 * modelio_save writes a scalewatch HDF5 v1 checkpoint (atomically, via
 * h5io.c) with every attribute scalewatch-format(5) lists: /config with the model's
 * options, /params with each tensor's lr, wd, wd_mode as the optimizer
 * applied them in the update that produced the checkpoint, /optim with the
 * optimizer's configuration, /metrics, and /optim_state (moments, update
 * count, the data RNG's state) so that training resumes bit for bit,
 * with the run's own options the caller records there (x->run: how often
 * it checkpoints, evaluates, ..., trainopts.h) so that a resume goes on
 * as the run began.
 * Optionally /grads (the minibatch gradient of the last batch, true
 * labels) with the batch itself in /batch/tokens and /batch/targets, and
 * /fisher (a GNB estimate, sharpness.h) with its estimator, batch_tokens,
 * draws and seed on every dataset.
 *
 * modelio_load builds a model from any checkpoint the tensor source reads:
 * scalewatch HDF5 or Hugging Face safetensors.
 */
#ifndef SW_MODELIO_H
#define SW_MODELIO_H

#include <stdint.h>

#include "model.h"
#include "optim.h"
#include "../formats/ckpt.h"
#include "../base/rng.h"
#include "../base/status.h"

/* What a resumed run needs besides the parameters and moments. */
struct run_state {
	int64_t step;                   /* updates done */
	int64_t tokens;                 /* tokens seen */
	struct sw_rng rng;              /* the data sampler's state */
	double train_loss, val_loss;    /* NaN: unknown */
	double aux_loss;                /* a mixture of experts' load-balancing loss; NaN: none */
	/* the run's shape, checked on resume */
	int batch, grad_accum, seq_len;
	uint64_t seed;
};

/* An attribute of /optim_state: text, or a number (integer: int64). */
struct modelio_attr {
	const char *name, *text;        /* text NULL: the number */
	double value;
	int integer;
};

struct modelio_extras {
	const int *tokens, *targets;    /* with grads: the batch (rows x T) */
	int rows, T;
	int save_grads;
	const float *fisher;            /* (nparams) GNB estimate for /fisher, or NULL */
	int64_t fisher_batch_tokens;
	int fisher_draws;
	uint64_t fisher_seed;
	const struct modelio_attr *run; /* (nrun) the run's options, or NULL */
	int nrun;
};

int modelio_save(const char *path, const struct model *m, const struct optim *o,
		 const struct run_state *rs, const struct modelio_extras *x,
		 struct sw_err *err);

/* Build m from the checkpoint's config and copy its tensors in; every
 * tensor the model has must be there with its shape (m freed on
 * failure). modelio_read takes the checkpoint open: a run opens each
 * checkpoint once and passes it down (a sharded set, a pickle parsed
 * once); modelio_load opens path for it, for a caller that reads
 * nothing else of the file. */
int modelio_read(struct ckpt *ck, struct model *m, struct sw_err *err);
int modelio_load(const char *path, struct model *m, struct sw_err *err);

/* modelio_load in parts: build m for the open checkpoint, every tensor
 * checked there with its size (m freed on failure); then copy model
 * tensor i's values into dst (its numel reals: m->params at its offset,
 * or elsewhere), SW_EDATA where a value is NaN or Inf. */
int modelio_build(struct ckpt *ck, struct model *m, struct sw_err *err);
int modelio_load_tensor(struct ckpt *ck, const struct model *m, int i, real *dst,
			struct sw_err *err);

/* The optimizer configuration, moments and run state of an HDF5
 * checkpoint with /optim_state; o must not be initialized yet (freed on
 * failure). The checkpoint open, or at path. */
int modelio_read_state(struct ckpt *ck, const struct model *m, struct optim *o,
		       struct run_state *rs, struct sw_err *err);
int modelio_load_state(const char *path, const struct model *m, struct optim *o,
		       struct run_state *rs, struct sw_err *err);

#endif
