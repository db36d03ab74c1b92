/*
 * h5io.c - scalewatch HDF5 v1: attribute helpers, the checkpoint reader
 * (the HDF5 back end of ckpt.c) and the atomic writer (see h5io.h).
 */
#include "h5io.h"
#include "atomicfile.h"
#include "ckpt_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* ---- the checkpoint reader ------------------------------------------ */

static int read_config(hid_t file, struct sw_config *c, struct sw_err *err)
{
	hid_t g;
	int rc, present;
	int64_t v;

	if (H5Lexists(file, "config", H5P_DEFAULT) <= 0)
		return sw_fail(err, SW_EDATA, "missing group /config");
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
	    (rc = h5io_get_i64(g, "/config", "head_dim", &c->head_dim, &present, err)))
		goto out;
	c->qk_norm = v != 0;
	if ((rc = h5io_get_i64(g, "/config", "norm_everywhere", &v, &present, err)))
		goto out;
	c->norm_everywhere = present && v != 0;
	if ((rc = h5io_get_i64(g, "/config", "scale_vectors", &v, &present, err)))
		goto out;
	c->scale_vectors = !present || v != 0;
	if (!arch_supported(c->arch)) {
		rc = sw_fail(err, SW_EDATA, "/config: arch '%s' is not supported (%s)",
			     c->arch, ARCH_SUPPORTED_LIST);
		goto out;
	}
	if (!present) {
		if (c->n_heads <= 0 || c->d_model % c->n_heads) {
			rc = sw_fail(err, SW_EDATA,
				     "/config: d_model is not a multiple of n_heads and head_dim is not given");
			goto out;
		}
		c->head_dim = c->d_model / c->n_heads;
	}
	rc = arch_config_check(c, err);
out:
	H5Gclose(g);
	return rc;
}

static int read_metrics(hid_t file, struct ckpt_meta *m, struct sw_err *err)
{
	hid_t g;
	int rc, present;

	m->train_loss = m->val_loss = NAN;
	if (H5Lexists(file, "metrics", H5P_DEFAULT) <= 0)
		return SW_OK;
	g = H5Gopen2(file, "metrics", H5P_DEFAULT);
	if (g < 0)
		return sw_fail(err, SW_EDATA, "/metrics is not a group");
	rc = h5io_get_f64(g, "/metrics", "train_loss", &m->train_loss, &present, err);
	if (!rc)
		rc = h5io_get_f64(g, "/metrics", "val_loss", &m->val_loss, &present, err);
	H5Gclose(g);
	return rc;
}

struct name_list {
	char **names;
	size_t n, cap;
	int failed;
};

static herr_t collect_name(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
	struct name_list *l = data;

	(void)g;
	(void)info;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		char **p = realloc(l->names, cap * sizeof *p);
		if (!p) {
			l->failed = 1;
			return -1;
		}
		l->names = p;
		l->cap = cap;
	}
	l->names[l->n] = strdup(name);
	if (!l->names[l->n]) {
		l->failed = 1;
		return -1;
	}
	l->n++;
	return 0;
}

static void free_names(struct name_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
}

/* The stored type of a dataset: float32/64/16, anything else is bad data. */
static int dataset_dtype(hid_t d, const char *name, struct sw_tensor_info *t,
			 struct sw_err *err)
{
	hid_t ft = H5Dget_type(d);
	size_t size;
	int rc = SW_OK;

	if (ft < 0)
		return sw_fail(err, SW_EDATA, "%s: cannot read its type", name);
	size = H5Tget_size(ft);
	if (H5Tget_class(ft) != H5T_FLOAT)
		rc = sw_fail(err, SW_EDATA, "%s: not a floating-point dataset", name);
	else if (size == 4)
		t->dtype = SW_DTYPE_F32;
	else if (size == 8)
		t->dtype = SW_DTYPE_F64;
	else if (size == 2)
		t->dtype = SW_DTYPE_F16;
	else
		rc = sw_fail(err, SW_EDATA, "%s: floating-point type of %zu bytes", name, size);
	if (!rc)
		snprintf(t->dtype_name, sizeof t->dtype_name, "%s",
			 t->dtype == SW_DTYPE_F32 ? "F32" : t->dtype == SW_DTYPE_F64 ? "F64" : "F16");
	H5Tclose(ft);
	return rc;
}

static int dataset_shape(hid_t d, const char *name, struct sw_tensor_info *t,
			 struct sw_err *err)
{
	hid_t s = H5Dget_space(d);
	hsize_t dims[SW_MAX_RANK];
	int rank, rc = SW_OK;

