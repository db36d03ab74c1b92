/*
 * sw-hessian - the loss Hessian of checkpoints on a batch of data, per
 * block of parameters: the top eigenvalues (Lanczos), the trace
 * (Hutchinson) and the spectral density (stochastic Lanczos quadrature),
 * of H, of the Gauss-Newton matrix, or of Adam's preconditioned Hessian,
 * with the edge-of-stability ratio. The work: lib/runs/hessian.c (hessian_run)
 * over the R-operator of lib/model/model.c and lib/analysis/lanczos.c; this parses
 * options and prints.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/runs/hessian.h"
#include "../lib/analysis/lanczos.h"
#include "common.h"

static const char usage[] =
	"sw-hessian [--json] --data FILE [--data-format F] [--batch-tokens N]\n"
	"                  [--seq-len T] [--micro-batch M] [--seed S] [--low-memory]\n"
	"                  [--per-layer | --per-tensor | --whole] [--top K]\n"
	"                  [--max-steps N] [--tol X] [--probes N] [--trace-estimator E]\n"
	"                  [--gauss-newton] [--preconditioned]\n"
	"                  [--density [--slq-vectors V] [--slq-steps M]\n"
	"                  [--grid P [--smooth S]]] [--dump-batch FILE]\n"
	"                  [--eigenvectors FILE] [--force]\n"
	"                  [--threads N] [--log | --quiet] [--device D] [--block LIST]\n"
	"                  [--expert LIST] [--layer LIST] [--name GLOB] [--role LIST]\n"
	"                  FILE ...";
static const char help[] =
	"The loss Hessian of checkpoints on a batch of --data, per block type (and the\n"
	"whole selection, 'all'): file step block nparams lambda_1..lambda_K steps bound\n"
	"trace trace_se trace_per_param lr eos_gd (eos_adam with --preconditioned)\n"
	"tokens (the training tokens behind the checkpoint), lambda_min bound_min (the\n"
	"smallest eigenvalue and its bound; newer, so after tokens).\n"
	"Exact Hessian-vector products (R-operator), restricted to each block.\n"
	"\n"
	TOOL_BATCH_HELP
	"  --seed S           the batch, Lanczos starts and probes (1)\n"
	"  --per-layer        one row per block type per layer\n"
	"  --per-tensor       one row per tensor\n"
	"  --whole            the whole selection alone (one row, 'all')\n"
	"  --top K            eigenvalues per block (3)\n"
	"  --max-steps N      Lanczos products per block at most (100)\n"
	"  --tol X            stop when each top-K residual <= X max|theta| (1e-5)\n"
	"  --probes N         products for the trace (20)\n"
	"  --trace-estimator E  hutchinson (every product a probe) or hutch++ (a\n"
	"                     third sketch the top of the spectrum; not with --density)\n"
	"  --gauss-newton     the Gauss-Newton (Fisher) matrix instead of the Hessian\n"
	"  --preconditioned   P^-1/2 H P^-1/2, P = sqrt(v_hat) + eps from Adam's moments\n"
	"  --density          the spectral density by SLQ: nodes and weights per block:\n"
	"                     file step block ... vector lambda weight tokens\n"
	"  --slq-vectors V    SLQ vectors per block (1); they are also trace probes\n"
	"  --slq-steps M      Lanczos steps per SLQ vector (40)\n"
	"  --grid P           with --density: the Gaussian-smoothed density at P points:\n"
	"                     file step block ... lambda density tokens\n"
	"  --smooth S         its width, relative to the block's node range (0.01)\n"
	"  --dump-batch FILE  the batch's tokens and targets (HDF5)\n"
	"  --eigenvectors FILE  each block's top-K eigenvectors (HDF5: /block_J/v_K/\n"
	"                     TENSOR, in the model's layout; unit norm, sign fixed)\n"
	"  --force            replace an existing --dump-batch or --eigenvectors FILE\n"
	TOOL_THREADS_HELP
	TOOL_LOG_HELP
	TOOL_DEVICE_HELP
	TOOL_SELECT_HELP
	"Memory: 4 copies of the parameters, 2 of one micro-batch's activations, the\n"
	"logits, (max-steps + 1) float32 vectors of the largest block. See sw-hessian(1).\n";

enum {
	O_PER_LAYER = OPT_TOOL_FIRST, O_PER_TENSOR, O_WHOLE, O_TOP, O_MAX_STEPS, O_TOL, O_PROBES, O_GAUSS_NEWTON,
	O_PRECONDITIONED, O_TRACE_ESTIMATOR, O_DENSITY, O_SLQ_VECTORS, O_SLQ_STEPS, O_GRID, O_SMOOTH, O_DUMP_BATCH,
	O_DEVICE, O_EIGENVECTORS
};

#define MAX_COLS 64
#define MAX_TOP 32

struct opts {
	struct hessian_opts h;
	int density, grid;
	double smooth;
};

struct progress {
	struct tool *tl;
	const char *file;
};

static void on_product(void *ctx, const struct hessian_block *b, int index, int count)
{
	struct progress *p = ctx;

	tool_progress(p->tl, "%s: block %d of %d (%s%s%s, %lld parameters): %d products", p->file,
		      index + 1, count, b->block < 0 ? "all" : sw_block_name((enum sw_block)b->block),
		      b->name[0] ? " " : "", b->name, (long long)b->n, b->products);
}

/* The identifying columns of a mode; returns how many. */
static int ident_columns(const struct opts *o, const char **cols)
{
	int n = 0;

	cols[n++] = "file";
	cols[n++] = "step";
	if (o->h.by == HESSIAN_BY_TENSOR)
		cols[n++] = "name";
	cols[n++] = "block";
	if (o->h.by == HESSIAN_BY_TENSOR)
		cols[n++] = "role";
	if (o->h.by != HESSIAN_BY_TYPE && o->h.by != HESSIAN_BY_WHOLE)
		cols[n++] = "layer";
	return n;
}

