/*
 * atomicfile.h - write a file under a temporary name, then rename it.
 *
 * Nothing a user wrote is ever lost and no reader ever sees a torn file:
 * every output (checkpoints, safetensors, config.json) is created as
 * "FINAL.tmp.PID.N" in FINAL's directory, fsynced, and renamed over FINAL
 * only once complete; the directory is fsynced after the rename. The
 * temporary files alive are remembered, so that a tool killed by a signal
 * (Ctrl-C, kill) removes them on its way out instead of leaving litter.
 */
#ifndef SW_ATOMICFILE_H
#define SW_ATOMICFILE_H

#include <stddef.h>

#include "status.h"

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

/* Write all of buf to fd (retrying short writes); SW_EIO on failure. */
int atomic_write_all(int fd, const void *buf, size_t len, const char *what,
		     struct sw_err *err);

#endif
