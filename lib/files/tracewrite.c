/*
 * tracewrite.c - the trace's SWMR writer (trace.h): trace_create,
 * trace_append, trace_close, and trace_reopen, which goes on appending to
 * the trace of a resumed run. The layout is in trace.c's opening comment,
 * the reader in traceread.c.
 *
 * trace_reopen is here rather than with the reader: it reads the trace
 * only through the reader's public API (trace_open, the series' names and
 * columns, trace_read_steps), to check it and find the rows to keep, and
 * then it is a writer: it takes the writer's lock, opens the file for
 * SWMR writing, drops rows and hands back a struct trace_writer, which
 * only this file knows.
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
 * - The file is opened O_NOFOLLOW, as a regular file of one name, and
 *   HDF5 creates or opens that descriptor's file (h5io_create_fd,
 *   h5io_open_fd): a symbolic link at the trace's name is refused, never
 *   followed, and no other name of the file is written through.
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
 */
#include "trace.h"
#include "traceint.h"
#include "../formats/h5io.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Each flush rewrites the current chunk of every series: small chunks
 * keep an append cheap, 512 rows of a scalar keep long traces in few. */
#define CHUNK_BYTES      4096

/* ---- series and sessions ---------------------------------------------- */

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
		/* "step" and "file" name the columns the reader prints
		 * beside the series (traceread.c refuses them as series) */
		if (bad_name(s->name, "/.,\t\n") || !strcmp(s->name, "step") ||
		    !strcmp(s->name, "file"))
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
	int fd;                 /* the file, open: holds the writer's lock when locked */
	int locked;             /* 0: no locks on this file system */
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
	w->fd = -1;
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
		trace_close_id(w->s[i].d, H5Dclose);
		free(w->s[i].name);
	}
	trace_close_id(w->status, H5Dclose);
	trace_close_id(w->step, H5Dclose);
	if (w->file >= 0 && H5Fclose(w->file) < 0)
		rc = -1;
	if (w->fd >= 0)
		close(w->fd);
	free(w->nan_row);
	free(w->s);
	free(w);
	return rc;
}

/* Open (O_CREAT when create) and lock path for writing: a regular file
 * of one name, never through a symbolic link. */
static int writer_take_lock(struct trace_writer *w, const char *path, int create,
			    struct sw_err *err)
{
	struct stat st;
	int got, fail = create ? SW_ECANTCREAT : SW_ENOINPUT;

	/* O_NONBLOCK: a FIFO at path is refused below, never waited on */
	w->fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | (create ? O_CREAT : 0), 0666);
	if (w->fd < 0) {
		int e = errno;
		if (e == ELOOP && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
			return sw_fail(err, SW_ECANTCREAT,
				       "a symbolic link: refused (a trace is never written through a link)");
		if (!create && (e == ENOENT || e == ENOTDIR))
			return sw_fail(err, SW_ENOINPUT, "%s", strerror(e));
		return sw_fail(err, SW_ECANTCREAT, "%s", strerror(e));
	}
	if (fstat(w->fd, &st) < 0 || !S_ISREG(st.st_mode))
		return sw_fail(err, fail, "not a regular file");
	if (st.st_nlink > 1)
		return sw_fail(err, SW_ECANTCREAT, "a file of %ju names (hard links): refused (writing it "
			       "would change the file under its other names)", (uintmax_t)st.st_nlink);
	got = trace_lock_take(w->fd);
	if (got == 1)
		return sw_fail(err, SW_ECANTCREAT,
			       "another process is writing this trace (it holds the writer's lock)");
	w->locked = got == 0;   /* got < 0: no locks on this file system: go on without */
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
	trace_close_id(dcpl, H5Pclose);
	trace_close_id(space, H5Sclose);
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
	trace_close_id(a, H5Aclose);
	trace_close_id(space, H5Sclose);
	trace_close_id(t, H5Tclose);
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
			return trace_hdf5_fail(err, SW_EIO, "cannot create a group for the run's attributes");
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
		return trace_hdf5_fail(err, SW_EIO, "cannot open the root group");
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
	rc = trace_hdf5_fail(err, SW_EIO, what);
out:
	trace_close_id(sd, H5Dclose);
	trace_close_id(dcpl, H5Pclose);
	trace_close_id(scalar, H5Sclose);
	trace_close_id(g, H5Gclose);
	trace_close_id(gcpl, H5Pclose);
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
	int rc, changed = 0;

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
	/* the file opened and locked is the file created */
	w->file = h5io_create_fd(path, w->fd, fcpl, fapl, &changed);
	if (changed) {
		rc = sw_fail(err, SW_ECANTCREAT, "the trace was replaced while it was created");
		goto fail;
	}
	if (w->file < 0) {
		rc = trace_hdf5_fail(err, SW_ECANTCREAT, "cannot create HDF5 file");
		goto fail;
	}
	if ((rc = create_layout(w, cfg, attrs, nattrs, series, err)))
		goto fail_unlink;
	if (H5Fstart_swmr_write(w->file) < 0) {
		rc = trace_hdf5_fail(err, SW_EIO, "cannot start SWMR writing");
		goto fail_unlink;
	}
	H5Pclose(fapl);
	H5Pclose(fcpl);
	*out = w;
	return SW_OK;
fail_unlink:
	if (h5io_same_inode(path, w->fd))
		unlink(path);   /* ours: we hold the lock and made it */
fail:
	trace_close_id(fapl, H5Pclose);
	trace_close_id(fcpl, H5Pclose);
	writer_free(w);
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
		if ((rc = trace_rows_io(w->s[i].d, w->s[i].name, H5T_NATIVE_DOUBLE, w->rows, 1,
					 w->s[i].ncols, v, NULL, err)))
			return rc;
	}
	if ((rc = trace_rows_io(w->step, "step", H5T_NATIVE_INT64, w->rows, 1, 0, &step, NULL, err)))
		return rc;
	if (H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0)
		return trace_hdf5_fail(err, SW_EIO, "cannot flush the trace to disk");
	w->rows++;
	w->last_step = step;
	return SW_OK;
}