	if (s < 0)
		return sw_fail(err, SW_EDATA, "%s: cannot read its shape", name);
	if (H5Sget_simple_extent_type(s) == H5S_NULL) {
		rc = sw_fail(err, SW_EDATA, "%s: has no data space", name);
		goto out;
	}
	rank = H5Sget_simple_extent_ndims(s);
	if (rank < 0 || rank > SW_MAX_RANK) {
		rc = sw_fail(err, SW_EDATA, "%s: rank %d is not supported", name, rank);
		goto out;
	}
	H5Sget_simple_extent_dims(s, dims, NULL);
	t->rank = rank;
	for (int i = 0; i < rank; i++) {
		if (dims[i] > (hsize_t)INT64_MAX) {
			rc = sw_fail(err, SW_EDATA, "%s: dimension too large", name);
			goto out;
		}
		t->shape[i] = (int64_t)dims[i];
	}
	if (sw_shape_numel(rank, t->shape, &t->numel) < 0)
		rc = sw_fail(err, SW_EDATA, "%s: element count overflows", name);
out:
	H5Sclose(s);
	return rc;
}

/* A tensor's lr or wd: NaN when absent (unknown), else finite and
 * nonnegative, since sw-spectrum divides by sqrt(lr/wd). */
static int get_rate(hid_t d, const char *obj, const char *attr, double *v, struct sw_err *err)
{
	int rc, present;

	*v = NAN;
	if ((rc = h5io_get_f64(d, obj, attr, v, &present, err)))
		return rc;
	if (present && !(isfinite(*v) && *v >= 0))
		return sw_fail(err, SW_EDATA, "%s: %s = %g is not a finite nonnegative number",
			       obj, attr, *v);
	return SW_OK;
}

/* The metadata attributes of /params/<name>, checked against the config. */
static int read_tensor_meta(hid_t d, const char *name, const struct sw_config *c,
			    struct sw_tensor_info *t, struct sw_err *err)
{
	char s[64], obj[SW_NAME_MAX + 16];
	const struct arch_role *role;
	int64_t v;
	int rc, present;

	snprintf(obj, sizeof obj, "/params/%s", name);
	if (strlen(name) >= sizeof t->name)
		return sw_fail(err, SW_EDATA, "%s: name too long", obj);
	strcpy(t->name, name);
	if ((rc = dataset_dtype(d, obj, t, err)) || (rc = dataset_shape(d, obj, t, err)))
		return rc;

	if ((rc = h5io_get_str(d, obj, "block", s, sizeof s, NULL, err)))
		return rc;
	if (sw_block_parse(s, &t->block) < 0)
		return sw_fail(err, SW_EDATA, "%s: unknown block '%s'", obj, s);
	if ((rc = h5io_get_str(d, obj, "role", t->role, sizeof t->role, NULL, err)))
		return rc;
	if ((rc = h5io_get_i64(d, obj, "layer", &v, NULL, err)))
		return rc;
	if (v < -1 || v >= c->n_layers)
		return sw_fail(err, SW_EDATA, "%s: layer %lld is outside 0..%lld",
			       obj, (long long)v, (long long)c->n_layers - 1);
	t->layer = (int)v;
	if ((rc = h5io_get_str(d, obj, "kind", s, sizeof s, NULL, err)))
		return rc;
	if (sw_kind_parse(s, &t->kind) < 0)
		return sw_fail(err, SW_EDATA, "%s: unknown kind '%s'", obj, s);
	if (t->kind != sw_kind_of_shape(t->rank, t->shape))
		return sw_fail(err, SW_EDATA, "%s: kind '%s' disagrees with its shape",
			       obj, s);
	if ((rc = h5io_get_str(d, obj, "mup", s, sizeof s, NULL, err)))
		return rc;
	if (sw_mup_parse(s, &t->mup) < 0)
		return sw_fail(err, SW_EDATA, "%s: unknown mup class '%s'", obj, s);

	t->group = SW_GROUP_UNKNOWN;
	if ((rc = h5io_get_str(d, obj, "group", s, sizeof s, &present, err)))
		return rc;
	if (present && sw_group_parse(s, &t->group) < 0)
		return sw_fail(err, SW_EDATA, "%s: unknown group '%s'", obj, s);
	if ((rc = get_rate(d, obj, "lr", &t->lr, err)) || (rc = get_rate(d, obj, "wd", &t->wd, err)))
		return rc;
	t->wd_mode = SW_WD_UNKNOWN;
	if ((rc = h5io_get_str(d, obj, "wd_mode", s, sizeof s, &present, err)))
		return rc;
	if (present && sw_wd_mode_parse(s, &t->wd_mode) < 0)
		return sw_fail(err, SW_EDATA, "%s: unknown wd_mode '%s'", obj, s);

