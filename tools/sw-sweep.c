/*
 * sw-sweep - a grid of sw-train runs: one run directory and one sw-train
 * command per point (lib/runs/sweep.c), run here (-j N, through GNU parallel
 * when installed, else xargs -P) or as a Slurm job array (--slurm);
 * resumable. --run runs one run of a sweep (what the runners and the
 * array tasks call); --status lists the runs' states; --checkpoints their
 * checkpoints, for sw-transfer and sw-spectrum --fit.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/runs/rundir.h"
#include "../lib/runs/sweep.h"
#include "common.h"

static const char usage[] =
	"sw-sweep --out DIR [--lr LIST] [--batch LIST] [--wd LIST]\n"
	"                [--d-model LIST] [--tokens LIST] [-j N]\n"
	"                [--runner auto|parallel|xargs] [--launcher CMD]\n"
	"                [--slurm FILE [--sbatch OPT]...] [--dry-run] [--json]\n"
	"                [--log | --quiet] -- SW-TRAIN-OPTION ...\n"
	"       sw-sweep --run DIR [--launcher CMD] INDEX\n"
	"       sw-sweep --status DIR [--json]\n"
	"       sw-sweep --checkpoints DIR";
static const char help[] =
	"A grid of sw-train runs: DIR/NAME per point, the grid in DIR/sweep.tsv. Runs\n"
	"what is not done (-j at a time) and prints each run's state: run state\n"
	"checkpoint. Run again to resume: done runs are skipped, cut ones resume.\n"
	"\n"
	"  --out DIR          the sweep's directory\n"
	"  --lr, --batch, --wd, --d-model LIST   comma lists of sw-train's values\n"
	"  --tokens LIST      training tokens: --steps = tokens / (batch x seq-len x\n"
	"                     grad-accum)\n"
	"  -j N, --jobs N     runs at a time (1)\n"
	"  --runner R         auto (GNU parallel when installed, else xargs -P),\n"
	"                     parallel, xargs\n"
	"  --launcher CMD     words before sw-train, e.g. 'mpirun -np 2' (split on\n"
	"                     spaces)\n"
	"  --slurm FILE       write a Slurm job-array script of the runs not done;\n"
	"                     run nothing\n"
	"  --sbatch OPT       an #SBATCH line of that script (repeatable), e.g.\n"
	"                     --time=1:00:00\n"
	"  --dry-run          write the sweep's files, run nothing\n"
	"  --run DIR INDEX    run one run of a sweep: start, resume, or skip it when done\n"
	"  --status DIR       the state of every run: new, partial, done\n"
	"  --checkpoints DIR  every checkpoint of the sweep's runs, one a line\n"
	"  --json             the runs' states as JSON Lines instead of TSV\n"
	"  --log              say on stderr how many runs are to do, and each run's end\n"
	"                     (the default; --log also makes each run log its progress)\n"
	"  --quiet            say nothing of the kind\n"
	"  --help, --version\n"
	"Everything after -- goes to every sw-train, each option in full, checked\n"
	"for every run as sw-train reads it. A sweep's command files run only as\n"
	"sw-sweep writes them, nothing in it through a symbolic link (exit 65).\n"
	"See sw-sweep(1).\n";

enum {
	O_OUT = OPT_TOOL_FIRST, O_LR, O_BATCH, O_WD, O_D_MODEL, O_TOKENS, O_RUNNER, O_LAUNCHER,
	O_SLURM, O_SBATCH, O_DRY_RUN, O_RUN, O_STATUS, O_CHECKPOINTS
};

/* This program, to run again; its sibling sw-train when there is one. */
static void self_paths(char *self, size_t len, char *train, size_t tlen)
{
	ssize_t n = readlink("/proc/self/exe", self, len - 1);
	char *slash;

	self[n > 0 ? n : 0] = '\0';
	if (n <= 0)
		snprintf(self, len, "sw-sweep");
	snprintf(train, tlen, "%s", self);
	slash = strrchr(train, '/');
	if (slash && (size_t)(slash - train) + 10 < tlen) {
		strcpy(slash + 1, "sw-train");
		if (access(train, X_OK) == 0)
			return;
	}
	snprintf(train, tlen, "sw-train");
}

