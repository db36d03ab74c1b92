/*
 * sw-compare - how every weight matrix changed between checkpoints: the
 * relative change ||B - A||_F / ||A||_F, sigma_max and the stable rank of
 * each and their change, the overlap of the top-k singular subspaces
 * (principal angles), the heavy-tail alpha of each and its change; or a
 * summary per block type and per layer. Of several checkpoints, each
 * against the previous one or the first. Which matrices and their
 * numbers: lib/analysis/compare.c (compare_plan_make, compare_compute,
 * compare_summarize), over lib/analysis/spectrum.c (the spectra and
 * vectors) and lib/analysis/esdfit.c (alpha); this reads the files and
 * prints.
 */
#include <stdlib.h>
#include <string.h>

#include "../lib/analysis/compare.h"
#include "../lib/analysis/matsched.h"
#include "../lib/formats/ckpt.h"
#include "common.h"

static const char usage[] =
	"sw-compare [--json] [--summary] [--against first | previous] [--top-k K]\n"
	"                  [--block LIST] [--expert LIST] [--layer LIST] [--name GLOB]\n"
	"                  [--role LIST] [--threads N] [--log | --quiet] FILE FILE ...";
static const char help[] =
	"How each weight matrix changed from one checkpoint to the next, one row per\n"
	"matrix in both (matched by name) per pair of files: file_a step_a file_b\n"
	"step_b name block role layer expert rows cols k rel_change sigma_max_a\n"
	"sigma_max_b sigma_max_change stable_rank_a stable_rank_b stable_rank_change\n"
	"right_overlap right_min_cos left_overlap left_min_cos alpha_a alpha_b\n"
	"alpha_change. rel_change = ||B-A||_F/||A||_F; the _change of sigma_max and\n"
	"stable_rank is relative (B/A - 1), alpha's a difference; overlap is the mean\n"
	"cos^2 of the principal angles between the top-k singular subspaces, min_cos\n"
	"the cosine of the largest.\n"
	"\n"
	"  --summary      one row per block type and one per layer instead: file_a\n"
	"                 step_a file_b step_b block layer matrices rel_change_mean\n"
	"                 rel_change_max sigma_max_change_mean stable_rank_change_mean\n"
	"                 right_overlap_mean right_overlap_min left_overlap_mean\n"
	"                 left_overlap_min alpha_change_mean\n"
	"  --against R    of three or more files, each against the previous one\n"
	"                 (previous, the default) or the first (first)\n"
	"  --top-k K      the singular subspaces' dimension (" TOOL_STR(COMPARE_TOP_K) "), cut to\n"
	"                 min(rows, cols)\n"
	TOOL_THREADS_HELP
	TOOL_LOG_HELP
	TOOL_SELECT_HELP
	"Matrices in one file only are counted in a line on stderr.\n"
	"See sw-compare(1).\n";

enum { OPT_SUMMARY = OPT_TOOL_FIRST, OPT_AGAINST, OPT_TOP_K };

static const char *const cols[] = {
	"file_a", "step_a", "file_b", "step_b", "name", "block", "role", "layer", "expert", "rows",
	"cols", "k", "rel_change", "sigma_max_a", "sigma_max_b", "sigma_max_change",
	"stable_rank_a", "stable_rank_b", "stable_rank_change", "right_overlap", "right_min_cos",
	"left_overlap", "left_min_cos", "alpha_a", "alpha_b", "alpha_change"
};

static const char *const summary_cols[] = {
	"file_a", "step_a", "file_b", "step_b", "block", "layer", "matrices", "rel_change_mean",
	"rel_change_max", "sigma_max_change_mean", "stable_rank_change_mean", "right_overlap_mean",
	"right_overlap_min", "left_overlap_mean", "left_overlap_min", "alpha_change_mean"
};

struct opts {
	int summary;
	int against_first;
	int64_t top_k;
};

/* One pair of files. */
struct pair_run {
	struct tool *tl;
	struct table *tb;
	const struct opts *o;
	const char *file_a, *file_b;
	struct ckpt *a, *b;
	struct compare_plan plan;
	struct compare_result *res;
	int *ok;
};

/* The cells every row starts with: the two files and their steps. */
static void files_cells(struct pair_run *r)
{
	const struct ckpt_meta *ma = ckpt_meta(r->a), *mb = ckpt_meta(r->b);

	table_str(r->tb, r->file_a);
	tool_step_cell(r->tb, ma->has_step, ma->step);
	table_str(r->tb, r->file_b);
	tool_step_cell(r->tb, mb->has_step, mb->step);
}

