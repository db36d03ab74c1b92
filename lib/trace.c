/*
 * trace.c - scalewatch trace v1: the SWMR writer and the reader (trace.h).
 *
 * Layout (man/scalewatch-format.5, "Trace v1"):
 *   /                   scalewatch_format = "trace", format_version = 1
 *   /config             the model, as in a checkpoint (when given)
 *   /series/step        int64 [rows], chunked, unlimited rows
 *   /series/<name>      float64 [rows] or [rows, ncols] with `columns`
 *   /status             int64 scalar: 0 while written, 1 once closed
 *   /session            int64 scalar: drawn anew by every writer that creates
 *                       or reopens the trace
 *
 * Why the writer is shaped as it is:
 * - SWMR (libver latest, H5Fstart_swmr_write) orders HDF5's metadata
 *   writes so that a reader never sees a half-updated file; H5Fflush after
 *   each row puts that row in the kernel's page cache, which a SIGKILL
 *   does not lose. (A power failure is another matter: no fsync.)
 * - Every dataset is extended to an absolute length (rows + 1), step last,
 *   so a retried append rewrites the same row, and readers take the
 *   shortest dataset as the row count: a row is there once all its values
 *   are. Series are filled with NaN, so an extended but unwritten row
 *   would read as unknown, never as 0.
 * - An fcntl lock (open file description lock where Linux has it) marks a
 *   live writer. HDF5's own flock cannot: it is dropped when SWMR writing
 *   starts. Readers open with HDF5's flock off, so a reader that is
 *   following a run never stops the next run from creating or reopening
 *   the trace.
 * - /session tells a follower that the rows it reads are still the run
 *   it followed: a writer that reopens the trace (a resumed run) or
 *   creates it anew writes its own number before it changes any row, so
 *   a reader that sees the number it opened the trace with after reading
 *   some rows knows no other writer touched them.
 *
 * The reader applies h5io.c's rules for files from strangers to every
 * dataset it reads (no link out of the file, data inside it, written,
 * decodable), and opens only the regular file it checked.
 */
#include "trace.h"
#include "h5io.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TRACE_MAX_SERIES 65536
#define TRACE_MAX_COLS   (1 << 20)     /* columns of one series */
#define TRACE_MAX_NAME   255
/* Each flush rewrites the current chunk of every series: small chunks
 * keep an append cheap, 512 rows of a scalar keep long traces in few. */
#define CHUNK_BYTES      4096

#ifdef F_OFD_SETLK
#define LOCK_SET F_OFD_SETLK           /* per open file: survives other closes */
#define LOCK_GET F_OFD_GETLK
#else
#define LOCK_SET F_SETLK
#define LOCK_GET F_GETLK
#endif

/* ---- the writer's lock ------------------------------------------------ */

/* Take the writer's lock on fd: 0 taken, 1 another process holds it,
 * -1 locks are not supported here (go on without). */
static int writer_lock(int fd)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};

	if (fcntl(fd, LOCK_SET, &fl) == 0)
		return 0;
	return errno == EAGAIN || errno == EACCES ? 1 : -1;
}

/* Does a process hold the writer's lock? 1 yes, 0 no, -1 cannot tell. */
static int writer_lock_held(int fd)
{
	struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};

	if (fcntl(fd, LOCK_GET, &fl) < 0)
		return -1;
	return fl.l_type != F_UNLCK;
}

/* ---- shared helpers --------------------------------------------------- */

/* A writer's number for /session: random, positive. */
static int64_t new_session(void)
{
	uint64_t v = 0;

	if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		v = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
		    ((uint64_t)getpid() << 40);
	}
	v &= (uint64_t)INT64_MAX;
	return v ? (int64_t)v : 1;
}

static int hdf5_fail(struct sw_err *err, int code, const char *what)
{
	char why[256];
	int e = h5io_last_error(why, sizeof why);

	if (code == SW_ECANTCREAT)
		code = h5io_create_status(e);
	return sw_fail(err, code, "%s%s%s", what, why[0] ? ": " : "", why);
}

/* Checks the names trace.h promises: a series is selected by name and a
 * column as SERIES.COLUMN in comma-separated lists, printed in TSV. */
static int bad_name(const char *s, const char *forbidden)
{
	return !s || !s[0] || strlen(s) > TRACE_MAX_NAME || strpbrk(s, forbidden);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int check_series(const struct trace_series *series, int nseries, struct sw_err *err)
{
	if (nseries < 0 || nseries > TRACE_MAX_SERIES || (nseries && !series))
		return sw_fail(err, SW_ESOFTWARE, "trace: %d series", nseries);
	for (int i = 0; i < nseries; i++) {
		const struct trace_series *s = &series[i];
		if (bad_name(s->name, "/.,\t\n") || !strcmp(s->name, "step"))
			return sw_fail(err, SW_ESOFTWARE, "trace: '%s' cannot be a series name",
				       s->name ? s->name : "(null)");
		for (int j = 0; j < i; j++)
			if (!strcmp(series[j].name, s->name))
				return sw_fail(err, SW_ESOFTWARE, "trace: series '%s' twice", s->name);
		if (s->ncols < 0 || s->ncols > TRACE_MAX_COLS)
			return sw_fail(err, SW_ESOFTWARE, "trace: series '%s': %d columns",
				       s->name, s->ncols);
		if (!s->ncols || !s->columns)
			continue;
		const char **sorted = malloc((size_t)s->ncols * sizeof *sorted);
		int dup = -1;
		if (!sorted)
			return sw_fail(err, SW_ESOFTWARE, "out of memory");
		for (int j = 0; j < s->ncols; j++) {
			if (bad_name(s->columns[j], ",\t\n")) {
				free(sorted);
				return sw_fail(err, SW_ESOFTWARE, "trace: series '%s': '%s' cannot be a column name",
					       s->name, s->columns[j] ? s->columns[j] : "(null)");
			}
			sorted[j] = s->columns[j];
		}
		qsort(sorted, (size_t)s->ncols, sizeof *sorted, cmp_str);
		for (int j = 1; j < s->ncols && dup < 0; j++)
			if (!strcmp(sorted[j - 1], sorted[j]))
				dup = j;
		if (dup >= 0) {
			int rc = sw_fail(err, SW_ESOFTWARE, "trace: series '%s': column '%s' twice",
					 s->name, sorted[dup]);
			free(sorted);
			return rc;
		}
		free(sorted);
	}
	return SW_OK;
}

/* The name of column j of s as written: its own, or its number. */
static const char *column_name(const struct trace_series *s, int j, char *buf, size_t len)
{
	if (s->columns)
		return s->columns[j];
	snprintf(buf, len, "%d", j);
	return buf;
}

/* ---- the writer ------------------------------------------------------- */

struct wseries {
	char *name;
	hid_t d;                /* /series/<name> */
	int ncols;              /* 0: 1-D */
};

struct trace_writer {
	hid_t file;
	hid_t step;             /* /series/step */
	hid_t status;           /* /status */
	struct wseries *s;      /* (n) in the caller's order */
	int n;
	double *nan_row;        /* (max ncols) NaN: a series the caller left out */
	int64_t rows;           /* rows written and flushed */
	int64_t last_step;
	int lockfd;             /* holds the writer's lock; -1 without locks */
};

static int writer_free(struct trace_writer *w);

static int writer_new(const struct trace_series *series, int nseries,
		      struct trace_writer **out, struct sw_err *err)
{
	struct trace_writer *w = calloc(1, sizeof *w);
	int maxcols = 1;

	*out = NULL;
	if (!w)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	w->file = w->step = w->status = H5I_INVALID_HID;
	w->lockfd = -1;
	w->s = calloc((size_t)(nseries ? nseries : 1), sizeof *w->s);
	for (int i = 0; i < nseries; i++)
		maxcols = series[i].ncols > maxcols ? series[i].ncols : maxcols;
	w->nan_row = malloc((size_t)maxcols * sizeof *w->nan_row);
	if (!w->s || !w->nan_row)
		goto oom;
	for (int i = 0; i < maxcols; i++)
		w->nan_row[i] = NAN;
	for (int i = 0; i < nseries; i++, w->n++) {
		w->s[i].d = H5I_INVALID_HID;
		w->s[i].ncols = series[i].ncols;
		if (!(w->s[i].name = strdup(series[i].name)))
			goto oom;
	}
	*out = w;
	return SW_OK;
oom:
	writer_free(w);
	return sw_fail(err, SW_ESOFTWARE, "out of memory");
}

/* Close every handle (the file last) and free w; the lock goes with it.
 * Returns -1 if closing the file failed (its last writes may be lost). */
static int writer_free(struct trace_writer *w)
{
	int rc = 0;

	for (int i = w->n - 1; w->s && i >= 0; i--) {
		if (w->s[i].d >= 0)
			H5Dclose(w->s[i].d);
		free(w->s[i].name);
	}
	if (w->status >= 0)
		H5Dclose(w->status);
	if (w->step >= 0)
		H5Dclose(w->step);
	if (w->file >= 0 && H5Fclose(w->file) < 0)
		rc = -1;
	if (w->lockfd >= 0)
		close(w->lockfd);
	free(w->nan_row);
	free(w->s);
	free(w);
	return rc;
}

/* Open (O_CREAT when create) and lock path for writing. */
static int writer_take_lock(struct trace_writer *w, const char *path, int create,
			    struct sw_err *err)
{
	struct stat st;
	int got;

	/* O_NONBLOCK: a FIFO at path is refused below, never waited on */
	w->lockfd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK | (create ? O_CREAT : 0), 0666);
	if (w->lockfd < 0) {
		int e = errno;
		if (!create && (e == ENOENT || e == ENOTDIR))
			return sw_fail(err, SW_ENOINPUT, "%s", strerror(e));
		return sw_fail(err, SW_ECANTCREAT, "%s", strerror(e));
	}
	if (fstat(w->lockfd, &st) < 0 || !S_ISREG(st.st_mode))
		return sw_fail(err, create ? SW_ECANTCREAT : SW_ENOINPUT, "not a regular file");
	got = writer_lock(w->lockfd);
	if (got == 1)
		return sw_fail(err, SW_ECANTCREAT,
			       "another process is writing this trace (it holds the writer's lock)");
	if (got < 0) {
		close(w->lockfd);      /* no locks on this file system: go on without */
		w->lockfd = -1;
	}
	return SW_OK;
}

