/*
 * sw-sharpness - blockwise diagonal Gauss-Newton sharpness of checkpoints
 * per block type (the sharpness-disparity paper's Principle (1)). The
 * estimate of a checkpoint and its statistics: lib/runs/blocksharp.c
 * (blocksharp_estimate, blocksharp_stats, blocksharp_hist,
 * blocksharp_principle) over the estimator of lib/model/sharpness.c
 * (gnb_estimate). This parses options and prints. Under mpirun the
 * computed estimate is split over the ranks (lib/model/dp.c); rank 0 reads the
 * file names, hands them on and prints.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/runs/blocksharp.h"
#include "../lib/base/comm.h"
#include "common.h"

static const char usage[] =
	"sw-sharpness [--json] [--data FILE] [--batch-tokens N] [--draws K]\n"
	"                    [--seed S] [--same-batch] [--seq-len T] [--micro-batch M]\n"
	"                    [--low-memory] [--recompute]\n"
	"                    [--per-layer | --per-tensor | --hist BINS | --ratios]\n"
	"                    [--check principle [--strict]]\n"
	"                    [--dump-labels FILE [--force]] [--threads N]\n"
	"                    [--log | --quiet] [--device D] [--block LIST]\n"
	"                    [--expert LIST] [--layer LIST] [--name GLOB] [--role LIST]\n"
	"                    FILE ...";
static const char help[] =
	"Diagonal Gauss-Newton (GNB) sharpness of checkpoints, per block type:\n"
	"file step block nparams mean log10_mean mean_log10 q10_log10 median_log10\n"
	"q90_log10 zeros tokens (tokens, the training tokens behind the checkpoint,\n"
	"ends every row). Uses a checkpoint's /fisher when it has one and no --data\n"
	"is given, else computes the estimate on the tokens of --data.\n"
	"\n"
	TOOL_BATCH_HELP
	"                     (here also each layer's activations computed again\n"
	"                     for the backward pass: memory about the gradient,\n"
	"                     4 bytes a parameter, and the embedding; a quarter\n"
	"                     more work)\n"
	"  --draws K          label draws averaged (1)\n"
	"  --same-batch       all draws on one batch (default: a fresh batch each)\n"
	"  --seed S           batches and labels (1)\n"
	"  --recompute        ignore /fisher in the checkpoint (as --data does)\n"
	"  --per-layer        one row per block type per layer\n"
	"  --per-tensor       one row per tensor\n"
	"  --hist BINS        the distribution of log10 h per block type: bin_lo bin_hi\n"
	"                     count density (per unit of log10 h) zeros\n"
	"  --ratios           S(norm)/S(block) beside the paper's Blockwise LR ratios\n"
	"  --check principle  exit 1 unless Norm is the sharpest and Emb the flattest\n"
	"  --strict           with --check: also S(qk) < S(ffn) < S(vo)\n"
	"  --dump-labels FILE the inputs and sampled labels of every draw (HDF5)\n"
	"  --force            replace an existing --dump-labels FILE (never an input)\n"
	TOOL_THREADS_HELP
	TOOL_LOG_HELP
	TOOL_DEVICE_HELP
	TOOL_SELECT_HELP
	"Under mpirun -np N (when built with MPI: see --version), the N ranks split\n"
	"each computed estimate's sequences; rank 0 prints.\n"
	"See sw-sharpness(1).\n";

enum {
	O_DRAWS = OPT_TOOL_FIRST, O_SAME_BATCH, O_RECOMPUTE, O_PER_LAYER, O_PER_TENSOR, O_HIST, O_RATIOS, O_CHECK,
	O_STRICT, O_DUMP_LABELS, O_DEVICE
};

enum mode { BY_TYPE, BY_LAYER, BY_TENSOR, HIST, RATIOS };

struct opts {
	struct blocksharp_opts est;
	int check, strict, bins;
	enum mode mode;
};

/* ---- printing --------------------------------------------------------- */

static const char *const type_cols[] = {
	"file", "step", "block", "nparams", "mean", "log10_mean", "mean_log10", "q10_log10",
	"median_log10", "q90_log10", "zeros", "tokens"
};
static const char *const layer_cols[] = {
	"file", "step", "block", "layer", "nparams", "mean", "log10_mean", "mean_log10", "q10_log10",
	"median_log10", "q90_log10", "zeros", "tokens"
};
static const char *const tensor_cols[] = {
	"file", "step", "name", "block", "role", "layer", "nparams", "mean", "log10_mean",
	"mean_log10", "q10_log10", "median_log10", "q90_log10", "zeros", "tokens"
};
static const char *const hist_cols[] = {
	"file", "step", "block", "bin_lo", "bin_hi", "count", "density", "zeros", "tokens"
};
static const char *const ratio_cols[] = {
	"file", "step", "block", "mean", "norm_over_block", "paper_ratio", "tokens"
};

