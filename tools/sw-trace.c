/*
 * sw-trace - print the trace of a training run: the series sw-train
 * appends (loss, lr, per-layer and per-head quantities) as TSV or JSON
 * Lines, one row per traced step, all series or those named with
 * --series; with --follow, the rows a running trainer appends, until it
 * closes the trace. lib/files/trace.c reads the file; this chooses the columns
 * and prints them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/base/grow.h"
#include "../lib/files/trace.h"
#include "common.h"

static const char usage[] =
	"sw-trace [--series LIST] [--list] [--every N] [--json] [TRACE ...]\n"
	"       sw-trace --follow [--wait S] [--series LIST] [--every N] [--json] TRACE";
static const char help[] =
	"Prints a trace, one row per traced step: step, then the selected series\n"
	"(all by default). A per-layer or per-head series gives one column per named\n"
	"column, SERIES.COLUMN (residual_rms.layer0). Unknown values are empty (null\n"
	"in JSON). With several traces, or their names on stdin, each row starts\n"
	"with its file, as grep names the file of each line; every trace must then\n"
	"have the first one's columns (--series chooses common ones).\n"
	"\n"
	"  --series LIST  only these series or columns (loss,lr,residual_rms.layer0)\n"
	"  --list         the series and their columns instead of the rows\n"
	"  --follow       go on printing the rows a running writer appends, until it\n"
	"                 closes the trace (or dies); exit 74 if another writer takes\n"
	"                 the trace over (a resumed run) or it is replaced\n"
	"  --wait S       with --follow: wait up to S seconds for TRACE to appear (a\n"
	"                 run just started), then follow it\n"
	"  --every N      one row per N steps: the first at or after each multiple of N\n"
	"  --json         JSON Lines instead of TSV\n"
	"  --help, --version\n"
	"With no TRACE, or TRACE '-', trace names are read from stdin, one per line.\n"
	"See sw-trace(1).\n";

enum { OPT_SERIES = OPT_TOOL_FIRST, OPT_LIST, OPT_FOLLOW, OPT_EVERY, OPT_WAIT };

#define POLL_NS    200000000L   /* --follow looks for new rows 5 times a second */
#define READ_CELLS (1 << 20)    /* values read per block of rows */

/* A printed value: column col of series (0 for a scalar series). */
struct cell {
	int series;
	int col;
};

struct printer {
	struct tool *tl;
	const char *file;
	struct trace_reader *r;
	struct table *tb;       /* one table for every trace printed */
	int with_file;          /* each row starts with the file (several traces) */
	char **header;          /* (1 + ncells) "step", then "loss", "residual_rms.layer0", ... */
	struct cell *cells;     /* (ncells) */
	int ncells;
	size_t cells_cap, header_cap;
	unsigned char **chosen; /* per series: which of its columns are printed (--series) */
	double **buf;           /* per series of the trace: a block of its rows, or NULL */
	int64_t *steps;         /* (block) */
	int64_t block;          /* rows per read */
	int64_t every;          /* --every, 0: every row */
	int64_t next_mark;      /* with --every: the next row printed is at or after it */
	int marked;
};

/* "a, b, c" from the first names, shortened with "..." past ~200 chars. */
static void name_list(char *buf, size_t len, int n, const char *(*name)(void *, int), void *ctx)
{
	size_t used = 0;

	buf[0] = '\0';
	for (int i = 0; i < n && used + 4 < len; i++) {
		int w = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", name(ctx, i));
		if (w < 0 || used + (size_t)w >= 200 || used + (size_t)w >= len) {
			snprintf(buf + used, len - used, "%s...", i ? ", " : "");
			return;
		}
		used += (size_t)w;
	}
}

static const char *series_name_at(void *r, int i) { return trace_series_name(r, i); }

struct column_ctx {
	struct trace_reader *r;
	int series;
};

static const char *column_name_at(void *ctx, int j)
{
	struct column_ctx *c = ctx;
	return trace_column_name(c->r, c->series, j);
}

