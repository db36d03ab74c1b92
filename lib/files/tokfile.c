/* tokfile.c - llm.c token files, written atomically (see tokfile.h). */
#include "tokfile.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../base/atomicfile.h"
#include "data.h"

int tokfile_create(struct tokfile_writer *w, const char *path, struct sw_err *err)
{
	static const int32_t blank[DATA_LLMC_HEADER_BYTES / 4];
	int rc;

	w->fd = -1;
	w->n = 0;
	if (strlen(path) >= sizeof w->final)
		return sw_fail(err, SW_ECANTCREAT, "%s: path too long", path);
	strcpy(w->final, path);
	if ((rc = atomic_create(path, w->tmp, sizeof w->tmp, &w->fd, err)))
		return rc;
	if ((rc = atomic_write_all(w->fd, blank, sizeof blank, path, err)))
		tokfile_abort(w);
	return rc;
}

int tokfile_append(struct tokfile_writer *w, const uint16_t *id, size_t n, struct sw_err *err)
{
	int rc;

	if (n > (size_t)INT32_MAX - (size_t)w->n)
		rc = sw_fail(err, SW_EDATA, "more than %d tokens: an llm.c token file counts them in int32",
			     INT32_MAX);
	else
		rc = atomic_write_all(w->fd, id, n * sizeof *id, w->final, err);
	if (rc)
		tokfile_abort(w);
	else
		w->n += (int64_t)n;
	return rc;
}

int tokfile_commit(struct tokfile_writer *w, struct sw_err *err)
{
	int32_t header[3] = {DATA_LLMC_MAGIC, 1, (int32_t)w->n};
	int rc = SW_OK;

	if (pwrite(w->fd, header, sizeof header, 0) != (ssize_t)sizeof header)
		rc = sw_fail(err, SW_EIO, "%s: write: %s", w->final, strerror(errno));
	rc = atomic_finish(w->fd, w->tmp, w->final, rc, err);
	w->fd = -1;
	return rc;
}

void tokfile_abort(struct tokfile_writer *w)
{
	if (w->fd < 0)
		return;
	close(w->fd);
	atomic_discard(w->tmp);
	w->fd = -1;
}

int tokfile_parse(const void *buf, size_t len, const uint16_t **id, size_t *n,
		  struct sw_err *err)
{
	return data_llmc_parse(buf, len, id, n, err);
}
