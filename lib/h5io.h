/*
 * h5io.h - scalewatch HDF5 v1 checkpoints: the writer, and the attribute
 * helpers the reader (ckpt.c's HDF5 back end) and the trace module share.
 *
 * The writer writes to a temporary name in the destination's directory,
 * fsyncs and renames it into place, so a killed writer never leaves a torn
 * file under the final name. Files are reproducible: object timestamps are
 * off, so the same content gives the same bytes.
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

struct h5w;

/* Start a file of the given kind ("checkpoint" or "trace") that will appear
 * as final_path on commit. SW_ECANTCREAT if the directory is not writable. */
int h5w_create(const char *final_path, const char *kind, struct h5w **out,
	       struct sw_err *err);
hid_t h5w_file(struct h5w *w);

/* Attributes of a group ("/" for the root; created when missing). */
int h5w_set_str(struct h5w *w, const char *group, const char *name,
		const char *val, struct sw_err *err);
int h5w_set_i64(struct h5w *w, const char *group, const char *name, int64_t val,
		struct sw_err *err);
int h5w_set_f64(struct h5w *w, const char *group, const char *name, double val,
		struct sw_err *err);

/* /config attributes from c. */
int h5w_write_config(struct h5w *w, const struct sw_config *c, struct sw_err *err);

/* A float32 dataset group/<t->name> of t's shape; with_meta adds the tensor
 * attributes (block, role, layer, kind, mup, ...) as /params needs them. */
int h5w_write_tensor(struct h5w *w, const char *group,
		     const struct sw_tensor_info *t, const float *data,
		     int with_meta, struct sw_err *err);

/* Attributes of an object already written (e.g. "/fisher/lm_head.weight"). */
int h5w_obj_str(struct h5w *w, const char *path, const char *name, const char *val,
		struct sw_err *err);
int h5w_obj_i64(struct h5w *w, const char *path, const char *name, int64_t val,
		struct sw_err *err);

/* An int32 dataset path (e.g. "/batch/tokens") of rows x cols. */
int h5w_write_i32(struct h5w *w, const char *group, const char *name, int64_t rows,
		  int64_t cols, const int *data, struct sw_err *err);

/* Close, fsync, rename into place, fsync the directory; frees w. */
int h5w_commit(struct h5w *w, struct sw_err *err);
/* Close and remove the temporary file; frees w. */
void h5w_abort(struct h5w *w);

#endif
