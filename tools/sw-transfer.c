/*
 * sw-transfer - norm transfer across a sweep (the optimal-norm paper): the
 * loss-optimal (lr, batch) of each model size and horizon, the output
 * layer's RMS->inf norm there (raw and with the final norm gain folded
 * in), how far log2 of it spreads across groups, and the power laws
 * lr*(D), batch*(D). The numbers come from lib/analysis/transfer.c
 * (transfer_read_ckpt, transfer_read_trace, transfer_analyze,
 * transfer_summarize); this reads the checkpoints, traces, sweep
 * directories or a TSV and prints.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../lib/files/trace.h"
#include "../lib/analysis/transfer.h"
#include "common.h"

static const char usage[] =
	"sw-transfer [--table | --summary] [--check spread=TOL] [--folded]\n"
	"                   [--horizon-tol FRAC] [--json] [--refine] [--log | --quiet]\n"
	"                   [FILE ...]";
static const char help[] =
	"FILE: a checkpoint of each run of a sweep at each horizon; or a run's\n"
	"trace (told by its content), a run at each of its evaluation steps; or a\n"
	"directory: the trace of each run in it and in its directories, or the\n"
	"checkpoints of a run that has none. With '-' (or no FILE), stdin holds\n"
	"file names, one per line, or a TSV whose header names the columns lr\n"
	"batch tokens d_model loss out_norm (out_norm_folded, loss_kind and file\n"
	"optional, others ignored), as --table prints them.\n"
	"\n"
	"Prints one row per model size and horizon (d_model, tokens): its runs, the\n"
	"loss it ranks by, the optimal lr and batch, the loss there, the output\n"
	"norm ||W_out||_{RMS->inf} there, raw and folded with the final norm gain,\n"
	"their log2, whether the optimal lr has a smaller and a larger lr beside\n"
	"it (bracketed), whether it was refined, and the optimal run's file.\n"
	"\n"
	"  --table        one row per run instead (loss against output norm)\n"
	"  --summary      one row per model size, and one for all: the mean, standard\n"
	"                 deviation and spread (max - min) of log2 of the optimal\n"
	"                 norms, and the power laws lr* = a D^e, batch* = b D^f with\n"
	"                 exponents, standard errors and R^2; unbracketed counts the\n"
	"                 optima at the lr grid's edge (bounds, not measurements)\n"
	"  --check spread=TOL  exit 1 when the optimal norms of all groups span more than\n"
	"                 TOL in log2 units\n"
	"  --folded       --check the folded norm instead of the raw one\n"
	"  --horizon-tol FRAC  runs whose tokens lie within FRAC (relative) of a\n"
	"                 group's smallest are one horizon (0: exact)\n"
	"  --refine       refine the optimal lr by the parabola in log2 lr through\n"
	"                 the optimum and its neighbours at the optimal batch\n"
	"  --json         JSON Lines instead of TSV\n"
	TOOL_LOG_HELP
	"  --help, --version\n"
	"See sw-transfer(1).\n";

enum { OPT_TABLE = OPT_TOOL_FIRST, OPT_SUMMARY, OPT_CHECK, OPT_FOLDED, OPT_HORIZON_TOL, OPT_REFINE };

static const char *const group_cols[] = {
	"d_model", "tokens", "runs", "loss_kind", "lr", "batch", "loss", "out_norm",
	"out_norm_folded", "log2_out_norm", "log2_out_norm_folded", "bracketed", "refined", "file"
};
static const char *const run_cols[] = {
	"file", "lr", "batch", "tokens", "d_model", "loss", "loss_kind", "out_norm",
	"out_norm_folded", "log2_out_norm", "optimal"
};
static const char *const summary_cols[] = {
	"d_model", "groups", "log2_out_norm_mean", "log2_out_norm_sd", "log2_out_norm_spread",
	"log2_out_norm_folded_mean", "log2_out_norm_folded_sd", "log2_out_norm_folded_spread",
	"lr_exponent", "lr_exponent_se", "lr_prefactor", "lr_r2",
	"batch_exponent", "batch_exponent_se", "batch_prefactor", "batch_r2", "unbracketed"
};
#define NCOLS(a) ((int)(sizeof a / sizeof a[0]))

struct sweep {
	struct tool *tl;
	struct transfer_run *runs;
	size_t n, cap;
};

/* Keep r (0), or report that memory ran out (-1). */
static int add_run(struct sweep *s, struct transfer_run *r)
{
	if (s->n == s->cap) {
		size_t want = s->cap ? 2 * s->cap : 32;
		struct transfer_run *p = reallocarray(s->runs, want, sizeof *p);
		if (!p) {
			struct sw_err err;
			sw_fail(&err, SW_ESOFTWARE, "out of memory");
			tool_error(s->tl, r->name, &err);
			transfer_run_free(r);
			return -1;
		}
		s->runs = p;
		s->cap = want;
	}
	s->runs[s->n++] = *r;
	return 0;
}