static void print_row(struct pair_run *r, const struct sw_tensor_info *t,
		      const struct compare_result *c)
{
	files_cells(r);
	table_str(r->tb, t->name);
	table_str(r->tb, sw_block_name(t->block));
	table_str(r->tb, t->role);
	table_int(r->tb, t->layer);
	table_int(r->tb, t->expert);
	table_int(r->tb, c->rows);
	table_int(r->tb, c->cols);
	table_int(r->tb, c->k);
	table_num(r->tb, c->rel_change);
	table_num(r->tb, c->a.sigma_max);
	table_num(r->tb, c->b.sigma_max);
	table_num(r->tb, c->sigma_max_change);
	table_num(r->tb, c->a.stable_rank);
	table_num(r->tb, c->b.stable_rank);
	table_num(r->tb, c->stable_rank_change);
	table_num(r->tb, c->right_overlap);
	table_num(r->tb, c->right_min_cos);
	table_num(r->tb, c->left_overlap);
	table_num(r->tb, c->left_min_cos);
	table_num(r->tb, c->a.alpha);
	table_num(r->tb, c->b.alpha);
	table_num(r->tb, c->alpha_change);
	table_end_row(r->tb);
}

static void print_summary(struct pair_run *r)
{
	struct compare_group *g;
	struct sw_err err;
	size_t n;

	if (compare_summarize(r->plan.pairs, r->res, r->ok, r->plan.n, &g, &n, &err)) {
		tool_error(r->tl, r->file_b, &err);
		return;
	}
	for (size_t i = 0; i < n && !tool_stdout_broken(r->tl); i++) {
		files_cells(r);
		if (g[i].has_block)
			table_str(r->tb, sw_block_name(g[i].block));
		else
			table_empty(r->tb);
		if (g[i].has_layer)
			table_int(r->tb, g[i].layer);
		else
			table_empty(r->tb);
		table_int(r->tb, (int64_t)g[i].matrices);
		table_num(r->tb, g[i].rel_change_mean);
		table_num(r->tb, g[i].rel_change_max);
		table_num(r->tb, g[i].sigma_max_change_mean);
		table_num(r->tb, g[i].stable_rank_change_mean);
		table_num(r->tb, g[i].right_overlap_mean);
		table_num(r->tb, g[i].right_overlap_min);
		table_num(r->tb, g[i].left_overlap_mean);
		table_num(r->tb, g[i].left_overlap_min);
		table_num(r->tb, g[i].alpha_change_mean);
		table_end_row(r->tb);
	}
	free(g);
}

static int pair_job(void *ctx, size_t k, struct sw_err *err)
{
	struct pair_run *r = ctx;

	return compare_compute(r->a, r->b, &r->plan.pairs[k], r->o->top_k, &r->res[k], err);
}

static const char *pair_name(void *ctx, size_t k)
{
	return ((struct pair_run *)ctx)->plan.pairs[k].info.name;
}

static void pair_emit(void *ctx, size_t k)
{
	struct pair_run *r = ctx;

	r->ok[k] = 1;
	if (!r->o->summary)
		print_row(r, &r->plan.pairs[k].info, &r->res[k]);
}

/* What the plan left out: a line, unless --quiet. */
static void note_unmatched(const struct pair_run *r)
{
	const struct compare_plan *p = &r->plan;

	if (r->tl->quiet || (!p->only_a && !p->only_b))
		return;
	fflush(stdout);
	fprintf(stderr, "%s: %s: not compared: ", r->tl->prog, r->file_b);
	if (p->only_b)
		fprintf(stderr, "%zu %s only here (%s%s)", p->only_b,
			p->only_b == 1 ? "matrix" : "matrices", p->first_only_b,
			p->only_b > 1 ? ", ..." : "");
	if (p->only_a)
		fprintf(stderr, "%s%zu %s only in %s (%s%s)", p->only_b ? ", " : "", p->only_a,
			p->only_a == 1 ? "matrix" : "matrices", r->file_a, p->first_only_a,
			p->only_a > 1 ? ", ..." : "");
	fputc('\n', stderr);
}

