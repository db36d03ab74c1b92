/* rundir.c - a training run's output directory (see rundir.h). */
#include "rundir.h"
#include "../base/grow.h"
#include "../files/trace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* "ckpt-" digits ".h5" (*tmp 0), or that and ".tmp." anything (*tmp 1,
 * atomicfile's temporary): 1 with *step; 0 for any other name. */
static int ckpt_name(const char *name, int64_t *step, int *tmp)
{
	const char *p = name + 5;
	int64_t v = 0;
	int digits = 0;

	if (strncmp(name, "ckpt-", 5) != 0)
		return 0;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (++digits > 18)
			return 0;
		v = v * 10 + (*p - '0');
	}
	if (!digits || strncmp(p, ".h5", 3) != 0)
		return 0;
	p += 3;
	if (*p == '\0')
		*tmp = 0;
	else if (strncmp(p, ".tmp.", 5) == 0)
		*tmp = 1;
	else
		return 0;
	*step = v;
	return 1;
}

static int file_cmp(const void *a, const void *b)
{
	const struct rundir_file *x = a, *y = b;

	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	if (x->tmp != y->tmp)
		return x->tmp - y->tmp;
	return strcmp(x->name, y->name);
}

/* The checkpoints and temporaries in the directory (c->dirfd), by step. */
static int scan(struct rundir_claim *c, struct sw_err *err)
{
	int fd = dup(c->dirfd);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *e;
	size_t cap = 0;

	if (!d) {
		int e2 = errno;
		if (fd >= 0)
			close(fd);
		return sw_fail(err, SW_ECANTCREAT, "%s: cannot read the output directory: %s",
			       c->dir, strerror(e2));
	}
	for (;;) {
		struct rundir_file f = {0};
		struct stat st;

		errno = 0;
		if (!(e = readdir(d)))
			break;
		if (!ckpt_name(e->d_name, &f.step, &f.tmp) || strlen(e->d_name) >= sizeof f.name ||
		    fstatat(c->dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode))
			continue;
		if (SW_GROW(c->f, &cap, c->n + 1) < 0) {
			closedir(d);
			return sw_fail(err, SW_ESOFTWARE, "out of memory");
		}
		strcpy(f.name, e->d_name);
		c->f[c->n++] = f;
	}
	if (errno) {
		int e2 = errno;
		closedir(d);
		return sw_fail(err, SW_ECANTCREAT, "%s: cannot read the output directory: %s",
			       c->dir, strerror(e2));
	}
	closedir(d);
	if (c->n)
		qsort(c->f, c->n, sizeof *c->f, file_cmp);
	return SW_OK;
}

/* mkdir -p dir; *made: the length of the shortest prefix of dir this
 * created (0: none), for unmake_dirs. */
static int make_dirs(const char *dir, size_t *made, struct sw_err *err)
{
	char path[4096];
	size_t n = strlen(dir);

	*made = 0;
	if (n == 0 || n >= sizeof path)
		return sw_fail(err, SW_ECANTCREAT, "%s: bad output directory name", dir);
	memcpy(path, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		path[i] = '\0';
		if (mkdir(path, 0777) == 0) {
			if (!*made)
				*made = i;
		} else if (errno != EEXIST) {
			return sw_fail(err, SW_ECANTCREAT, "%s: cannot create the output directory: %s",
				       dir, strerror(errno));
		}
		if (i < n)
			path[i] = '/';
	}
	return SW_OK;
}

/* Remove again the directories make_dirs created (empty: a refused run
 * wrote nothing in them), the deepest first. */
static void unmake_dirs(const char *dir, size_t made)
{
	char path[4096];
	char *slash;

	if (!made)
		return;
	snprintf(path, sizeof path, "%s", dir);
	while (strlen(path) >= made) {
		if (rmdir(path) < 0 || !(slash = strrchr(path, '/')))
			return;
		*slash = '\0';
	}
}

