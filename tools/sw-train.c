/*
 * sw-train - train a small Llama on the CPU (or a GPU, --device cuda) and
 * write the checkpoints and the trace the other tools read. Options to
 * struct train_config through lib/runs/trainopts.c's table; the loop is
 * lib/runs/train.c, the model lib/model/model.c, the optimizers
 * lib/model/optim.c, on a GPU lib/model/cuda/gpumodel.c; under mpirun,
 * data parallel over the job's processes (lib/base/comm.c, lib/model/dp.c).
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/base/comm.h"
#include "../lib/model/modelio.h"
#include "../lib/runs/train.h"
#include "../lib/runs/trainopts.h"
#include "common.h"

static const char usage[] =
	"sw-train --data FILE --out DIR [--force] [--log] [--resume CKPT]\n"
	"                [--init CKPT] [--device D] [options]";
static const char help[] =
	"Train a small Llama-style model on the CPU or a GPU; write checkpoints\n"
	"OUT/ckpt-NNNNNN.h5 and the trace OUT/trace.h5. Prints the last checkpoint's\n"
	"path on stdout. An OUT holding another run is refused (exit 73) unless\n"
	"--resume continues it there or --force replaces it.\n"
	"\n"
	"Data:\n"
	"  --data FILE            llm.c token file, nanoGPT uint16 .bin, or text (bytes)\n"
	"  --data-format F        auto (default), llmc, uint16, bytes\n"
	"  --vocab N              vocabulary size (default: largest token id + 1)\n"
	"  --val-fraction X       the held-out tail of the tokens (0.1)\n"
	"  --eval-every N         validation loss every N steps (0: off; default 100)\n"
	"  --eval-batches N       batches per evaluation (4)\n"
	"Model:\n"
	"  --d-model N (128)  --n-layers N (2)  --n-heads N (4)  --n-kv-heads N (n-heads)\n"
	"  --head-dim N (d-model/n-heads)  --d-ff N (4*d-model*2/3, rounded to 8)\n"
	"  --seq-len N (64)  --rope-theta X (10000)  --norm-eps X (1e-5)\n"
	"  --arch A               llama (default), qwen2 (q, k, v biases), gpt2,\n"
	"                         gemma, gemma2 (see sw-train(1))\n"
	"  --attn-softcap X (50)  --final-softcap X (30)  --query-pre-attn-scalar X\n"
	"                         (head-dim): gemma2's soft-caps (0: none), scores' scale\n"
	"  --tie                  tie the head to the embedding\n"
	"  --qk-norm              RMSNorm of q and k per head\n"
	"  --multipliers M        none, scalar, row, col, rowcol: learnable multipliers\n"
	"  --no-scale-vectors     RMSNorm without gains\n"
	"  --scale-design S       the scale vectors of each Pre-Norm and its readers:\n"
	"                         " ARCH_SCALE_DESIGNS ", or KIND=D,...\n"
	"                         over the kinds attn, ffn, head (see sw-train(1))\n"
	"  --scale-reparam R      the gains from a direction and a magnitude: or\n"
	"                         (beta Norm(alpha)), er (e^beta e^(alpha-mean)), or\n"
	"                         KIND=R,... over attn, ffn, head (see sw-train(1))\n"
	"  --norm-everywhere      RMSNorm also before o_proj and down_proj\n"
	"  --moe E:K[:S]          a mixture of experts: E experts, K active per token,\n"
	"                         S (0, 1) shared experts (see sw-train(1))\n"
	"  --moe-ffn N            an expert's width (d-ff/K)\n"
	"  --moe-shared-ffn N     the shared expert's width (d-ff)\n"
	"  --moe-renorm yes|no    the top K weights renormalized (yes: Mixtral; no:\n"
	"                         Qwen2-MoE)\n"
	"  --moe-aux-coef C       the load-balancing loss's weight (0.001)\n"
	"  --moe-dense-layers N   the first N layers keep a dense MLP (0)\n"
	"Optimization:\n"
	"  --steps N (1000)  --batch N (8)  --grad-accum N (1)  --seed N (1)\n"
	"  --optimizer O          " OPTIM_KINDS "\n"
	"  --lr X (1e-3)  --lr-min X  --warmup N (0)\n"
	"  --schedule S (cosine, constant, wsd)\n"
	"  --decay-frac X         wsd: the decaying fraction of the steps (0.2)\n"
	"  --beta1 X (0.9)  --beta2 X (0.95; lion 0.99)  --eps X (1e-8)  --momentum X\n"
	"  --wd X (0.1)  --wd-mode M (coupled, independent)\n"
	"  --norm-wd W            weight decay of norm gains: none, all, iwd\n"
	"  --mult-lr X  --mult-wd X   multipliers: lr ratio (1), weight decay (2e-3)\n"
	"  --blockwise-lr [R]     Blockwise LR; R like emb=10,qk=8,ffn=6,vo=4,norm=1\n"
	"  --group-lr I:H:O       lr ratios of the input, hidden, output groups\n"
	"  --width-base D0        width rules from a base width D0: hidden matrices'\n"
	"                         lr x D0/d-model, wd x (d-model/D0)^p; embedding\n"
	"                         and head without wd\n"
	"  --wd-scaling S         p: fixed (0, default), sqrt (1/2), linear (1)\n"
	"  --grad-clip X          clip the gradient norm (1; 0: off)\n"
	"Output:\n"
	"  --out DIR              checkpoints and trace go here\n"
	"  --ckpt-every N         a checkpoint every N steps (0: only the last)\n"
	"  --trace FILE           the trace ('' for none; default OUT/trace.h5)\n"
	"  --trace-every N        a trace row every N steps (10)\n"
	"  --save-grads           /grads and /batch in every checkpoint\n"
	"  --fisher-every N       /fisher (GNB sharpness, 1 draw) in checkpoints at\n"
	"                         multiples of N\n"
	"  --resume CKPT          go on from a checkpoint (its model and optimizer, and\n"
	"                         the options of the run it records: --ckpt-every,\n"
	"                         --eval-every, ..., unless given again); into the\n"
	"                         checkpoint's directory, its run goes on there\n"
	"  --init CKPT            start from the model of any checkpoint the tools read\n"
	"                         (its config and parameters; a new optimizer)\n"
	"  --force                replace the run DIR holds (its checkpoints and trace)\n"
	"  --log                  a line on stderr per evaluation and checkpoint\n"
	TOOL_THREADS_HELP
	"  --zero1                under mpirun: shard the optimizer state over the ranks\n"
	"Device:\n"
	"  --device D             cpu (default); cuda: the GPU (exit 69 without one;\n"
	"                         see sw-train(1)); emu: the CUDA path with its\n"
	"                         kernels run on the CPU (slow; for tests)\n"
	"  --precision P          on a GPU: fp32 (default), bf16 (matmuls in bf16)\n"
	"  --timing               at the end, the steps' time per phase on stderr\n"
	"  --help, --version\n"
	"Under mpirun -np N (when built with MPI: see --version), data parallel: each\n"
	"rank runs 1/N of every batch; rank 0 writes the checkpoints and the trace.\n"
	"See sw-train(1).\n";

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* What the progress callback needs. */
struct report {
	struct tool *tl;
	const char *out;
	int log;                        /* --log: a line per evaluation and checkpoint */
	int periodic;                   /* the run evaluates or checkpoints every so many steps */
	int64_t last_tokens;            /* tokens_run at the last log line */
	double last_s;                  /* elapsed_s at the last log line */
};

