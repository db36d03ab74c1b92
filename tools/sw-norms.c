/*
 * sw-norms - operator norms of every weight matrix of checkpoints: the
 * output layer's RMS->inf norm above all (the optimal-norm paper), the
 * hidden layers' RMS->RMS, the input layer's 1->RMS, and the spectral,
 * Frobenius, RMS and max norms. Which rows and how each is computed:
 * lib/analysis/norms.c (norms_plan, norms_compute); this reads the files and prints.
 * --scale-vectors: the norm gains' and multipliers' statistics instead
 * (lib/analysis/scalevec.c).
 */
#include <stdlib.h>

#include "../lib/formats/ckpt.h"
#include "../lib/analysis/matsched.h"
#include "../lib/analysis/norms.h"
#include "../lib/analysis/scalevec.h"
#include "common.h"

static const char usage[] =
	"sw-norms [--json] [--scale-vectors] [--block LIST] [--expert LIST]\n"
	"                [--layer LIST] [--name GLOB] [--role LIST] [--threads N]\n"
	"                [--log | --quiet] [FILE ...]";
static const char help[] =
	"Operator norms of every weight matrix, one row per matrix per file:\n"
	"file step tokens name block role layer rows cols rms_to_inf rms_to_rms\n"
	"one_to_rms spectral frobenius rms max_abs expert (expert: a mixture of\n"
	"experts' expert, else -1). rows and cols are the operator's\n"
	"d_out and d_in (the embedding acts as its transpose). The output head gets\n"
	"a second row, role lm_head_folded, for W_out.diag(final norm gain); a tied\n"
	"head is listed as lm_head.weight computed from the embedding.\n"
	"\n"
	"  --scale-vectors  the norm gains and multipliers instead, one row each:\n"
	"                 file step tokens name block role layer type branch\n"
	"                 placement n mean sd min max anisotropy cv coupling expert\n"
	"                 (max|g|/min|g|, sd/|mean|, and the correlation of |g_i|\n"
	"                 with the column norms of the matrices reading the gain)\n"
	TOOL_THREADS_HELP
	TOOL_LOG_HELP
	TOOL_SELECT_HELP
	"See sw-norms(1).\n";

static const char *const cols[] = {
	"file", "step", "tokens", "name", "block", "role", "layer", "rows", "cols",
	"rms_to_inf", "rms_to_rms", "one_to_rms", "spectral", "frobenius", "rms", "max_abs", "expert"
};

static const char *const scale_cols[] = {
	"file", "step", "tokens", "name", "block", "role", "layer", "type", "branch", "placement",
	"n", "mean", "sd", "min", "max", "anisotropy", "cv", "coupling", "expert"
};

/* The cells every row starts with: the file, its step and tokens, the tensor. */
static void tensor_cells(struct table *tb, const char *file, const struct ckpt_meta *m,
			 const struct sw_tensor_info *t)
{
	table_str(tb, file);
	tool_step_cell(tb, m->has_step, m->step);
	tool_tokens_cell(tb, m->has_step, m->tokens);
	table_str(tb, t->name);
	table_str(tb, sw_block_name(t->block));
	table_str(tb, t->role);
	table_int(tb, t->layer);
}

/* --scale-vectors: one file's rows (scalevec_file) */
static void scale_vectors_file(struct tool *tl, struct table *tb, const char *file,
			       struct ckpt *ck)
{
	const struct ckpt_meta *m = ckpt_meta(ck);
	struct scalevec_row *rows;
	struct sw_err err;
	size_t n;

	if (scalevec_file(ck, &tl->sel, &rows, &n, &err)) {
		tool_error(tl, file, &err);
		return;
	}
	tool_selected(tl, file, n, "scale vector");
	for (size_t k = 0; k < n; k++) {
		const struct sw_tensor_info *t = rows[k].info;
		const struct scalevec_stats *s = &rows[k].stats;

		tensor_cells(tb, file, m, t);
		table_str(tb, t->norm_type == SW_NORM_NONE ? "none" : sw_norm_type_name(t->norm_type));
		table_str(tb, scalevec_branch(t->role));
		table_str(tb, scalevec_placement(t));
		table_int(tb, s->n);
		table_num(tb, s->mean);
		table_num(tb, s->sd);
		table_num(tb, s->min);
		table_num(tb, s->max);
		table_num(tb, s->anisotropy);
		table_num(tb, s->cv);
		table_num(tb, s->coupling);
		table_int(tb, t->expert);
		table_end_row(tb);
	}
	free(rows);
}