/* The estimate's passes as progress (a 1B model's take minutes). */
struct pass_progress {
	struct tool *tl;
	const char *file;
	const struct blocksharp_opts *est;
};

static void pass_done(void *ctx, int done, int total)
{
	const struct pass_progress *p = ctx;

	/* the statistics after the last pass take a while on a large model
	 * (20 s at a billion parameters): said on the last pass's line */
	tool_progress(p->tl, "%s: an estimate on %lld tokens x %d draws: pass %d of %d%s", p->file,
		      (long long)p->est->batch_tokens, p->est->draws, done, total,
		      done == total ? "; the statistics next" : "");
}

static void row_stats(struct table *tb, const struct blocksharp_estimate *e,
		      const struct gnb_stats *s)
{
	table_int(tb, s->n);
	table_num(tb, s->mean);
	table_num(tb, s->mean > 0 ? log10(s->mean) : NAN);
	table_num(tb, s->mean_log10);
	table_num(tb, s->q10);
	table_num(tb, s->median);
	table_num(tb, s->q90);
	table_int(tb, s->zeros);
	tool_row_end(tb, e->has_step, e->tokens);
}

static int print_hist(struct tool *tl, struct table *tb, const char *file, const struct opts *o,
		      const struct blocksharp_estimate *e, struct sw_err *err)
{
	int64_t *count = malloc((size_t)SW_BLOCK_COUNT * o->bins * sizeof *count);
	double *density = malloc((size_t)SW_BLOCK_COUNT * o->bins * sizeof *density), lo, w;
	int present[SW_BLOCK_COUNT], rc;

	if (!count || !density)
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
	else
		rc = blocksharp_hist(e, &tl->sel, o->bins, count, density, present, &lo, &w, err);
	for (int b = 0; !rc && b < SW_BLOCK_COUNT; b++) {
		/* the type's exact zeros, which no log bin holds: on each of its rows */
		struct gnb_stats s = {0};
		int64_t n = 0;
		if (present[b] && (rc = blocksharp_stats(e, &tl->sel, b, -2, -1, &s, &n, err)))
			break;
		for (int k = 0; present[b] && k < o->bins; k++) {
			tool_row_begin(tb, file, e->has_step, e->step);
			table_str(tb, sw_block_name((enum sw_block)b));
			table_num(tb, lo + k * w);
			table_num(tb, lo + (k + 1) * w);
			table_int(tb, count[(size_t)b * o->bins + k]);
			table_num(tb, density[(size_t)b * o->bins + k]);
			table_int(tb, n ? s.zeros : 0);
			tool_row_end(tb, e->has_step, e->tokens);
		}
	}
	free(count);
	free(density);
	return rc;
}

static int print_estimate(struct tool *tl, struct table *tb, const char *file, const struct opts *o,
		      const struct blocksharp_estimate *e, struct sw_err *err)
{
	struct gnb_stats s;
	int64_t n;
	int rc = SW_OK;

	if (o->mode == BY_TYPE || o->mode == BY_LAYER) {
		int L = 0;
		for (int i = 0; i < e->n; i++)
			L = e->info[i].layer + 1 > L ? e->info[i].layer + 1 : L;
		for (int b = 0; b < SW_BLOCK_COUNT && !rc; b++)
			for (int l = o->mode == BY_LAYER ? -1 : -2; l < (o->mode == BY_LAYER ? L : -1); l++) {
				if ((rc = blocksharp_stats(e, &tl->sel, b, l, -1, &s, &n, err)))
					break;
				if (!n)
					continue;
				tool_row_begin(tb, file, e->has_step, e->step);
				table_str(tb, sw_block_name((enum sw_block)b));
				if (o->mode == BY_LAYER)
					table_int(tb, l);
				row_stats(tb, e, &s);
			}
	} else if (o->mode == BY_TENSOR) {
		for (int i = 0; i < e->n && !rc; i++) {
			if ((rc = blocksharp_stats(e, &tl->sel, -1, -2, i, &s, &n, err)) || !n)
				continue;
			tool_row_begin(tb, file, e->has_step, e->step);
			table_str(tb, e->info[i].name);
			table_str(tb, sw_block_name(e->info[i].block));
			table_str(tb, e->info[i].role);
			table_int(tb, e->info[i].layer);
			row_stats(tb, e, &s);
		}
	} else if (o->mode == HIST) {
		rc = print_hist(tl, tb, file, o, e, err);
	} else {
		double S[SW_BLOCK_COUNT];
		if (!(rc = blocksharp_type_means(e, &tl->sel, S, err)))
			for (int b = 0; b < SW_BLOCK_COUNT; b++) {
				if (isnan(S[b]))
					continue;
				tool_row_begin(tb, file, e->has_step, e->step);
				table_str(tb, sw_block_name((enum sw_block)b));
				table_num(tb, S[b]);
				table_num(tb, S[SW_BLOCK_NORM] / S[b]);
				if (gnb_paper_ratio((enum sw_block)b) > 0)
					table_num(tb, gnb_paper_ratio((enum sw_block)b));
				else
					table_empty(tb);
				tool_row_end(tb, e->has_step, e->tokens);
			}
	}
	return rc;
}

