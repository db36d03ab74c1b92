/* common.c - the shared plumbing of every tool (see common.h). */
#include "common.h"
#include "../lib/base/atomicfile.h"
#include "../lib/base/family.h"
#include "../lib/runs/blocksharp.h"
#include "../lib/runs/rundir.h"
#include "../lib/formats/ckpt.h"
#include "../lib/formats/ckptfiles.h"
#include "../lib/base/comm.h"
#include "../lib/analysis/matsched.h"

#include <cblas.h>
#include <omp.h>
#include <errno.h>
#include <fcntl.h>
#include <strings.h>
#include <math.h>
#include <signal.h>
#include <hdf5.h>
#include <stdarg.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

void tool_std_fds(void)
{
	/* read-only for stdout, write-only for stdin: using them fails as
	 * the closed descriptor would have */
	static const int mode[3] = {O_WRONLY, O_RDONLY, O_WRONLY};

	for (int fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		/* the lowest free descriptor is this one: 0, 1, 2 are taken in order */
		int got = open("/dev/null", mode[fd]);
		if (got != fd) {
			/* no /dev/null: stop before a file can take the slot */
			static const char msg[] = ": cannot open /dev/null for a closed standard descriptor\n";
			if (fd != STDERR_FILENO) {
				const char *prog = program_invocation_short_name;
				ssize_t ignored = write(STDERR_FILENO, prog, strlen(prog));
				ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
				(void)ignored;
			}
			_exit(SW_ESOFTWARE);
		}
	}
}

/* ---- the thread count ------------------------------------------------
 *
 * OpenBLAS 0.3.21 (Debian's OpenMP build, which the tools link) maps a
 * buffer of 128 MiB for each thread of its team, at load for
 * min(OMP_NUM_THREADS, cores) threads and at a call for OpenMP's thread
 * count then, and one for each thread that calls it from a parallel
 * region; when the mapping is refused (ulimit -v or -d) it retries for
 * ever: `ulimit -v 4000000; sw-norms --threads 64` spun without end.
 * Measured on tiny.h5 (strace, sw-norms): one thread maps two buffers
 * (one as OpenBLAS loads, one at the first call), 2, 4, 8 and 16 threads
 * 4, 7, 13 and 26 - at most two a thread. So a thread past the first is
 * counted as two buffers and its stack, and those threads get at most
 * half of what the limits leave (the rest is the data's); below what
 * the load, or a computing tool's first call, needs, the tool stops with
 * one line (70). And no more threads than 4 a core: more make no tool
 * faster, and each costs its buffers.
 */
#define THREAD_BUFFER_BYTES (128.0 * 1024 * 1024)
#define THREAD_BLAS_BYTES (2 * THREAD_BUFFER_BYTES)
/* a buffer and 4 MiB of the tool's own: what OpenBLAS's load, and then
 * a tool's first call, each need at least */
#define THREAD_MIN_BYTES (THREAD_BUFFER_BYTES + 4.0 * 1024 * 1024)
#define THREADS_PER_CORE 4

