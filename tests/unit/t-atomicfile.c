/*
 * t-atomicfile - the temporary-name writer: a commit puts the bytes under
 * the final name and leaves nothing else; a failed write leaves the old
 * file as it was; a tool killed by a signal removes its temporary files,
 * and the remembered files and directory of an export not yet in place
 * (each case in a child process that dies of the signal).
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../lib/base/atomicfile.h"
#include "tap.h"

static int exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* the number of entries of dir other than . and .. */
static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

static int slurp_equals(const char *path, const char *want)
{
	char buf[256];
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof buf, f);
	fclose(f);
	return n == strlen(want) && !memcmp(buf, want, n);
}

/* In a child: start writing final, remember an export directory with a
 * committed file in it, then die of sig. Returns the signal it died of. */
static int die_while_writing(const char *final, const char *exportdir, int sig)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		char tmp[4096], inside[4096];
		struct sw_err err;
		int fd;

		atomic_cleanup_on_signals();
		if (atomic_create(final, tmp, sizeof tmp, &fd, &err))
			_exit(2);
		if (atomic_write_all(fd, "half", 4, final, &err))
			_exit(3);
		mkdir(exportdir, 0777);
		atomic_remember(exportdir, 1);
		snprintf(inside, sizeof inside, "%s/model.safetensors", exportdir);
		atomic_remember(inside, 0);
		fd = open(inside, O_WRONLY | O_CREAT, 0666);
		if (fd < 0 || write(fd, "done", 4) != 4)
			_exit(4);
		close(fd);
		raise(sig);
		_exit(5);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFSIGNALED(status) ? WTERMSIG(status) : -WEXITSTATUS(status);
}

/* In a child: a remembered directory with nfiles files in it (more than
 * the 64 slots of remembered names), then die of SIGTERM. */
static int die_with_full_dir(const char *exportdir, int nfiles)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		char path[4096];
		atomic_cleanup_on_signals();
		if (mkdir(exportdir, 0777) < 0)
			_exit(2);
		atomic_remember(exportdir, 1);
		for (int i = 0; i < nfiles; i++) {
			int fd;
			snprintf(path, sizeof path, "%s/model-%05d.safetensors", exportdir, i);
			if ((fd = open(path, O_WRONLY | O_CREAT, 0666)) < 0)
				_exit(3);
			close(fd);
		}
		if (entries(exportdir) != nfiles)
			_exit(4);
		raise(SIGTERM);
		_exit(5);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFSIGNALED(status) ? WTERMSIG(status) : -WEXITSTATUS(status);
}

int main(void)
{
	char dir[] = "/tmp/t-atomicfile.XXXXXX", final[128], tmp[4096], exportdir[128];
	static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
	struct sw_err err;
	int fd, rc;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(final, sizeof final, "%s/out.bin", dir);
	snprintf(exportdir, sizeof exportdir, "%s/export.tmp.1", dir);

	rc = atomic_create(final, tmp, sizeof tmp, &fd, &err);
	ok(rc == SW_OK && exists(tmp) && !exists(final), "create: a temporary name beside the final one");
	rc = atomic_write_all(fd, "first", 5, final, &err);
	rc = atomic_finish(fd, tmp, final, rc, &err);
	ok(rc == SW_OK && slurp_equals(final, "first") && !exists(tmp) && entries(dir) == 1,
	   "finish: the bytes under the final name, nothing else in the directory");

	rc = atomic_create(final, tmp, sizeof tmp, &fd, &err);
	if (rc == SW_OK)
		rc = atomic_write_all(fd, "second", 6, final, &err);
	rc = atomic_finish(fd, tmp, final, rc ? rc : SW_EIO, &err);
	ok(rc == SW_EIO && slurp_equals(final, "first") && entries(dir) == 1,
	   "a failed write: the old file intact, the temporary removed");

	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		int got = die_while_writing(final, exportdir, sigs[i]);
		ok(got == sigs[i], "killed by %s: dies of that signal (got %d)", strsignal(sigs[i]), got);
		ok(slurp_equals(final, "first") && entries(dir) == 1 && !exists(exportdir),
		   "killed by %s: temporary file, remembered file and directory removed, the old file intact",
		   strsignal(sigs[i]));
	}

	rc = die_with_full_dir(exportdir, 300);
	ok(rc == SW_OK + SIGTERM && !exists(exportdir) && entries(dir) == 1,
	   "killed with a remembered directory of 300 files: the directory is gone (got %d)", rc);

	mkdir(exportdir, 0777);
	for (int i = 0; i < 100; i++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/f%d", exportdir, i);
		close(open(path, O_WRONLY | O_CREAT, 0666));
	}
	atomic_remember(exportdir, 1);
	atomic_remove_dir(exportdir);
	ok(!exists(exportdir), "atomic_remove_dir: a directory of 100 files removed");

	unlink(final);
	rmdir(exportdir);
	rmdir(dir);
	return tap_done();
}