int64_t trace_writer_rows(const struct trace_writer *w) { return w->rows; }

int trace_writer_last(const struct trace_writer *w, int i, double *out, struct sw_err *err)
{
	const struct wseries *s;

	if (i < 0 || i >= w->n)
		return sw_fail(err, SW_ESOFTWARE, "trace: no series %d", i);
	s = &w->s[i];
	if (!w->rows) {
		for (int j = 0; j < (s->ncols ? s->ncols : 1); j++)
			out[j] = NAN;
		return SW_OK;
	}
	return trace_rows_io(s->d, s->name, H5T_NATIVE_DOUBLE, w->rows - 1, 1, s->ncols, NULL, out, err);
}

int trace_close(struct trace_writer *w, struct sw_err *err)
{
	static const int64_t finished = 1;
	int rc = SW_OK;

	if (!w)
		return SW_OK;
	if (H5Dwrite(w->status, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &finished) < 0)
		rc = trace_hdf5_fail(err, SW_EIO, "cannot write /status");
	if (writer_free(w) < 0 && !rc)
		rc = trace_hdf5_fail(err, SW_EIO, "cannot finish writing the trace (disk full?)");
	return rc;
}

/* ---- reopening -------------------------------------------------------- */

/* The file's series are the caller's: names, column counts and names. */
static int check_same_series(const struct trace_reader *r, const struct trace_series *series,
			     int nseries, struct sw_err *err)
{
	int n = trace_nseries(r);
	char num[12];

	for (int i = 0; i < nseries; i++) {
		int k = trace_find_series(r, series[i].name);
		if (k < 0)
			return sw_fail(err, SW_EDATA, "the trace has no series '%s'", series[i].name);
		if (trace_series_ncols(r, k) != series[i].ncols)
			return sw_fail(err, SW_EDATA, "series '%s' has %d columns in the trace, not %d",
				       series[i].name, trace_series_ncols(r, k), series[i].ncols);
		for (int j = 0; j < series[i].ncols; j++) {
			const char *want = column_name(&series[i], j, num, sizeof num);
			const char *got = trace_column_name(r, k, j);
			if (strcmp(got, want))
				return sw_fail(err, SW_EDATA, "series '%s': column %d is '%s' in the trace, not '%s'",
					       series[i].name, j, got, want);
		}
	}
	if (n != nseries) {
		for (int k = 0; k < n; k++) {
			const char *name = trace_series_name(r, k);
			int found = 0;
			for (int i = 0; i < nseries && !found; i++)
				found = !strcmp(name, series[i].name);
			if (!found)
				return sw_fail(err, SW_EDATA, "the trace has series '%s', not given", name);
		}
	}
	return SW_OK;
}

/* How many rows to keep: the aligned rows up to the first step > keep_step. */
static int rows_to_keep(struct trace_reader *r, int64_t keep_step, int64_t *keep,
			struct sw_err *err)
{
	enum { BLOCK = 4096 };
	int64_t steps[BLOCK], rows = trace_rows(r);
	int rc;

	for (int64_t row0 = 0; row0 < rows; row0 += BLOCK) {
		int64_t n = rows - row0 < BLOCK ? rows - row0 : BLOCK;
		if ((rc = trace_read_steps(r, row0, n, steps, err)))
			return rc;
		for (int64_t k = 0; k < n; k++)
			if (steps[k] > keep_step) {
				*keep = row0 + k;
				return SW_OK;
			}
	}
	*keep = rows;
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
		return trace_hdf5_fail(err, SW_EDATA, path);
	if ((rc = trace_series_shape(*d, name, &rank, dims, max, err)))
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
	w->file = h5io_open_fd(path, w->fd, H5F_ACC_RDWR | H5F_ACC_SWMR_WRITE, fapl, &changed);
	if (changed) {
		rc = sw_fail(err, SW_ECANTCREAT, "the trace was replaced while it was reopened");
		goto out;
	}
	if (w->file < 0) {
		rc = trace_hdf5_fail(err, SW_ECANTCREAT, "cannot open for SWMR writing");
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
		rc = trace_hdf5_fail(err, SW_EIO, "cannot write /session");
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
			rc = trace_hdf5_fail(err, SW_EIO, "cannot drop rows");
			goto out;
		}
	}
	if (H5Dwrite(w->status, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &running) < 0 ||
	    H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0) {
		rc = trace_hdf5_fail(err, SW_EIO, "cannot write /status");
		goto out;
	}
	w->rows = keep;
	rc = SW_OK;
out:
	trace_close_id(sd, H5Dclose);
	trace_close_id(fapl, H5Pclose);
	trace_reader_close(r);
	if (rc) {
		writer_free(w);
		return rc;
	}
	*out = w;
	return SW_OK;
}