/* One row: the file, its step and tokens, the tensor as printed, the norms. */
static void print_row(struct table *tb, const char *file, const struct ckpt_meta *m,
		      const struct sw_tensor_info *t, const struct op_norms *n)
{
	tensor_cells(tb, file, m, t);
	table_int(tb, n->d_out);
	table_int(tb, n->d_in);
	table_num(tb, n->rms_to_inf);
	table_num(tb, n->rms_to_rms);
	table_num(tb, n->one_to_rms);
	table_num(tb, n->spectral);
	table_num(tb, n->frobenius);
	table_num(tb, n->rms);
	table_num(tb, n->max_abs);
	table_int(tb, t->expert);
	table_end_row(tb);
}

/* The rows of one file, computed side by side (tool_run_matrices). */
struct file_rows {
	struct table *tb;
	const char *file;
	struct ckpt *ck;
	const struct norms_row *rows;
	struct norms_cache cache;
	struct op_norms *norms;
};

static int norms_job(void *ctx, size_t k, struct sw_err *err)
{
	struct file_rows *f = ctx;

	return norms_compute(f->ck, &f->rows[k], &f->cache, &f->norms[k], err);
}

static const char *norms_name(void *ctx, size_t k)
{
	return ((struct file_rows *)ctx)->rows[k].info.name;
}

static void norms_emit(void *ctx, size_t k)
{
	struct file_rows *f = ctx;

	print_row(f->tb, f->file, ckpt_meta(f->ck), &f->rows[k].info, &f->norms[k]);
}

static void norms_file(struct tool *tl, struct table *tb, const char *file, struct ckpt *ck)
{
	struct file_rows f = {.tb = tb, .file = file, .ck = ck};
	struct tool_matrix_jobs jobs = {norms_job, norms_name, norms_emit, &f};
	struct matsched_item *items;
	struct norms_row *rows;
	struct sw_err err;
	size_t n;

	if (norms_plan(ck, &tl->sel, &rows, &n, &err)) {
		tool_error(tl, file, &err);
		return;
	}
	tool_selected(tl, file, n, "matrix");   /* rows are of matrices only */
	f.rows = rows;
	f.norms = calloc(n ? n : 1, sizeof *f.norms);
	items = calloc(n ? n : 1, sizeof *items);
	if (!f.norms || !items) {
		sw_fail(&err, SW_ESOFTWARE, "out of memory");
		tool_error(tl, file, &err);
	} else {
		for (size_t k = 0; k < n; k++)
			norms_row_cost(&rows[k], &items[k]);
		tool_run_matrices(tl, file, items, n, &jobs);
	}
	norms_cache_free(&f.cache);
	free(f.norms);
	free(items);
	free(rows);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		TOOL_COMMON_OPTIONS,
		TOOL_THREADS_OPTION,
		TOOL_LOG_OPTION,
		{"scale-vectors", no_argument, NULL, 'S'},
		{NULL, 0, NULL, 0}
	};
	/* the folded head's row (norms_plan) has a role of its own */
	static const char *const own_roles[] = {"lm_head_folded", NULL};
	struct tool tl;
	struct table tb;
	struct ckpt *ck;
	const char *file;
	int opt, scale_vectors = 0;

	tool_init(&tl, "sw-norms", usage, help, argc, argv);
	tl.run_dirs = TOOL_RUN_DIRS_CKPTS;      /* a run directory: its checkpoints */
	select_tool_roles(&tl.sel, own_roles);
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (opt == 'S')
			scale_vectors = 1;
		else
			tool_common_option(&tl, opt, optarg);
	}
	tool_files_begin(&tl, optind);
	if (scale_vectors)
		table_init(&tb, stdout, tl.fmt, scale_cols, TOOL_NCOLS(scale_cols));
	else
		table_init(&tb, stdout, tl.fmt, cols, TOOL_NCOLS(cols));
	table_header(&tb);
	while ((ck = tool_next_ckpt(&tl, &file))) {
		if (scale_vectors)
			scale_vectors_file(&tl, &tb, file, ck);
		else
			norms_file(&tl, &tb, file, ck);
		ckpt_close(ck);
	}
	return tool_finish(&tl);
}
