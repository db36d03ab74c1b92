/*
 * sw-train - train a small Llama on the CPU (or a GPU, --device cuda) and
 * write the checkpoints and the trace the other tools read. Options to
 * struct train_config; the loop is lib/runs/train.c, the model lib/model/model.c,
 * the optimizers lib/model/optim.c, on a GPU lib/model/cuda/gpumodel.c; under mpirun,
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
#include "common.h"

static const char usage[] =
	"sw-train --data FILE --out DIR [--force] [--log] [--resume CKPT]\n"
	"                [--device D] [options]";
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
	"Optimization:\n"
	"  --steps N (1000)  --batch N (8)  --grad-accum N (1)  --seed N (1)\n"
	"  --optimizer O          " OPTIM_KINDS "\n"
	"  --lr X (1e-3)  --lr-min X  --warmup N (0)\n"
	"  --schedule S (cosine, constant, wsd)\n"
	"  --decay-frac X         wsd: the decaying fraction of the steps (0.2)\n"
	"  --beta1 X (0.9)  --beta2 X (0.95)  --eps X (1e-8)  --momentum X\n"
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
	"  --resume CKPT          go on from a checkpoint (its model and optimizer);\n"
	"                         into the checkpoint's directory, its run goes on there\n"
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

enum {
	O_DATA = OPT_TOOL_FIRST, O_DATA_FORMAT, O_VOCAB, O_VAL_FRACTION, O_EVAL_EVERY,
	O_EVAL_BATCHES, O_D_MODEL, O_N_LAYERS, O_N_HEADS, O_N_KV_HEADS, O_HEAD_DIM, O_D_FF,
	O_SEQ_LEN, O_ROPE_THETA, O_NORM_EPS, O_TIE, O_QK_NORM, O_MULTIPLIERS, O_NO_SCALE_VECTORS, O_SCALE_DESIGN,
	O_SCALE_REPARAM,
	O_NORM_EVERYWHERE, O_STEPS, O_BATCH, O_GRAD_ACCUM, O_SEED, O_OPTIMIZER, O_LR, O_LR_MIN,
	O_WARMUP, O_SCHEDULE, O_DECAY_FRAC, O_BETA1, O_BETA2, O_EPS, O_MOMENTUM, O_WD, O_WD_MODE,
	O_NORM_WD, O_WIDTH_BASE, O_WD_SCALING, O_MULT_LR, O_MULT_WD, O_BLOCKWISE_LR, O_GROUP_LR, O_GRAD_CLIP, O_OUT,
	O_CKPT_EVERY, O_TRACE, O_TRACE_EVERY, O_SAVE_GRADS, O_RESUME, O_FISHER_EVERY,
	O_FORCE, O_LOG, O_ZERO1, O_DEVICE, O_PRECISION, O_TIMING
};

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

/* What --force removed of an earlier run. */
static void note(void *ctx, const char *msg)
{
	struct report *r = ctx;

	fprintf(stderr, "sw-train: %s: --force: %s\n", r->out, msg);
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

/* "emb=10,qk=8" into the block ratios */
static void parse_block_ratios(struct tool *tl, const char *arg, double *ratio)
{
	char buf[256], *save = NULL;

	if (strlen(arg) >= sizeof buf)
		tool_usage_error(tl, "--blockwise-lr: too long");
	strcpy(buf, arg);
	for (char *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(it, '=');
		enum sw_block b;
		if (!eq)
			tool_usage_error(tl, "--blockwise-lr: '%s' is not BLOCK=RATIO", it);
		*eq = '\0';
		if (sw_block_parse(it, &b) < 0)
			tool_usage_error(tl, "--blockwise-lr: unknown block '%s'", it);
		ratio[b] = tool_parse_double(tl, "--blockwise-lr", eq + 1, 0, 1e6);
	}
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"help", no_argument, NULL, OPT_HELP}, {"version", no_argument, NULL, OPT_VERSION},
		{"data", required_argument, NULL, O_DATA},
		{"data-format", required_argument, NULL, O_DATA_FORMAT},
		{"vocab", required_argument, NULL, O_VOCAB},
		{"val-fraction", required_argument, NULL, O_VAL_FRACTION},
		{"eval-every", required_argument, NULL, O_EVAL_EVERY},
		{"eval-batches", required_argument, NULL, O_EVAL_BATCHES},
		{"d-model", required_argument, NULL, O_D_MODEL},
		{"n-layers", required_argument, NULL, O_N_LAYERS},
		{"n-heads", required_argument, NULL, O_N_HEADS},
		{"n-kv-heads", required_argument, NULL, O_N_KV_HEADS},
		{"head-dim", required_argument, NULL, O_HEAD_DIM},
		{"d-ff", required_argument, NULL, O_D_FF},
		{"seq-len", required_argument, NULL, O_SEQ_LEN},
		{"rope-theta", required_argument, NULL, O_ROPE_THETA},
		{"norm-eps", required_argument, NULL, O_NORM_EPS},
		{"tie", no_argument, NULL, O_TIE},
		{"qk-norm", no_argument, NULL, O_QK_NORM},
		{"multipliers", required_argument, NULL, O_MULTIPLIERS},
		{"no-scale-vectors", no_argument, NULL, O_NO_SCALE_VECTORS},
		{"scale-design", required_argument, NULL, O_SCALE_DESIGN},
		{"scale-reparam", required_argument, NULL, O_SCALE_REPARAM},
		{"norm-everywhere", no_argument, NULL, O_NORM_EVERYWHERE},
		{"steps", required_argument, NULL, O_STEPS},
		{"batch", required_argument, NULL, O_BATCH},
		{"grad-accum", required_argument, NULL, O_GRAD_ACCUM},
		{"seed", required_argument, NULL, O_SEED},
		{"optimizer", required_argument, NULL, O_OPTIMIZER},
		{"lr", required_argument, NULL, O_LR},
		{"lr-min", required_argument, NULL, O_LR_MIN},
		{"warmup", required_argument, NULL, O_WARMUP},
		{"schedule", required_argument, NULL, O_SCHEDULE},
		{"decay-frac", required_argument, NULL, O_DECAY_FRAC},
		{"beta1", required_argument, NULL, O_BETA1},
		{"beta2", required_argument, NULL, O_BETA2},
		{"eps", required_argument, NULL, O_EPS},
		{"momentum", required_argument, NULL, O_MOMENTUM},
		{"wd", required_argument, NULL, O_WD},
		{"wd-mode", required_argument, NULL, O_WD_MODE},
		{"norm-wd", required_argument, NULL, O_NORM_WD},
		{"width-base", required_argument, NULL, O_WIDTH_BASE},
		{"wd-scaling", required_argument, NULL, O_WD_SCALING},
		{"mult-lr", required_argument, NULL, O_MULT_LR},
		{"mult-wd", required_argument, NULL, O_MULT_WD},
		{"blockwise-lr", optional_argument, NULL, O_BLOCKWISE_LR},
		{"group-lr", required_argument, NULL, O_GROUP_LR},
		{"grad-clip", required_argument, NULL, O_GRAD_CLIP},
		{"out", required_argument, NULL, O_OUT},
		{"ckpt-every", required_argument, NULL, O_CKPT_EVERY},
		{"trace", required_argument, NULL, O_TRACE},
		{"trace-every", required_argument, NULL, O_TRACE_EVERY},
		{"save-grads", no_argument, NULL, O_SAVE_GRADS},
		{"resume", required_argument, NULL, O_RESUME},
		TOOL_THREADS_OPTION,
		{"fisher-every", required_argument, NULL, O_FISHER_EVERY},
		{"force", no_argument, NULL, O_FORCE},
		{"log", no_argument, NULL, O_LOG},
		{"zero1", no_argument, NULL, O_ZERO1},
		{"device", required_argument, NULL, O_DEVICE},
		{"precision", required_argument, NULL, O_PRECISION},
		{"timing", no_argument, NULL, O_TIMING},
		{NULL, 0, NULL, 0}
	};
	struct tool tl;
	struct report rep;
	struct train_config tc;
	struct sw_config *c = &tc.model;
	struct sw_err err;
	int opt, d_ff = 0, head_dim = 0, kv = 0;

	tool_init(&tl, "sw-train", usage, help, argc, argv);
	tl.mpi_use = "data parallel under mpirun";
	train_config_defaults(&tc);
	memset(&rep, 0, sizeof rep);
	rep.tl = &tl;
	tc.interrupt = &interrupted;
	tc.progress = progress;
	tc.note = note;
	tc.ctx = &rep;
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case O_DATA: tc.data_path = optarg; break;
		case O_DATA_FORMAT:
			if (data_format_parse(optarg, &tc.data_format) < 0)
				tool_usage_error(&tl, "--data-format: auto, llmc, uint16 or bytes");
			break;
		case O_VOCAB: c->vocab_size = tool_parse_int(&tl, "--vocab", optarg, 2, 1 << 20); break;
		case O_VAL_FRACTION: tc.val_fraction = tool_parse_double(&tl, "--val-fraction", optarg, 0, 0.9); break;
		case O_EVAL_EVERY: tc.eval_every = tool_parse_int(&tl, "--eval-every", optarg, 0, 1LL << 40); break;
		case O_EVAL_BATCHES: tc.eval_batches = (int)tool_parse_int(&tl, "--eval-batches", optarg, 1, 1 << 20); break;
		case O_D_MODEL: c->d_model = tool_parse_int(&tl, "--d-model", optarg, 2, 1 << 16); break;
		case O_N_LAYERS: c->n_layers = tool_parse_int(&tl, "--n-layers", optarg, 1, 1024); break;
		case O_N_HEADS: c->n_heads = tool_parse_int(&tl, "--n-heads", optarg, 1, 1024); break;
		case O_N_KV_HEADS: kv = (int)tool_parse_int(&tl, "--n-kv-heads", optarg, 1, 1024); break;
		case O_HEAD_DIM: head_dim = (int)tool_parse_int(&tl, "--head-dim", optarg, 2, 4096); break;
		case O_D_FF: d_ff = (int)tool_parse_int(&tl, "--d-ff", optarg, 1, 1 << 20); break;
		case O_SEQ_LEN: c->seq_len = tool_parse_int(&tl, "--seq-len", optarg, 1, 1 << 16); break;
		case O_ROPE_THETA: c->rope_theta = tool_parse_double(&tl, "--rope-theta", optarg, 1, 1e12); break;
		case O_NORM_EPS: c->norm_eps = tool_parse_double(&tl, "--norm-eps", optarg, 0, 1); break;
		case O_TIE: c->tie_embeddings = 1; break;
		case O_QK_NORM: c->qk_norm = 1; break;
		case O_MULTIPLIERS:
			if (arch_multipliers_parse(optarg) < 0)
				tool_usage_error(&tl, "--multipliers: " ARCH_MULTIPLIERS_LIST);
			strcpy(c->multipliers, optarg);
			break;
		case O_NO_SCALE_VECTORS: c->scale_vectors = 0; break;
		case O_SCALE_DESIGN: {
			struct arch_scale_design d;
			char why[64];
			if (arch_scale_design_parse(optarg, &d, c->scale_design, sizeof c->scale_design, why))
				tool_usage_error(&tl, "--scale-design: %s", why);
			/* DNP on the attention's q and k is QK-norm */
			if (d.dnp[ARCH_SV_ATTN])
				c->qk_norm = 1;
			break;
		}
		case O_SCALE_REPARAM: {
			unsigned char mode[3];
			char why[64];
			if (!*optarg || arch_scale_reparam_parse(optarg, mode, c->scale_reparam,
								 sizeof c->scale_reparam, why))
				tool_usage_error(&tl, "--scale-reparam: %s", *optarg ? why : ARCH_SCALE_REPARAMS);
			break;
		}
		case O_NORM_EVERYWHERE: c->norm_everywhere = 1; break;
		case O_STEPS:
			tc.optim.steps = tool_parse_int(&tl, "--steps", optarg, 0, 1LL << 40);
			tc.steps_given = 1;
			break;
		case O_BATCH: tc.batch = (int)tool_parse_int(&tl, "--batch", optarg, 1, 1 << 16); break;
		case O_GRAD_ACCUM: tc.grad_accum = (int)tool_parse_int(&tl, "--grad-accum", optarg, 1, 1 << 16); break;
		case O_SEED: tc.seed = (uint64_t)tool_parse_int(&tl, "--seed", optarg, 0, 1LL << 62); break;
		case O_OPTIMIZER:
			if (optim_kind_parse(optarg, &tc.optim.kind) < 0)
				tool_usage_error(&tl, "--optimizer: " OPTIM_KINDS);
			break;
		case O_LR: tc.optim.lr = tool_parse_double(&tl, "--lr", optarg, 0, 1e3); break;
		case O_LR_MIN: tc.optim.lr_min = tool_parse_double(&tl, "--lr-min", optarg, 0, 1e3); break;
		case O_WARMUP: tc.optim.warmup = tool_parse_int(&tl, "--warmup", optarg, 0, 1LL << 40); break;
		case O_SCHEDULE:
			if (optim_sched_parse(optarg, &tc.optim.sched) < 0)
				tool_usage_error(&tl, "--schedule: constant, cosine or wsd");
			break;
		case O_DECAY_FRAC: tc.optim.decay_frac = tool_parse_double(&tl, "--decay-frac", optarg, 0, 1); break;
		case O_BETA1: tc.optim.beta1 = tool_parse_double(&tl, "--beta1", optarg, 0, 0.999999); break;
		case O_BETA2: tc.optim.beta2 = tool_parse_double(&tl, "--beta2", optarg, 0, 0.999999); break;
		case O_EPS: tc.optim.eps = tool_parse_double(&tl, "--eps", optarg, 0, 1); break;
		case O_MOMENTUM: tc.optim.momentum = tool_parse_double(&tl, "--momentum", optarg, 0, 0.999999); break;
		case O_WD: tc.optim.wd = tool_parse_double(&tl, "--wd", optarg, 0, 1e3); break;
		case O_WD_MODE:
			/* of the modes a file may record, the two a run trains with */
			if (sw_wd_mode_parse(optarg, &tc.optim.wd_mode) < 0 ||
			    (tc.optim.wd_mode != SW_WD_COUPLED && tc.optim.wd_mode != SW_WD_INDEPENDENT))
				tool_usage_error(&tl, "--wd-mode: coupled or independent");
			break;
		case O_NORM_WD:
			if (optim_norm_wd_parse(optarg, &tc.optim.norm_wd) < 0)
				tool_usage_error(&tl, "--norm-wd: none, all or iwd");
			break;
		case O_WIDTH_BASE: tc.optim.width_base = tool_parse_int(&tl, "--width-base", optarg, 1, 1 << 20); break;
		case O_WD_SCALING:
			if (optim_wd_scaling_parse(optarg, &tc.optim.wd_scaling) < 0)
				tool_usage_error(&tl, "--wd-scaling: fixed, sqrt or linear");
			break;
		case O_MULT_LR: tc.optim.mult_lr_ratio = tool_parse_double(&tl, "--mult-lr", optarg, 0, 1e6); break;
		case O_MULT_WD: tc.optim.mult_wd = tool_parse_double(&tl, "--mult-wd", optarg, 0, 1e3); break;
		case O_BLOCKWISE_LR:
			tc.optim.blockwise = 1;
			if (optarg)
				parse_block_ratios(&tl, optarg, tc.optim.block_ratio);
			break;
		case O_GROUP_LR: {
			char buf[128], *a, *b;
			if (strlen(optarg) >= sizeof buf)
				tool_usage_error(&tl, "--group-lr: too long");
			strcpy(buf, optarg);
			a = strchr(buf, ':');
			b = a ? strchr(a + 1, ':') : NULL;
			if (!a || !b)
				tool_usage_error(&tl, "--group-lr: INPUT:HIDDEN:OUTPUT, e.g. 1:0.125:1");
			*a = *b = '\0';
			tc.optim.group_ratio[SW_GROUP_INPUT] = tool_parse_double(&tl, "--group-lr", buf, 0, 1e6);
			tc.optim.group_ratio[SW_GROUP_HIDDEN] = tool_parse_double(&tl, "--group-lr", a + 1, 0, 1e6);
			tc.optim.group_ratio[SW_GROUP_OUTPUT] = tool_parse_double(&tl, "--group-lr", b + 1, 0, 1e6);
			break;
		}
		case O_GRAD_CLIP: tc.optim.grad_clip = tool_parse_double(&tl, "--grad-clip", optarg, 0, 1e12); break;
		case O_OUT: tc.out_dir = optarg; break;
		case O_CKPT_EVERY: tc.ckpt_every = tool_parse_int(&tl, "--ckpt-every", optarg, 0, 1LL << 40); break;
		case O_TRACE: tc.trace_path = optarg; break;
		case O_TRACE_EVERY: tc.trace_every = tool_parse_int(&tl, "--trace-every", optarg, 0, 1LL << 40); break;
		case O_SAVE_GRADS: tc.save_grads = 1; break;
		case O_RESUME: tc.resume = optarg; break;
		case O_FORCE: tc.force = 1; break;
		case O_LOG: rep.log = 1; break;
		case O_TIMING: tc.timing = 1; break;
		case O_ZERO1: tc.zero1 = 1; break;
		case O_FISHER_EVERY: tc.fisher_every = tool_parse_int(&tl, "--fisher-every", optarg, 0, 1LL << 40); break;
		case O_DEVICE:
			if (sw_device_parse(optarg, &tc.device) < 0)
				tool_usage_error(&tl, "--device: cpu, cuda or emu");
			break;
		case O_PRECISION:
			if (sw_precision_parse(optarg, &tc.precision) < 0)
				tool_usage_error(&tl, "--precision: fp32 or bf16");
			break;
		default: tool_common_option(&tl, opt, optarg); break;
		}
	}
	if (optind < argc)
		tool_usage_error(&tl, "unexpected argument '%s'", argv[optind]);
	if (!tc.data_path || !tc.out_dir)
		tool_usage_error(&tl, "--data and --out are required");
	if (tc.optim.wd_scaling != WD_SCALING_FIXED && !tc.optim.width_base)
		tool_usage_error(&tl, "--wd-scaling scales from a base width: give --width-base");
	if (c->scale_design[0] && !c->scale_vectors)
		tool_usage_error(&tl, "--scale-design places scale vectors: not with --no-scale-vectors");
	if (c->scale_reparam[0] && !c->scale_vectors)
		tool_usage_error(&tl, "--scale-reparam reparameterizes scale vectors: not with --no-scale-vectors");
	if (c->scale_design[0] && strcmp(c->multipliers, "none"))
		tool_usage_error(&tl, "--scale-design and --multipliers: one or the other");
	if (c->scale_design[0] && c->tie_embeddings && strstr(c->scale_design, "head="))
		tool_usage_error(&tl, "--scale-design: the head's gains need an untied head (no --tie)");
	rep.out = tc.out_dir;
	rep.periodic = (tc.eval_every > 0 && tc.val_fraction > 0) || tc.ckpt_every > 0;
	c->n_kv_heads = kv ? kv : c->n_heads;
	c->head_dim = head_dim;
	if (!head_dim && arch_default_head_dim(c, &err))
		tool_usage_error(&tl, "--d-model %lld is not a multiple of --n-heads %lld (or give --head-dim)",
				 (long long)c->d_model, (long long)c->n_heads);
	c->d_ff = d_ff ? d_ff : arch_default_d_ff(c->d_model);
	if (c->n_heads % c->n_kv_heads)
		tool_usage_error(&tl, "--n-heads must be a multiple of --n-kv-heads");
	if (c->head_dim % 2)
		tool_usage_error(&tl, "the head dimension must be even (RoPE rotates pairs)");
	if (tc.precision == SW_PRECISION_BF16 && tc.device == SW_DEVICE_CPU)
		tool_usage_error(&tl, "--precision bf16 is for a GPU (--device cuda); the CPU computes in fp32");
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
