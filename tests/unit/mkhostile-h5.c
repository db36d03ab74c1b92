/*
 * mkhostile-h5 - makes the hostile HDF5 files of the bad-input table
 * (tests/cli/t0510-hostile-hdf5.t): a copy of a valid checkpoint or trace
 * IN with one change, written to OUT. Not a test itself: the Makefile
 * builds it beside the unit tests, prove never runs it. It never calls
 * the library under test, so what it writes does not depend on the
 * reader it attacks.
 *
 *   mkhostile-h5 elink PATH TARGET IN OUT     PATH becomes an external link to TARGET:PATH
 *   mkhostile-h5 soft PATH IN OUT             PATH moves to /moved, PATH a soft link to it
 *   mkhostile-h5 external PATH RAW IN OUT     dataset PATH re-made with its data in RAW
 *                                              (external raw storage; RAW is never written)
 *   mkhostile-h5 vds PATH SOURCE IN OUT       dataset PATH a virtual dataset of SOURCE:PATH
 *                                              (SOURCE may be missing: fill values)
 *   mkhostile-h5 unwritten PATH IN OUT        dataset PATH re-made chunked, never written
 *   mkhostile-h5 filter PATH IN OUT           dataset PATH re-made chunked through filter
 *                                              32000 (LZF's number, h5py's compression='lzf';
 *                                              libhdf5 has no such filter: registered here only)
 *   mkhostile-h5 huge N IN OUT                vocab_size N; embedding and head [N, d_model],
 *                                              chunked, never written (a file of kilobytes)
 *   mkhostile-h5 bomb N IN OUT                vocab_size N; embedding and head [N, d_model]
 *                                              of zeros, deflated (~1000:1)
 *   mkhostile-h5 userblock IN OUT             IN's objects in a file with a 512-byte
 *                                              userblock of 'U's (valid: read as IN)
 *   mkhostile-h5 fill PATH VALUE IN OUT       every value of dataset PATH set to VALUE
 *
 * Every re-made dataset keeps its shape, type and attributes; its fill
 * value is 1.5, so a reader that took fill values for data would print
 * numbers made of 1.5.
 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/h5copy.h"

#define LZF_FILTER 32000
#define FILL 1.5

static void die(const char *what)
{
	fprintf(stderr, "mkhostile-h5: %s\n", what);
	exit(70);
}

static void usage(void)
{
	fprintf(stderr, "usage: mkhostile-h5 elink|soft|external|vds|unwritten|filter|huge|bomb|"
		"userblock|fill [ARGS] IN OUT\n");
	exit(64);
}

static void copy_file(const char *in, const char *out)
{
	FILE *a = fopen(in, "rb"), *b = fopen(out, "wb");
	char buf[65536];
	size_t n;

	if (!a || !b)
		die("cannot copy IN to OUT");
	while ((n = fread(buf, 1, sizeof buf, a)) > 0)
		if (fwrite(buf, 1, n, b) != n)
			die("cannot write OUT");
	if (ferror(a) || fclose(b) != 0)
		die("cannot copy IN to OUT");
	fclose(a);
}

/* What a re-made dataset keeps of the old one. */
struct old {
	hid_t type;             /* its file type */
	hid_t space;            /* its shape (and maximum shape) */
	int rank;
	hsize_t dims[8], max[8];
	hsize_t n;              /* elements */
	double *values;         /* (n) */
};

static void read_old(hid_t file, const char *path, struct old *o)
{
	hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
	hssize_t n;

	if (d < 0)
		die("no such dataset");
	o->type = H5Dget_type(d);
	o->space = H5Dget_space(d);
	o->rank = H5Sget_simple_extent_ndims(o->space);
	if (o->type < 0 || o->rank < 0 || o->rank > 8 ||
	    H5Sget_simple_extent_dims(o->space, o->dims, o->max) < 0 ||
	    (n = H5Sget_simple_extent_npoints(o->space)) < 0)
		die("cannot read the dataset's type and shape");
	o->n = (hsize_t)n;
	o->values = malloc((o->n ? o->n : 1) * sizeof *o->values);
	if (!o->values ||
	    (o->n && H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, o->values) < 0))
		die("cannot read the dataset");
	H5Dclose(d);
}

static void free_old(struct old *o)
{
	H5Sclose(o->space);
	H5Tclose(o->type);
	free(o->values);
}

/*
 * Replace dataset path by one made with dcpl (its fill value set to FILL
 * here), of the old type and shape (maximum shape when chunked), with the
 * old attributes; write the old values when write_values.
 */
