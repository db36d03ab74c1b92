/*
 * rundir.h - a training run's output directory: what of sw-train's it
 * holds, and whether a new run may write there without mixing two runs.
 *
 * sw-train writes DIR/ckpt-NNNNNN.h5 (as DIR/ckpt-NNNNNN.h5.tmp.PID.N
 * until complete, atomicfile.h) and a trace, DIR/trace.h5 unless named
 * otherwise. A directory "holds a run" when one of those exists; any
 * other file in it is the user's and is never touched. The rule
 * (sw-train(1), "The output directory"):
 *   - a directory that holds no run (missing, empty, only other files) is
 *     used as it is;
 *   - --resume CKPT, CKPT in DIR: the run goes on there, its trace is
 *     appended to; a checkpoint of DIR after CKPT's step (of a continuation
 *     the resumed run abandons) is refused, unless force, which removes
 *     those;
 *   - any other run in DIR is refused, unless force, which removes its
 *     checkpoints, their temporaries and its trace (the new trace replaces
 *     a trace at the path the run writes).
 * A refusal is SW_ECANTCREAT with one line naming the directory and what
 * it holds. rundir_claim creates the directory (mkdir -p) and takes its
 * lock, and otherwise only looks; rundir_clear removes, and is called
 * once the new run is known to start (its data read, its model built, its
 * trace open), so a refused or failed start destroys nothing.
 *
 * The lock: flock(2) LOCK_EX on the directory itself (an open descriptor
 * of it, no file written), taken before the directory is read and held
 * until rundir_claim_free, i.e. for the whole run; the kernel drops it
 * when the process dies, kill -9 included. A directory another process
 * holds locked is refused before anything is looked at or removed.
 * Readers (sw-trace --follow, the tools) never take it. Where the file
 * system has no flock (some NFS setups) the run goes on without one.
 *
 * Links: nothing is written or removed through a symbolic link. The
 * files are found and removed under the directory's descriptor
 * (fstatat, unlinkat: a link is removed, never its target); a trace this
 * run would write that is a symbolic link, a file of several names (hard
 * links), anything but a regular file, or a regular file that is not a
 * scalewatch trace (a text file, a checkpoint) is refused, force or not,
 * as is a DIR/trace.h5 that is a regular file but no trace.
 */
#ifndef SW_RUNDIR_H
#define SW_RUNDIR_H

#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"

/* One of sw-train's files in the directory. */
struct rundir_file {
	char name[256];                 /* the entry's name in the directory */
	int64_t step;                   /* the NNNNNN of its name */
	int tmp;                        /* a checkpoint's temporary (its writer was killed) */
	int remove;                     /* rundir_clear removes it */
};

struct rundir_claim {
	char dir[4096];
	struct rundir_file *f;          /* checkpoints and temporaries, by step */
	size_t n;
	char dir_trace[4096];           /* DIR/trace.h5 */
	int dir_trace_exists;
	int remove_dir_trace;           /* rundir_clear removes DIR/trace.h5 */
	char trace[4096];               /* the trace this run writes ("" none) */
	int trace_exists;
	int append;                     /* resuming here: the trace exists, is appended to */
	int replace_trace;              /* force: the trace exists and the new one replaces it */
	int keep_ino_valid;             /* never remove the checkpoint resumed from */
	uint64_t keep_dev, keep_ino;
	int dirfd;                      /* the directory, open (and locked) while held */
	int held;                       /* dirfd is open: rundir_claim_free closes it */
	int locked;                     /* the lock is taken (0: no flock on this file system) */
};

/*
 * May a run write into dir? trace: the trace path as sw-train takes it
 * (NULL: DIR/trace.h5; "": none). resume: the checkpoint resumed from, at
 * resume_step, or NULL. Creates dir (and missing parents), takes its lock
 * and keeps it in c. SW_OK with c filled (what force removes marked),
 * or SW_ECANTCREAT, a message naming dir and what it holds (and
 * --resume/--force), when it holds a run it may not write into without
 * force, when another process holds its lock, or when the trace's path
 * holds a link or a file that is not a trace; directories it created are
 * removed again then. c is to be freed with rundir_claim_free in either
 * case (which drops the lock); a c zeroed and never claimed may be freed.
 */
int rundir_claim(const char *dir, const char *trace, const char *resume, int64_t resume_step,
		 int force, struct rundir_claim *c, struct sw_err *err);

/*
 * Remove what rundir_claim marked. note (len bytes) says what was removed
 * ("removed 2 checkpoints (ckpt-000010.h5 to ckpt-000020.h5); the trace
 * run/trace.h5 is replaced"), "" if nothing. SW_ECANTCREAT naming a file
 * that could not be removed.
 */
int rundir_clear(struct rundir_claim *c, char *note, size_t len, struct sw_err *err);

void rundir_claim_free(struct rundir_claim *c);

/*
 * For a reader given dir as an operand: is it a run directory, and its
 * checkpoints. *is_run 1 when dir is a directory holding sw-train's
 * checkpoints, trace or temporaries (0, and nothing else, for anything
 * else: a file, a Hugging Face directory, a missing name); then *paths
 * (malloc'd, each malloc'd; rundir_paths_free) are "dir/ckpt-NNNNNN.h5"
 * of each complete checkpoint, in step order, *n of them (0: none yet).
 * No lock is taken: a run being written is read as it is. SW_ENOINPUT
 * when the directory cannot be read.
 */
int rundir_checkpoints(const char *dir, int *is_run, char ***paths, size_t *n, struct sw_err *err);
void rundir_paths_free(char **paths, size_t n);

#endif
