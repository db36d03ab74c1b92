/*
 * t-atomicfile - the temporary-name writer: a commit puts the bytes under
 * the final name and leaves nothing else; a failed write leaves the old
 * file as it was; a tool killed by a signal removes its temporary files,
 * and the remembered files and directory of an export not yet in place
 * (each case in a child process that dies of the signal); temporary
 * names that fit NAME_MAX whenever the final name does; the output check
 * (an existing file, force, an input by name, hard or symbolic link, a
 * symbolic link to another file, a directory).
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
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

/* The temporary names of long final names: within NAME_MAX, "*.tmp.*",
 * distinct for two names that differ only past the part kept. */
static void test_tmp_names(void)
{
	char a[NAME_MAX + 1], b[NAME_MAX + 1], ta[PATH_MAX], tb[PATH_MAX], fa[PATH_MAX], fb[PATH_MAX];
	const char *base;

	for (size_t n = 1; n <= NAME_MAX; n++) {
		memset(a, 'a', n);
		a[n] = '\0';
		snprintf(fa, sizeof fa, "some/dir/%s", a);
		if (atomic_tmp_name(fa, "123.4abc", ta, sizeof ta) < 0 ||
		    strlen(base = strrchr(ta, '/') + 1) > NAME_MAX || !strstr(base, ".tmp.123.4abc") ||
		    strncmp(ta, "some/dir/", 9) || strncmp(base, a, n < 200 ? n : 200)) {
			ok(0, "a final name of %zu bytes: temporary %s", n, ta);
			return;
		}
	}
	ok(1, "final names of 1 to NAME_MAX bytes: a temporary name within NAME_MAX, "
	      "in the same directory, starting as the name does, *.tmp.SUFFIX");
	memset(a, 'x', NAME_MAX);
	memcpy(b, a, NAME_MAX);
	a[NAME_MAX] = b[NAME_MAX] = '\0';
	b[NAME_MAX - 1] = 'y';
	snprintf(fa, sizeof fa, "%s", a);
	snprintf(fb, sizeof fb, "%s", b);
	ok(atomic_tmp_name(fa, "1.2", ta, sizeof ta) == 0 && atomic_tmp_name(fb, "1.2", tb, sizeof tb) == 0 &&
	   strcmp(ta, tb) && strchr(ta, '~'),
	   "two long names alike but for their end: distinct temporary names (the hash)");
	ok(atomic_tmp_name("short.h5", "XXXXXX", ta, sizeof ta) == 0 && !strcmp(ta, "short.h5.tmp.XXXXXX"),
	   "a short name: FINAL.tmp.SUFFIX, as before");
	ok(atomic_tmp_name("short.h5", "XXXXXX", ta, 8) < 0, "a buffer too small: -1");
}

/* atomic_check_output in dir: new, existing, force, the same file as an
 * input by name, hard link and symbolic link, a directory. */
static void test_check_output(const char *dir)
{
	char in[256], hard[256], sym[256], other[256], sub[256];
	const char *inputs[2];
	struct sw_err err;

	snprintf(in, sizeof in, "%s/in.txt", dir);
	snprintf(hard, sizeof hard, "%s/hard.txt", dir);
	snprintf(sym, sizeof sym, "%s/sym.txt", dir);
	snprintf(other, sizeof other, "%s/other.txt", dir);
	snprintf(sub, sizeof sub, "%s/sub", dir);
	close(open(in, O_WRONLY | O_CREAT, 0666));
	inputs[0] = "/nonexistent/skipped";
	inputs[1] = in;
	ok(atomic_check_output(other, 0, inputs, 2, &err) == SW_OK, "a new output: SW_OK");
	close(open(other, O_WRONLY | O_CREAT, 0666));
	ok(atomic_check_output(other, 0, inputs, 2, &err) == SW_ECANTCREAT &&
	   !strcmp(err.msg, "exists (--force replaces it)"), "an existing one: refused (%s)", err.msg);
	ok(atomic_check_output(other, 1, inputs, 2, &err) == SW_OK, "an existing one with force: SW_OK");
	ok(link(in, hard) == 0 && symlink("in.txt", sym) == 0, "a hard and a symbolic link to the input");
	ok(atomic_check_output(in, 1, inputs, 2, &err) == SW_ECANTCREAT &&
	   strstr(err.msg, "is also an input") && atomic_input_index(in, inputs, 2) == 1,
	   "the input itself, with force: refused (%s)", err.msg);
	ok(atomic_check_output(hard, 1, inputs, 2, &err) == SW_ECANTCREAT &&
	   atomic_check_output(sym, 1, inputs, 2, &err) == SW_ECANTCREAT,
	   "its hard link and its symbolic link, with force: refused");
	ok(mkdir(sub, 0777) == 0 && atomic_check_output(sub, 1, inputs, 2, &err) == SW_ECANTCREAT &&
	   !strcmp(err.msg, "is a directory"), "a directory, with force: refused");
	unlink(sym);
	ok(symlink("other.txt", sym) == 0 && atomic_check_output(sym, 1, inputs, 2, &err) == SW_ECANTCREAT &&
	   strstr(err.msg, "is a symbolic link"), "a symbolic link to another file, with force: refused (%s)",
	   err.msg);
	unlink(in);
	unlink(hard);
	unlink(sym);
	unlink(other);
	rmdir(sub);
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
	test_tmp_names();
	test_check_output(dir);
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