/* an rlimit's soft value in bytes; INFINITY when unlimited */
static double limit_bytes(int resource)
{
	struct rlimit rl;

	if (getrlimit(resource, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return INFINITY;
	return (double)rl.rlim_cur;
}

/* The n-th (from 0) decimal field of s; -1 if there is none. */
static double field(const char *s, int n)
{
	double v = -1;

	for (int i = 0; i <= n; i++) {
		while (*s == ' ')
			s++;
		if (*s < '0' || *s > '9')
			return -1;
		for (v = 0; *s >= '0' && *s <= '9'; s++)
			v = 10 * v + (*s - '0');
	}
	return v;
}

/* Bytes this process may still map under RLIMIT_AS and RLIMIT_DATA
 * (INFINITY when neither is set): the limits less its size and its data
 * now (/proc/self/statm). System calls and arithmetic only: this runs
 * before the C library's own constructors too (no stdio, no locale). */
static double mappable_bytes(void)
{
	double as = limit_bytes(RLIMIT_AS), data = limit_bytes(RLIMIT_DATA), page, size, dat;
	char buf[256];
	ssize_t got;
	int fd;

	if (isinf(as) && isinf(data))
		return INFINITY;
	page = (double)sysconf(_SC_PAGESIZE);
	fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	got = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[got > 0 ? got : 0] = '\0';
	/* size resident shared text lib data dt, in pages */
	size = field(buf, 0);
	dat = field(buf, 5);
	if (size < 0 || dat < 0)
		size = dat = 0;
	return fmin(as - size * page, data - dat * page);
}

/* want, at most THREADS_PER_CORE a core online */
static int cores_bound(int want)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	if (cores < 1)
		cores = 1;
	return want > THREADS_PER_CORE * cores ? (int)(THREADS_PER_CORE * cores) : want;
}

int tool_thread_bound(int want, double *left)
{
	double room = mappable_bytes(), stack = limit_bytes(RLIMIT_STACK);
	int n = cores_bound(want);

	if (left)
		*left = room;
	if (isfinite(room)) {
		/* glibc's threads take RLIMIT_STACK's size (32 MiB assumed
		 * when unlimited) */
		double each = THREAD_BLAS_BYTES + (isfinite(stack) ? stack : 32.0 * (1 << 20));
		double more = floor(0.5 * room / each);
		if (more < n - 1)
			n = 1 + (more > 0 ? (int)more : 0);
	}
	return n > 1 ? n : 1;
}

/* v's decimal digits, ending at end (a '\0' is put there): the first */
static char *decimal(long v, char *end)
{
	*end = '\0';
	do
		*--end = (char)('0' + v % 10);
	while ((v /= 10) > 0);
	return end;
}

/*
 * Before any library's constructor (ELF .preinit_array: the executable's
 * own, run first): OpenMP reads OMP_NUM_THREADS and OpenBLAS maps its
 * team's buffers when they load, before main, so a count the limits
 * cannot hold is made OMP_NUM_THREADS here, in the environment the
 * process started with: its digits rewritten in place (fewer threads,
 * no more digits), or, unset (OpenMP takes every core), the process
 * started again with it added - before anything has run, nothing lost.
 * The C library is not set up yet: envp, not getenv, and no stdio.
 */
static void bound_threads_at_load(int argc, char **argv, char **envp)
{
	static const char key[] = "OMP_NUM_THREADS=";
	char *val = NULL, digits[24], *d;
	double room = mappable_bytes();
	long want = -1;
	int count = 0, n;

	(void)argc;
	/* OpenBLAS maps a buffer as it loads, and would wait for ever where
	 * it cannot: say so, and stop (BLIS maps none) */
#ifndef SW_BLAS_BLIS
	if (room < THREAD_MIN_BYTES) {
		static const char a[] = ": the address-space limit (ulimit -v or -d) leaves ",
				  b[] = " MiB, and OpenBLAS needs 132 MiB to load\n";
		const char *prog = argv && argv[0] ? argv[0] : "sw", *slash = strrchr(prog, '/');
		prog = slash ? slash + 1 : prog;
		ssize_t ignored;
		d = decimal(room > 0 ? (long)(room / (1 << 20)) : 0, digits + sizeof digits - 1);
		ignored = write(STDERR_FILENO, prog, strlen(prog));
		ignored = write(STDERR_FILENO, a, sizeof a - 1);
		ignored = write(STDERR_FILENO, d, strlen(d));
		ignored = write(STDERR_FILENO, b, sizeof b - 1);
		(void)ignored;
		_exit(SW_ESOFTWARE);
	}
#endif
	for (; envp && envp[count]; count++)
		if (!strncmp(envp[count], key, sizeof key - 1))
			val = envp[count] + sizeof key - 1;
	if (val) {
		want = 0;
		/* a list ("8,2": nested levels) or anything but digits is
		 * left to OpenMP */
		for (const char *c = val; *c; c++) {
			if (*c < '0' || *c > '9' || want > 1 << 20)
				return;
			want = 10 * want + (*c - '0');
		}
	} else {
		want = sysconf(_SC_NPROCESSORS_ONLN);
	}
	if (want < 2 || (n = tool_thread_bound((int)want, NULL)) >= want)
		return;
	d = decimal(n, digits + sizeof digits - 1);
	if (val) {
		memcpy(val, d, strlen(d) + 1);
	} else {
		char var[sizeof key + sizeof digits], *env[count + 2];
		memcpy(var, key, sizeof key - 1);
		memcpy(var + sizeof key - 1, d, strlen(d) + 1);
		memcpy(env, envp, (size_t)count * sizeof *env);
		env[count] = var;
		env[count + 1] = NULL;
		execve("/proc/self/exe", argv, env);
		/* could not: go on with every core */
	}
}

__attribute__((section(".preinit_array"), used))
static void (*const preinit_threads)(int, char **, char **) = bound_threads_at_load;

/* Seconds on the monotonic clock. */
static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/*
 * A tool that computes (the ones whose help offers --threads: their
 * sgemm, syrk and LAPACK calls) maps a second buffer at its first call
 * (measured above), and OpenBLAS would wait for ever there where it
 * cannot. Under a limit, that buffer is taken now, by a 1 x 1 syrk
 * (released after the call, it is kept for the calls after): the data
 * the tool allocates later fails as memory does (70), not by a hang; and
 * a limit that leaves less is one line and 70 now.
 */
static void blas_buffer_now(const struct tool *t)
{
	double room = mappable_bytes(), one = 1, c = 0;

#ifdef SW_BLAS_BLIS
	(void)t, (void)room, (void)one, (void)c;
	return;                 /* BLIS maps no such buffers */
#endif
	if (!strstr(t->help, "--threads N") || !isfinite(room))
		return;
	if (room < THREAD_MIN_BYTES) {
		fprintf(stderr, "%s: the address-space limit (ulimit -v or -d) leaves %.0f MiB, "
			"and OpenBLAS needs %.0f MiB for its calls\n", t->prog,
			room > 0 ? floor(room / (1 << 20)) : 0, THREAD_MIN_BYTES / (1 << 20));
		exit(SW_ESOFTWARE);
	}
	cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, 1, 1, 1.0, &one, 1, 0.0, &c, 1);
}

