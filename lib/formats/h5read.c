/*
 * h5read.c - the scalewatch HDF5 checkpoint reader, a back end of ckpt.c
 * (see h5read.h).
 */
#include "h5read.h"
#include "../base/arch.h"
#include "../base/dtype.h"
#include "../base/grow.h"
#include "h5io.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct h5src {
	hid_t file;
	int fd;                 /* the same file, for mapping */
	uint64_t size;
	int userblock;          /* nonzero: offsets are not file offsets: never map */
};

static int read_metrics(hid_t file, struct ckpt_meta *m, struct sw_err *err)
{
	hid_t g;
	int rc, present;

	m->train_loss = m->val_loss = NAN;
	if ((rc = h5io_hard_path(file, "/metrics", &present, err)) || !present)
		return rc;
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
	if (SW_GROW(l->names, &l->cap, l->n + 1) < 0 || !(l->names[l->n] = strdup(name))) {
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
	return present ? attrmap_check_rate(obj, attr, *v, err) : SW_OK;
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
	t->expert = -1;
	if ((rc = h5io_get_i64(d, obj, "expert", &v, &present, err)))
		return rc;
	if (present && (v < 0 || v >= c->n_experts))
		return sw_fail(err, SW_EDATA, "%s: expert %lld is outside 0..%lld", obj, (long long)v,
			       (long long)c->n_experts - 1);
	if (present)
		t->expert = (int)v;
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
	/* a gain's; a LayerNorm's bias (block norm) has none */
	if (t->block == SW_BLOCK_NORM && (!role || role->norm_type != SW_NORM_NONE)) {
		if ((rc = h5io_get_str(d, obj, "norm_type", s, sizeof s, NULL, err)))
			return rc;
		if (sw_norm_type_parse(s, &t->norm_type) < 0)
			return sw_fail(err, SW_EDATA, "%s: unknown norm_type '%s'", obj, s);
	}
	t->n_heads = t->head_dim = 0;
	if (arch_role_heads(t->role) != ARCH_HEADS_NONE) {
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

void h5src_close(struct h5src *s)
{
	if (!s)
		return;
	if (s->file >= 0)
		H5Fclose(s->file);
	if (s->fd >= 0)
		close(s->fd);
	free(s);
}

int h5src_open(const char *path, int fd, uint64_t size, struct h5src **out,
	       struct ckpt_meta *m, struct sw_tensor_info **info_out, size_t *n_out,
	       struct sw_err *err)
{
	struct name_list names = {0};
	struct sw_tensor_info *info = NULL;
	struct h5src *s;
	struct stat st;
	char str[64], why[256];
	hid_t params = H5I_INVALID_HID, fcpl;
	int64_t version;
	int rc, exists, changed;

	*out = NULL;
	*info_out = NULL;
	*n_out = 0;
	if (!(s = calloc(1, sizeof *s))) {
		close(fd);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	s->fd = fd;
	s->size = size;
	s->file = H5I_INVALID_HID;
	h5io_reader_setup();
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = sw_fail(err, SW_ENOINPUT, "not a regular file");
		goto out;
	}
	s->size = (uint64_t)st.st_size;         /* of the file open, what is mapped */
	s->file = h5io_open_fd(path, fd, H5F_ACC_RDONLY, H5P_DEFAULT, &changed);
	if (changed) {
		rc = sw_fail(err, SW_EIO, "the file was replaced while it was opened");
		goto out;
	}
	if (s->file < 0) {
		h5io_last_error(why, sizeof why);
		rc = sw_fail(err, SW_EDATA, "not a readable HDF5 file (truncated or corrupt)%s%s",
			     why[0] ? ": " : "", why);
		goto out;
	}
	fcpl = H5Fget_create_plist(s->file);
	if (fcpl >= 0) {
		hsize_t ub = 0;
		H5Pget_userblock(fcpl, &ub);
		s->userblock = ub != 0;
		H5Pclose(fcpl);
	}
	m->format = CKPT_HDF5;
	/* every matrix [out, in], fused ones as their parts, each gain as applied */
	m->source = FAMILY_FROM_SW;
	rc = h5io_get_str(s->file, "/", "scalewatch_format", str, sizeof str, NULL, err);
	if (rc) {
		rc = sw_fail(err, SW_EDATA, "not a scalewatch checkpoint (no scalewatch_format attribute)");
		goto out;
	}
	if (strcmp(str, "checkpoint") != 0) {
		rc = sw_fail(err, SW_EDATA, "is a scalewatch '%s', not a checkpoint", str);
		goto out;
	}
	if ((rc = h5io_get_i64(s->file, "/", "format_version", &version, NULL, err)))
		goto out;
	if (version != 1) {
		rc = sw_fail(err, SW_EDATA, "format_version %lld is not supported (this build reads 1)",
			     (long long)version);
		goto out;
	}
	if ((rc = h5io_get_i64(s->file, "/", "step", &m->step, NULL, err)) ||
	    (rc = h5io_get_i64(s->file, "/", "tokens", &m->tokens, NULL, err)))
		goto out;
	m->has_step = 1;
	if ((rc = h5io_read_config(s->file, &m->config, NULL, err)) || (rc = read_metrics(s->file, m, err)))
		goto out;

	if ((rc = h5io_hard_path(s->file, "/params", &exists, err)))
		goto out;
	if (!exists) {
		rc = sw_fail(err, SW_EDATA, "missing group /params");
		goto out;
	}
	params = H5Gopen2(s->file, "params", H5P_DEFAULT);
	if (params < 0) {
		rc = sw_fail(err, SW_EDATA, "/params is not a group");
		goto out;
	}
	if (H5Literate(params, H5_INDEX_NAME, H5_ITER_INC, NULL, collect_name, &names) < 0) {
		rc = names.failed ? sw_fail(err, SW_ESOFTWARE, "out of memory")
				  : sw_fail(err, SW_EDATA, "cannot list /params");
		goto out;
	}
	info = calloc(names.n ? names.n : 1, sizeof *info);
	if (!info) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < names.n; i++) {
		char where[SW_NAME_MAX + 16];
		hid_t obj;

		/* a link is looked at before it is followed */
		snprintf(where, sizeof where, "/params/%s", names.names[i]);
		if ((rc = h5io_hard_path(s->file, where, NULL, err)))
			goto out;
		obj = H5Oopen(params, names.names[i], H5P_DEFAULT);
		if (obj < 0 || H5Iget_type(obj) != H5I_DATASET) {
			if (obj >= 0)
				H5Oclose(obj);
			rc = sw_fail(err, SW_EDATA, "/params/%s is not a dataset", names.names[i]);
			goto out;
		}
		/* the data inside this file and written, before any tool
		 * lists, maps or allocates for it */
		rc = h5io_check_dataset(obj, where, err);
		if (!rc)
			rc = read_tensor_meta(obj, names.names[i], &m->config, &info[i], err);
		H5Oclose(obj);
		if (rc)
			goto out;
	}
	*info_out = info;
	*n_out = names.n;
	info = NULL;
	*out = s;
	s = NULL;
out:
	free_names(&names);
	free(info);
	if (params >= 0)
		H5Gclose(params);
	h5src_close(s);
	return rc;
}

/* Contiguous, unfiltered little-endian float32 with its storage allocated
 * at a 4-byte aligned offset: then the bytes at H5Dget_offset are the
 * tensor, ready to map (HDF5 may place data at any byte offset, and a
 * float read at a misaligned address is undefined behaviour). */
static int mappable(const struct h5src *s, hid_t d, int64_t numel, haddr_t *offset)
{
	hid_t dcpl = H5Dget_create_plist(d), ft = H5Dget_type(d);
	int ok = 0;

	if (dcpl >= 0 && ft >= 0 && !s->userblock &&
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

/* An F64 dataset read as double and narrowed by dtype.c, which refuses a
 * value float32 cannot hold (HDF5's own conversion gives Inf or 0). */
static int read_f64(hid_t d, const char *path, int64_t numel, float *out, struct sw_err *err)
{
	double *tmp = malloc((size_t)numel * sizeof *tmp);
	char why[256];
	int rc;

	if (!tmp)
		return sw_fail(err, SW_ESOFTWARE, "out of memory for a tensor of %lld elements",
			       (long long)numel);
	if (H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, tmp) < 0) {
		h5io_last_error(why, sizeof why);
		rc = sw_fail(err, SW_EIO, "%s: cannot read data%s%s", path, why[0] ? ": " : "", why);
	} else {
		rc = sw_to_f32(SW_DTYPE_F64, tmp, out, (size_t)numel, err);
	}
	free(tmp);
	return rc;
}

int h5src_load(struct h5src *s, const struct sw_tensor_info *t, struct ckpt_scratch *scratch,
	       struct ckpt_view *v, struct sw_err *err)
{
	char path[SW_NAME_MAX + 16], why[256];
	haddr_t offset;
	hid_t d;
	int rc;

	snprintf(path, sizeof path, "/params/%s", t->name);
	d = H5Dopen2(s->file, path, H5P_DEFAULT);
	if (d < 0)
		return sw_fail(err, SW_EDATA, "%s: cannot open dataset", path);
	if (mappable(s, d, t->numel, &offset)) {
		const void *bytes;
		rc = ckptsrc_map(s->fd, s->size, (uint64_t)offset,
				 (uint64_t)t->numel * sizeof(float), v, &bytes, err);
		if (!rc) {
			v->data = bytes;
			v->mapped = 1;
		}
	} else {
		float *buf;
		rc = ckptsrc_buffer(scratch, t->numel, v, &buf, err);
		if (!rc && t->numel > 0 && t->dtype == SW_DTYPE_F64)
			rc = read_f64(d, path, t->numel, buf, err);
		else if (!rc && t->numel > 0 &&
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

/* ---- companions of /params tensors ----------------------------------- */

static int aux_path(const char *group, const char *name, char *path, size_t len)
{
	return snprintf(path, len, "/%s/%s", group, name) < (int)len ? 0 : -1;
}

int h5src_has_aux(const struct h5src *s, const char *group, const char *name)
{
	char path[SW_NAME_MAX + 64];
	int exists;

	if (aux_path(group, name, path, sizeof path))
		return 0;
	/* a link that is no hard link is there: loading it says why not */
	return h5io_hard_path(s->file, path, &exists, NULL) != SW_OK || exists;
}

int h5src_load_aux(const struct h5src *s, const char *group, const struct sw_tensor_info *t,
		   float *out, struct sw_err *err)
{
	char path[SW_NAME_MAX + 64];
	hid_t d, sp;
	hssize_t n;
	int rc = SW_OK;

	if (!h5src_has_aux(s, group, t->name) || aux_path(group, t->name, path, sizeof path))
		return sw_fail(err, SW_EDATA, "no /%s for %s", group, t->name);
	if ((rc = h5io_hard_path(s->file, path, NULL, err)))
		return rc;
	d = H5Dopen2(s->file, path, H5P_DEFAULT);
	if (d < 0)
		return sw_fail(err, SW_EDATA, "%s: cannot open dataset", path);
	sp = H5Dget_space(d);
	n = sp < 0 ? -1 : H5Sget_simple_extent_npoints(sp);
	if (n != (hssize_t)t->numel)
		rc = sw_fail(err, SW_EDATA, "%s: %lld values, its tensor has %lld", path,
			     (long long)n, (long long)t->numel);
	else if ((rc = h5io_check_dataset(d, path, err)) == SW_OK && n > 0 &&
		 H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0)
		rc = sw_fail(err, SW_EIO, "%s: cannot read", path);
	if (sp >= 0)
		H5Sclose(sp);
	H5Dclose(d);
	return rc;
}

int64_t h5src_aux_attr(const struct h5src *s, const char *group, const char *name,
		       const char *attr)
{
	char path[SW_NAME_MAX + 64];
	int64_t v = -1;
	int present = 0;
	hid_t d;

	if (!h5src_has_aux(s, group, name) || aux_path(group, name, path, sizeof path) ||
	    h5io_hard_path(s->file, path, NULL, NULL))
		return -1;
	d = H5Dopen2(s->file, path, H5P_DEFAULT);
	if (d < 0)
		return -1;
	if (h5io_get_i64(d, path, attr, &v, &present, NULL) || !present)
		v = -1;
	H5Dclose(d);
	return v;
}

/* ---- every attribute, as scalewatch-format(5) keys ------------------- */

struct attr_walk {
	struct attr_map *map;
	const char *obj;
	int rc;
	struct sw_err *err;
};

/* One scalar attribute into the map, typed (attrmap_encode). */
static herr_t collect_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
	struct attr_walk *w = data;
	char key[SW_NAME_MAX + 128], text[1100], str[1024];
	struct attr_value v = {0};
	H5T_class_t cls = H5T_NO_CLASS;
	hssize_t npoints = -1;
	hid_t a, t, sp;

	(void)info;
	/* the format's own marks are the writer's; names with dots do not fit a key */
	if ((!strcmp(w->obj, "/") && (!strcmp(name, "scalewatch_format") ||
				      !strcmp(name, "format_version"))) || strchr(name, '.'))
		return 0;
	if ((a = H5Aopen(loc, name, H5P_DEFAULT)) < 0) {
		w->rc = sw_fail(w->err, SW_EDATA, "%s: cannot open attribute '%s'", w->obj, name);
		return -1;
	}
	if ((t = H5Aget_type(a)) >= 0) {
		cls = H5Tget_class(t);
		H5Tclose(t);
	}
	if ((sp = H5Aget_space(a)) >= 0) {
		npoints = H5Sget_simple_extent_npoints(sp);
		H5Sclose(sp);
	}
	H5Aclose(a);
	if (npoints != 1)
		return 0;       /* arrays are no scalewatch attribute */
	if (cls == H5T_STRING) {
		v.type = ATTR_STR;
		v.s = str;
		w->rc = h5io_get_str(loc, w->obj, name, str, sizeof str, NULL, w->err);
	} else if (cls == H5T_INTEGER || cls == H5T_ENUM) {
		v.type = ATTR_INT;
		w->rc = h5io_get_i64(loc, w->obj, name, &v.i, NULL, w->err);
	} else if (cls == H5T_FLOAT) {
		v.type = ATTR_REAL;
		w->rc = h5io_get_f64(loc, w->obj, name, &v.d, NULL, w->err);
	} else {
		return 0;
	}
	if (!w->rc && (attrmap_key(w->obj, name, key, sizeof key) < 0 ||
		       attrmap_encode(&v, text, sizeof text) < 0))
		w->rc = sw_fail(w->err, SW_EDATA, "%s: attribute '%s' is too long to carry",
				w->obj, name);
	if (!w->rc)
		w->rc = attrmap_set(w->map, key, text, w->err);
	return w->rc ? -1 : 0;
}

/* The attributes of object obj into map (none if the object is absent). */
static int collect_attrs(hid_t file, const char *obj, struct attr_map *map, struct sw_err *err)
{
	struct attr_walk w = {map, obj, SW_OK, err};
	hsize_t idx = 0;
	int exists = 1;

	if (strcmp(obj, "/") && ((w.rc = h5io_hard_path(file, obj, &exists, err)) || !exists))
		return w.rc;
	if (H5Aiterate_by_name(file, obj, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_attr, &w,
			       H5P_DEFAULT) < 0 && !w.rc)
		w.rc = sw_fail(err, SW_EDATA, "%s: cannot list its attributes", obj);
	return w.rc;
}

int h5src_attrs(const struct h5src *s, const struct sw_tensor_info *t, size_t n,
		struct attr_map *map, struct sw_err *err)
{
	static const char *const groups[] = {"/", "/config", "/optim", "/metrics", "/optim_state"};
	char obj[SW_NAME_MAX + 16];
	int rc;

	for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
		if ((rc = collect_attrs(s->file, groups[g], map, err)))
			return rc;
	for (size_t i = 0; i < n; i++) {
		snprintf(obj, sizeof obj, "/params/%s", t[i].name);
		if ((rc = collect_attrs(s->file, obj, map, err)))
			return rc;
	}
	return SW_OK;
}

/* ---- the format entry (ckptsrc.h) ---------------------------------------- */

static int h5_open(const char *path, int fd, uint64_t size, void **src, struct ckpt_meta *m,
		   struct sw_tensor_info **info, size_t *n, struct sw_err *err)
{
	return h5src_open(path, fd, size, (struct h5src **)src, m, info, n, err);
}

static int h5_load(void *src, size_t k, const struct sw_tensor_info *t,
		   struct ckpt_scratch *scratch, struct ckpt_view *v, struct sw_err *err)
{
	(void)k;        /* HDF5 finds a tensor by its name */
	return h5src_load(src, t, scratch, v, err);
}

static int h5_attrs(void *src, const struct sw_tensor_info *info, size_t n,
		    struct attr_map *scratch, const struct attr_map **out, struct sw_err *err)
{
	*out = scratch;
	return h5src_attrs(src, info, n, scratch, err);
}

static void h5_close(void *src) { h5src_close(src); }

static int h5_has_aux(const void *src, const char *group, const char *name)
{
	return h5src_has_aux(src, group, name);
}

static int h5_load_aux(const void *src, const char *group, const struct sw_tensor_info *t,
		       float *out, struct sw_err *err)
{
	return h5src_load_aux(src, group, t, out, err);
}

static int64_t h5_aux_attr(const void *src, const char *group, const char *name, const char *attr)
{
	return h5src_aux_attr(src, group, name, attr);
}

const struct ckpt_format_ops h5src_format = {
	.name = "an HDF5 file",
	.sniff = ckptsrc_sniff_hdf5,
	.open = h5_open,
	.load = h5_load,
	.attrs = h5_attrs,
	.close = h5_close,
	.has_aux = h5_has_aux,
	.load_aux = h5_load_aux,
	.aux_attr = h5_aux_attr,
};