	role = arch_role_find(t->role);
	if (role && role->block != t->block)
		return sw_fail(err, SW_EDATA, "%s: block '%s' disagrees with role '%s' (%s)",
			       obj, sw_block_name(t->block), t->role, sw_block_name(role->block));
	if (role && (role->in_layer ? t->layer < 0 : t->layer != -1))
		return sw_fail(err, SW_EDATA, "%s: layer %d is wrong for role '%s'",
			       obj, t->layer, t->role);
	t->norm_type = SW_NORM_NONE;
	if (t->block == SW_BLOCK_NORM) {
		if ((rc = h5io_get_str(d, obj, "norm_type", s, sizeof s, NULL, err)))
			return rc;
		if (sw_norm_type_parse(s, &t->norm_type) < 0)
			return sw_fail(err, SW_EDATA, "%s: unknown norm_type '%s'", obj, s);
	}
	t->n_heads = t->head_dim = 0;
	if (!strcmp(t->role, "q") || !strcmp(t->role, "k") ||
	    !strcmp(t->role, "v") || !strcmp(t->role, "o")) {
		int64_t nh, hd;
		if ((rc = h5io_get_i64(d, obj, "n_heads", &nh, NULL, err)) ||
		    (rc = h5io_get_i64(d, obj, "head_dim", &hd, NULL, err)))
			return rc;
		if (nh <= 0 || hd <= 0 || nh > c->n_heads || hd > (int64_t)1 << 20)
			return sw_fail(err, SW_EDATA, "%s: n_heads %lld, head_dim %lld out of range",
				       obj, (long long)nh, (long long)hd);
		t->n_heads = (int)nh;
		t->head_dim = (int)hd;
	}
	rc = arch_check_shape(c, t, err);
	if (rc)
		sw_err_prefix(err, "/params");
	return rc;
}

int h5ckpt_open(struct ckpt *ck, struct sw_err *err)
{
	struct name_list names = {0};
	struct ckpt_meta *m = &ck->meta;
	char s[64], why[256];
	hid_t params = H5I_INVALID_HID, fcpl;
	int64_t version;
	int rc;

	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
	ck->h5 = H5Fopen(ck->path, H5F_ACC_RDONLY, H5P_DEFAULT);
	if (ck->h5 < 0) {
		h5io_last_error(why, sizeof why);
		return sw_fail(err, SW_EDATA, "not a readable HDF5 file (truncated or corrupt)%s%s",
			       why[0] ? ": " : "", why);
	}
	fcpl = H5Fget_create_plist(ck->h5);
	if (fcpl >= 0) {
		hsize_t ub = 0;
		H5Pget_userblock(fcpl, &ub);
		ck->h5_userblock = ub != 0;
		H5Pclose(fcpl);
	}
	rc = h5io_get_str(ck->h5, "/", "scalewatch_format", s, sizeof s, NULL, err);
	if (rc)
		return sw_fail(err, SW_EDATA, "not a scalewatch checkpoint (no scalewatch_format attribute)");
	if (strcmp(s, "checkpoint") != 0)
		return sw_fail(err, SW_EDATA, "is a scalewatch '%s', not a checkpoint", s);
	if ((rc = h5io_get_i64(ck->h5, "/", "format_version", &version, NULL, err)))
		return rc;
	if (version != 1)
		return sw_fail(err, SW_EDATA, "format_version %lld is not supported (this build reads 1)",
			       (long long)version);
	if ((rc = h5io_get_i64(ck->h5, "/", "step", &m->step, NULL, err)) ||
	    (rc = h5io_get_i64(ck->h5, "/", "tokens", &m->tokens, NULL, err)))
		return rc;
	m->has_step = 1;
	if ((rc = read_config(ck->h5, &m->config, err)) || (rc = read_metrics(ck->h5, m, err)))
		return rc;

	if (H5Lexists(ck->h5, "params", H5P_DEFAULT) <= 0)
		return sw_fail(err, SW_EDATA, "missing group /params");
	params = H5Gopen2(ck->h5, "params", H5P_DEFAULT);
	if (params < 0)
		return sw_fail(err, SW_EDATA, "/params is not a group");
	if (H5Literate(params, H5_INDEX_NAME, H5_ITER_INC, NULL, collect_name, &names) < 0) {
		rc = names.failed ? sw_fail(err, SW_ESOFTWARE, "out of memory")
				  : sw_fail(err, SW_EDATA, "cannot list /params");
		goto out;
	}
	ck->n = names.n;
	ck->info = calloc(names.n ? names.n : 1, sizeof *ck->info);
	ck->loc = calloc(names.n ? names.n : 1, sizeof *ck->loc);
	if (!ck->info || !ck->loc) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < names.n; i++) {
		hid_t obj = H5Oopen(params, names.names[i], H5P_DEFAULT);
		if (obj < 0 || H5Iget_type(obj) != H5I_DATASET) {
			if (obj >= 0)
				H5Oclose(obj);
			rc = sw_fail(err, SW_EDATA, "/params/%s is not a dataset", names.names[i]);
			goto out;
		}
		rc = read_tensor_meta(obj, names.names[i], &m->config, &ck->info[i], err);
		H5Oclose(obj);
		if (rc)
			goto out;
	}
	m->head_tied = ckpt_find_role(ck, "lm_head", -1) < 0 &&
		       ckpt_find_role(ck, "embed", -1) >= 0 && m->config.tie_embeddings;
	rc = ckpt_sort_and_check(ck, err);