void tool_init(struct tool *t, const char *prog, const char *usage,
	       const char *help, int argc, char **argv)
{
	tool_std_fds();
	tool_runtime(argv);
	memset(t, 0, sizeof *t);
	t->prog = prog;
	t->usage = usage;
	t->help = help;
	t->fmt = TABLE_TSV;
	t->argc = argc;
	t->argv = argv;
	opterr = 0;     /* tool_common_option says what was wrong */
	select_init(&t->sel);
	t->progress = isatty(STDERR_FILENO);
	/* off a terminal: lines, the first once the run has taken 10 s */
	t->started = now_s();
	t->log = t->progress ? 0 : 2;
	t->last_log = t->log ? t->started : 0;
	/* "| head" ends the tool quietly: die of SIGPIPE even if the parent
	 * ignored it, as every Unix filter does */
	signal(SIGPIPE, SIG_DFL);
	/* a file size limit (ulimit -f) makes write fail with EFBIG, reported
	 * like a full disk, instead of killing the tool mid-file */
	signal(SIGXFSZ, SIG_IGN);
	/* Ctrl-C or kill while an output is half-written: remove it */
	atomic_cleanup_on_signals();
	/* libhdf5 1.10's exit handler closes files left open and crashes on
	 * one whose close already failed (a full disk); we close every file
	 * ourselves, so the handler has nothing to do */
	H5dont_atexit();
	blas_buffer_now(t);
}

void tool_usage_error(struct tool *t, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", t->prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: %s\n", t->usage);
	exit(SW_EUSAGE);
}

