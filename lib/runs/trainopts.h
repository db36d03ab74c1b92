/*
 * trainopts.h - sw-train's options: one table, the one owner of each
 * option's name, argument, bounds and parse. sw-train's main reads its
 * command line through it (getopt over trainopts_table); sw-sweep checks
 * through it a sweep's swept values and its common options when the sweep
 * is made (a bad one is a usage error at once, not a failure in every
 * run) and each run's command file before it runs it (a command file is
 * as hostile as any file from a stranger).
 *
 * trainopts_set takes one option and its value into struct trainopts;
 * trainopts_finish checks what needs every option in (required ones,
 * options that exclude each other) and derives the model's defaults
 * (n_kv_heads, head_dim, d_ff). trainopts_parse walks an argument vector
 * strictly: each option spelled in full ("--batch 8" or "--batch=8"), no
 * operand; a subset of what getopt_long accepts, read the same way.
 *
 * A run's own options (how often it checkpoints, evaluates, traces and
 * estimates /fisher, whether it saves /grads, its data's split and
 * format) are recorded in each checkpoint, as attributes of /optim_state
 * (trainopts_run_attrs), and a resumed run takes them from there
 * (trainopts_resume) unless the command line gives them again: a resume
 * goes on as the run began.
 */
#ifndef SW_TRAINOPTS_H
#define SW_TRAINOPTS_H

#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"
#include "../formats/ckpt.h"
#include "../model/modelio.h"
#include "train.h"

enum trainopt_id {
	TRAINOPT_DATA, TRAINOPT_DATA_FORMAT, TRAINOPT_VOCAB, TRAINOPT_VAL_FRACTION,
	TRAINOPT_EVAL_EVERY, TRAINOPT_EVAL_BATCHES, TRAINOPT_D_MODEL, TRAINOPT_N_LAYERS,
	TRAINOPT_N_HEADS, TRAINOPT_N_KV_HEADS, TRAINOPT_HEAD_DIM, TRAINOPT_D_FF, TRAINOPT_SEQ_LEN,
	TRAINOPT_ROPE_THETA, TRAINOPT_NORM_EPS, TRAINOPT_ARCH, TRAINOPT_TIE, TRAINOPT_QK_NORM,
	TRAINOPT_MULTIPLIERS, TRAINOPT_NO_SCALE_VECTORS, TRAINOPT_SCALE_DESIGN, TRAINOPT_SCALE_REPARAM,
	TRAINOPT_NORM_EVERYWHERE, TRAINOPT_STEPS, TRAINOPT_BATCH, TRAINOPT_GRAD_ACCUM, TRAINOPT_SEED,
	TRAINOPT_OPTIMIZER, TRAINOPT_LR, TRAINOPT_LR_MIN, TRAINOPT_WARMUP, TRAINOPT_SCHEDULE,
	TRAINOPT_DECAY_FRAC, TRAINOPT_BETA1, TRAINOPT_BETA2, TRAINOPT_EPS, TRAINOPT_MOMENTUM,
	TRAINOPT_WD, TRAINOPT_WD_MODE, TRAINOPT_NORM_WD, TRAINOPT_WIDTH_BASE, TRAINOPT_WD_SCALING,
	TRAINOPT_MULT_LR, TRAINOPT_MULT_WD, TRAINOPT_BLOCKWISE_LR, TRAINOPT_GROUP_LR,
	TRAINOPT_GRAD_CLIP, TRAINOPT_OUT, TRAINOPT_CKPT_EVERY, TRAINOPT_TRACE, TRAINOPT_TRACE_EVERY,
	TRAINOPT_SAVE_GRADS, TRAINOPT_FISHER_EVERY, TRAINOPT_RESUME, TRAINOPT_FORCE, TRAINOPT_LOG,
	TRAINOPT_THREADS, TRAINOPT_ZERO1, TRAINOPT_DEVICE, TRAINOPT_PRECISION, TRAINOPT_TIMING,
	TRAINOPT_ATTN_SOFTCAP, TRAINOPT_FINAL_SOFTCAP, TRAINOPT_QUERY_PRE_ATTN_SCALAR, TRAINOPT_INIT,
	TRAINOPT_MOE, TRAINOPT_MOE_FFN, TRAINOPT_MOE_SHARED_FFN, TRAINOPT_MOE_RENORM,
	TRAINOPT_MOE_AUX_COEF, TRAINOPT_MOE_DENSE_LAYERS,
	TRAINOPT_COUNT
};