static int columns(const struct opts *o, const char **cols, char names[MAX_TOP][24])
{
	int n = ident_columns(o, cols);

	if (o->density) {
		if (o->grid) {
			cols[n++] = "lambda";
			cols[n++] = "density";
			cols[n++] = "tokens";
		} else {
			cols[n++] = "vector";
			cols[n++] = "lambda";
			cols[n++] = "weight";
			cols[n++] = "tokens";
		}
		return n;
	}
	cols[n++] = "nparams";
	for (int k = 0; k < o->h.top; k++) {
		snprintf(names[k], sizeof names[k], "lambda_%d", k + 1);
		cols[n++] = names[k];
	}
	cols[n++] = "steps";
	cols[n++] = "bound";
	cols[n++] = "trace";
	cols[n++] = "trace_se";
	cols[n++] = "trace_per_param";
	cols[n++] = "lr";
	cols[n++] = o->h.preconditioned ? "eos_adam" : "eos_gd";
	cols[n++] = "tokens";
	/* newer than tokens: after it, so the columns before keep their numbers */
	cols[n++] = "lambda_min";
	cols[n++] = "bound_min";
	return n;
}

static void row_start(struct table *tb, const char *file, const struct opts *o,
		      const struct hessian_result *r, const struct hessian_block *b)
{
	tool_row_begin(tb, file, r->has_step, r->step);
	if (o->h.by == HESSIAN_BY_TENSOR)
		table_str(tb, b->block < 0 ? "" : b->name);
	table_str(tb, b->block < 0 ? "all" : sw_block_name((enum sw_block)b->block));
	if (o->h.by == HESSIAN_BY_TENSOR)
		table_str(tb, b->block < 0 ? "" : b->role);
	if (o->h.by != HESSIAN_BY_TYPE && o->h.by != HESSIAN_BY_WHOLE) {
		if (b->block < 0)
			table_empty(tb);
		else
			table_int(tb, b->layer);
	}
}

/* --density --grid: the smoothed curve over the nodes' range, widened by
 * 3 widths on each side. */
static int print_grid(struct table *tb, const char *file, const struct opts *o,
		      const struct hessian_result *r, const struct hessian_block *b,
		      struct sw_err *err)
{
	double lo = INFINITY, hi = -INFINITY, s, *x, *y;
	int nvec = 0;

