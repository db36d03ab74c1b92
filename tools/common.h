/*
 * common.h - what every scalewatch tool's main shares: the selection and
 * output options, the file list (arguments, or names on stdin), error
 * reports as "sw-TOOL: FILE: what is wrong" with the exit status of
 * lib/base/status.h, progress on stderr when it is a terminal, and the final
 * check that stdout was really written.
 */
#ifndef SW_TOOLS_COMMON_H
#define SW_TOOLS_COMMON_H

#include <getopt.h>
#include <stdio.h>

#include "../lib/base/select.h"
#include "../lib/base/status.h"
#include "../lib/base/table.h"

#ifndef SW_VERSION
#define SW_VERSION "unknown"
#endif

/* A numeric default from lib/ in a --help string: "(" TOOL_STR(X) ")". */
#define TOOL_STR_(x) #x
#define TOOL_STR(x) TOOL_STR_(x)

enum {
	OPT_BLOCK = 1000, OPT_ROLE, OPT_LAYER, OPT_NAME, OPT_JSON, OPT_HELP,
	OPT_VERSION, OPT_THREADS, OPT_LOG, OPT_QUIET, OPT_DATA, OPT_DATA_FORMAT, OPT_BATCH_TOKENS,
	OPT_SEQ_LEN, OPT_MICRO_BATCH, OPT_SEED, OPT_LOW_MEMORY, OPT_EXPERT, OPT_TOOL_FIRST = 1100
};

#define TOOL_COMMON_OPTIONS                                      \
	{"block", required_argument, NULL, OPT_BLOCK},           \
	{"role", required_argument, NULL, OPT_ROLE},             \
	{"layer", required_argument, NULL, OPT_LAYER},           \
	{"expert", required_argument, NULL, OPT_EXPERT},         \
	{"name", required_argument, NULL, OPT_NAME},             \
	{"json", no_argument, NULL, OPT_JSON},                   \
	{"help", no_argument, NULL, OPT_HELP},                   \
	{"version", no_argument, NULL, OPT_VERSION}

/* --force, for every tool that writes a file: replace one that is there
 * (never an input: tool_check_output). Below the tools' own options. */
enum { OPT_FORCE = OPT_TOOL_FIRST - 1 };
#define TOOL_FORCE_OPTION {"force", no_argument, NULL, OPT_FORCE}

/* --threads N, for every tool that computes (tool_common_option sets
 * OpenMP's and OpenBLAS's thread counts alike, bounded by
 * tool_thread_bound). */
#define TOOL_THREADS_OPTION {"threads", required_argument, NULL, OPT_THREADS}
#define TOOL_THREADS_HELP                                                                  \
	"  --threads N    threads, for OpenMP and OpenBLAS alike (default: every core,\n"    \
	"                 or OMP_NUM_THREADS when it is set); at most 4 a core, and\n"      \
	"                 fewer where ulimit -v or -d cannot map them\n"

/*
 * The threads a tool may run of want: at most 4 a core online, and no
 * more than the address-space limits (RLIMIT_AS, RLIMIT_DATA) can map at
 * 256 MiB of OpenBLAS buffers and a stack a thread past the first, in
 * half of what they leave (OpenBLAS retries a refused mapping for ever:
 * a count past the limits hangs). At least 1. *left (may be NULL): the
 * bytes the limits leave, INFINITY when none is set. The same bound is
 * put on OMP_NUM_THREADS (or the cores, when it is unset) before the
 * libraries load; a limit that leaves less than OpenBLAS's load, or a
 * computing tool's first call, needs (a buffer of 128 MiB) is one line
 * and exit 70 (tool_init).
 */
int tool_thread_bound(int want, double *left);

/* The batch a model is run on, for the tools that run one (sw-sharpness,
 * sw-hessian): the same spelling, meaning and default in both, parsed
 * into lib's struct blocksharp_opts by tool_batch_option. --seed's help
 * says what the tool draws from it. */
#define TOOL_BATCH_OPTIONS                                                      \
	{"data", required_argument, NULL, OPT_DATA},                            \
	{"data-format", required_argument, NULL, OPT_DATA_FORMAT},              \
	{"batch-tokens", required_argument, NULL, OPT_BATCH_TOKENS},            \
	{"seq-len", required_argument, NULL, OPT_SEQ_LEN},                      \
	{"micro-batch", required_argument, NULL, OPT_MICRO_BATCH},              \
	{"seed", required_argument, NULL, OPT_SEED},                            \
	{"low-memory", no_argument, NULL, OPT_LOW_MEMORY}
