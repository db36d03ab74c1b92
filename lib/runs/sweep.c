/* sweep.c - a grid of sw-train runs in one directory (see sweep.h). */
#include "sweep.h"
#include "../base/atomicfile.h"
#include "../base/grow.h"
#include "rundir.h"
#include "train.h"
#include "trainopts.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const options[SWEEP_AXES] = {"lr", "batch", "wd", "d-model", "tokens"};
static const char *const columns[SWEEP_AXES] = {"lr", "batch", "wd", "d_model", "tokens"};
static const char *const tags[SWEEP_AXES] = {"lr", "b", "wd", "d", "t"};

/* A growing text buffer. */
struct text {
	char *p;
	size_t n, cap;
	int oom;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (t->oom || n < 0)
		return;
	if (SW_GROW(t->p, &t->cap, t->n + (size_t)n + 1) < 0) {
		t->oom = 1;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(t->p + t->n, t->cap - t->n, fmt, ap);
	va_end(ap);
	t->n += (size_t)n;
}

const char *sweep_axis_option(int axis) { return options[axis]; }
const char *sweep_axis_column(int axis) { return columns[axis]; }

const char *sweep_state_name(enum sweep_state st)
{
	return st == SWEEP_DONE ? "done" : st == SWEEP_PARTIAL ? "partial" : "new";
}

/* sw-train's option for the axis (trainopts' table owns its bounds and
 * parse); -1 for tokens, sw-sweep's own */
static int axis_option(int axis)
{
	return axis == SWEEP_TOKENS ? -1 : trainopts_find(options[axis]);
}

/* --tokens: a run's training tokens, a whole number */
#define SWEEP_TOKENS_MAX 1000000000000000LL

/* One value of an axis, parsed as sw-train parses its option, or as a
 * count of tokens; its number in *x. */
static int axis_value(int axis, const char *v, double *x, struct sw_err *err)
{
	struct trainopts o;
	long long t;
	int rc, id = axis_option(axis);

	if (id < 0) {
		rc = trainopts_int("--tokens", v, 1, SWEEP_TOKENS_MAX, &t, err);
		*x = (double)t;
		return rc;
	}
	trainopts_init(&o);
	if ((rc = trainopts_set(&o, id, v, err)))
		return rc;
	*x = strtod(v, NULL);   /* as checked: a decimal number */
	return SW_OK;
}

int sweep_set_axis(struct sweep *s, int axis, const char *list, struct sw_err *err)
{
	const char *p = list;
	double xs[SWEEP_MAX_VALUES];
	int rc;

	s->nvalues[axis] = 0;
	for (;;) {
		size_t n = strcspn(p, ",");
		char v[SWEEP_VALUE_MAX];

		if (n == 0 || n >= sizeof v)
			return sw_fail(err, SW_EUSAGE, "--%s: '%.*s' is not a value", options[axis], (int)n, p);
		memcpy(v, p, n);
		v[n] = '\0';
		if (s->nvalues[axis] == SWEEP_MAX_VALUES)
			return sw_fail(err, SW_EUSAGE, "--%s: more than %d values", options[axis], SWEEP_MAX_VALUES);
		if ((rc = axis_value(axis, v, &xs[s->nvalues[axis]], err)))
			return rc;
		/* the value names its run and its directory: digits, a point,
		 * an exponent, a sign; nothing a file name or a shell minds */
		if (strspn(v, "0123456789.eE+-") != n)
			return sw_fail(err, SW_EUSAGE, "--%s: '%s': a swept value is written with digits, '.', 'e', "
				       "'+' and '-' (it names its run)", options[axis], v);
		for (int i = 0; i < s->nvalues[axis]; i++)
			if (xs[i] == xs[s->nvalues[axis]])
				return sw_fail(err, SW_EUSAGE, "--%s: %s given twice (as %s)", options[axis], v,
					       s->values[axis][i]);
		strcpy(s->values[axis][s->nvalues[axis]++], v);
		if (!p[n])
			return SW_OK;
		p += n + 1;
	}
}

/* Among o's options, those sw-sweep sets: --out (outs times: the run's
 * directory once in a command, none among the common options),
 * --resume and --force (it adds them as the run's state says), --trace
 * but '' (a run's trace is its RUN/trace.h5). SW_EUSAGE naming one. */
static int sweeps_own(const struct trainopts *o, int outs, struct sw_err *err)
{
	static const int ours[] = {TRAINOPT_OUT, TRAINOPT_RESUME, TRAINOPT_FORCE};

	if (outs && o->given[TRAINOPT_OUT] != outs)
		return sw_fail(err, SW_EUSAGE, "--out given %d times, not once", o->given[TRAINOPT_OUT]);
	for (size_t i = outs ? 1 : 0; i < sizeof ours / sizeof ours[0]; i++)
		if (o->given[ours[i]])
			return sw_fail(err, SW_EUSAGE, "--%s is sw-sweep's to set, not a sw-train option here",
				       trainopts_table[ours[i]].name);
	if (o->tc.trace_path && o->tc.trace_path[0])
		return sw_fail(err, SW_EUSAGE, "--trace %s: each run's trace is its RUN/trace.h5 (--trace '' for none)",
			       o->tc.trace_path);
	return SW_OK;
}

/* A sweep's sw-train command, args[0..n) (after the program's name), as
 * sw-train reads it (trainopts, the one parser) into o, and what sw-sweep
 * sets in it. SW_EUSAGE naming the fault. */
static int check_command(char *const *args, int n, struct trainopts *o, struct sw_err *err)
{
	int rc;

	trainopts_init(o);
	if ((rc = trainopts_parse(o, args, n, err)) || (rc = trainopts_finish(o, err)))
		return rc;
	return sweeps_own(o, 1, err);
}

/* The options common to every run (s->args), parsed into o; SW_EUSAGE
 * for one sw-train would refuse, or one sw-sweep sets. */
static int check_args(const struct sweep *s, struct trainopts *o, struct sw_err *err)
{
	int rc;

	/* each run's command file holds --out DIR/NAME as one line */
	if (strchr(s->dir, '\n'))
		return sw_fail(err, SW_EUSAGE, "--out: the directory's name holds a newline");
	for (int i = 0; i < s->nargs; i++)
		if (strchr(s->args[i], '\n'))
			return sw_fail(err, SW_EUSAGE, "a sw-train argument holds a newline");
	trainopts_init(o);
	if ((rc = trainopts_parse(o, s->args, s->nargs, err)) || (rc = sweeps_own(o, 0, err)))
		return rc;
	for (int a = 0; a < SWEEP_AXES; a++)
		if (s->nvalues[a] && a != SWEEP_TOKENS && o->given[axis_option(a)])
			return sw_fail(err, SW_EUSAGE, "--%s is swept: not also a sw-train option", options[a]);
	if (s->nvalues[SWEEP_TOKENS] && o->given[TRAINOPT_STEPS])
		return sw_fail(err, SW_EUSAGE, "--tokens sets --steps: not both");
	if (!o->tc.data_path)
		return sw_fail(err, SW_EUSAGE, "no --data among the sw-train options");
	/* the sweep file records it, a cell of its own */
	if (strchr(o->tc.data_path, '\t'))
		return sw_fail(err, SW_EUSAGE, "--data: a name with a tab cannot be a cell of the sweep file");
	if (!s->nvalues[SWEEP_TOKENS] && o->tc.optim.steps == 0)
		return sw_fail(err, SW_EUSAGE, "--steps 0: a run of a sweep makes at least one step");
	return SW_OK;
}

static void command_file(const struct sweep *s, const struct sweep_run *r, struct text *t);

/* Run r's command as it is written, checked as sw-train will read it. */
static int check_run(const struct sweep *s, const struct sweep_run *r, struct sw_err *err)
{
	struct text t = {0};
	struct trainopts o;
	char **argv = NULL;
	int n = 0, rc;

	command_file(s, r, &t);
	if (t.oom || !(argv = calloc(t.n + 1, sizeof *argv))) {
		free(t.p);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	for (char *p = t.p, *nl; (nl = strchr(p, '\n')); p = nl + 1) {
		*nl = '\0';
		argv[n++] = p;
	}
	rc = check_command(argv + 1, n - 1, &o, err);
	if (rc && s->nruns > 1)
		sw_err_prefix(err, "run %s", r->name);
	free(argv);
	free(t.p);
	return rc;
}

int sweep_expand(struct sweep *s, struct sw_err *err)
{
	struct trainopts o;     /* the common options over sw-train's defaults */
	long long n = 1, seq, acc, batch0, steps;
	int rc;

	if ((rc = check_args(s, &o, err)))
		return rc;
	s->data = o.tc.data_path;
	seq = o.tc.model.seq_len;
	acc = o.tc.grad_accum;
	batch0 = o.tc.batch;
	steps = o.tc.optim.steps;
	for (int a = 0; a < SWEEP_AXES; a++)
		n *= s->nvalues[a] ? s->nvalues[a] : 1;
	if (n > 100000)
		return sw_fail(err, SW_EUSAGE, "%lld runs: more than 100000", n);
	if (!(s->runs = calloc((size_t)n, sizeof *s->runs)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	s->nruns = (int)n;
	for (int i = 0; i < s->nruns; i++) {
		struct sweep_run *r = &s->runs[i];
		long long rest = i, batch = batch0;
		size_t len = 0;

		/* the last axis fastest */
		for (int a = SWEEP_AXES - 1; a >= 0; a--) {
			r->value[a] = s->nvalues[a] ? (int)(rest % s->nvalues[a]) : -1;
			rest /= s->nvalues[a] ? s->nvalues[a] : 1;
		}
		for (int a = 0; a < SWEEP_AXES; a++)
			if (r->value[a] >= 0)
				len += (size_t)snprintf(r->name + len, sizeof r->name - len, "%s%s%s", len ? "-" : "",
							tags[a], s->values[a][r->value[a]]);
		if (!len)
			strcpy(r->name, "run");
		/* the values as sweep_set_axis checked them: whole numbers */
		if (r->value[SWEEP_BATCH] >= 0)
			batch = strtoll(s->values[SWEEP_BATCH][r->value[SWEEP_BATCH]], NULL, 10);
		/* without --tokens, the run's --steps (or sw-train's default): a
		 * run is done when a checkpoint of that step exists */
		r->steps = steps;
		if (r->value[SWEEP_TOKENS] >= 0) {
			long long tokens = strtoll(s->values[SWEEP_TOKENS][r->value[SWEEP_TOKENS]], NULL, 10);
			r->steps = tokens / (batch * seq * acc);
			if (r->steps < 1)
				return sw_fail(err, SW_EUSAGE, "--tokens %lld with a batch of %lld x %lld x %lld tokens: "
					       "not one step", tokens, batch, seq, acc);
		}
		if ((rc = check_run(s, r, err)))
			return rc;
	}
	return SW_OK;
}

void sweep_free(struct sweep *s)
{
	free(s->runs);
	s->runs = NULL;
	s->nruns = 0;
}

/* ---- the files ------------------------------------------------------------ */

static int write_text(const char *path, const struct text *t, struct sw_err *err)
{
	char tmp[4200];
	int fd, rc;

	if (t->oom)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	if ((rc = atomic_create(path, tmp, sizeof tmp, &fd, err)))
		return rc;
	rc = atomic_write_all(fd, t->p ? t->p : "", t->n, path, err);
	return atomic_finish(fd, tmp, path, rc, err);
}

/*
 * path opened for reading as a regular file, never through a symbolic
 * link: a stranger's sweep may hold a link, a FIFO or a device where a
 * file of the sweep should be (SW_EDATA, said so). NULL with err set, and
 * errno ENOENT when there is nothing.
 */
static FILE *open_regular(const char *path, struct sw_err *err)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC), e = errno;
	struct stat st;
	FILE *f;

	if (fd < 0) {
		if (e == ELOOP)
			sw_fail(err, SW_EDATA, "%s: a symbolic link, not a file of the sweep (not followed)", path);
		else
			sw_fail(err, sw_errno_status(e), "%s: %s", path, strerror(e));
		errno = e;
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		sw_fail(err, SW_EDATA, "%s: not a regular file", path);
		close(fd);
		errno = EINVAL;
		return NULL;
	}
	if (!(f = fdopen(fd, "r"))) {
		sw_fail(err, SW_ESOFTWARE, "%s: %s", path, strerror(errno));
		close(fd);
		errno = EINVAL;
	}
	return f;
}

/* Are the file's bytes t's? *same: 0 absent, 1 equal, -1 different. */
static int file_is(const char *path, const struct text *t, int *same, struct sw_err *err)
{
	FILE *f = open_regular(path, err);
	char *buf;
	size_t n;

	*same = 0;
	if (!f)
		return errno == ENOENT ? SW_OK : err->code;
	if (!(buf = malloc(t->n + 2))) {
		fclose(f);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	n = fread(buf, 1, t->n + 1, f);
	*same = n == t->n && !memcmp(buf, t->p ? t->p : "", n) ? 1 : -1;
	free(buf);
	fclose(f);
	return SW_OK;
}

/* The sweep file; with_data, its data column (sw-sweep before it wrote
 * none: such a file is read, and brought up to date by sweep_write). */
static void sweep_tsv(const struct sweep *s, struct text *t, int with_data)
{
	put(t, "index\trun");
	for (int a = 0; a < SWEEP_AXES; a++)
		if (s->nvalues[a])
			put(t, "\t%s", columns[a]);
	put(t, "\tsteps%s\n", with_data ? "\tdata" : "");
	for (int i = 0; i < s->nruns; i++) {
		const struct sweep_run *r = &s->runs[i];
		put(t, "%d\t%s", i, r->name);
		for (int a = 0; a < SWEEP_AXES; a++)
			if (r->value[a] >= 0)
				put(t, "\t%s", s->values[a][r->value[a]]);
		put(t, "\t%lld", (long long)r->steps);
		if (with_data)
			put(t, "\t%s", s->data);
		put(t, "\n");
	}
}

static void command_file(const struct sweep *s, const struct sweep_run *r, struct text *t)
{
	put(t, "sw-train\n");
	for (int i = 0; i < s->nargs; i++)
		put(t, "%s\n", s->args[i]);
	for (int a = 0; a < SWEEP_TOKENS; a++)
		if (r->value[a] >= 0)
			put(t, "--%s\n%s\n", options[a], s->values[a][r->value[a]]);
	if (r->value[SWEEP_TOKENS] >= 0)
		put(t, "--steps\n%lld\n", (long long)r->steps);
	put(t, "--out\n%s/%s\n", s->dir, r->name);
}

static int mkdir_ok(const char *path, struct sw_err *err)
{
	if (mkdir(path, 0777) < 0 && errno != EEXIST)
		return sw_fail(err, SW_ECANTCREAT, "%s: %s", path, strerror(errno));
	return SW_OK;
}

/* Is rd, a run's directory, there (*there 1) or not (0)? A symbolic link
 * or anything but a directory in its place is SW_EDATA: never followed,
 * so that nothing outside the sweep is run, resumed or written. */
static int run_dir(const char *rd, int *there, struct sw_err *err)
{
	struct stat st;

	*there = 0;
	if (lstat(rd, &st) < 0)
		return errno == ENOENT ? SW_OK : sw_fail(err, sw_errno_status(errno), "%s: %s", rd, strerror(errno));
	if (S_ISLNK(st.st_mode))
		return sw_fail(err, SW_EDATA, "%s: a symbolic link, not a run directory of the sweep (not followed)", rd);
	if (!S_ISDIR(st.st_mode))
		return sw_fail(err, SW_EDATA, "%s: not a directory, where a run of the sweep goes", rd);
	*there = 1;
	return SW_OK;
}

int sweep_write(const struct sweep *s, struct sw_err *err)
{
	char path[4400];
	struct text t = {0}, old = {0};
	int rc, same, there, write_tsv;

	if ((rc = mkdir_ok(s->dir, err)))
		return rc;
	sweep_tsv(s, &t, 1);
	snprintf(path, sizeof path, "%s/sweep.tsv", s->dir);
	if (!(rc = file_is(path, &t, &same, err)) && same < 0) {
		/* the same grid's file as sw-sweep wrote it before the data
		 * column: brought up to date */
		sweep_tsv(s, &old, 0);
		if (!(rc = file_is(path, &old, &same, err)) && same < 0)
			rc = sw_fail(err, SW_ECANTCREAT, "holds another sweep (its sweep.tsv differs)");
		same = 0;
	}
	write_tsv = !same;
	for (int i = 0; !rc && i < s->nruns; i++) {
		struct text c = {0};
		snprintf(path, sizeof path, "%s/%s", s->dir, s->runs[i].name);
		if (!(rc = mkdir_ok(path, err)) && !(rc = run_dir(path, &there, err))) {
			command_file(s, &s->runs[i], &c);
			snprintf(path, sizeof path, "%s/%s/command", s->dir, s->runs[i].name);
			if ((rc = file_is(path, &c, &same, err)))
				;
			else if (same < 0)
				rc = sw_fail(err, SW_ECANTCREAT, "holds another sweep (%s/command differs)",
					     s->runs[i].name);
			else if (!same)
				rc = write_text(path, &c, err);
		}
		free(c.p);
	}
	/* the sweep file last: its presence says every command is there */
	snprintf(path, sizeof path, "%s/sweep.tsv", s->dir);
	if (!rc && write_tsv)
		rc = write_text(path, &t, err);
	free(t.p);
	free(old.p);
	return rc;
}

/* ---- reading a sweep ---------------------------------------------------- */

static char *read_all(const char *path, struct sw_err *err)
{
	FILE *f = open_regular(path, err);
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f)
		return NULL;
	for (;;) {
		if (SW_GROW(buf, &cap, n + 4096 + 1) < 0) {
			free(buf);
			fclose(f);
			sw_fail(err, SW_ESOFTWARE, "out of memory");
			return NULL;
		}
		size_t got = fread(buf + n, 1, 4096, f);
		n += got;
		if (got < 4096)
			break;
	}
	buf[n] = '\0';
	if (ferror(f) || strlen(buf) != n) {
		sw_fail(err, ferror(f) ? SW_EIO : SW_EDATA, "%s: %s", path, ferror(f) ? "read error" : "holds a NUL");
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

/* line's cells (its tabs cut), at most max into cell; their count, max + 1
 * for more */
static int split_cells(char *line, char **cell, int max)
{
	int n = 0;

	for (char *p = line;;) {
		char *tab = strchr(p, '\t');
		if (n == max)
			return max + 1;
		cell[n++] = p;
		if (!tab)
			return n;
		*tab = '\0';
		p = tab + 1;
	}
}

/* "index run AXIS... steps [data]": the columns' count, the swept axes
 * in f; 0 for another header */
static int header(char *line, struct sweep_file *f, int *data_col)
{
	char *cell[SWEEP_AXES + 5];
	int n = split_cells(line, cell, SWEEP_AXES + 4), k = 2;

	if (n < 3 || n > SWEEP_AXES + 4 || strcmp(cell[0], "index") || strcmp(cell[1], "run"))
		return 0;
	for (int a = 0; a < SWEEP_AXES; a++)
		if (k < n && !strcmp(cell[k], columns[a])) {
			f->swept[a] = 1;
			k++;
		}
	if (k == n || strcmp(cell[k++], "steps"))
		return 0;
	*data_col = k < n && !strcmp(cell[k], "data") ? k++ : -1;
	return k == n ? n : 0;
}

/* A row of the sweep file into r (SW_OK), or 0 where it is not one. */
static int row(char *line, int index, int ncols, int data_col, struct sweep_file *f,
	       struct sweep_row *r)
{
	char *cell[SWEEP_AXES + 5], *end;
	int k = 2;
	long long idx;

	if (split_cells(line, cell, SWEEP_AXES + 4) != ncols)
		return 0;
	errno = 0;
	idx = strtoll(cell[0], &end, 10);
	if (errno || end == cell[0] || *end || idx != index)
		return 0;
	/* a name in the sweep's directory, not a path out of it */
	if (!cell[1][0] || strlen(cell[1]) >= sizeof r->name || strchr(cell[1], '/') ||
	    !strcmp(cell[1], ".") || !strcmp(cell[1], ".."))
		return 0;
	strcpy(r->name, cell[1]);
	for (int a = 0; a < SWEEP_AXES; a++) {
		r->value[a][0] = '\0';
		if (!f->swept[a])
			continue;
		if (!cell[k][0] || strlen(cell[k]) >= sizeof r->value[a])
			return 0;
		strcpy(r->value[a], cell[k++]);
	}
	errno = 0;
	r->steps = strtoll(cell[k], &end, 10);
	if (errno || end == cell[k] || *end || r->steps < 0)
		return 0;
	if (data_col < 0)
		return 1;
	/* one sweep, one data */
	if (!f->data)
		f->data = strdup(cell[data_col]);
	return f->data && !strcmp(f->data, cell[data_col]);
}

void sweep_file_free(struct sweep_file *f)
{
	free(f->rows);
	free(f->data);
	memset(f, 0, sizeof *f);
}

int sweep_load(const char *dir, struct sweep_file *f, struct sw_err *err)
{
	char path[4200], *text, *line, *nl;
	size_t cap = 0;
	int ncols, data_col, rc = SW_OK;

	memset(f, 0, sizeof *f);
	snprintf(path, sizeof path, "%s/sweep.tsv", dir);
	if (!(text = read_all(path, err)))
		return err->code;
	line = text;
	if (!(nl = strchr(line, '\n')) || (*nl = '\0', !(ncols = header(line, f, &data_col)))) {
		free(text);
		return sw_fail(err, SW_EDATA, "%s: not a sweep file (its first line is not its header)", path);
	}
	for (line = nl + 1; !rc && *line; line = nl + 1) {
		if (!(nl = strchr(line, '\n'))) {
			rc = sw_fail(err, SW_EDATA, "%s: its last line is cut", path);
			break;
		}
		*nl = '\0';
		if (SW_GROW(f->rows, &cap, (size_t)f->nrows + 1) < 0)
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		else if (!row(line, f->nrows, ncols, data_col, f, &f->rows[f->nrows]))
			rc = sw_fail(err, SW_EDATA, "%s: line %d is not a run of the sweep", path, f->nrows + 2);
		else
			f->nrows++;
	}
	free(text);
	if (!rc && data_col >= 0 && !f->data && f->nrows)
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
	if (rc)
		sweep_file_free(f);
	return rc;
}

int sweep_run_state(const char *dir, const char *name, int64_t steps, enum sweep_state *st,
		    char *last, size_t len, struct sw_err *err)
{
	char rd[4400];
	struct rundir_claim c;
	int rc, there;

	*st = SWEEP_NEW;
	last[0] = '\0';
	snprintf(rd, sizeof rd, "%s/%s", dir, name);
	if ((rc = run_dir(rd, &there, err)) || !there)
		return rc;
	/* what is there, as sw-train sees it (force: nothing is removed by a claim) */
	if ((rc = rundir_claim(rd, NULL, NULL, 0, 1, &c, err)))
		return rc;
	for (size_t i = c.n; i-- > 0;)
		if (!c.f[i].tmp) {
			snprintf(last, len, "%s/%s", rd, c.f[i].name);
			*st = steps > 0 && c.f[i].step >= steps ? SWEEP_DONE : SWEEP_PARTIAL;
			break;
		}
	rundir_claim_free(&c);
	return SW_OK;
}

int sweep_open_log(const char *dir, const char *name, int *fd, struct sw_err *err)
{
	char log[300];
	struct stat st;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), e, fl;

	*fd = -1;
	if (dfd < 0)
		return sw_fail(err, sw_errno_status(errno), "%s: %s", dir, strerror(errno));
	snprintf(log, sizeof log, "%s.log", name);
	/* O_NONBLOCK: a FIFO in its place fails at once (ENXIO), or opens
	 * and is refused below, rather than blocking the run */
	*fd = openat(dfd, log, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
	e = errno;
	close(dfd);
	if (*fd < 0 && e == ELOOP)
		return sw_fail(err, SW_EDATA, "%s/%s: a symbolic link, not the run's log (not followed)", dir, log);
	if (*fd < 0 && e != ENXIO)
		return sw_fail(err, SW_ECANTCREAT, "%s/%s: %s", dir, log, strerror(e));
	if (*fd < 0 || fstat(*fd, &st) < 0 || !S_ISREG(st.st_mode) || (fl = fcntl(*fd, F_GETFL)) < 0 ||
	    fcntl(*fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return sw_fail(err, SW_EDATA, "%s/%s: not a regular file, where the run's log goes", dir, log);
	}
	return SW_OK;
}

void sweep_argv_free(char **argv)
{
	if (!argv)
		return;
	free(argv[0]);  /* the command file's text: every argument points into it */
	free(argv);
}

/*
 * The command o read from run r's command file is the one sw-sweep wrote
 * for r: its --out the run's directory (by what it is: a Slurm task names
 * the sweep by its full path, the command as it was made), its --data
 * what the sweep file records, the point's values and its length.
 */
static int same_run(const struct trainopts *o, const char *dir, const struct sweep_file *f,
		    const struct sweep_row *r, struct sw_err *err)
{
	char rd[4400];
	struct stat a, b;

	snprintf(rd, sizeof rd, "%s/%s", dir, r->name);
	if (lstat(rd, &a) < 0 || !S_ISDIR(a.st_mode) || stat(o->tc.out_dir, &b) < 0 || a.st_dev != b.st_dev ||
	    a.st_ino != b.st_ino)
		return sw_fail(err, SW_EDATA, "--out %s is not its run's directory %s", o->tc.out_dir, rd);
	if (strcmp(o->tc.data_path, f->data))
		return sw_fail(err, SW_EDATA, "--data %s is not the sweep's (its sweep.tsv: %s)", o->tc.data_path,
			       f->data);
	for (int a = 0; a < SWEEP_TOKENS; a++) {
		const char *v = f->swept[a] ? o->value[axis_option(a)] : NULL;
		if (f->swept[a] && (!v || strcmp(v, r->value[a])))
			return sw_fail(err, SW_EDATA, "--%s %s is not the run's (its sweep.tsv: %s)", options[a],
				       v ? v : "(none)", r->value[a]);
	}
	if (o->tc.optim.steps != r->steps)
		return sw_fail(err, SW_EDATA, "--steps %lld is not the run's length (its sweep.tsv: %lld)",
			       (long long)o->tc.optim.steps, (long long)r->steps);
	return SW_OK;
}

int sweep_argv(const char *dir, int index, char *name, size_t name_len, enum sweep_state *st,
	       char ***argv_out, struct sw_err *err)
{
	char path[4400], last[4400], *text = NULL, *more, **argv = NULL;
	struct sweep_file f;
	struct trainopts o;
	size_t len;
	int rc, argc = 0;

	*argv_out = NULL;
	if ((rc = sweep_load(dir, &f, err)))
		return rc;
	if (index < 0 || index >= f.nrows) {
		rc = sw_fail(err, SW_EUSAGE, "%s: no run %d (the sweep has %d)", dir, index, f.nrows);
		goto out;
	}
	snprintf(name, name_len, "%s", f.rows[index].name);
	if ((rc = sweep_run_state(dir, f.rows[index].name, f.rows[index].steps, st, last, sizeof last, err)))
		goto out;
	if (*st == SWEEP_DONE)
		goto out;
	if (!f.data) {
		rc = sw_fail(err, SW_EDATA, "%s/sweep.tsv: from an older sw-sweep, without the data column its runs "
			     "are checked by: make the sweep again with the command that made it, which brings the "
			     "file up to date", dir);
		goto out;
	}
	snprintf(path, sizeof path, "%s/%s/command", dir, f.rows[index].name);
	if (!(text = read_all(path, err))) {
		rc = err->code;
		goto out;
	}
	/* the checkpoint to resume from after the text, in the same block
	 * (sweep_argv_free frees argv[0], the block) */
	len = strlen(text);
	if (!(more = realloc(text, len + strlen(last) + 2)) ||
	    !(argv = calloc(len + 4, sizeof *argv))) {
		if (more)
			text = more;
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	text = more;
	strcpy(text + len + 1, last);
	/* one argument a line; the first must be sw-train */
	for (char *p = text; p < text + len;) {
		char *nl = strchr(p, '\n');
		if (!nl) {
			rc = sw_fail(err, SW_EDATA, "%s: not one argument a line", path);
			goto out;
		}
		*nl = '\0';
		argv[argc++] = p;
		p = nl + 1;
	}
	if (!argc || strcmp(argv[0], "sw-train")) {
		rc = sw_fail(err, SW_EDATA, "%s: not a sw-train command", path);
		goto out;
	}
	/* a stranger's command file is checked as sw-sweep checked its own
	 * when it wrote it, and against the sweep file, before it runs */
	if ((rc = check_command(argv + 1, argc - 1, &o, err)) ||
	    (rc = same_run(&o, dir, &f, &f.rows[index], err))) {
		sw_err_prefix(err, "%s: not as sw-sweep writes it", path);
		rc = err->code = SW_EDATA;
		goto out;
	}
	if (*st == SWEEP_PARTIAL) {
		argv[argc++] = "--resume";
		argv[argc++] = text + len + 1;
	} else {
		argv[argc++] = "--force";      /* what a run cut before its first checkpoint left */
	}
	argv[argc] = NULL;
	*argv_out = argv;
	argv = NULL;
	text = NULL;
out:
	free(argv);
	free(text);
	sweep_file_free(&f);
	return rc;
}

/* ---- Slurm --------------------------------------------------------------- */

const char *sweep_shell_quote(const char *word, char *buf, size_t len)
{
	size_t n = 0;

	if (len < 3)
		return NULL;
	buf[n++] = '\'';
	for (const char *p = word; *p; p++) {
		const char *piece = *p == '\'' ? "'\\''" : NULL;
		size_t k = piece ? 4 : 1;
		if (n + k + 2 > len)
			return NULL;
		if (piece)
			memcpy(buf + n, piece, k);
		else
			buf[n] = *p;
		n += k;
	}
	buf[n++] = '\'';
	buf[n] = '\0';
	return buf;
}

int sweep_check_slurm(const char *dir, char **sbatch, int nsbatch, struct sw_err *err)
{
	char cwd[PATH_MAX];
	const char *bad = " \t\n'\"\\";

	for (int i = 0; i < nsbatch; i++)
		if (strchr(sbatch[i], '\n'))
			return sw_fail(err, SW_EUSAGE, "--sbatch: option %d holds a newline", i + 1);
	if (dir[0] != '/' && !getcwd(cwd, sizeof cwd))
		return sw_fail(err, sw_errno_status(errno), "the working directory: %s", strerror(errno));
	if (strpbrk(dir, bad) || (dir[0] != '/' && strpbrk(cwd, bad)))
		return sw_fail(err, SW_EUSAGE, "--slurm: the sweep's path holds a blank, a quote or a backslash, "
			       "which an #SBATCH --output line cannot quote: choose a directory without");
	return SW_OK;
}

int sweep_write_slurm(const struct sweep *s, const char *path, const char *sweep_exe,
		      const int *pending, int npending, char **sbatch, int nsbatch,
		      struct sw_err *err)
{
	char qdir[8300], qexe[8300], qcwd[8300], out[4200], dir[PATH_MAX], cwd[PATH_MAX];
	struct text t = {0};
	int rc;

	/* the job runs wherever sbatch was called: the sweep by its full path */
	if (!realpath(s->dir, dir) || !getcwd(cwd, sizeof cwd))
		return sw_fail(err, sw_errno_status(errno), "%s: %s", s->dir, strerror(errno));
	if (!sweep_shell_quote(cwd, qcwd, sizeof qcwd))
		return sw_fail(err, SW_EUSAGE, "a path is too long for the script");
	snprintf(out, sizeof out, "%s/slurm-%%A_%%a.out", dir);
	if (!sweep_shell_quote(dir, qdir, sizeof qdir) || !sweep_shell_quote(sweep_exe, qexe, sizeof qexe))
		return sw_fail(err, SW_EUSAGE, "a path is too long for the script");
	if ((rc = sweep_check_slurm(dir, sbatch, nsbatch, err)))
		return rc;
	put(&t, "#!/bin/sh\n");
	put(&t, "# %d run%s of the sweep in %s, one Slurm array task each: sbatch this file.\n", npending,
	    npending == 1 ? "" : "s", dir);
	put(&t, "# A task runs its run through sw-sweep --run, which starts it, resumes it from\n"
		"# its latest checkpoint, or skips it when done: resubmit to finish what was cut.\n");
	put(&t, "#SBATCH --job-name=sw-sweep\n");
	put(&t, "#SBATCH --output=%s\n", out);
	put(&t, "#SBATCH --array=");
	for (int i = 0; i < npending; i++)
		put(&t, "%s%d", i ? "," : "", pending[i]);
	put(&t, "\n");
	for (int i = 0; i < nsbatch; i++)
		put(&t, "#SBATCH %s\n", sbatch[i]);
	put(&t, "set -eu\n");
	/* where sw-sweep ran: the runs' relative paths (--data, --out) as then */
	put(&t, "cd %s\n", qcwd);
	put(&t, "exec %s --run %s --launcher srun \"$SLURM_ARRAY_TASK_ID\"\n", qexe, qdir);
	rc = t.oom ? sw_fail(err, SW_ESOFTWARE, "out of memory") : npending ? write_text(path, &t, err)
		: sw_fail(err, SW_EUSAGE, "%s: every run is done: no script to write", s->dir);
	free(t.p);
	if (!rc && chmod(path, 0755) < 0)
		rc = sw_fail(err, SW_ECANTCREAT, "%s: %s", path, strerror(errno));
	return rc;
}
