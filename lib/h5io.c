/*
 * h5io.c - what every HDF5 module of lib/ shares (see h5io.h): scalar
 * attributes read with type checks and written, groups, /config, and
 * HDF5's error stack in one line.
 */
#include "h5io.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- attribute helpers ---------------------------------------------- */

static herr_t first_error(unsigned n, const H5E_error2_t *e, void *data)
{
	char *buf = data;

	(void)n;
	if (buf[0] == '\0' && e->desc && e->desc[0])
		snprintf(buf, 256, "%s", e->desc);
	return 0;
}

int h5io_last_error(char *buf, size_t len)
{
	char tmp[256] = "";

	H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, first_error, tmp);  /* innermost first */
	/* a failed system call: HDF5 dumps its arguments ("file write failed:
	 * time = ..., errno = 28, ..."); the errno says it in one line */
	const char *e = strstr(tmp, "errno = ");
	if (e) {
		int code = atoi(e + 8);
		char *colon = strchr(tmp, ':');
		if (colon)
			*colon = '\0';
		if (code > 0) {
			snprintf(buf, len, "%s: %s", tmp, strerror(code));
			return code;
		}
	}
	snprintf(buf, len, "%s", tmp);
	return 0;
}

int h5io_create_status(int errno_code)
{
	return errno_code == ENOSPC || errno_code == EDQUOT || errno_code == EFBIG ||
	       errno_code == EIO ? SW_EIO : SW_ECANTCREAT;
}

/* Open attribute attr of obj; SW_OK with *a < 0 if absent and optional. */
static int open_attr(hid_t obj, const char *objname, const char *attr,
		     int *present, hid_t *a, struct sw_err *err)
{
	htri_t exists = H5Aexists(obj, attr);
	hid_t space;
	hssize_t npoints;

	*a = H5I_INVALID_HID;
	if (exists < 0)
		return sw_fail(err, SW_EDATA, "%s: cannot read attribute '%s'", objname, attr);
	if (!exists) {
		if (!present)
			return sw_fail(err, SW_EDATA, "%s: missing attribute '%s'", objname, attr);
		*present = 0;
		return SW_OK;
	}
	*a = H5Aopen(obj, attr, H5P_DEFAULT);
	if (*a < 0)
		return sw_fail(err, SW_EDATA, "%s: cannot open attribute '%s'", objname, attr);
	space = H5Aget_space(*a);
	npoints = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
	if (space >= 0)
		H5Sclose(space);
	if (npoints != 1) {
		H5Aclose(*a);
		*a = H5I_INVALID_HID;
		return sw_fail(err, SW_EDATA, "%s: attribute '%s' is not a single value",
			       objname, attr);
	}
	if (present)
		*present = 1;
	return SW_OK;
}

int h5io_get_str(hid_t obj, const char *objname, const char *attr, char *buf,
		 size_t len, int *present, struct sw_err *err)
{
	hid_t a, ftype = H5I_INVALID_HID, mtype = H5I_INVALID_HID;
	int rc = open_attr(obj, objname, attr, present, &a, err);

	if (rc || a < 0)
		return rc;
	rc = sw_fail(err, SW_EDATA, "%s: attribute '%s' is not a string", objname, attr);
	ftype = H5Aget_type(a);
	if (ftype < 0 || H5Tget_class(ftype) != H5T_STRING)
		goto out;
	mtype = H5Tcopy(H5T_C_S1);
	if (mtype < 0)
		goto out;
	if (H5Tis_variable_str(ftype) > 0) {
		char *s = NULL;
		if (H5Tset_size(mtype, H5T_VARIABLE) < 0 ||
		    H5Tset_cset(mtype, H5Tget_cset(ftype)) < 0 ||
		    H5Aread(a, mtype, &s) < 0 || !s)
			goto out;
		if (strlen(s) >= len) {
			rc = sw_fail(err, SW_EDATA, "%s: attribute '%s' is too long",
				     objname, attr);
			H5free_memory(s);
			goto out;
		}
		strcpy(buf, s);
		H5free_memory(s);
	} else {
		size_t size = H5Tget_size(ftype);
		char *tmp;
		if (size == 0 || size >= len) {
			rc = sw_fail(err, SW_EDATA, "%s: attribute '%s' is too long",
				     objname, attr);
			goto out;
		}
		tmp = calloc(1, size + 1);
		if (!tmp || H5Tset_size(mtype, size) < 0 ||
		    H5Tset_strpad(mtype, H5T_STR_NULLPAD) < 0 ||
		    H5Aread(a, mtype, tmp) < 0) {
			free(tmp);
			goto out;
		}
		memcpy(buf, tmp, size + 1);
		free(tmp);
	}
	rc = SW_OK;
out:
	if (mtype >= 0)
		H5Tclose(mtype);
	if (ftype >= 0)
		H5Tclose(ftype);
	H5Aclose(a);
	return rc;
}