int tool_common_option(struct tool *t, int opt, const char *arg)
{
	struct sw_err err;
	int rc;

	switch (opt) {
	case OPT_BLOCK: rc = select_add_blocks(&t->sel, arg, &err); break;
	case OPT_ROLE: rc = select_add_roles(&t->sel, arg, &err); break;
	case OPT_LAYER: rc = select_add_layers(&t->sel, arg, &err); break;
	case OPT_EXPERT: rc = select_add_experts(&t->sel, arg, &err); break;
	case OPT_NAME: rc = select_add_name(&t->sel, arg, &err); break;
	case OPT_JSON:
		t->fmt = TABLE_JSON;
		return 1;
	case OPT_LOG:
		t->log = 1;
		t->last_log = 0;
		t->quiet = 0;
		return 1;
	case OPT_QUIET:
		t->quiet = 1;
		t->progress = t->log = 0;
		return 1;
	case OPT_FORCE:
		t->force = 1;
		return 1;
	case OPT_THREADS: {
		/* both pools: OpenMP runs the tools' own loops, OpenBLAS its
		 * sgemm (its OpenMP build follows omp_set_num_threads only
		 * for calls made after it, so both are told) */
		int want = (int)tool_parse_int(t, "--threads", arg, 1, 1024);
		double left;
		int n = tool_thread_bound(want, &left);
		/* fewer when the limits cannot map them (tool_thread_bound):
		 * said, since the bits depend on the count */
		if (n < cores_bound(want) && !t->quiet)
			fprintf(stderr, "%s: --threads %d: %d thread%s: the address-space limit "
				"(ulimit -v or -d) leaves %.0f MiB, and OpenBLAS maps 256 MiB a thread\n",
				t->prog, want, n, n > 1 ? "s" : "", left / (1 << 20));
		omp_set_num_threads(n);
#ifndef SW_BLAS_BLIS            /* BLIS's OpenMP build follows OpenMP's */
		openblas_set_num_threads(n);
#endif
		return 1;
	}
	case OPT_HELP:
		printf("usage: %s\n%s", t->usage, t->help);
		exit(fflush(stdout) == 0 ? SW_OK : SW_EIO);
	case OPT_VERSION: {
		char line[512];
		printf("%s (scalewatch) %s\n", t->prog, SW_VERSION);
		if (t->mpi_use)
			printf("%s\n", comm_version_line(line, sizeof line, t->mpi_use));
		exit(fflush(stdout) == 0 ? SW_OK : SW_EIO);
	}
	case '?': {
		/* getopt says nothing (opterr 0, tool_init): the message is
		 * "sw-TOOL: ...", as every other, not argv[0]'s path */
		const char *bad = optind > 0 && optind <= t->argc ? t->argv[optind - 1] : "?";
		fprintf(stderr, "%s: '%s': an unknown option, or one missing its value\n", t->prog, bad);
		fprintf(stderr, "usage: %s\n", t->usage);
		exit(SW_EUSAGE);
	}
	default:
		return 0;
	}
	if (rc)
		tool_usage_error(t, "%s", err.msg);
	return 1;
}

void tool_files_begin(struct tool *t, int optind_)
{
	t->argi = optind_;
	if (t->argi >= t->argc || (t->argi == t->argc - 1 && !strcmp(t->argv[t->argi], "-"))) {
		if (isatty(STDIN_FILENO))
			tool_usage_error(t, "no FILE given (names are read from stdin when it is not a terminal)");
		t->from_stdin = 1;
	}
}

/* The next name as given: an operand, or a line of stdin. */
static const char *next_name(struct tool *t)
{
	if (!t->from_stdin)
		return t->argi < t->argc ? t->argv[t->argi++] : NULL;
	for (;;) {
		ssize_t n = getline(&t->line, &t->line_cap, stdin);
		if (n < 0) {
			tool_stdin_failed(t);
			return NULL;
		}
		if (tool_name_line(t, t->line, n) > 0)
			return t->line;
	}
}