/* In the child: run argv, or say why not and exit 127 (not found) or 126. */
static void exec_child(char *const *argv)
{
	execvp(argv[0], argv);
	fprintf(stderr, "sw-sweep: %s: %s\n", argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

/* The child's exit status (128 + N for a signal), or -1 with errno. */
static int wait_child(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Run argv (execvp), stdout and stderr to /dev/null when quiet (a probe:
 * a command not installed says nothing); its exit status (128 + N for a
 * signal), or -1 with errno. */
static int run_child(char *const *argv, int quiet, FILE *in_text, const char *in)
{
	int fds[2] = {-1, -1};
	pid_t pid;

	if (in && pipe(fds) < 0)
		return -1;
	fflush(stdout);
	if ((pid = fork()) < 0)
		return -1;
	if (pid == 0) {
		if (in) {
			dup2(fds[0], STDIN_FILENO);
			close(fds[0]);
			close(fds[1]);
		}
		if (quiet && (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)))
			_exit(SW_ESOFTWARE);
		exec_child(argv);
	}
	(void)in_text;
	if (in) {
		ssize_t ignored;
		close(fds[0]);
		ignored = write(fds[1], in, strlen(in));
		(void)ignored;
		close(fds[1]);
	}
	return wait_child(pid);
}

/*
 * Run argv with its standard output thrown away and its standard error
 * copied, as it comes, to the file open on out (appended: a resumed run's
 * log goes on; closed here) and, with echo, to ours. last gets its last line that is not empty
 * (len bytes): what to say when it fails. The exit status as run_child's.
 */
static int run_logged(char *const *argv, int out, int echo, char *last, size_t len)
{
	int fds[2];
	char buf[4096], line[1024];
	size_t used = 0;
	ssize_t got, ignored;
	pid_t pid;

	last[0] = '\0';
	if (pipe(fds) < 0) {
		close(out);
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) < 0) {
		close(fds[0]);
		close(fds[1]);
		close(out);
		return -1;
	}
	if (pid == 0) {
		dup2(fds[1], STDERR_FILENO);
		close(fds[0]);
		close(fds[1]);
		if (!freopen("/dev/null", "w", stdout))
			_exit(SW_ESOFTWARE);
		exec_child(argv);
	}
	close(fds[1]);
	while ((got = read(fds[0], buf, sizeof buf)) != 0) {
		if (got < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		/* a full disk loses the log, not the run */
		ignored = write(out, buf, (size_t)got);
		(void)ignored;
		if (echo)
			fwrite(buf, 1, (size_t)got, stderr);
		for (ssize_t k = 0; k < got; k++) {
			if (buf[k] != '\n' && buf[k] != '\r') {
				if (used + 1 < sizeof line)
					line[used++] = buf[k];
				continue;
			}
			if (used) {
				line[used] = '\0';
				snprintf(last, len, "%s", line);
			}
			used = 0;
		}
	}
	if (used) {
		line[used] = '\0';
		snprintf(last, len, "%s", line);
	}
	fflush(stderr);
	close(fds[0]);
	close(out);
	return wait_child(pid);
}

/* --launcher CMD: its words, space-separated, before sw-train. */
static int split_words(char *cmd, char **words, int max)
{
	int n = 0;

	for (char *w = strtok(cmd, " "); w && n < max; w = strtok(NULL, " "))
		words[n++] = w;
	return n;
}

/* --run DIR INDEX: start, resume or skip run INDEX. */
static int run_one(struct tool *tl, const char *dir, const char *index, char *launcher)
{
	char self[PATH_MAX], train[PATH_MAX], name[256], log[PATH_MAX + 300], last[1024], **argv;
	char *full[4200];
	enum sweep_state st;
	struct sw_err err;
	long long i = tool_parse_int(tl, "--run INDEX", index, 0, 100000);
	int rc, n = 0, fd;

	self_paths(self, sizeof self, train, sizeof train);
	if ((rc = sweep_argv(dir, (int)i, name, sizeof name, &st, &argv, &err))) {
		tool_error(tl, dir, &err);
		return tool_finish(tl);
	}
	if (st == SWEEP_DONE)
		return tool_finish(tl);
	if (launcher)
		n = split_words(launcher, full, 16);
	full[n++] = train;
	for (int k = 1; argv[k] && n < 4198; k++)
		full[n++] = argv[k];
	full[n] = NULL;
	/* the run's standard error in DIR/RUN.log beside its directory (not
	 * in it: sw-train owns that), never through a link */
	snprintf(log, sizeof log, "%s/%s.log", dir, name);
	if ((rc = sweep_open_log(dir, name, &fd, &err))) {
		sweep_argv_free(argv);
		tool_error(tl, dir, &err);
		return tool_finish(tl);
	}
	rc = run_logged(full, fd, tl->log == 1, last, sizeof last);  /* echoed with --log */
	sweep_argv_free(argv);
	if (rc > 0) {
		/* a failure is said whatever --quiet: the run's last line and its log */
		char run[PATH_MAX + 300];
		snprintf(run, sizeof run, "%s/%s", dir, name);
		sw_fail(&err, rc, "failed (exit %d)%s%s; its log: %s", rc, last[0] ? ": " : "",
			last, log);
		tool_error(tl, run, &err);
	} else if (rc == 0) {
		tool_note(tl, "%s/%s: finished", dir, name);   /* but with --quiet */
	}
	if (rc < 0) {
		sw_fail(&err, SW_ESOFTWARE, "%s", strerror(errno));
		tool_error(tl, dir, &err);
		return tool_finish(tl);
	}
	if (rc && !tl->status)
		tl->status = rc;
	return tool_finish(tl);
}

/* Every checkpoint of run name, in order of steps, one a line. */
static int print_checkpoints(struct tool *tl, const char *dir, const char *name)
{
	char rd[4400];
	struct rundir_claim c;
	struct sw_err err;
	int rc;

	snprintf(rd, sizeof rd, "%s/%s", dir, name);
	if ((rc = rundir_claim(rd, NULL, NULL, 0, 1, &c, &err))) {
		tool_error(tl, rd, &err);
		return rc;
	}
	for (size_t i = 0; i < c.n; i++)
		if (!c.f[i].tmp)
			printf("%s/%s\n", rd, c.f[i].name);
	rundir_claim_free(&c);
	return SW_OK;
}

/* The state of every run, as a table; pending (when not NULL) gets the
 * indices of the runs not done. */
static int each_run(struct tool *tl, const char *dir, int print_states, int print_ckpts, int *pending,
		    int *npending)
{
	char last[4400];
	struct sweep_file f;
	struct sw_err err;
	struct table tb;
	static const char *const cols[] = {"run", "state", "checkpoint"};
	int rc, notdone = 0;

	if ((rc = sweep_load(dir, &f, &err))) {
		tool_error(tl, dir, &err);
		return rc;
	}
	table_init(&tb, stdout, tl->fmt, cols, 3);
	if (print_states)
		table_header(&tb);
	for (int i = 0; i < f.nrows && !rc; i++) {
		enum sweep_state st;
		if ((rc = sweep_run_state(dir, f.rows[i].name, f.rows[i].steps, &st, last, sizeof last, &err))) {
			tool_error(tl, dir, &err);
			break;
		}
		if (st != SWEEP_DONE && pending)
			pending[notdone] = i;
		notdone += st != SWEEP_DONE;
		if (print_states) {
			char rd[4400];
			snprintf(rd, sizeof rd, "%s/%s", dir, f.rows[i].name);
			table_str(&tb, rd);
			table_str(&tb, sweep_state_name(st));
			table_str(&tb, last);
			table_end_row(&tb);
		}
		if (print_ckpts && (rc = print_checkpoints(tl, dir, f.rows[i].name)))
			break;
	}
	if (npending)
		*npending = notdone;
	sweep_file_free(&f);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"help", no_argument, NULL, OPT_HELP}, {"version", no_argument, NULL, OPT_VERSION},
		{"json", no_argument, NULL, OPT_JSON},
		TOOL_LOG_OPTION,
		{"out", required_argument, NULL, O_OUT},
		{"lr", required_argument, NULL, O_LR},
		{"batch", required_argument, NULL, O_BATCH},
		{"wd", required_argument, NULL, O_WD},
		{"d-model", required_argument, NULL, O_D_MODEL},
		{"tokens", required_argument, NULL, O_TOKENS},
		{"runner", required_argument, NULL, O_RUNNER},
		{"launcher", required_argument, NULL, O_LAUNCHER},
		{"slurm", required_argument, NULL, O_SLURM},
		{"sbatch", required_argument, NULL, O_SBATCH},
		{"dry-run", no_argument, NULL, O_DRY_RUN},
		{"run", required_argument, NULL, O_RUN},
		{"status", required_argument, NULL, O_STATUS},
		{"checkpoints", required_argument, NULL, O_CHECKPOINTS},
		{"jobs", required_argument, NULL, 'j'},
		{"json", no_argument, NULL, OPT_JSON},
		{NULL, 0, NULL, 0}
	};
	static const int axis_of[] = {SWEEP_LR, SWEEP_BATCH, SWEEP_WD, SWEEP_D_MODEL, SWEEP_TOKENS};
	struct tool tl;
	struct sweep s;
	struct sw_err err;
	char *sbatch[64], *launcher = NULL, self[PATH_MAX], train[PATH_MAX];
	const char *runner = "auto", *slurm = NULL, *run_dir = NULL, *status_dir = NULL, *ckpt_dir = NULL;
	int opt, jobs = 1, nsbatch = 0, dry = 0, rc, *pending, npending;

	tool_init(&tl, "sw-sweep", usage, help, argc, argv);
	memset(&s, 0, sizeof s);
	while ((opt = getopt_long(argc, argv, "+j:", longopts, NULL)) != -1) {
		switch (opt) {
		case O_OUT: snprintf(s.dir, sizeof s.dir, "%s", optarg); break;
		case O_LR: case O_BATCH: case O_WD: case O_D_MODEL: case O_TOKENS:
			if (sweep_set_axis(&s, axis_of[opt - O_LR], optarg, &err))
				tool_usage_error(&tl, "%s", err.msg);
			break;
		case 'j': jobs = (int)tool_parse_int(&tl, "--jobs", optarg, 1, 4096); break;
		case O_RUNNER:
			if (strcmp(optarg, "auto") && strcmp(optarg, "parallel") && strcmp(optarg, "xargs"))
				tool_usage_error(&tl, "--runner: auto, parallel or xargs");
			runner = optarg;
			break;
		case O_LAUNCHER: launcher = optarg; break;
		case O_SLURM: slurm = optarg; break;
		case O_SBATCH:
			if (nsbatch == 64)
				tool_usage_error(&tl, "--sbatch: at most 64");
			sbatch[nsbatch++] = optarg;
			break;
		case O_DRY_RUN: dry = 1; break;
		case O_RUN: run_dir = optarg; break;
		case O_STATUS: status_dir = optarg; break;
		case O_CHECKPOINTS: ckpt_dir = optarg; break;
		default: tool_common_option(&tl, opt, optarg); break;
		}
	}
	if (run_dir) {
		if (optind != argc - 1)
			tool_usage_error(&tl, "--run DIR takes one INDEX");
		return run_one(&tl, run_dir, argv[optind], launcher);
	}
	if (status_dir || ckpt_dir) {
		if (optind != argc)
			tool_usage_error(&tl, "unexpected argument '%s'", argv[optind]);
		each_run(&tl, status_dir ? status_dir : ckpt_dir, !!status_dir, !!ckpt_dir, NULL, NULL);
		return tool_finish(&tl);
	}
	if (!s.dir[0])
		tool_usage_error(&tl, "--out DIR is required");
	s.args = argv + optind;
	s.nargs = argc - optind;
	if ((rc = sweep_expand(&s, &err)) || (slurm && (rc = sweep_check_slurm(s.dir, sbatch, nsbatch, &err))))
		tool_usage_error(&tl, "%s", err.msg);
	if ((rc = sweep_write(&s, &err))) {
		tool_error(&tl, s.dir, &err);
		sweep_free(&s);
		return tool_finish(&tl);
	}
	if (!(pending = malloc((size_t)s.nruns * sizeof *pending)) ||
	    each_run(&tl, s.dir, 0, 0, pending, &npending)) {
		free(pending);
		sweep_free(&s);
		rc = tool_finish(&tl);
		return rc ? rc : SW_ESOFTWARE;        /* 0: out of memory, said nowhere yet */
	}
	self_paths(self, sizeof self, train, sizeof train);
	if (slurm) {
		if ((rc = sweep_write_slurm(&s, slurm, self, pending, npending, sbatch, nsbatch, &err)))
			tool_error(&tl, slurm, &err);
	} else if (!dry && npending) {
		/* the runs not done, through the runner */
		char jn[16], *cmd[40], *text = malloc((size_t)npending * 12 + 1), **words;
		int n = 0, use_parallel = 0;
		size_t len = 0;

		snprintf(jn, sizeof jn, "%d", jobs);
		if (strcmp(runner, "xargs")) {
			char *probe[] = {"parallel", "--version", NULL};
			use_parallel = run_child(probe, 1, NULL, NULL) == 0;
			if (!use_parallel && !strcmp(runner, "parallel")) {
				sw_fail(&err, SW_EUSAGE, "--runner parallel: GNU parallel is not installed");
				tool_error(&tl, s.dir, &err);
				free(text);
				free(pending);
				sweep_free(&s);
				return tool_finish(&tl);
			}
		}
		words = calloc((size_t)npending + 48, sizeof *words);
		if (!text || !words) {
			fprintf(stderr, "sw-sweep: out of memory\n");
			exit(SW_ESOFTWARE);
		}
		if (use_parallel) {
			/* --line-buffer: each run's lines as they come, not all
			 * at its end */
			cmd[n++] = "parallel"; cmd[n++] = "--will-cite"; cmd[n++] = "-q"; cmd[n++] = "-j";
			cmd[n++] = jn; cmd[n++] = "--halt"; cmd[n++] = "never"; cmd[n++] = "--line-buffer";
		} else {
			cmd[n++] = "xargs"; cmd[n++] = "-P"; cmd[n++] = jn; cmd[n++] = "-n"; cmd[n++] = "1";
		}
		cmd[n++] = self;
		/* a line as each run ends, on a terminal or in a log, not
		 * minutes of silence (the runs' own progress lines would
		 * interleave); none with --quiet */
		if (tl.quiet)
			cmd[n++] = "--quiet";
		else if (tl.log == 1)
			cmd[n++] = "--log";     /* and each run's lines as they come */
		tool_note(&tl, "%s: %d of %d runs to do, %d at a time", s.dir, npending, s.nruns,
			  jobs);
		cmd[n++] = "--run";
		cmd[n++] = s.dir;
		if (launcher) {
			cmd[n++] = "--launcher";
			cmd[n++] = launcher;
		}
		memcpy(words, cmd, (size_t)n * sizeof *cmd);
		text[0] = '\0';
		if (use_parallel) {
			words[n++] = "{}";
			words[n++] = ":::";
		}
		for (int i = 0; i < npending; i++) {
			int k = snprintf(text + len, 12, "%d", pending[i]);
			if (use_parallel)
				words[n++] = text + len;
			len += (size_t)k + 1;
			if (!use_parallel)
				text[len - 1] = '\n';
		}
		if (!use_parallel)
			text[len] = '\0';
		words[n] = NULL;
		rc = run_child(words, 0, NULL, use_parallel ? NULL : text);
		free(words);
		free(text);
	}
	/* what each run came to */
	each_run(&tl, s.dir, 1, 0, pending, &npending);
	if (!slurm && !dry && npending) {
		sw_fail(&err, SW_ESOFTWARE, "%d of %d runs not done (their errors above; run again to resume)",
			npending, s.nruns);
		tool_error(&tl, s.dir, &err);
	}
	free(pending);
	sweep_free(&s);
	return tool_finish(&tl);
}
