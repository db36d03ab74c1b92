/*
 * Unit tests of the tensor source (lib/formats/ckpt.c, lib/formats/h5io.c,
 * lib/formats/safetensors.c): what the writers write, the readers read back, in
 * model order, mapped in place where it can be, and nothing is left
 * behind by an aborted write.
 */
#include <dirent.h>
#include <hdf5.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../lib/formats/ckpt.h"
#include "../../lib/base/dtype.h"
#include "../../lib/formats/h5write.h"
#include "../../lib/formats/stwrite.h"
#include "tap.h"

static const struct sw_config cfg = {
	.arch = "llama", .vocab_size = 11, .d_model = 4, .n_layers = 12, .n_heads = 2,
	.n_kv_heads = 1, .head_dim = 2, .d_ff = 6, .seq_len = 8, .rope_theta = 1e4,
	.norm_eps = 1e-5, .tie_embeddings = 1, .multipliers = "none", .scale_vectors = 1,
};

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

/* A checkpoint with embed, the norms and q of every layer, final norm. */
static int write_ckpt(const char *path, float *data, struct sw_tensor_info *infos, size_t *n,
		      struct sw_err *err)
{
	struct h5w *w;
	int rc;

	*n = 0;
	memset(infos, 0, 32 * sizeof *infos);
	arch_info_for_role(&cfg, "embed", -1, &infos[(*n)++]);
	for (int l = 11; l >= 0; l--)     /* written out of order on purpose */
		arch_info_for_role(&cfg, "q", l, &infos[(*n)++]);
	arch_info_for_role(&cfg, "final_norm", -1, &infos[(*n)++]);
	for (size_t i = 0; i < *n; i++) {
		struct sw_tensor_info *t = &infos[i];
		t->rank = t->block == SW_BLOCK_NORM ? 1 : 2;
		t->shape[0] = !strcmp(t->role, "embed") ? 11 : 4;
		t->shape[1] = 4;
		sw_shape_numel(t->rank, t->shape, &t->numel);
		t->lr = 1e-3 * (double)(i + 1);
		t->wd = 0.1;
		t->wd_mode = SW_WD_INDEPENDENT;
	}
	for (int i = 0; i < 64; i++)
		data[i] = (float)i * 0.25f - 3.0f;
	if ((rc = h5w_create(path, "checkpoint", &w, err)))
		return rc;
	if ((rc = h5w_set_i64(w, "/", "step", 77, err)) || (rc = h5w_set_i64(w, "/", "tokens", 7700, err)) ||
	    (rc = h5w_write_config(w, &cfg, err)) || (rc = h5w_set_f64(w, "/metrics", "val_loss", 2.5, err))) {
		h5w_abort(w);
		return rc;
	}
	for (size_t i = 0; i < *n; i++)
		if ((rc = h5w_write_tensor(w, "/params", &infos[i], data, 1, err))) {
			h5w_abort(w);
			return rc;
		}
	return h5w_commit(w, err);
}

/* H5Aiterate2 callback: copy one attribute of loc onto the object *dst */
static herr_t copy_attr(hid_t loc, const char *name, const H5A_info_t *info, void *dst)
{
	hid_t a = H5Aopen(loc, name, H5P_DEFAULT), ft = H5Aget_type(a), sp = H5Aget_space(a);
	hid_t mt = H5Tget_native_type(ft, H5T_DIR_DEFAULT), b;
	void *buf = calloc(1, (size_t)H5Sget_simple_extent_npoints(sp) * H5Tget_size(mt) + 1);
	herr_t rc;

	(void)info;
	b = H5Acreate2(*(hid_t *)dst, name, ft, sp, H5P_DEFAULT, H5P_DEFAULT);
	rc = buf && H5Aread(a, mt, buf) >= 0 && H5Awrite(b, mt, buf) >= 0 ? 0 : -1;
	if (H5Tdetect_class(mt, H5T_VLEN) > 0 || H5Tis_variable_str(mt) > 0)
		H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, buf);
	free(buf);
	H5Aclose(b);
	H5Tclose(mt);
	H5Tclose(ft);
	H5Sclose(sp);
	H5Aclose(a);
	return rc;
}