const char *tool_next_file(struct tool *t)
{
	for (;;) {
		struct sw_err err;
		const char *name;
		int is_run;

		if (t->run_i < t->run_n)
			return t->run_paths[t->run_i++];
		rundir_paths_free(t->run_paths, t->run_n);
		t->run_paths = NULL;
		t->run_n = t->run_i = 0;
		if (!(name = next_name(t)) || t->run_dirs == TOOL_RUN_DIRS_NONE)
			return name;
		if (rundir_checkpoints(name, &is_run, &t->run_paths, &t->run_n, &err)) {
			tool_error(t, name, &err);
			continue;
		}
		if (!is_run)
			return name;
		if (t->run_dirs == TOOL_RUN_DIRS_TRACE) {
			size_t len = strlen(name) + sizeof "/trace.h5";
			rundir_paths_free(t->run_paths, t->run_n);
			t->run_n = 0;
			if (!(t->run_paths = malloc(sizeof *t->run_paths)) ||
			    !(t->run_paths[0] = malloc(len))) {
				sw_fail(&err, SW_ESOFTWARE, "out of memory");
				tool_error(t, name, &err);
				continue;
			}
			t->run_n = 1;
			snprintf(t->run_paths[0], len, "%s%strace.h5", name,
				 name[strlen(name) - 1] == '/' ? "" : "/");
		} else if (!t->run_n) {
			sw_fail(&err, SW_ENOINPUT, "a run directory without a checkpoint yet");
			tool_error(t, name, &err);
		}
	}
}

int tool_name_line(struct tool *t, char *line, ssize_t n)
{
	struct sw_err err;
	char where[64];

	t->stdin_lines++;
	snprintf(where, sizeof where, "stdin: line %ld", t->stdin_lines);
	if (n > 0 && line[n - 1] == '\n')
		line[--n] = '\0';
	if (n > 0 && line[n - 1] == '\r')
		line[--n] = '\0';
	if ((ssize_t)strlen(line) != n) {
		sw_fail(&err, SW_EDATA, "a NUL byte in a file name: not a list of names");
		tool_error(t, where, &err);
		return -1;
	}
	if (n >= PATH_MAX) {
		sw_fail(&err, SW_EDATA, "%zd bytes, more than a path can have (%d)", n, PATH_MAX);
		tool_error(t, where, &err);
		return -1;
	}
	return n > 0;
}

void tool_note_family(const struct tool *t, const char *file, const struct ckpt *ck)
{
	const struct sw_config *c = &ckpt_meta(ck)->config;

	if (!family_find(c->arch) && !t->quiet)
		fprintf(stderr, "%s: %s: architecture '%s' is not known: its tensors are listed "
			"with block and role other (known: %s, %s)\n", t->prog, file,
			c->arch[0] ? c->arch : "(none)", FAMILY_COMPUTED_LIST, FAMILY_LISTED);
}

struct ckpt *tool_next_ckpt(struct tool *t, const char **file)
{
	struct ckpt *ck;
	struct sw_err err;

	while (!tool_stdout_broken(t) && (*file = tool_next_file(t))) {
		if (!ckpt_open(*file, &ck, &err)) {
			tool_note_family(t, *file, ck);
			return ck;
		}
		tool_error(t, *file, &err);
	}
	return NULL;
}

int tool_check_output(struct tool *t, const char *out, const char *const *inputs, size_t n)
{
	struct sw_err err;
	int rc = atomic_check_output(out, t->force, inputs, n, &err);

	if (rc)
		tool_error(t, out, &err);
	return rc;
}

int tool_check_output_ckpt(struct tool *t, const char *out, const char *ckpt, const char *data)
{
	struct ckpt_files in = {0};
	struct sw_err err;
	int rc = ckpt_files_add(&in, ckpt, 1, &err);

	if (!rc && data)
		rc = ckpt_files_add_one(&in, data, &err);
	if (rc)
		tool_error(t, NULL, &err);
	else
		rc = tool_check_output(t, out, (const char *const *)in.name, in.n);
	ckpt_files_free(&in);
	return rc;
}

