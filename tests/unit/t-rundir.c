/*
 * t-rundir - the run directory's lock and links (rundir.h), and the
 * trace writer's refusal of links (trace.h): a second claim of a locked
 * directory is refused until the first is freed; a refused claim removes
 * the directories it made; force removes a checkpoint that is a link, not
 * its target; a trace path that is a symbolic link (dangling or not) or a
 * file of two names is refused by trace_create and trace_reopen, the
 * target's bytes unchanged (the backstop of rundir_claim's own check,
 * which a link planted after it would meet); what is at a --trace path
 * that is not a trace is said.
 */
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../lib/files/trace.h"
#include "../../lib/runs/rundir.h"
#include "tap.h"

static const struct trace_series series[] = {{"loss", 0, NULL}};

static int exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "wb");

	if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
		perror(path);
		exit(2);
	}
}

/* The whole file (at most 64 KiB) in buf; its length, or -1. */
static long slurp(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f)
		return -1;
	n = fread(buf, 1, len, f);
	fclose(f);
	return (long)n;
}

/* path holds exactly want's bytes (wn of them) */
static int unchanged(const char *path, const char *want, long wn)
{
	static char got[65536];
	long n = slurp(path, got, sizeof got);

	return n == wn && !memcmp(got, want, (size_t)n);
}

static int says(const struct sw_err *err, const char *what)
{
	if (strstr(err->msg, what))
		return 1;
	diag("message: %s", err->msg);
	return 0;
}

static void test_lock(void)
{
	struct rundir_claim a, b;
	struct sw_err err;

	ok(rundir_claim("live", NULL, NULL, 0, 0, &a, &err) == SW_OK && a.locked,
	   "a claim makes the directory and takes its lock");
	ok(rundir_claim("live", "", NULL, 0, 1, &b, &err) == SW_ECANTCREAT &&
	   says(&err, "live: another process writes this run"),
	   "a second claim, --force and no trace: SW_ECANTCREAT, another writes this run");
	rundir_claim_free(&b);
	rundir_claim_free(&a);
	ok(rundir_claim("live", NULL, NULL, 0, 0, &b, &err) == SW_OK && b.locked,
	   "once the first is freed the lock is free again");
	rundir_claim_free(&b);

	memset(&a, 0, sizeof a);
	rundir_claim_free(&a);
	ok(fcntl(0, F_GETFD) >= 0, "freeing a claim never made closes nothing (fd 0 still open)");
}

