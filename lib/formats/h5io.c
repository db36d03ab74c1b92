/*
 * h5io.c - what every HDF5 module of lib/ shares (see h5io.h): scalar
 * attributes read with type checks and written, groups, /config,
 * HDF5's error stack in one line, and the rules for files from strangers.
 */
#include "h5io.h"
#include "../base/family.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/*
 * The keys of a Hugging Face config that change the function
 * (arch.h), each only where it is not Llama's default (files without
 * them stay as they were): rope_scaling (the type), rope_factor,
 * rope_low_freq_factor, rope_high_freq_factor,
 * rope_original_max_position_embeddings, partial_rotary_factor,
 * hidden_act, sliding_window, max_window_layers; Gemma2's
 * attn_softcap, final_softcap and query_pre_attn_scalar (absent: 0,
 * none and head_dim's).
 */
static int write_function_keys(hid_t g, const struct sw_config *c, struct sw_err *err)
{
	int rc = SW_OK, llama3 = !strcmp(c->rope_type, "llama3");

	if ((c->rope_type[0] && (rc = h5io_put_str(g, "rope_scaling", c->rope_type, err))) ||
	    ((llama3 || !strcmp(c->rope_type, "linear")) &&
	     (rc = h5io_put_f64(g, "rope_factor", c->rope_factor, err))) ||
	    (llama3 && ((rc = h5io_put_f64(g, "rope_low_freq_factor", c->rope_low_freq_factor, err)) ||
			(rc = h5io_put_f64(g, "rope_high_freq_factor", c->rope_high_freq_factor, err)) ||
			(rc = h5io_put_i64(g, "rope_original_max_position_embeddings",
					   c->rope_original_max, err)))) ||
	    (c->rope_partial != 0 && (rc = h5io_put_f64(g, "partial_rotary_factor", c->rope_partial, err))) ||
	    (c->hidden_act[0] && (rc = h5io_put_str(g, "hidden_act", c->hidden_act, err))) ||
	    (c->sliding_window && ((rc = h5io_put_i64(g, "sliding_window", c->sliding_window, err)) ||
				   (rc = h5io_put_i64(g, "max_window_layers", c->max_window_layers, err)))) ||
	    (c->attn_softcap && (rc = h5io_put_f64(g, "attn_softcap", c->attn_softcap, err))) ||
	    (c->final_softcap && (rc = h5io_put_f64(g, "final_softcap", c->final_softcap, err))) ||
	    (c->query_pre_attn_scalar &&
	     (rc = h5io_put_f64(g, "query_pre_attn_scalar", c->query_pre_attn_scalar, err))))
		return rc;
	return SW_OK;
}

static int read_function_keys(hid_t g, struct sw_config *c, struct sw_err *err)
{
	int rc, present;

	if ((rc = h5io_get_str(g, "/config", "rope_scaling", c->rope_type, sizeof c->rope_type,
			       &present, err)) ||
	    (rc = h5io_get_f64(g, "/config", "rope_factor", &c->rope_factor, &present, err)) ||
	    (rc = h5io_get_f64(g, "/config", "rope_low_freq_factor", &c->rope_low_freq_factor,
			       &present, err)) ||
	    (rc = h5io_get_f64(g, "/config", "rope_high_freq_factor", &c->rope_high_freq_factor,
			       &present, err)) ||
	    (rc = h5io_get_i64(g, "/config", "rope_original_max_position_embeddings",
			       &c->rope_original_max, &present, err)) ||
	    (rc = h5io_get_f64(g, "/config", "partial_rotary_factor", &c->rope_partial, &present, err)) ||
	    (rc = h5io_get_str(g, "/config", "hidden_act", c->hidden_act, sizeof c->hidden_act,
			       &present, err)) ||
	    (rc = h5io_get_i64(g, "/config", "sliding_window", &c->sliding_window, &present, err)) ||
	    (rc = h5io_get_i64(g, "/config", "max_window_layers", &c->max_window_layers, &present, err)) ||
	    (rc = h5io_get_f64(g, "/config", "attn_softcap", &c->attn_softcap, &present, err)) ||
	    (rc = h5io_get_f64(g, "/config", "final_softcap", &c->final_softcap, &present, err)) ||
	    (rc = h5io_get_f64(g, "/config", "query_pre_attn_scalar", &c->query_pre_attn_scalar,
			       &present, err)))
		return rc;
	/* "default" is no scaling, "silu" the default activation, as in config.json */
	if (!strcmp(c->rope_type, "default"))
		c->rope_type[0] = '\0';
	if (!strcmp(c->hidden_act, "silu"))
		c->hidden_act[0] = '\0';
	return SW_OK;
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
	    (rc = h5io_put_i64(g, "scale_vectors", c->scale_vectors, err)) ||
	    /* only where a design is chosen: files without one stay as they were */
	    (c->scale_design[0] && (rc = h5io_put_str(g, "scale_design", c->scale_design, err))) ||
	    (c->scale_reparam[0] && (rc = h5io_put_str(g, "scale_reparam", c->scale_reparam, err))) ||
	    (rc = write_function_keys(g, c, err)) ||
	    /* a mixture of experts only where there is one */
	    (c->n_experts && ((rc = h5io_put_i64(g, "n_experts", c->n_experts, err)) ||
			      (rc = h5io_put_i64(g, "n_experts_active", c->n_experts_active, err)) ||
			      (rc = h5io_put_i64(g, "n_shared_experts", c->n_shared_experts, err)) ||
			      (rc = h5io_put_i64(g, "moe_d_ff", c->moe_d_ff, err)) ||
			      (rc = h5io_put_i64(g, "shared_d_ff", c->shared_d_ff, err)) ||
			      (rc = h5io_put_i64(g, "moe_dense_layers", c->moe_dense_layers, err)) ||
			      (rc = h5io_put_i64(g, "moe_renorm", c->moe_renorm, err)) ||
			      (rc = h5io_put_f64(g, "moe_aux_coef", c->moe_aux_coef, err))))) {
		/* rc says which failed */
	}
	H5Gclose(g);
	return rc;
}