static void remake(hid_t file, const char *path, hid_t dcpl, int write_values)
{
	static const double fill = FILL;
	char tmp[4200];
	struct old o;
	hid_t d, old, space;

	read_old(file, path, &o);
	if (H5Pset_fill_value(dcpl, H5T_NATIVE_DOUBLE, &fill) < 0)
		die("cannot set a fill value");
	space = H5Pget_layout(dcpl) == H5D_CHUNKED ? H5Scopy(o.space)
						   : H5Screate_simple(o.rank, o.dims, NULL);
	if (o.rank == 0) {
		H5Sclose(space);
		space = H5Screate(H5S_SCALAR);
	}
	snprintf(tmp, sizeof tmp, "%s.remade", path);
	d = H5Dcreate2(file, tmp, o.type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
	old = H5Dopen2(file, path, H5P_DEFAULT);
	if (d < 0 || old < 0 || h5copy_attrs(old, d) < 0)
		die("cannot make the new dataset");
	if (write_values && o.n &&
	    H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, o.values) < 0)
		die("cannot write the new dataset");
	H5Dclose(old);
	H5Dclose(d);
	if (H5Ldelete(file, path, H5P_DEFAULT) < 0 ||
	    H5Lmove(file, tmp, file, path, H5P_DEFAULT, H5P_DEFAULT) < 0)
		die("cannot put the new dataset in place");
	H5Sclose(space);
	free_old(&o);
}

/* A chunked dcpl for a dataset like path: one chunk per row. */
static hid_t chunked_dcpl(hid_t file, const char *path)
{
	hid_t d = H5Dopen2(file, path, H5P_DEFAULT), s = H5Dget_space(d);
	hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
	hsize_t dims[8], chunk[8];
	int rank = s < 0 ? -1 : H5Sget_simple_extent_ndims(s);

	if (d < 0 || rank < 1 || rank > 8 || dcpl < 0 ||
	    H5Sget_simple_extent_dims(s, dims, NULL) < 0)
		die("a chunked dataset needs rank 1 or more");
	chunk[0] = 1;
	for (int i = 1; i < rank; i++)
		chunk[i] = dims[i] ? dims[i] : 1;
	if (H5Pset_chunk(dcpl, rank, chunk) < 0)
		die("cannot set chunks");
	H5Sclose(s);
	H5Dclose(d);
	return dcpl;
}

/* The filter of 'filter': libhdf5 will not have it when the file is read. */
static size_t identity(unsigned flags, size_t cd_nelmts, const unsigned cd_values[],
		       size_t nbytes, size_t *buf_size, void **buf)
{
	(void)flags;
	(void)cd_nelmts;
	(void)cd_values;
	(void)buf_size;
	(void)buf;
	return nbytes;
}

static void make_filter(hid_t file, const char *path)
{
	static const H5Z_class2_t lzf = {
		H5Z_CLASS_T_VERS, LZF_FILTER, 1, 1, "lzf (as h5py has it; not libhdf5)",
		NULL, NULL, identity,
	};
	hid_t dcpl = chunked_dcpl(file, path);

	if (H5Zregister(&lzf) < 0 || H5Pset_filter(dcpl, LZF_FILTER, H5Z_FLAG_MANDATORY, 0, NULL) < 0)
		die("cannot set the filter");
	remake(file, path, dcpl, 1);
	H5Pclose(dcpl);
}

static void make_external(hid_t file, const char *path, const char *raw)
{
	hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
	struct old o;

	read_old(file, path, &o);
	if (dcpl < 0 || H5Pset_external(dcpl, raw, 0, (hsize_t)o.n * H5Tget_size(o.type)) < 0)
		die("cannot set external storage");
	remake(file, path, dcpl, 0);    /* never written: RAW is only named */
	H5Pclose(dcpl);
	free_old(&o);
}

static void make_vds(hid_t file, const char *path, const char *source)
{
	hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
	struct old o;

	read_old(file, path, &o);
	if (dcpl < 0 || H5Pset_virtual(dcpl, o.space, source, path, o.space) < 0)
		die("cannot set a virtual mapping");
	remake(file, path, dcpl, 0);
	H5Pclose(dcpl);
	free_old(&o);
}

static void make_elink(hid_t file, const char *path, const char *target)
{
	if (H5Ldelete(file, path, H5P_DEFAULT) < 0 ||
	    H5Lcreate_external(target, path, file, path, H5P_DEFAULT, H5P_DEFAULT) < 0)
		die("cannot make the external link");
}