/* no value, a value, a value only as --name=VALUE (getopt's
 * no_argument, required_argument, optional_argument) */
enum trainopt_arg { TRAINOPT_NONE, TRAINOPT_VALUE, TRAINOPT_OPTIONAL };

/* how trainopts_set reads a value: a number within lo..hi into the
 * field at offset in struct trainopts, a string kept (a file name), a
 * switch set to 1 (or 0 for --no-...), or a word or list of its own */
enum trainopt_kind {
	TRAINOPT_INT, TRAINOPT_INT64, TRAINOPT_UINT64, TRAINOPT_DOUBLE, TRAINOPT_STRING,
	TRAINOPT_ON, TRAINOPT_OFF, TRAINOPT_WORDS
};

struct trainopt {
	const char *name;               /* without the dashes */
	enum trainopt_arg arg;
	enum trainopt_kind kind;
	size_t offset;                  /* of the field in struct trainopts */
	double lo, hi;                  /* a number's bounds */
};

/* Indexed by enum trainopt_id. */
extern const struct trainopt trainopts_table[TRAINOPT_COUNT];

struct trainopts {
	struct train_config tc;         /* train_config_defaults, then the options */
	int64_t n_kv_heads, head_dim, d_ff;     /* 0: derived by trainopts_finish */
	int64_t moe_ffn, moe_shared_ffn;        /* --moe-ffn, --moe-shared-ffn; 0: derived */
	int log;                        /* --log */
	int threads;                    /* --threads; 0: not given */
	int given[TRAINOPT_COUNT];      /* how many times each option came */
	const char *value[TRAINOPT_COUNT];      /* each one's last value (NULL: none) */
};

/* o at sw-train's defaults, no option given. */
void trainopts_init(struct trainopts *o);

/* The option named name (without the dashes, spelled in full), or -1. */
int trainopts_find(const char *name);

/* Option id with its value (NULL for an option without one) into o.
 * SW_EUSAGE with sw-train's message: "--batch: '4.0' is not an integer
 * in 1..65536". */
int trainopts_set(struct trainopts *o, int id, const char *arg, struct sw_err *err);

/* The checks that need every option, and the model's derived sizes.
 * SW_EUSAGE naming the fault. */
int trainopts_finish(struct trainopts *o, struct sw_err *err);

/* The run options tc records in a checkpoint, into out (at most
 * TRAINOPTS_RUN_MAX); their count. */
#define TRAINOPTS_RUN_MAX 8
int trainopts_run_attrs(const struct train_config *tc, struct modelio_attr *out);

/* Resuming from ck: each run option recorded there and not given
 * (tc->run_given) into tc; said (len bytes) gets those that changed a
 * value, as options ("--ckpt-every 10 --fisher-every 10"; "" if none).
 * A checkpoint that records none (another format, or written before they
 * were recorded) changes nothing. SW_EDATA naming a recorded value that
 * is out of the option's bounds or of the wrong type. */
int trainopts_resume(struct train_config *tc, struct ckpt *ck, char *said, size_t len,
		     struct sw_err *err);

/* args[0..n) (no program name) as sw-train would read them, strictly (see
 * above), into o; SW_EUSAGE naming the first argument that is not one. */
int trainopts_parse(struct trainopts *o, char *const *args, int n, struct sw_err *err);

/* A number from the command line: the whole of arg, decimal, within
 * lo..hi (a double also finite, not underflowing); SW_EUSAGE naming opt
 * ("--tokens") otherwise. */
int trainopts_int(const char *opt, const char *arg, long long lo, long long hi, long long *v,
		  struct sw_err *err);
int trainopts_double(const char *opt, const char *arg, double lo, double hi, double *v,
		     struct sw_err *err);

#endif