int h5io_read_config(hid_t file, struct sw_config *c, int *exists, struct sw_err *err)
{
	hid_t g;
	int rc, present, head_dim_present;
	int64_t v;

	if ((rc = h5io_hard_path(file, "/config", &present, err)))
		return rc;
	if (exists)
		*exists = present;
	if (!present)
		return exists ? SW_OK : sw_fail(err, SW_EDATA, "missing group /config");
	g = H5Gopen2(file, "config", H5P_DEFAULT);
	if (g < 0)
		return sw_fail(err, SW_EDATA, "/config is not a group");
	memset(c, 0, sizeof *c);
	if ((rc = h5io_get_str(g, "/config", "arch", c->arch, sizeof c->arch, NULL, err)) ||
	    (rc = h5io_get_i64(g, "/config", "vocab_size", &c->vocab_size, NULL, err)) ||
	    (rc = h5io_get_i64(g, "/config", "d_model", &c->d_model, NULL, err)) ||
	    (rc = h5io_get_i64(g, "/config", "n_layers", &c->n_layers, NULL, err)) ||
	    (rc = h5io_get_i64(g, "/config", "n_heads", &c->n_heads, NULL, err)) ||
	    (rc = h5io_get_i64(g, "/config", "n_kv_heads", &c->n_kv_heads, NULL, err)) ||
	    (rc = h5io_get_i64(g, "/config", "d_ff", &c->d_ff, NULL, err)) ||
	    (rc = h5io_get_i64(g, "/config", "seq_len", &c->seq_len, NULL, err)) ||
	    (rc = h5io_get_f64(g, "/config", "rope_theta", &c->rope_theta, NULL, err)) ||
	    (rc = h5io_get_f64(g, "/config", "norm_eps", &c->norm_eps, NULL, err)) ||
	    (rc = h5io_get_i64(g, "/config", "tie_embeddings", &v, NULL, err)))
		goto out;
	c->tie_embeddings = v != 0;
	if ((rc = h5io_get_i64(g, "/config", "qk_norm", &v, NULL, err)) ||
	    (rc = h5io_get_str(g, "/config", "multipliers", c->multipliers,
			       sizeof c->multipliers, NULL, err)) ||
	    (rc = h5io_get_i64(g, "/config", "head_dim", &c->head_dim, &head_dim_present, err)))
		goto out;
	c->qk_norm = v != 0;
	if ((rc = h5io_get_i64(g, "/config", "norm_everywhere", &v, &present, err)))
		goto out;
	c->norm_everywhere = present && v != 0;
	if ((rc = h5io_get_i64(g, "/config", "scale_vectors", &v, &present, err)))
		goto out;
	c->scale_vectors = !present || v != 0;
	if ((rc = h5io_get_str(g, "/config", "scale_design", c->scale_design, sizeof c->scale_design,
			       &present, err)) ||
	    (rc = h5io_get_str(g, "/config", "scale_reparam", c->scale_reparam, sizeof c->scale_reparam,
			       &present, err)))
		goto out;
	if ((rc = read_function_keys(g, c, err)))
		goto out;
	if ((rc = h5io_get_i64(g, "/config", "n_experts", &c->n_experts, &present, err)))
		goto out;
	if (present && ((rc = h5io_get_i64(g, "/config", "n_experts_active", &c->n_experts_active,
					   NULL, err)) ||
			(rc = h5io_get_i64(g, "/config", "n_shared_experts", &c->n_shared_experts,
					   NULL, err)) ||
			(rc = h5io_get_i64(g, "/config", "moe_d_ff", &c->moe_d_ff, NULL, err)) ||
			(rc = h5io_get_i64(g, "/config", "shared_d_ff", &c->shared_d_ff, NULL, err)) ||
			(rc = h5io_get_i64(g, "/config", "moe_dense_layers", &c->moe_dense_layers,
					   NULL, err)) ||
			(rc = h5io_get_i64(g, "/config", "moe_renorm", &v, NULL, err)) ||
			(rc = h5io_get_f64(g, "/config", "moe_aux_coef", &c->moe_aux_coef, NULL, err))))
		goto out;
	c->moe_renorm = present && v != 0;
	if (!family_computed(c->arch)) {
		rc = sw_fail(err, SW_EDATA, "/config: arch '%s' is not supported (%s)",
			     c->arch, FAMILY_COMPUTED_LIST);
		goto out;
	}
	if (!head_dim_present && (rc = arch_default_head_dim(c, err))) {
		sw_err_prefix(err, "/config");
		goto out;
	}
	rc = arch_config_check(c, err);
out:
	H5Gclose(g);
	return rc;
}