static void make_soft(hid_t file, const char *path)
{
	if (H5Lmove(file, path, file, "/moved", H5P_DEFAULT, H5P_DEFAULT) < 0 ||
	    H5Lcreate_soft("/moved", file, path, H5P_DEFAULT, H5P_DEFAULT) < 0)
		die("cannot make the soft link");
}

static void make_fill(hid_t file, const char *path, double value)
{
	hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
	struct old o;

	read_old(file, path, &o);
	for (hsize_t i = 0; i < o.n; i++)
		o.values[i] = value;
	if (d < 0 || H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, o.values) < 0)
		die("cannot write the values");
	H5Dclose(d);
	free_old(&o);
}

/* Set /config vocab_size to vocab (an int64 attribute, replaced). */
static void set_vocab(hid_t file, long long vocab)
{
	hid_t g = H5Gopen2(file, "/config", H5P_DEFAULT), s = H5Screate(H5S_SCALAR), a;
	int64_t v = vocab;

	if (g < 0 || s < 0 || H5Adelete(g, "vocab_size") < 0 ||
	    (a = H5Acreate2(g, "vocab_size", H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT)) < 0 ||
	    H5Awrite(a, H5T_NATIVE_INT64, &v) < 0)
		die("cannot set vocab_size");
	H5Aclose(a);
	H5Sclose(s);
	H5Gclose(g);
}

/*
 * The embedding and the head become [vocab, d] chunked datasets (chunks of
 * 65536 rows): never written, or every chunk the deflated bytes of zeros,
 * written as they are (compressed once, so the file is made in no time).
 */
