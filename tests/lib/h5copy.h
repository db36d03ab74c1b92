/*
 * h5copy.h - what the test programs that edit HDF5 files share
 * (tests/unit/mkhostile-h5.c, tests/fuzz/fuzz-h5ckpt.c): copying an
 * object's attributes to another object, each in its own file type.
 */
#ifndef SW_TESTS_H5COPY_H
#define SW_TESTS_H5COPY_H

#include <hdf5.h>
#include <stdlib.h>

/* H5Aiterate2 callback: attribute name of src onto the object *data.
 * Returns -1 (ending the iteration) when one cannot be copied. */
static inline herr_t h5copy_attr(hid_t src, const char *name, const H5A_info_t *info, void *data)
{
	hid_t dst = *(hid_t *)data, a = H5Aopen(src, name, H5P_DEFAULT);
	hid_t t = a < 0 ? -1 : H5Aget_type(a), s = a < 0 ? -1 : H5Aget_space(a), b = -1;
	hssize_t n = s < 0 ? -1 : H5Sget_simple_extent_npoints(s);
	void *buf = t < 0 || n < 0 ? NULL : calloc((size_t)n + 1, H5Tget_size(t) + 1);
	herr_t rc = -1;

	(void)info;
	if (buf && H5Aread(a, t, buf) >= 0) {
		b = H5Acreate2(dst, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
		if (b >= 0 && H5Awrite(b, t, buf) >= 0)
			rc = 0;
		/* variable-length strings were allocated by the read */
		if (H5Tdetect_class(t, H5T_VLEN) > 0 || H5Tis_variable_str(t) > 0)
			H5Dvlen_reclaim(t, s, H5P_DEFAULT, buf);
	}
	free(buf);
	if (b >= 0)
		H5Aclose(b);
	if (s >= 0)
		H5Sclose(s);
	if (t >= 0)
		H5Tclose(t);
	if (a >= 0)
		H5Aclose(a);
	return rc;
}

/* Every attribute of src onto dst; -1 if one could not be copied. */
static inline int h5copy_attrs(hid_t src, hid_t dst)
{
	return H5Aiterate2(src, H5_INDEX_NAME, H5_ITER_INC, NULL, h5copy_attr, &dst) < 0 ? -1 : 0;
}

#endif