void tool_error(struct tool *t, const char *file, const struct sw_err *err)
{
	char line[sizeof t->last_error];
	struct sw_err name;

	tool_progress_done(t);
	fflush(stdout);
	/* a name from a file or stdin: its control bytes escaped, as a
	 * message's are (status.h) */
	if (file) {
		sw_fail(&name, SW_OK, "%s", file);
		snprintf(line, sizeof line, "%s: %.900s: %s", t->prog, name.msg, err->msg);
	} else {
		snprintf(line, sizeof line, "%s: %s", t->prog, err->msg);
	}
	/* one fault met again (a tied head is the embedding's tensor, read
	 * for each of its rows) is said once */
	if (strcmp(line, t->last_error)) {
		fprintf(stderr, "%s\n", line);
		memcpy(t->last_error, line, sizeof line);
	}
	/* the first failure's status; a real error beats a --check finding */
	if (!t->status || t->status == SW_ECHECK)
		t->status = err->code ? err->code : SW_ESOFTWARE;
}

void tool_selected(struct tool *t, const char *file, size_t count, const char *what)
{
	if (count || !select_given(&t->sel)) {
		t->files_matched++;
		return;
	}
	t->files_unmatched++;
	tool_progress_done(t);
	fflush(stdout);
	fprintf(stderr, "%s: %s: no %s matches the selection (%s)\n", t->prog, file, what,
		select_describe(&t->sel));
}

/* The exit status so far; a selection that matched nothing in any file
 * read is bad data (65), as a real error would be, so that "&&" stops:
 * a table of only its header is no result. */
static int selection_status(const struct tool *t)
{
	if (t->files_unmatched && !t->files_matched && (!t->status || t->status == SW_ECHECK))
		return SW_EDATA;
	return t->status;
}

