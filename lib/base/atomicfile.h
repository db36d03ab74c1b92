/*
 * atomicfile.h - write a file under a temporary name, then rename it.
 *
 * Nothing a user wrote is ever lost and no reader ever sees a torn file:
 * every output (checkpoints, safetensors, config.json) is created as
 * "FINAL.tmp.PID.N" in FINAL's directory, fsynced, and renamed over FINAL
 * only once complete; the directory is fsynced after the rename. The
 * temporary files alive are remembered, so that a tool killed by a signal
 * (Ctrl-C, kill) removes them on its way out instead of leaving litter.
 *
 * Before a tool writes, atomic_check_output says whether it may: never
 * over one of its inputs, and over an existing file only when the user
 * said --force.
 */
#ifndef SW_ATOMICFILE_H
#define SW_ATOMICFILE_H

#include <stddef.h>

#include "status.h"

/*
 * The temporary name of final with suffix: "FINAL.tmp.SUFFIX" in final's
 * directory. When that name would pass NAME_MAX while final's does not,
 * final's last component is cut and a hash of the whole of it put in
 * ("PREFIX~HHHHHHHH.tmp.SUFFIX"), so that every name that can be written
 * has a temporary name: always "*.tmp.*". -1 when it does not fit len.
 */
int atomic_tmp_name(const char *final, const char *suffix, char *tmp, size_t len);

/* Create a fresh temporary file beside final (mode 0666 & ~umask) and
 * return its open descriptor (O_WRONLY) in *fd; its name goes to tmp. */
int atomic_create(const char *final, char *tmp, size_t len, int *fd,
		  struct sw_err *err);

/* fsync tmp, rename it to final, fsync the directory. On failure tmp is
 * removed. Does not close any descriptor. */
int atomic_commit(const char *tmp, const char *final, struct sw_err *err);

/* fsync the directory dir (after a rename in it), and the directory that
 * holds path; failures ignored, as after atomic_commit's own rename. */
void atomic_fsync_dir(const char *dir);
void atomic_fsync_parent(const char *path);

/* Close fd, open on tmp; then if rc is SW_OK and the close went well,
 * commit tmp to final, else remove tmp. Returns rc or the first failure. */
int atomic_finish(int fd, const char *tmp, const char *final, int rc, struct sw_err *err);

/* Remove tmp (an output abandoned before its commit). */
void atomic_discard(const char *tmp);

/* Remove path too if a signal kills the tool, until atomic_forget(path):
 * for outputs complete but not yet in place, such as a temporary
 * directory renamed into place as a whole. is_dir: the directory with
 * every file in it, however many (after the files remembered alone).
 * Without a free slot (64 in all) the path is not cleaned up. */
void atomic_remember(const char *path, int is_dir);
void atomic_forget(const char *path);

/* Remove the directory dir with every file in it (it holds no
 * subdirectory), and forget it. */
void atomic_remove_dir(const char *dir);

/* Make SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGPIPE remove the temporary
 * files alive before the process dies of them (signals ignored at start
 * stay ignored). Called once by every tool, at start. */
void atomic_cleanup_on_signals(void);

/*
 * May a tool write out (a file), reading inputs (n names; "-" its
 * standard input)? SW_OK, or SW_ECANTCREAT with err saying why (out's
 * name left to the caller): out is one of the inputs (the same file by
 * device and inode, so through a hard link, a symbolic link or another
 * spelling of the name too), out is a symbolic link (dangling or not:
 * never followed, never replaced), a directory or anything else not a
 * regular file (a device, a FIFO) -- each refused even with force -- or,
 * unless force, a file is there. An input that cannot be looked at is
 * skipped: opening it says why.
 */
int atomic_check_output(const char *out, int force, const char *const *inputs, size_t n,
			struct sw_err *err);

/* The first of the n inputs that is the file path is (device and inode,
 * following symbolic links), or -1. */
int atomic_input_index(const char *path, const char *const *inputs, size_t n);

/* Write all of buf to fd (retrying short writes); SW_EIO on failure. */
int atomic_write_all(int fd, const void *buf, size_t len, const char *what,
		     struct sw_err *err);

#endif