/* ---- files from strangers ------------------------------------------- */

void h5io_reader_setup(void)
{
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
	H5PLset_loading_state(0);
	H5Eclear2(H5E_DEFAULT);
}

static int same_inode(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

int h5io_same_inode(const char *path, int fd)
{
	struct stat a, b;

	return stat(path, &a) == 0 && fstat(fd, &b) == 0 && same_inode(&a, &b);
}

/* Is HDF5's file the one fd is open on? (sec2 and stdio hand out an int) */
static int hdf5_file_is_fd(hid_t file, int fd)
{
	struct stat a, b;
	void *handle = NULL;

	if (H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) < 0 || !handle)
		return 0;
	return fstat(*(int *)handle, &a) == 0 && fstat(fd, &b) == 0 && same_inode(&a, &b);
}

/* h5io_open_fd, and with fcpl >= 0 h5io_create_fd */
static hid_t by_fd(const char *path, int fd, unsigned flags, hid_t fcpl, hid_t fapl, int *changed)
{
	char byfd[64];
	const char *name = path;
	hid_t file;

	*changed = 0;
	snprintf(byfd, sizeof byfd, "/proc/self/fd/%d", fd);
	if (h5io_same_inode(byfd, fd))
		name = byfd;
	else if (!h5io_same_inode(path, fd)) {
		*changed = 1;   /* checked before HDF5 opens path: no FIFO is opened */
		return H5I_INVALID_HID;
	}
	file = fcpl >= 0 ? H5Fcreate(name, flags, fcpl, fapl) : H5Fopen(name, flags, fapl);
	if (file >= 0 && !hdf5_file_is_fd(file, fd)) {
		H5Fclose(file);
		*changed = 1;
		return H5I_INVALID_HID;
	}
	return file;
}

hid_t h5io_open_fd(const char *path, int fd, unsigned flags, hid_t fapl, int *changed)
{
	return by_fd(path, fd, flags, H5I_INVALID_HID, fapl, changed);
}

hid_t h5io_create_fd(const char *path, int fd, hid_t fcpl, hid_t fapl, int *changed)
{
	return by_fd(path, fd, H5F_ACC_TRUNC, fcpl, fapl, changed);
}