	for (int k = 0; k < b->nodes; k++) {
		lo = fmin(lo, b->node[k]);
		hi = fmax(hi, b->node[k]);
		nvec = b->vec[k] + 1 > nvec ? b->vec[k] + 1 : nvec;
	}
	if (!b->nodes)
		return SW_OK;
	/* a block with one distinct node: a width from its size */
	s = o->smooth * (hi > lo ? hi - lo : fmax(fabs(hi), 1e-30));
	x = malloc((size_t)o->grid * sizeof *x);
	y = malloc((size_t)o->grid * sizeof *y);
	if (!x || !y) {
		free(x);
		free(y);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	lanczos_density(b->node, b->weight, b->nodes, nvec, s, lo - 3 * s, hi + 3 * s, o->grid, x, y);
	for (int p = 0; p < o->grid; p++) {
		row_start(tb, file, o, r, b);
		table_num(tb, x[p]);
		table_num(tb, y[p]);
		tool_row_end(tb, r->has_step, r->tokens);
	}
	free(x);
	free(y);
	return SW_OK;
}

static int print_blocks(struct tool *tl, struct table *tb, const char *file, const struct opts *o,
		      const struct hessian_result *r, struct sw_err *err)
{
	for (int j = 0; j < r->nblocks && !tool_stdout_broken(tl); j++) {
		const struct hessian_block *b = &r->b[j];
		int rc;

		if (o->density && o->grid) {
			if ((rc = print_grid(tb, file, o, r, b, err)))
				return rc;
			continue;
		}
		if (o->density) {
			for (int k = 0; k < b->nodes; k++) {
				row_start(tb, file, o, r, b);
				table_int(tb, b->vec[k]);
				table_num(tb, b->node[k]);
				table_num(tb, b->weight[k]);
				tool_row_end(tb, r->has_step, r->tokens);
			}
			continue;
		}
		row_start(tb, file, o, r, b);
		table_int(tb, b->n);
		for (int k = 0; k < o->h.top; k++)
			table_num(tb, k < b->neig ? b->eig[k] : NAN);
		table_int(tb, b->steps);
		table_num(tb, b->bound);
		table_num(tb, b->trace);
		table_num(tb, b->trace_se);
		table_num(tb, b->trace / (double)b->n);
		table_num(tb, b->lr);
		table_num(tb, b->eos);
		tool_tokens_cell(tb, r->has_step, r->tokens);
		table_num(tb, b->neig ? b->eig_min : NAN);
		table_num(tb, b->neig ? b->bound_min : NAN);
		table_end_row(tb);
		if (!b->converged)
			fprintf(stderr, "%s: %s: %s%s%s: Lanczos stopped after %d products with its residual bound at %.3g (--tol %g of %.3g not reached; raise --max-steps)\n",
				tl->prog, file, b->block < 0 ? "all" : sw_block_name((enum sw_block)b->block),
				b->name[0] ? " " : "", b->name, b->steps, b->bound, o->h.tol,
				b->neig ? fabs(b->eig[0]) : 0.0);
	}
	return SW_OK;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		TOOL_COMMON_OPTIONS,
		TOOL_BATCH_OPTIONS,
		{"per-layer", no_argument, NULL, O_PER_LAYER},
		{"per-tensor", no_argument, NULL, O_PER_TENSOR},
		{"whole", no_argument, NULL, O_WHOLE},
		{"top", required_argument, NULL, O_TOP},
		{"max-steps", required_argument, NULL, O_MAX_STEPS},
		{"tol", required_argument, NULL, O_TOL},
		{"probes", required_argument, NULL, O_PROBES},
		{"trace-estimator", required_argument, NULL, O_TRACE_ESTIMATOR},
		{"gauss-newton", no_argument, NULL, O_GAUSS_NEWTON},
		{"preconditioned", no_argument, NULL, O_PRECONDITIONED},
		{"density", no_argument, NULL, O_DENSITY},
		{"slq-vectors", required_argument, NULL, O_SLQ_VECTORS},
		{"slq-steps", required_argument, NULL, O_SLQ_STEPS},
		{"grid", required_argument, NULL, O_GRID},
		{"smooth", required_argument, NULL, O_SMOOTH},
		{"dump-batch", required_argument, NULL, O_DUMP_BATCH},
		{"eigenvectors", required_argument, NULL, O_EIGENVECTORS},
		TOOL_FORCE_OPTION,
		{"device", required_argument, NULL, O_DEVICE},
		TOOL_THREADS_OPTION,
		TOOL_LOG_OPTION,
		{NULL, 0, NULL, 0}
	};
	struct opts o = {
		.h = {.by = HESSIAN_BY_TYPE, .top = 3,
		      .max_steps = 100, .tol = 1e-5, .probes = 20, .slq_steps = 40},
		.smooth = 0.01,
	};
	const char *cols[MAX_COLS], *file;
	char names[MAX_TOP][24];
	int opt, modes = 0, slq_vectors = 1, slq_given = 0, smooth_given = 0;
	struct tool tl;
	struct table tb;