/* "42s", "5m06s", "2h03m" */
static const char *duration(double s, char *buf, size_t len)
{
	long t = isfinite(s) && s > 0 ? (long)(s + 0.5) : 0;

	if (t < 60)
		snprintf(buf, len, "%lds", t);
	else if (t < 3600)
		snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
	else
		snprintf(buf, len, "%ldh%02ldm", t / 3600, t / 60 % 60);
	return buf;
}

/* --log: at each evaluation and checkpoint and at the end; a run that does
 * neither every so many steps, at every tenth of its steps. */
static int log_due(const struct report *r, const struct train_progress *p)
{
	int64_t tenth = (p->steps + 9) / 10;

	return p->step == p->steps || !isnan(p->val_loss) || p->checkpoint ||
	       (!r->periodic && p->step % tenth == 0);
}

/* A log line: the rate since the line before, the time left at the rate
 * since the start. */
static void log_line(struct report *r, const struct train_progress *p)
{
	double dt = p->elapsed_s - r->last_s;
	char el[32], eta[32];

	fprintf(stderr, "sw-train: %s: step %lld/%lld  loss %.4f", r->out, (long long)p->step,
		(long long)p->steps, p->loss);
	if (!isnan(p->val_loss))
		fprintf(stderr, "  val %.4f", p->val_loss);
	fprintf(stderr, "  lr %.3g  %.0f tok/s", p->lr,
		dt > 0 ? (double)(p->tokens_run - r->last_tokens) / dt : 0.0);
	if (p->ranks > 1)
		fprintf(stderr, "  %d ranks, exchange wait %.1f ms/step", p->ranks, 1e3 * p->exchange_s);
	fprintf(stderr, "  elapsed %s  ETA %s", duration(p->elapsed_s, el, sizeof el),
		duration(p->eta_s, eta, sizeof eta));
	if (p->checkpoint)
		fprintf(stderr, "  %s", strrchr(p->checkpoint, '/') ? strrchr(p->checkpoint, '/') + 1
								: p->checkpoint);
	fputc('\n', stderr);
	r->last_tokens = p->tokens_run;
	r->last_s = p->elapsed_s;
}

/* On a terminal a bar redrawn every step (a checkpoint's stays); with
 * --log, log lines, on a terminal between the bar's redraws. */