#define TOOL_BATCH_HELP                                                                         \
	"  --data FILE        tokens (llm.c, nanoGPT .bin, or text as bytes)\n"                     \
	"  --data-format F    auto, llmc, uint16, bytes\n"                                           \
	"  --batch-tokens N   tokens in the batch (" TOOL_STR(BLOCKSHARP_BATCH_TOKENS) \
	"), a multiple of --seq-len\n"                                                           \
	"  --seq-len T        tokens per sequence (the model's, at most 512)\n"                     \
	"  --micro-batch M    sequences per pass (as memory allows); divides the batch\n"     \
	"  --low-memory       one layer's weights in memory at a time, each read from\n"    \
	"                     the file when a pass reaches it; one sequence per pass\n"     \
	"                     unless --micro-batch (CPU only; no multipliers)\n"

/* --log and --quiet, for every tool that may run for minutes. Progress
 * goes to stderr: on a terminal one live line; elsewhere (a log file, a
 * batch job's output) a line each 10 s once the run has taken 10 s, so
 * that short runs say nothing. --log: lines from the start, terminal or
 * not; --quiet: none. */
#define TOOL_LOG_OPTION {"log", no_argument, NULL, OPT_LOG}, {"quiet", no_argument, NULL, OPT_QUIET}
#define TOOL_LOG_HELP                                                                      \
	"  --log          progress as lines on stderr, the first at once, then at most\n"    \
	"                 one each 10 s (default: a live line on a terminal, else a\n"       \
	"                 line each 10 s once the run has taken 10 s)\n"                      \
	"  --quiet        no progress on stderr\n"

/* --device of the curvature tools (sw-sharpness, sw-hessian) */
#define TOOL_DEVICE_HELP                                                                   \
	"  --device D         where the products run: cpu (default); cuda, the GPU\n"      \
	"                     (exit 69 without one); emu, the CUDA path's kernels on\n"     \
	"                     the CPU (for tests)\n"

/* The --help lines of the shared options. */
#define TOOL_SELECT_HELP                                                                   \
	"  --block LIST   only these block types (emb,qk,vo,ffn,norm,out,mult,other)\n"     \
	"  --role LIST    only these roles (embed,q,k,v,o,gate,up,down,lm_head,...)\n"      \
	"  --layer LIST   only these layers (0,3-5; -1: outside the layers)\n"              \
	"  --expert LIST  only these experts of a mixture of experts (0,1-3; -1: the\n"     \
	"                 tensors of no expert)\n"                                          \
	"  --name GLOB    only tensors whose name matches the shell pattern\n"              \
	"  --json         JSON Lines instead of TSV\n"                                      \
	"  --help, --version\n"                                                             \
	"\n"                                                                                \
	"A selection matching nothing in a file is said on stderr (exit 65 if it\n"         \
	"matched in no file). With no FILE, or FILE '-', file names are read from\n"       \
	"stdin, one per line.\n"

/* A sw-train run directory as an operand (tool_next_file): a name as
 * given (the tool's default), its checkpoints in step order, or its
 * trace.h5. */
enum tool_run_dirs { TOOL_RUN_DIRS_NONE, TOOL_RUN_DIRS_CKPTS, TOOL_RUN_DIRS_TRACE };

struct tool {
	const char *prog;
	const char *usage;      /* the SYNOPSIS, printed on usage errors */
	const char *help;       /* the --help text after the synopsis */
	int status;             /* the first failure's exit status */
	enum table_format fmt;
	struct sw_select sel;
	int progress;           /* stderr is a terminal */
	int log;                /* progress as lines: 1 --log, 2 the default off a terminal */
	int quiet;              /* --quiet: no progress */
	int force;              /* --force: an existing output may be replaced */
	double started;         /* when the tool started (monotonic s) */
	double last_log;        /* when the last --log line went out (monotonic s) */
	int argc, argi;
	char **argv;
	int from_stdin;
	char *line;
	size_t line_cap;
	long files_matched, files_unmatched;    /* by the selection (tool_selected) */
	int stdout_errno;       /* errno when stdout first failed, 0 before */
	int stdin_reported;     /* a read error of stdin was reported */
	char last_error[2048];  /* the last line tool_error printed: one fault, one line */
	long stdin_lines;       /* lines of names read from stdin */
	const char *mpi_use;    /* what the tool does under mpirun, for --version's
				 * MPI line; NULL: a tool that does not use MPI */
	enum tool_run_dirs run_dirs;    /* what a run directory as an operand means */
	char **run_paths;       /* (run_n) that directory's files, run_i of them given */
	size_t run_n, run_i;
};

