/*
 * mktrace - writes a trace as sw-train will, for the tests (not a test
 * itself: the Makefile builds it beside the unit tests, prove never runs
 * it). Row r holds, exactly representable so that tests can spell them:
 *
 *   step = 10 r                    loss = 8 - r/4 + BASE
 *   lr = r/1024                    val_loss = 8.5 - r/4 when r % 3 == 0, else unknown
 *   tokens = 123456789012 r        residual_rms.layerC = 1 + r/2 + C/8  (C = 0, 1, 2)
 *
 * After each row is flushed it prints "row R step S" on stdout, so a test
 * can wait for a row and kill the writer right after it.
 *
 *   mktrace [-k] [-b BASE] [-i MS] [-n ROWS] [-r KEEP] PATH
 *     -n ROWS   rows to append (default 4; -1: until killed)
 *     -i MS     pause between rows
 *     -r KEEP   reopen PATH, dropping rows with step > KEEP, and go on from there
 *     -b BASE   added to every loss (tells rows written after a reopen apart)
 *     -k        keep the trace open after the rows: wait to be killed
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../lib/trace.h"

static const char *const layers[] = {"layer0", "layer1", "layer2"};
static const struct trace_series series[] = {
	{"loss", 0, NULL}, {"lr", 0, NULL}, {"val_loss", 0, NULL},
	{"tokens", 0, NULL}, {"residual_rms", 3, layers},
};
enum { NSERIES = sizeof series / sizeof series[0] };

static const struct sw_config cfg = {
	.arch = "llama", .vocab_size = 256, .d_model = 16, .n_layers = 3, .n_heads = 2,
	.n_kv_heads = 1, .head_dim = 8, .d_ff = 32, .seq_len = 32, .rope_theta = 1e4,
	.norm_eps = 1e-5, .tie_embeddings = 1, .multipliers = "none",
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

int main(int argc, char **argv)
{
	long rows = 4, pause_ms = 0, keep = -1;
	double base = 0;
	int hold = 0, reopen = 0, opt;
	struct trace_writer *w;
	struct sw_err err;
	int rc;

	while ((opt = getopt(argc, argv, "b:i:kn:r:")) != -1) {
		switch (opt) {
		case 'b': base = (double)number(optarg); break;
		case 'i': pause_ms = number(optarg); break;
		case 'k': hold = 1; break;
		case 'n': rows = number(optarg); break;
		case 'r': keep = number(optarg); reopen = 1; break;
		default:
			fprintf(stderr, "usage: mktrace [-k] [-b BASE] [-i MS] [-n ROWS] [-r KEEP] PATH\n");
			return 64;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: mktrace [-k] [-b BASE] [-i MS] [-n ROWS] [-r KEEP] PATH\n");
		return 64;
	}
	rc = reopen ? trace_reopen(argv[optind], series, NSERIES, keep, &w, &err)
		    : trace_create(argv[optind], &cfg, series, NSERIES, &w, &err);
	if (rc) {
		fprintf(stderr, "mktrace: %s: %s\n", argv[optind], err.msg);
		return rc;
	}
	for (long r = trace_writer_rows(w), n = 0; rows < 0 || n < rows; r++, n++) {
		double loss = 8 - r / 4.0 + base, lr = r / 1024.0;
		double val = 8.5 - r / 4.0, tokens = 123456789012.0 * (double)r, rms[3];
		const double *values[NSERIES] = {&loss, &lr, r % 3 == 0 ? &val : NULL, &tokens, rms};
		struct timespec ts = {pause_ms / 1000, pause_ms % 1000 * 1000000L};

		for (int c = 0; c < 3; c++)
			rms[c] = 1 + r / 2.0 + c / 8.0;
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
	if ((rc = trace_close(w, &err)))
		fprintf(stderr, "mktrace: %s: %s\n", argv[optind], err.msg);
	return rc;
}
