/*
 * fuzz-h5ckpt - the scalewatch HDF5 checkpoint reader (ckpt_open and
 * ckpt_load through lib/formats/h5io.c: the attribute validator). libhdf5 1.10
 * itself crashes on byte-corrupted files, so the input is not the file but
 * a program of edits, applied through the HDF5 API to a copy of a valid
 * checkpoint (fixtures/bad/base.h5, or $SW_FUZZ_BASE): delete, change or
 * retype an attribute of any object (strings fixed and variable, integers,
 * floats with NaN and Inf, unsigned and narrow types, h5py's booleans,
 * arrays, null data spaces), so also /config's values; replace a tensor by
 * one of another shape, type or layout (transposed, a dimension off by
 * one, 0-d, empty, float64, float16, big-endian, integer, chunked and
 * deflated, never written, chunked and partly written, its data in an
 * external raw file, a virtual dataset of another file or of a missing
 * one); NaN and Inf values; a dataset where a group is expected and a
 * group where a dataset is; remove, rename, link twice, dangling soft
 * links, external links (to another checkpoint, or a missing file) for
 * any object; and the whole file behind a userblock of the input's bytes.
 *
 * The files outside (outside.h5, a copy of the checkpoint whose tensors
 * all hold OUTSIDE; outside.raw, OUTSIDE over and over) and every fill
 * value hold OUTSIDE, a value no edit writes: what comes from outside the
 * file or was never written can be told from the data.
 *
 * Beyond "no crash", the reader must then refuse with SW_EDATA (SW_EIO
 * from a load) and a message, or accept with metadata consistent with
 * itself: a config that arch_config_check accepts (finite norm_eps and
 * rope_theta, as from config.json), every tensor of rank
 * <= SW_MAX_RANK with numel the product of its shape, its kind what its
 * shape says, its layer inside the stack, its block the one its known
 * role has and its shape the one the config gives it, no known role twice
 * in a layer, lr and wd unknown or finite and nonnegative, a tied head
 * only without lm_head, every tensor loadable to exactly numel float32
 * values and those exactly what HDF5 itself reads from this file (mapped
 * or not, userblock or not), none of them OUTSIDE; and no HDF5 handle
 * left open after ckpt_close. A file with a soft or external link where
 * the reader looks (/config, /metrics, /params and its members; /optim
 * and /optim_state for ckpt_attrs), or a /params dataset that is virtual
 * or stored outside, must be refused. The unedited file (empty input)
 * must be accepted.
 */
#include <fcntl.h>
#include <hdf5.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "../../lib/base/arch.h"
#include "../../lib/base/family.h"
#include "../../lib/formats/ckpt.h"
#include "../lib/h5copy.h"
#include "fuzz.h"

enum { MAX_DS = 64, MAX_OPS = 12, RAW_FLOATS = 1 << 16 };

/* In the outside files and every fill value; never written by an edit
 * (those write the base's values, (i % 7) / 4 - 1/2, NaN, Inf, 3e38,
 * -0, 1e-45). */
#define OUTSIDE 1234.5f

static unsigned char *base, *outside;   /* the files' bytes, written anew for each input */
static size_t base_len, outside_len;
static char path[4096], outside_h5[4096], outside_raw[4096], rebuilt[4096];

static const char *const groups[] = {"/", "/config", "/metrics", "/optim", "/params"};
static const char *const attrs[] = {
	"scalewatch_format", "format_version", "step", "tokens", "arch", "vocab_size",
	"d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "seq_len", "rope_theta",
	"norm_eps", "tie_embeddings", "qk_norm", "multipliers", "head_dim",
	"norm_everywhere", "scale_vectors", "train_loss", "val_loss", "block", "role",
	"layer", "kind", "mup", "group", "lr", "wd", "wd_mode", "norm_type",
};
static const char *const strs[] = {
	"checkpoint", "trace", "llama", "qwen3", "mistral", "gpt2", "matrix", "vector",
	"scalar", "emb", "qk", "vo", "ffn", "norm", "out", "mult", "other", "q", "k", "v",
	"o", "gate", "up", "down", "attn_norm", "ffn_norm", "final_norm", "q_norm",
	"k_norm", "embed", "lm_head", "q_mult", "vector-like", "matrix-like", "input",
	"hidden", "output", "coupled", "independent", "none", "row", "col", "",
};
static const char *const names[] = {
	"model.embed_tokens.weight", "lm_head.weight", "model.norm.weight",
	"model.layers.0.self_attn.q_proj.weight", "model.layers.1.mlp.up_proj.weight",
	"model.layers.0.self_attn.q_norm.weight", "x", "",
};
static const int64_t ints[] = {
	0, 1, -1, 2, 3, 4, 6, 8, 16, -2, 1000, INT64_MAX, INT64_MIN, INT32_MAX,
	(int64_t)1 << 31, (int64_t)1 << 40,
};

