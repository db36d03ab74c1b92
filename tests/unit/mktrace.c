/*
 * mktrace - writes a trace as sw-train will, for the tests (not a test
 * itself: the Makefile builds it beside the unit tests, prove never runs
 * it). Row r holds, exactly representable so that tests can spell them:
 *
 *   step = 10 r                    loss = 8 - r/4 + BASE
 *   lr = r/1024                    val_loss = 8.5 - r/4 when r % 3 == 0, else unknown
 *   tokens = 123456789012 r        residual_rms.layerC = 1 + r/2 + C/8  (C = 0, 1, 2)
 *
 * The model (/config) has 3 layers of 2 heads sharing 1 KV head. With -q
 * SLOPE, the Q/K pair of every head as sw-train logs it (series qk_q_rms,
 * qk_k_rms; columns layerL.headH), with a planted drift: head h of layer l
 * has
 *
 *   slope = SLOPE (1 + l + h)       per 1000 steps, of log2(q/k)
 *   log2(q/k) = (l - h)/10 + slope step/1000 + e,   q k = (1 + l + h)/100
 *
 * e a fixed pseudo-random noise, uniform in [-0.05, 0.05], each head its
 * own, made trendless: the same at row r as at row ROWS-1-r, less its mean
 * over the rows. So the least-squares slope over all the rows is the
 * planted one, exactly, and its standard error is the noise's:
 * sqrt(sum e^2 / (ROWS - 2) / sum (t - mean t)^2), t = step/1000. (-q
 * needs -n ROWS > 0 and no -r.) With -t, what sw-transfer reads of a
 * run: /optim lr_max = 1/256, batch_size = 16, and out_norm = 4 + r/8
 * (no out_norm_folded, as an older sw-train wrote). -C leaves /config out.
 *
 * After each row is flushed it prints "row R step S" on stdout, so a test
 * can wait for a row and kill the writer right after it.
 *
 * With -x EDIT the closed trace is then changed as no writer of the
 * library would change it, through HDF5 alone (the hostile traces of
 * tests/cli/t0555-hostile3-readers.t; the reader under test plays no
 * part in it):
 *
 *   add=NAME               a 1-D series NAME, every row 666 (a forged value)
 *   columns=SERIES=A:B:..  the columns attribute of SERIES rewritten (as many)
 *   flat=SERIES            SERIES re-made 1-D: its first column
 *
 *   mktrace [-Ckt] [-b BASE] [-i MS] [-n ROWS] [-q SLOPE] [-r KEEP] [-x EDIT] PATH
 *     -n ROWS   rows to append (default 4; -1: until killed)
 *     -i MS     pause between rows
 *     -r KEEP   reopen PATH, dropping rows with step > KEEP, and go on from there
 *     -b BASE   added to every loss (tells rows written after a reopen apart)
 *     -k        keep the trace open after the rows: wait to be killed
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>

#include "../../lib/files/trace.h"

#define LAYERS 3
#define HEADS 2

static const char *const layers[] = {"layer0", "layer1", "layer2"};
static const char *const heads[LAYERS * HEADS] = {
	"layer0.head0", "layer0.head1", "layer1.head0", "layer1.head1", "layer2.head0", "layer2.head1"
};

/* The series, by what each row holds. */
enum { S_LOSS, S_LR, S_VAL, S_TOKENS, S_RESIDUAL, S_QK_Q, S_QK_K, S_OUT_NORM, S_ALL };
static const struct trace_series all_series[S_ALL] = {
	{"loss", 0, NULL}, {"lr", 0, NULL}, {"val_loss", 0, NULL},
	{"tokens", 0, NULL}, {"residual_rms", 3, layers},
	{"qk_q_rms", LAYERS * HEADS, heads}, {"qk_k_rms", LAYERS * HEADS, heads},
	{"out_norm", 0, NULL},
};

static const struct sw_config cfg = {
	.arch = "llama", .vocab_size = 256, .d_model = 16, .n_layers = LAYERS, .n_heads = HEADS,
	.n_kv_heads = 1, .head_dim = 8, .d_ff = 32, .seq_len = 32, .rope_theta = 1e4,
	.norm_eps = 1e-5, .tie_embeddings = 1, .multipliers = "none",
};

static const struct trace_attr optim[] = {
	{"/optim", "lr_max", 0, 1.0 / 256}, {"/optim", "batch_size", 1, 16},
};

static long number(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end) {
		fprintf(stderr, "mktrace: '%s' is not a number\n", s);
		exit(64);
	}
	return v;
}

static double real_number(const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v)) {
		fprintf(stderr, "mktrace: '%s' is not a number\n", s);
		exit(64);
	}
	return v;
}

/* A pseudo-random number of head j at row r: uniform in [-0.05, 0.05],
 * a hash of both (splitmix64). */