/* Open and lock the directory (rundir.h, the lock). */
static int lock_dir(struct rundir_claim *c, struct sw_err *err)
{
	struct stat st;

	c->dirfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->dirfd < 0)
		return sw_fail(err, SW_ECANTCREAT, "%s: cannot create the output directory: %s", c->dir,
			       strerror(errno));
	c->held = 1;
	if (fstat(c->dirfd, &st) < 0 || !S_ISDIR(st.st_mode))
		return sw_fail(err, SW_ECANTCREAT, "%s: cannot create the output directory: %s", c->dir,
			       strerror(ENOTDIR));
	if (flock(c->dirfd, LOCK_EX | LOCK_NB) == 0) {
		c->locked = 1;
		return SW_OK;
	}
	if (errno == EWOULDBLOCK)
		return sw_fail(err, SW_ECANTCREAT,
			       "%s: another process writes this run (it holds the directory's lock): "
			       "nothing was changed; wait for it to end, or choose another --out", c->dir);
	return SW_OK;   /* no flock on this file system: go on without */
}

/* "not an HDF5 file", "a scalewatch checkpoint", ...: what a regular file
 * that is no trace is, for the one line that refuses it. */
static void what_is(const char *path, const struct stat *st, const char *kind, char *buf, size_t len)
{
	static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
	unsigned char got[8];
	int hdf5 = 0, fd;

	if (kind[0]) {
		snprintf(buf, len, "a scalewatch %s", kind);
		return;
	}
	/* HDF5's signature: at 0, or at 512, 1024, 2048, ... after a user block */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW)) >= 0) {
		for (off_t at = 0; !hdf5 && at + 8 <= st->st_size; at = at ? 2 * at : 512)
			hdf5 = pread(fd, got, 8, at) == 8 && memcmp(got, sig, 8) == 0;
		close(fd);
	}
	snprintf(buf, len, hdf5 ? "an HDF5 file without scalewatch_format" : "not an HDF5 file");
}

/*
 * What is at path, the trace this run writes (writes 1) or DIR/trace.h5
 * (writes 0: counted as a run, removed by force): nothing (or an empty
 * file), or a trace sw-train may replace or append to, is SW_OK (*exists
 * says which); a symbolic link is SW_OK when only counted or removed
 * (the link goes, never its target) but refused when written; a file of
 * several names, anything not a regular file, or a regular file that is
 * no trace is refused. Refusals are SW_ECANTCREAT naming path and what is
 * there.
 */
static int check_trace(const char *path, int writes, int *exists, struct sw_err *err)
{
	char kind[32], what[64];
	struct stat st;

	*exists = 0;
	if (lstat(path, &st) < 0 || S_ISDIR(st.st_mode))
		return SW_OK;   /* creating it says what is wrong */
	if (S_ISREG(st.st_mode) && st.st_size == 0 && st.st_nlink == 1)
		return SW_OK;   /* holds nothing (mktemp's): created over, as if absent */
	*exists = 1;
	if (S_ISLNK(st.st_mode))
		return !writes ? SW_OK
		       : sw_fail(err, SW_ECANTCREAT, "%s: a symbolic link: refused (no file is written "
				 "through a link); remove it, or choose another --trace", path);
	if (!S_ISREG(st.st_mode))
		return sw_fail(err, SW_ECANTCREAT, "%s: not a regular file: refused as a trace", path);
	if (writes && st.st_nlink > 1)
		return sw_fail(err, SW_ECANTCREAT, "%s: a file of %ju names (hard links): refused (a trace "
			       "written in place would change the others); remove it, or choose another "
			       "--trace", path, (uintmax_t)st.st_nlink);
	if (trace_sniff(path, kind, sizeof kind))
		return SW_OK;
	what_is(path, &st, kind, what, sizeof what);
	return sw_fail(err, SW_ECANTCREAT, "%s: not a scalewatch trace (%s): only a trace is replaced or "
		       "removed, --force or not; remove it, or choose another --trace", path, what);
}