#define COUNT(a) (sizeof (a) / sizeof (a)[0])

struct in {
	const uint8_t *p;
	size_t n;
};

static unsigned take(struct in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

static uint64_t take64(struct in *in)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)take(in) << (8 * i);
	return v;
}

static double take_double(struct in *in)
{
	static const double d[] = {0, 1, -1, 0.5, 1e-6, 1e300, 9.1e15, 4, 2.5, -0.0};
	unsigned k = take(in);
	uint64_t raw;
	double v;

	if (k == 0)
		return NAN;
	if (k == 1)
		return INFINITY;
	if (k == 2)
		return -INFINITY;
	if (k < 0x80)
		return d[k % COUNT(d)];
	raw = take64(in);
	memcpy(&v, &raw, sizeof v);
	return v;
}

/* A string from the table, or up to 299 bytes of the input (a NUL ends it). */
static void take_str(struct in *in, const char *const *table, size_t n, char *buf)
{
	unsigned k = take(in);

	if (k < 0xc0) {
		strcpy(buf, table[k % n]);
		return;
	}
	k = take(in) + (k & 1 ? 44 : 0);
	for (unsigned i = 0; i < k; i++)
		buf[i] = (char)take(in);
	buf[k] = '\0';
}

struct dsl {
	char name[MAX_DS][320];
	size_t n;
};

static herr_t add_name(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
	struct dsl *l = data;

	(void)g;
	(void)info;
	if (l->n < MAX_DS && strlen(name) < sizeof l->name[0])
		strcpy(l->name[l->n++], name);
	return 0;
}

/* The path of a /params member picked by the input; NULL if none. */
static const char *pick_param(hid_t file, struct in *in, char *buf)
{
	struct dsl l = {.n = 0};
	hid_t g = H5Gopen2(file, "/params", H5P_DEFAULT);
	unsigned k = take(in);

	if (g < 0)
		return NULL;
	H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, NULL, add_name, &l);
	H5Gclose(g);
	if (!l.n)
		return NULL;
	snprintf(buf, 400, "/params/%s", l.name[k % l.n]);
	return buf;
}

/* Any object: a group or a tensor. */
static const char *pick_object(hid_t file, struct in *in, char *buf)
{
	unsigned k = take(in);

	if (k < 0x80)
		return groups[k % COUNT(groups)];
	return pick_param(file, in, buf);
}

