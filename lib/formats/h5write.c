/*
 * h5write.c - the atomic writer of scalewatch HDF5 files (see h5write.h).
 */
#include "h5write.h"
#include "../base/atomicfile.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct h5w {
	hid_t file;
	char tmp[PATH_MAX];
	char final[PATH_MAX];
};

hid_t h5w_file(struct h5w *w) { return w->file; }

int h5w_create(const char *final_path, const char *kind, struct h5w **out,
	       struct sw_err *err)
{
	struct h5w *w;
	hid_t fcpl;
	int rc, fd, changed = 0;

	*out = NULL;
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
	w = calloc(1, sizeof *w);
	if (!w)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	w->file = H5I_INVALID_HID;
	if (strlen(final_path) >= sizeof w->final) {
		free(w);
		return sw_fail(err, SW_ECANTCREAT, "path too long");
	}
	strcpy(w->final, final_path);
	if ((rc = atomic_create(final_path, w->tmp, sizeof w->tmp, &fd, err))) {
		free(w);
		return rc;
	}
	fcpl = H5Pcreate(H5P_FILE_CREATE);
	if (fcpl >= 0)
		H5Pset_obj_track_times(fcpl, 0);
	/* the file atomic_create made (O_EXCL), not one a link swapped in at
	 * its name would lead to */
	w->file = h5io_create_fd(w->tmp, fd, fcpl >= 0 ? fcpl : H5P_DEFAULT, H5P_DEFAULT, &changed);
	close(fd);
	if (w->file < 0) {
		char why[256];
		int e = changed ? 0 : h5io_last_error(why, sizeof why);   /* before another call clears it */
		if (changed)
			snprintf(why, sizeof why, "the temporary file was replaced while it was created");
		if (fcpl >= 0)
			H5Pclose(fcpl);
		unlink(w->tmp);
		free(w);
		return sw_fail(err, h5io_create_status(e), "%s: cannot create HDF5 file%s%s",
			       final_path, why[0] ? ": " : "", why);
	}
	if (fcpl >= 0)
		H5Pclose(fcpl);
	if ((rc = h5w_set_str(w, "/", "scalewatch_format", kind, err)) ||
	    (rc = h5w_set_i64(w, "/", "format_version", 1, err))) {
		h5w_abort(w);
		return rc;
	}
	*out = w;
	return SW_OK;
}






/* Attribute name = val on group (created when missing) of file. */
#define GROUP_PUT(fn, type)                                                     \
	static int fn##_in(hid_t file, const char *group, const char *name,     \
			   type val, struct sw_err *err)                        \
	{                                                                       \
		hid_t g = h5io_group(file, group);                              \
		int rc;                                                         \
		if (g < 0)                                                      \
			return sw_fail(err, SW_EIO, "cannot create group %s", group); \
		rc = fn(g, name, val, err);                                     \
		H5Gclose(g);                                                    \
		return rc;                                                      \
	}
GROUP_PUT(h5io_put_str, const char *)
GROUP_PUT(h5io_put_i64, int64_t)
GROUP_PUT(h5io_put_f64, double)

int h5w_set_str(struct h5w *w, const char *group, const char *name,
		const char *val, struct sw_err *err)
{
	return h5io_put_str_in(w->file, group, name, val, err);
}

int h5w_set_i64(struct h5w *w, const char *group, const char *name, int64_t val,
		struct sw_err *err)
{
	return h5io_put_i64_in(w->file, group, name, val, err);
}

int h5w_set_f64(struct h5w *w, const char *group, const char *name, double val,
		struct sw_err *err)
{
	return h5io_put_f64_in(w->file, group, name, val, err);
}


int h5w_write_config(struct h5w *w, const struct sw_config *c, struct sw_err *err)
{
	return h5io_write_config(w->file, c, err);
}

static int write_tensor_meta(hid_t d, const struct sw_tensor_info *t, struct sw_err *err)
{
	int64_t layer = t->layer;
	int rc;

	if ((rc = h5io_put_str(d, "block", sw_block_name(t->block), err)) ||
	    (rc = h5io_put_str(d, "role", t->role, err)) ||
	    (rc = h5io_put_i64(d, "layer", layer, err)) ||
	    (rc = h5io_put_str(d, "kind", sw_kind_name(sw_kind_of_shape(t->rank, t->shape)), err)) ||
	    (rc = h5io_put_str(d, "mup", sw_mup_name(t->mup), err)))
		return rc;
	if (t->group != SW_GROUP_UNKNOWN &&
	    (rc = h5io_put_str(d, "group", sw_group_name(t->group), err)))
		return rc;
	/* a mixture of experts' routed expert: its number (none elsewhere) */
	if (t->expert >= 0 && (rc = h5io_put_i64(d, "expert", (int64_t)t->expert, err)))
		return rc;
	if (t->norm_type != SW_NORM_NONE &&
	    (rc = h5io_put_str(d, "norm_type", sw_norm_type_name(t->norm_type), err)))
		return rc;
	if (t->n_heads > 0) {
		int64_t nh = t->n_heads, hd = t->head_dim;
		if ((rc = h5io_put_i64(d, "n_heads", nh, err)) ||
		    (rc = h5io_put_i64(d, "head_dim", hd, err)))
			return rc;
	}
	if (!isnan(t->lr) &&
	    (rc = h5io_put_f64(d, "lr", t->lr, err)))
		return rc;
	if (!isnan(t->wd) &&
	    (rc = h5io_put_f64(d, "wd", t->wd, err)))
		return rc;
	if (t->wd_mode != SW_WD_UNKNOWN &&
	    (rc = h5io_put_str(d, "wd_mode", sw_wd_mode_name(t->wd_mode), err)))
		return rc;
	return SW_OK;
}

