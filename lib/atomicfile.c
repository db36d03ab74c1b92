/* atomicfile.c - temporary name, fsync, rename (see atomicfile.h). */
#include "atomicfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int atomic_create(const char *final, char *tmp, size_t len, int *fd,
		  struct sw_err *err)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	for (unsigned long attempt = 0; attempt < 100; attempt++) {
		int n = snprintf(tmp, len, "%s.tmp.%ld.%lx", final, (long)getpid(),
				 (unsigned long)ts.tv_nsec + attempt * 7919UL);
		if (n < 0 || (size_t)n >= len)
			return sw_fail(err, SW_ECANTCREAT, "%s: path too long", final);
		*fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (*fd >= 0)
			return SW_OK;
		if (errno != EEXIST)
			return sw_fail(err, SW_ECANTCREAT, "%s: cannot create: %s",
				       final, strerror(errno));
	}
	return sw_fail(err, SW_ECANTCREAT, "%s: cannot find a free temporary name", final);
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

int atomic_commit(const char *tmp, const char *final, struct sw_err *err)
{
	char dir[PATH_MAX];

	if (fsync_path(tmp, O_RDONLY) < 0) {
		int e = errno;
		unlink(tmp);
		return sw_fail(err, SW_EIO, "%s: fsync: %s", final, strerror(e));
	}
	if (rename(tmp, final) < 0) {
		int e = errno;
		unlink(tmp);
		return sw_fail(err, SW_ECANTCREAT, "%s: rename: %s", final, strerror(e));
	}
	snprintf(dir, sizeof dir, "%s", final);
	fsync_path(dirname(dir), O_RDONLY | O_DIRECTORY);
	return SW_OK;
}

int atomic_finish(int fd, const char *tmp, const char *final, int rc, struct sw_err *err)
{
	if (close(fd) < 0 && !rc)
		rc = sw_fail(err, SW_EIO, "%s: close: %s", final, strerror(errno));
	if (rc) {
		unlink(tmp);
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