/* Attribute name of obj, stored as ftype, now val (memory type mtype). */
static void put_attr(hid_t file, const char *obj, const char *name, hid_t ftype, hid_t mtype,
		     hid_t space, const void *val)
{
	hid_t o = H5Oopen(file, obj, H5P_DEFAULT), a;

	if (o < 0)
		return;
	if (H5Aexists(o, name) > 0)
		H5Adelete(o, name);
	a = H5Acreate2(o, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
	if (a >= 0) {
		if (val)
			H5Awrite(a, mtype, val);
		H5Aclose(a);
	}
	H5Oclose(o);
}

static void op_attr(hid_t file, struct in *in, unsigned how)
{
	char buf[400], name[400], s[400];
	const char *obj = pick_object(file, in, buf);
	hid_t type = H5I_INVALID_HID, space = H5Screate(H5S_SCALAR);
	int64_t i64;
	double f64;

	take_str(in, attrs, COUNT(attrs), name);
	if (!obj || space < 0)
		goto out;
	switch (how) {
	case 0: {               /* delete */
		hid_t o = H5Oopen(file, obj, H5P_DEFAULT);
		if (o >= 0) {
			H5Adelete(o, name);
			H5Oclose(o);
		}
		break;
	}
	case 1: {               /* int64, or unsigned, narrow, big-endian float32 */
		signed char c;
		float f;
		i64 = take(in) < 0x80 ? ints[take(in) % COUNT(ints)] : (int64_t)take64(in);
		c = (signed char)i64;
		f = (float)i64;
		switch (take(in) % 4) {
		case 0: put_attr(file, obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, space, &i64); break;
		case 1: put_attr(file, obj, name, H5T_STD_U64BE, H5T_NATIVE_INT64, space, &i64); break;
		case 2: put_attr(file, obj, name, H5T_STD_I8LE, H5T_NATIVE_SCHAR, space, &c); break;
		default: put_attr(file, obj, name, H5T_IEEE_F32BE, H5T_NATIVE_FLOAT, space, &f); break;
		}
		break;
	}
	case 2:                 /* float64, NaN and Inf included */
		f64 = take_double(in);
		put_attr(file, obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, space, &f64);
		break;
	case 3:                 /* fixed-length string */
		take_str(in, strs, COUNT(strs), s);
		type = H5Tcopy(H5T_C_S1);
		if (type >= 0 && H5Tset_size(type, strlen(s) + (take(in) & 1) + (s[0] ? 0 : 1)) >= 0)
			put_attr(file, obj, name, type, type, space, s);
		break;
	case 4: {               /* variable-length string */
		const char *p = s;
		take_str(in, strs, COUNT(strs), s);
		type = H5Tcopy(H5T_C_S1);
		if (type >= 0 && H5Tset_size(type, H5T_VARIABLE) >= 0)
			put_attr(file, obj, name, type, type, space, &p);
		break;
	}
	case 5: {               /* two values where one is expected, or none */
		hsize_t dims[1] = {take(in) % 3};
		int64_t v[2] = {1, 2};
		hid_t s2 = H5Screate_simple(1, dims, NULL);
		if (s2 >= 0) {
			put_attr(file, obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, s2, v);
			H5Sclose(s2);
		}
		break;
	}
	case 6: {               /* h5py's bool: an enum over int8 */
		signed char c = (signed char)take(in), f = 0, t = 1;
		type = H5Tenum_create(H5T_NATIVE_SCHAR);
		if (type >= 0 && H5Tenum_insert(type, "FALSE", &f) >= 0 &&
		    H5Tenum_insert(type, "TRUE", &t) >= 0)
			put_attr(file, obj, name, type, type, space, &c);
		break;
	}
	default: {              /* a null data space */
		hid_t s0 = H5Screate(H5S_NULL);
		if (s0 >= 0) {
			put_attr(file, obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, s0, NULL);
			H5Sclose(s0);
		}
	}
	}
out:
	if (type >= 0)
		H5Tclose(type);
	if (space >= 0)
		H5Sclose(space);
}

static hid_t float16_type(void)
{
	hid_t t = H5Tcopy(H5T_IEEE_F32LE);

	if (t >= 0 && (H5Tset_fields(t, 15, 10, 5, 0, 10) < 0 || H5Tset_size(t, 2) < 0 ||
		       H5Tset_ebias(t, 15) < 0)) {
		H5Tclose(t);
		return H5I_INVALID_HID;
	}
	return t;
}

/* Is dataset d a virtual dataset? */
static int is_virtual(hid_t d)
{
	hid_t dcpl = H5Dget_create_plist(d);
	int v = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_VIRTUAL;

	if (dcpl >= 0)
		H5Pclose(dcpl);
	return v;
}

/* Replace a tensor by one of another shape, type or layout, with its
 * attributes; poke: also put a NaN, Inf or huge value into it. */
static void op_replace(hid_t file, struct in *in, int poke)
{
	char buf[400], tmp[420];
	const char *obj = pick_param(file, in, buf);
	hid_t old = H5I_INVALID_HID, space = H5I_INVALID_HID, type = H5I_INVALID_HID;
	hid_t dcpl = H5I_INVALID_HID, d = H5I_INVALID_HID, os;
	hsize_t dims[4] = {0}, od[4] = {0}, n = 1;
	unsigned mode = 0, ty = 0;
	int rank = 0, orank = 0;
	float *v = NULL;

	if (!poke) {
		mode = take(in) % 6;
		ty = take(in) % 12;
	}
	if (!obj || (old = H5Dopen2(file, obj, H5P_DEFAULT)) < 0)
		return;
	os = H5Dget_space(old);
	orank = os < 0 ? -1 : H5Sget_simple_extent_ndims(os);
	if (orank >= 0 && orank <= 4)
		H5Sget_simple_extent_dims(os, od, NULL);
	if (os >= 0)
		H5Sclose(os);
	if (orank < 0 || orank > 4)
		goto out;
	rank = orank;
	memcpy(dims, od, sizeof dims);
	switch (mode) {
	case 1:                 /* transposed */
		for (int i = 0; i < rank; i++)
			dims[i] = od[rank - 1 - i];
		break;
	case 2:                 /* one dimension off by one */
		if (rank)
			dims[take(in) % rank] += take(in) & 1 ? 1 : (hsize_t)-1;
		break;
	case 3:                 /* flattened, or 0-d */
		rank = take(in) & 1;
		for (int i = 0; i < orank; i++)
			dims[0] = (i ? dims[0] : 1) * od[i];
		break;
	case 4:                 /* any shape up to 3-d, small or empty dims */
		rank = take(in) % 4;
		for (int i = 0; i < rank; i++)
			dims[i] = take(in) % 10;
		break;
	default:
		break;
	}
	for (int i = 0; i < rank; i++) {
		if (dims[i] > 64)
			goto out;
		n *= dims[i];
	}
	switch (ty) {
	case 1: type = H5Tcopy(H5T_IEEE_F64LE); break;
	case 2: type = float16_type(); break;
	case 3: type = H5Tcopy(H5T_IEEE_F32BE); break;
	case 4: type = H5Tcopy(H5T_STD_I32LE); break;
	default: type = H5Tcopy(H5T_IEEE_F32LE); break;
	}
	space = rank ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	if (type < 0 || space < 0 || dcpl < 0 ||
	    H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &(float){OUTSIDE}) < 0)
		goto out;
	if ((ty == 5 || ty == 11) && rank > 0 && n > 0) {
		/* 5: chunked and deflated; 11: chunked, a chunk per row,
		 * only the first row written */
		hsize_t chunk[4] = {1, 1, 1, 1};
		chunk[0] = ty == 5 ? dims[0] : 1;
		for (int i = 1; ty == 11 && i < rank; i++)
			chunk[i] = dims[i] ? dims[i] : 1;
		if (H5Pset_chunk(dcpl, rank, chunk) < 0 || (ty == 5 && H5Pset_deflate(dcpl, 1) < 0))
			goto out;
	}
	if (ty == 8 && H5Pset_external(dcpl, outside_raw, (off_t)(take(in) * 4),
				       n * H5Tget_size(type)) < 0)
		goto out;               /* stored in outside.raw */
	if ((ty == 9 || ty == 10) &&  /* a virtual dataset of outside.h5, or of a missing file */
	    H5Pset_virtual(dcpl, space, ty == 9 ? outside_h5 : "missing.h5", obj, space) < 0)
		goto out;
	snprintf(tmp, sizeof tmp, "%s.fuzz-new", obj);
	d = H5Dcreate2(file, tmp, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
	if (d < 0)
		goto out;
	h5copy_attrs(old, d);
	v = malloc((n ? n : 1) * sizeof *v);
	if (!v)
		goto out;
	for (hsize_t i = 0; i < n; i++)
		v[i] = (float)(i % 7) * 0.25f - 0.5f;
	/* the old values, unless the old tensor is itself virtual (an earlier
	 * edit's): libhdf5 1.10 recurses without end reading a virtual dataset
	 * whose source it resolves to itself (a stack overflow in H5D__read,
	 * found by this target); the synthetic values above stand instead */
	if (!mode && n && !is_virtual(old) &&
	    H5Dread(old, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
		goto out;
	/* what was read from outside (or a fill value) is not written here:
	 * OUTSIDE in the file stays the mark of data never its own */
	for (hsize_t i = 0; i < n; i++)
		if (v[i] == OUTSIDE)
			v[i] = 0.75f;
	if (poke && n) {
		static const float bad[] = {NAN, INFINITY, -INFINITY, 3e38f, -0.0f, 1e-45f};
		v[take(in) % n] = bad[take(in) % COUNT(bad)];
	}
	if (ty == 11 && n && rank > 0) {        /* the first row only */
		hsize_t start[4] = {0, 0, 0, 0}, count[4];
		hid_t fs = H5Dget_space(d), ms;
		memcpy(count, dims, sizeof count);
		count[0] = 1;
		ms = H5Screate_simple(rank, count, NULL);
		if (fs >= 0 && ms >= 0 &&
		    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) >= 0)
			H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, v);
		if (ms >= 0)
			H5Sclose(ms);
		if (fs >= 0)
			H5Sclose(fs);
	} else if (ty != 6 && ty != 8 && ty != 9 && ty != 10 && n) {
		/* 6: never written, storage not allocated; 8-10: data outside */
		H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
	}
	H5Dclose(d);
	d = H5I_INVALID_HID;
	H5Dclose(old);
	old = H5I_INVALID_HID;
	if (H5Ldelete(file, obj, H5P_DEFAULT) >= 0)
		H5Lmove(file, tmp, file, obj, H5P_DEFAULT, H5P_DEFAULT);
out:
	free(v);
	if (d >= 0)
		H5Dclose(d);
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (space >= 0)
		H5Sclose(space);
	if (type >= 0)
		H5Tclose(type);
	if (old >= 0)
		H5Dclose(old);
}

/* Links: a dataset for a group, a group for a dataset, removed, renamed,
 * linked twice, a dangling or misdirected soft link. */
static void op_link(hid_t file, struct in *in, unsigned how)
{
	char buf[400], name[400], to[720];
	const char *obj = how == 0 ? groups[1 + take(in) % (COUNT(groups) - 1)] : pick_object(file, in, buf);
	hid_t x;

	take_str(in, names, COUNT(names), name);
	snprintf(to, sizeof to, "/params/%s", name);
	if (!obj || !strcmp(obj, "/"))
		return;
	switch (how) {
	case 0:                 /* a dataset where a group is expected */
	case 1: {               /* a group where a tensor is */
		hid_t s = H5Screate(H5S_SCALAR);
		if (H5Ldelete(file, obj, H5P_DEFAULT) >= 0 && s >= 0) {
			x = how ? H5Gcreate2(file, obj, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)
				: H5Dcreate2(file, obj, H5T_IEEE_F32LE, s, H5P_DEFAULT, H5P_DEFAULT,
					     H5P_DEFAULT);
			if (x >= 0)
				H5Oclose(x);
		}
		if (s >= 0)
			H5Sclose(s);
		break;
	}
	case 2:
		H5Ldelete(file, obj, H5P_DEFAULT);
		break;
	case 3:
		H5Lmove(file, obj, file, to, H5P_DEFAULT, H5P_DEFAULT);
		break;
	case 4:
		H5Lcreate_hard(file, obj, file, to, H5P_DEFAULT, H5P_DEFAULT);
		break;
	case 5:
		H5Lcreate_soft(take(in) & 1 ? obj : "/nowhere", file, to, H5P_DEFAULT, H5P_DEFAULT);
		break;
	default:                /* the object an external link to its twin in outside.h5 */
		if (H5Ldelete(file, obj, H5P_DEFAULT) >= 0)
			H5Lcreate_external(take(in) & 1 ? outside_h5 : "missing.h5", obj, file, obj,
					   H5P_DEFAULT, H5P_DEFAULT);
		break;
	}
}

/* The file's root members and attributes copied into a new file with a
 * userblock of 512 << (k % 3) bytes of the input, put in its place. */
static void with_userblock(struct in *in, unsigned k)
{
	hsize_t ub = (hsize_t)512 << (k % 3);
	hid_t fcpl = H5Pcreate(H5P_FILE_CREATE), src, dst, sroot, droot;
	unsigned char *bytes = calloc(1, (size_t)ub);
	H5G_info_t gi;
	char name[400];
	FILE *f;

	FUZZ_ASSERT(fcpl >= 0 && bytes && H5Pset_userblock(fcpl, ub) >= 0);
	for (hsize_t i = 0; i < ub && in->n; i++)
		bytes[i] = (unsigned char)take(in);
	src = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
	dst = H5Fcreate(rebuilt, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
	FUZZ_ASSERT(src >= 0 && dst >= 0);
	sroot = H5Gopen2(src, "/", H5P_DEFAULT);
	droot = H5Gopen2(dst, "/", H5P_DEFAULT);
	FUZZ_ASSERT(sroot >= 0 && droot >= 0 && H5Gget_info(sroot, &gi) >= 0);
	for (hsize_t i = 0; i < gi.nlinks; i++) {
		H5L_info_t li;
		char val[1024];
		const char *file, *obj;
		unsigned flags;

		if (H5Lget_name_by_idx(src, "/", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name,
				       H5P_DEFAULT) <= 0 || H5Lget_info(src, name, &li, H5P_DEFAULT) < 0)
			continue;
		/* a link stays the link it is (H5Ocopy would copy what it leads to) */
		if (li.type == H5L_TYPE_HARD)
			H5Ocopy(src, name, dst, name, H5P_DEFAULT, H5P_DEFAULT);
		else if (li.u.val_size <= sizeof val &&
			 H5Lget_val(src, name, val, sizeof val, H5P_DEFAULT) >= 0) {
			if (li.type == H5L_TYPE_SOFT)
				H5Lcreate_soft(val, dst, name, H5P_DEFAULT, H5P_DEFAULT);
			else if (li.type == H5L_TYPE_EXTERNAL &&
				 H5Lunpack_elink_val(val, li.u.val_size, &flags, &file, &obj) >= 0)
				H5Lcreate_external(file, obj, dst, name, H5P_DEFAULT, H5P_DEFAULT);
		}
	}
	h5copy_attrs(sroot, droot);
	H5Gclose(droot);
	H5Gclose(sroot);
	FUZZ_ASSERT(H5Fclose(dst) >= 0 && H5Fclose(src) >= 0);
	H5Pclose(fcpl);
	f = fopen(rebuilt, "r+b");
	FUZZ_ASSERT(f && fwrite(bytes, 1, (size_t)ub, f) == (size_t)ub && fclose(f) == 0);
	FUZZ_ASSERT(rename(rebuilt, path) == 0);
	free(bytes);
}

static volatile float sink;     /* what loading read, so it is read */

static void unlink_tmp(void)
{
	unlink(path);
	unlink(outside_h5);
	unlink(outside_raw);
	unlink(rebuilt);
}

/* outside.h5: the checkpoint with OUTSIDE in every tensor; outside.raw:
 * OUTSIDE over and over. */
static void make_outside(void)
{
	static float raw[RAW_FLOATS];
	struct dsl l = {.n = 0};
	FILE *f = fopen(outside_h5, "wb");
	hid_t file, g;

	FUZZ_ASSERT(f && fwrite(base, 1, base_len, f) == base_len && fclose(f) == 0);
	for (size_t i = 0; i < RAW_FLOATS; i++)
		raw[i] = OUTSIDE;
	file = H5Fopen(outside_h5, H5F_ACC_RDWR, H5P_DEFAULT);
	g = file < 0 ? -1 : H5Gopen2(file, "/params", H5P_DEFAULT);
	FUZZ_ASSERT(g >= 0 && H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, NULL, add_name, &l) >= 0);
	for (size_t i = 0; i < l.n; i++) {
		hid_t d = H5Dopen2(g, l.name[i], H5P_DEFAULT), sp = H5Dget_space(d);
		FUZZ_ASSERT(d >= 0 && sp >= 0 && H5Sget_simple_extent_npoints(sp) <= RAW_FLOATS &&
			    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) >= 0);
		H5Sclose(sp);
		H5Dclose(d);
	}
	H5Gclose(g);
	FUZZ_ASSERT(H5Fclose(file) >= 0);
	f = fopen(outside_raw, "wb");
	FUZZ_ASSERT(f && fwrite(raw, sizeof raw, 1, f) == 1 && fclose(f) == 0);
	/* an edit may write into outside.h5 through an external link: each
	 * input starts from these bytes */
	f = fopen(outside_h5, "rb");
	FUZZ_ASSERT(f && fseek(f, 0, SEEK_END) == 0 && (outside_len = (size_t)ftell(f)) > 0 &&
		    fseek(f, 0, SEEK_SET) == 0);
	outside = malloc(outside_len);
	FUZZ_ASSERT(outside && fread(outside, 1, outside_len, f) == outside_len);
	fclose(f);
}

