/* plot.c - figures with gnuplot, no command from a name or a cell (see plot.h). */
#include "plot.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../base/atomicfile.h"

const struct plot_kind plot_kinds[] = {
	{"training", "step loss val_loss lr grad_norm out_norm",
	 "loss, validation loss, learning rate, gradient norm, output norm over training",
	 "sw-trace --series loss,val_loss,lr,grad_norm,out_norm TRACE", NULL},
	{"residual", "step",
	 "RMS of the residual stream (or attention/MLP outputs) per layer over training",
	 "sw-trace --series residual_rms TRACE", NULL},
	{"sharpness", "file step block mean median_log10 q10_log10 q90_log10",
	 "average sharpness per block type in Principle (1)'s order, log axis (sharpness Fig. 1)",
	 "sw-sharpness CKPT", NULL},
	{"sharpness-steps", "step block mean",
	 "average sharpness per block type over training (sharpness Fig. 3)",
	 "sw-sharpness CKPT...", NULL},
	{"sharpness-hist", "block bin_lo density|fraction",
	 "distribution of log10 h per block type (sharpness Fig. 2)",
	 "sw-sharpness --hist 60 CKPT", NULL},
	{"norms", "step role rms_to_inf",
	 "the output layer's RMS->inf norm over training, raw and gamma-folded",
	 "sw-norms --role lm_head CKPT...", NULL},
	{"spectrum", "file step name index sigma",
	 "singular values against their index, log-log, per step, run or matrix (spectra Fig. 1-2)",
	 "sw-spectrum --role ROLE --layer L CKPT...", NULL},
	{"spectrum-normalized", "file step name index sigma",
	 "the same divided by the equilibrium scale sqrt(lr/wd)",
	 "sw-spectrum --normalize --role ROLE --layer L CKPT...", NULL},
	{"esd", "file step name bin_lo bin_hi density",
	 "the empirical spectral density on log-spaced bins",
	 "sw-spectrum --hist 40 --role ROLE --layer L CKPT", NULL},
	{"esd-fit", "file step name bin_lo bin_hi density fit_density mp_density",
	 "the eigenvalue density with the power law fitted to its tail and the Marchenko-Pastur bulk, log-log (WeightWatcher's)",
	 "sw-spectrum --esd-fit --hist 40 --role ROLE --layer L CKPT", NULL},
	{"esd-layers", "file step layer role",
	 "alpha (or --column: another esd-fit column) against the layer, a panel per role, a curve per step",
	 "sw-spectrum --esd-fit CKPT...", "alpha"},
	{"compare", "file_a step_a file_b step_b layer role",
	 "how each matrix changed between checkpoints (rel_change, or --column another) against the layer, a curve per role, a panel per pair",
	 "sw-compare CKPT CKPT...", "rel_change"},
	{"transfer", "tokens lr batch out_norm loss optimal",
	 "loss against the output norm, a panel per horizon, lr by colour, batch by marker, optima ringed (optimal-norm Fig. 1)",
	 "sw-transfer --table CKPT|TRACE|DIR... (or - for a TSV)", NULL},
	{"transfer-fits", "d_model tokens lr batch",
	 "the optimal learning rate and batch size against the horizon, power laws and exponents",
	 "sw-transfer CKPT|TRACE|DIR... (or - for a TSV)", NULL},
	{"hessian", "step block lambda_1 trace_per_param",
	 "the loss Hessian's largest eigenvalue and trace per parameter per block type over training",
	 "sw-hessian --data DATA CKPT...", NULL},
	{"eos", "step block eos_gd|eos_adam",
	 "the edge-of-stability ratio per block type over training, 1 at the edge (gradient descent's or Adam's)",
	 "sw-hessian [--preconditioned] --data DATA CKPT...", NULL},
	{"hessian-density", "block lambda density",
	 "the loss Hessian's spectral density per block type, log scale (Zhang et al.'s per-block figures)",
	 "sw-hessian --density --grid 400 --data DATA CKPT", NULL},
	{"scale-vectors", "step name sd coupling",
	 "the norm gains' spread and their coupling with the matrices reading them over training, a curve per vector",
	 "sw-norms --scale-vectors --block norm CKPT...", NULL},
	{"loss-curves", "step loss run",
	 "a loss against the step, a curve per run (the studies' comparisons)",
	 "sw-trace --series val_loss TRACE, a block per run with a run column", NULL},
	{"qkdrift", "step layer head product log2_ratio",
	 "log2 Q/K ratio against their product, a panel per layer, a colour per head (multipliers Fig. 4a)",
	 "sw-qkdrift CKPT|TRACE...", NULL},
};
const size_t plot_nkinds = sizeof plot_kinds / sizeof plot_kinds[0];

