/*
 * sweep.h - a grid of sw-train runs in one directory (sw-sweep).
 *
 * A grid of values for --lr, --batch, --wd, --d-model and --tokens (each a
 * comma list; --tokens sets --steps to tokens / (batch x seq-len x
 * grad-accum)) expands, in that order with the last axis fastest, into
 * one run per point: DIR/NAME, NAME made of the point's values
 * ("lr0.002-b16-t65536"), with one sw-train command each, the other
 * sw-train options common to all. The sweep file DIR/sweep.tsv records
 * the grid (index, run, one column per swept axis, steps, data: the
 * --data every run reads); DIR/NAME/command holds the run's sw-train
 * arguments, one a line. Both are written once (atomically); a directory
 * holding another sweep is refused. The swept values and the common
 * options are checked by sw-train's own parser (trainopts.h) for every
 * run when the sweep is made.
 *
 * A sweep directory may come from a stranger: nothing in it is followed
 * through a symbolic link (a run directory, a command file, the sweep
 * file, a run's log DIR/NAME.log: SW_EDATA), and a command file is run
 * only as sw-sweep writes it: sw-train's options alone, spelled in full,
 * its --out the run's directory, no --resume, --force or --trace (but
 * --trace '') of its own, its --data the sweep file's, its swept values
 * and length its row's (SW_EDATA otherwise).
 *
 * A run is done when its last checkpoint (ckpt-STEPS.h5) is there,
 * partial when an earlier one is (it resumes from the latest), new
 * otherwise (it starts over, replacing what a run killed before its first
 * checkpoint left). sweep_argv gives the command for the state the run is
 * in now, so re-running a sweep, or a Slurm array task requeued, skips
 * what is done and resumes what was cut.
 */
#ifndef SW_SWEEP_H
#define SW_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"

enum { SWEEP_LR, SWEEP_BATCH, SWEEP_WD, SWEEP_D_MODEL, SWEEP_TOKENS, SWEEP_AXES };
#define SWEEP_MAX_VALUES 64
#define SWEEP_VALUE_MAX 32

struct sweep_run {
	char name[256];
	int value[SWEEP_AXES];          /* index into the axis' values; -1: not swept */
	int64_t steps;                  /* -1: sw-train's (no --tokens) */
};

struct sweep {
	char dir[4096];
	int nvalues[SWEEP_AXES];        /* 0: the axis is not swept */
	char values[SWEEP_AXES][SWEEP_MAX_VALUES][SWEEP_VALUE_MAX];
	char **args;                    /* the other sw-train options (not owned) */
	int nargs;
	const char *data;               /* their --data (sweep_expand sets it) */
	struct sweep_run *runs;
	int nruns;
};

/* The axis' option name without dashes ("lr", "batch", "wd", "d-model",
 * "tokens") and its column in the sweep file ("d_model"). */
const char *sweep_axis_option(int axis);
const char *sweep_axis_column(int axis);

/* Set an axis from a comma list of values ("1e-3,2e-3"), each parsed as
 * sw-train parses the option (--tokens: whole numbers); SW_EUSAGE naming
 * the bad value, or one given twice. */
int sweep_set_axis(struct sweep *s, int axis, const char *list, struct sw_err *err);

/* Expand the grid of s (dir, axes and args set) into its runs, each
 * run's command checked as sw-train will read it. SW_EUSAGE: an option
 * sw-train refuses (or spelled otherwise than in full), an option sw-sweep
 * sets (--out, --resume, --force, --trace but '', --steps with --tokens,
 * a swept one) among args, no --data, an argument with a newline, a
 * --data with a tab, tokens that make no step, more than 100000 runs. */
int sweep_expand(struct sweep *s, struct sw_err *err);
void sweep_free(struct sweep *s);

/* Write DIR/sweep.tsv and every run's command file; the same sweep
 * already there is kept (resumed; a sweep file without the data column
 * rewritten with it); another is SW_ECANTCREAT; a link where a run's
 * directory or command file goes, SW_EDATA. */
int sweep_write(const struct sweep *s, struct sw_err *err);

enum sweep_state { SWEEP_NEW, SWEEP_PARTIAL, SWEEP_DONE };
const char *sweep_state_name(enum sweep_state st);

/* The state of run `name` of the sweep in dir, which makes `steps` steps
 * (the number its command file gives), and the latest checkpoint
 * ("" for none) in last. SW_EDATA: the run's directory is a symbolic
 * link, or not a directory. */
int sweep_run_state(const char *dir, const char *name, int64_t steps, enum sweep_state *st,
		    char *last, size_t len, struct sw_err *err);

/* A sweep file as read: its rows, the axes it sweeps, its data. */
struct sweep_row {
	char name[256];
	char value[SWEEP_AXES][SWEEP_VALUE_MAX];        /* "" where not swept */
	int64_t steps;
};
struct sweep_file {
	struct sweep_row *rows;
	int nrows;
	int swept[SWEEP_AXES];
	char *data;                     /* NULL: a file without the data column */
};

/* Read the sweep file of dir into f (free with sweep_file_free).
 * SW_ENOINPUT: none; SW_EDATA: a file not as sweep_write writes it (a
 * file of an older sw-sweep, without the data column, is read). */
int sweep_load(const char *dir, struct sweep_file *f, struct sw_err *err);
void sweep_file_free(struct sweep_file *f);

/*
 * Run `index` of the sweep in dir: its name, its state, and the sw-train
 * argument vector (argv[0] "sw-train", NULL-terminated; free with
 * sweep_argv_free) that starts it (with --force over leftovers), resumes
 * it from its latest checkpoint, or NULL when it is done. SW_ENOINPUT: no
 * sweep in dir; SW_EUSAGE: no such run; SW_EDATA: a sweep file or a
 * command not as sweep_write writes it (see above), or a sweep file
 * without the data column.
 */
int sweep_argv(const char *dir, int index, char *name, size_t name_len, enum sweep_state *st,
	       char ***argv, struct sw_err *err);
void sweep_argv_free(char **argv);

/* DIR/NAME.log, run name's log, opened for appending under dir, never
 * through a symbolic link (SW_EDATA, as anything but a regular file in
 * its place), into *fd. */
int sweep_open_log(const char *dir, const char *name, int *fd, struct sw_err *err);

/* word quoted for a POSIX shell ('...' with ' as '\'') into buf; NULL when
 * it does not fit. */
const char *sweep_shell_quote(const char *word, char *buf, size_t len);

/*
 * Whether a Slurm script for a sweep in dir with these #SBATCH options can
 * be written: no option with a newline, and dir's full path (dir from the
 * working directory) without a blank, a quote or a backslash, since the
 * #SBATCH --output line that names it cannot be quoted (sbatch splits it
 * on blanks). SW_EUSAGE naming the fault. Checked before anything is made.
 */
int sweep_check_slurm(const char *dir, char **sbatch, int nsbatch, struct sw_err *err);

/*
 * A Slurm job-array script running the runs of s listed in pending
 * (indices, npending of them): one array task each, which runs
 * `SWEEP --run DIR --launcher srun INDEX` (srun around sw-train, so a task
 * with several tasks per node is an MPI job); sbatch lines
 * ("--time=1:00:00") added as #SBATCH lines. Written to path atomically.
 */
int sweep_write_slurm(const struct sweep *s, const char *path, const char *sweep_exe,
		      const int *pending, int npending, char **sbatch, int nsbatch,
		      struct sw_err *err);

#endif