static void init(void)
{
	const char *b = getenv("SW_FUZZ_BASE"), *dir = getenv("TMPDIR");
	FILE *f;
	long len;
	int fd;

	if (!b)
		b = "fixtures/bad/base.h5";
	f = fopen(b, "rb");
	if (!f) {
		fprintf(stderr, "fuzz-h5ckpt: %s: cannot open (run from the top of the tree, or set SW_FUZZ_BASE)\n", b);
		abort();
	}
	FUZZ_ASSERT(fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0);
	base_len = (size_t)len;
	base = malloc(base_len);
	FUZZ_ASSERT(base && fread(base, 1, base_len, f) == base_len);
	fclose(f);
	snprintf(path, sizeof path, "%s/sw-fuzz-h5ckpt.XXXXXX", dir && *dir ? dir : "/tmp");
	fd = mkstemp(path);
	FUZZ_ASSERT(fd >= 0);
	close(fd);
	FUZZ_ASSERT(snprintf(outside_h5, sizeof outside_h5, "%s.outside.h5", path) < (int)sizeof outside_h5);
	FUZZ_ASSERT(snprintf(outside_raw, sizeof outside_raw, "%s.outside.raw", path) <
		    (int)sizeof outside_raw);
	FUZZ_ASSERT(snprintf(rebuilt, sizeof rebuilt, "%s.rebuilt", path) < (int)sizeof rebuilt);
	atexit(unlink_tmp);
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
	make_outside();
}