static double uniform(long r, int j)
{
	uint64_t z = (uint64_t)r * 0x9e3779b97f4a7c15ULL + (uint64_t)(j + 1) * 0xbf58476d1ce4e5b9ULL;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return ((double)(z >> 11) / 9007199254740992.0 - 0.5) / 10;
}

/* The noise of head j at row r of n: symmetric in time, mean 0. */
static double noise(long r, long n, int j)
{
	double mean = 0;

	for (long i = 0; i < n; i++)
		mean += uniform(i < n - 1 - i ? i : n - 1 - i, j) / (double)n;
	return uniform(r < n - 1 - r ? r : n - 1 - r, j) - mean;
}

/* The Q/K pair of head j (layer j / HEADS, head j % HEADS) at row r of n. */
static void qk_pair(double slope1, long r, long n, int j, double *q, double *k)
{
	int l = j / HEADS, h = j % HEADS;
	double step = 10.0 * (double)r, slope = slope1 * (1 + l + h);
	double ratio = (l - h) / 10.0 + slope * step / 1000 + noise(r, n, j);
	double product = (1 + l + h) / 100.0;

	*q = sqrt(product) * exp2(ratio / 2);
	*k = sqrt(product) * exp2(-ratio / 2);
}

static void usage(void)
{
	fprintf(stderr, "usage: mktrace [-Ckt] [-b BASE] [-i MS] [-n ROWS] [-q SLOPE] [-r KEEP] "
		"[-x EDIT] PATH\n");
	exit(64);
}

static void edit_failed(const char *edit)
{
	fprintf(stderr, "mktrace: -x %s: HDF5 failed\n", edit);
	exit(70);
}

/* A chunked float64 series NAME of /series (g) holding rows x ncols
 * values (ncols 0: 1-D), every chunk written. */
static void put_series(hid_t g, const char *name, hsize_t rows, int ncols, const double *v,
		       const char *edit)
{
	int rank = ncols ? 2 : 1;
	hsize_t dims[2] = {rows, (hsize_t)ncols}, max[2] = {H5S_UNLIMITED, (hsize_t)ncols};
	hsize_t chunk[2] = {64, (hsize_t)ncols};
	hid_t space = H5Screate_simple(rank, dims, max), dcpl = H5Pcreate(H5P_DATASET_CREATE), d;

	if (space < 0 || dcpl < 0 || H5Pset_chunk(dcpl, rank, chunk) < 0 ||
	    (d = H5Dcreate2(g, name, H5T_IEEE_F64LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT)) < 0 ||
	    (rows && H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0) ||
	    H5Dclose(d) < 0)
		edit_failed(edit);
	H5Pclose(dcpl);
	H5Sclose(space);
}

