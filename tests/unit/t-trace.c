/*
 * Unit tests of the trace module (lib/files/trace.c, tracewrite.c, traceread.c): what the writer appends
 * reads back bit for bit, 2-D series keep their columns, a reopen drops
 * the rows after keep_step and goes on, a reader sees the rows of a
 * writer running in another process and of one killed with SIGKILL, a
 * second writer is refused, and malformed files are SW_EDATA with a
 * message, never a crash.
 */
#include <fcntl.h>
#include <hdf5.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../lib/formats/h5io.h"
#include "../../lib/files/trace.h"
#include "tap.h"

static const struct sw_config cfg = {
	.arch = "llama", .vocab_size = 11, .d_model = 4, .n_layers = 2, .n_heads = 2,
	.n_kv_heads = 1, .head_dim = 2, .d_ff = 6, .seq_len = 8, .rope_theta = 1e4,
	.norm_eps = 1e-5, .tie_embeddings = 1, .multipliers = "none",
};

static const char *const heads[] = {"h0", "h1"};
static const struct trace_series series[] = {
	{"loss", 0, NULL}, {"heads", 2, heads}, {"anon", 3, NULL},
};
enum { NSERIES = 3 };

/* Row r: step 100 + 7r; loss r/3 (not dyadic: bits must survive), unknown
 * at r == 2 (NULL); heads {r, -r}; anon {r + 0.5, NaN, 1e300}. */
static int64_t step_of(int64_t r) { return 100 + 7 * r; }

static void row_values(int64_t r, double *loss, double *h, double *a)
{
	*loss = r == 2 ? NAN : (double)r / 3;
	h[0] = (double)r;
	h[1] = -(double)r;
	a[0] = (double)r + 0.5;
	a[1] = NAN;
	a[2] = 1e300;
}

static int append_rows(struct trace_writer *w, int64_t r0, int64_t r1, struct sw_err *err)
{
	for (int64_t r = r0; r < r1; r++) {
		double loss, h[2], a[3];
		const double *v[NSERIES] = {&loss, h, a};
		row_values(r, &loss, h, a);
		if (r == 2)
			v[0] = NULL;
		if (trace_append(w, step_of(r), v, err))
			return 0;
	}
	return 1;
}

static int same(double got, double want)
{
	return isnan(want) ? isnan(got) : memcmp(&got, &want, sizeof got) == 0;
}

/* Rows [r0, r1) of the trace are rows_values' rows r0.. (exactly). */
static int rows_are(struct trace_reader *r, int64_t r0, int64_t r1)
{
	int64_t n = r1 - r0, steps[16];
	double loss[16], h[32], a[48];
	struct sw_err err;

	if (n > 16 || trace_read_steps(r, r0, n, steps, &err) || trace_read(r, 0, r0, n, loss, &err) ||
	    trace_read(r, 1, r0, n, h, &err) || trace_read(r, 2, r0, n, a, &err))
		return 0;
	for (int64_t k = 0; k < n; k++) {
		double wl, wh[2], wa[3];
		row_values(r0 + k, &wl, wh, wa);
		if (steps[k] != step_of(r0 + k) || !same(loss[k], wl) || !same(h[2 * k], wh[0]) ||
		    !same(h[2 * k + 1], wh[1]) || !same(a[3 * k], wa[0]) || !same(a[3 * k + 1], wa[1]) ||
		    !same(a[3 * k + 2], wa[2]))
			return 0;
	}
	return 1;
}

/* ---- malformed files, built with plain HDF5 ----------------------------- */

enum defect {
	GOOD, NO_FORMAT, CHECKPOINT, VERSION2, NO_SERIES, NO_STEP, FLOAT_STEP, RANK3,
	NO_COLUMNS, SHORT_COLUMNS, INT_COLUMNS, FIXED_COLUMNS, GROUP_SERIES, STRING_SERIES,
	SCALAR_SERIES, STATUS7, SOFT_LINK, NDEFECTS
};