void tool_progress(struct tool *t, const char *fmt, ...)
{
	va_list ap;

	if (t->log) {
		double now = now_s();
		if (t->last_log > 0 && now - t->last_log < 10)
			return;
		t->last_log = now;
		fprintf(stderr, "%s: [%.0f s] ", t->prog, now - t->started);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
		fflush(stderr);
		return;
	}
	if (!t->progress)
		return;
	fprintf(stderr, "\r\033[K%s: ", t->prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
}

void tool_progress_done(struct tool *t)
{
	if (t->progress && !t->log)
		fputs("\r\033[K", stderr);
}

int tool_stdout_broken(struct tool *t)
{
	int e = errno;  /* the failed write's, when asked right after it */

	if (!ferror(stdout))
		return 0;
	if (!t->stdout_errno)
		t->stdout_errno = e ? e : EIO;
	return 1;
}

int tool_stdin_failed(struct tool *t)
{
	struct sw_err err;
	int e = errno;  /* the failed read's, when asked right after it */

	if (!ferror(stdin))
		return 0;
	if (!t->stdin_reported) {
		t->stdin_reported = 1;
		if (!e)
			e = EIO;
		sw_fail(&err, sw_errno_status(e), "cannot read: %s", strerror(e));
		tool_error(t, "stdin", &err);
	}
	return 1;
}

int tool_finish(struct tool *t)
{
	int status = selection_status(t), failed = 0;

	tool_progress_done(t);
	/* the first failure's errno: an earlier write's, this flush's, the close's */
	if (ferror(stdout))
		tool_stdout_broken(t);
	errno = 0;
	if (fflush(stdout) != 0 && !t->stdout_errno)
		t->stdout_errno = errno ? errno : EIO;
	failed = t->stdout_errno != 0;
	errno = 0;
	if (fclose(stdout) != 0 && !failed) {
		t->stdout_errno = errno ? errno : EIO;
		failed = 1;
	}
	if (failed && t->stdout_errno != EPIPE) {
		fprintf(stderr, "%s: write error: %s\n", t->prog, strerror(t->stdout_errno));
		if (!status)
			status = SW_EIO;
	}
	free(t->line);
	rundir_paths_free(t->run_paths, t->run_n);
	t->run_paths = NULL;
	t->run_n = t->run_i = 0;
	t->line = NULL;
	return status;
}

/* tool_run_matrices' state, shared by the jobs matsched runs */
struct matrix_run {
	struct tool *t;
	const char *file;
	const struct tool_matrix_jobs *jobs;
	struct sw_err *errs;
	int *rcs;
	size_t n, done;
	double t0;
};

static int matrix_job(void *ctx, size_t k)
{
	struct matrix_run *m = ctx;

	m->rcs[k] = m->jobs->compute(m->jobs->ctx, k, &m->errs[k]);
	MATSCHED_CRITICAL
	tool_progress(m->t, "%s: matrix %zu of %zu, %s, %.1f s", m->file, ++m->done, m->n,
		      m->jobs->name(m->jobs->ctx, k), now_s() - m->t0);
	return m->rcs[k];
}

void tool_run_matrices(struct tool *t, const char *file, const struct matsched_item *items,
		       size_t n, const struct tool_matrix_jobs *jobs)
{
	struct matrix_run m = {t, file, jobs, NULL, NULL, n, 0, now_s()};
	struct sw_err err;

	m.errs = calloc(n ? n : 1, sizeof *m.errs);
	m.rcs = calloc(n ? n : 1, sizeof *m.rcs);
	if (!m.errs || !m.rcs) {
		sw_fail(&err, SW_ESOFTWARE, "out of memory");
		tool_error(t, file, &err);
	} else if (matsched_run(items, n, 0, matsched_available_memory(), matrix_job, &m, &err)) {
		tool_error(t, file, &err);
	} else {
		/* printed in model order */
		for (size_t k = 0; k < n && !tool_stdout_broken(t); k++)
			if (m.rcs[k])
				tool_error(t, file, &m.errs[k]);
			else
				jobs->emit(jobs->ctx, k);
	}
	free(m.errs);
	free(m.rcs);
}

double tool_parse_check(struct tool *t, const char *name, const char *arg, double lo, double hi)
{
	size_t n = strlen(name);
	char opt[64];

	snprintf(opt, sizeof opt, "--check %s", name);
	if (!strncmp(arg, name, n) && arg[n] == '=')
		return tool_parse_double(t, opt, arg + n + 1, lo, hi);
	if (strchr(arg, '=') || !(arg[0] == '.' || (arg[0] >= '0' && arg[0] <= '9')))
		tool_usage_error(t, "--check: '%s' is not %s=NUMBER", arg, name);
	fprintf(stderr, "%s: --check %s is the old spelling of --check %s=%s; it goes in the next "
		"release\n", t->prog, arg, name, arg);
	return tool_parse_double(t, "--check", arg, lo, hi);
}

long long tool_parse_int(struct tool *t, const char *opt, const char *arg,
			 long long lo, long long hi)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(arg, &end, 10);
	if (errno || end == arg || *end || v < lo || v > hi)
		tool_usage_error(t, "%s: '%s' is not an integer in %lld..%lld", opt, arg, lo, hi);
	return v;
}

double tool_parse_double(struct tool *t, const char *opt, const char *arg,
			 double lo, double hi)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || !isfinite(v) || v < lo || v > hi)
		tool_usage_error(t, "%s: '%s' is not a number in %g..%g", opt, arg, lo, hi);
	return v;
}

void tool_runtime(char **argv)
{
#ifdef SW_BLAS_BLIS
	const char *core = NULL, *want = NULL;  /* BLIS picks its kernels itself */
#else
	const char *core = openblas_get_corename(), *want = NULL;
#endif
	int again = 0;

	/* OpenMP threads that wait by spinning take the core a descheduled
	 * teammate needs when another process holds one; threads that sleep
	 * at once (OMP_WAIT_POLICY=passive) pay a wake-up at every parallel
	 * region, which on this project's 2-core VM made sw-train 1.2-1.5x
	 * and sw-spectrum --top 1.5x slower on a quiet machine. A short spin
	 * (1000 rounds, microseconds) keeps most of the one without the
	 * other: with a busy process on one core, as fast as passive
	 * (measured: docs/numerics.md, "Threads"). */
	if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT") &&
	    setenv("GOMP_SPINCOUNT", "1000", 1) == 0)
		again = 1;
	if (!getenv("OPENBLAS_CORETYPE") && core &&
	    (!strcasecmp(core, "prescott") || !strcasecmp(core, "core2") ||
	     !strcasecmp(core, "nehalem"))) {
		__builtin_cpu_init();
		if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		    __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
			want = "SkylakeX";
		else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
			want = "Haswell";
		if (want && setenv("OPENBLAS_CORETYPE", want, 1) == 0)
			again = 1;
	}
	/* both are read when the libraries load: run again to take effect */
	if (again)
		execv("/proc/self/exe", argv);
	/* could not re-execute: go on as we are */
}