/* What creating and reopening share: a checked series list, a writer,
 * the lock. */
static int writer_begin(const char *path, const struct trace_series *series, int nseries,
			int create, struct trace_writer **out, struct sw_err *err)
{
	int rc;

	*out = NULL;
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
	if ((rc = check_series(series, nseries, err)) ||
	    (rc = writer_new(series, nseries, out, err)))
		return rc;
	if ((rc = writer_take_lock(*out, path, create, err))) {
		writer_free(*out);
		*out = NULL;
	}
	return rc;
}

/* File access for writing: the newest format (SWMR needs v110). */
static hid_t writer_fapl(int clear_status_flags)
{
	hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
	hbool_t clear = true;

	if (fapl < 0)
		return H5I_INVALID_HID;
	if (H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST) < 0) {
		H5Pclose(fapl);
		return H5I_INVALID_HID;
	}
	/* h5clear's property: forget the "open for writing" mark a killed
	 * writer left. Only asked for under the writer's lock. If this HDF5
	 * lacks it, opening a killed trace fails with HDF5's own message. */
	if (clear_status_flags)
		H5Pset(fapl, "clear_status_flags", &clear);
	return fapl;
}

/* An extendible chunked dataset of ncols columns (0: 1-D) under g. */
static hid_t create_series(hid_t g, const char *name, hid_t ftype, int ncols,
			   hid_t filltype, const void *fill)
{
	int rank = ncols ? 2 : 1;
	hsize_t per_row = ncols ? (hsize_t)ncols : 1;
	hsize_t dims[2] = {0, (hsize_t)ncols}, max[2] = {H5S_UNLIMITED, (hsize_t)ncols};
	hsize_t chunk[2] = {CHUNK_BYTES / (8 * per_row), (hsize_t)ncols};
	hid_t space = H5I_INVALID_HID, dcpl = H5I_INVALID_HID, d = H5I_INVALID_HID;

	if (chunk[0] < 1)
		chunk[0] = 1;
	space = H5Screate_simple(rank, dims, max);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	if (space >= 0 && dcpl >= 0 && H5Pset_chunk(dcpl, rank, chunk) >= 0 &&
	    H5Pset_obj_track_times(dcpl, 0) >= 0 &&
	    H5Pset_fill_value(dcpl, filltype, fill) >= 0)
		d = H5Dcreate2(g, name, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (space >= 0)
		H5Sclose(space);
	return d;
}

/* The `columns` attribute of a 2-D series: variable-length UTF-8 strings,
 * as h5py writes a list of str. */
static int put_columns(hid_t d, const struct trace_series *s, struct sw_err *err)
{
	hsize_t n = (hsize_t)s->ncols;
	const char **names = malloc(n * sizeof *names);
	char *numbers = s->columns ? NULL : malloc(n * 12);
	hid_t t = H5I_INVALID_HID, space = H5I_INVALID_HID, a = H5I_INVALID_HID;
	int rc = SW_OK;

	if (!names || (!s->columns && !numbers)) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	for (int j = 0; j < s->ncols; j++)
		names[j] = column_name(s, j, numbers + (s->columns ? 0 : (size_t)j * 12), 12);
	t = H5Tcopy(H5T_C_S1);
	if (t < 0 || H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0 ||
	    (space = H5Screate_simple(1, &n, NULL)) < 0 ||
	    (a = H5Acreate2(d, "columns", t, space, H5P_DEFAULT, H5P_DEFAULT)) < 0 ||
	    H5Awrite(a, t, names) < 0)
		rc = sw_fail(err, SW_EIO, "/series/%s: cannot write attribute 'columns'", s->name);
out:
	if (a >= 0)
		H5Aclose(a);
	if (space >= 0)
		H5Sclose(space);
	if (t >= 0)
		H5Tclose(t);
	free(numbers);
	free(names);
	return rc;
}

/* The caller's attributes: of a group of its own (not the root, /config,
 * /series or the writer's datasets), with a name. */
static int check_attrs(const struct trace_attr *attrs, int nattrs, struct sw_err *err)
{
	static const char *const ours[] = {"/", "/config", "/series", "/status", "/session"};

	for (int i = 0; i < nattrs; i++) {
		const struct trace_attr *a = &attrs[i];
		if (!a->obj || a->obj[0] != '/' || !a->name || !a->name[0])
			return sw_fail(err, SW_ESOFTWARE, "trace attribute %d: no group or no name", i);
		for (size_t k = 0; k < sizeof ours / sizeof ours[0]; k++)
			if (!strcmp(a->obj, ours[k]))
				return sw_fail(err, SW_ESOFTWARE, "trace attribute %s of %s: %s is the writer's",
					       a->name, a->obj, a->obj);
	}
	return SW_OK;
}

static int put_attrs(hid_t file, const struct trace_attr *attrs, int nattrs, struct sw_err *err)
{
	int rc = SW_OK;

	for (int i = 0; i < nattrs && !rc; i++) {
		const struct trace_attr *a = &attrs[i];
		hid_t g = h5io_group(file, a->obj);
		if (g < 0)
			return hdf5_fail(err, SW_EIO, "cannot create a group for the run's attributes");
		rc = a->integer ? h5io_put_i64(g, a->name, (int64_t)a->value, err)
				: h5io_put_f64(g, a->name, a->value, err);
		H5Gclose(g);
	}
	return rc;
}

static int create_layout(struct trace_writer *w, const struct sw_config *cfg,
			 const struct trace_attr *attrs, int nattrs,
			 const struct trace_series *series, struct sw_err *err)
{
	static const int64_t no_step = -1, running = 0;
	static const double unknown = NAN;
	const int64_t session = new_session();
	hid_t root = H5I_INVALID_HID, gcpl = H5I_INVALID_HID, g = H5I_INVALID_HID;
	hid_t scalar = H5I_INVALID_HID, dcpl = H5I_INVALID_HID, sd = H5I_INVALID_HID;
	char what[TRACE_MAX_NAME + 32];     /* what failed, for the message */
	int rc;

	root = h5io_group(w->file, "/");
	if (root < 0)
		return hdf5_fail(err, SW_EIO, "cannot open the root group");
	if ((rc = h5io_put_str(root, "scalewatch_format", "trace", err)) ||
	    (rc = h5io_put_i64(root, "format_version", 1, err)) ||
	    (cfg && (rc = h5io_write_config(w->file, cfg, err))) ||
	    (rc = put_attrs(w->file, attrs, nattrs, err)))
		goto out;
	/* creation order kept: readers list the series as the writer gave them */
	snprintf(what, sizeof what, "cannot create /series");
	gcpl = H5Pcreate(H5P_GROUP_CREATE);
	if (gcpl < 0 || H5Pset_obj_track_times(gcpl, 0) < 0 ||
	    H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED) < 0 ||
	    (g = H5Gcreate2(w->file, "series", H5P_DEFAULT, gcpl, H5P_DEFAULT)) < 0)
		goto fail;
	snprintf(what, sizeof what, "cannot create /series/step");
	w->step = create_series(g, "step", H5T_STD_I64LE, 0, H5T_NATIVE_INT64, &no_step);
	if (w->step < 0)
		goto fail;
	for (int i = 0; i < w->n; i++) {
		snprintf(what, sizeof what, "cannot create /series/%s", series[i].name);
		w->s[i].d = create_series(g, series[i].name, H5T_IEEE_F64LE, series[i].ncols,
					  H5T_NATIVE_DOUBLE, &unknown);
		if (w->s[i].d < 0)
			goto fail;
		if (series[i].ncols && (rc = put_columns(w->s[i].d, &series[i], err)))
			goto out;
	}
	snprintf(what, sizeof what, "cannot create /status");
	scalar = H5Screate(H5S_SCALAR);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	if (scalar < 0 || dcpl < 0 || H5Pset_obj_track_times(dcpl, 0) < 0 ||
	    (w->status = H5Dcreate2(w->file, "status", H5T_STD_I64LE, scalar, H5P_DEFAULT,
				    dcpl, H5P_DEFAULT)) < 0 ||
	    H5Dwrite(w->status, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &running) < 0)
		goto fail;
	snprintf(what, sizeof what, "cannot create /session");
	if ((sd = H5Dcreate2(w->file, "session", H5T_STD_I64LE, scalar, H5P_DEFAULT, dcpl,
			     H5P_DEFAULT)) < 0 ||
	    H5Dwrite(sd, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &session) < 0)
		goto fail;
	rc = SW_OK;
	goto out;
fail:
	rc = hdf5_fail(err, SW_EIO, what);
out:
	if (sd >= 0)
		H5Dclose(sd);
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (scalar >= 0)
		H5Sclose(scalar);
	if (g >= 0)
		H5Gclose(g);
	if (gcpl >= 0)
		H5Pclose(gcpl);
	H5Gclose(root);
	return rc;
}

