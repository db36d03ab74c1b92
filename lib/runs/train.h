/*
 * train.h - the training loop of sw-train, reading like prose: next batch,
 * forward, zero grad, backward, clip, update, trace, evaluate, checkpoint.
 *
 * Checkpoints go to OUT/ckpt-NNNNNN.h5 (atomically) every ckpt_every
 * steps and at the end, into a directory that holds no other run (the
 * rule of rundir.h: refused, or with force the earlier run's files
 * removed once this run has started) and that no other process writes
 * (its lock, rundir.h, held from before it is read to the end of the
 * run); the trace (trace.h) gets a row every trace_every
 * steps with the loss, learning rate, gradient norm, tokens, seconds, the
 * validation loss when evaluated, and the per-layer and per-head series
 * the papers plot. A NaN or Inf loss stops the run before the update,
 * keeping the last good checkpoint; *interrupt (set by a SIGINT handler)
 * makes it write a checkpoint and stop. Deterministic for a seed and a
 * thread count; a run resumed from a checkpoint continues bit for bit,
 * with the run's options the checkpoint records where the caller's
 * run_given does not say they were given (trainopts.h).
 *
 * Data parallel (comm: the processes of an mpirun job, dp.h): every rank
 * draws every batch from the same sampler and runs its own contiguous
 * slice of each micro-batch's sequences (so the union is the batch one
 * process would run), the gradients are summed as the backward pass goes,
 * and every rank takes the same update: the run is the one-process run
 * with the same global batch up to the order of the sums. Validation and
 * the /fisher estimate are split the same way; the trace's activation
 * statistics are summed over the ranks. Rank 0 alone writes the output
 * directory, the checkpoints and the trace; every failure is agreed on
 * (comm_agree) so that all ranks stop together, and the lowest failing
 * rank is the one whose message is shown (res->reporter). A checkpoint
 * holds nothing of the rank count: a run resumes on any number of ranks.
 * zero1 shards the optimizer state (dp.h), with the same results.
 * With device cuda (or emu) the model computes on a GPU
 * (cuda/gpumodel.h), the same loop driving it: the same checkpoints and
 * trace, resumable on either device.
 */
#ifndef SW_TRAIN_H
#define SW_TRAIN_H

#include <signal.h>
#include <stdint.h>

#include "../base/arch.h"
#include "../base/comm.h"
#include "../model/cuda/gpumodel.h"
#include "../files/data.h"
#include "../model/optim.h"
#include "../base/status.h"

struct train_progress {
	int64_t step, steps;            /* updates done, planned */
	int64_t tokens;                 /* tokens seen */
	int64_t tokens_run;             /* tokens seen by this process (since a resume) */
	double loss, val_loss;          /* val_loss NaN when not evaluated */
	double lr, grad_norm;
	double tokens_per_s, elapsed_s, eta_s;
	const char *checkpoint;         /* written at this step, or NULL */
	int ranks;                      /* processes of the job */
	double exchange_s;              /* per step since the last report: waiting for the
					   gradients of the other ranks */
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
	const char *init;               /* a checkpoint whose model starts the run, or NULL */
	enum sw_device device;          /* where the model computes: cpu, cuda, emu */
	enum sw_precision precision;    /* on a GPU: the products in fp32 or bf16 */
	int force;                      /* replace a run out_dir holds (rundir.h) */
	int steps_given;                /* with resume: --steps overrides */
	unsigned run_given;             /* with resume: the recorded run options the
					   command line gave (trainopts.h), kept */
	volatile sig_atomic_t *interrupt;
	void (*progress)(void *ctx, const struct train_progress *p);
	void (*note)(void *ctx, const char *msg);       /* what force removed, what resume
							   took from the checkpoint; may be NULL */
	void *ctx;
	struct comm *comm;              /* the job's processes; NULL: one */
	int zero1;                      /* shard the optimizer state over them */
	int timing;                     /* time the steps per phase (train_result) */
};

struct train_result {
	char checkpoint[4096];          /* the last checkpoint written ("" if none) */
	int64_t step;
	double loss, val_loss;
	int reporter;                   /* the rank whose err the user sees; -1: none */
	/* with timing: the wall seconds of this run's steps (forward, backward,
	 * exchange, update) and of each phase within them (model.h's
	 * model_phase; on a GPU only the optimizer's is timed) */
	double step_s, phase_s[MODEL_PHASE_COUNT];
};

/*
 * sw-train's defaults, the one place they are written (sw-sweep reads
 * them for a run's length): a 2-layer Llama of width 128 with 4 heads
 * over sequences of 64 tokens, 8 sequences a step, optim_defaults'
 * optimizer, 10 % of the data held out and evaluated every 100 steps on
 * 4 batches, the trace every 10 steps, seed 1. d_ff, head_dim and
 * n_kv_heads are left 0, to be derived (arch.h) once the options are in.
 */
void train_config_defaults(struct train_config *tc);

/* Train. SW_OK, or: SW_EDATA for bad data or a NaN loss (err says at
 * which step and which checkpoint is the last good one), SW_ENOINPUT,
 * SW_ECANTCREAT (also: out_dir holds another run), SW_EIO, SW_ESOFTWARE (also: a CUDA
 * error), SW_EUNAVAILABLE (device cuda without a usable GPU; nothing written);
 * SW_EINTERRUPTED when interrupted (after the checkpoint was written). */
int train_run(const struct train_config *tc, struct train_result *res, struct sw_err *err);

#endif