/* A checkpoint, or a trace (by its content): its runs. */
static void read_run_file(struct sweep *s, const char *file)
{
	struct transfer_run r, *runs;
	struct sw_err err;
	size_t n, i;

	tool_progress(s->tl, "%s", file);
	if (!trace_sniff(file, NULL, 0)) {
		if (transfer_read_ckpt(file, &r, &err)) {
			tool_error(s->tl, file, &err);
			transfer_run_free(&r);
			return;
		}
		add_run(s, &r);
		return;
	}
	if (transfer_read_trace(file, &runs, &n, &err)) {
		tool_error(s->tl, file, &err);
		return;
	}
	for (i = 0; i < n && !add_run(s, &runs[i]); i++)
		;
	for (i++; i < n; i++)   /* left when memory ran out */
		transfer_run_free(&runs[i]);
	free(runs);
}

/* A file, or a sweep directory: the traces of its runs (or their
 * checkpoints); a directory with neither is read as a checkpoint (a
 * safetensors directory). */
static void read_file(struct sweep *s, const char *file)
{
	struct stat st;
	struct sw_err err;
	char **files;
	size_t n;

	if (stat(file, &st) < 0 || !S_ISDIR(st.st_mode)) {
		read_run_file(s, file);
		return;
	}
	if (transfer_dir_files(file, &files, &n, &err)) {
		tool_error(s->tl, file, &err);
		return;
	}
	if (!n)
		read_run_file(s, file);
	for (size_t i = 0; i < n; i++)
		read_run_file(s, files[i]);
	transfer_files_free(files, n);
}

/* The TSV on stdin; header is its first line. */
static void read_table(struct sweep *s, const char *header)
{
	struct transfer_cols cols;
	char *line = NULL;
	size_t lineno = 1, cap = 0;
	ssize_t len;

	transfer_table_header(header, &cols);
	while ((len = getline(&line, &cap, stdin)) >= 0) {
		struct transfer_run r;
		struct transfer_cols again;
		struct sw_err err;
		char where[64];

		lineno++;
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (len == 0 || transfer_table_header(line, &again))
			continue;       /* blank, or the header of another table pasted on */
		if (transfer_table_row(&cols, line, lineno, &r, &err)) {
			snprintf(where, sizeof where, "-: line %zu", lineno);
			tool_error(s->tl, r.name ? r.name : where, &err);
			transfer_run_free(&r);
			continue;
		}
		if (add_run(s, &r))
			break;
	}
	if (len < 0)
		tool_stdin_failed(s->tl);
	free(line);
}

/* File names or a TSV on stdin: the first line tells. */
static void read_stdin(struct sweep *s)
{
	struct transfer_cols cols;
	char *line = NULL, missing[128];
	size_t cap = 0;
	ssize_t len;

	int kind = 0;

	/* the first line that is not blank: a header or a name */
	while (kind == 0 && (len = getline(&line, &cap, stdin)) >= 0)
		kind = tool_name_line(s->tl, line, len);
	if (kind < 0) {
		free(line);
		return;
	}
	if (len < 0) {
		tool_stdin_failed(s->tl);
		free(line);
		return;
	}
	if (transfer_table_header(line, &cols)) {
		read_table(s, line);
	} else if (strchr(line, '\t')) {
		struct sw_err err;
		transfer_table_missing(line, missing, sizeof missing);
		sw_fail(&err, SW_EDATA, "a TSV without the columns %s (its header: lr batch tokens d_model loss out_norm)",
			missing);
		tool_error(s->tl, "-", &err);
	} else {
		const char *file;
		read_file(s, line);
		while ((file = tool_next_file(s->tl)))
			read_file(s, file);
	}
	free(line);
}

