/*
 * traceread.c - the trace's reader (trace.h): trace_open as an SWMR
 * reader of a live or killed run, or a plain one, trace_refresh and
 * trace_verify for a follower, trace_sniff, and the rows. The layout is in
 * trace.c's opening comment, the writer in tracewrite.c.
 *
 * The reader applies h5io.c's rules for files from strangers to every
 * dataset it reads (no link out of the file, data inside it, written,
 * decodable), and opens only the regular file it checked.
 */
#include "trace.h"
#include "traceint.h"
#include "../formats/h5io.h"
#include "../base/grow.h"
#include "../base/jsonstrict.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
		trace_close_id(r->s[i].d, H5Dclose);
		free_strings(r->s[i].cols, r->s[i].ncols);
		free(r->s[i].name);
	}
	free(r->s);
	trace_close_id(r->session, H5Dclose);
	trace_close_id(r->status, H5Dclose);
	trace_close_id(r->step, H5Dclose);
	trace_close_id(r->file, H5Fclose);
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
	*out = cols;
	cols = NULL;
	rc = SW_OK;
out:
	free(fixed);
	trace_close_id(mt, H5Tclose);
	trace_close_id(space, H5Sclose);
	trace_close_id(ft, H5Tclose);
	trace_close_id(a, H5Aclose);
	free_strings(cols, ncols);
	return rc;
}

/*
 * Names, as the format has them (scalewatch-format(5)). A tool names
 * each value it prints "step", "file" (several traces), SERIES (1-D) or
 * SERIES.COLUMN (2-D): with these rules no two values print under one
 * name, so that no series can forge another's (a 1-D series named
 * residual_rms.layer0 beside residual_rms's column layer0, a column
 * twice, a series named file: JSON with a key twice, TSV with a column
 * twice). A name is at most TRACE_MAX_NAME bytes of valid UTF-8 (JSON
 * prints a byte that is not as U+FFFD: two names would print as one)
 * without a control byte or one of forbidden; "" when it is one, else
 * what is wrong.
 */
static const char *name_fault(const char *s, const char *forbidden)
{
	size_t len = strlen(s);

	if (!len)
		return "is empty";
	if (len > TRACE_MAX_NAME)
		return "is longer than 255 bytes";
	for (size_t i = 0; i < len;) {
		unsigned char c = (unsigned char)s[i];
		int n = jsonstrict_utf8_len((const unsigned char *)s + i, len - i);

		if (!n)
			return "is not valid UTF-8";
		if (c < 0x20 || c == 0x7f)
			return "holds a control byte";
		if (c == '.' && strchr(forbidden, c))
			return "holds a '.' (a column prints as SERIES.COLUMN)";
		if (c == ',' && strchr(forbidden, c))
			return "holds a ',' (--series lists names with commas)";
		i += (size_t)n;
	}
	return "";
}