static const struct {
	const char *title, *msg;    /* msg NULL: opens fine */
} defects[NDEFECTS] = {
	[GOOD] = {"a well-formed trace written without the library", NULL},
	[NO_FORMAT] = {"no scalewatch_format", "not a scalewatch trace (no scalewatch_format attribute)"},
	[CHECKPOINT] = {"a checkpoint", "is a scalewatch 'checkpoint', not a trace"},
	[VERSION2] = {"format_version 2", "format_version 2 is not supported (this build reads 1)"},
	[NO_SERIES] = {"no /series", "missing group /series"},
	[NO_STEP] = {"no /series/step", "missing dataset /series/step"},
	[FLOAT_STEP] = {"float steps", "/series/step: not an integer dataset"},
	[RANK3] = {"a 3-D series", "/series/loss: rank 3 (a series is 1-D or 2-D)"},
	[NO_COLUMNS] = {"2-D without columns", "/series/heads: 2-D series without a 'columns' attribute"},
	[SHORT_COLUMNS] = {"one name for two columns", "/series/heads: 'columns' is not 2 strings"},
	[INT_COLUMNS] = {"columns as integers", "/series/heads: 'columns' is not 2 strings"},
	[FIXED_COLUMNS] = {"fixed-length column names (other writers)", NULL},
	[GROUP_SERIES] = {"a group among the series", "/series/loss: not a dataset"},
	[STRING_SERIES] = {"a string series", "/series/loss: not a numeric dataset"},
	[SCALAR_SERIES] = {"a scalar dataset as series", "/series/loss: rank 0 (a series is 1-D or 2-D)"},
	[STATUS7] = {"/status 7", "/status is 7 (0: being written, 1: closed)"},
	[SOFT_LINK] = {"a soft link among the series",
		       "/series/loss: soft link: refused (every object must be a hard link)"},
};

static hid_t make_dataset(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims,
			  const void *data)
{
	hid_t sp = rank ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR);
	hid_t d = H5Dcreate2(loc, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (data)
		H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
	H5Sclose(sp);
	return d;
}

static void put_strings(hid_t obj, const char *name, int n, const char *const *v, int fixed)
{
	hsize_t dim = (hsize_t)n;
	hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate_simple(1, &dim, NULL), a;
	char buf[4][8] = {{0}};

	H5Tset_size(t, fixed ? 8 : H5T_VARIABLE);
	a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
	if (fixed) {
		for (int i = 0; i < n; i++)
			strncpy(buf[i], v[i], 7);
		H5Awrite(a, t, buf);
	} else {
		H5Awrite(a, t, v);
	}
	H5Aclose(a);
	H5Sclose(sp);
	H5Tclose(t);
}

/* A trace-like file as another writer might make it (v110 format, as
 * h5py with libver="latest"), with defect x. */