static void print_groups(struct tool *tl, const struct transfer_group *g, size_t ng,
			 const struct transfer_run *runs)
{
	struct table tb;

	table_init(&tb, stdout, tl->fmt, group_cols, NCOLS(group_cols));
	table_header(&tb);
	for (size_t k = 0; k < ng && !tool_stdout_broken(tl); k++) {
		table_int(&tb, g[k].d_model);
		table_int(&tb, g[k].tokens);
		table_int(&tb, (int64_t)g[k].runs);
		table_str(&tb, g[k].loss_kind);
		table_num(&tb, g[k].lr);
		table_num(&tb, g[k].batch);
		table_num(&tb, g[k].loss);
		table_num(&tb, g[k].out_norm);
		table_num(&tb, g[k].out_norm_folded);
		table_num(&tb, log2(g[k].out_norm));
		table_num(&tb, log2(g[k].out_norm_folded));
		table_int(&tb, g[k].bracketed);
		table_int(&tb, g[k].refined);
		table_str(&tb, runs[g[k].best].name);
		table_end_row(&tb);
	}
}

static void print_runs(struct tool *tl, const struct transfer_run *r, size_t n,
		       const struct transfer_group *g)
{
	struct table tb;

	table_init(&tb, stdout, tl->fmt, run_cols, NCOLS(run_cols));
	table_header(&tb);
	for (size_t i = 0; i < n && !tool_stdout_broken(tl); i++) {
		table_str(&tb, r[i].name);
		table_num(&tb, r[i].lr);
		table_num(&tb, r[i].batch);
		table_int(&tb, r[i].tokens);
		table_int(&tb, r[i].d_model);
		table_num(&tb, r[i].loss);
		table_str(&tb, g[r[i].group].loss_kind);
		table_num(&tb, r[i].out_norm);
		table_num(&tb, r[i].out_norm_folded);
		table_num(&tb, log2(r[i].out_norm));
		table_int(&tb, r[i].optimal);
		table_end_row(&tb);
	}
}

static void print_summary(struct table *tb, const struct transfer_summary *s)
{
	if (s->d_model < 0)
		table_str(tb, "all");
	else
		table_int(tb, s->d_model);
	table_int(tb, (int64_t)s->groups);
	table_num(tb, s->log2_norm_mean);
	table_num(tb, s->log2_norm_sd);
	table_num(tb, s->log2_norm_spread);
	table_num(tb, s->log2_folded_mean);
	table_num(tb, s->log2_folded_sd);
	table_num(tb, s->log2_folded_spread);
	table_num(tb, s->lr_exponent);
	table_num(tb, s->lr_exponent_se);
	table_num(tb, s->lr_prefactor);
	table_num(tb, s->lr_r2);
	table_num(tb, s->batch_exponent);
	table_num(tb, s->batch_exponent_se);
	table_num(tb, s->batch_prefactor);
	table_num(tb, s->batch_r2);
	table_int(tb, (int64_t)s->unbracketed);
	table_end_row(tb);
}

/*
 * The summaries: one per model size, then all (-1). Fit failures are
 * reported when report is set (the all row only when there are several
 * sizes: with one it says what the size's row said).
 */
static void summaries(struct tool *tl, const struct transfer_group *g, size_t ng, int print,
		      int report, struct transfer_summary *all)
{
	size_t nsizes = 0;
	struct table tb;
	struct sw_err err;

	if (print) {
		table_init(&tb, stdout, tl->fmt, summary_cols, NCOLS(summary_cols));
		table_header(&tb);
	}
	for (size_t k = 0; k < ng; k++) {
		struct transfer_summary s;
		if (k > 0 && g[k].d_model == g[k - 1].d_model)
			continue;
		nsizes++;
		if (transfer_summarize(g, ng, g[k].d_model, &s, &err) && report) {
			sw_err_prefix(&err, "d_model %lld", (long long)g[k].d_model);
			tool_error(tl, NULL, &err);
		}
		if (print)
			print_summary(&tb, &s);
	}
	if (transfer_summarize(g, ng, -1, all, &err) && report && nsizes > 1) {
		sw_err_prefix(&err, "all model sizes");
		tool_error(tl, NULL, &err);
	}
	if (print)
		print_summary(&tb, all);
}

