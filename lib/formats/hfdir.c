/*
 * hfdir.c - the rules of a Hugging Face model directory: config.json, the
 * shard index, the shards' paths and links (see hfdir.h).
 */
#include "hfdir.h"
#include "attrmap.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int hfdir_open_regular(const char *path, int *fd, uint64_t *size, struct sw_err *err)
{
	struct stat st;

	/* O_NONBLOCK: a FIFO is refused below, never waited on (a regular
	 * file ignores the flag) */
	if ((*fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0)
		return sw_fail(err, sw_errno_status(errno), "%s: %s", path, strerror(errno));
	if (fstat(*fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(*fd);
		*fd = -1;
		return sw_fail(err, SW_ENOINPUT, "%s: not a regular file", path);
	}
	*size = (uint64_t)st.st_size;
	return SW_OK;
}

int hfdir_read_small(const char *path, size_t max, char **buf, size_t *len, struct sw_err *err)
{
	uint64_t size;
	int fd, rc;

	*buf = NULL;
	if ((rc = hfdir_open_regular(path, &fd, &size, err)))
		return rc;
	if (size > max)
		rc = sw_fail(err, SW_EDATA, "%s: larger than %zu bytes", path, max);
	else if (!(*buf = malloc((size_t)size + 1)))
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
	else if (pread(fd, *buf, (size_t)size, 0) != (ssize_t)size)
		rc = sw_fail(err, SW_EIO, "%s: short read", path);
	close(fd);
	if (rc) {
		free(*buf);
		*buf = NULL;
		return rc;
	}
	(*buf)[size] = '\0';
	*len = (size_t)size;
	return SW_OK;
}

int hfdir_config(const char *dir, struct sw_config *c, struct sw_err *err)
{
	char path[PATH_MAX + 16], *json;
	size_t len;
	int rc;

	if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path)
		return sw_fail(err, SW_ENOINPUT, "path too long");
	if (access(path, F_OK) < 0)
		return sw_fail(err, SW_ENOINPUT, "no config.json beside it (needed for the architecture)");
	if ((rc = hfdir_read_small(path, HFDIR_CONFIG_MAX, &json, &len, err)))
		return rc;
	rc = st_parse_config(json, len, c, err);
	free(json);
	return rc;
}

int hfdir_sniff_index(int fd, uint64_t size)
{
	unsigned char buf[64];
	ssize_t got = pread(fd, buf, size < sizeof buf ? (size_t)size : sizeof buf, 0);

	/* JSON's blanks, then '{' (a UTF-8 byte order mark is not JSON) */
	for (ssize_t i = 0; i < got; i++) {
		if (buf[i] == '{')
			return 1;
		if (buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\n' && buf[i] != '\r')
			return 0;
	}
	return 0;
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct st_index_entry *)a)->name,
		      ((const struct st_index_entry *)b)->name);
}

int hfdir_index_open(const char *path, struct hfdir_index *ix, struct sw_err *err)
{
	struct st_index *idx = &ix->idx;
	struct attr_map seen;
	char *json;
	size_t len;
	int rc;

	memset(ix, 0, sizeof *ix);
	if ((rc = hfdir_read_small(path, HFDIR_INDEX_MAX, &json, &len, err)))
		return rc;
	rc = st_parse_index(json, len, idx, err);
	free(json);
	if (rc)
		return rc;
	/* the shards, each once (a map of the names seen: O(1) a lookup) */
	attrmap_init(&seen);
	if (!(ix->shard = malloc((idx->n ? idx->n : 1) * sizeof *ix->shard)))
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (size_t i = 0; i < idx->n && !rc; i++) {
		const char *f = idx->e[i].shard;
		if (!attrmap_get(&seen, f) && !(rc = attrmap_set(&seen, f, "", err)))
			ix->shard[ix->nshards++] = f;
	}
	attrmap_free(&seen);
	/* sorted by name from here on (the names point into the pool, which
	 * stays): a lookup is a binary search */
	if (!rc && idx->n > 1)
		qsort(idx->e, idx->n, sizeof *idx->e, entry_cmp);
	if (rc)
		hfdir_index_free(ix);
	return rc;
}

int hfdir_index_holds(const struct hfdir_index *ix, const char *shard, const char *path,
		      const char *name, size_t *at, struct sw_err *err)
{
	struct st_index_entry key = {name, NULL};
	const struct st_index_entry *j = ix->idx.n ? bsearch(&key, ix->idx.e, ix->idx.n,
							     sizeof *ix->idx.e, entry_cmp) : NULL;

	if (!j || strcmp(j->shard, shard))
		return sw_fail(err, SW_EDATA, "%s holds %s, which the index does not list there",
			       path, name);
	if (at)
		*at = (size_t)(j - ix->idx.e);
	return SW_OK;
}

void hfdir_index_free(struct hfdir_index *ix)
{
	st_index_free(&ix->idx);
	free(ix->shard);
	memset(ix, 0, sizeof *ix);
}

int hfdir_shard_path(char *path, size_t len, const char *dir, const char *shard)
{
	int n = snprintf(path, len, "%s/%s", dir, shard);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* real is inside the directory top (both resolved paths) */
static int path_inside(const char *real, const char *top)
{
	size_t n = strlen(top);

	return !strncmp(real, top, n) && (real[n] == '/' || (n == 1 && top[0] == '/'));
}

int hfdir_check_link(const char *path, const char *dir, const char *index, struct sw_err *err)
{
	char real[PATH_MAX], top[PATH_MAX], tmp[PATH_MAX];
	struct stat st;

	if (lstat(path, &st) < 0 || !S_ISLNK(st.st_mode) || !realpath(path, real))
		return SW_OK;   /* not a link, or dangling: opening it says why */
	if (realpath(dir, top) && path_inside(real, top))
		return SW_OK;
	if (realpath(index, tmp)) {
		snprintf(top, sizeof top, "%s", dirname(tmp));
		if (path_inside(real, top))
			return SW_OK;
	}
	return sw_fail(err, SW_EDATA, "%s: a symlink to %s, outside the index's directory", path,
		       real);
}