static int check_series_name(const char *name, struct sw_err *err)
{
	const char *fault = name_fault(name, ".,");

	if (fault[0])
		return sw_fail(err, SW_EDATA, "/series/%s: a series name that %s: refused as ambiguous",
			       name, fault);
	if (!strcmp(name, "file"))
		return sw_fail(err, SW_EDATA, "/series/file: a series named as the column that names "
			       "each row's trace (several traces): refused as ambiguous");
	return SW_OK;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Each of the ncols columns of series name a name, none twice. */
static int check_columns(const char *name, char **cols, int ncols, struct sw_err *err)
{
	char **sorted;
	int rc = SW_OK;

	for (int j = 0; j < ncols; j++) {
		const char *fault = name_fault(cols[j], ",");
		if (fault[0])
			return sw_fail(err, SW_EDATA, "/series/%s: column %d, a name that %s: refused",
				       name, j, fault);
	}
	if (!(sorted = malloc((size_t)ncols * sizeof *sorted)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	memcpy(sorted, cols, (size_t)ncols * sizeof *sorted);
	qsort(sorted, (size_t)ncols, sizeof *sorted, cmp_names);
	for (int j = 1; j < ncols && !rc; j++)
		if (!strcmp(sorted[j - 1], sorted[j]))
			rc = sw_fail(err, SW_EDATA, "/series/%s: column '%s' twice: refused as ambiguous",
				     name, sorted[j]);
	free(sorted);
	return rc;
}

/*
 * The series the format names (scalewatch-format(5), as sw-train writes
 * them, lib/runs/train.c) have a rank; the tools that read one read it at
 * that rank, and sw-trace prints what the file holds: a qk_q_rms of one
 * dimension is no trace the format describes. 0: a name the format
 * leaves free.
 */
static int format_rank(const char *name)
{
	static const char *const scalar[] = {
		"loss", "val_loss", "lr", "grad_norm", "tokens", "seconds", "out_norm", "out_norm_folded",
	};
	static const char *const per_column[] = {
		"residual_rms", "attn_out_rms", "mlp_out_rms", "sublayer_gain", "weight_rms",
		"q_head_rms", "k_head_rms", "multiplier", "qk_q_rms", "qk_k_rms", "qk_q_mult",
		"qk_k_mult", "scale_sd", "scale_anisotropy", "scale_coupling",
	};

	for (size_t i = 0; i < sizeof scalar / sizeof *scalar; i++)
		if (!strcmp(name, scalar[i]))
			return 1;
	for (size_t i = 0; i < sizeof per_column / sizeof *per_column; i++)
		if (!strcmp(name, per_column[i]))
			return 2;
	return 0;
}

/* d holds integers (want_int) or numbers (integers or reals). */
static int check_type(hid_t d, const char *path, int want_int, struct sw_err *err)
{
	hid_t t = H5Dget_type(d);
	H5T_class_t c = t < 0 ? H5T_NO_CLASS : H5Tget_class(t);

	trace_close_id(t, H5Tclose);
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
		trace_close_id(o, H5Oclose);
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
	int n;
	size_t cap;
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
	if (SW_GROW(l->v, &l->cap, (size_t)l->n + 1) < 0 || !(l->v[l->n] = strdup(name))) {
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
		/* before the name is used to open anything: a longer one would
		 * not fit the path */
		if ((rc = check_series_name(l.v[i], err)))
			goto out;
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
		    (rc = trace_series_shape(d, s->name, &rank, dims, max, err)))
			goto out;
		if (format_rank(s->name) && format_rank(s->name) != rank) {
			rc = sw_fail(err, SW_EDATA, "/series/%s: rank %d, where the format's %s is %s",
				     s->name, rank, s->name, rank == 1 ? "2-D (a column per layer, head "
				     "or tensor)" : "1-D (a value per step)");
			goto out;
		}
		if (rank == 2) {
			if (dims[1] < 1 || dims[1] > TRACE_MAX_COLS) {
				rc = sw_fail(err, SW_EDATA, "/series/%s: %llu columns", s->name,
					     (unsigned long long)dims[1]);
				goto out;
			}
			s->ncols = (int)dims[1];
			if ((rc = read_columns(d, s->name, s->ncols, &s->cols, err)) ||
			    (rc = check_columns(s->name, s->cols, s->ncols, err)))
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
	    (rc = trace_series_shape(r->step, "step", &rank, dims, max, err)))
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
		trace_close_id(space, H5Sclose);
		if (npoints != 1)
			return sw_fail(err, SW_EDATA, "%s: not a single value", path);
	}
	if (r->session >= 0 &&
	    H5Dread(r->session, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &r->session_id) < 0)
		return trace_hdf5_fail(err, SW_EIO, "/session: cannot read");
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
		return trace_hdf5_fail(err, SW_EIO, "/session: cannot read");
	if (id != r->session_id)
		return sw_fail(err, SW_EIO, "another writer took the trace over (a resumed or new run)");
	return SW_OK;
}

/* Lengths of every dataset and /status, as the file says now. */
static int read_lengths(struct trace_reader *r, struct sw_err *err)
{
	hsize_t dims[2], max[2];
	int rank, rc;

	if ((rc = trace_series_shape(r->step, "step", &rank, dims, max, err)))
		return rc;
	r->step_len = (int64_t)dims[0];
	r->rows = r->step_len;
	for (int i = 0; i < r->n; i++) {
		struct rseries *s = &r->s[i];
		if ((rc = trace_series_shape(s->d, s->name, &rank, dims, max, err)))
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
			return trace_hdf5_fail(err, SW_EIO, "/status: cannot read");
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
		trace_close_id(file, H5Fclose);
		file = H5I_INVALID_HID;
	}
out:
	trace_close_id(fapl, H5Pclose);
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
	trace_close_id(g, H5Gclose);
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
			rc = trace_hdf5_fail(err, SW_EIO, "cannot refresh");
		for (int i = 0; i < r->n && !rc; i++)
			if (H5Drefresh(r->s[i].d) < 0)
				rc = trace_hdf5_fail(err, SW_EIO, "cannot refresh");
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
	return !r->finished && r->fd >= 0 && trace_lock_held(r->fd) == 0;
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
	if (row0 < 0 || n < 0 || row0 > len || n > len - row0)
		return sw_fail(err, SW_ESOFTWARE, "/series/%s: rows %lld..%lld of %lld",
			       name, (long long)row0, (long long)(row0 + n), (long long)len);
	if (n == 0)
		return SW_OK;
	return trace_rows_io(d, name, mtype, row0, n, ncols, NULL, out, err);
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