out:
	free_names(&names);
	if (params >= 0)
		H5Gclose(params);
	return rc;
}

/* Contiguous, unfiltered little-endian float32 with its storage allocated
 * at a 4-byte aligned offset: then the bytes at H5Dget_offset are the
 * tensor, ready to map (HDF5 may place data at any byte offset, and a
 * float read at a misaligned address is undefined behaviour). */
static int mappable(struct ckpt *ck, hid_t d, int64_t numel, haddr_t *offset)
{
	hid_t dcpl = H5Dget_create_plist(d), ft = H5Dget_type(d);
	int ok = 0;

	if (dcpl >= 0 && ft >= 0 && !ck->h5_userblock &&
	    H5Pget_layout(dcpl) == H5D_CONTIGUOUS && H5Pget_nfilters(dcpl) == 0 &&
	    H5Pget_external_count(dcpl) == 0 && H5Tequal(ft, H5T_IEEE_F32LE) > 0) {
		*offset = H5Dget_offset(d);
		ok = *offset != HADDR_UNDEF && *offset % sizeof(float) == 0 &&
		     H5Dget_storage_size(d) == (hsize_t)numel * sizeof(float);
	}
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (ft >= 0)
		H5Tclose(ft);
	return ok;
}

int h5ckpt_load(struct ckpt *ck, size_t i, struct ckpt_view *v, struct sw_err *err)
{
	const struct sw_tensor_info *t = &ck->info[i];
	char path[SW_NAME_MAX + 16], why[256];
	haddr_t offset;
	hid_t d;
	int rc;

	snprintf(path, sizeof path, "/params/%s", t->name);
	d = H5Dopen2(ck->h5, path, H5P_DEFAULT);
	if (d < 0)
		return sw_fail(err, SW_EDATA, "%s: cannot open dataset", path);
	if (mappable(ck, d, t->numel, &offset)) {
		const void *bytes;
		rc = ckpt_map(ck->h5fd, ck->h5size, (uint64_t)offset,
			      (uint64_t)t->numel * sizeof(float), v, &bytes, err);
		if (!rc) {
			v->data = bytes;
			v->mapped = 1;
		}
	} else {
		float *buf;
		rc = ckpt_buffer(ck, t->numel, v, &buf, err);
		if (!rc && t->numel > 0 &&
		    H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
			h5io_last_error(why, sizeof why);
			rc = sw_fail(err, SW_EIO, "%s: cannot read data%s%s", path,
				     why[0] ? ": " : "", why);
		}
		if (!rc)
			v->data = buf;
	}
	if (rc && err && !strstr(err->msg, t->name))
		sw_err_prefix(err, "%s", t->name);
	H5Dclose(d);
	return rc;
}

void h5ckpt_close(struct ckpt *ck)
{
	if (ck->h5 >= 0)
		H5Fclose(ck->h5);
	ck->h5 = H5I_INVALID_HID;
	if (ck->h5fd >= 0)
		close(ck->h5fd);
	ck->h5fd = -1;
}