int trace_create(const char *path, const struct sw_config *cfg,
		 const struct trace_attr *attrs, int nattrs,
		 const struct trace_series *series, int nseries,
		 struct trace_writer **out, struct sw_err *err)
{
	struct trace_writer *w;
	hid_t fcpl = H5I_INVALID_HID, fapl = H5I_INVALID_HID;
	int rc;

	*out = NULL;
	if ((rc = check_attrs(attrs, nattrs, err)))
		return rc;
	if ((rc = writer_begin(path, series, nseries, 1, &w, err)))
		return rc;
	fcpl = H5Pcreate(H5P_FILE_CREATE);
	fapl = writer_fapl(0);
	if (fcpl < 0 || fapl < 0 || H5Pset_obj_track_times(fcpl, 0) < 0) {
		rc = sw_fail(err, SW_ESOFTWARE, "cannot set up HDF5 property lists");
		goto fail;
	}
	w->file = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, fapl);
	if (w->file < 0) {
		rc = hdf5_fail(err, SW_ECANTCREAT, "cannot create HDF5 file");
		goto fail;
	}
	if ((rc = create_layout(w, cfg, attrs, nattrs, series, err)))
		goto fail_unlink;
	if (H5Fstart_swmr_write(w->file) < 0) {
		rc = hdf5_fail(err, SW_EIO, "cannot start SWMR writing");
		goto fail_unlink;
	}
	H5Pclose(fapl);
	H5Pclose(fcpl);
	*out = w;
	return SW_OK;
fail_unlink:
	unlink(path);           /* ours: we hold the lock and made it */
fail:
	if (fapl >= 0)
		H5Pclose(fapl);
	if (fcpl >= 0)
		H5Pclose(fcpl);
	writer_free(w);
	return rc;
}

/* Write buf as row `row` of d (ncols columns, 0: 1-D), extending d to
 * row + 1 rows: an absolute length, so a retry rewrites the same row. */
static int write_row(hid_t d, const char *name, int64_t row, int ncols, hid_t mtype,
		     const void *buf, struct sw_err *err)
{
	int rank = ncols ? 2 : 1;
	hsize_t size[2] = {(hsize_t)row + 1, (hsize_t)ncols};
	hsize_t start[2] = {(hsize_t)row, 0}, count[2] = {1, (hsize_t)ncols};
	hid_t fs = H5I_INVALID_HID, ms = H5I_INVALID_HID;
	int rc = SW_OK;

	if (H5Dset_extent(d, size) < 0 || (fs = H5Dget_space(d)) < 0 ||
	    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
	    (ms = H5Screate_simple(rank, count, NULL)) < 0 ||
	    H5Dwrite(d, mtype, ms, fs, H5P_DEFAULT, buf) < 0) {
		char what[TRACE_MAX_NAME + 64];
		snprintf(what, sizeof what, "/series/%s: cannot write row %lld", name, (long long)row);
		rc = hdf5_fail(err, SW_EIO, what);
	}
	if (ms >= 0)
		H5Sclose(ms);
	if (fs >= 0)
		H5Sclose(fs);
	return rc;
}