/* Read a numeric attribute into mem type (int64 or double). h5py stores a
 * Python bool as an enum over int8: read its raw value. */
static int get_number(hid_t obj, const char *objname, const char *attr,
		      int as_double, void *out, int *present, struct sw_err *err)
{
	hid_t a, ftype = H5I_INVALID_HID;
	H5T_class_t cls;
	int rc = open_attr(obj, objname, attr, present, &a, err);

	if (rc || a < 0)
		return rc;
	rc = sw_fail(err, SW_EDATA, "%s: attribute '%s' is not a number", objname, attr);
	ftype = H5Aget_type(a);
	if (ftype < 0)
		goto out;
	cls = H5Tget_class(ftype);
	if (cls == H5T_INTEGER || (cls == H5T_FLOAT && as_double)) {
		if (H5Aread(a, as_double ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64, out) < 0)
			goto out;
	} else if (cls == H5T_FLOAT) {
		double d;
		if (H5Aread(a, H5T_NATIVE_DOUBLE, &d) < 0)
			goto out;
		if (!(d == floor(d) && fabs(d) < 9.0e15)) {
			rc = sw_fail(err, SW_EDATA, "%s: attribute '%s' = %g is not an integer",
				     objname, attr, d);
			goto out;
		}
		*(int64_t *)out = (int64_t)d;
	} else if (cls == H5T_ENUM && H5Tget_size(ftype) == 1) {
		signed char c;
		hid_t mtype = H5Tget_native_type(ftype, H5T_DIR_ASCEND);
		herr_t r = mtype < 0 ? -1 : H5Aread(a, mtype, &c);
		if (mtype >= 0)
			H5Tclose(mtype);
		if (r < 0)
			goto out;
		if (as_double)
			*(double *)out = c;
		else
			*(int64_t *)out = c;
	} else {
		goto out;
	}
	rc = SW_OK;
out:
	if (ftype >= 0)
		H5Tclose(ftype);
	H5Aclose(a);
	return rc;
}

int h5io_get_i64(hid_t obj, const char *objname, const char *attr, int64_t *v,
		 int *present, struct sw_err *err)
{
	return get_number(obj, objname, attr, 0, v, present, err);
}

int h5io_get_f64(hid_t obj, const char *objname, const char *attr, double *v,
		 int *present, struct sw_err *err)
{
	return get_number(obj, objname, attr, 1, v, present, err);
}

/* ---- writing ------------------------------------------------------- */

