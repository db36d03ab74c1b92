/*
 * trace.c - scalewatch trace v1 (trace.h): what its writer and its reader
 * share (traceint.h): the writer's lock, HDF5 failures as messages, a
 * series' shape, and the rows of a series read or written.
 *
 * Layout (man/scalewatch-format.5, "Trace v1"):
 *   /                   scalewatch_format = "trace", format_version = 1
 *   /config             the model, as in a checkpoint (when given)
 *   /series/step        int64 [rows], chunked, unlimited rows
 *   /series/<name>      float64 [rows] or [rows, ncols] with `columns`
 *   /status             int64 scalar: 0 while written, 1 once closed
 *   /session            int64 scalar: drawn anew by every writer that creates
 *                       or reopens the trace
 *
 * The writer (trace_create, trace_append, trace_close, and trace_reopen,
 * which goes on appending to a trace) is tracewrite.c; the reader
 * (trace_open and the rest) is traceread.c.
 */
#include "traceint.h"
#include "../formats/h5io.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#ifdef F_OFD_SETLK
#define LOCK_SET F_OFD_SETLK           /* per open file: survives other closes */
#define LOCK_GET F_OFD_GETLK
#else
#define LOCK_SET F_SETLK
#define LOCK_GET F_GETLK
#endif

/* ---- the writer's lock ------------------------------------------------ */

int trace_lock_take(int fd)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};

	if (fcntl(fd, LOCK_SET, &fl) == 0)
		return 0;
	return errno == EAGAIN || errno == EACCES ? 1 : -1;
}

int trace_lock_held(int fd)
{
	struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};

	if (fcntl(fd, LOCK_GET, &fl) < 0)
		return -1;
	return fl.l_type != F_UNLCK;
}

/* ---- shared helpers --------------------------------------------------- */

int trace_hdf5_fail(struct sw_err *err, int code, const char *what)
{
	char why[256];
	int e = h5io_last_error(why, sizeof why);

	if (code == SW_ECANTCREAT)
		code = h5io_create_status(e);
	return sw_fail(err, code, "%s%s%s", what, why[0] ? ": " : "", why);
}

int trace_series_shape(hid_t d, const char *name, int *rank, hsize_t dims[2],
		       hsize_t max[2], struct sw_err *err)
{
	hid_t space = H5Dget_space(d);
	int rc = SW_OK;

	*rank = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);   /* scalar: 0 */
	if (*rank < 1 || *rank > 2)
		rc = sw_fail(err, SW_EDATA, "/series/%s: rank %d (a series is 1-D or 2-D)", name, *rank);
	else if (H5Sget_simple_extent_dims(space, dims, max) < 0)
		rc = sw_fail(err, SW_EDATA, "/series/%s: cannot read its shape", name);
	else if (dims[0] > (hsize_t)INT64_MAX)
		rc = sw_fail(err, SW_EDATA, "/series/%s: too many rows", name);
	trace_close_id(space, H5Sclose);
	return rc;
}

int trace_rows_io(hid_t d, const char *name, hid_t mtype, int64_t row0, int64_t n, int ncols,
		  const void *in, void *out, struct sw_err *err)
{
	int rank = ncols ? 2 : 1;
	hsize_t size[2] = {(hsize_t)(row0 + n), (hsize_t)ncols};
	hsize_t start[2] = {(hsize_t)row0, 0}, count[2] = {(hsize_t)n, (hsize_t)ncols};
	hid_t fs = H5I_INVALID_HID, ms = H5I_INVALID_HID;
	int rc = SW_OK;

	if ((in && H5Dset_extent(d, size) < 0) || (fs = H5Dget_space(d)) < 0 ||
	    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
	    (ms = H5Screate_simple(rank, count, NULL)) < 0 ||
	    (in ? H5Dwrite(d, mtype, ms, fs, H5P_DEFAULT, in)
		: H5Dread(d, mtype, ms, fs, H5P_DEFAULT, out)) < 0) {
		/* the message before the closes below, which clear HDF5's errors */
		char what[TRACE_MAX_NAME + 64];
		if (in)
			snprintf(what, sizeof what, "/series/%s: cannot write row %lld", name,
				 (long long)row0);
		else
			snprintf(what, sizeof what, "/series/%s: cannot read", name);
		rc = trace_hdf5_fail(err, SW_EIO, what);
	}
	trace_close_id(ms, H5Sclose);
	trace_close_id(fs, H5Sclose);
	return rc;
}
