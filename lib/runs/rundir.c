/* rundir.c - a training run's output directory (see rundir.h). */
#include "rundir.h"
#include "../base/grow.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Is there an entry at path that is not a directory? (a symlink counts:
 * removing it removes the link) */
static int is_file(const char *path, struct stat *st)
{
	return lstat(path, st) == 0 && !S_ISDIR(st->st_mode);
}

/* The checkpoints and temporaries in c->dir, by step; a directory that
 * does not exist (yet) has none. */
static int scan(struct rundir_claim *c, struct sw_err *err)
{
	DIR *d = opendir(c->dir);
	struct dirent *e;
	size_t cap = 0;

	if (!d) {
		/* missing, or not a directory: creating it says what is wrong */
		if (errno == ENOENT || errno == ENOTDIR)
			return SW_OK;
		return sw_fail(err, SW_ECANTCREAT, "%s: cannot read the output directory: %s",
			       c->dir, strerror(errno));
	}
	for (;;) {
		struct rundir_file f = {0};
		struct stat st;

		errno = 0;
		if (!(e = readdir(d)))
			break;
		if (!ckpt_name(e->d_name, &f.step, &f.tmp) || strlen(e->d_name) >= sizeof f.name ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode))
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

/* Is path's directory dir (the same directory, however named)? */
static int in_dir(const char *path, const char *dir)
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
	return stat(parent, &a) == 0 && stat(dir, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
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

int rundir_claim(const char *dir, const char *trace, const char *resume, int64_t resume_step,
		 int force, struct rundir_claim *c, struct sw_err *err)
{
	char what[1024];
	struct stat st;
	size_t later = 0;
	int rc;

	memset(c, 0, sizeof *c);
	if (strlen(dir) >= sizeof c->dir || (trace && strlen(trace) >= sizeof c->trace) ||
	    snprintf(c->dir_trace, sizeof c->dir_trace, "%s/trace.h5", dir) >= (int)sizeof c->dir_trace)
		return sw_fail(err, SW_ECANTCREAT, "%s: output name too long", dir);
	strcpy(c->dir, dir);
	c->dir_trace_exists = is_file(c->dir_trace, &st);
	strcpy(c->trace, trace ? trace : c->dir_trace);
	c->trace_exists = c->trace[0] && is_file(c->trace, &st);
	if ((rc = scan(c, err)))
		return rc;
	if (!c->n && !c->dir_trace_exists && !c->trace_exists)
		return SW_OK;
	if (resume && stat(resume, &st) == 0) {
		c->keep_ino_valid = 1;
		c->keep_dev = (uint64_t)st.st_dev;
		c->keep_ino = (uint64_t)st.st_ino;
	}

	if (resume && in_dir(resume, dir)) {
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
				       dir, (long long)resume_step, what);
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
				       "--force replaces it, or choose another --out", dir, resume, what);
		return sw_fail(err, SW_ECANTCREAT,
			       "%s: holds a run: %s; --resume CKPT continues it, --force replaces it",
			       dir, what);
	}
	/* --force: the earlier run goes as a whole; a trace at the path this
	 * run writes is replaced when it is created */
	for (size_t i = 0; i < c->n; i++)
		c->f[i].remove = 1;
	c->remove_dir_trace = c->dir_trace_exists && !(c->trace[0] && same_file(c->trace, c->dir_trace));
	c->replace_trace = c->trace_exists;
	return SW_OK;
}

int rundir_clear(struct rundir_claim *c, char *note, size_t len, struct sw_err *err)
{
	char path[4096 + 256], what[1024];
	struct stat st;

	describe(c, 1, what, sizeof what);
	snprintf(note, len, "%s%s%s%s%s", what[0] ? "removed " : "", what,
		 what[0] && c->replace_trace ? "; " : "", c->replace_trace ? "the trace is replaced: " : "",
		 c->replace_trace ? c->trace : "");
	for (size_t i = 0; i < c->n; i++) {
		if (!c->f[i].remove)
			continue;
		snprintf(path, sizeof path, "%s/%s", c->dir, c->f[i].name);
		/* never the checkpoint the run resumed from, however named */
		if (c->keep_ino_valid && lstat(path, &st) == 0 &&
		    (uint64_t)st.st_dev == c->keep_dev && (uint64_t)st.st_ino == c->keep_ino)
			continue;
		if (unlink(path) < 0 && errno != ENOENT)
			return sw_fail(err, SW_ECANTCREAT, "%s: cannot remove: %s", path, strerror(errno));
	}
	if (c->remove_dir_trace && unlink(c->dir_trace) < 0 && errno != ENOENT)
		return sw_fail(err, SW_ECANTCREAT, "%s: cannot remove: %s", c->dir_trace, strerror(errno));
	return SW_OK;
}

void rundir_claim_free(struct rundir_claim *c)
{
	free(c->f);
	c->f = NULL;
	c->n = 0;
}