int trace_append(struct trace_writer *w, int64_t step,
		 const double *const *values, struct sw_err *err)
{
	int rc;

	if (w->rows > 0 && step <= w->last_step)
		return sw_fail(err, SW_ESOFTWARE, "trace: step %lld after step %lld: steps must increase",
			       (long long)step, (long long)w->last_step);
	for (int i = 0; i < w->n; i++) {
		const double *v = values && values[i] ? values[i] : w->nan_row;
		if ((rc = write_row(w->s[i].d, w->s[i].name, w->rows, w->s[i].ncols,
				    H5T_NATIVE_DOUBLE, v, err)))
			return rc;
	}
	if ((rc = write_row(w->step, "step", w->rows, 0, H5T_NATIVE_INT64, &step, err)))
		return rc;
	if (H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0)
		return hdf5_fail(err, SW_EIO, "cannot flush the trace to disk");
	w->rows++;
	w->last_step = step;
	return SW_OK;
}

int64_t trace_writer_rows(const struct trace_writer *w) { return w->rows; }

int trace_close(struct trace_writer *w, struct sw_err *err)
{
	static const int64_t finished = 1;
	int rc = SW_OK;

	if (!w)
		return SW_OK;
	if (H5Dwrite(w->status, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &finished) < 0)
		rc = hdf5_fail(err, SW_EIO, "cannot write /status");
	if (writer_free(w) < 0 && !rc)
		rc = hdf5_fail(err, SW_EIO, "cannot finish writing the trace (disk full?)");
	return rc;
}

/* ---- the reader ------------------------------------------------------- */

struct rseries {
	char *name;
	int ncols;              /* 0: 1-D */
	char **cols;            /* (ncols) column names */
	hid_t d;
	int64_t len;            /* rows stored, as of the last refresh */
	int64_t written;        /* rows known to be written (their chunks stored) */
};

struct trace_reader {
	hid_t file;
	hid_t step;             /* /series/step */
	hid_t status;           /* /status, or H5I_INVALID_HID if the file has none */
	int64_t step_len;
	struct rseries *s;      /* (n) in creation order (name order if untracked) */
	int n;
	int64_t rows;           /* aligned rows: the shortest of step and every series */
	int finished;
	int swmr;               /* opened as an SWMR reader: refresh re-reads */
	int fd;                 /* to ask whether a writer holds the lock */
	char *path;             /* the name it was opened by: is it still this file? */
	hid_t session;          /* /session, or H5I_INVALID_HID if the file has none */
	int64_t session_id;     /* its value when opened */
	int64_t step_written;   /* rows of /series/step known to be written */
};