static void progress(void *ctx, const struct train_progress *p)
{
	struct report *r = ctx;
	char eta[32];

	if (r->log && log_due(r, p)) {
		if (r->tl->progress)
			fputs("\r\033[K", stderr);
		log_line(r, p);
	} else if (r->tl->progress) {
		fprintf(stderr, "\r\033[Ksw-train: step %lld/%lld  loss %.4f", (long long)p->step,
			(long long)p->steps, p->loss);
		if (!isnan(p->val_loss))
			fprintf(stderr, "  val %.4f", p->val_loss);
		fprintf(stderr, "  lr %.3g  |g| %.3g  %.0f tok/s  ETA %s", p->lr, p->grad_norm,
			p->tokens_per_s, duration(p->eta_s, eta, sizeof eta));
		if (p->checkpoint && !r->log)
			fputc('\n', stderr);
	}
	fflush(stderr);
}

/* What --force removed of an earlier run, what --resume took from the
 * checkpoint. */
static void note(void *ctx, const char *msg)
{
	struct report *r = ctx;

	fprintf(stderr, "sw-train: %s: %s\n", r->out, msg);
}

/* --timing: where the steps' wall time went, one line on stderr */
static void print_timing(const struct train_result *r)
{
	static const char *const names[MODEL_PHASE_COUNT] = {"gemm", "attention", "elementwise",
							      "optimizer"};
	double other = r->step_s;

	fprintf(stderr, "sw-train: timing: steps %.3f s", r->step_s);
	for (int i = 0; i < MODEL_PHASE_COUNT; i++) {
		fprintf(stderr, ", %s %.3f", names[i], r->phase_s[i]);
		other -= r->phase_s[i];
	}
	fprintf(stderr, ", other %.3f\n", other);
}

int main(int argc, char **argv)
{
	/* sw-train's options: lib/runs/trainopts.c's table, the one owner of
	 * their names, bounds and parse (sw-sweep checks a sweep's by it) */
	struct option longopts[TRAINOPT_COUNT + 3] = {
		{"help", no_argument, NULL, OPT_HELP}, {"version", no_argument, NULL, OPT_VERSION}
	};
	static const int has_arg[] = {
		[TRAINOPT_NONE] = no_argument, [TRAINOPT_VALUE] = required_argument,
		[TRAINOPT_OPTIONAL] = optional_argument
	};
	struct tool tl;
	struct report rep;
	struct trainopts o;
	struct train_config tc;
	struct sw_err err;
	int opt;

	for (int i = 0; i < TRAINOPT_COUNT; i++)
		longopts[2 + i] = (struct option){trainopts_table[i].name, has_arg[trainopts_table[i].arg], NULL,
						  OPT_TOOL_FIRST + i};
	tool_init(&tl, "sw-train", usage, help, argc, argv);
	tl.mpi_use = "data parallel under mpirun";
	trainopts_init(&o);
	memset(&rep, 0, sizeof rep);
	rep.tl = &tl;
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (opt < OPT_TOOL_FIRST || opt >= OPT_TOOL_FIRST + TRAINOPT_COUNT) {
			tool_common_option(&tl, opt, optarg);
			continue;
		}
		if (trainopts_set(&o, opt - OPT_TOOL_FIRST, optarg, &err))
			tool_usage_error(&tl, "%s", err.msg);
		if (opt - OPT_TOOL_FIRST == TRAINOPT_THREADS)
			tool_common_option(&tl, OPT_THREADS, optarg);   /* sets OpenMP's and OpenBLAS's */
	}
	if (optind < argc)
		tool_usage_error(&tl, "unexpected argument '%s'", argv[optind]);
	if (trainopts_finish(&o, &err))
		tool_usage_error(&tl, "%s", err.msg);
	tc = o.tc;
	tc.interrupt = &interrupted;
	tc.progress = progress;
	tc.note = note;
	tc.ctx = &rep;
	rep.log = o.log;
	rep.out = tc.out_dir;
	rep.periodic = (tc.eval_every > 0 && tc.val_fraction > 0) || tc.ckpt_every > 0;
	signal(SIGINT, on_sigint);

	struct train_result res;
	int rc, rank;
	if ((rc = comm_init(&argc, &argv, &tc.comm, &err))) {
		fprintf(stderr, "sw-train: %s\n", err.msg);
		tool_finish(&tl);
		return rc;
	}
	rank = comm_rank(tc.comm);
	if (tc.zero1 && comm_size(tc.comm) == 1 && rank == 0)
		fprintf(stderr, "sw-train: --zero1: one process, nothing to shard\n");
	rc = train_run(&tc, &res, &err);
	if (tl.progress)
		fputs("\r\033[K", stderr);
	/* one message per failure: from the rank that saw it first */
	if (rc && res.reporter == rank) {
		if (comm_size(tc.comm) > 1 && rank > 0)
			fprintf(stderr, "sw-train: rank %d: %s\n", rank, err.msg);
		else
			fprintf(stderr, "sw-train: %s\n", err.msg);
	}
	if (!rc && rank == 0)
		printf("%s\n", res.checkpoint);
	if (!rc && rank == 0 && tc.timing)
		print_timing(&res);
	comm_finalize(tc.comm);
	if (rc) {
		tool_finish(&tl);
		return rc;
	}
	return tool_finish(&tl);
}