/* The values of series name (rows x its columns) and their shape. */
static double *get_series(hid_t g, const char *name, hsize_t dims[2], int *rank, const char *edit)
{
	hid_t d = H5Dopen2(g, name, H5P_DEFAULT), space = d < 0 ? -1 : H5Dget_space(d);
	double *v;

	dims[1] = 1;
	if (space < 0 || (*rank = H5Sget_simple_extent_dims(space, dims, NULL)) < 1 || *rank > 2 ||
	    !(v = malloc((size_t)(dims[0] * (*rank == 2 ? dims[1] : 1) + 1) * sizeof *v)) ||
	    H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
		edit_failed(edit);
	H5Sclose(space);
	H5Dclose(d);
	return v;
}

/* -x columns=SERIES=A:B:...: the attribute replaced by these names. */
static void put_columns(hid_t g, const char *series, char *list, const char *edit)
{
	const char *names[64];
	char *save = NULL;
	hsize_t n = 0;
	hid_t d = H5Dopen2(g, series, H5P_DEFAULT), t = H5Tcopy(H5T_C_S1), space, a;

	for (char *c = strtok_r(list, ":", &save); c && n < 64; c = strtok_r(NULL, ":", &save))
		names[n++] = c;
	if (d < 0 || t < 0 || H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0 ||
	    H5Adelete(d, "columns") < 0 || (space = H5Screate_simple(1, &n, NULL)) < 0 ||
	    (a = H5Acreate2(d, "columns", t, space, H5P_DEFAULT, H5P_DEFAULT)) < 0 ||
	    H5Awrite(a, t, names) < 0 || H5Aclose(a) < 0)
		edit_failed(edit);
	H5Sclose(space);
	H5Tclose(t);
	H5Dclose(d);
}

static void hostile_edit(const char *path, const char *edit, hsize_t rows)
{
	char *arg = strdup(edit), *value = arg ? strchr(arg, '=') : NULL;
	hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
	hid_t g = file < 0 ? -1 : H5Gopen2(file, "series", H5P_DEFAULT);
	hsize_t dims[2];
	double *v;
	int rank;

	if (!value)
		usage();
	*value++ = '\0';
	if (g < 0)
		edit_failed(edit);
	if (!strcmp(arg, "add")) {
		if (!(v = malloc((size_t)(rows + 1) * sizeof *v)))
			edit_failed(edit);
		for (hsize_t r = 0; r < rows; r++)
			v[r] = 666;
		put_series(g, value, rows, 0, v, edit);
		free(v);
	} else if (!strcmp(arg, "columns") && strchr(value, '=')) {
		char *list = strchr(value, '=');
		*list++ = '\0';
		put_columns(g, value, list, edit);
	} else if (!strcmp(arg, "flat")) {
		v = get_series(g, value, dims, &rank, edit);
		for (hsize_t r = 0; rank == 2 && r < dims[0]; r++)
			v[r] = v[r * dims[1]];
		if (H5Ldelete(g, value, H5P_DEFAULT) < 0)
			edit_failed(edit);
		put_series(g, value, dims[0], 0, v, edit);
		free(v);
	} else {
		usage();
	}
	if (H5Gclose(g) < 0 || H5Fclose(file) < 0)
		edit_failed(edit);
	free(arg);
}

int main(int argc, char **argv)
{
	long rows = 4, pause_ms = 0, keep = -1;
	double base = 0, slope = 0;
	int hold = 0, reopen = 0, qk = 0, transfer = 0, with_config = 1, opt, nedits = 0;
	const char *edits[8];
	int64_t written;
	struct trace_series series[S_ALL];
	int kind[S_ALL], nseries = 0;
	struct trace_writer *w;
	struct sw_err err;
	int rc;

	while ((opt = getopt(argc, argv, "Cb:i:kn:q:r:tx:")) != -1) {
		switch (opt) {
		case 'C': with_config = 0; break;
		case 'b': base = (double)number(optarg); break;
		case 'i': pause_ms = number(optarg); break;
		case 'k': hold = 1; break;
		case 'n': rows = number(optarg); break;
		case 'q': slope = real_number(optarg); qk = 1; break;
		case 'r': keep = number(optarg); reopen = 1; break;
		case 't': transfer = 1; break;
		case 'x':
			if (nedits == 8)
				usage();
			edits[nedits++] = optarg;
			break;
		default: usage();
		}
	}
	if (optind != argc - 1 || (qk && (rows <= 0 || reopen)) || (nedits && (hold || rows < 0)))
		usage();
	for (int i = 0; i < S_ALL; i++)
		if ((i != S_QK_Q && i != S_QK_K) || qk)
			if (i != S_OUT_NORM || transfer) {
				kind[nseries] = i;
				series[nseries++] = all_series[i];
			}
	rc = reopen ? trace_reopen(argv[optind], series, nseries, keep, &w, &err)
		    : trace_create(argv[optind], with_config ? &cfg : NULL, transfer ? optim : NULL,
				   transfer ? 2 : 0, series, nseries, &w, &err);
	if (rc) {
		fprintf(stderr, "mktrace: %s: %s\n", argv[optind], err.msg);
		return rc;
	}
	for (long r = trace_writer_rows(w), n = 0; rows < 0 || n < rows; r++, n++) {
		double v[S_ALL][LAYERS * HEADS];
		const double *values[S_ALL];
		struct timespec ts = {pause_ms / 1000, pause_ms % 1000 * 1000000L};

		v[S_LOSS][0] = 8 - r / 4.0 + base;
		v[S_LR][0] = r / 1024.0;
		v[S_VAL][0] = 8.5 - r / 4.0;
		v[S_TOKENS][0] = 123456789012.0 * (double)r;
		for (int c = 0; c < 3; c++)
			v[S_RESIDUAL][c] = 1 + r / 2.0 + c / 8.0;
		for (int j = 0; qk && j < LAYERS * HEADS; j++)
			qk_pair(slope, r, rows, j, &v[S_QK_Q][j], &v[S_QK_K][j]);
		v[S_OUT_NORM][0] = 4 + r / 8.0;
		for (int i = 0; i < nseries; i++)
			values[i] = kind[i] == S_VAL && r % 3 ? NULL : v[kind[i]];
		if ((rc = trace_append(w, 10 * r, values, &err))) {
			fprintf(stderr, "mktrace: %s: %s\n", argv[optind], err.msg);
			trace_close(w, NULL);
			return rc;
		}
		printf("row %ld step %ld\n", r, 10 * r);
		fflush(stdout);
		if (pause_ms)
			nanosleep(&ts, NULL);
	}
	if (hold)
		for (;;)
			pause();
	written = trace_writer_rows(w);
	if ((rc = trace_close(w, &err))) {
		fprintf(stderr, "mktrace: %s: %s\n", argv[optind], err.msg);
		return rc;
	}
	for (int i = 0; i < nedits; i++)
		hostile_edit(argv[optind], edits[i], (hsize_t)written);
	return SW_OK;
}