static void free_strings(char **v, int n)
{
	for (int i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

void trace_reader_close(struct trace_reader *r)
{
	if (!r)
		return;
	for (int i = r->n - 1; i >= 0; i--) {
		if (r->s[i].d >= 0)
			H5Dclose(r->s[i].d);
		free_strings(r->s[i].cols, r->s[i].ncols);
		free(r->s[i].name);
	}
	free(r->s);
	if (r->session >= 0)
		H5Dclose(r->session);
	if (r->status >= 0)
		H5Dclose(r->status);
	if (r->step >= 0)
		H5Dclose(r->step);
	if (r->file >= 0)
		H5Fclose(r->file);
	if (r->fd >= 0)
		close(r->fd);
	free(r->path);
	free(r);
}

/* The `columns` attribute of /series/<name>: exactly ncols strings,
 * variable-length (ours, h5py's) or fixed-length. */
static int read_columns(hid_t d, const char *name, int ncols, char ***out, struct sw_err *err)
{
	hid_t a = H5I_INVALID_HID, ft = H5I_INVALID_HID, mt = H5I_INVALID_HID;
	hid_t space = H5I_INVALID_HID;
	char **cols = calloc((size_t)ncols, sizeof *cols), **vl = NULL, *fixed = NULL;
	htri_t exists = H5Aexists(d, "columns");
	int rc;

	*out = NULL;
	if (!cols)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	if (exists <= 0) {
		rc = sw_fail(err, SW_EDATA, "/series/%s: 2-D series without a 'columns' attribute", name);
		goto out;
	}
	rc = sw_fail(err, SW_EDATA, "/series/%s: 'columns' is not %d strings", name, ncols);
	if ((a = H5Aopen(d, "columns", H5P_DEFAULT)) < 0 || (ft = H5Aget_type(a)) < 0 ||
	    (space = H5Aget_space(a)) < 0 || H5Tget_class(ft) != H5T_STRING ||
	    H5Sget_simple_extent_npoints(space) != ncols || (mt = H5Tcopy(H5T_C_S1)) < 0)
		goto out;
	if (H5Tis_variable_str(ft) > 0) {
		vl = calloc((size_t)ncols, sizeof *vl);
		if (!vl || H5Tset_size(mt, H5T_VARIABLE) < 0 || H5Tset_cset(mt, H5Tget_cset(ft)) < 0 ||
		    H5Aread(a, mt, vl) < 0) {
			free(vl);
			vl = NULL;
			goto out;
		}
		for (int j = 0; j < ncols; j++)
			if (!(cols[j] = strdup(vl[j] ? vl[j] : "")))
				rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		H5Dvlen_reclaim(mt, space, H5P_DEFAULT, vl);
		free(vl);
		if (rc == SW_ESOFTWARE)
			goto out;
	} else {
		size_t size = H5Tget_size(ft);
		if (size == 0 || size > 4096 || H5Tset_size(mt, size) < 0 ||
		    H5Tset_strpad(mt, H5T_STR_NULLPAD) < 0 ||
		    !(fixed = calloc((size_t)ncols, size)) || H5Aread(a, mt, fixed) < 0)
			goto out;
		for (int j = 0; j < ncols; j++)
			if (!(cols[j] = strndup(fixed + (size_t)j * size, size))) {
				rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
				goto out;
			}
	}
	for (int j = 0; j < ncols; j++)
		if (!cols[j][0]) {
			rc = sw_fail(err, SW_EDATA, "/series/%s: column %d has an empty name", name, j);
			goto out;
		}
	*out = cols;
	cols = NULL;
	rc = SW_OK;
out:
	free(fixed);
	if (mt >= 0)
		H5Tclose(mt);
	if (space >= 0)
		H5Sclose(space);
	if (ft >= 0)
		H5Tclose(ft);
	if (a >= 0)
		H5Aclose(a);
	free_strings(cols, ncols);
	return rc;
}

/* Rank and dims of d, which must be 1-D or 2-D. */
static int series_shape(hid_t d, const char *name, int *rank, hsize_t dims[2],
			hsize_t max[2], struct sw_err *err)
{
	hid_t space = H5Dget_space(d);
	int rc = SW_OK;

	*rank = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);   /* scalar: 0 */
	if (*rank < 1 || *rank > 2)
		rc = sw_fail(err, SW_EDATA, "/series/%s: rank %d (a series is 1-D or 2-D)", name, *rank);
	else if (H5Sget_simple_extent_dims(space, dims, max) < 0)
		rc = sw_fail(err, SW_EDATA, "/series/%s: cannot read its shape", name);
	else if (dims[0] > (hsize_t)INT64_MAX)
		rc = sw_fail(err, SW_EDATA, "/series/%s: too many rows", name);
	if (space >= 0)
		H5Sclose(space);
	return rc;
}

/* d holds integers (want_int) or numbers (integers or reals). */
static int check_type(hid_t d, const char *path, int want_int, struct sw_err *err)
{
	hid_t t = H5Dget_type(d);
	H5T_class_t c = t < 0 ? H5T_NO_CLASS : H5Tget_class(t);

	if (t >= 0)
		H5Tclose(t);
	if (c == H5T_INTEGER || (c == H5T_FLOAT && !want_int))
		return SW_OK;
	return sw_fail(err, SW_EDATA, "%s: not %s dataset", path, want_int ? "an integer" : "a numeric");
}

/* A dataset of the trace at path (one of /series, /status, /session): a
 * hard link (a soft or external link could lead anywhere) to a dataset
 * whose data is inside the file and decodable here. */
static int open_dataset(hid_t file, const char *path, hid_t *d, struct sw_err *err)
{
	hid_t o;
	int rc;

	*d = H5I_INVALID_HID;
	if ((rc = h5io_hard_path(file, path, NULL, err)))
		return rc;
	o = H5Oopen(file, path, H5P_DEFAULT);
	if (o < 0 || H5Iget_type(o) != H5I_DATASET) {
		if (o >= 0)
			H5Oclose(o);
		return sw_fail(err, SW_EDATA, "%s: not a dataset", path);
	}
	*d = o;
	return h5io_check_layout(o, path, err);
}

static int open_member(hid_t file, const char *name, hid_t *d, struct sw_err *err)
{
	char path[TRACE_MAX_NAME + 16];

	snprintf(path, sizeof path, "/series/%s", name);
	return open_dataset(file, path, d, err);
}

struct names {
	char **v;
	int n, cap;
	int failed;             /* out of memory, or too many */
};

static herr_t collect(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
	struct names *l = data;

	(void)g;
	(void)info;
	if (l->n == TRACE_MAX_SERIES + 1) {
		l->failed = 2;
		return -1;
	}
	if (l->n == l->cap) {
		int cap = l->cap ? 2 * l->cap : 16;
		char **v = realloc(l->v, (size_t)cap * sizeof *v);
		if (!v) {
			l->failed = 1;
			return -1;
		}
		l->v = v;
		l->cap = cap;
	}
	if (!(l->v[l->n] = strdup(name))) {
		l->failed = 1;
		return -1;
	}
	l->n++;
	return 0;
}

/* The members of /series in creation order where the file keeps it. */
static int list_series(hid_t g, struct names *l, struct sw_err *err)
{
	hid_t gcpl = H5Gget_create_plist(g);
	unsigned order = 0;
	H5_index_t index = H5_INDEX_NAME;

	if (gcpl >= 0) {
		if (H5Pget_link_creation_order(gcpl, &order) >= 0 && (order & H5P_CRT_ORDER_TRACKED))
			index = H5_INDEX_CRT_ORDER;
		H5Pclose(gcpl);
	}
	if (H5Literate(g, index, H5_ITER_INC, NULL, collect, l) >= 0)
		return SW_OK;
	if (l->failed == 1)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	if (l->failed == 2)
		return sw_fail(err, SW_EDATA, "/series: more than %d series", TRACE_MAX_SERIES);
	return sw_fail(err, SW_EDATA, "cannot list /series");
}

static int open_series(struct trace_reader *r, hid_t g, struct sw_err *err)
{
	struct names l = {0};
	int rc, rank;
	hsize_t dims[2], max[2];

	if ((rc = list_series(g, &l, err)))
		goto out;
	r->s = calloc((size_t)(l.n ? l.n : 1), sizeof *r->s);
	if (!r->s) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	for (int i = 0; i < l.n; i++) {
		struct rseries *s;
		hid_t d;

		if (!strcmp(l.v[i], "step"))
			continue;
		rc = open_member(r->file, l.v[i], &d, err);
		if (d < 0)
			goto out;
		s = &r->s[r->n++];
		s->d = d;
		s->name = l.v[i];
		l.v[i] = NULL;
		if (rc)
			goto out;
		char path[TRACE_MAX_NAME + 16];
		snprintf(path, sizeof path, "/series/%s", s->name);
		if ((rc = check_type(d, path, 0, err)) ||
		    (rc = series_shape(d, s->name, &rank, dims, max, err)))
			goto out;
		if (rank == 2) {
			if (dims[1] < 1 || dims[1] > TRACE_MAX_COLS) {
				rc = sw_fail(err, SW_EDATA, "/series/%s: %llu columns", s->name,
					     (unsigned long long)dims[1]);
				goto out;
			}
			s->ncols = (int)dims[1];
			if ((rc = read_columns(d, s->name, s->ncols, &s->cols, err)))
				goto out;
		}
	}
	rc = SW_OK;
out:
	free_strings(l.v, l.n);
	return rc;
}

/* The step index and /status (optional; one integer). */
static int open_step_status(struct trace_reader *r, hid_t g, struct sw_err *err)
{
	hsize_t dims[2], max[2];
	hssize_t npoints;
	hid_t space;
	htri_t has;
	int rank, rc;

	has = H5Lexists(g, "step", H5P_DEFAULT);
	if (has <= 0)
		return sw_fail(err, SW_EDATA, "missing dataset /series/step");
	if ((rc = open_member(r->file, "step", &r->step, err)) ||
	    (rc = check_type(r->step, "/series/step", 1, err)) ||
	    (rc = series_shape(r->step, "step", &rank, dims, max, err)))
		return rc;
	if (rank != 1)
		return sw_fail(err, SW_EDATA, "/series/step: rank 2 (the step index is 1-D)");
	for (int k = 0; k < 2; k++) {
		const char *path = k ? "/session" : "/status";
		hid_t *d = k ? &r->session : &r->status;

		if ((rc = h5io_hard_path(r->file, path, &has, err)))
			return rc;
		if (!has)
			continue;
		if ((rc = open_dataset(r->file, path, d, err)) ||
		    (rc = check_type(*d, path, 1, err)) ||
		    (rc = h5io_check_written(*d, path, 0, -1, NULL, err)))
			return rc;
		space = H5Dget_space(*d);
		npoints = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
		if (space >= 0)
			H5Sclose(space);
		if (npoints != 1)
			return sw_fail(err, SW_EDATA, "%s: not a single value", path);
	}
	if (r->session >= 0 &&
	    H5Dread(r->session, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &r->session_id) < 0)
		return hdf5_fail(err, SW_EIO, "/session: cannot read");
	return SW_OK;
}

/*
 * The rows that became aligned since the last look were written: their
 * chunks are stored in every dataset. A writer that stopped in its last
 * flush (killed, disk full) may have extended a dataset without storing
 * the chunk of its last row: the rows end before that chunk. A chunk
 * missing before it, a hole no writer leaves, is refused.
 */
static int check_written_rows(struct trace_reader *r, struct sw_err *err)
{
	char path[TRACE_MAX_NAME + 16];
	int64_t rows = r->rows, upto;
	int rc;

	for (int i = -1; i < r->n; i++) {
		hid_t d = i < 0 ? r->step : r->s[i].d;
		int64_t from = i < 0 ? r->step_written : r->s[i].written;

		snprintf(path, sizeof path, "/series/%s", i < 0 ? "step" : r->s[i].name);
		if ((rc = h5io_check_written(d, path, from, r->rows, &upto, err)))
			return rc;
		if (upto < rows)
			rows = upto;
	}
	r->rows = r->step_written = rows;
	for (int i = 0; i < r->n; i++)
		r->s[i].written = rows;
	return SW_OK;
}

/* The file is still the trace opened: its name names it, and /session
 * holds the number it had (no other writer took the trace over). */
static int same_trace(struct trace_reader *r, struct sw_err *err)
{
	struct stat now, opened;
	int64_t id;

	if (stat(r->path, &now) < 0) {
		if (errno == ENOENT)
			return sw_fail(err, SW_EIO, "the trace was removed");
		return sw_fail(err, sw_errno_status(errno), "%s", strerror(errno));
	}
	if (fstat(r->fd, &opened) < 0 || now.st_dev != opened.st_dev || now.st_ino != opened.st_ino)
		return sw_fail(err, SW_EIO, "the trace was replaced by another file");
	if (r->session < 0)
		return SW_OK;
	if ((r->swmr && H5Drefresh(r->session) < 0) ||
	    H5Dread(r->session, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &id) < 0)
		return hdf5_fail(err, SW_EIO, "/session: cannot read");
	if (id != r->session_id)
		return sw_fail(err, SW_EIO, "another writer took the trace over (a resumed or new run)");
	return SW_OK;
}

/* Lengths of every dataset and /status, as the file says now. */
static int read_lengths(struct trace_reader *r, struct sw_err *err)
{
	hsize_t dims[2], max[2];
	int rank, rc;

	if ((rc = series_shape(r->step, "step", &rank, dims, max, err)))
		return rc;
	r->step_len = (int64_t)dims[0];
	r->rows = r->step_len;
	for (int i = 0; i < r->n; i++) {
		struct rseries *s = &r->s[i];
		if ((rc = series_shape(s->d, s->name, &rank, dims, max, err)))
			return rc;
		if ((rank == 2 ? (int)dims[1] : 0) != s->ncols)
			return sw_fail(err, SW_EDATA, "/series/%s: its columns changed", s->name);
		s->len = (int64_t)dims[0];
		if (s->len < r->rows)
			r->rows = s->len;
	}
	r->finished = 1;        /* no /status: nobody is writing it */
	if (r->status >= 0) {
		int64_t v;
		if (H5Dread(r->status, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) < 0)
			return hdf5_fail(err, SW_EIO, "/status: cannot read");
		if (v != 0 && v != 1)
			return sw_fail(err, SW_EDATA, "/status is %lld (0: being written, 1: closed)",
				       (long long)v);
		r->finished = v == 1;
	}
	/* a closed trace has every row whole: each series as long as step
	 * (while it is written a series may run a row ahead, and a reader
	 * takes the rows all have) */
	for (int i = 0; r->finished && i < r->n; i++)
		if (r->s[i].len != r->step_len)
			return sw_fail(err, SW_EDATA, "/series/%s has %lld rows and /series/step %lld: "
				       "a closed trace's series have one row a step", r->s[i].name,
				       (long long)r->s[i].len, (long long)r->step_len);
	return SW_OK;
}

static int check_format(hid_t file, struct sw_err *err)
{
	char kind[64];
	int64_t version;
	int rc;

	if (h5io_get_str(file, "/", "scalewatch_format", kind, sizeof kind, NULL, err))
		return sw_fail(err, SW_EDATA, "not a scalewatch trace (no scalewatch_format attribute)");
	if (strcmp(kind, "trace") != 0)
		return sw_fail(err, SW_EDATA, "is a scalewatch '%s', not a trace", kind);
	if ((rc = h5io_get_i64(file, "/", "format_version", &version, NULL, err)))
		return rc;
	if (version != 1)
		return sw_fail(err, SW_EDATA, "format_version %lld is not supported (this build reads 1)",
			       (long long)version);
	return SW_OK;
}

/*
 * Open path for reading: the regular file, once, without waiting (a FIFO
 * or a device is never opened: a FIFO would block; the file is checked
 * again once open in case one was swapped in since, and is the only file
 * read from then on), then with HDF5 as an SWMR reader where the file
 * allows it (swmr set), else as a plain reader. HDF5's flock is off: a
 * reader must never block the writer (SWMR keeps the two apart; the
 * superblock still refuses a non-SWMR writer). On failure nothing stays
 * open.
 */
static int open_file(const char *path, int *fdp, hid_t *filep, int *swmr, struct sw_err *err)
{
	hid_t fapl = H5I_INVALID_HID, file = H5I_INVALID_HID;
	struct stat st;
	int fd = -1, rc = SW_OK, changed = 0;

	*fdp = -1;
	*filep = H5I_INVALID_HID;
	*swmr = 0;
	if (stat(path, &st) < 0)
		return sw_fail(err, sw_errno_status(errno), "%s", strerror(errno));
	if (!S_ISREG(st.st_mode))
		return sw_fail(err, SW_ENOINPUT, S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return sw_fail(err, sw_errno_status(errno), "%s", strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = sw_fail(err, SW_ENOINPUT, "not a regular file");
		goto out;
	}
	if (st.st_size == 0) {
		rc = sw_fail(err, SW_EDATA, "empty file");
		goto out;
	}
	fapl = H5Pcreate(H5P_FILE_ACCESS);
	if (fapl < 0 || H5Pset_file_locking(fapl, false, true) < 0) {
		rc = sw_fail(err, SW_ESOFTWARE, "cannot set up HDF5 file access");
		goto out;
	}
	file = h5io_open_fd(path, fd, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl, &changed);
	*swmr = file >= 0;
	if (file < 0 && !changed) {
		char why[256];
		h5io_last_error(why, sizeof why);
		H5Eclear2(H5E_DEFAULT);
		file = h5io_open_fd(path, fd, H5F_ACC_RDONLY, fapl, &changed);
		if (file < 0 && !changed) {
			rc = sw_fail(err, SW_EDATA, "not a readable HDF5 file (truncated or corrupt)%s%s",
				     why[0] ? ": " : "", why);
			goto out;
		}
	}
	if (changed) {
		rc = sw_fail(err, SW_EIO, "the file was replaced while it was opened");
		if (file >= 0)
			H5Fclose(file);
		file = H5I_INVALID_HID;
	}
out:
	if (fapl >= 0)
		H5Pclose(fapl);
	if (rc) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	*fdp = fd;
	*filep = file;
	return SW_OK;
}

int trace_open(const char *path, struct trace_reader **out, struct sw_err *err)
{
	struct trace_reader *r;
	hid_t g = H5I_INVALID_HID;
	int rc, exists;

	*out = NULL;
	h5io_reader_setup();
	r = calloc(1, sizeof *r);
	if (!r)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	r->file = r->step = r->status = r->session = H5I_INVALID_HID;
	r->fd = -1;
	if (!(r->path = strdup(path))) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto fail;
	}
	if ((rc = open_file(path, &r->fd, &r->file, &r->swmr, err)))
		goto fail;
	if ((rc = check_format(r->file, err)) ||
	    (rc = h5io_hard_path(r->file, "/series", &exists, err)))
		goto fail;
	if (!exists) {
		rc = sw_fail(err, SW_EDATA, "missing group /series");
		goto fail;
	}
	g = H5Gopen2(r->file, "series", H5P_DEFAULT);
	if (g < 0) {
		rc = sw_fail(err, SW_EDATA, "/series is not a group");
		goto fail;
	}
	if ((rc = open_step_status(r, g, err)) || (rc = open_series(r, g, err)) ||
	    (rc = read_lengths(r, err)) || (rc = check_written_rows(r, err)))
		goto fail;
	H5Gclose(g);
	*out = r;
	return SW_OK;
fail:
	if (g >= 0)
		H5Gclose(g);
	trace_reader_close(r);
	return rc;
}

static int failed_read(struct trace_reader *r, int rc, struct sw_err *err);

int trace_sniff(const char *path, char *kind, size_t len)
{
	char got[32];
	struct sw_err err;
	hid_t file;
	int fd, swmr;

	if (kind && len)
		kind[0] = '\0';
	h5io_reader_setup();
	if (open_file(path, &fd, &file, &swmr, &err))
		return 0;
	if (h5io_get_str(file, "/", "scalewatch_format", got, sizeof got, NULL, &err) != SW_OK)
		got[0] = '\0';
	if (kind && len)
		snprintf(kind, len, "%s", got);
	H5Fclose(file);
	close(fd);
	H5Eclear2(H5E_DEFAULT);
	return !strcmp(got, "trace");
}

int trace_read_config(struct trace_reader *r, struct sw_config *c, int *present,
		      struct sw_err *err)
{
	struct sw_config got;
	int rc;

	if ((rc = h5io_read_config(r->file, &got, present, err)))
		return failed_read(r, rc, err);
	if (*present)
		*c = got;
	return SW_OK;
}

int trace_attr_number(struct trace_reader *r, const char *obj, const char *attr, double *v,
		      int *present, struct sw_err *err)
{
	hid_t g;
	int rc;

	*present = 0;
	if ((rc = h5io_hard_path(r->file, obj, present, err)))
		return failed_read(r, rc, err);
	if (!*present)
		return SW_OK;
	g = H5Oopen(r->file, obj, H5P_DEFAULT);
	if (g < 0)
		return failed_read(r, sw_fail(err, SW_EDATA, "%s cannot be opened", obj), err);
	rc = h5io_get_f64(g, obj, attr, v, present, err);
	H5Oclose(g);
	return failed_read(r, rc, err);
}

/* A read of the trace failed with rc: when another writer took it over
 * (or it was replaced) meanwhile, that is what to say. */
static int failed_read(struct trace_reader *r, int rc, struct sw_err *err)
{
	struct sw_err why;
	int changed;

	if (rc == SW_OK || rc == SW_ESOFTWARE || !(changed = same_trace(r, &why)))
		return rc;
	if (err)
		*err = why;
	return changed;
}

int trace_refresh(struct trace_reader *r, int *finished, struct sw_err *err)
{
	int64_t before = r->rows;
	int rc = SW_OK;

	/* still the trace opened: not replaced, no other writer (a resumed
	 * run) took it over; asked before anything else is read from it */
	if ((rc = same_trace(r, err)))
		return rc;
	/* H5Drefresh drops what this process cached of a dataset (metadata,
	 * chunks) and reads it again as the writer last flushed it */
	if (r->swmr) {
		if (H5Drefresh(r->step) < 0 || (r->status >= 0 && H5Drefresh(r->status) < 0))
			rc = hdf5_fail(err, SW_EIO, "cannot refresh");
		for (int i = 0; i < r->n && !rc; i++)
			if (H5Drefresh(r->s[i].d) < 0)
				rc = hdf5_fail(err, SW_EIO, "cannot refresh");
	}
	if (!rc)
		rc = read_lengths(r, err);
	if (!rc && r->rows < before)
		rc = sw_fail(err, SW_EIO, "the trace lost rows (%lld, now %lld): another writer "
			     "took it over (a resumed run)", (long long)before, (long long)r->rows);
	if (!rc)
		rc = check_written_rows(r, err);
	if (finished)
		*finished = r->finished;
	return failed_read(r, rc, err);
}

int trace_verify(struct trace_reader *r, struct sw_err *err)
{
	return same_trace(r, err);
}

int trace_abandoned(const struct trace_reader *r)
{
	return !r->finished && r->fd >= 0 && writer_lock_held(r->fd) == 0;
}

int trace_nseries(const struct trace_reader *r) { return r->n; }
const char *trace_series_name(const struct trace_reader *r, int i) { return r->s[i].name; }
int trace_series_ncols(const struct trace_reader *r, int i) { return r->s[i].ncols; }
int64_t trace_rows(const struct trace_reader *r) { return r->rows; }

const char *trace_column_name(const struct trace_reader *r, int i, int j)
{
	return r->s[i].ncols ? r->s[i].cols[j] : NULL;
}

int trace_find_series(const struct trace_reader *r, const char *name)
{
	for (int i = 0; i < r->n; i++)
		if (!strcmp(r->s[i].name, name))
			return i;
	return -1;
}

/* Rows [row0, row0 + n) of d (len rows, ncols columns) into out. */
static int read_rows(hid_t d, const char *name, int64_t len, int ncols, hid_t mtype,
		     int64_t row0, int64_t n, void *out, struct sw_err *err)
{
	int rank = ncols ? 2 : 1;
	hsize_t start[2] = {(hsize_t)row0, 0}, count[2] = {(hsize_t)n, (hsize_t)ncols};
	hid_t fs = H5I_INVALID_HID, ms = H5I_INVALID_HID;
	int rc = SW_OK;

	if (row0 < 0 || n < 0 || row0 > len || n > len - row0)
		return sw_fail(err, SW_ESOFTWARE, "/series/%s: rows %lld..%lld of %lld",
			       name, (long long)row0, (long long)(row0 + n), (long long)len);
	if (n == 0)
		return SW_OK;
	if ((fs = H5Dget_space(d)) < 0 ||
	    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
	    (ms = H5Screate_simple(rank, count, NULL)) < 0 ||
	    H5Dread(d, mtype, ms, fs, H5P_DEFAULT, out) < 0) {
		char what[TRACE_MAX_NAME + 32];
		snprintf(what, sizeof what, "/series/%s: cannot read", name);
		rc = hdf5_fail(err, SW_EIO, what);
	}
	if (ms >= 0)
		H5Sclose(ms);
	if (fs >= 0)
		H5Sclose(fs);
	return rc;
}

int trace_read_steps(struct trace_reader *r, int64_t row0, int64_t n,
		     int64_t *steps, struct sw_err *err)
{
	int64_t prev = -1;
	int rc;

	/* the row before, to check the first against it */
	if (row0 > 0 && n > 0 &&
	    (rc = failed_read(r, read_rows(r->step, "step", r->step_len, 0, H5T_NATIVE_INT64, row0 - 1, 1,
					   &prev, err), err)))
		return rc;
	if ((rc = failed_read(r, read_rows(r->step, "step", r->step_len, 0, H5T_NATIVE_INT64, row0, n,
					   steps, err), err)))
		return rc;
	/* steps are counts of updates, each row a later one than the last */
	for (int64_t i = 0; i < n; i++) {
		if (steps[i] < 0 || steps[i] <= prev)
			return sw_fail(err, SW_EDATA, "/series/step: row %lld is step %lld%s%lld: "
				       "steps must increase from row to row", (long long)(row0 + i),
				       (long long)steps[i], steps[i] < 0 ? ", below " : " after ",
				       (long long)(steps[i] < 0 ? 0 : prev));
		prev = steps[i];
	}
	return SW_OK;
}

int trace_read(struct trace_reader *r, int i, int64_t row0, int64_t n,
	       double *out, struct sw_err *err)
{
	const struct rseries *s = &r->s[i];

	return failed_read(r, read_rows(s->d, s->name, s->len, s->ncols, H5T_NATIVE_DOUBLE, row0, n,
					out, err), err);
}

int trace_read_series(struct trace_reader *r, const char *name, int ncols, double **out,
		      int *present, struct sw_err *err)
{
	int i = trace_find_series(r, name), rc;
	size_t width = (size_t)(ncols > 0 ? ncols : 1);

	*out = NULL;
	*present = i >= 0;
	if (i < 0)
		return SW_OK;
	if (r->s[i].ncols != ncols)
		return sw_fail(err, SW_EDATA, "/series/%s: %d column%s, not %d", name, r->s[i].ncols,
			       r->s[i].ncols == 1 ? "" : "s", ncols);
	if ((uint64_t)r->rows > SIZE_MAX / sizeof **out / width)
		return sw_fail(err, SW_EDATA, "/series/%s: %lld rows of %zu values: too large",
			       name, (long long)r->rows, width);
	if (!(*out = malloc((r->rows ? (size_t)r->rows : 1) * width * sizeof **out)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	if ((rc = trace_read(r, i, 0, r->rows, *out, err))) {
		free(*out);
		*out = NULL;
	}
	return rc;
}

/* ---- reopening -------------------------------------------------------- */

/* The file's series are the caller's: names, column counts and names. */
static int check_same_series(const struct trace_reader *r, const struct trace_series *series,
			     int nseries, struct sw_err *err)
{
	char num[12];

	for (int i = 0; i < nseries; i++) {
		int k = trace_find_series(r, series[i].name);
		if (k < 0)
			return sw_fail(err, SW_EDATA, "the trace has no series '%s'", series[i].name);
		if (r->s[k].ncols != series[i].ncols)
			return sw_fail(err, SW_EDATA, "series '%s' has %d columns in the trace, not %d",
				       series[i].name, r->s[k].ncols, series[i].ncols);
		for (int j = 0; j < series[i].ncols; j++) {
			const char *want = column_name(&series[i], j, num, sizeof num);
			if (strcmp(r->s[k].cols[j], want))
				return sw_fail(err, SW_EDATA, "series '%s': column %d is '%s' in the trace, not '%s'",
					       series[i].name, j, r->s[k].cols[j], want);
		}
	}
	if (r->n != nseries) {
		for (int k = 0; k < r->n; k++) {
			int found = 0;
			for (int i = 0; i < nseries && !found; i++)
				found = !strcmp(r->s[k].name, series[i].name);
			if (!found)
				return sw_fail(err, SW_EDATA, "the trace has series '%s', not given", r->s[k].name);
		}
	}
	return SW_OK;
}

/* How many rows to keep: the aligned rows up to the first step > keep_step. */
static int rows_to_keep(struct trace_reader *r, int64_t keep_step, int64_t *keep,
			struct sw_err *err)
{
	enum { BLOCK = 4096 };
	int64_t steps[BLOCK];
	int rc;

	for (int64_t row0 = 0; row0 < r->rows; row0 += BLOCK) {
		int64_t n = r->rows - row0 < BLOCK ? r->rows - row0 : BLOCK;
		if ((rc = trace_read_steps(r, row0, n, steps, err)))
			return rc;
		for (int64_t k = 0; k < n; k++)
			if (steps[k] > keep_step) {
				*keep = row0 + k;
				return SW_OK;
			}
	}
	*keep = r->rows;
	return SW_OK;
}

/* Open /series/<name> for appending: its rows must be unlimited. */
static int open_appendable(hid_t file, const char *name, hid_t *d, struct sw_err *err)
{
	char path[TRACE_MAX_NAME + 16];
	hsize_t dims[2], max[2];
	int rank, rc;

	snprintf(path, sizeof path, "/series/%s", name);
	if ((*d = H5Dopen2(file, path, H5P_DEFAULT)) < 0)
		return hdf5_fail(err, SW_EDATA, path);
	if ((rc = series_shape(*d, name, &rank, dims, max, err)))
		return rc;
	if (max[0] != H5S_UNLIMITED)
		return sw_fail(err, SW_EDATA, "%s: rows not extendible, cannot append", path);
	return SW_OK;
}

int trace_reopen(const char *path, const struct trace_series *series,
		 int nseries, int64_t keep_step, struct trace_writer **out,
		 struct sw_err *err)
{
	static const int64_t running = 0;
	const int64_t session = new_session();
	struct trace_writer *w;
	struct trace_reader *r = NULL;
	hid_t fapl = H5I_INVALID_HID, sd = H5I_INVALID_HID;
	int64_t keep = 0;
	int rc, changed = 0, has_session = 0;

	/* the lock first: from here on no other writer can come */
	*out = NULL;
	if ((rc = writer_begin(path, series, nseries, 0, &w, err)))
		return rc;
	/* validate as a reader does; the rows to keep */
	if ((rc = trace_open(path, &r, err)) || (rc = check_same_series(r, series, nseries, err)) ||
	    (rc = rows_to_keep(r, keep_step, &keep, err)))
		goto out;
	if (keep > 0 && (rc = trace_read_steps(r, keep - 1, 1, &w->last_step, err)))
		goto out;
	trace_reader_close(r);
	r = NULL;

	fapl = writer_fapl(1);
	if (fapl < 0) {
		rc = sw_fail(err, SW_ESOFTWARE, "cannot set up HDF5 file access");
		goto out;
	}
	/* the file locked is the file written */
	w->file = w->lockfd >= 0
		? h5io_open_fd(path, w->lockfd, H5F_ACC_RDWR | H5F_ACC_SWMR_WRITE, fapl, &changed)
		: H5Fopen(path, H5F_ACC_RDWR | H5F_ACC_SWMR_WRITE, fapl);
	if (changed) {
		rc = sw_fail(err, SW_ECANTCREAT, "the trace was replaced while it was reopened");
		goto out;
	}
	if (w->file < 0) {
		rc = hdf5_fail(err, SW_ECANTCREAT, "cannot open for SWMR writing");
		goto out;
	}
	/* this writer's number before any row changes: a follower of the
	 * run before stops instead of reading this one's rows as its own
	 * (a trace from before /session has none, and SWMR adds no dataset) */
	if ((rc = h5io_hard_path(w->file, "/session", &has_session, err)))
		goto out;
	if (has_session &&
	    ((sd = H5Dopen2(w->file, "/session", H5P_DEFAULT)) < 0 ||
	     H5Dwrite(sd, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &session) < 0 ||
	     H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0)) {
		rc = hdf5_fail(err, SW_EIO, "cannot write /session");
		goto out;
	}
	if ((w->status = H5Dopen2(w->file, "/status", H5P_DEFAULT)) < 0) {
		rc = sw_fail(err, SW_EDATA, "no /status: not a trace this library wrote, cannot append");
		goto out;
	}
	if ((rc = open_appendable(w->file, "step", &w->step, err)))
		goto out;
	for (int i = 0; i < nseries; i++)
		if ((rc = open_appendable(w->file, series[i].name, &w->s[i].d, err)))
			goto out;
	/* drop the rows after keep_step (and a killed writer's partial row);
	 * all checked above, so no series is cut unless all are */
	for (int i = 0; i <= nseries; i++) {
		hid_t d = i < nseries ? w->s[i].d : w->step;
		int ncols = i < nseries ? w->s[i].ncols : 0;
		hsize_t size[2] = {(hsize_t)keep, (hsize_t)ncols};
		if (H5Dset_extent(d, size) < 0) {
			rc = hdf5_fail(err, SW_EIO, "cannot drop rows");
			goto out;
		}
	}
	if (H5Dwrite(w->status, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &running) < 0 ||
	    H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0) {
		rc = hdf5_fail(err, SW_EIO, "cannot write /status");
		goto out;
	}
	w->rows = keep;
	rc = SW_OK;
out:
	if (sd >= 0)
		H5Dclose(sd);
	if (fapl >= 0)
		H5Pclose(fapl);
	trace_reader_close(r);
	if (rc) {
		writer_free(w);
		return rc;
	}
	*out = w;
	return SW_OK;
}