	tool_init(&tl, "sw-hessian", usage, help, argc, argv);
	tl.run_dirs = TOOL_RUN_DIRS_CKPTS;      /* a run directory: its checkpoints */
	blocksharp_opts_defaults(&o.h.data);
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case O_PER_LAYER: o.h.by = HESSIAN_BY_LAYER; modes++; break;
		case O_PER_TENSOR: o.h.by = HESSIAN_BY_TENSOR; modes++; break;
		case O_WHOLE: o.h.by = HESSIAN_BY_WHOLE; modes++; break;
		case O_TOP: o.h.top = (int)tool_parse_int(&tl, "--top", optarg, 1, MAX_TOP); break;
		case O_MAX_STEPS: o.h.max_steps = (int)tool_parse_int(&tl, "--max-steps", optarg, 1, 100000); break;
		case O_TOL: o.h.tol = tool_parse_double(&tl, "--tol", optarg, 0, 1); break;
		case O_PROBES: o.h.probes = (int)tool_parse_int(&tl, "--probes", optarg, 0, 1 << 20); break;
		case O_TRACE_ESTIMATOR:
			if (!strcmp(optarg, "hutch++"))
				o.h.hutchpp = 1;
			else if (!strcmp(optarg, "hutchinson"))
				o.h.hutchpp = 0;
			else
				tool_usage_error(&tl, "--trace-estimator: hutchinson or hutch++");
			break;
		case O_GAUSS_NEWTON: o.h.gauss_newton = 1; break;
		case O_PRECONDITIONED: o.h.preconditioned = 1; break;
		case O_DENSITY: o.density = 1; break;
		case O_SLQ_VECTORS:
			slq_vectors = (int)tool_parse_int(&tl, "--slq-vectors", optarg, 1, 1 << 16);
			slq_given = 1;
			break;
		case O_SLQ_STEPS:
			o.h.slq_steps = (int)tool_parse_int(&tl, "--slq-steps", optarg, 1, 100000);
			slq_given = 1;
			break;
		case O_GRID: o.grid = (int)tool_parse_int(&tl, "--grid", optarg, 2, 1 << 20); break;
		case O_SMOOTH:
			o.smooth = tool_parse_double(&tl, "--smooth", optarg, 1e-9, 1e9);
			smooth_given = 1;
			break;
		case O_DUMP_BATCH: o.h.dump = optarg; break;
		case O_EIGENVECTORS: o.h.eigvecs = optarg; break;
		case O_DEVICE:
			if (sw_device_parse(optarg, &o.h.data.device) < 0)
				tool_usage_error(&tl, "--device: cpu, cuda or emu");
			break;
		default:
			if (!tool_batch_option(&tl, opt, optarg, &o.h.data))
				tool_common_option(&tl, opt, optarg);
			break;
		}
	}
	if (modes > 1)
		tool_usage_error(&tl, "--per-layer, --per-tensor and --whole exclude each other");
	if (!o.h.data.data)
		tool_usage_error(&tl, "--data FILE: the tokens the loss is computed on");
	if (o.h.gauss_newton && o.h.preconditioned)
		tool_usage_error(&tl, "--gauss-newton and --preconditioned exclude each other");
	if (!o.density && (slq_given || o.grid))
		tool_usage_error(&tl, "--slq-vectors, --slq-steps and --grid go with --density");
	if (smooth_given && !o.grid)
		tool_usage_error(&tl, "--smooth goes with --grid");
	if (o.h.hutchpp && (o.density || o.h.probes < 3))
		tool_usage_error(&tl, "--trace-estimator hutch++ takes --probes 3 or more, and no --density");
	if (o.density)
		o.h.density = slq_vectors;
	tool_files_begin(&tl, optind);
	if (o.h.dump && argc - optind != 1)
		tool_usage_error(&tl, "--dump-batch takes one FILE");
	if (o.h.eigvecs && argc - optind != 1)
		tool_usage_error(&tl, "--eigenvectors takes one FILE");
	if (o.h.eigvecs && o.density)
		tool_usage_error(&tl, "--eigenvectors goes without --density");
	if (o.h.eigvecs && o.h.dump && !strcmp(o.h.eigvecs, o.h.dump))
		tool_usage_error(&tl, "--eigenvectors and --dump-batch name one file");
	if (tl.force && !o.h.dump && !o.h.eigvecs)
		tool_usage_error(&tl, "--force goes with --dump-batch or --eigenvectors");
	table_init(&tb, stdout, tl.fmt, cols, columns(&o, cols, names));
	table_header(&tb);
	while ((file = tool_next_file(&tl)) && !tool_stdout_broken(&tl)) {
		struct progress p = {&tl, file};
		struct hessian_result r;
		struct sw_err err;
		int rc;

		/* not over the checkpoint or the data, nor a file there unless --force */
		if (o.h.dump && tool_check_output_ckpt(&tl, o.h.dump, file, o.h.data.data))
			break;
		if (o.h.eigvecs && tool_check_output_ckpt(&tl, o.h.eigvecs, file, o.h.data.data))
			break;

		tool_progress(&tl, "%s: loading the model and a batch of %lld tokens", file,
			      (long long)o.h.data.batch_tokens);
		rc = hessian_run(file, &tl.sel, &o.h, on_product, &p, &r, &err);
		tool_progress_done(&tl);
		if (!rc) {
			tool_selected(&tl, file, (size_t)r.selected, "tensor");
			rc = print_blocks(&tl, &tb, file, &o, &r, &err);
		}
		if (rc)
			tool_error(&tl, file, &err);
		hessian_free(&r);
	}
	return tool_finish(&tl);
}
