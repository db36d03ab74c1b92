/*
 * tokfile.h - writing and checking llm.c token files (the layout of
 * lib/files/data.h: a header of 256 int32 - magic 20240520, version 1, the token
 * count - then the tokens as uint16, little-endian like the host).
 *
 * The writer streams: the tokens go to a temporary file beside the final
 * name behind a blank header, the header is written once the count is
 * known, and only then is the file renamed into place (lib/base/atomicfile.h).
 * The reader checks a file held in memory and, unlike data_open (which
 * wants something to train on), accepts zero tokens.
 */
#ifndef SW_TOKFILE_H
#define SW_TOKFILE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"

struct tokfile_writer {
	char final[PATH_MAX];
	char tmp[PATH_MAX + 64];
	int fd;                 /* -1 when closed */
	int64_t n;              /* tokens written */
};

int tokfile_create(struct tokfile_writer *w, const char *path, struct sw_err *err);
int tokfile_append(struct tokfile_writer *w, const uint16_t *id, size_t n, struct sw_err *err);
/* Write the header, close, rename into place. On failure nothing is left. */
int tokfile_commit(struct tokfile_writer *w, struct sw_err *err);
/* Close and remove the temporary file (after a failure elsewhere). */
void tokfile_abort(struct tokfile_writer *w);

/* Check buf[0, len) as an llm.c token file; *id points at its *n tokens
 * (buf must be 2-byte aligned, as malloc and mmap give). */
int tokfile_parse(const void *buf, size_t len, const uint16_t **id, size_t *n,
		  struct sw_err *err);

#endif
