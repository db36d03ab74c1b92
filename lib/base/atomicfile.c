/* atomicfile.c - temporary name, fsync, rename (see atomicfile.h). */
#include "atomicfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/*
 * The temporary files alive now. This is the one piece of process-wide
 * state in lib/, as in git's tempfile.c: a signal handler can reach
 * nothing else. Slots are claimed and released by the thread that writes
 * (tools write their outputs from one thread); the handler only reads. A
 * name that finds no free slot is simply not cleaned up on a signal; a
 * directory takes one slot whatever it holds.
 */
#define LIVE_SLOTS 64
static char live_name[LIVE_SLOTS][PATH_MAX + 64];
static volatile sig_atomic_t live_used[LIVE_SLOTS];     /* 0 free, 1 a file, 2 a directory */

static void live_add(const char *tmp, int is_dir)
{
	if (strlen(tmp) >= sizeof live_name[0])
		return;
	for (int i = 0; i < LIVE_SLOTS; i++)
		if (!live_used[i]) {
			strcpy(live_name[i], tmp);
			atomic_signal_fence(memory_order_seq_cst);   /* the name before the flag */
			live_used[i] = is_dir ? 2 : 1;
			return;
		}
}

static void live_remove(const char *tmp)
{
	for (int i = 0; i < LIVE_SLOTS; i++)
		if (live_used[i] && !strcmp(live_name[i], tmp)) {
			live_used[i] = 0;
			return;
		}
}

/* What the getdents64 system call fills its buffer with. */
struct dirent64_raw {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/*
 * One pass over the directory open at fd, unlinking every entry but . and
 * .. (subdirectories fail and stay: the tools make none). Returns how many
 * were removed. Only system calls that are async-signal-safe (getdents64
 * through syscall(), unlinkat, lseek) and no allocation: the handler calls
 * it, and the directory may hold any number of files.
 */
static int unlink_entries(int fd)
{
	_Alignas(8) char buf[4096];
	int removed = 0;
	long n;

	if (lseek(fd, 0, SEEK_SET) < 0)
		return 0;
	while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
		for (long off = 0; off < n;) {
			const struct dirent64_raw *de = (const void *)(buf + off);
			const char *name = de->d_name;
			off += de->d_reclen;
			if (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2])))
				continue;
			removed += unlinkat(fd, name, 0) == 0;
		}
	return removed;
}

/*
 * Remove the directory at path with every file in it. Opened by name, so
 * a directory already renamed into place is not touched. Passes repeat
 * while they remove something: another thread may still be adding a file
 * while a signal handler runs.
 */
static void remove_dir_and_files(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return;
	for (int pass = 0; pass < 8; pass++) {
		int removed = unlink_entries(fd);
		if (rmdir(path) == 0 || (errno != ENOTEMPTY && errno != EEXIST) || !removed)
			break;
	}
	close(fd);
}

static void remove_live_and_die(int sig)
{
	int saved = errno;

	for (int i = 0; i < LIVE_SLOTS; i++)
		if (live_used[i] == 1)
			unlink(live_name[i]);     /* async-signal-safe */
	for (int i = 0; i < LIVE_SLOTS; i++)
		if (live_used[i] == 2)
			remove_dir_and_files(live_name[i]);
	errno = saved;
	signal(sig, SIG_DFL);
	raise(sig);                               /* the status says which signal */
}

void atomic_cleanup_on_signals(void)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};

	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		struct sigaction old, sa;
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN &&
		    sigs[i] != SIGPIPE)
			continue;       /* nohup and friends: ignored stays ignored */
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = remove_live_and_die;
		sigemptyset(&sa.sa_mask);
		sa.sa_flags = SA_RESETHAND;
		sigaction(sigs[i], &sa, NULL);
	}
}

void atomic_remember(const char *path, int is_dir)
{
	live_add(path, is_dir);
}

void atomic_forget(const char *path)
{
	live_remove(path);
}

void atomic_remove_dir(const char *dir)
{
	remove_dir_and_files(dir);
	live_remove(dir);
}

void atomic_discard(const char *tmp)
{
	unlink(tmp);
	live_remove(tmp);
}

/* FNV-1a, 32 bits: the whole of a name cut short, in its temporary name. */
static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