/*
 * Make sure fds 0, 1 and 2 are open, before anything else is: a file the
 * tool opens must never become its stdin, stdout or stderr (a message
 * would land in a checkpoint). A closed one is opened on /dev/null, 0
 * write-only and 1 read-only, so that reading names from a closed stdin
 * or printing a table to a closed stdout still fails as it would have
 * (EBADF), while a tool that prints nothing there succeeds; 2 write-only
 * (the messages are lost, as the user asked). tool_init calls it first.
 */
void tool_std_fds(void);

/*
 * The first call of every main: the standard fds made safe
 * (tool_std_fds), the run time set up (tool_runtime: may re-execute the
 * tool), then t filled for PROG.
 */
void tool_init(struct tool *t, const char *prog, const char *usage,
	       const char *help, int argc, char **argv);

/* Handle a shared option; returns 1 if it was one (exits on --help,
 * --version and bad values), 0 if the tool must handle it. */
int tool_common_option(struct tool *t, int opt, const char *arg);

/* "sw-TOOL: message" and the synopsis on stderr, exit 64. */
void tool_usage_error(struct tool *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));

/* Call after getopt: the operands start at optind. Exits 64 if there are
 * none and stdin is a terminal (names would be read from it). */
void tool_files_begin(struct tool *t, int optind_);

/* The next input file, or NULL at the end. Names read from stdin, one a
 * line, pass tool_name_line. With t->run_dirs, a sw-train run directory
 * (rundir.h) is its checkpoints in step order, one name each, or its
 * trace; one without a checkpoint is an error said (exit 66) and
 * skipped. */
const char *tool_next_file(struct tool *t);

/*
 * A line of a name list read from stdin (n bytes, its newline included),
 * made a name: the newline (and a CR before it) cut. Returns 1 for a name,
 * 0 for a blank line (skipped), -1 for a line no file name can be (a NUL
 * byte, longer than PATH_MAX): said in one line naming stdin's line
 * number, exit status 65.
 */
int tool_name_line(struct tool *t, char *line, ssize_t n);

/*
 * The next input opened as a checkpoint, its name in *file; a file that
 * cannot be opened is reported (tool_error) and skipped. NULL at the end
 * of the inputs or once stdout is broken. Close each with ckpt_close.
 */
struct ckpt *tool_next_ckpt(struct tool *t, const char **file);
/* An architecture no family table knows (family.h): one line on stderr
 * per file (not under --quiet), since its blocks and roles are not
 * assigned. tool_next_ckpt says it for every file it opens. */
void tool_note_family(const struct tool *t, const char *file, const struct ckpt *ck);

/*
 * May the tool write out, reading inputs (n names, "-" its stdin)? 0; or
 * the refusal reported, "sw-TOOL: OUT: exists (--force replaces it)" or
 * "... is also an input (IN) ...", and its status (73) returned and kept
 * (atomic_check_output; --force as given). Called before any work.
 */
int tool_check_output(struct tool *t, const char *out, const char *const *inputs, size_t n);

/* tool_check_output for a model tool's file (--dump-labels, --dump-batch):
 * the inputs the checkpoint ckpt (with the files beside it, ckptfiles.h)
 * and the data file (NULL: none). */
int tool_check_output_ckpt(struct tool *t, const char *out, const char *ckpt, const char *data);

/* Report err as "sw-TOOL: FILE: msg" and remember its status. */
void tool_error(struct tool *t, const char *file, const struct sw_err *err);

/*
 * What the selection chose in file: count things of the kind the tool
 * computes on (what: "tensor", "matrix", "layer"). With a selection given
 * and count 0 it says so, "sw-TOOL: FILE: no matrix matches the selection
 * (--block norm)"; tool_finish then exits 65 if the selection matched
 * nothing in every file read (0 when it matched in some).
 */
void tool_selected(struct tool *t, const char *file, size_t count, const char *what);

/* Progress on stderr: on a terminal one line rewritten in place (done
 * clears it); with --log a line each, at most one each 10 s, the first at
 * once; off a terminal the same, the first after 10 s; with --quiet none.
 * Lines start "TOOL: [N s] ", N the seconds since the start. */
