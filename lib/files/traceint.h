/*
 * traceint.h - what the trace's modules share and nothing else sees:
 * trace.c (these helpers), tracewrite.c (the SWMR writer: trace_create,
 * trace_append, trace_reopen) and traceread.c (the reader). The public
 * API is trace.h; the layout of the file is in trace.c's opening comment,
 * why the writer is shaped as it is in tracewrite.c's.
 *
 * The writer's lock is an fcntl lock (an open file description lock
 * where Linux has it): the writer takes it, a reader asks whether anyone
 * holds it (trace_abandoned).
 */
#ifndef SW_TRACEINT_H
#define SW_TRACEINT_H

#include <hdf5.h>
#include <stdint.h>

#include "../base/status.h"

#define TRACE_MAX_SERIES 65536
#define TRACE_MAX_COLS   (1 << 20)     /* columns of one series */
#define TRACE_MAX_NAME   255

/* Take the writer's lock on fd: 0 taken, 1 another process holds it,
 * -1 locks are not supported here (go on without). */
int trace_lock_take(int fd);

/* Does a process hold the writer's lock? 1 yes, 0 no, -1 cannot tell. */
int trace_lock_held(int fd);

/* sw_fail with code (SW_ECANTCREAT: the status HDF5's error says) and
 * "what: HDF5's last error". */
int trace_hdf5_fail(struct sw_err *err, int code, const char *what);

/* Rank and dims of /series/<name> (d), which must be 1-D or 2-D. */
int trace_series_shape(hid_t d, const char *name, int *rank, hsize_t dims[2],
		       hsize_t max[2], struct sw_err *err);

/* Rows [row0, row0 + n) of /series/<name> (d, ncols columns, 0: 1-D) as
 * mtype: written from in when in is not NULL, d extended to row0 + n rows
 * first (an absolute length: a retry rewrites the same rows), else read
 * into out. SW_EIO naming the series and HDF5's error if HDF5 fails. */
int trace_rows_io(hid_t d, const char *name, hid_t mtype, int64_t row0, int64_t n, int ncols,
		  const void *in, void *out, struct sw_err *err);

/* Close id with closer (H5Dclose, H5Sclose, ...) unless it is invalid. */
static inline void trace_close_id(hid_t id, herr_t (*closer)(hid_t))
{
	if (id >= 0)
		closer(id);
}

#endif