hid_t h5io_group(hid_t file, const char *group)
{
	hid_t gcpl, g;

	if (!strcmp(group, "/"))
		return H5Gopen2(file, "/", H5P_DEFAULT);
	if (H5Lexists(file, group, H5P_DEFAULT) > 0)
		return H5Gopen2(file, group, H5P_DEFAULT);
	/* parents first ("/optim_state" for "/optim_state/m"), without timestamps */
	{
		char parent[256];
		const char *slash = strrchr(group, '/');
		if (slash && slash != group && (size_t)(slash - group) < sizeof parent) {
			hid_t pg;
			memcpy(parent, group, (size_t)(slash - group));
			parent[slash - group] = '\0';
			if ((pg = h5io_group(file, parent)) < 0)
				return H5I_INVALID_HID;
			H5Gclose(pg);
		}
	}
	gcpl = H5Pcreate(H5P_GROUP_CREATE);
	if (gcpl >= 0)
		H5Pset_obj_track_times(gcpl, 0);
	g = H5Gcreate2(file, group, H5P_DEFAULT, gcpl >= 0 ? gcpl : H5P_DEFAULT, H5P_DEFAULT);
	if (gcpl >= 0)
		H5Pclose(gcpl);
	return g;
}

static int write_attr(hid_t obj, const char *name, hid_t ftype, hid_t mtype,
		      const void *val, struct sw_err *err)
{
	hid_t space = H5Screate(H5S_SCALAR), a = H5I_INVALID_HID;
	int rc = SW_OK;

	if (H5Aexists(obj, name) > 0)
		H5Adelete(obj, name);
	if (space < 0 ||
	    (a = H5Acreate2(obj, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT)) < 0 ||
	    H5Awrite(a, mtype, val) < 0)
		rc = sw_fail(err, SW_EIO, "cannot write attribute '%s'", name);
	if (a >= 0)
		H5Aclose(a);
	if (space >= 0)
		H5Sclose(space);
	return rc;
}

int h5io_put_str(hid_t obj, const char *name, const char *val, struct sw_err *err)
{
	hid_t t = H5Tcopy(H5T_C_S1);
	int rc;

	if (t < 0 || H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0) {
		if (t >= 0)
			H5Tclose(t);
		return sw_fail(err, SW_ESOFTWARE, "cannot make a string type");
	}
	rc = write_attr(obj, name, t, t, &val, err);
	H5Tclose(t);
	return rc;
}

int h5io_put_i64(hid_t obj, const char *name, int64_t val, struct sw_err *err)
{
	return write_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &val, err);
}

int h5io_put_f64(hid_t obj, const char *name, double val, struct sw_err *err)
{
	return write_attr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &val, err);
}

int h5io_write_config(hid_t file, const struct sw_config *c, struct sw_err *err)
{
	hid_t g = h5io_group(file, "/config");
	int rc;

	if (g < 0)
		return sw_fail(err, SW_EIO, "cannot create group /config");
	if ((rc = h5io_put_str(g, "arch", c->arch, err)) ||
	    (rc = h5io_put_i64(g, "vocab_size", c->vocab_size, err)) ||
	    (rc = h5io_put_i64(g, "d_model", c->d_model, err)) ||
	    (rc = h5io_put_i64(g, "n_layers", c->n_layers, err)) ||
	    (rc = h5io_put_i64(g, "n_heads", c->n_heads, err)) ||
	    (rc = h5io_put_i64(g, "n_kv_heads", c->n_kv_heads, err)) ||
	    (rc = h5io_put_i64(g, "head_dim", c->head_dim, err)) ||
	    (rc = h5io_put_i64(g, "d_ff", c->d_ff, err)) ||
	    (rc = h5io_put_i64(g, "seq_len", c->seq_len, err)) ||
	    (rc = h5io_put_f64(g, "rope_theta", c->rope_theta, err)) ||
	    (rc = h5io_put_f64(g, "norm_eps", c->norm_eps, err)) ||
	    (rc = h5io_put_i64(g, "tie_embeddings", c->tie_embeddings, err)) ||
	    (rc = h5io_put_i64(g, "qk_norm", c->qk_norm, err)) ||
	    (rc = h5io_put_str(g, "multipliers", c->multipliers, err)) ||
	    (rc = h5io_put_i64(g, "norm_everywhere", c->norm_everywhere, err)) ||
	    (rc = h5io_put_i64(g, "scale_vectors", c->scale_vectors, err))) {
		/* rc says which failed */
	}
	H5Gclose(g);
	return rc;
}