static void make_file(const char *path, enum defect x)
{
	hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), f, g, d;
	struct sw_err err;
	int64_t steps[3] = {0, 10, 20}, status = 7;
	double fsteps[3] = {0, 10, 20}, loss[3] = {3, 2.5, 2}, h[6] = {1, 2, 3, 4, 5, 6};
	hsize_t n3[1] = {3}, n32[2] = {3, 2}, n311[3] = {3, 1, 1}, n1[1] = {1};
	const char *const names[] = {"a", "b"};

	H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
	f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
	H5Pclose(fapl);
	if (x != NO_FORMAT)
		h5io_put_str(f, "scalewatch_format", x == CHECKPOINT ? "checkpoint" : "trace", &err);
	h5io_put_i64(f, "format_version", x == VERSION2 ? 2 : 1, &err);
	if (x == NO_SERIES) {
		H5Fclose(f);
		return;
	}
	g = H5Gcreate2(f, "series", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (x == FLOAT_STEP)
		H5Dclose(make_dataset(g, "step", H5T_NATIVE_DOUBLE, 1, n3, fsteps));
	else if (x != NO_STEP)
		H5Dclose(make_dataset(g, "step", H5T_NATIVE_INT64, 1, n3, steps));
	if (x == RANK3) {
		H5Dclose(make_dataset(g, "loss", H5T_NATIVE_DOUBLE, 3, n311, loss));
	} else if (x == GROUP_SERIES) {
		H5Gclose(H5Gcreate2(g, "loss", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
	} else if (x == STRING_SERIES) {
		hid_t t = H5Tcopy(H5T_C_S1);
		H5Tset_size(t, 4);
		H5Dclose(make_dataset(g, "loss", t, 1, n3, "abcdefghijkl"));
		H5Tclose(t);
	} else if (x == SCALAR_SERIES) {
		H5Dclose(make_dataset(g, "loss", H5T_NATIVE_DOUBLE, 0, NULL, loss));
	} else if (x == SOFT_LINK) {
		H5Dclose(make_dataset(f, "elsewhere", H5T_NATIVE_DOUBLE, 1, n3, loss));
		H5Lcreate_soft("/elsewhere", g, "loss", H5P_DEFAULT, H5P_DEFAULT);
	} else {
		H5Dclose(make_dataset(g, "loss", H5T_NATIVE_DOUBLE, 1, n3, loss));
	}
	d = make_dataset(g, "heads", H5T_NATIVE_DOUBLE, 2, n32, h);
	if (x == SHORT_COLUMNS) {
		put_strings(d, "columns", 1, names, 0);
	} else if (x == INT_COLUMNS) {
		hid_t sp = H5Screate_simple(1, n1, NULL), a;
		int64_t two[2] = {1, 2};
		hsize_t n2 = 2;
		H5Sset_extent_simple(sp, 1, &n2, NULL);
		a = H5Acreate2(d, "columns", H5T_NATIVE_INT64, sp, H5P_DEFAULT, H5P_DEFAULT);
		H5Awrite(a, H5T_NATIVE_INT64, two);
		H5Aclose(a);
		H5Sclose(sp);
	} else if (x != NO_COLUMNS) {
		put_strings(d, "columns", 2, names, x == FIXED_COLUMNS);
	}
	H5Dclose(d);
	if (x == STATUS7)
		H5Dclose(make_dataset(f, "status", H5T_NATIVE_INT64, 0, NULL, &status));
	H5Gclose(g);
	H5Fclose(f);
}

static void malformed(const char *dir)
{
	char path[256], cmd[600];
	struct trace_reader *r;
	struct sw_err err;
	int rc;

	snprintf(path, sizeof path, "%s/bad.h5", dir);
	for (int x = 0; x < NDEFECTS; x++) {
		make_file(path, (enum defect)x);
		err.msg[0] = '\0';
		rc = trace_open(path, &r, &err);
		if (!defects[x].msg) {
			/* no creation order kept: the series come in name order */
			ok(rc == SW_OK && trace_rows(r) == 3 && trace_nseries(r) == 2 &&
			   trace_find_series(r, "heads") == 0 && !strcmp(trace_column_name(r, 0, 1), "b"),
			   "%s: reads (%s)", defects[x].title, rc ? err.msg : "3 rows");
		} else {
			ok(rc == SW_EDATA && !r && !strcmp(err.msg, defects[x].msg), "%s: SW_EDATA, '%s'",
			   defects[x].title, err.msg);
		}
		trace_reader_close(r);
	}

	/* reopening refuses what it cannot append to, and changes nothing */
	{
		static const char *const ab[] = {"a", "b"};
		static const struct trace_series foreign[] = {{"heads", 2, ab}, {"loss", 0, NULL}};
		struct trace_writer *w;
		int64_t zero = 0;
		hid_t f;

		make_file(path, GOOD);
		ok(trace_reopen(path, foreign, 2, 1000, &w, &err) == SW_EDATA &&
		   !strcmp(err.msg, "no /status: not a trace this library wrote, cannot append"),
		   "reopen of a trace without /status: SW_EDATA (%s)", err.msg);
		f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
		H5Dclose(make_dataset(f, "status", H5T_NATIVE_INT64, 0, NULL, &zero));
		H5Fclose(f);
		ok(trace_reopen(path, foreign, 2, 10, &w, &err) == SW_EDATA &&
		   !strcmp(err.msg, "/series/step: rows not extendible, cannot append"),
		   "reopen of fixed-size series: SW_EDATA (%s)", err.msg);
		ok(trace_open(path, &r, &err) == SW_OK && trace_rows(r) == 3,
		   "no row dropped");
		trace_reader_close(r);
	}

	/* the first half of a real trace */
	make_file(path, GOOD);
	snprintf(cmd, sizeof cmd, "head -c 1200 %s >%s/half.h5", path, dir);
	snprintf(path, sizeof path, "%s/half.h5", dir);
	rc = system(cmd) == 0 ? trace_open(path, &r, &err) : -1;
	ok(rc == SW_EDATA && strstr(err.msg, "not a readable HDF5 file"), "truncated: SW_EDATA (%s)", err.msg);
	snprintf(path, sizeof path, "%s/empty.h5", dir);
	close(open(path, O_CREAT | O_WRONLY, 0644));
	ok(trace_open(path, &r, &err) == SW_EDATA && !strcmp(err.msg, "empty file"), "empty file: SW_EDATA");
	snprintf(path, sizeof path, "%s/text.h5", dir);
	snprintf(cmd, sizeof cmd, "echo 'not hdf5' >%s", path);
	rc = system(cmd) == 0 ? trace_open(path, &r, &err) : -1;
	ok(rc == SW_EDATA && strstr(err.msg, "not a readable HDF5 file"), "text file: SW_EDATA");
	ok(trace_open(dir, &r, &err) == SW_ENOINPUT && !strcmp(err.msg, "is a directory"),
	   "a directory: SW_ENOINPUT");
	snprintf(path, sizeof path, "%s/none.h5", dir);
	ok(trace_open(path, &r, &err) == SW_ENOINPUT && !strcmp(err.msg, "No such file or directory"),
	   "no file: SW_ENOINPUT");
}

/* ---- writers in another process ---------------------------------------- */

static void send_byte(int fd) { (void)!write(fd, "x", 1); }
static int wait_byte(int fd) { char c; return read(fd, &c, 1) == 1; }

/* The child of a fork: write rows [0, 3), tell the parent; unless killed
 * meanwhile, write [3, 5) when told, tell; close when told, tell. */
static void child_writer(const char *path, int to_parent, int from_parent)
{
	struct trace_writer *w;
	struct sw_err err;

	if (trace_create(path, &cfg, NULL, 0, series, NSERIES, &w, &err) || !append_rows(w, 0, 3, &err))
		_exit(1);
	send_byte(to_parent);
	if (!wait_byte(from_parent) || !append_rows(w, 3, 5, &err))
		_exit(1);
	send_byte(to_parent);
	if (!wait_byte(from_parent) || trace_close(w, &err))
		_exit(1);
	send_byte(to_parent);
	_exit(0);
}

static pid_t start_writer(const char *path, int *to_child, int *from_child)
{
	int up[2], down[2];
	pid_t pid;

	if (pipe(up) || pipe(down))
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		child_writer(path, up[1], down[0]);
	}
	close(up[1]);
	close(down[0]);
	*from_child = up[0];
	*to_child = down[1];
	return pid;
}

static void live_and_killed(const char *dir)
{
	char path[256];
	struct trace_reader *r = NULL;
	struct trace_writer *w;
	struct sw_err err;
	int to, from, status, finished = -1, rc;
	pid_t pid;

	snprintf(path, sizeof path, "%s/live.h5", dir);
	pid = start_writer(path, &to, &from);
	ok(pid > 0 && wait_byte(from), "a writer process has flushed 3 rows");
	rc = trace_open(path, &r, &err);
	ok(rc == SW_OK, "open while it writes (%s)", rc ? err.msg : "ok");
	if (rc)
		return;
	ok(trace_rows(r) == 3 && rows_are(r, 0, 3), "the reader sees the 3 rows, exactly");
	ok(trace_refresh(r, &finished, &err) == SW_OK && !finished && !trace_abandoned(r),
	   "not finished, not abandoned: the writer holds its lock");
	ok(trace_create(path, NULL, NULL, 0, series, NSERIES, &w, &err) == SW_ECANTCREAT &&
	   strstr(err.msg, "another process is writing this trace"), "a second writer: SW_ECANTCREAT (%s)", err.msg);
	ok(trace_reopen(path, series, NSERIES, 1000, &w, &err) == SW_ECANTCREAT,
	   "reopen while it writes: SW_ECANTCREAT");
	send_byte(to);
	ok(wait_byte(from) && trace_refresh(r, &finished, &err) == SW_OK && trace_rows(r) == 5 &&
	   !finished && rows_are(r, 3, 5), "refresh: the 2 rows appended since, exactly");
	send_byte(to);
	ok(wait_byte(from) && trace_refresh(r, &finished, &err) == SW_OK && finished &&
	   trace_rows(r) == 5 && !trace_abandoned(r), "refresh after its close: finished");
	ok(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "the writer exited 0");
	trace_reader_close(r);
	close(to);
	close(from);

	/* SIGKILL after 3 flushed rows */
	snprintf(path, sizeof path, "%s/killed.h5", dir);
	pid = start_writer(path, &to, &from);
	ok(pid > 0 && wait_byte(from) && kill(pid, SIGKILL) == 0 && waitpid(pid, &status, 0) == pid &&
	   WIFSIGNALED(status), "a writer killed with SIGKILL after 3 rows");
	close(to);
	close(from);
	rc = trace_open(path, &r, &err);
	ok(rc == SW_OK, "its trace opens (no h5clear): %s", rc ? err.msg : "ok");
	if (rc)
		return;
	ok(trace_rows(r) == 3 && rows_are(r, 0, 3), "and reads back to its last flush, exactly");
	ok(trace_refresh(r, &finished, &err) == SW_OK && !finished && trace_abandoned(r),
	   "not finished, abandoned: nobody holds the writer's lock");
	/* a resumed run in another process; this reader stays open: readers
	 * never block a writer */
	fflush(stdout);
	pid = fork();
	if (pid == 0) {     /* a new image: a fork would share this process's open file */
		execl("/proc/self/exe", "t-trace.t", "--resume", path, (char *)NULL);
		_exit(127);
	}
	ok(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "another process reopens the killed trace, appends row 3, closes; a reader is open");
	/* the reader opened the killed run: it must not take the resumed
	 * run's rows for its own */
	ok(trace_refresh(r, &finished, &err) == SW_EIO && strstr(err.msg, "took"),
	   "the open reader is told another writer took the trace over: %s", err.msg);
	trace_reader_close(r);
	rc = trace_open(path, &r, &err);
	ok(rc == SW_OK && trace_rows(r) == 4 && rows_are(r, 0, 4) &&
	   trace_refresh(r, &finished, &err) == SW_OK && finished,
	   "opened again: 4 rows, finished");
	if (!rc)
		trace_reader_close(r);
}

/* ---- written and read in this process ------------------------------------ */

static void round_trip(const char *dir)
{
	char path[256];
	struct trace_writer *w;
	struct trace_reader *r;
	struct sw_err err;
	int finished = -1, rc;
	double buf[8];

	snprintf(path, sizeof path, "%s/t.h5", dir);
	rc = trace_create(path, &cfg, NULL, 0, series, NSERIES, &w, &err);
	ok(rc == SW_OK, "create (%s)", rc ? err.msg : "ok");
	if (rc)
		return;
	ok(append_rows(w, 0, 5, &err) && trace_writer_rows(w) == 5, "append 5 rows");
	{
		double loss = 1, h[2] = {0}, a[3] = {0};
		const double *v[NSERIES] = {&loss, h, a};
		ok(trace_append(w, step_of(4), v, &err) == SW_ESOFTWARE && trace_writer_rows(w) == 5 &&
		   !strcmp(err.msg, "trace: step 128 after step 128: steps must increase"),
		   "a step that does not increase: SW_ESOFTWARE, nothing written");
	}
	ok(trace_close(w, &err) == SW_OK, "close");

	rc = trace_open(path, &r, &err);
	ok(rc == SW_OK, "open (%s)", rc ? err.msg : "ok");
	if (rc)
		return;
	ok(trace_nseries(r) == 3 && !strcmp(trace_series_name(r, 0), "loss") &&
	   !strcmp(trace_series_name(r, 1), "heads") && !strcmp(trace_series_name(r, 2), "anon"),
	   "series in the order written (step is not one)");
	ok(trace_series_ncols(r, 0) == 0 && trace_series_ncols(r, 1) == 2 && trace_series_ncols(r, 2) == 3,
	   "column counts 0, 2, 3");
	ok(!trace_column_name(r, 0, 0) && !strcmp(trace_column_name(r, 1, 0), "h0") &&
	   !strcmp(trace_column_name(r, 1, 1), "h1") && !strcmp(trace_column_name(r, 2, 0), "0") &&
	   !strcmp(trace_column_name(r, 2, 2), "2"), "column names, numbers when none were given");
	ok(trace_find_series(r, "heads") == 1 && trace_find_series(r, "step") == -1 &&
	   trace_find_series(r, "nope") == -1, "find_series");
	ok(trace_rows(r) == 5 && rows_are(r, 0, 5), "5 rows read back bit for bit (NaN where unknown)");
	ok(trace_read(r, 1, 4, 2, buf, &err) == SW_ESOFTWARE, "reading past the end: SW_ESOFTWARE");
	ok(trace_refresh(r, &finished, &err) == SW_OK && finished == 1 && !trace_abandoned(r),
	   "finished after close");
	trace_reader_close(r);

	/* what the file holds besides the series */
	{
		hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d;
		int64_t dm = 0, status = -1;
		char kind[16] = "";
		H5O_info_t oi;
		ok(f >= 0 && h5io_get_str(f, "/", "scalewatch_format", kind, sizeof kind, NULL, &err) == 0 &&
		   !strcmp(kind, "trace"), "closed: a plain HDF5 open works, scalewatch_format = trace");
		hid_t g = H5Gopen2(f, "/config", H5P_DEFAULT);
		ok(g >= 0 && h5io_get_i64(g, "/config", "d_model", &dm, NULL, &err) == 0 && dm == 4,
		   "/config written");
		d = H5Dopen2(f, "/status", H5P_DEFAULT);
		ok(d >= 0 && H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &status) >= 0 &&
		   status == 1, "/status = 1");
		ok(H5Oget_info_by_name2(f, "/series/loss", &oi, H5O_INFO_TIME, H5P_DEFAULT) >= 0 &&
		   oi.ctime == 0 && oi.mtime == 0, "no object timestamps");
		H5Dclose(d);
		H5Gclose(g);
		H5Fclose(f);
	}

	/* reopen: keep steps <= 114 (rows 0..2), append */
	{
		static const struct trace_series fewer[] = {{"loss", 0, NULL}, {"heads", 2, heads}};
		static const char *const other[] = {"h0", "hx"};
		struct trace_series wrong[NSERIES] = {series[0], series[1], series[2]};
		struct trace_series more[NSERIES + 1] = {series[0], series[1], series[2], {"extra", 0, NULL}};

		ok(trace_reopen(path, fewer, 2, 1000, &w, &err) == SW_EDATA &&
		   !strcmp(err.msg, "the trace has series 'anon', not given"), "reopen, a series missing: SW_EDATA");
		wrong[2].ncols = 4;
		ok(trace_reopen(path, wrong, NSERIES, 1000, &w, &err) == SW_EDATA &&
		   !strcmp(err.msg, "series 'anon' has 3 columns in the trace, not 4"), "reopen, a column count: SW_EDATA");
		wrong[2].ncols = 3;
		wrong[1].columns = other;
		ok(trace_reopen(path, wrong, NSERIES, 1000, &w, &err) == SW_EDATA &&
		   !strcmp(err.msg, "series 'heads': column 1 is 'h1' in the trace, not 'hx'"),
		   "reopen, a column name: SW_EDATA");
		ok(trace_reopen(path, more, NSERIES + 1, 1000, &w, &err) == SW_EDATA &&
		   !strcmp(err.msg, "the trace has no series 'extra'"), "reopen, an extra series: SW_EDATA");
		ok(trace_open(path, &r, &err) == SW_OK && trace_rows(r) == 5, "refused reopens changed nothing");
		trace_reader_close(r);

		rc = trace_reopen(path, series, NSERIES, 114, &w, &err);
		ok(rc == SW_OK, "reopen at step 114 (%s)", rc ? err.msg : "ok");
		if (rc)
			return;
		ok(trace_writer_rows(w) == 3, "rows 0..2 kept (steps 100, 107, 114)");
		{
			double loss = 42, h[2] = {4, 2}, a[3] = {1, 2, 3}, got[3];
			const double *v[NSERIES] = {&loss, h, a};
			int64_t s[4];
			ok(trace_append(w, 114, v, &err) == SW_ESOFTWARE, "steps still increase across a reopen");
			ok(trace_append(w, 120, v, &err) == SW_OK && trace_close(w, &err) == SW_OK,
			   "append step 120 and close");
			ok(trace_open(path, &r, &err) == SW_OK && trace_rows(r) == 4 && rows_are(r, 0, 3) &&
			   trace_read_steps(r, 0, 4, s, &err) == SW_OK && s[3] == 120 &&
			   trace_read(r, 2, 3, 1, got, &err) == SW_OK && got[0] == 1 && got[1] == 2 && got[2] == 3,
			   "4 rows: 3 kept and the new one (steps 100, 107, 114, 120)");
			trace_reader_close(r);
		}
		ok(trace_reopen(path, series, NSERIES, 0, &w, &err) == SW_OK && trace_writer_rows(w) == 0 &&
		   trace_close(w, &err) == SW_OK && trace_open(path, &r, &err) == SW_OK && trace_rows(r) == 0,
		   "reopen before the first step: no rows left");
		trace_reader_close(r);
	}
	snprintf(path, sizeof path, "%s/none.h5", dir);
	ok(trace_reopen(path, series, NSERIES, 0, &w, &err) == SW_ENOINPUT && access(path, F_OK) != 0,
	   "reopen of no file: SW_ENOINPUT, nothing created");
	snprintf(path, sizeof path, "%s/no/such/dir/t.h5", dir);
	ok(trace_create(path, NULL, NULL, 0, series, NSERIES, &w, &err) == SW_ECANTCREAT, "unwritable place: SW_ECANTCREAT");
}