/* ---- the writer ----------------------------------------------------- */

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
	int rc, fd;

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
	close(fd);
	fcpl = H5Pcreate(H5P_FILE_CREATE);
	if (fcpl >= 0)
		H5Pset_obj_track_times(fcpl, 0);
	w->file = H5Fcreate(w->tmp, H5F_ACC_TRUNC, fcpl >= 0 ? fcpl : H5P_DEFAULT, H5P_DEFAULT);
	if (w->file < 0) {
		char why[256];
		int e = h5io_last_error(why, sizeof why);   /* before another call clears it */
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
	    (rc = write_attr(d, "layer", H5T_STD_I64LE, H5T_NATIVE_INT64, &layer, err)) ||
	    (rc = h5io_put_str(d, "kind", sw_kind_name(sw_kind_of_shape(t->rank, t->shape)), err)) ||
	    (rc = h5io_put_str(d, "mup", sw_mup_name(t->mup), err)))
		return rc;
	if (t->group != SW_GROUP_UNKNOWN &&
	    (rc = h5io_put_str(d, "group", sw_group_name(t->group), err)))
		return rc;
	if (t->norm_type != SW_NORM_NONE &&
	    (rc = h5io_put_str(d, "norm_type", sw_norm_type_name(t->norm_type), err)))
		return rc;
	if (t->n_heads > 0) {
		int64_t nh = t->n_heads, hd = t->head_dim;
		if ((rc = write_attr(d, "n_heads", H5T_STD_I64LE, H5T_NATIVE_INT64, &nh, err)) ||
		    (rc = write_attr(d, "head_dim", H5T_STD_I64LE, H5T_NATIVE_INT64, &hd, err)))
			return rc;
	}
	if (!isnan(t->lr) &&
	    (rc = write_attr(d, "lr", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &t->lr, err)))
		return rc;
	if (!isnan(t->wd) &&
	    (rc = write_attr(d, "wd", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &t->wd, err)))
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

/* ---- companions of /params tensors (ckpt.h) -------------------------- */

static int aux_path(const struct ckpt *ck, const char *group, size_t i, char *path, size_t len)
{
	return snprintf(path, len, "/%s/%s", group, ck->info[i].name) < (int)len ? 0 : -1;
}

int ckpt_has_aux(const struct ckpt *ck, const char *group, size_t i)
{
	char path[SW_NAME_MAX + 64];
	htri_t g;

	if (ck->meta.format != CKPT_HDF5 || i >= ck->n || aux_path(ck, group, i, path, sizeof path))
		return 0;
	g = H5Lexists(ck->h5, group, H5P_DEFAULT);
	return g > 0 && H5Lexists(ck->h5, path, H5P_DEFAULT) > 0;
}

int ckpt_load_aux(const struct ckpt *ck, const char *group, size_t i, float *out,
		  struct sw_err *err)
{
	char path[SW_NAME_MAX + 64];
	hid_t d, s;
	hssize_t n;
	int rc = SW_OK;

	if (!ckpt_has_aux(ck, group, i) || aux_path(ck, group, i, path, sizeof path))
		return sw_fail(err, SW_EDATA, "no /%s for %s", group, i < ck->n ? ck->info[i].name : "?");
	d = H5Dopen2(ck->h5, path, H5P_DEFAULT);
	if (d < 0)
		return sw_fail(err, SW_EDATA, "%s: cannot open dataset", path);
	s = H5Dget_space(d);
	n = s < 0 ? -1 : H5Sget_simple_extent_npoints(s);
	if (n != (hssize_t)ck->info[i].numel)
		rc = sw_fail(err, SW_EDATA, "%s: %lld values, its tensor has %lld", path,
			     (long long)n, (long long)ck->info[i].numel);
	else if (n > 0 && H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0)
		rc = sw_fail(err, SW_EIO, "%s: cannot read", path);
	if (s >= 0)
		H5Sclose(s);
	H5Dclose(d);
	return rc;
}

int64_t ckpt_aux_attr(const struct ckpt *ck, const char *group, size_t i, const char *attr)
{
	char path[SW_NAME_MAX + 64];
	int64_t v = -1;
	int present = 0;
	hid_t d;

	if (!ckpt_has_aux(ck, group, i) || aux_path(ck, group, i, path, sizeof path))
		return -1;
	d = H5Dopen2(ck->h5, path, H5P_DEFAULT);
	if (d < 0)
		return -1;
	if (h5io_get_i64(d, path, attr, &v, &present, NULL) || !present)
		v = -1;
	H5Dclose(d);
	return v;
}