static void compare_files(struct pair_run *r)
{
	struct tool_matrix_jobs jobs = {pair_job, pair_name, pair_emit, r};
	struct matsched_item *items = NULL;
	struct sw_err err;
	size_t n;

	if (compare_plan_make(r->a, r->b, &r->tl->sel, &r->plan, &err)) {
		tool_error(r->tl, r->file_b, &err);
		return;
	}
	n = r->plan.n;
	note_unmatched(r);
	if (r->plan.shape_differs) {
		const int64_t *d = r->plan.differs_shape;

		sw_fail(&err, SW_EDATA, "%zu %s of the same name differ%s in shape from %s's (%s: "
			"%lld x %lld there, %lld x %lld here): not compared", r->plan.shape_differs,
			r->plan.shape_differs == 1 ? "matrix" : "matrices",
			r->plan.shape_differs == 1 ? "s" : "", r->file_a, r->plan.first_differs,
			(long long)d[0], (long long)d[1], (long long)d[2], (long long)d[3]);
		tool_error(r->tl, r->file_b, &err);
	}
	tool_selected(r->tl, r->file_b, n, "matrix of both files");
	if (!n && !r->plan.shape_differs && !select_given(&r->tl->sel)) {
		sw_fail(&err, SW_EDATA, "no matrix in common with %s", r->file_a);
		tool_error(r->tl, r->file_b, &err);
	}
	r->res = calloc(n ? n : 1, sizeof *r->res);
	r->ok = calloc(n ? n : 1, sizeof *r->ok);
	items = calloc(n ? n : 1, sizeof *items);
	if (!r->res || !r->ok || !items) {
		sw_fail(&err, SW_ESOFTWARE, "out of memory");
		tool_error(r->tl, r->file_b, &err);
	} else if (n) {
		for (size_t k = 0; k < n; k++)
			compare_pair_cost(&r->plan.pairs[k], &items[k]);
		tool_run_matrices(r->tl, r->file_b, items, n, &jobs);
		if (r->o->summary && !tool_stdout_broken(r->tl))
			print_summary(r);
	}
	free(items);
	free(r->res);
	free(r->ok);
	compare_plan_free(&r->plan);
}

/* A name kept past the next one read (names from stdin share a buffer). */
static char *keep_name(struct tool *tl, const char *file)
{
	char *s = strdup(file);

	if (!s) {
		struct sw_err err;

		sw_fail(&err, SW_ESOFTWARE, "out of memory");
		tool_error(tl, file, &err);
	}
	return s;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		TOOL_COMMON_OPTIONS,
		TOOL_THREADS_OPTION,
		TOOL_LOG_OPTION,
		{"summary", no_argument, NULL, OPT_SUMMARY},
		{"against", required_argument, NULL, OPT_AGAINST},
		{"top-k", required_argument, NULL, OPT_TOP_K},
		{NULL, 0, NULL, 0}
	};
	struct opts o = {0, 0, COMPARE_TOP_K};
	struct ckpt *ck, *ref = NULL;
	char *ref_name = NULL;
	const char *file;
	long opened = 0;
	struct tool tl;
	struct table tb;
	int opt;

	tool_init(&tl, "sw-compare", usage, help, argc, argv);
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_SUMMARY: o.summary = 1; break;
		case OPT_AGAINST:
			if (!strcmp(optarg, "first"))
				o.against_first = 1;
			else if (!strcmp(optarg, "previous"))
				o.against_first = 0;
			else
				tool_usage_error(&tl, "--against takes first or previous, not '%s'", optarg);
			break;
		case OPT_TOP_K:
			o.top_k = tool_parse_int(&tl, "--top-k", optarg, 1, 65536);
			break;
		default: tool_common_option(&tl, opt, optarg);
		}
	}
	if (argc - optind == 1 && strcmp(argv[optind], "-"))
		tool_usage_error(&tl, "one checkpoint: give two or more to compare");
	tool_files_begin(&tl, optind);
	if (o.summary)
		table_init(&tb, stdout, tl.fmt, summary_cols, TOOL_NCOLS(summary_cols));
	else
		table_init(&tb, stdout, tl.fmt, cols, TOOL_NCOLS(cols));
	table_header(&tb);
	while ((ck = tool_next_ckpt(&tl, &file))) {
		struct pair_run r = {&tl, &tb, &o, ref_name, file, ref, ck, {0}, NULL, NULL};

		opened++;
		if (ref)
			compare_files(&r);
		if (ref && o.against_first) {
			ckpt_close(ck);
			continue;
		}
		/* this one is the next file's reference */
		if (ref)
			ckpt_close(ref);
		free(ref_name);
		ref = ck;
		if (!(ref_name = keep_name(&tl, file))) {
			ckpt_close(ref);
			ref = NULL;
			break;
		}
	}
	if (ref)
		ckpt_close(ref);
	free(ref_name);
	if (opened == 1 && !tl.status && !tool_stdout_broken(&tl)) {
		/* from stdin: the count is known only now */
		fprintf(stderr, "%s: one checkpoint: give two or more to compare\n", tl.prog);
		tl.status = SW_EUSAGE;
	}
	return tool_finish(&tl);
}
