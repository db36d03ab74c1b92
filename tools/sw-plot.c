/*
 * sw-plot - a paper-ready figure from a TSV a scalewatch tool printed:
 * checks the TSV has the columns the figure needs, then runs the gnuplot
 * script plots/KIND.gp on it. gnuplot writes the figure to a pipe and we
 * write it under a temporary name, renamed into place once complete:
 * gnuplot itself says nothing when its output hits a full disk.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/atomicfile.h"
#include "common.h"

static const char usage[] = "sw-plot KIND IN.tsv -o OUT.png|OUT.pdf|OUT.svg\n       sw-plot --list";
static const char help[] =
	"Make a figure of kind KIND from a TSV a scalewatch tool printed, with gnuplot\n"
	"(plots/KIND.gp); the extension of OUT picks PNG, PDF or SVG.\n"
	"\n"
	"  -o, --output OUT   the figure\n"
	"  --list             the kinds, the columns each needs, the command for its TSV\n"
	"  --help, --version\n"
	"\n"
	"Environment: SW_PLOTS_DIR, where the scripts are (default: found beside the\n"
	"program). See sw-plot(1).\n";

struct kind {
	const char *name, *columns, *what, *source;
};

/* Every figure: its script is plots/NAME.gp. */
static const struct kind kinds[] = {
	{"training", "step loss val_loss lr grad_norm out_norm",
	 "loss, validation loss, learning rate, gradient norm, output norm over training",
	 "sw-trace --series loss,val_loss,lr,grad_norm,out_norm TRACE"},
	{"residual", "step",
	 "RMS of the residual stream (or attention/MLP outputs) per layer over training",
	 "sw-trace --series residual_rms TRACE"},
	{"sharpness", "file block mean median_log10 q10_log10 q90_log10",
	 "average sharpness per block type, bars on a log axis (sharpness Fig. 1)",
	 "sw-sharpness CKPT"},
	{"sharpness-steps", "step block mean",
	 "average sharpness per block type over training (sharpness Fig. 3)",
	 "sw-sharpness CKPT..."},
	{"sharpness-hist", "block bin_lo fraction",
	 "distribution of log10 h per block type (sharpness Fig. 2)",
	 "sw-sharpness --hist 60 CKPT"},
	{"norms", "step role rms_to_inf",
	 "the output layer's RMS->inf norm over training, raw and folded",
	 "sw-norms --role lm_head CKPT..."},
	{"spectrum", "file name index sigma",
	 "singular values against their index, log-log, per run or matrix (spectra Fig. 1-2)",
	 "sw-spectrum --role ROLE --layer L CKPT..."},
	{"spectrum-normalized", "file name index sigma",
	 "the same divided by the equilibrium scale sqrt(lr/wd)",
	 "sw-spectrum --normalize --role ROLE --layer L CKPT..."},
	{"esd", "file name lo density",
	 "the empirical spectral density on log-spaced bins",
	 "sw-spectrum --hist 40 --role ROLE CKPT"},
	{"transfer", "tokens out_norm loss optimal",
	 "loss against the output norm per horizon, optima ringed (optimal-norm Fig. 1)",
	 "sw-transfer --table CKPT... (or - for a TSV)"},
	{"transfer-fits", "d_model tokens lr batch",
	 "the optimal learning rate and batch size against the horizon, with power laws",
	 "sw-transfer CKPT... (or - for a TSV)"},
	{"qkdrift", "step layer head product log2_ratio",
	 "log2 Q/K ratio against their product per layer/head over training (multipliers Fig. 4a)",
	 "sw-qkdrift CKPT..."},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

/* The directory of the scripts: $SW_PLOTS_DIR, or beside the program
 * (installed: ../share/scalewatch/plots; in the tree: ../../plots). */
static int plots_dir(char *dir, size_t len)
{
	static const char *const rel[] = {"../share/scalewatch/plots", "../../plots"};
	const char *env = getenv("SW_PLOTS_DIR");
	char exe[PATH_MAX];
	ssize_t n;
	struct stat st;

	if (env && *env) {
		snprintf(dir, len, "%s", env);
		return 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return -1;
	exe[n] = '\0';
	*strrchr(exe, '/') = '\0';
	for (size_t i = 0; i < 2; i++) {
		char probe[PATH_MAX + 64];
		snprintf(probe, sizeof probe, "%s/%s/common.gp", exe, rel[i]);
		if (stat(probe, &st) == 0 &&
		    snprintf(dir, len, "%s/%s", exe, rel[i]) < (int)len)
			return 0;
	}
	return -1;
}

/* Is every column of need in the header line of path? names the first missing. */
static int check_columns(const char *path, const char *need, char *missing, size_t mlen,
			 struct sw_err *err)
{
	FILE *f = fopen(path, "r");
	char *line = NULL, word[64];
	size_t cap = 0;
	ssize_t n;
	const char *p = need;

	if (!f)
		return sw_fail(err, sw_errno_status(errno), "%s", strerror(errno));
	n = getline(&line, &cap, f);
	fclose(f);
	if (n <= 0) {
		free(line);
		return sw_fail(err, SW_EDATA, "empty: no header line");
	}
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	while (sscanf(p, "%63s", word) == 1) {
		char *h = line;
		int found = 0;
		size_t wl = strlen(word);
		while (h && !found) {
			char *tab = strchr(h, '\t');
			size_t hl = tab ? (size_t)(tab - h) : strlen(h);
			found = hl == wl && !strncmp(h, word, wl);
			h = tab ? tab + 1 : NULL;
		}
		if (!found) {
			snprintf(missing, mlen, "%s", word);
			free(line);
			return sw_fail(err, SW_EDATA, "no column '%s'", word);
		}
		p = strstr(p, word) + wl;
	}
	free(line);
	return SW_OK;
}

static int have_gnuplot(void)
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

/*
 * Run gnuplot -e expr script with its stdout on a pipe, and copy what it
 * writes to fd. Every byte is read even after a write failed, so gnuplot
 * never blocks; the first failure is the result.
 */
static int run_gnuplot(const char *expr, const char *script, int fd, const char *out,
		       struct sw_err *err)
{
	static char buf[1 << 16];
	int p[2], status, rc = SW_OK;
	size_t total = 0;
	ssize_t n;
	pid_t pid;

	if (pipe(p) < 0)
		return sw_fail(err, SW_ESOFTWARE, "pipe: %s", strerror(errno));
	fflush(stdout);
	if ((pid = fork()) < 0) {
		close(p[0]);
		close(p[1]);
		return sw_fail(err, SW_ESOFTWARE, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		close(p[0]);
		if (dup2(p[1], STDOUT_FILENO) < 0)
			_exit(127);
		close(p[1]);
		execlp("gnuplot", "gnuplot", "-e", expr, script, (char *)NULL);
		_exit(127);
	}
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
			rc = atomic_write_all(fd, buf, (size_t)n, out, err);
	}
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return rc ? rc : sw_fail(err, SW_ESOFTWARE, "waitpid: %s", strerror(errno));
	if (rc)
		return rc;
	if (!WIFEXITED(status) || WEXITSTATUS(status) || total == 0)
		return sw_fail(err, SW_EDATA, "gnuplot failed on this TSV (%s)", script);
	return SW_OK;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"help", no_argument, NULL, OPT_HELP}, {"version", no_argument, NULL, OPT_VERSION},
		{"output", required_argument, NULL, 'o'}, {"list", no_argument, NULL, OPT_TOOL_FIRST},
		{NULL, 0, NULL, 0}
	};
	struct tool tl;
	struct sw_err err;
	const struct kind *k = NULL;
	const char *out = NULL, *in, *ext;
	char dir[PATH_MAX], script[PATH_MAX + 64], tmp[PATH_MAX + 64], expr[3 * PATH_MAX], missing[64];
	int opt, list = 0, fd, rc;

	tool_runtime(argv);
	tool_init(&tl, "sw-plot", usage, help, argc, argv);
	while ((opt = getopt_long(argc, argv, "o:", longopts, NULL)) != -1) {
		if (opt == 'o')
			out = optarg;
		else if (opt == OPT_TOOL_FIRST)
			list = 1;
		else
			tool_common_option(&tl, opt, optarg);
	}
	if (list) {
		static const char *const cols[] = {"kind", "columns", "figure", "tsv_from"};
		struct table tb;
		table_init(&tb, stdout, TABLE_TSV, cols, 4);
		for (size_t i = 0; i < NKINDS; i++) {
			table_str(&tb, kinds[i].name);
			table_str(&tb, kinds[i].columns);
			table_str(&tb, kinds[i].what);
			table_str(&tb, kinds[i].source);
			table_end_row(&tb);
		}
		return tool_finish(&tl);
	}
	if (argc - optind != 2 || !out)
		tool_usage_error(&tl, "needs KIND, IN.tsv and -o OUT");
	for (size_t i = 0; i < NKINDS; i++)
		if (!strcmp(argv[optind], kinds[i].name))
			k = &kinds[i];
	if (!k)
		tool_usage_error(&tl, "unknown kind '%s' (sw-plot --list names them)", argv[optind]);
	in = argv[optind + 1];
	ext = strrchr(out, '.');
	if (!ext || (strcmp(ext, ".png") && strcmp(ext, ".pdf") && strcmp(ext, ".svg")))
		tool_usage_error(&tl, "%s: the output must end in .png, .pdf or .svg", out);
	if (strchr(in, '\'') || strchr(out, '\''))
		tool_usage_error(&tl, "file names with a single quote cannot be passed to gnuplot");
	if (check_columns(in, k->columns, missing, sizeof missing, &err)) {
		if (err.code == SW_EDATA && missing[0])
			sw_fail(&err, SW_EDATA, "no column '%s': a %s figure needs the TSV of: %s",
				missing, k->name, k->source);
		tool_error(&tl, in, &err);
		return tool_finish(&tl);
	}
	if (!have_gnuplot()) {
		sw_fail(&err, SW_ESOFTWARE, "gnuplot not found in PATH (Debian: apt-get install gnuplot-nox)");
		tool_error(&tl, NULL, &err);
		return tool_finish(&tl);
	}
	if (plots_dir(dir, sizeof dir) < 0) {
		sw_fail(&err, SW_ESOFTWARE, "cannot find the gnuplot scripts (set SW_PLOTS_DIR)");
		tool_error(&tl, NULL, &err);
		return tool_finish(&tl);
	}
	snprintf(script, sizeof script, "%s/%s.gp", dir, k->name);
	if (snprintf(expr, sizeof expr, "in='%s'; out='%s'; to='/dev/stdout'", in, out) >= (int)sizeof expr)
		tool_usage_error(&tl, "file name too long");
	if (atomic_create(out, tmp, sizeof tmp, &fd, &err)) {
		tool_error(&tl, NULL, &err);
		return tool_finish(&tl);
	}
	rc = run_gnuplot(expr, script, fd, out, &err);
	if (atomic_finish(fd, tmp, out, rc, &err))
		tool_error(&tl, rc == SW_EDATA ? in : NULL, &err);
	return tool_finish(&tl);
}