int h5io_hard_path(hid_t file, const char *path, int *exists, struct sw_err *err)
{
	char prefix[1024];
	size_t len = strlen(path);

	if (exists)
		*exists = 0;
	if (path[0] != '/' || len >= sizeof prefix)
		return sw_fail(err, SW_ESOFTWARE, "%.64s...: not an absolute path that fits", path);
	for (size_t end = 1; end <= len; end++) {
		H5L_info_t li;
		htri_t there;

		if (path[end] != '/' && path[end] != '\0')
			continue;
		memcpy(prefix, path, end);
		prefix[end] = '\0';
		/* the components before the last are hard links already checked:
		 * asking about this one follows none that is not */
		there = H5Lexists(file, prefix, H5P_DEFAULT);
		if (there < 0)
			return sw_fail(err, SW_EDATA, "%s: cannot read its link", prefix);
		if (!there)
			return exists ? SW_OK : sw_fail(err, SW_EDATA, "missing %s", prefix);
		if (H5Lget_info(file, prefix, &li, H5P_DEFAULT) < 0)
			return sw_fail(err, SW_EDATA, "%s: cannot read its link", prefix);
		if (li.type == H5L_TYPE_EXTERNAL)
			return sw_fail(err, SW_EDATA,
				       "%s: external link: refused (the data must be inside this file)",
				       prefix);
		if (li.type != H5L_TYPE_HARD)
			return sw_fail(err, SW_EDATA, "%s: %s link: refused (every object must be a hard link)",
				       prefix, li.type == H5L_TYPE_SOFT ? "soft" : "user-defined");
	}
	if (exists)
		*exists = 1;
	return SW_OK;
}

int h5io_check_layout(hid_t d, const char *objname, struct sw_err *err)
{
	hid_t dcpl = H5Dget_create_plist(d);
	H5D_layout_t layout = dcpl < 0 ? H5D_LAYOUT_ERROR : H5Pget_layout(dcpl);
	int nfilters = dcpl < 0 ? -1 : H5Pget_nfilters(dcpl), rc = SW_OK;

	if (layout == H5D_LAYOUT_ERROR || nfilters < 0)
		rc = sw_fail(err, SW_EDATA, "%s: cannot read its storage layout", objname);
	else if (layout == H5D_VIRTUAL)
		rc = sw_fail(err, SW_EDATA,
			     "%s: virtual dataset: refused (the data must be inside this file)", objname);
	else if (H5Pget_external_count(dcpl) != 0)
		rc = sw_fail(err, SW_EDATA,
			     "%s: external storage: refused (the data must be inside this file)", objname);
	for (int i = 0; i < nfilters && !rc; i++) {
		unsigned flags = 0, config = 0;
		size_t ncd = 0;
		H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &ncd, NULL, 0, NULL, NULL);

		/* with plugins off, asking never looks on disk */
		if (id < 0)
			rc = sw_fail(err, SW_EDATA, "%s: cannot read its filters", objname);
		else if (H5Zfilter_avail(id) <= 0)
			rc = sw_fail(err, SW_EDATA, "%s: filter %d not available: refused "
				     "(this libhdf5 cannot decode it and loads no plugins)", objname, (int)id);
		else if (H5Zget_filter_info(id, &config) < 0 ||
			 !(config & H5Z_FILTER_CONFIG_DECODE_ENABLED))
			rc = sw_fail(err, SW_EDATA, "%s: filter %d cannot decode here: refused",
				     objname, (int)id);
	}
	H5Eclear2(H5E_DEFAULT);
	if (dcpl >= 0)
		H5Pclose(dcpl);
	return rc;
}

/* Every chunk of the chunked dataset d that holds one of rows [row0,
 * row1) is stored (with upto, those holding row1 - 1 may not be: *upto
 * is then the first row they hold); the filtered ones' stored bytes
 * against decoded. */
static int check_chunks(hid_t d, hid_t dcpl, const char *objname, int rank, const hsize_t *dims,
			size_t type_size, hsize_t row0, hsize_t row1, int64_t *upto,
			struct sw_err *err)
{
	hsize_t chunk[H5S_MAX_RANK], off[H5S_MAX_RANK];
	uint64_t chunk_bytes = type_size, stored = 0, decoded = 0;
	int filtered = H5Pget_nfilters(dcpl) > 0;