const struct plot_kind *plot_kind_find(const char *name)
{
	for (size_t i = 0; i < plot_nkinds; i++)
		if (!strcmp(name, plot_kinds[i].name))
			return &plot_kinds[i];
	return NULL;
}

const char *plot_format(const char *out)
{
	static const char *const formats[] = {"png", "pdf", "svg"};
	const char *dot = strrchr(out, '.');

	for (size_t i = 0; dot && i < sizeof formats / sizeof formats[0]; i++)
		if (!strcmp(dot + 1, formats[i]))
			return formats[i];
	return NULL;
}

int plot_have_gnuplot(void)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	while (path && *path) {
		const char *c = strchr(path, ':');
		size_t n = c ? (size_t)(c - path) : strlen(path);
		if (n && n < sizeof buf - 10) {
			snprintf(buf, sizeof buf, "%.*s/gnuplot", (int)n, path);
			if (access(buf, X_OK) == 0)
				return 1;
		}
		path = c ? c + 1 : NULL;
	}
	return 0;
}

/* dir (made absolute) if it holds common.gp. */
static int scripts_in(const char *dir, char *out, size_t len)
{
	char probe[PATH_MAX + 16], real[PATH_MAX];
	struct stat st;

	if (snprintf(probe, sizeof probe, "%s/common.gp", dir) >= (int)sizeof probe ||
	    stat(probe, &st) < 0 || !S_ISREG(st.st_mode) || !realpath(dir, real))
		return -1;
	return snprintf(out, len, "%s", real) < (int)len ? 0 : -1;
}

int plot_scripts_dir(char *dir, size_t len, struct sw_err *err)
{
	static const char *const rel[] = {"../share/scalewatch/plots", "../../plots"};
	const char *env = getenv("SW_PLOTS_DIR");
	char exe[PATH_MAX], probe[2 * PATH_MAX];
	ssize_t n;

	if (env && *env) {
		if (scripts_in(env, dir, len) == 0)
			return SW_OK;
		return sw_fail(err, SW_ESOFTWARE, "SW_PLOTS_DIR=%s holds no common.gp", env);
	}
	n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n > 0) {
		exe[n] = '\0';
		*strrchr(exe, '/') = '\0';
		for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
			snprintf(probe, sizeof probe, "%s/%s", exe, rel[i]);
			if (scripts_in(probe, dir, len) == 0)
				return SW_OK;
		}
	}
	return sw_fail(err, SW_ESOFTWARE, "cannot find the gnuplot scripts (set SW_PLOTS_DIR)");
}

/* Does the tab-separated line hold the field word? */
static int has_field(const char *line, const char *word, size_t wl)
{
	for (const char *h = line; h; ) {
		const char *tab = strchr(h, '\t');
		size_t hl = tab ? (size_t)(tab - h) : strlen(h);
		if (hl == wl && !strncmp(h, word, wl))
			return 1;
		h = tab ? tab + 1 : NULL;
	}
	return 0;
}

static size_t count_fields(const char *line, size_t n)
{
	size_t f = 1;

	for (size_t i = 0; i < n; i++)
		f += line[i] == '\t';
	return f;
}

/* Is the header (no newline) good for kind k? */
static int check_header(const char *line, size_t n, const struct plot_kind *k,
			struct sw_err *err)
{
	const char *p = k->columns;

	if (memchr(line, '\0', n))
		return sw_fail(err, SW_EDATA, "line 1: a NUL byte in the header");
	if (n == 0)
		return sw_fail(err, SW_EDATA, "line 1: an empty header line");
	while (*p) {
		size_t wl = strcspn(p, " "), first = strcspn(p, " |"), found = 0;
		/* a|b: either column (b, the name an earlier release printed) */
		for (size_t i = 0; i < wl && !found; i++) {
			size_t al = strcspn(p + i, " |");
			found = has_field(line, p + i, al);
			i += al;
		}
		if (!found)
			return sw_fail(err, SW_EDATA, "no column '%.*s': the %s figure needs the TSV of: %s",
				       (int)first, p, k->name, k->source);
		p += wl;
		p += strspn(p, " ");
	}
	return SW_OK;
}

/* The number (from 1) of the header's field called name, 0 when none. */
static int field_number(const char *line, const char *name)
{
	size_t nl = strlen(name);
	int i = 1;

	for (const char *h = line; h; i++) {
		const char *tab = strchr(h, '\t');
		size_t hl = tab ? (size_t)(tab - h) : strlen(h);
		if (hl == nl && !strncmp(h, name, nl))
			return i;
		h = tab ? tab + 1 : NULL;
	}
	return 0;
}