static void bad_series_lists(const char *dir)
{
	static const char *const dup_cols[] = {"a", "b", "a"}, *const comma[] = {"a,b"};
	static const struct {
		struct trace_series s[2];
		int n;
		const char *msg;
	} bad[] = {
		{{{"a.b", 0, NULL}}, 1, "trace: 'a.b' cannot be a series name"},
		{{{"step", 0, NULL}}, 1, "trace: 'step' cannot be a series name"},
		{{{"", 0, NULL}}, 1, "trace: '' cannot be a series name"},
		{{{"x", 0, NULL}, {"x", 0, NULL}}, 2, "trace: series 'x' twice"},
		{{{"x", 3, dup_cols}}, 1, "trace: series 'x': column 'a' twice"},
		{{{"x", 1, comma}}, 1, "trace: series 'x': 'a,b' cannot be a column name"},
		{{{"x", -1, NULL}}, 1, "trace: series 'x': -1 columns"},
	};
	char path[256];
	struct trace_writer *w;
	struct sw_err err;

	snprintf(path, sizeof path, "%s/bad-list.h5", dir);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ok(trace_create(path, NULL, NULL, 0, bad[i].s, bad[i].n, &w, &err) == SW_ESOFTWARE && !w &&
		   !strcmp(err.msg, bad[i].msg) && access(path, F_OK) != 0,
		   "bad series list: '%s', no file", err.msg);
}

/* t-trace.t --resume PATH: a resumed run, in a process of its own. */
static int resume(const char *path)
{
	struct trace_writer *w;
	struct sw_err err;

	if (trace_reopen(path, series, NSERIES, INT64_MAX, &w, &err)) {
		fprintf(stderr, "resume: %s\n", err.msg);
		return 1;
	}
	return trace_writer_rows(w) != 3 || !append_rows(w, 3, 4, &err) || trace_close(w, &err);
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/sw-t-trace.XXXXXX", cmd[64];

	if (argc == 3 && !strcmp(argv[1], "--resume"))
		return resume(argv[2]);

	if (!mkdtemp(dir))
		return 1;
	round_trip(dir);
	bad_series_lists(dir);
	live_and_killed(dir);
	malformed(dir);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	return tap_done();
}