/* Is path's directory the one dirfd is open on (however named)? */
static int in_dir(const char *path, int dirfd)
{
	char parent[4096];
	const char *slash = strrchr(path, '/');
	struct stat a, b;

	if (!slash)
		snprintf(parent, sizeof parent, ".");
	else if (slash == path)
		snprintf(parent, sizeof parent, "/");
	else
		snprintf(parent, sizeof parent, "%.*s", (int)(slash - path), path);
	return stat(parent, &a) == 0 && fstat(dirfd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* "2 checkpoints (ckpt-000010.h5 to ckpt-000020.h5), 1 temporary file of a
 * killed writer and trace.h5": the files marked (marked) or all of them. */
static void describe(const struct rundir_claim *c, int marked, char *buf, size_t len)
{
	const char *first = NULL, *last = NULL;
	size_t nck = 0, ntmp = 0, n = 0;
	char part[3][700];
	int np = 0;

	for (size_t i = 0; i < c->n; i++) {
		if (marked && !c->f[i].remove)
			continue;
		if (c->f[i].tmp) {
			ntmp++;
			continue;
		}
		if (!first)
			first = c->f[i].name;
		last = c->f[i].name;
		nck++;
	}
	if (nck == 1)
		snprintf(part[np++], sizeof part[0], "1 checkpoint (%s)", first);
	else if (nck)
		snprintf(part[np++], sizeof part[0], "%zu checkpoints (%s to %s)", nck, first, last);
	if (ntmp)
		snprintf(part[np++], sizeof part[0], "%zu temporary file%s of a killed writer", ntmp,
			 ntmp > 1 ? "s" : "");
	if (marked ? c->remove_dir_trace : c->dir_trace_exists)
		snprintf(part[np++], sizeof part[0], "trace.h5");
	buf[0] = '\0';
	for (int i = 0; i < np && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i == 0 ? "" : i == np - 1 ? " and " : ", ",
				      part[i]);
}

/* The explicit trace path names DIR/trace.h5 itself? */
static int same_file(const char *a, const char *b)
{
	struct stat x, y;

	if (strcmp(a, b) == 0)
		return 1;
	return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* What rundir_claim decides once the directory is locked and read. */
static int decide(struct rundir_claim *c, const char *resume, int64_t resume_step, int force,
		  struct sw_err *err)
{
	char what[1024];
	struct stat st;
	size_t later = 0;

	if (!c->n && !c->dir_trace_exists && !c->trace_exists)
		return SW_OK;
	if (resume && stat(resume, &st) == 0) {
		c->keep_ino_valid = 1;
		c->keep_dev = (uint64_t)st.st_dev;
		c->keep_ino = (uint64_t)st.st_ino;
	}

	if (resume && in_dir(resume, c->dirfd)) {
		/* the same run goes on: what came after the checkpoint is a
		 * continuation it abandons; mixed with its own, sw-norms
		 * DIR/ckpt-* would read two runs */
		for (size_t i = 0; i < c->n; i++) {
			c->f[i].remove = c->f[i].tmp || c->f[i].step > resume_step;
			later += !c->f[i].tmp && c->f[i].step > resume_step;
		}
		if (later && !force) {
			for (size_t i = 0; i < c->n; i++)
				c->f[i].remove = !c->f[i].tmp && c->f[i].step > resume_step;
			describe(c, 1, what, sizeof what);
			return sw_fail(err, SW_ECANTCREAT,
				       "%s: holds checkpoints after step %lld, the one resumed from: %s, "
				       "which would mix with the resumed run's; --force removes them",
				       c->dir, (long long)resume_step, what);
		}
		if (!force)
			for (size_t i = 0; i < c->n; i++)
				c->f[i].remove = 0;
		c->append = c->trace_exists;
		return SW_OK;
	}

	describe(c, 0, what, sizeof what);
	if (!force) {
		if (!c->n && !c->dir_trace_exists)
			return sw_fail(err, SW_ECANTCREAT, "%s: the trace of another run is there: %s",
				       c->trace, resume ? "--force replaces it"
				       : "--resume CKPT continues its run, --force replaces it");
		if (resume)
			return sw_fail(err, SW_ECANTCREAT,
				       "%s: holds another run than the one %s continues: %s; "
				       "--force replaces it, or choose another --out", c->dir, resume, what);
		return sw_fail(err, SW_ECANTCREAT,
			       "%s: holds a run: %s; --resume CKPT continues it, --force replaces it",
			       c->dir, what);
	}
	/* --force: the earlier run goes as a whole; a trace at the path this
	 * run writes is replaced when it is created */
	for (size_t i = 0; i < c->n; i++)
		c->f[i].remove = 1;
	c->remove_dir_trace = c->dir_trace_exists && !(c->trace[0] && same_file(c->trace, c->dir_trace));
	c->replace_trace = c->trace_exists;
	return SW_OK;
}

int rundir_claim(const char *dir, const char *trace, const char *resume, int64_t resume_step,
		 int force, struct rundir_claim *c, struct sw_err *err)
{
	size_t made = 0;
	int rc;

	memset(c, 0, sizeof *c);
	c->dirfd = -1;
	if (strlen(dir) >= sizeof c->dir || (trace && strlen(trace) >= sizeof c->trace) ||
	    snprintf(c->dir_trace, sizeof c->dir_trace, "%s/trace.h5", dir) >= (int)sizeof c->dir_trace)
		return sw_fail(err, SW_ECANTCREAT, "%s: output name too long", dir);
	strcpy(c->dir, dir);
	strcpy(c->trace, trace ? trace : c->dir_trace);
	/* the lock before anything is read: what is seen stays so */
	if ((rc = make_dirs(dir, &made, err)) || (rc = lock_dir(c, err)) ||
	    (c->trace[0] && (rc = check_trace(c->trace, 1, &c->trace_exists, err))) ||
	    (rc = check_trace(c->dir_trace, 0, &c->dir_trace_exists, err)) ||
	    (rc = scan(c, err)) || (rc = decide(c, resume, resume_step, force, err)))
		unmake_dirs(dir, made);
	return rc;
}

int rundir_clear(struct rundir_claim *c, char *note, size_t len, struct sw_err *err)
{
	char what[1024];
	struct stat st;

	describe(c, 1, what, sizeof what);
	snprintf(note, len, "%s%s%s%s%s", what[0] ? "removed " : "", what,
		 what[0] && c->replace_trace ? "; " : "", c->replace_trace ? "the trace is replaced: " : "",
		 c->replace_trace ? c->trace : "");
	for (size_t i = 0; i < c->n; i++) {
		if (!c->f[i].remove)
			continue;
		/* never the checkpoint the run resumed from, however named;
		 * under the directory's descriptor: a link is removed, never
		 * followed */
		if (c->keep_ino_valid && fstatat(c->dirfd, c->f[i].name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    (uint64_t)st.st_dev == c->keep_dev && (uint64_t)st.st_ino == c->keep_ino)
			continue;
		if (unlinkat(c->dirfd, c->f[i].name, 0) < 0 && errno != ENOENT)
			return sw_fail(err, SW_ECANTCREAT, "%s/%s: cannot remove: %s", c->dir, c->f[i].name,
				       strerror(errno));
	}
	if (c->remove_dir_trace && unlinkat(c->dirfd, "trace.h5", 0) < 0 && errno != ENOENT)
		return sw_fail(err, SW_ECANTCREAT, "%s: cannot remove: %s", c->dir_trace, strerror(errno));
	return SW_OK;
}

void rundir_claim_free(struct rundir_claim *c)
{
	if (c->held)
		close(c->dirfd);        /* the lock goes with it */
	c->held = c->locked = 0;
	c->dirfd = -1;
	free(c->f);
	c->f = NULL;
	c->n = 0;
}

int rundir_checkpoints(const char *dir, int *is_run, char ***paths, size_t *n, struct sw_err *err)
{
	struct rundir_claim c = {0};
	struct stat st;
	size_t k = 0;
	int rc;

	*is_run = 0;
	*paths = NULL;
	*n = 0;
	snprintf(c.dir, sizeof c.dir, "%s", dir);
	/* a stat first: a file operand is opened by its reader only (one open
	 * per checkpoint, tests/cli/t0019) */
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    (c.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return SW_OK;   /* no directory: the reader says what it is */
	c.held = 1;
	if ((rc = scan(&c, err))) {
		/* scan's words are the writer's */
		rc = sw_fail(err, SW_ENOINPUT, "cannot read the directory");
		goto out;
	}
	*is_run = c.n > 0 || fstatat(c.dirfd, "trace.h5", &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (!*is_run)
		goto out;
	if (c.n && !(*paths = calloc(c.n, sizeof **paths))) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < c.n; i++) {
		size_t len = strlen(dir) + strlen(c.f[i].name) + 2;
		if (c.f[i].tmp)
			continue;
		if (!((*paths)[k] = malloc(len))) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto out;
		}
		snprintf((*paths)[k++], len, "%s%s%s", dir, dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/",
			 c.f[i].name);
	}
	*n = k;
out:
	if (rc) {
		rundir_paths_free(*paths, k);
		*paths = NULL;
		*is_run = 0;
	}
	rundir_claim_free(&c);
	return rc;
}

void rundir_paths_free(char **paths, size_t n)
{
	for (size_t i = 0; paths && i < n; i++)
		free(paths[i]);
	free(paths);
}