/* --check: the optimal norms of all groups within tol (log2 units). */
static void check_spread(struct tool *tl, const struct transfer_group *g,
			 const struct transfer_run *runs, const struct transfer_summary *all,
			 double tol, int folded)
{
	double spread = folded ? all->log2_folded_spread : all->log2_norm_spread;
	const struct transfer_group *lo = &g[folded ? all->folded_min : all->norm_min];
	const struct transfer_group *hi = &g[folded ? all->folded_max : all->norm_max];
	struct sw_err err;

	if (folded && isnan(spread)) {
		sw_fail(&err, SW_EDATA, "check --folded: a group's optimum has no folded norm (no final norm gain)");
		tool_error(tl, NULL, &err);
		return;
	}
	if (!(spread > tol))
		return;
	sw_fail(&err, SW_ECHECK,
		"check: the optimal %s norms of %zu groups span %.4g in log2, more than %g: 2^%.4g at d_model %lld, tokens %lld (%s) to 2^%.4g at d_model %lld, tokens %lld (%s)",
		folded ? "folded output" : "output", all->groups, spread, tol,
		log2(folded ? lo->out_norm_folded : lo->out_norm), (long long)lo->d_model,
		(long long)lo->tokens, runs[lo->best].name,
		log2(folded ? hi->out_norm_folded : hi->out_norm), (long long)hi->d_model,
		(long long)hi->tokens, runs[hi->best].name);
	tool_error(tl, NULL, &err);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		TOOL_LOG_OPTION,
		{"table", no_argument, NULL, OPT_TABLE},
		{"summary", no_argument, NULL, OPT_SUMMARY},
		{"check", required_argument, NULL, OPT_CHECK},
		{"folded", no_argument, NULL, OPT_FOLDED},
		{"horizon-tol", required_argument, NULL, OPT_HORIZON_TOL},
		{"refine", no_argument, NULL, OPT_REFINE},
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, OPT_HELP},
		{"version", no_argument, NULL, OPT_VERSION},
		{NULL, 0, NULL, 0}
	};
	struct transfer_opts o = {0, 0};
	struct transfer_group *g = NULL;
	struct transfer_summary all;
	struct sweep s = {0};
	struct tool tl;
	struct sw_err err;
	size_t ng = 0;
	int opt, table = 0, summary = 0, check = 0, folded = 0;
	double tol = 0;

	tool_init(&tl, "sw-transfer", usage, help, argc, argv);
	s.tl = &tl;
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_TABLE: table = 1; break;
		case OPT_SUMMARY: summary = 1; break;
		case OPT_CHECK:
			check = 1;
			tol = tool_parse_check(&tl, "spread", optarg, 0, 1e300);
			break;
		case OPT_FOLDED: folded = 1; break;
		case OPT_HORIZON_TOL:
			o.horizon_tol = tool_parse_double(&tl, "--horizon-tol", optarg, 0, 1);
			break;
		case OPT_REFINE: o.refine = 1; break;
		default: tool_common_option(&tl, opt, optarg);
		}
	}
	if (table && summary)
		tool_usage_error(&tl, "--table and --summary are two different tables: give one");
	if (folded && !check)
		tool_usage_error(&tl, "--folded goes with --check");
	tool_files_begin(&tl, optind);
	if (tl.from_stdin) {
		read_stdin(&s);
	} else {
		const char *file;
		while ((file = tool_next_file(&tl)))
			read_file(&s, file);
	}
	tool_progress_done(&tl);
	if (transfer_analyze(s.runs, s.n, &o, &g, &ng, &err)) {
		/* no run: nothing to print but the header */
		struct table tb;
		if (!tl.status)
			tool_error(&tl, NULL, &err);
		table_init(&tb, stdout, tl.fmt, table ? run_cols : summary ? summary_cols : group_cols,
			   table ? NCOLS(run_cols) : summary ? NCOLS(summary_cols) : NCOLS(group_cols));
		table_header(&tb);
	} else {
		if (table)
			print_runs(&tl, s.runs, s.n, g);
		else if (!summary)
			print_groups(&tl, g, ng, s.runs);
		summaries(&tl, g, ng, summary, summary, &all);  /* a fit that fails is said only when asked for */
		if (check)
			check_spread(&tl, g, s.runs, &all, tol, folded);
	}
	for (size_t i = 0; i < s.n; i++)
		transfer_run_free(&s.runs[i]);
	free(s.runs);
	free(g);
	return tool_finish(&tl);
}