	if (H5Pget_chunk(dcpl, rank, chunk) != rank)
		return sw_fail(err, SW_EDATA, "%s: cannot read its chunk shape", objname);
	for (int k = 0; k < rank; k++)
		if (chunk[k] == 0 || __builtin_mul_overflow(chunk_bytes, chunk[k], &chunk_bytes))
			return sw_fail(err, SW_EDATA, "%s: chunks of impossible size", objname);
	for (int k = 1; k < rank; k++)
		if (dims[k] == 0)
			return SW_OK;   /* no element */
	off[0] = row0 / chunk[0] * chunk[0];
	for (int k = 1; k < rank; k++)
		off[k] = 0;
	while (off[0] < row1) {
		unsigned mask = 0;
		haddr_t addr = HADDR_UNDEF;
		hsize_t size = 0;
		int k;

		if (H5Dget_chunk_info_by_coord(d, off, &mask, &addr, &size) < 0)
			return sw_fail(err, SW_EDATA, "%s: cannot read its chunk index", objname);
		if ((size == 0 || addr == HADDR_UNDEF) && upto && off[0] + chunk[0] >= row1) {
			*upto = (int64_t)off[0];
			break;
		}
		if (size == 0 || addr == HADDR_UNDEF)
			return sw_fail(err, SW_EDATA, "%s: never written (no data for row %llu): refused "
				       "(it would read as fill values)", objname, (unsigned long long)off[0]);
		stored += size;
		decoded += chunk_bytes;
		/* the next chunk: the last dimension fastest */
		for (k = rank - 1; k > 0; k--) {
			off[k] += chunk[k];
			if (off[k] < dims[k])
				break;
			off[k] = 0;
		}
		if (k == 0)
			off[0] += chunk[0];
	}
	/* unfiltered chunks hold their bytes as they are: no bomb */
	if (filtered && decoded > H5IO_BOMB_FLOOR && decoded / H5IO_BOMB_RATIO > stored)
		return sw_fail(err, SW_EDATA, "%s: compressed %llu:1 (%llu bytes in the file for %llu): "
			       "refused (more than %d:1 is a decompression bomb)", objname,
			       (unsigned long long)(decoded / (stored ? stored : 1)),
			       (unsigned long long)stored, (unsigned long long)decoded, H5IO_BOMB_RATIO);
	return SW_OK;
}

int h5io_check_written(hid_t d, const char *objname, int64_t row0, int64_t row1,
		       int64_t *upto, struct sw_err *err)
{
	hid_t dcpl = H5Dget_create_plist(d), space = H5Dget_space(d), type = H5Dget_type(d);
	hsize_t dims[H5S_MAX_RANK] = {1};
	H5D_space_status_t status;
	int rank = space < 0 ? -1 : H5Sget_simple_extent_ndims(space), rc = SW_OK;
	hssize_t npoints = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
	size_t type_size = type < 0 ? 0 : H5Tget_size(type);

	if (dcpl < 0 || rank < 0 || npoints < 0 || type_size == 0 ||
	    (rank > 0 && H5Sget_simple_extent_dims(space, dims, NULL) < 0)) {
		rc = sw_fail(err, SW_EDATA, "%s: cannot read its storage", objname);
		goto out;
	}
	if (row1 < 0 || (hsize_t)row1 > dims[0])
		row1 = (int64_t)dims[0];
	if (upto)
		*upto = row1;
	if (npoints == 0 || row0 >= row1)
		goto out;
	switch (H5Pget_layout(dcpl)) {
	case H5D_COMPACT:       /* the data is in the object header */
		break;
	case H5D_CONTIGUOUS:
		if (H5Dget_space_status(d, &status) < 0 || status != H5D_SPACE_STATUS_ALLOCATED)
			rc = sw_fail(err, SW_EDATA, "%s: never written (no storage): refused "
				     "(it would read as fill values)", objname);
		break;
	case H5D_CHUNKED:
		rc = check_chunks(d, dcpl, objname, rank, dims, type_size, (hsize_t)row0,
				  (hsize_t)row1, upto, err);
		break;
	default:
		rc = sw_fail(err, SW_EDATA, "%s: storage layout not supported", objname);
		break;
	}
out:
	H5Eclear2(H5E_DEFAULT);
	if (type >= 0)
		H5Tclose(type);
	if (space >= 0)
		H5Sclose(space);
	if (dcpl >= 0)
		H5Pclose(dcpl);
	return rc;
}

int h5io_check_dataset(hid_t d, const char *objname, struct sw_err *err)
{
	int rc = h5io_check_layout(d, objname, err);

	return rc ? rc : h5io_check_written(d, objname, 0, -1, NULL, err);
}