/* Column col of series to print, once: a name given twice (--series
 * loss,loss or residual_rms,residual_rms.layer0) prints where it was
 * first given, as cut -f 1,1 prints a field once, so that no name heads
 * two columns (JSON with a key twice). */
static int add_cell(struct printer *p, int series, int col, struct sw_err *err)
{
	const char *name = trace_series_name(p->r, series);
	int ncols = trace_series_ncols(p->r, series);
	size_t len;
	char *h;

	if (!p->chosen[series] && !(p->chosen[series] = calloc((size_t)(ncols ? ncols : 1), 1)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	if (p->chosen[series][col])
		return SW_OK;
	p->chosen[series][col] = 1;
	if (SW_GROW(p->cells, &p->cells_cap, (size_t)p->ncells + 1) < 0 ||
	    SW_GROW(p->header, &p->header_cap, (size_t)p->ncells + 2) < 0)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	if (ncols == 0) {
		h = strdup(name);
	} else {
		const char *cname = trace_column_name(p->r, series, col);
		len = strlen(name) + strlen(cname) + 2;
		if ((h = malloc(len)))
			snprintf(h, len, "%s.%s", name, cname);
	}
	if (!h)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	p->header[1 + p->ncells] = h;
	p->cells[p->ncells].series = series;
	p->cells[p->ncells].col = col;
	p->ncells++;
	return SW_OK;
}

static int add_series(struct printer *p, int i, struct sw_err *err)
{
	int ncols = trace_series_ncols(p->r, i), rc = SW_OK;

	for (int j = 0; j < (ncols ? ncols : 1) && !rc; j++)
		rc = add_cell(p, i, j, err);
	return rc;
}

/* One --series item: a series ("loss", "residual_rms"), or one column of
 * a 2-D series ("residual_rms.layer0"). "step" is always printed. */
static int add_selection(struct printer *p, const char *item, struct sw_err *err)
{
	char names[256];
	int i;

	if (!strcmp(item, "step"))
		return SW_OK;
	if ((i = trace_find_series(p->r, item)) >= 0)
		return add_series(p, i, err);
	for (const char *dot = strchr(item, '.'); dot; dot = strchr(dot + 1, '.')) {
		char *prefix = strndup(item, (size_t)(dot - item));
		if (!prefix)
			return sw_fail(err, SW_ESOFTWARE, "out of memory");
		i = trace_find_series(p->r, prefix);
		free(prefix);
		if (i < 0 || trace_series_ncols(p->r, i) == 0)
			continue;
		for (int j = 0; j < trace_series_ncols(p->r, i); j++)
			if (!strcmp(trace_column_name(p->r, i, j), dot + 1))
				return add_cell(p, i, j, err);
		struct column_ctx ctx = {p->r, i};
		name_list(names, sizeof names, trace_series_ncols(p->r, i), column_name_at, &ctx);
		return sw_fail(err, SW_EDATA, "series '%s' has no column '%s' (its columns: %s)",
			       trace_series_name(p->r, i), dot + 1, names);
	}
	name_list(names, sizeof names, trace_nseries(p->r), series_name_at, p->r);
	return sw_fail(err, SW_EDATA, "no series '%s' (the trace has: %s)", item,
		       trace_nseries(p->r) ? names : "none");
}

/* The cells to print (from the --series lists, or every series), the
 * header, and buffers for a block of rows of each series read. */
static int plan(struct printer *p, char **lists, int nlists, struct sw_err *err)
{
	int n = trace_nseries(p->r), rc = SW_OK;
	unsigned char *read = NULL;   /* per series: printed, so read */
	int64_t width = 0;

	if (SW_GROW(p->header, &p->header_cap, 1) < 0)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	p->header[0] = NULL;    /* before any failure: the cleanup frees header[0 .. ncells] */
	if (!(p->buf = calloc((size_t)(n ? n : 1), sizeof *p->buf)) ||
	    !(p->chosen = calloc((size_t)(n ? n : 1), sizeof *p->chosen)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (int k = 0; k < nlists && !rc; k++) {
		char *save = NULL, *copy = strdup(lists[k]);
		if (!copy)
			return sw_fail(err, SW_ESOFTWARE, "out of memory");
		for (char *item = strtok_r(copy, ",", &save); item && !rc;
		     item = strtok_r(NULL, ",", &save))
			rc = add_selection(p, item, err);
		free(copy);
	}
	for (int i = 0; i < n && !nlists && !rc; i++)
		rc = add_series(p, i, err);
	if (rc)
		return rc;
	if (!(p->header[0] = strdup("step")) || !(read = calloc((size_t)(n ? n : 1), 1)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (int c = 0; c < p->ncells; c++) {
		int i = p->cells[c].series, ncols = trace_series_ncols(p->r, i);
		width += read[i] ? 0 : ncols ? ncols : 1;
		read[i] = 1;
	}
	p->block = READ_CELLS / (width ? width : 1);
	p->block = p->block < 1 ? 1 : p->block > 4096 ? 4096 : p->block;
	p->steps = malloc((size_t)p->block * sizeof *p->steps);
	for (int i = 0; i < n && p->steps && !rc; i++) {
		int ncols = trace_series_ncols(p->r, i);
		if (read[i] && !(p->buf[i] = malloc((size_t)p->block * (size_t)(ncols ? ncols : 1) *
						    sizeof(double))))
			rc = SW_ESOFTWARE;
	}
	free(read);
	if (!p->steps || rc)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	return SW_OK;
}

static void printer_free(struct printer *p)
{
	int n = p->r ? trace_nseries(p->r) : 0;

	for (int i = 0; p->buf && i < n; i++)
		free(p->buf[i]);
	free(p->buf);
	for (int i = 0; p->chosen && i < n; i++)
		free(p->chosen[i]);
	free(p->chosen);
	for (int c = 0; p->header && c <= p->ncells; c++)
		free(p->header[c]);
	free(p->header);
	free(p->cells);
	free(p->steps);
}

/* --every N: print the first row at or after each multiple of N steps. */
static int every_keeps(struct printer *p, int64_t step)
{
	int64_t q;

	if (!p->every)
		return 1;
	if (p->marked && step < p->next_mark)
		return 0;
	q = step / p->every - (step % p->every < 0);   /* floor, also below 0 */
	p->next_mark = q > INT64_MAX / p->every - 1 ? INT64_MAX : (q + 1) * p->every;
	p->marked = 1;
	return 1;
}

/* Print rows [from, to); SW_OK, or an error reported and returned. */
static int print_rows(struct printer *p, int64_t from, int64_t to)
{
	struct sw_err err;
	int rc;

	for (int64_t row0 = from; row0 < to && !tool_stdout_broken(p->tl); row0 += p->block) {
		int64_t n = to - row0 < p->block ? to - row0 : p->block;
		if ((rc = trace_read_steps(p->r, row0, n, p->steps, &err)))
			goto fail;
		for (int i = 0; i < trace_nseries(p->r); i++)
			if (p->buf[i] && (rc = trace_read(p->r, i, row0, n, p->buf[i], &err)))
				goto fail;
		/* read while no other writer took the trace over: then print */
		if ((rc = trace_verify(p->r, &err)))
			goto fail;
		for (int64_t k = 0; k < n; k++) {
			if (!every_keeps(p, p->steps[k]))
				continue;
			if (p->with_file)
				table_str(p->tb, p->file);
			table_int(p->tb, p->steps[k]);
			for (int c = 0; c < p->ncells; c++) {
				int i = p->cells[c].series, ncols = trace_series_ncols(p->r, i);
				table_double(p->tb, p->buf[i][k * (ncols ? ncols : 1) + p->cells[c].col]);
			}
			if (table_end_row(p->tb) < 0)
				return SW_OK;   /* stdout failed: tool_finish says why */
		}
	}
	return SW_OK;
fail:
	tool_error(p->tl, p->file, &err);
	return rc;
}

/* --wait: trace_open until the trace is there, a trace (a writer that
 * has just created it may not have written its header yet), or wait_s
 * have passed; the last refusal then. */
static int open_waiting(const char *file, double wait_s, struct trace_reader **r, struct sw_err *err)
{
	const struct timespec poll = {0, POLL_NS};
	struct timespec t0, now;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if ((rc = trace_open(file, r, err)) != SW_ENOINPUT && rc != SW_EDATA)
			return rc;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec) >= wait_s)
			return rc;
		nanosleep(&poll, NULL);
	}
}

/* --follow: print what is there, then what a running writer appends,
 * until it closes the trace or is gone without closing it; or stop with
 * an error (trace_refresh, trace_verify) when the trace is replaced or
 * another writer takes it over, never printing that one's rows. */
static void follow(struct printer *p, int64_t done)
{
	const struct timespec poll = {0, POLL_NS};
	struct sw_err err;
	int finished = 0;

	if (trace_refresh(p->r, &finished, &err)) {     /* closed already? */
		tool_error(p->tl, p->file, &err);
		return;
	}
	for (;;) {
		int64_t rows = trace_rows(p->r);
		int gone;

		if (print_rows(p, done, rows))
			return;
		done = rows;
		if (fflush(stdout) != 0 || tool_stdout_broken(p->tl) || finished)
			return;
		nanosleep(&poll, NULL);
		/* asked before the refresh, so that the rows a dying writer
		 * flushed are still printed */
		gone = trace_abandoned(p->r);
		if (trace_refresh(p->r, &finished, &err)) {
			tool_error(p->tl, p->file, &err);
			return;
		}
		if (gone && !finished) {
			if (print_rows(p, done, trace_rows(p->r)))
				return;
			fflush(stdout);
			fprintf(stderr, "%s: %s: the writer is gone without closing the trace "
				"(killed?); stopped following\n", p->tl->prog, p->file);
			return;
		}
	}
}

/* --list: one row per series: its name, column count and columns; file
 * first when not NULL (several traces). */
static void list_series(struct tool *tl, struct table *tb, const char *file,
			struct trace_reader *r)
{
	for (int i = 0; i < trace_nseries(r) && !tool_stdout_broken(tl); i++) {
		int ncols = trace_series_ncols(r, i);
		size_t len = 1;
		char *joined;

		if (file)
			table_str(tb, file);
		table_str(tb, trace_series_name(r, i));
		table_int(tb, ncols);
		for (int j = 0; j < ncols; j++)
			len += strlen(trace_column_name(r, i, j)) + 1;
		if (ncols && (joined = calloc(1, len))) {
			for (int j = 0; j < ncols; j++) {
				if (j)
					strcat(joined, ",");
				strcat(joined, trace_column_name(r, i, j));
			}
			table_str(tb, joined);
			free(joined);
		} else {
			table_empty(tb);
		}
		table_end_row(tb);
	}
}

/* The first trace's columns, kept (with its name) for the table's header
 * and to compare the other traces' with. */
static int keep_columns(const struct printer *p, char ***first, int *nfirst, char **first_file,
			const char ***cols, struct sw_err *err)
{
	int n = 1 + p->ncells;

	*first = calloc((size_t)n, sizeof **first);
	*cols = calloc((size_t)n + 1, sizeof **cols);
	*first_file = strdup(p->file);
	if (!*first || !*cols || !*first_file)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	(*cols)[0] = "file";
	for (int c = 0; c < n; c++) {
		if (!((*first)[c] = strdup(p->header[c])))
			return sw_fail(err, SW_ESOFTWARE, "out of memory");
		(*nfirst)++;
		(*cols)[1 + c] = (*first)[c];
	}
	return SW_OK;
}

/* Has p the columns of the first trace, in its order? */
static int same_columns(const struct printer *p, char **first, int nfirst)
{
	if (1 + p->ncells != nfirst)
		return 0;
	for (int c = 0; c < nfirst; c++)
		if (strcmp(p->header[c], first[c]))
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"series", required_argument, NULL, OPT_SERIES},
		{"list", no_argument, NULL, OPT_LIST},
		{"follow", no_argument, NULL, OPT_FOLLOW},
		{"every", required_argument, NULL, OPT_EVERY},
		{"wait", required_argument, NULL, OPT_WAIT},
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, OPT_HELP},
		{"version", no_argument, NULL, OPT_VERSION},
		{NULL, 0, NULL, 0}
	};
	static const char *const list_cols[] = {"file", "series", "ncols", "columns"};
	const char **cols = NULL;       /* the table's: "file", then the first trace's */
	char **first = NULL;            /* the first trace's columns, "step" ... */
	char *first_file = NULL;
	int nfirst = 0;
	const char *file;
	struct table tb;
	struct tool tl;
	struct sw_err err;
	char **lists;
	int64_t every = 0;
	double wait_s = -1;             /* --wait; -1: not given */
	int nlists = 0, list = 0, want_follow = 0, opt, several, printed = 0;

	tool_init(&tl, "sw-trace", usage, help, argc, argv);
	tl.run_dirs = TOOL_RUN_DIRS_TRACE;      /* a run directory: its trace */
	lists = calloc((size_t)argc, sizeof *lists);
	if (!lists)
		return SW_ESOFTWARE;
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_SERIES:
			if (!optarg[0] || optarg[0] == ',' || optarg[strlen(optarg) - 1] == ',' ||
			    strstr(optarg, ",,"))
				tool_usage_error(&tl, "--series: '%s' has an empty name", optarg);
			lists[nlists++] = optarg;
			break;
		case OPT_LIST: list = 1; break;
		case OPT_FOLLOW: want_follow = 1; break;
		case OPT_EVERY: every = tool_parse_int(&tl, "--every", optarg, 1, INT64_MAX); break;
		case OPT_WAIT: wait_s = tool_parse_double(&tl, "--wait", optarg, 0, 1e9); break;
		default: tool_common_option(&tl, opt, optarg); break;
		}
	}
	if (list && (nlists || want_follow || every))
		tool_usage_error(&tl, "--list prints the series, not rows: no --series, --follow or --every with it");
	if (want_follow && (argc - optind != 1 || !strcmp(argv[optind], "-")))
		tool_usage_error(&tl, "--follow follows one TRACE, named");
	if (wait_s >= 0 && !want_follow)
		tool_usage_error(&tl, "--wait waits for the trace --follow follows: give --follow");
	tool_files_begin(&tl, optind);
	/* as grep names the file of each line only when given several */
	several = tl.from_stdin || argc - optind > 1;
	while ((file = tool_next_file(&tl))) {
		struct printer p = {0};
		int rc = SW_OK;

		p.tl = &tl;
		p.file = file;
		p.every = every;
		p.tb = &tb;
		p.with_file = several;
		if (wait_s >= 0 ? open_waiting(file, wait_s, &p.r, &err) : trace_open(file, &p.r, &err)) {
			tool_error(&tl, file, &err);
		} else if (list) {
			if (!printed++) {
				table_init(&tb, stdout, tl.fmt, several ? list_cols : list_cols + 1,
					   several ? 4 : 3);
				table_header(&tb);
			}
			list_series(&tl, &tb, several ? file : NULL, p.r);
		} else if ((rc = plan(&p, lists, nlists, &err)) == SW_OK && !printed) {
			if ((rc = keep_columns(&p, &first, &nfirst, &first_file, &cols, &err)) == SW_OK) {
				table_init(&tb, stdout, tl.fmt, several ? cols : cols + 1,
					   nfirst + (several ? 1 : 0));
				table_header(&tb);
				printed = 1;
			}
		} else if (rc == SW_OK && !same_columns(&p, first, nfirst)) {
			rc = sw_fail(&err, SW_EDATA, "its series are not those of %s: choose common ones "
				     "with --series", first_file);
		}
		if (p.r && !list && rc)
			tool_error(&tl, file, &err);
		else if (p.r && !list && want_follow)
			follow(&p, 0);
		else if (p.r && !list)
			print_rows(&p, 0, trace_rows(p.r));
		printer_free(&p);
		trace_reader_close(p.r);
	}
	for (int c = 0; c < nfirst; c++)
		free(first[c]);
	free(first);
	free(first_file);
	free(cols);
	free(lists);
	return tool_finish(&tl);
}