/* Store the dataset name (rows x cols) as F64 values v, its attributes kept */
static int rewrite_f64(const char *path, const char *name, hsize_t rows, hsize_t cols,
		       const double *v)
{
	hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT), old, new_, sp;
	hsize_t dims[2] = {rows, cols};
	int rc = -1;

	if (f < 0)
		return -1;
	old = H5Dopen2(f, name, H5P_DEFAULT);
	sp = H5Screate_simple(2, dims, NULL);
	new_ = H5Dcreate2(f, "/params/f64.tmp", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (old >= 0 && new_ >= 0 && H5Dwrite(new_, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0 &&
	    H5Aiterate2(old, H5_INDEX_NAME, H5_ITER_INC, NULL, copy_attr, &new_) >= 0)
		rc = 0;
	H5Dclose(old);
	H5Dclose(new_);
	H5Sclose(sp);
	if (!rc && (H5Ldelete(f, name, H5P_DEFAULT) < 0 ||
		    H5Lmove(f, "/params/f64.tmp", f, name, H5P_DEFAULT, H5P_DEFAULT) < 0))
		rc = -1;
	H5Fclose(f);
	return rc;
}

int main(void)
{
	char dir[] = "/tmp/sw-t-ckpt.XXXXXX", path[256], path2[256];
	struct sw_tensor_info infos[32];
	float data[64];
	struct sw_err err;
	struct ckpt *ck;
	struct ckpt_view v, v2_view;
	size_t n;

	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof path, "%s/c.h5", dir);
	ok(write_ckpt(path, data, infos, &n, &err) == SW_OK, "write a checkpoint");
	ok(count_entries(dir) == 1, "no temporary file left behind");
	ok(ckpt_open(path, &ck, &err) == SW_OK, "read it back");
	if (!ck)
		return tap_done();
	const struct ckpt_meta *m = ckpt_meta(ck);
	ok(m->format == CKPT_HDF5 && m->has_step && m->step == 77 && m->tokens == 7700,
	   "step and tokens");
	ok(m->config.d_model == 4 && m->config.n_layers == 12 && m->config.tie_embeddings &&
	   !strcmp(m->config.multipliers, "none"), "config");
	ok(m->val_loss == 2.5 && isnan(m->train_loss), "metrics (train_loss unknown)");
	ok(m->head_tied, "tied head without lm_head");
	ok(ckpt_count(ck) == n, "every tensor");
	int order_ok = !strcmp(ckpt_info(ck, 0)->role, "embed") &&
		       !strcmp(ckpt_info(ck, n - 1)->role, "final_norm");
	for (size_t i = 1; i + 1 < n; i++)
		order_ok = order_ok && ckpt_info(ck, i)->layer == (int)i - 1;
	ok(order_ok, "model order, layers numerically (..., 9, 10, 11)");
	const struct sw_tensor_info *q3 = ckpt_info(ck, (size_t)ckpt_find_role(ck, "q", 3));
	ok(q3->block == SW_BLOCK_QK && q3->n_heads == 2 && q3->head_dim == 2 && q3->kind == SW_KIND_MATRIX &&
	   q3->mup == SW_MUP_MATRIX_LIKE && q3->group == SW_GROUP_HIDDEN && q3->wd_mode == SW_WD_INDEPENDENT &&
	   q3->wd == 0.1 && q3->dtype == SW_DTYPE_F32, "tensor metadata round-trips");
	const struct sw_tensor_info *fn = ckpt_info(ck, n - 1);
	ok(fn->norm_type == SW_NORM_INPUT && fn->kind == SW_KIND_VECTOR, "final norm: Input-Norm vector");
	ok(ckpt_load(ck, 0, &v, &err) == SW_OK && v.mapped && v.numel == 44 &&
	   !memcmp(v.data, data, 44 * sizeof(float)), "contiguous float32 is mapped in place, values exact");
	ckpt_release(ck, &v);
	ok(ckpt_load_raw(ck, 0, &v, &err) == SW_OK && v.raw == v.data && v.raw_dtype == SW_DTYPE_F32 &&
	   v.mapped, "the raw view of float32 is the float32 view");
	ckpt_release(ck, &v);
	ckpt_close(ck);

	/* a chunked, compressed dataset is read through H5Dread */
	{
		hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT), dcpl = H5Pcreate(H5P_DATASET_CREATE);
		hsize_t dims[2] = {4, 4}, chunk[2] = {2, 2};
		hid_t sp = H5Screate_simple(2, dims, NULL), d, a, t = H5Tcopy(H5T_C_S1);
		const char *name = "/params/model.layers.5.self_attn.q_proj.weight";
		float g[16];
		const char *vals[] = {"qk", "q", "matrix", "matrix-like"}, *keys[] = {"block", "role", "kind", "mup"};
		int64_t five = 5, two = 2;
		for (int i = 0; i < 16; i++)
			g[i] = (float)(i * i);
		H5Ldelete(f, name, H5P_DEFAULT);
		H5Pset_chunk(dcpl, 2, chunk);
		H5Pset_deflate(dcpl, 6);
		d = H5Dcreate2(f, name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
		H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, g);
		H5Tset_size(t, 16);                        /* fixed-length strings, as some writers do */
		H5Sclose(sp);
		sp = H5Screate(H5S_SCALAR);
		for (int i = 0; i < 4; i++) {
			char buf[16] = {0};
			strcpy(buf, vals[i]);
			a = H5Acreate2(d, keys[i], t, sp, H5P_DEFAULT, H5P_DEFAULT);
			H5Awrite(a, t, buf);
			H5Aclose(a);
		}
		a = H5Acreate2(d, "layer", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
		H5Awrite(a, H5T_NATIVE_INT64, &five);
		H5Aclose(a);
		a = H5Acreate2(d, "n_heads", H5T_STD_I8LE, sp, H5P_DEFAULT, H5P_DEFAULT);
		H5Awrite(a, H5T_NATIVE_INT64, &two);
		H5Aclose(a);
		a = H5Acreate2(d, "head_dim", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
		double twod = 2.0;
		H5Awrite(a, H5T_NATIVE_DOUBLE, &twod);
		H5Aclose(a);
		H5Dclose(d);
		H5Sclose(sp);
		H5Tclose(t);
		H5Pclose(dcpl);
		H5Fclose(f);
		ok(ckpt_open(path, &ck, &err) == SW_OK, "open with a chunked dataset and fixed strings: %s",
		   ck ? "" : err.msg);
		if (ck) {
			long i = ckpt_find_role(ck, "q", 5);
			ok(i >= 0 && ckpt_load(ck, (size_t)i, &v, &err) == SW_OK && !v.mapped &&
			   !memcmp(v.data, g, sizeof g), "chunked+deflate read by H5Dread, values exact");
			ckpt_release(ck, &v);
			ok(isnan(ckpt_info(ck, (size_t)i)->lr), "absent lr is unknown (NaN)");
			ckpt_close(ck);
		}
	}

	/* F64 data: read as float32 where float32 holds it as well as any
	 * value, refused naming the value where it cannot (HDF5's conversion
	 * would give Inf, or 0) */
	{
		const char *name = "/params/model.layers.5.self_attn.q_proj.weight";
		double v[16];
		float want[16];
		for (int i = 0; i < 16; i++) {
			v[i] = (i - 7.5) * 1e37;
			want[i] = (float)v[i];
		}
		v[3] = 1e-45;           /* rounds to float32's smallest subnormal: not exactly */
		ok(rewrite_f64(path, name, 4, 4, v) == 0 && ckpt_open(path, &ck, &err) == SW_OK,
		   "a checkpoint with an F64 dataset opens");
		if (ck) {
			long i = ckpt_find_role(ck, "q", 5);
			ok(i >= 0 && ckpt_info(ck, (size_t)i)->dtype == SW_DTYPE_F64 &&
			   ckpt_load(ck, (size_t)i, &v2_view, &err) == SW_EDATA &&
			   strstr(err.msg, "model.layers.5.self_attn.q_proj.weight: value 1e-45 at index 3 is below "
				  "float32's normal range"), "1e-45 refused: %s", err.msg);
			ckpt_close(ck);
		}
		v[3] = 0;
		want[3] = 0;
		v[9] = 1e300;
		if (rewrite_f64(path, name, 4, 4, v) == 0 && ckpt_open(path, &ck, &err) == SW_OK) {
			long i = ckpt_find_role(ck, "q", 5);
			ok(ckpt_load(ck, (size_t)i, &v2_view, &err) == SW_EDATA &&
			   strstr(err.msg, "value 1e+300 at index 9 is beyond float32's range"),
			   "1e300 refused: %s", err.msg);
			ckpt_close(ck);
		}
		v[9] = 1.5e37;
		want[9] = 1.5e37f;
		if (rewrite_f64(path, name, 4, 4, v) == 0 && ckpt_open(path, &ck, &err) == SW_OK) {
			long i = ckpt_find_role(ck, "q", 5);
			ok(ckpt_load(ck, (size_t)i, &v2_view, &err) == SW_OK &&
			   !memcmp(v2_view.data, want, sizeof want),
			   "F64 within float32's range: each value rounded to the nearest float32");
			ckpt_release(ck, &v2_view);
			ckpt_close(ck);
		}
	}

	/* a stored lr or wd must be usable: finite and nonnegative (fuzz-h5ckpt) */
	{
		const char *name = "/params/model.layers.5.self_attn.q_proj.weight";
		const double bad[] = {-1.0, INFINITY, NAN};
		for (int i = 0; i < 3; i++) {
			hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT), sp = H5Screate(H5S_SCALAR);
			hid_t d = H5Dopen2(f, name, H5P_DEFAULT), a;
			if (H5Aexists(d, "wd") > 0)
				H5Adelete(d, "wd");
			a = H5Acreate2(d, "wd", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
			H5Awrite(a, H5T_NATIVE_DOUBLE, &bad[i]);
			H5Aclose(a);
			H5Dclose(d);
			H5Sclose(sp);
			H5Fclose(f);
			char want[160];
			/* the text attrmap_check_rate gives both readers (t0520 has the safetensors side) */
			snprintf(want, sizeof want, "%s: wd = %g is not a finite nonnegative number", name,
				 bad[i]);
			ok(ckpt_open(path, &ck, &err) == SW_EDATA && !strcmp(err.msg, want),
			   "wd = %g refused: %s", bad[i], err.msg);
		}
	}

	/* an aborted write leaves nothing; a committed one replaces the old file */
	{
		struct h5w *w;
		struct stat before, after;
		stat(path, &before);
		ok(h5w_create(path, "checkpoint", &w, &err) == SW_OK, "start overwriting");
		h5w_abort(w);
		stat(path, &after);
		ok(count_entries(dir) == 1 && before.st_ino == after.st_ino, "abort: old file intact, no temporary");
		ok(write_ckpt(path, data, infos, &n, &err) == SW_OK && stat(path, &after) == 0 &&
		   after.st_ino != before.st_ino && count_entries(dir) == 1, "commit replaces by rename");
		snprintf(path2, sizeof path2, "%s/no/such/dir/c.h5", dir);
		ok(h5w_create(path2, "checkpoint", &w, &err) == SW_ECANTCREAT, "unwritable place: 73 (%s)", err.msg);
	}

	/* safetensors written here read back the same; BF16 to bf16 precision */
	{
		struct stw *w;
		struct sw_tensor_info st[3];
		float emb[44], nrm[4];
		memset(st, 0, sizeof st);
		arch_info_for_role(&cfg, "final_norm", -1, &st[0]);
		st[0].rank = 1; st[0].shape[0] = 4; st[0].numel = 4;
		arch_info_for_role(&cfg, "embed", -1, &st[1]);
		st[1].rank = 2; st[1].shape[0] = 11; st[1].shape[1] = 4; st[1].numel = 44;
		for (int i = 0; i < 44; i++)
			emb[i] = 1.0f + (float)i / 64.0f;
		for (int i = 0; i < 4; i++)
			nrm[i] = 0.5f * (float)(i + 1);
		snprintf(path2, sizeof path2, "%s/config.json", dir);
		ok(st_write_config(path2, &cfg, "bfloat16", &err) == SW_OK, "config.json written");
		snprintf(path2, sizeof path2, "%s/m.safetensors", dir);
		ok(stw_create(path2, st, 2, SW_DTYPE_BF16, &w, &err) == SW_OK &&
		   stw_write(w, nrm, 4, &err) == SW_OK && stw_write(w, emb, 44, &err) == SW_OK &&
		   stw_commit(w, &err) == SW_OK, "bf16 safetensors written");
		ok(ckpt_open(path2, &ck, &err) == SW_OK, "and read: %s", ck ? "ok" : err.msg);
		if (ck) {
			float maxrel = 0;
			ok(!strcmp(ckpt_info(ck, 0)->role, "embed") && ckpt_meta(ck)->head_tied &&
			   !ckpt_meta(ck)->has_step, "model order, tied, no step");
			ok(ckpt_load(ck, 0, &v, &err) == SW_OK && !v.mapped, "bf16 converted into a buffer");
			for (int i = 0; i < 44; i++)
				maxrel = fmaxf(maxrel, fabsf(v.data[i] - emb[i]) / emb[i]);
			ok(maxrel <= 1.0f / 256, "bf16 within 2^-8 relative (%.3g)", maxrel);
			{
				/* the raw view: the same values, in place, no copy */
				struct ckpt_view rv;
				int same = ckpt_load_raw(ck, 0, &rv, &err) == SW_OK && rv.mapped &&
					   !rv.data && rv.raw_dtype == SW_DTYPE_BF16;
				for (int i = 0; same && i < 44; i++)
					same = sw_bf16_to_f32(((const uint16_t *)rv.raw)[i]) == v.data[i];
				ok(same, "bf16 raw view: mapped in place, the values ckpt_load converts");
				ckpt_release(ck, &rv);
			}
			ckpt_release(ck, &v);
			ckpt_close(ck);
		}
	}
	snprintf(path2, sizeof path2, "rm -rf %s", dir);
	if (system(path2) != 0)
		return 1;
	return tap_done();
}