static void make_big(hid_t file, long long vocab, int zeros)
{
	static const char *const tensors[] = {
		"/params/model.embed_tokens.weight", "/params/lm_head.weight",
	};
	enum { CHUNK_ROWS = 65536 };

	set_vocab(file, vocab);
	for (size_t k = 0; k < 2; k++) {
		hid_t d = H5Dopen2(file, tensors[k], H5P_DEFAULT), s, dcpl, nd, space;
		hsize_t dims[2], chunk[2];
		char tmp[256];

		if (d < 0)
			continue;       /* a tied head has no lm_head */
		s = H5Dget_space(d);
		if (H5Sget_simple_extent_ndims(s) != 2 || H5Sget_simple_extent_dims(s, dims, NULL) < 0)
			die("the embedding is not 2-D");
		dims[0] = (hsize_t)vocab;
		chunk[0] = CHUNK_ROWS;
		chunk[1] = dims[1];
		space = H5Screate_simple(2, dims, NULL);
		dcpl = H5Pcreate(H5P_DATASET_CREATE);
		if (space < 0 || dcpl < 0 || H5Pset_chunk(dcpl, 2, chunk) < 0 ||
		    (zeros && H5Pset_deflate(dcpl, 9) < 0))
			die("cannot set chunks");
		snprintf(tmp, sizeof tmp, "%s.big", tensors[k]);
		nd = H5Dcreate2(file, tmp, H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
		if (nd < 0 || h5copy_attrs(d, nd) < 0)
			die("cannot make the big tensor");
		if (zeros) {
			size_t bytes = (size_t)CHUNK_ROWS * dims[1] * sizeof(float);
			float *z = calloc(1, bytes);
			void *packed = malloc(bytes);
			hsize_t off[2] = {0, 0}, one[2] = {CHUNK_ROWS, dims[1]}, packed_size = 0;
			uint32_t mask = 0;
			hid_t ms = H5Screate_simple(2, one, NULL), fs = H5Dget_space(nd);

			/* the first chunk through the filter, the others its bytes */
			if (!z || !packed || ms < 0 || fs < 0 ||
			    H5Sselect_hyperslab(fs, H5S_SELECT_SET, off, NULL, one, NULL) < 0 ||
			    H5Dwrite(nd, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, z) < 0 ||
			    H5Dflush(nd) < 0 ||
			    H5Dget_chunk_storage_size(nd, off, &packed_size) < 0 ||
			    H5Dread_chunk(nd, H5P_DEFAULT, off, &mask, packed) < 0)
				die("cannot deflate a chunk");
			for (off[0] = CHUNK_ROWS; off[0] < dims[0]; off[0] += CHUNK_ROWS)
				if (H5Dwrite_chunk(nd, H5P_DEFAULT, mask, off, (size_t)packed_size, packed) < 0)
					die("cannot write a chunk");
			H5Sclose(fs);
			H5Sclose(ms);
			free(packed);
			free(z);
		}
		H5Dclose(nd);
		H5Dclose(d);
		H5Sclose(s);
		H5Sclose(space);
		H5Pclose(dcpl);
		if (H5Ldelete(file, tensors[k], H5P_DEFAULT) < 0 ||
		    H5Lmove(file, tmp, file, tensors[k], H5P_DEFAULT, H5P_DEFAULT) < 0)
			die("cannot put the big tensor in place");
	}
}

/* Copy the root's members and attributes of in into out, which gets a
 * userblock of 512 'U's. */
static void make_userblock(const char *in, const char *out)
{
	hid_t fcpl = H5Pcreate(H5P_FILE_CREATE), src, dst, sroot, droot;
	char names[64][256];
	H5G_info_t info;
	hsize_t n;
	FILE *f;

	if (fcpl < 0 || H5Pset_userblock(fcpl, 512) < 0 || H5Pset_obj_track_times(fcpl, 0) < 0)
		die("cannot set a userblock");
	src = H5Fopen(in, H5F_ACC_RDONLY, H5P_DEFAULT);
	dst = H5Fcreate(out, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
	sroot = src < 0 ? -1 : H5Gopen2(src, "/", H5P_DEFAULT);
	droot = dst < 0 ? -1 : H5Gopen2(dst, "/", H5P_DEFAULT);
	if (sroot < 0 || droot < 0 || H5Gget_info(sroot, &info) < 0)
		die("cannot open IN or create OUT");
	n = info.nlinks;
	if (n > 64)
		die("too many root members");
	for (hsize_t i = 0; i < n; i++)
		if (H5Lget_name_by_idx(src, "/", H5_INDEX_NAME, H5_ITER_INC, i, names[i],
				       sizeof names[i], H5P_DEFAULT) < 0)
			die("cannot list IN");
	for (hsize_t i = 0; i < n; i++)
		if (H5Ocopy(src, names[i], dst, names[i], H5P_DEFAULT, H5P_DEFAULT) < 0)
			die("cannot copy an object");
	if (h5copy_attrs(sroot, droot) < 0)
		die("cannot copy the root's attributes");
	H5Gclose(droot);
	H5Gclose(sroot);
	H5Fclose(dst);
	H5Fclose(src);
	H5Pclose(fcpl);
	f = fopen(out, "r+b");
	if (!f)
		die("cannot reopen OUT");
	for (int i = 0; i < 512; i++)
		fputc('U', f);
	if (fclose(f) != 0)
		die("cannot write the userblock");
}

int main(int argc, char **argv)
{
	const char *kind = argc > 1 ? argv[1] : "", *in, *out;
	int nargs;
	hid_t file;

	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
	if (!strcmp(kind, "userblock"))
		nargs = 0;
	else if (!strcmp(kind, "elink") || !strcmp(kind, "external") || !strcmp(kind, "vds") ||
		 !strcmp(kind, "fill"))
		nargs = 2;
	else if (!strcmp(kind, "soft") || !strcmp(kind, "unwritten") || !strcmp(kind, "filter") ||
		 !strcmp(kind, "huge") || !strcmp(kind, "bomb"))
		nargs = 1;
	else
		usage();
	if (argc != 4 + nargs)
		usage();
	in = argv[2 + nargs];
	out = argv[3 + nargs];
	if (!strcmp(kind, "userblock")) {
		make_userblock(in, out);
		return 0;
	}
	copy_file(in, out);
	file = H5Fopen(out, H5F_ACC_RDWR, H5P_DEFAULT);
	if (file < 0)
		die("cannot open OUT as HDF5");
	if (!strcmp(kind, "elink"))
		make_elink(file, argv[2], argv[3]);
	else if (!strcmp(kind, "soft"))
		make_soft(file, argv[2]);
	else if (!strcmp(kind, "external"))
		make_external(file, argv[2], argv[3]);
	else if (!strcmp(kind, "vds"))
		make_vds(file, argv[2], argv[3]);
	else if (!strcmp(kind, "unwritten")) {
		hid_t dcpl = chunked_dcpl(file, argv[2]);
		remake(file, argv[2], dcpl, 0);
		H5Pclose(dcpl);
	} else if (!strcmp(kind, "filter"))
		make_filter(file, argv[2]);
	else if (!strcmp(kind, "fill"))
		make_fill(file, argv[2], strtod(argv[3], NULL));
	else
		make_big(file, strtoll(argv[2], NULL, 10), !strcmp(kind, "bomb"));
	if (H5Fclose(file) < 0)
		die("cannot close OUT");
	return 0;
}