int h5w_write_tensor(struct h5w *w, const char *group,
		     const struct sw_tensor_info *t, const float *data,
		     int with_meta, struct sw_err *err)
{
	hsize_t dims[SW_MAX_RANK];
	hid_t g, space = H5I_INVALID_HID, dcpl = H5I_INVALID_HID, d = H5I_INVALID_HID;
	int rc = SW_OK;

	if (strchr(t->name, '/') || !t->name[0])
		return sw_fail(err, SW_ESOFTWARE, "tensor name '%s' cannot be a dataset name", t->name);
	g = h5io_group(w->file, group);
	if (g < 0)
		return sw_fail(err, SW_EIO, "cannot create group %s", group);
	for (int i = 0; i < t->rank; i++)
		dims[i] = (hsize_t)t->shape[i];
	space = t->rank ? H5Screate_simple(t->rank, dims, NULL) : H5Screate(H5S_SCALAR);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	if (space < 0 || dcpl < 0 || H5Pset_obj_track_times(dcpl, 0) < 0 ||
	    H5Pset_layout(dcpl, H5D_CONTIGUOUS) < 0 ||
	    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) < 0) {
		rc = sw_fail(err, SW_ESOFTWARE, "%s: cannot set up dataset", t->name);
		goto out;
	}
	d = H5Dcreate2(g, t->name, H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
	if (d < 0 || (t->numel > 0 &&
		      H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)) {
		rc = sw_fail(err, SW_EIO, "%s: cannot write dataset", t->name);
		goto out;
	}
	if (with_meta)
		rc = write_tensor_meta(d, t, err);
out:
	if (d >= 0)
		H5Dclose(d);
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (space >= 0)
		H5Sclose(space);
	H5Gclose(g);
	return rc;
}

static int obj_put(struct h5w *w, const char *path, const char *name, const char *sval,
		   int64_t ival, struct sw_err *err)
{
	hid_t o = H5Oopen(w->file, path, H5P_DEFAULT);
	int rc;

	if (o < 0)
		return sw_fail(err, SW_ESOFTWARE, "%s: no such object", path);
	rc = sval ? h5io_put_str(o, name, sval, err) : h5io_put_i64(o, name, ival, err);
	H5Oclose(o);
	return rc;
}

int h5w_obj_str(struct h5w *w, const char *path, const char *name, const char *val,
		struct sw_err *err)
{
	return obj_put(w, path, name, val, 0, err);
}

int h5w_obj_i64(struct h5w *w, const char *path, const char *name, int64_t val,
		struct sw_err *err)
{
	return obj_put(w, path, name, NULL, val, err);
}

int h5w_write_i32(struct h5w *w, const char *group, const char *name, int64_t rows,
		  int64_t cols, const int *data, struct sw_err *err)
{
	hsize_t dims[2] = {(hsize_t)rows, (hsize_t)cols};
	hid_t g = h5io_group(w->file, group), sp = H5I_INVALID_HID, dcpl = H5I_INVALID_HID,
	      d = H5I_INVALID_HID;
	int rc = SW_OK;

	if (g < 0)
		return sw_fail(err, SW_EIO, "cannot create group %s", group);
	sp = H5Screate_simple(2, dims, NULL);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	if (sp < 0 || dcpl < 0 || H5Pset_obj_track_times(dcpl, 0) < 0 ||
	    (d = H5Dcreate2(g, name, H5T_STD_I32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT)) < 0 ||
	    (rows * cols > 0 && H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0))
		rc = sw_fail(err, SW_EIO, "%s/%s: cannot write dataset", group, name);
	if (d >= 0)
		H5Dclose(d);
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (sp >= 0)
		H5Sclose(sp);
	H5Gclose(g);
	return rc;
}

int h5w_commit(struct h5w *w, struct sw_err *err)
{
	int rc = SW_OK;

	if (H5Fclose(w->file) < 0) {
		rc = sw_fail(err, SW_EIO, "%s: cannot finish writing (disk full?)", w->final);
		unlink(w->tmp);
	} else {
		rc = atomic_commit(w->tmp, w->final, err);
	}
	free(w);
	return rc;
}

void h5w_abort(struct h5w *w)
{
	if (!w)
		return;
	if (w->file >= 0)
		H5Fclose(w->file);
	unlink(w->tmp);
	free(w);
}
