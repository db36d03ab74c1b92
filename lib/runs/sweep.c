/* sweep.c - a grid of sw-train runs in one directory (see sweep.h). */
#include "sweep.h"
#include "../base/atomicfile.h"
#include "../base/grow.h"
#include "rundir.h"
#include "train.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const options[SWEEP_AXES] = {"lr", "batch", "wd", "d-model", "tokens"};
static const char *const columns[SWEEP_AXES] = {"lr", "batch", "wd", "d_model", "tokens"};
static const char *const tags[SWEEP_AXES] = {"lr", "b", "wd", "d", "t"};

const char *sweep_axis_option(int axis) { return options[axis]; }
const char *sweep_axis_column(int axis) { return columns[axis]; }

const char *sweep_state_name(enum sweep_state st)
{
	return st == SWEEP_DONE ? "done" : st == SWEEP_PARTIAL ? "partial" : "new";
}

/* integers for batch, d-model, tokens; any positive number otherwise */
static int integral(int axis)
{
	return axis == SWEEP_BATCH || axis == SWEEP_D_MODEL || axis == SWEEP_TOKENS;
}

int sweep_set_axis(struct sweep *s, int axis, const char *list, struct sw_err *err)
{
	const char *p = list;

	s->nvalues[axis] = 0;
	for (;;) {
		size_t n = strcspn(p, ",");
		char v[SWEEP_VALUE_MAX], *end;
		double x;

		if (n == 0 || n >= sizeof v)
			return sw_fail(err, SW_EUSAGE, "--%s: '%.*s' is not a value", options[axis], (int)n, p);
		memcpy(v, p, n);
		v[n] = '\0';
		x = strtod(v, &end);
		if (*end || !(x > 0) || !isfinite(x) || (integral(axis) && (x != floor(x) || x > 1e15)) ||
		    strspn(v, "0123456789.eE+-") != n)
			return sw_fail(err, SW_EUSAGE, "--%s: '%s' is not a positive %s", options[axis], v,
				       integral(axis) ? "integer" : "number");
		if (s->nvalues[axis] == SWEEP_MAX_VALUES)
			return sw_fail(err, SW_EUSAGE, "--%s: more than %d values", options[axis], SWEEP_MAX_VALUES);
		for (int i = 0; i < s->nvalues[axis]; i++)
			if (!strcmp(s->values[axis][i], v))
				return sw_fail(err, SW_EUSAGE, "--%s: %s given twice", options[axis], v);
		strcpy(s->values[axis][s->nvalues[axis]++], v);
		if (!p[n])
			return SW_OK;
		p += n + 1;
	}
}

/* The value of option --name among args (the next argument or after
 * '='), or NULL. */
static const char *arg_value(char **args, int nargs, const char *name)
{
	size_t n = strlen(name);

	for (int i = 0; i < nargs; i++)
		if (!strncmp(args[i], "--", 2) && !strncmp(args[i] + 2, name, n)) {
			if (args[i][2 + n] == '=')
				return args[i] + 3 + n;
			if (!args[i][2 + n])
				return i + 1 < nargs ? args[i + 1] : "";
		}
	return NULL;
}

static int check_args(const struct sweep *s, struct sw_err *err)
{
	static const char *const ours[] = {"out", "resume", "force"};

	/* each run's command file holds --out DIR/NAME as one line */
	if (strchr(s->dir, '\n'))
		return sw_fail(err, SW_EUSAGE, "--out: the directory's name holds a newline");

	for (int i = 0; i < s->nargs; i++)
		if (strchr(s->args[i], '\n'))
			return sw_fail(err, SW_EUSAGE, "a sw-train argument holds a newline");
	for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
		if (arg_value(s->args, s->nargs, ours[i]))
			return sw_fail(err, SW_EUSAGE, "--%s is sw-sweep's to set, not a sw-train option here",
				       ours[i]);
	for (int a = 0; a < SWEEP_AXES; a++)
		if (s->nvalues[a] && a != SWEEP_TOKENS && arg_value(s->args, s->nargs, options[a]))
			return sw_fail(err, SW_EUSAGE, "--%s is swept: not also a sw-train option", options[a]);
	if (s->nvalues[SWEEP_TOKENS] && arg_value(s->args, s->nargs, "steps"))
		return sw_fail(err, SW_EUSAGE, "--tokens sets --steps: not both");
	if (!arg_value(s->args, s->nargs, "data"))
		return sw_fail(err, SW_EUSAGE, "no --data among the sw-train options");
	return SW_OK;
}