static void edit(struct in *in)
{
	hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
	int userblock = -1;

	FUZZ_ASSERT(file >= 0);
	for (int k = 0; k < MAX_OPS && in->n; k++) {
		unsigned op = take(in) % 18;
		if (op < 8)
			op_attr(file, in, op);
		else if (op < 10)
			op_replace(file, in, op == 9);
		else if (op < 17)
			op_link(file, in, op - 10);
		else {
			userblock = (int)take(in);      /* the last edit: the rest is its bytes */
			break;
		}
	}
	FUZZ_ASSERT(H5Fget_obj_count(file, H5F_OBJ_ALL) == 1);    /* the file only */
	FUZZ_ASSERT(H5Fclose(file) >= 0);
	if (userblock >= 0)
		with_userblock(in, (unsigned)userblock);
}

/* Is the link at path (its parents hard links) other than a hard link? */
static int not_hard(hid_t file, const char *p)
{
	H5L_info_t li;

	return H5Lexists(file, p, H5P_DEFAULT) > 0 && H5Lget_info(file, p, &li, H5P_DEFAULT) >= 0 &&
	       li.type != H5L_TYPE_HARD;
}

/* What the reader must refuse, found with HDF5 alone: a soft or external
 * link at /config, /metrics, /params or a member of /params (open: 1),
 * or at /optim, /optim_state (attributes: 2), a /params dataset that is
 * virtual or has external storage (open: 1). */