int atomic_tmp_name(const char *final, const char *suffix, char *tmp, size_t len)
{
	const char *slash = strrchr(final, '/'), *base = slash ? slash + 1 : final;
	size_t blen = strlen(base), extra = strlen(".tmp.") + strlen(suffix);
	const size_t hash = strlen("~12345678");
	int n;

	if (blen + extra > NAME_MAX && blen <= NAME_MAX && extra + hash < NAME_MAX)
		n = snprintf(tmp, len, "%.*s%.*s~%08lx.tmp.%s", (int)(base - final), final,
			     (int)(NAME_MAX - extra - hash), base, (unsigned long)name_hash(base),
			     suffix);
	else
		n = snprintf(tmp, len, "%s.tmp.%s", final, suffix);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

int atomic_create(const char *final, char *tmp, size_t len, int *fd,
		  struct sw_err *err)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	for (unsigned long attempt = 0; attempt < 100; attempt++) {
		char suffix[48];
		snprintf(suffix, sizeof suffix, "%ld.%lx", (long)getpid(),
			 (unsigned long)ts.tv_nsec + attempt * 7919UL);
		if (atomic_tmp_name(final, suffix, tmp, len) < 0)
			return sw_fail(err, SW_ECANTCREAT, "%s: path too long", final);
		*fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (*fd >= 0) {
			live_add(tmp, 0);
			return SW_OK;
		}
		if (errno != EEXIST)
			return sw_fail(err, SW_ECANTCREAT, "%s: cannot create: %s",
				       final, strerror(errno));
	}
	return sw_fail(err, SW_ECANTCREAT, "%s: cannot find a free temporary name", final);
}

/* stat(2) of an input name; "-" is the standard input. */
static int stat_input(const char *name, struct stat *st)
{
	return strcmp(name, "-") ? stat(name, st) : fstat(STDIN_FILENO, st);
}

int atomic_input_index(const char *path, const char *const *inputs, size_t n)
{
	struct stat out, in;

	if (stat(path, &out) < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (inputs[i] && stat_input(inputs[i], &in) == 0 && in.st_dev == out.st_dev &&
		    in.st_ino == out.st_ino)
			return (int)i;
	return -1;
}

int atomic_check_output(const char *out, int force, const char *const *inputs, size_t n,
			struct sw_err *err)
{
	struct stat st;
	int i = atomic_input_index(out, inputs, n);

	if (i >= 0)
		return sw_fail(err, SW_ECANTCREAT, "is also an input (%s): not replaced, even with --force",
			       strcmp(inputs[i], "-") ? inputs[i] : "stdin");
	if (lstat(out, &st) < 0)
		return errno == ENOENT ? SW_OK
				       : sw_fail(err, SW_ECANTCREAT, "cannot create: %s", strerror(errno));
	if (S_ISDIR(st.st_mode))
		return sw_fail(err, SW_ECANTCREAT, "is a directory");
	/* a link is neither followed nor replaced: the rename would put a
	 * file in its place, and -o /dev/stdout, a link to a regular file
	 * when stdout is one, is no file to replace */
	if (S_ISLNK(st.st_mode))
		return sw_fail(err, SW_ECANTCREAT, "is a symbolic link: not followed, not replaced, even with --force");
	if (!S_ISREG(st.st_mode))
		return sw_fail(err, SW_ECANTCREAT, "exists and is not a regular file");
	if (!force)
		return sw_fail(err, SW_ECANTCREAT, "exists (--force replaces it)");
	return SW_OK;
}

static int fsync_path(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC), rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

void atomic_fsync_dir(const char *dir)
{
	fsync_path(dir, O_RDONLY | O_DIRECTORY);
}

void atomic_fsync_parent(const char *path)
{
	char dir[PATH_MAX];

	snprintf(dir, sizeof dir, "%s", path);
	atomic_fsync_dir(dirname(dir));
}

int atomic_commit(const char *tmp, const char *final, struct sw_err *err)
{

	if (fsync_path(tmp, O_RDONLY) < 0) {
		int e = errno;
		atomic_discard(tmp);
		return sw_fail(err, SW_EIO, "%s: fsync: %s", final, strerror(e));
	}
	if (rename(tmp, final) < 0) {
		int e = errno;
		atomic_discard(tmp);
		return sw_fail(err, SW_ECANTCREAT, "%s: rename: %s", final, strerror(e));
	}
	live_remove(tmp);
	atomic_fsync_parent(final);
	return SW_OK;
}

int atomic_finish(int fd, const char *tmp, const char *final, int rc, struct sw_err *err)
{
	if (close(fd) < 0 && !rc)
		rc = sw_fail(err, SW_EIO, "%s: close: %s", final, strerror(errno));
	if (rc) {
		atomic_discard(tmp);
		return rc;
	}
	return atomic_commit(tmp, final, err);
}

int atomic_write_all(int fd, const void *buf, size_t len, const char *what,
		     struct sw_err *err)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return sw_fail(err, SW_EIO, "%s: write: %s", what,
				       n < 0 ? strerror(errno) : "no progress");
		p += n;
		len -= (size_t)n;
	}
	return SW_OK;
}
