/*
 * blocksharp.h - the blockwise sharpness of a checkpoint, as sw-sharpness
 * reports it, over the estimator of sharpness.h.
 *
 * blocksharp_estimate gives the GNB estimate h of every parameter: the
 * checkpoint's /fisher when every tensor has one (the trainer's) and no
 * data file was given, else computed with the model on tokens of the
 * data file (the largest
 * micro-batch that divides the batch and whose activations take at most a
 * quarter of the free memory, on a GPU (device) the whole batch unless
 * micro says less; a fresh batch per draw unless same_batch;
 * the inputs and sampled labels optionally written to an HDF5 file).
 * Under MPI (opts.comm of several ranks) the computed estimate is split
 * over the ranks by rows of the batch and its gradients summed before
 * they are squared (dp_gnb_estimate): the one-process estimate on the
 * same labels, up to the order of the sums; every rank gets h. With one
 * draw on the CPU the model's gradient becomes h in its place (no third
 * array of the model's size), and the statistics read h where it lies.
 * blocksharp_stats pools h over a set of parameters (a block type, a
 * layer, a tensor; eq. 4 and the log scale), blocksharp_hist bins log10 h
 * per block type, blocksharp_principle checks Principle (1).
 */
#ifndef SW_BLOCKSHARP_H
#define SW_BLOCKSHARP_H

#include <stddef.h>
#include <stdint.h>

#include "../base/comm.h"
#include "../model/device.h"
#include "../files/data.h"
#include "../model/model.h"
#include "../model/paramstream.h"
#include "../base/select.h"
#include "../model/sharpness.h"
#include "../base/status.h"
#include "../base/tensor.h"

struct blocksharp_opts {
	const char *data;       /* tokens, when the estimate is computed */
	enum data_format fmt;
	int64_t batch_tokens;   /* loss terms per estimate; a multiple of seq_len */
	int seq_len;            /* 0: the model's, at most 512 */
	int micro;              /* sequences per pass; 0: as memory allows */
	int draws;
	int same_batch;
	int recompute;          /* ignore /fisher (as data does) */
	int low_memory;         /* layers read as the passes reach them
				   (paramstream.h; sw-sharpness also recomputes
				   their activations); the micro-batch 1
				   sequence unless micro says */
	uint64_t seed;
	const char *dump;       /* write the inputs and labels here, or NULL (one process) */
	struct comm *comm;      /* the ranks computing the estimate together; NULL: one */
	enum sw_device device;  /* where the estimate is computed: cpu, cuda, emu */
	struct gnb_progress progress;   /* after each pass on the CPU: done of every
					   draw's passes; fn NULL: none */
};

/*
 * The defaults sw-sharpness and sw-hessian share, written once: a batch
 * of 2048 tokens, one draw, seed 1. Why 2048: on make demo's last
 * checkpoint the block means of three seeds spread 0.05-0.08 in log10 at
 * 8192 tokens and 0.07-0.10 at 2048 (the sampled labels, not the batch,
 * dominate), while 8192 costs 3.2x the time here and 4x in sw-hessian
 * (minutes per checkpoint).
 */
#define BLOCKSHARP_BATCH_TOKENS 2048
void blocksharp_opts_defaults(struct blocksharp_opts *o);

/*
 * What a computation with the model on data needs, shared with sw-hessian
 * (hessian.c): the model of the open checkpoint ck (its caller opened it
 * once for everything it reads of the file, and closes it after
 * blocksharp_setup_free), the data file opened
 * and checked, the sequence length T (o->seq_len, else the model's, at
 * most 512), the batch of B = o->batch_tokens / T sequences, and the
 * micro-batch mb: o->micro, else the largest that divides B and whose
 * activations, `copies` sets of them, take at most a quarter of the free
 * memory (mem_free, from /proc/meminfo; 0 if unknown), or 1 with
 * o->low_memory (the model then a param_stream's, s->ps). SW_EUSAGE
 * when no data was given or the batch does not fit the options.
 */
struct blocksharp_setup {
	struct model m;
	struct dataset d;
	int T, B, mb;
	double mem_free;
	struct param_stream *ps;        /* o->low_memory's, else NULL */
};
int blocksharp_setup(struct ckpt *ck, const struct blocksharp_opts *o, int copies,
		     struct blocksharp_setup *s, struct sw_err *err);
void blocksharp_setup_free(struct blocksharp_setup *s);

/* The estimate of one checkpoint: h over its tensors, in model order. */
struct blocksharp_estimate {
	int n;
	struct sw_tensor_info *info;    /* (n) */
	size_t *offset;                 /* (n) into h */
	float *h;
	int64_t total;                  /* parameters */
	char reparam[32];               /* the config's scale_reparam: the gains it
					   reparameterizes are left out (arch_reparam_of) */
	int has_step;            /* step and tokens known */
	int64_t step, tokens;
	const char *source;             /* "fisher" or "computed" */
	int reporter;                   /* on failure, the rank whose err is shown */
};

/* The estimate of the checkpoint at path. SW_EUSAGE when it has no
 * /fisher and no data was given, or the batch does not fit the options. */
int blocksharp_estimate(const char *path, const struct blocksharp_opts *o,
			struct blocksharp_estimate *e, struct sw_err *err);
void blocksharp_free(struct blocksharp_estimate *e);

/*
 * Stats of h over the parameters sel selects that are of block (-1: any),
 * in layer (-2: any) and tensor (-1: any). *count 0 when none (s unset).
 */
int blocksharp_stats(const struct blocksharp_estimate *e, const struct sw_select *sel,
		     int block, int layer, int tensor, struct gnb_stats *s, int64_t *count,
		     struct sw_err *err);

/* S(block) of every type (eq. 4), NaN for types absent from the selection. */
int blocksharp_type_means(const struct blocksharp_estimate *e, const struct sw_select *sel,
			  double S[SW_BLOCK_COUNT], struct sw_err *err);

/*
 * log10 h per block type in bins common to all types (from the smallest to
 * the largest nonzero value over the selection): count[b * bins + k] and
 * the density, per unit of log10 h, of the type's nonzero entries (it
 * sums to 1 / width over the bins); *lo and *width give bin k as
 * [lo + k width, lo + (k + 1) width). present[b]: the type has
 * parameters. SW_EDATA when every estimate is zero.
 */
int blocksharp_hist(const struct blocksharp_estimate *e, const struct sw_select *sel, int bins,
		    int64_t *count, double *density, int present[SW_BLOCK_COUNT], double *lo,
		    double *width, struct sw_err *err);

/*
 * Principle (1): S(Emb) << S(QK) < S(FFN) < S(VO) << S(Norm). Without
 * strict: Norm the largest and Emb the smallest of the five; strict adds
 * S(qk) < S(ffn) < S(vo). Each violation is a pair (a, b) where S(a) is
 * not below S(b); *n says how many (at most 16). SW_EDATA when one of the
 * five types has no parameters.
 */
struct blocksharp_violation {
	enum sw_block below, above;
	int by_above;           /* found checking `above` (say "S(above) is not above") */
};
int blocksharp_principle(const double S[SW_BLOCK_COUNT], int strict,
			 struct blocksharp_violation v[16], int *n, struct sw_err *err);

#endif