void tool_progress(struct tool *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void tool_progress_done(struct tool *t);

/* A line of status on stderr (a sweep's run that ended), stamped like
 * progress lines with the seconds since the start ("sw-sweep: [42 s]
 * ..."), so that a log tells them from errors; none with --quiet. */
void tool_note(struct tool *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Has a write to stdout failed (ferror: a full disk, a closed stdout, a
 * reader that left)? Then stop producing output; the first time it says
 * so it keeps errno for tool_finish, which reports the failure (quietly
 * for EPIPE: "| head" ends the tool without a message).
 */
int tool_stdout_broken(struct tool *t);

/*
 * Did reading stdin fail (a directory, a closed stdin), rather than end?
 * Reported once as "sw-TOOL: stdin: ..." with its exit status (66 for a
 * directory, else 74); 1 if so. For tools that read stdin themselves;
 * tool_next_file calls it.
 */
int tool_stdin_failed(struct tool *t);

/* Flush and close stdout, free the tool; the exit status. */
int tool_finish(struct tool *t);

/*
 * The runtime settings the libraries read only when they load, so they
 * are set here and the tool executes itself again (once; when both are
 * already set nothing happens). Call first thing in main.
 *   GOMP_SPINCOUNT=1000 unless it or OMP_WAIT_POLICY is set: idle OpenMP
 *     threads spin briefly, then sleep (spinning long takes the core a
 *     descheduled teammate needs when another process holds one;
 *     sleeping at once costs a wake-up per parallel region).
 *   OPENBLAS_CORETYPE: OpenBLAS 0.3.21 runs its slowest (Prescott, SSE3)
 *     kernels on CPUs it does not recognize, 6x slower on an AVX-512
 *     machine; when it chose such a fallback and the CPU has AVX-512 (or
 *     AVX2 and FMA), SkylakeX (Haswell).
 */
void tool_runtime(char **argv);

struct matsched_item;
/*
 * The per-matrix work of one file, computed side by side (matsched.h:
 * items[k] the cost of job k), then handed over in model order: a job
 * that failed is reported (tool_error) and skipped. compute fills the
 * caller's result k (SW_OK, or a status with err); name names job k on
 * the progress line; emit prints result k. Nothing is handed over once
 * stdout is broken. sw-norms and sw-spectrum run on it.
 */
struct tool_matrix_jobs {
	int (*compute)(void *ctx, size_t k, struct sw_err *err);
	const char *(*name)(void *ctx, size_t k);
	void (*emit)(void *ctx, size_t k);
	void *ctx;
};
void tool_run_matrices(struct tool *t, const char *file, const struct matsched_item *items,
		       size_t n, const struct tool_matrix_jobs *jobs);

/*
 * --check NAME=X, a named test with its threshold (scalewatch(7)): X in
 * lo..hi, else exit 64. The spelling of the release before, --check X,
 * is still taken, with a one-line note on stderr that it goes.
 */
double tool_parse_check(struct tool *t, const char *name, const char *arg, double lo, double hi);

/* Bounds-checked numbers from the command line (exit 64 when bad). */
long long tool_parse_int(struct tool *t, const char *opt, const char *arg,
			 long long lo, long long hi);
double tool_parse_double(struct tool *t, const char *opt, const char *arg,
			 double lo, double hi);

/* The number of names in a column array. */
#define TOOL_NCOLS(a) ((int)(sizeof(a) / sizeof *(a)))

/* The step cell and the tokens cell of a row: empty when the file does
 * not know them (a llama2.c or Hugging Face checkpoint). tokens is the
 * last column in sw-spectrum, sw-sharpness and sw-hessian (added after
 * their other columns, whose numbers it keeps) and the third in sw-norms
 * and sw-qkdrift. */
void tool_step_cell(struct table *tb, int has_step, int64_t step);
void tool_tokens_cell(struct table *tb, int has_step, int64_t tokens);

/* The first cells of a row of those three tools (file, step) and its end
 * (tokens, and the end of the row). */
void tool_row_begin(struct table *tb, const char *file, int has_step, int64_t step);
void tool_row_end(struct table *tb, int has_step, int64_t tokens);

/*
 * The per-file loop under mpirun: every rank takes the same files, rank 0
 * reads the names (arguments or stdin) and hands each on; NULL at the end
 * or once rank 0's stdout broke. buf holds the name (len bytes).
 */
struct comm;
const char *tool_next_file_shared(struct tool *t, struct comm *c, char *buf, size_t len);

/* A file's failure under mpirun is said once, by the rank that saw it
 * (reporter); the others only keep the status. Nothing when rc is 0. */
void tool_shared_failure(struct tool *t, const char *file, int rc, int reporter, int rank,
			 const struct sw_err *err);

struct blocksharp_opts;
/* One of TOOL_BATCH_OPTIONS into b: 1 if opt was one, else 0. */
int tool_batch_option(struct tool *t, int opt, const char *arg, struct blocksharp_opts *b);

#endif