/* Does the selection match a tensor of the estimate? Says so if not. */
static int selected(struct tool *tl, const char *file, const struct blocksharp_estimate *e)
{
	size_t n = 0;

	for (int i = 0; i < e->n; i++)
		n += (size_t)select_match_info(&tl->sel, &e->info[i]);
	tool_selected(tl, file, n, "tensor");
	return n > 0;
}

/* --check principle: a line per violation; SW_ECHECK if any. */
static int check_principle(struct tool *tl, const char *file, const struct opts *o,
			   const struct blocksharp_estimate *e, struct sw_err *err)
{
	struct blocksharp_violation v[16];
	double S[SW_BLOCK_COUNT];
	int n, rc;

	if ((rc = blocksharp_type_means(e, &tl->sel, S, err)))
		return rc;
	if ((rc = blocksharp_principle(S, o->strict, v, &n, err)))
		return rc;
	for (int i = 0; i < n; i++) {
		enum sw_block a = v[i].below, b = v[i].above;
		if (v[i].by_above)
			fprintf(stderr, "%s: %s: Principle (1) broken: S(%s) = %.3g is not above S(%s) = %.3g\n",
				tl->prog, file, sw_block_name(b), S[b], sw_block_name(a), S[a]);
		else
			fprintf(stderr, "%s: %s: Principle (1) broken: S(%s) = %.3g is not below S(%s) = %.3g\n",
				tl->prog, file, sw_block_name(a), S[a], sw_block_name(b), S[b]);
	}
	return n ? SW_ECHECK : SW_OK;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		TOOL_COMMON_OPTIONS,
		TOOL_BATCH_OPTIONS,
		{"draws", required_argument, NULL, O_DRAWS},
		{"same-batch", no_argument, NULL, O_SAME_BATCH},
		{"recompute", no_argument, NULL, O_RECOMPUTE},
		{"per-layer", no_argument, NULL, O_PER_LAYER},
		{"per-tensor", no_argument, NULL, O_PER_TENSOR},
		{"hist", required_argument, NULL, O_HIST},
		{"ratios", no_argument, NULL, O_RATIOS},
		{"check", required_argument, NULL, O_CHECK},
		{"strict", no_argument, NULL, O_STRICT},
		{"dump-labels", required_argument, NULL, O_DUMP_LABELS},
		TOOL_FORCE_OPTION,
		TOOL_THREADS_OPTION,
		TOOL_LOG_OPTION,
		{"device", required_argument, NULL, O_DEVICE},
		{NULL, 0, NULL, 0}
	};
	struct opts o = {.mode = BY_TYPE};
	struct tool tl;
	struct table tb;
	const char *file;
	char name[4096];
	int opt, modes = 0, rank;

	tool_init(&tl, "sw-sharpness", usage, help, argc, argv);
	tl.run_dirs = TOOL_RUN_DIRS_CKPTS;      /* a run directory: its checkpoints */
	blocksharp_opts_defaults(&o.est);
	tl.mpi_use = "estimates split over the ranks under mpirun";
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case O_DRAWS: o.est.draws = (int)tool_parse_int(&tl, "--draws", optarg, 1, 1 << 20); break;
		case O_SAME_BATCH: o.est.same_batch = 1; break;
		case O_RECOMPUTE: o.est.recompute = 1; break;
		case O_PER_LAYER: o.mode = BY_LAYER; modes++; break;
		case O_PER_TENSOR: o.mode = BY_TENSOR; modes++; break;
		case O_HIST: o.mode = HIST; o.bins = (int)tool_parse_int(&tl, "--hist", optarg, 1, 100000); modes++; break;
		case O_RATIOS: o.mode = RATIOS; modes++; break;
		case O_CHECK:
			if (strcmp(optarg, "principle"))
				tool_usage_error(&tl, "--check: the only check is 'principle'");
			o.check = 1;
			break;
		case O_STRICT: o.strict = 1; break;
		case O_DUMP_LABELS: o.est.dump = optarg; break;
		case O_DEVICE:
			if (sw_device_parse(optarg, &o.est.device) < 0)
				tool_usage_error(&tl, "--device: cpu, cuda or emu");
			break;
		default:
			if (!tool_batch_option(&tl, opt, optarg, &o.est))
				tool_common_option(&tl, opt, optarg);
			break;
		}
	}
	if (modes > 1)
		tool_usage_error(&tl, "--per-layer, --per-tensor, --hist and --ratios exclude each other");
	if (o.strict && !o.check)
		tool_usage_error(&tl, "--strict goes with --check principle");
	tool_files_begin(&tl, optind);
	if (o.est.dump && argc - optind != 1)
		tool_usage_error(&tl, "--dump-labels takes one FILE");
	if (tl.force && !o.est.dump)
		tool_usage_error(&tl, "--force goes with --dump-labels");
	{
		struct sw_err err;
		int rc = comm_init(&argc, &argv, &o.est.comm, &err);
		if (rc) {
			fprintf(stderr, "sw-sharpness: %s\n", err.msg);
			return rc;
		}
	}
	rank = comm_rank(o.est.comm);
	if (rank > 0)
		tl.progress = tl.log = 0;       /* rank 0 tells the progress */
	if (o.est.dump && comm_size(o.est.comm) > 1) {
		if (rank == 0)
			fprintf(stderr, "sw-sharpness: --dump-labels: one process only (not under mpirun)\n");
		comm_finalize(o.est.comm);
		return SW_EUSAGE;
	}
	if (o.mode == BY_LAYER)
		table_init(&tb, stdout, tl.fmt, layer_cols, TOOL_NCOLS(layer_cols));
	else if (o.mode == BY_TENSOR)
		table_init(&tb, stdout, tl.fmt, tensor_cols, TOOL_NCOLS(tensor_cols));
	else if (o.mode == HIST)
		table_init(&tb, stdout, tl.fmt, hist_cols, TOOL_NCOLS(hist_cols));
	else if (o.mode == RATIOS)
		table_init(&tb, stdout, tl.fmt, ratio_cols, TOOL_NCOLS(ratio_cols));
	else
		table_init(&tb, stdout, tl.fmt, type_cols, TOOL_NCOLS(type_cols));
	if (rank == 0)
		table_header(&tb);
	while ((file = tool_next_file_shared(&tl, o.est.comm, name, sizeof name))) {
		struct blocksharp_estimate e;
		struct sw_err err;
		int rc;

		struct pass_progress pp = {&tl, file, &o.est};

		/* not over the checkpoint or the data, nor a file there unless --force */
		if (o.est.dump && tool_check_output_ckpt(&tl, o.est.dump, file, o.est.data))
			break;

		o.est.progress = (struct gnb_progress){pass_done, &pp};
		tool_progress(&tl, "%s: /fisher, or an estimate on %lld tokens x %d draws", file,
			      (long long)o.est.batch_tokens, o.est.draws);
		rc = blocksharp_estimate(file, &o.est, &e, &err);
		tool_progress_done(&tl);
		if (rank > 0 || (rc && e.reporter >= 0 && e.reporter != rank)) {
			tool_shared_failure(&tl, file, rc, e.reporter, rank, &err);
			blocksharp_free(&e);
			continue;
		}
		if (!rc && !selected(&tl, file, &e)) {
			blocksharp_free(&e);
			continue;
		}
		if (!rc)
			rc = print_estimate(&tl, &tb, file, &o, &e, &err);
		if (!rc && o.check) {
			rc = check_principle(&tl, file, &o, &e, &err);
			if (rc == SW_ECHECK) {
				if (!tl.status)
					tl.status = SW_ECHECK;
				rc = 0;
			}
		}
		if (rc)
			tool_error(&tl, file, &err);
		blocksharp_free(&e);
	}
	comm_finalize(o.est.comm);
	return tool_finish(&tl);
}