static void test_refused_leaves_nothing(void)
{
	struct rundir_claim c;
	struct sw_err err;

	put("notes.txt", "my notes\n");
	ok(rundir_claim("n1/n2/n3", "notes.txt", NULL, 0, 1, &c, &err) == SW_ECANTCREAT &&
	   says(&err, "notes.txt: not a scalewatch trace (not an HDF5 file)") && !exists("n1"),
	   "a text file at the trace path, --force: refused, saying what is there; n1/n2/n3 made and removed");
	rundir_claim_free(&c);
	ok(mkdir("n1", 0777) == 0 &&
	   rundir_claim("n1/n2", "notes.txt", NULL, 0, 0, &c, &err) == SW_ECANTCREAT &&
	   exists("n1") && !exists("n1/n2"), "only the directories it made are removed");
	rundir_claim_free(&c);
	ok(unchanged("notes.txt", "my notes\n", 9), "the text file is unchanged");

	/* an HDF5 file that is no scalewatch file */
	hid_t f = H5Fcreate("plain.h5", H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
	ok(f >= 0 && H5Fclose(f) >= 0 &&
	   rundir_claim("n4", "plain.h5", NULL, 0, 1, &c, &err) == SW_ECANTCREAT &&
	   says(&err, "plain.h5: not a scalewatch trace (an HDF5 file without scalewatch_format)"),
	   "an HDF5 file of another kind at the trace path: refused, saying so");
	rundir_claim_free(&c);

	put("empty.h5", "");
	ok(rundir_claim("n5", "empty.h5", NULL, 0, 0, &c, &err) == SW_OK && !c.trace_exists,
	   "an empty file at the trace path holds nothing: created over, as if absent");
	rundir_claim_free(&c);
}

static void test_force_unlinks_links(void)
{
	struct rundir_claim c;
	struct sw_err err;
	char note[1024];

	put("decoy", "precious\n");
	ok(mkdir("old", 0777) == 0 && symlink("../decoy", "old/ckpt-000007.h5") == 0 &&
	   symlink("../decoy", "old/trace.h5") == 0, "setup: a run directory of two links to a decoy");
	ok(rundir_claim("old", "other.h5", NULL, 0, 1, &c, &err) == SW_OK &&
	   rundir_clear(&c, note, sizeof note, &err) == SW_OK,
	   "--force --trace other.h5: claimed and cleared (%s)", note);
	rundir_claim_free(&c);
	ok(!exists("old/ckpt-000007.h5") && !exists("old/trace.h5") && unchanged("decoy", "precious\n", 9),
	   "the links are removed, the decoy they lead to unchanged");

	ok(mkdir("old2", 0777) == 0 && symlink("../decoy", "old2/trace.h5") == 0 &&
	   rundir_claim("old2", NULL, NULL, 0, 1, &c, &err) == SW_ECANTCREAT &&
	   says(&err, "old2/trace.h5: a symbolic link: refused"),
	   "a link at the trace this run writes: refused, force or not");
	rundir_claim_free(&c);
	ok(exists("old2/trace.h5") && unchanged("decoy", "precious\n", 9), "nothing removed, the decoy unchanged");
}

static void test_trace_links(void)
{
	struct trace_writer *w = NULL;
	struct sw_err err;
	static char before[65536];
	long n;

	put("decoy", "precious\n");
	ok(symlink("decoy", "link.h5") == 0 &&
	   trace_create("link.h5", NULL, NULL, 0, series, 1, &w, &err) == SW_ECANTCREAT && !w &&
	   says(&err, "a symbolic link: refused") && unchanged("decoy", "precious\n", 9),
	   "trace_create at a symbolic link: SW_ECANTCREAT, the target unchanged");
	ok(symlink("made-through-link", "dangling.h5") == 0 &&
	   trace_create("dangling.h5", NULL, NULL, 0, series, 1, &w, &err) == SW_ECANTCREAT &&
	   !exists("made-through-link"), "trace_create at a dangling link: refused, its target not created");
	ok(link("decoy", "hard.h5") == 0 &&
	   trace_create("hard.h5", NULL, NULL, 0, series, 1, &w, &err) == SW_ECANTCREAT &&
	   says(&err, "a file of 2 names (hard links)") && unchanged("decoy", "precious\n", 9),
	   "trace_create at a file of two names: refused, both unchanged");

	/* a real trace, then a link to it */
	ok(trace_create("real.h5", NULL, NULL, 0, series, 1, &w, &err) == SW_OK &&
	   trace_close(w, &err) == SW_OK, "setup: a trace created and closed");
	w = NULL;
	n = slurp("real.h5", before, sizeof before);
	ok(n > 0 && symlink("real.h5", "reallink.h5") == 0 &&
	   trace_reopen("reallink.h5", series, 1, 0, &w, &err) == SW_ECANTCREAT && !w &&
	   says(&err, "a symbolic link: refused") && unchanged("real.h5", before, n),
	   "trace_reopen through a link: refused, the trace byte for byte as it was");
	ok(trace_reopen("real.h5", series, 1, 0, &w, &err) == SW_OK && trace_close(w, &err) == SW_OK,
	   "trace_reopen of the trace itself goes on");
}

int main(void)
{
	char dir[] = "/tmp/t-rundir.XXXXXX";

	if (!mkdtemp(dir) || chdir(dir) < 0) {
		perror("scratch directory");
		return 2;
	}
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
	test_lock();
	test_refused_leaves_nothing();
	test_force_unlinks_links();
	test_trace_links();
	if (chdir("/") == 0) {
		char cmd[64];
		snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
		if (system(cmd) != 0)
			diag("could not remove %s", dir);
	}
	return tap_done();
}