/* Read in, check it, write it to out (data.tsv); the number of the column
 * called column (NULL: none) into *colno. */
static int copy_table(FILE *in, FILE *out, const struct plot_kind *k, const char *column,
		      int *colno, struct sw_err *err)
{
	char *line = NULL;
	size_t cap = 0, width = 0, rows = 0;
	long long lineno = 0;
	ssize_t n;
	int rc = SW_OK;

	while ((n = getline(&line, &cap, in)) > 0) {
		size_t len = (size_t)n;
		lineno++;
		if (line[len - 1] == '\n')
			len--;
		if (len > 0 && line[len - 1] == '\r')
			len--;
		line[len] = '\0';
		if (lineno == 1) {
			if ((rc = check_header(line, len, k, err)))
				break;
			width = count_fields(line, len);
			if (column && !(*colno = field_number(line, column))) {
				rc = sw_fail(err, SW_EDATA, "no column '%s' in the table (its header names the columns)",
					     column);
				break;
			}
		} else if (len == 0) {
			continue;       /* a blank line would split gnuplot's data set */
		} else if (memchr(line, '\0', len)) {
			rc = sw_fail(err, SW_EDATA, "line %lld: a NUL byte", lineno);
			break;
		} else if (count_fields(line, len) != width) {
			rc = sw_fail(err, SW_EDATA, "line %lld: %zu fields, the header has %zu",
				     lineno, count_fields(line, len), width);
			break;
		} else {
			rows++;
		}
		if (fwrite(line, 1, len, out) != len || putc('\n', out) == EOF) {
			rc = sw_fail(err, SW_EIO, "writing the copy of the table: %s", strerror(errno));
			break;
		}
	}
	if (!rc && ferror(in))
		rc = sw_fail(err, sw_errno_status(errno), "%s", strerror(errno));
	else if (!rc && lineno == 0)
		rc = sw_fail(err, SW_EDATA, "empty: no header line");
	else if (!rc && rows == 0)
		rc = sw_fail(err, SW_EDATA, "no rows below the header");
	free(line);
	return rc;
}

/* Only the files made here are removed: anything else in the directory
 * (nothing gnuplot should ever write) keeps it, and shows. */
void plot_unstage(struct plot_stage *st)
{
	if (!st->dir[0])
		return;
	unlink(st->data);
	unlink(st->log);
	rmdir(st->dir);
	atomic_forget(st->data);
	atomic_forget(st->log);
	atomic_forget(st->dir);
	st->dir[0] = '\0';
}

int plot_stage_table(const char *path, const struct plot_kind *k, const char *column,
		     struct plot_stage *st, struct sw_err *err)
{
	const char *tmp = getenv("TMPDIR");
	FILE *in, *out = NULL;
	struct stat sb;
	int fd, rc;