static int must_refuse(void)
{
	static const char *const groups[] = {"/config", "/metrics", "/params"};
	hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), g;
	struct dsl l = {.n = 0};
	int refuse = 0;

	if (file < 0)
		return 0;
	for (size_t i = 0; i < COUNT(groups); i++)
		refuse |= not_hard(file, groups[i]);
	if (!refuse && (g = H5Gopen2(file, "/params", H5P_DEFAULT)) >= 0) {
		H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, NULL, add_name, &l);
		for (size_t i = 0; i < l.n && !refuse; i++) {
			H5L_info_t li;
			hid_t o, dcpl;
			if (H5Lget_info(g, l.name[i], &li, H5P_DEFAULT) < 0)
				continue;
			if (li.type != H5L_TYPE_HARD) {
				refuse = 1;
				break;
			}
			if ((o = H5Oopen(g, l.name[i], H5P_DEFAULT)) < 0)
				continue;
			if (H5Iget_type(o) == H5I_DATASET && (dcpl = H5Dget_create_plist(o)) >= 0) {
				refuse = H5Pget_layout(dcpl) == H5D_VIRTUAL || H5Pget_external_count(dcpl) > 0;
				H5Pclose(dcpl);
			}
			H5Oclose(o);
		}
		H5Gclose(g);
	}
	if (!refuse && (not_hard(file, "/optim") || not_hard(file, "/optim_state")))
		refuse = 2;
	H5Fclose(file);
	H5Eclear2(H5E_DEFAULT);
	return refuse;
}

