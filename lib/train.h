/*
 * train.h - the training loop of sw-train, reading like prose: next batch,
 * forward, zero grad, backward, clip, update, trace, evaluate, checkpoint.
 *
 * Checkpoints go to OUT/ckpt-NNNNNN.h5 (atomically) every ckpt_every
 * steps and at the end, into a directory that holds no other run (the
 * rule of rundir.h: refused, or with force the earlier run's files
 * removed once this run has started); the trace (trace.h) gets a row every trace_every
 * steps with the loss, learning rate, gradient norm, tokens, seconds, the
 * validation loss when evaluated, and the per-layer and per-head series
 * the papers plot. A NaN or Inf loss stops the run before the update,
 * keeping the last good checkpoint; *interrupt (set by a SIGINT handler)
 * makes it write a checkpoint and stop. Deterministic for a seed and a
 * thread count; a run resumed from a checkpoint continues bit for bit.
 * With device cuda (or emu) the model computes on a GPU
 * (cuda/gpumodel.h), the same loop driving it: the same checkpoints and
 * trace, resumable on either device.
 */
#ifndef SW_TRAIN_H
#define SW_TRAIN_H

#include <signal.h>
#include <stdint.h>

#include "arch.h"
#include "cuda/gpumodel.h"
#include "data.h"
#include "optim.h"
#include "status.h"

struct train_progress {
	int64_t step, steps;            /* updates done, planned */
	int64_t tokens;                 /* tokens seen */
	int64_t tokens_run;             /* tokens seen by this process (since a resume) */
	double loss, val_loss;          /* val_loss NaN when not evaluated */
	double lr, grad_norm;
	double tokens_per_s, elapsed_s, eta_s;
	const char *checkpoint;         /* written at this step, or NULL */
};

struct train_config {
	const char *data_path;
	enum data_format data_format;
	double val_fraction;
	struct sw_config model;         /* vocab_size 0: largest token id + 1 */
	struct optim_config optim;
	int batch, grad_accum;          /* sequences per micro-batch, micro-batches per step */
	uint64_t seed;
	const char *out_dir;
	int64_t ckpt_every;             /* 0: only at the end */
	const char *trace_path;         /* NULL: OUT/trace.h5; "" none */
	int64_t trace_every;
	int64_t eval_every;             /* 0: never */
	int eval_batches;
	int save_grads;                 /* /grads and /batch in every checkpoint */
	int64_t fisher_every;           /* /fisher (GNB, 1 draw) in checkpoints at multiples */
	const char *resume;             /* a checkpoint to go on from, or NULL */
	enum sw_device device;          /* where the model computes: cpu, cuda, emu */
	enum sw_precision precision;    /* on a GPU: the products in fp32 or bf16 */
	int force;                      /* replace a run out_dir holds (rundir.h) */
	int steps_given;                /* with resume: --steps overrides */
	volatile sig_atomic_t *interrupt;
	void (*progress)(void *ctx, const struct train_progress *p);
	void (*note)(void *ctx, const char *msg);       /* what force removed; may be NULL */
	void *ctx;
};

struct train_result {
	char checkpoint[4096];          /* the last checkpoint written ("" if none) */
	int64_t step;
	double loss, val_loss;
};

/* Train. SW_OK, or: SW_EDATA for bad data or a NaN loss (err says at
 * which step and which checkpoint is the last good one), SW_ENOINPUT,
 * SW_ECANTCREAT (also: out_dir holds another run), SW_EIO, SW_ESOFTWARE (also: a CUDA
 * error), SW_EUNAVAILABLE (device cuda without a usable GPU; nothing written);
 * SW_EINTERRUPTED when interrupted (after the checkpoint was written). */
int train_run(const struct train_config *tc, struct train_result *res, struct sw_err *err);

#endif
