/*
 * h5write.h - writing scalewatch HDF5 files (checkpoints, and the label
 * files of sw-sharpness): attributes of groups, float32 tensors with
 * their /params metadata, int32 tables.
 *
 * The writer writes to a temporary name in the destination's directory,
 * fsyncs and renames it into place, so a killed writer never leaves a torn
 * file under the final name. Files are reproducible: object timestamps are
 * off, so the same content gives the same bytes.
 */
#ifndef SW_H5WRITE_H
#define SW_H5WRITE_H

#include "h5io.h"

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