static void check(struct ckpt *ck, int refuse_attrs)
{
	const struct ckpt_meta *m = ckpt_meta(ck);
	const struct sw_config *c = &m->config;
	const struct attr_map *attrs;
	struct sw_err err = {0};
	size_t n = ckpt_count(ck);
	hid_t own = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);    /* HDF5's own reading */
	int rc;

	FUZZ_ASSERT(own >= 0);
	rc = ckpt_attrs(ck, &attrs, &err);
	if (rc)
		FUZZ_REFUSED(rc, err);
	else
		FUZZ_ASSERT(!refuse_attrs);

	FUZZ_ASSERT(m->format == CKPT_HDF5 && m->has_step);
	FUZZ_ASSERT(memchr(c->arch, '\0', sizeof c->arch) && family_computed(c->arch));
	FUZZ_ASSERT(arch_config_check(c, &err) == SW_OK);
	/* what config.json's reader guarantees, the HDF5 reader must too */
	FUZZ_ASSERT(isfinite(c->norm_eps) && c->norm_eps >= 0);
	FUZZ_ASSERT(isfinite(c->rope_theta) && c->rope_theta >= 0);
	for (size_t i = 0; i < n; i++) {
		const struct sw_tensor_info *t = ckpt_info(ck, i);
		const struct arch_role *role = arch_role_find(t->role);
		struct ckpt_view v;
		int64_t numel = 1;
		char where[SW_NAME_MAX + 16];
		float *expect;
		hid_t d;

		FUZZ_ASSERT(memchr(t->name, '\0', sizeof t->name));
		FUZZ_ASSERT(memchr(t->role, '\0', sizeof t->role));
		FUZZ_ASSERT(t->rank >= 0 && t->rank <= SW_MAX_RANK);
		for (int k = 0; k < t->rank; k++) {
			FUZZ_ASSERT(t->shape[k] >= 0);
			FUZZ_ASSERT(!__builtin_mul_overflow(numel, t->shape[k], &numel));
		}
		FUZZ_ASSERT(numel == t->numel);
		FUZZ_ASSERT(t->kind == sw_kind_of_shape(t->rank, t->shape));
		FUZZ_ASSERT(t->layer >= -1 && t->layer < c->n_layers);
		FUZZ_ASSERT((unsigned)t->block < SW_BLOCK_COUNT);
		/* sqrt(lr/wd) is computed from these: unknown (NaN) or usable */
		FUZZ_ASSERT(isnan(t->lr) || (isfinite(t->lr) && t->lr >= 0));
		FUZZ_ASSERT(isnan(t->wd) || (isfinite(t->wd) && t->wd >= 0));
		FUZZ_ASSERT(t->dtype == SW_DTYPE_F32 || t->dtype == SW_DTYPE_F64 || t->dtype == SW_DTYPE_F16);
		if (role) {
			FUZZ_ASSERT(role->block == t->block);
			FUZZ_ASSERT(role->in_layer ? t->layer >= 0 : t->layer == -1);
			for (size_t j = 0; j < i; j++)
				FUZZ_ASSERT(strcmp(ckpt_info(ck, j)->role, t->role) ||
					    ckpt_info(ck, j)->layer != t->layer);
		}
		FUZZ_ASSERT(arch_check_shape(c, t, &err) == SW_OK);
		rc = ckpt_load(ck, i, &v, &err);
		if (rc) {
			FUZZ_ASSERT((rc == SW_EDATA || rc == SW_EIO) && err.msg[0]);
			continue;
		}
		FUZZ_ASSERT(v.numel == t->numel && (v.data || !v.numel));
		for (int64_t k = 0; k < v.numel; k++) {
			FUZZ_ASSERT(v.data[k] != OUTSIDE);      /* nothing from outside, no fill */
			sink += v.data[k];
		}
		/* exactly what HDF5 reads from this file, bit for bit */
		snprintf(where, sizeof where, "/params/%s", t->name);
		expect = malloc(((size_t)v.numel + 1) * sizeof *expect);
		d = H5Dopen2(own, where, H5P_DEFAULT);
		FUZZ_ASSERT(expect && d >= 0);
		FUZZ_ASSERT(!v.numel ||
			    H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, expect) >= 0);
		FUZZ_ASSERT(!v.numel || memcmp(expect, v.data, (size_t)v.numel * sizeof *expect) == 0);
		H5Dclose(d);
		free(expect);
		ckpt_release(ck, &v);
	}
	if (m->head_tied)
		FUZZ_ASSERT(ckpt_find_role(ck, "lm_head", -1) < 0);
	H5Fclose(own);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = {data, size};
	struct ckpt *ck;
	struct sw_err err = {0};
	FILE *f;
	int rc, refuse;

	if (!base)
		init();
	f = fopen(path, "wb");
	FUZZ_ASSERT(f && fwrite(base, 1, base_len, f) == base_len && fclose(f) == 0);
	f = fopen(outside_h5, "wb");
	FUZZ_ASSERT(f && fwrite(outside, 1, outside_len, f) == outside_len && fclose(f) == 0);
	edit(&in);
	refuse = must_refuse();
	rc = ckpt_open(path, &ck, &err);
	if (getenv("SW_FUZZ_VERBOSE"))         /* what the reader said, to review a corpus */
		fprintf(stderr, "fuzz-h5ckpt: %s\n", rc ? err.msg : "accepted");
	if (rc) {
		FUZZ_REFUSED(rc, err);
		FUZZ_ASSERT(size > 0);          /* the unedited checkpoint is valid */
	} else {
		FUZZ_ASSERT(refuse != 1);
		check(ck, refuse == 2);
		ckpt_close(ck);
	}
	FUZZ_ASSERT(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) == 0);
	return 0;
}