/* a positive integer option of args, or its default */
static long long int_arg(const struct sweep *s, const char *name, long long dflt)
{
	const char *v = arg_value(s->args, s->nargs, name);
	char *end;
	long long x;

	if (!v)
		return dflt;
	x = strtoll(v, &end, 10);
	return *end || x <= 0 ? -1 : x;
}

int sweep_expand(struct sweep *s, struct sw_err *err)
{
	struct train_config d;  /* sw-train's defaults: a run's length unless given */
	long long n = 1, seq, acc, batch0, steps;
	int rc;

	train_config_defaults(&d);
	seq = int_arg(s, "seq-len", d.model.seq_len);
	acc = int_arg(s, "grad-accum", d.grad_accum);
	batch0 = int_arg(s, "batch", d.batch);
	steps = int_arg(s, "steps", d.optim.steps);

	if ((rc = check_args(s, err)))
		return rc;
	for (int a = 0; a < SWEEP_AXES; a++)
		n *= s->nvalues[a] ? s->nvalues[a] : 1;
	if (n > 100000)
		return sw_fail(err, SW_EUSAGE, "%lld runs: more than 100000", n);
	if (seq < 0 || acc < 0 || batch0 < 0 || steps < 0)
		return sw_fail(err, SW_EUSAGE, "--seq-len, --grad-accum, --batch and --steps must be positive integers");
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
		if (r->value[SWEEP_BATCH] >= 0)
			batch = atoll(s->values[SWEEP_BATCH][r->value[SWEEP_BATCH]]);
		/* without --tokens, the run's --steps (or sw-train's default): a
		 * run is done when a checkpoint of that step exists */
		r->steps = steps;
		if (r->value[SWEEP_TOKENS] >= 0) {
			long long tokens = atoll(s->values[SWEEP_TOKENS][r->value[SWEEP_TOKENS]]);
			r->steps = tokens / (batch * seq * acc);
			if (r->steps < 1)
				return sw_fail(err, SW_EUSAGE, "--tokens %lld with a batch of %lld x %lld x %lld tokens: "
					       "not one step", tokens, batch, seq, acc);
		}
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

/* The file's bytes equal t's? (0: absent) 1 equal, -1 different. */
static int same_file(const char *path, const struct text *t)
{
	FILE *f = fopen(path, "r");
	char *buf;
	size_t n;
	int same;

	if (!f)
		return 0;
	buf = malloc(t->n + 2);
	n = buf ? fread(buf, 1, t->n + 1, f) : 0;
	same = buf && n == t->n && !memcmp(buf, t->p ? t->p : "", n);
	free(buf);
	fclose(f);
	return same ? 1 : -1;
}

static void sweep_tsv(const struct sweep *s, struct text *t)
{
	put(t, "index\trun");
	for (int a = 0; a < SWEEP_AXES; a++)
		if (s->nvalues[a])
			put(t, "\t%s", columns[a]);
	put(t, "\tsteps\n");
	for (int i = 0; i < s->nruns; i++) {
		const struct sweep_run *r = &s->runs[i];
		put(t, "%d\t%s", i, r->name);
		for (int a = 0; a < SWEEP_AXES; a++)
			if (r->value[a] >= 0)
				put(t, "\t%s", s->values[a][r->value[a]]);
		put(t, "\t%lld\n", (long long)r->steps);
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

int sweep_write(const struct sweep *s, struct sw_err *err)
{
	char path[4400];
	struct text t = {0};
	int rc, same;

	if ((rc = mkdir_ok(s->dir, err)))
		return rc;
	sweep_tsv(s, &t);
	snprintf(path, sizeof path, "%s/sweep.tsv", s->dir);
	same = same_file(path, &t);
	if (same < 0)
		rc = sw_fail(err, SW_ECANTCREAT, "holds another sweep (its sweep.tsv differs)");
	for (int i = 0; !rc && i < s->nruns; i++) {
		struct text c = {0};
		snprintf(path, sizeof path, "%s/%s", s->dir, s->runs[i].name);
		if (!(rc = mkdir_ok(path, err))) {
			command_file(s, &s->runs[i], &c);
			snprintf(path, sizeof path, "%s/%s/command", s->dir, s->runs[i].name);
			same = same_file(path, &c);
			if (same < 0)
				rc = sw_fail(err, SW_ECANTCREAT, "holds another sweep (%s/command differs)",
					     s->runs[i].name);
			else if (!same)
				rc = write_text(path, &c, err);
		}
		free(c.p);
	}
	/* the sweep file last: its presence says every command is there */
	snprintf(path, sizeof path, "%s/sweep.tsv", s->dir);
	if (!rc && same_file(path, &t) == 0)
		rc = write_text(path, &t, err);
	free(t.p);
	return rc;
}

/* ---- reading a sweep ---------------------------------------------------- */

static char *read_all(const char *path, struct sw_err *err)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f) {
		sw_fail(err, sw_errno_status(errno), "%s: %s", path, strerror(errno));
		return NULL;
	}
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

int sweep_load(const char *dir, int *nruns, char (**names)[256], int64_t **steps,
	       struct sw_err *err)
{
	char path[4200], *text, *line, *save = NULL;
	size_t names_cap = 0, steps_cap = 0;
	int n = 0, rc = SW_OK;

	*nruns = 0;
	*names = NULL;
	*steps = NULL;
	snprintf(path, sizeof path, "%s/sweep.tsv", dir);
	if (!(text = read_all(path, err)))
		return err->code == SW_EIO ? SW_EIO : err->code;
	line = strtok_r(text, "\n", &save);     /* the header */
	while (!rc && (line = strtok_r(NULL, "\n", &save))) {
		char *tab1 = strchr(line, '\t'), *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL,
		     *last = strrchr(line, '\t'), *end;
		long idx = strtol(line, &end, 10);
		if (!tab1 || !tab2 || end != tab1 || idx != n || (size_t)(tab2 - tab1 - 1) >= 256 ||
		    memchr(tab1 + 1, '/', (size_t)(tab2 - tab1 - 1)) || tab2 == tab1 + 1 || !strncmp(tab1 + 1, "..\t", 3) ||
		    !strncmp(tab1 + 1, ".\t", 2)) {
			rc = sw_fail(err, SW_EDATA, "%s: line %d is not a run of the sweep", path, n + 2);
			break;
		}
		if (SW_GROW(*names, &names_cap, (size_t)n + 1) < 0 ||
		    SW_GROW(*steps, &steps_cap, (size_t)n + 1) < 0) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			break;
		}
		memcpy((*names)[n], tab1 + 1, (size_t)(tab2 - tab1 - 1));
		(*names)[n][tab2 - tab1 - 1] = '\0';
		(*steps)[n] = strtoll(last + 1, NULL, 10);
		n++;
	}
	free(text);
	*nruns = n;
	return rc;
}

int sweep_run_state(const char *dir, const char *name, int64_t steps, enum sweep_state *st,
		    char *last, size_t len, struct sw_err *err)
{
	char rd[4400];
	struct rundir_claim c;
	int rc;

	*st = SWEEP_NEW;
	last[0] = '\0';
	snprintf(rd, sizeof rd, "%s/%s", dir, name);
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

void sweep_argv_free(char **argv)
{
	if (!argv)
		return;
	free(argv[0]);  /* the command file's text: every argument points into it */
	free(argv);
}

int sweep_argv(const char *dir, int index, char *name, size_t name_len, enum sweep_state *st,
	       char ***argv_out, struct sw_err *err)
{
	char (*names)[256] = NULL, path[4400], last[4400], *text = NULL, *more, **argv = NULL;
	int64_t *steps = NULL;
	size_t len;
	int n, rc, argc = 0;

	*argv_out = NULL;
	if ((rc = sweep_load(dir, &n, &names, &steps, err)))
		goto out;
	if (index < 0 || index >= n) {
		rc = sw_fail(err, SW_EUSAGE, "%s: no run %d (the sweep has %d)", dir, index, n);
		goto out;
	}
	snprintf(name, name_len, "%s", names[index]);
	if ((rc = sweep_run_state(dir, names[index], steps[index], st, last, sizeof last, err)))
		goto out;
	if (*st == SWEEP_DONE)
		goto out;
	snprintf(path, sizeof path, "%s/%s/command", dir, names[index]);
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
	free(names);
	free(steps);
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