void tool_step_cell(struct table *tb, int has_step, int64_t step)
{
	if (has_step)
		table_int(tb, step);
	else
		table_empty(tb);
}

void tool_tokens_cell(struct table *tb, int has_step, int64_t tokens)
{
	tool_step_cell(tb, has_step && tokens >= 0, tokens);     /* -1: the step alone */
}

const char *tool_next_file_shared(struct tool *t, struct comm *c, char *buf, size_t len)
{
	int64_t n = -1;
	struct sw_err err;

	if (comm_rank(c) == 0) {
		const char *f = tool_stdout_broken(t) ? NULL : tool_next_file(t);
		if (f && strlen(f) < len) {
			n = (int64_t)strlen(f);
			memcpy(buf, f, (size_t)n + 1);
		} else if (f) {
			sw_fail(&err, SW_EUSAGE, "file name longer than %zu bytes", len - 1);
			tool_error(t, "stdin", &err);
		}
	}
	if (comm_bcast(c, &n, 1, COMM_I64, 0, COMM_HOST, &err) ||
	    (n >= 0 && comm_bcast(c, buf, (size_t)n + 1, COMM_BYTE, 0, COMM_HOST, &err))) {
		tool_error(t, "MPI", &err);
		return NULL;
	}
	return n < 0 ? NULL : buf;
}

void tool_shared_failure(struct tool *t, const char *file, int rc, int reporter, int rank,
			 const struct sw_err *err)
{
	if (!rc)
		return;
	if (reporter == rank)
		tool_error(t, file, err);
	else if (!t->status)
		t->status = rc;
}

void tool_row_begin(struct table *tb, const char *file, int has_step, int64_t step)
{
	table_str(tb, file);
	tool_step_cell(tb, has_step, step);
}

void tool_row_end(struct table *tb, int has_step, int64_t tokens)
{
	tool_tokens_cell(tb, has_step, tokens);
	table_end_row(tb);
}

int tool_batch_option(struct tool *t, int opt, const char *arg, struct blocksharp_opts *b)
{
	switch (opt) {
	case OPT_DATA: b->data = arg; return 1;
	case OPT_DATA_FORMAT:
		if (data_format_parse(arg, &b->fmt) < 0)
			tool_usage_error(t, "--data-format: auto, llmc, uint16 or bytes");
		return 1;
	case OPT_BATCH_TOKENS: b->batch_tokens = tool_parse_int(t, "--batch-tokens", arg, 1, 1LL << 32); return 1;
	case OPT_SEQ_LEN: b->seq_len = (int)tool_parse_int(t, "--seq-len", arg, 1, 1 << 16); return 1;
	case OPT_MICRO_BATCH: b->micro = (int)tool_parse_int(t, "--micro-batch", arg, 1, 1 << 20); return 1;
	case OPT_SEED: b->seed = (uint64_t)tool_parse_int(t, "--seed", arg, 0, 1LL << 62); return 1;
	case OPT_LOW_MEMORY: b->low_memory = 1; return 1;
	default: return 0;
	}
}

void tool_note(struct tool *t, const char *fmt, ...)
{
	va_list ap;

	if (!t->log && !t->progress)
		return;
	fprintf(stderr, "%s: [%.0f s] ", t->prog, now_s() - t->started);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
}
