/*
 * h5io.h - what every HDF5 module of lib/ shares: scalar attributes read
 * with type checks and written, groups created without timestamps,
 * /config, and HDF5's error stack as one line. The checkpoint reader is
 * h5read.c, the writer h5write.c, the trace trace.c; all use these.
 */
#ifndef SW_H5IO_H
#define SW_H5IO_H

#include <hdf5.h>
#include <stdint.h>

#include "arch.h"
#include "status.h"
#include "tensor.h"

/*
 * Scalar attributes of obj (objname names it in messages). present == NULL
 * means required: a missing attribute is SW_EDATA. Otherwise *present says
 * whether it was there. Strings may be fixed-length or variable-length
 * (h5py's default); numbers may be stored as any integer or float type.
 */
int h5io_get_str(hid_t obj, const char *objname, const char *attr, char *buf,
		 size_t len, int *present, struct sw_err *err);
int h5io_get_i64(hid_t obj, const char *objname, const char *attr, int64_t *v,
		 int *present, struct sw_err *err);
int h5io_get_f64(hid_t obj, const char *objname, const char *attr, double *v,
		 int *present, struct sw_err *err);

/* Scalar attributes on an open object (replacing any of that name):
 * strings variable-length UTF-8, integers int64, reals float64. */
int h5io_put_str(hid_t obj, const char *name, const char *val, struct sw_err *err);
int h5io_put_i64(hid_t obj, const char *name, int64_t val, struct sw_err *err);
int h5io_put_f64(hid_t obj, const char *name, double val, struct sw_err *err);

/* Open group path of file ("/" or "/config"), creating it (without
 * timestamps) when missing; H5I_INVALID_HID on failure. */
hid_t h5io_group(hid_t file, const char *path);

/* /config attributes from c. */
int h5io_write_config(hid_t file, const struct sw_config *c, struct sw_err *err);

/* The innermost message on HDF5's error stack ("truncated file: eof = ..."),
 * or "" if none. Returns the errno of the failed system call it reports
 * (ENOSPC on a full disk), else 0. */
int h5io_last_error(char *buf, size_t len);

/* The exit status for an output that failed with that errno: an I/O
 * error (74) for a full disk, quota or file-size limit or EIO, else
 * cannot create (73). */
int h5io_create_status(int errno_code);

#endif