	st->dir[0] = '\0';
	st->column = 0;
	if (!column)
		column = k->column;
	if (!strcmp(path, "-")) {
		in = stdin;
	} else if (!(in = fopen(path, "re"))) {
		return sw_fail(err, sw_errno_status(errno), "%s", strerror(errno));
	}
	if (fstat(fileno(in), &sb) == 0 && S_ISDIR(sb.st_mode)) {
		rc = sw_fail(err, SW_ENOINPUT, "%s", strerror(EISDIR));
		goto out;
	}
	if (!tmp || tmp[0] != '/')
		tmp = "/tmp";
	if (snprintf(st->dir, sizeof st->dir, "%s/sw-plot.XXXXXX", tmp) >= (int)sizeof st->dir) {
		st->dir[0] = '\0';
		rc = sw_fail(err, SW_ECANTCREAT, "TMPDIR too long");
		goto out;
	}
	if (!mkdtemp(st->dir)) {
		rc = sw_fail(err, SW_ECANTCREAT, "cannot make a directory in %s: %s", tmp,
			     strerror(errno));
		st->dir[0] = '\0';
		goto out;
	}
	snprintf(st->data, sizeof st->data, "%s/data.tsv", st->dir);
	snprintf(st->log, sizeof st->log, "%s/gnuplot.err", st->dir);
	/* remembered before they exist: a signal from here on leaves nothing */
	atomic_remember(st->dir, 1);
	atomic_remember(st->data, 0);
	atomic_remember(st->log, 0);
	fd = open(st->data, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || !(out = fdopen(fd, "w"))) {
		rc = sw_fail(err, SW_ECANTCREAT, "%s: %s", st->data, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	rc = copy_table(in, out, k, column, &st->column, err);
	if (fclose(out) != 0 && !rc)
		rc = sw_fail(err, SW_EIO, "writing the copy of the table: %s", strerror(errno));
out:
	if (in != stdin)
		fclose(in);
	if (rc)
		plot_unstage(st);
	return rc;
}

/* The last line of the log that says something (not blank, not gnuplot's
 * caret under the failing command), control characters dropped. */
static void last_complaint(const char *log, char *buf, size_t len)
{
	FILE *f = fopen(log, "re");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	buf[0] = '\0';
	if (!f)
		return;
	while ((n = getline(&line, &cap, f)) > 0) {
		size_t j = 0;
		if (strspn(line, " \t^\r\n") == (size_t)n)
			continue;
		for (ssize_t i = 0; i < n && j + 1 < len; i++) {
			unsigned char c = (unsigned char)line[i];
			if (c == '\t')
				c = ' ';
			if (c >= ' ' && c != 0x7f && !(c == ' ' && (j == 0 || buf[j - 1] == ' ')))
				buf[j++] = (char)c;
		}
		while (j > 0 && buf[j - 1] == ' ')
			j--;
		buf[j] = '\0';
	}
	free(line);
	fclose(f);
}

/*
 * The child: in the stage, stdin /dev/null, stdout the pipe, stderr the
 * log, in the C locale. A decimal comma (de_DE.UTF-8) would make the
 * scripts' awk print 1,5 and read 2.5 as 2, and sort -g order by it:
 * another figure, or none. Only the child's environment is changed.
 */
static void exec_gnuplot(const struct plot_stage *st, int pipe_w, const char *expr,
			 const char *script)
{
	int log = open(st->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

	if (log < 0 || null < 0 || chdir(st->dir) < 0 || dup2(null, STDIN_FILENO) < 0 ||
	    dup2(pipe_w, STDOUT_FILENO) < 0 || dup2(log, STDERR_FILENO) < 0 ||
	    setenv("LC_ALL", "C", 1) < 0 || setenv("LC_NUMERIC", "C", 1) < 0)
		_exit(126);
	execlp("gnuplot", "gnuplot", "-d", "-e", expr, script, (char *)NULL);
	dprintf(STDERR_FILENO, "cannot run gnuplot: %s\n", strerror(errno));
	_exit(127);
}

int plot_render(const struct plot_stage *st, const char *script, const char *format,
		int out_fd, const char *out_name, struct sw_err *err)
{
	static char buf[1 << 16];
	char expr[128], said[200];
	int p[2], status, rc = SW_OK;
	size_t total = 0;
	ssize_t n;
	pid_t pid;

	/* fixed names and a number only: nothing here comes from the user */
	snprintf(expr, sizeof expr, "in='data.tsv'; out='figure.%s'; to='/dev/stdout'; ycol=%d",
		 format, st->column);
	if (pipe2(p, O_CLOEXEC) < 0)
		return sw_fail(err, SW_ESOFTWARE, "pipe: %s", strerror(errno));
	fflush(NULL);
	if ((pid = fork()) < 0) {
		close(p[0]);
		close(p[1]);
		return sw_fail(err, SW_ESOFTWARE, "fork: %s", strerror(errno));
	}
	if (pid == 0)
		exec_gnuplot(st, p[1], expr, script);
	close(p[1]);
	while ((n = read(p[0], buf, sizeof buf)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (!rc)
				rc = sw_fail(err, SW_EIO, "reading gnuplot's output: %s", strerror(errno));
			break;
		}
		total += (size_t)n;
		if (!rc)
			rc = atomic_write_all(out_fd, buf, (size_t)n, out_name, err);
	}
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return rc ? rc : sw_fail(err, SW_ESOFTWARE, "waitpid: %s", strerror(errno));
	if (rc)
		return rc;
	last_complaint(st->log, said, sizeof said);
	if (WIFSIGNALED(status))
		return sw_fail(err, SW_ESOFTWARE, "gnuplot died of signal %d", WTERMSIG(status));
	if (WEXITSTATUS(status) == 126 || WEXITSTATUS(status) == 127)
		return sw_fail(err, SW_ESOFTWARE, "%s", said[0] ? said : "cannot run gnuplot");
	if (WEXITSTATUS(status) || total == 0)
		return sw_fail(err, SW_EDATA, "gnuplot failed on this table%s%s",
			       said[0] ? ": " : "", said);
	return SW_OK;
}
