/*
 * t-mapguard - a mapped file truncated under the reader: the read completes
 * on zeros, in the main thread and in OpenMP threads, the fault is counted
 * and the check says "the file shrank while it was read"; a file cut where
 * nothing was read yet is found by size; the views of ckptsrc (mapped in
 * place, or unmapped after a conversion) and the token batches of data.c
 * say so too; a SIGBUS that is not about a registered mapping still kills
 * (each in a child process that must die of it).
 */
#include <fcntl.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../lib/formats/ckptsrc.h"
#include "../../lib/files/data.h"
#include "../../lib/base/mapguard.h"
#include "tap.h"

#define PAGES 64

static long page;

/* PAGES pages, each byte of page k equal to 1 + k % 200 */
static void write_pages(const char *path)
{
	unsigned char *buf = malloc((size_t)page);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	for (int k = 0; k < PAGES; k++) {
		memset(buf, 1 + k % 200, (size_t)page);
		if (write(fd, buf, (size_t)page) != page)
			abort();
	}
	close(fd);
	free(buf);
}

static uint64_t sum_bytes(const unsigned char *p, size_t n)
{
	uint64_t s = 0;

	for (size_t i = 0; i < n; i++)
		s += p[i];
	return s;
}

/* The sum of the bytes of pages [0, k) as written */
static uint64_t sum_pages(int k)
{
	uint64_t s = 0;

	for (int i = 0; i < k; i++)
		s += (uint64_t)(1 + i % 200) * (uint64_t)page;
	return s;
}

/* In a child: body(arg); returns the signal the child died of, or -status. */
static int in_child(void (*body)(const char *), const char *arg)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		body(arg);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -100;
	return WIFSIGNALED(status) ? WTERMSIG(status) : -WEXITSTATUS(status);
}

/* a plain mapping, not registered, read past the end of a cut file */
static void read_unregistered(const char *path)
{
	struct mapguard g;
	int fd = open(path, O_RDWR);
	const unsigned char *p;

	/* the handler is installed by a registered mapping elsewhere */
	if (mapguard_map(fd, 0, (size_t)page, &g, NULL))
		_exit(3);
	p = mmap(NULL, (size_t)page * PAGES, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED || ftruncate(fd, page) < 0)
		_exit(2);
	printf("# read %d\n", p[5 * page]);
	_exit(4);
}

/* kill -BUS while a registered mapping exists */
static void sigbus_sent(const char *path)
{
	struct mapguard g;
	int fd = open(path, O_RDONLY);

	if (mapguard_map(fd, 0, (size_t)page, &g, NULL))
		_exit(3);
	raise(SIGBUS);
	_exit(4);
}

int main(void)
{
	char dir[] = "/tmp/t-mapguard.XXXXXX", path[256], tokens[256];
	struct mapguard g;
	struct sw_err err;
	uint64_t faults, s;
	int fd, rc;

	page = sysconf(_SC_PAGESIZE);
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof path, "%s/data", dir);
	snprintf(tokens, sizeof tokens, "%s/tokens.llmc", dir);

	/* truncated after the mapping, read past the new end */
	write_pages(path);
	fd = open(path, O_RDONLY);
	rc = mapguard_map(fd, 0, (size_t)page * PAGES, &g, &err);
	ok(rc == SW_OK && sum_bytes(g.base, (size_t)page) == sum_pages(1), "mapped, first page read");
	ok(mapguard_check(&g, &err) == SW_OK, "intact: the check passes");
	faults = mapguard_faults();
	if (truncate(path, 3 * page) < 0)
		abort();
	s = sum_bytes(g.base, (size_t)page * PAGES);
	ok(s == sum_pages(3), "cut to 3 pages: the read completes, the rest reads as zeros (sum %llu)",
	   (unsigned long long)s);
	ok(mapguard_faults() == faults + 1, "one fault counted (the rest of the mapping zeroed at once)");
	ok(mapguard_shrank(&g) && mapguard_check(&g, &err) == SW_EIO &&
	   !strcmp(err.msg, "the file shrank while it was read"), "the check: SW_EIO, '%s'", err.msg);
	mapguard_unmap(&g);
	ok(g.base == NULL && g.slot == NULL, "unmapped");

	/* the same in OpenMP threads, each reading its own pages */
	write_pages(path);
	rc = mapguard_map(fd, 0, (size_t)page * PAGES, &g, &err);
	faults = mapguard_faults();
	if (truncate(path, 10 * page) < 0)
		abort();
	s = 0;
#pragma omp parallel for num_threads(4) reduction(+ : s) schedule(static, 1)
	for (int k = 0; k < PAGES; k++)
		s += sum_bytes((const unsigned char *)g.base + (size_t)k * (size_t)page, (size_t)page);
	ok(rc == SW_OK && s == sum_pages(10), "threads read a cut file: zeros past the end (sum %llu)",
	   (unsigned long long)s);
	ok(mapguard_faults() > faults && mapguard_check(&g, &err) == SW_EIO,
	   "threads: %llu faults counted, the check fails", (unsigned long long)(mapguard_faults() - faults));
	mapguard_unmap(&g);

	/* cut where nothing was read: found by the file's size */
	write_pages(path);
	rc = mapguard_map(fd, 0, (size_t)page * PAGES, &g, &err);
	faults = mapguard_faults();
	if (truncate(path, (PAGES - 1) * page) < 0)
		abort();
	ok(rc == SW_OK && mapguard_check(&g, &err) == SW_EIO && mapguard_faults() == faults,
	   "cut before being read: no fault, the size says so");
	mapguard_unmap(&g);

	/* a fresh mapping of the file as it is now starts clean */
	rc = mapguard_map(fd, 0, (size_t)page * 4, &g, &err);
	ok(rc == SW_OK && sum_bytes(g.base, (size_t)page * 4) == sum_pages(4) &&
	   mapguard_check(&g, &err) == SW_OK, "a new mapping after one that faulted: clean");
	mapguard_unmap(&g);

	/* ckptsrc: a view read in place, and one converted then unmapped */
	{
		struct ckpt_view v;
		const void *bytes;
		write_pages(path);
		memset(&v, 0, sizeof v);
		rc = ckptsrc_map(fd, (uint64_t)page * PAGES, 100, (uint64_t)page * 20, &v, &bytes, &err);
		if (truncate(path, 2 * page) < 0)
			abort();
		s = sum_bytes(bytes, (size_t)page * 20);
		ok(rc == SW_OK && ckptsrc_check(&v, &err) == SW_EIO && strstr(err.msg, "shrank"),
		   "ckptsrc view read in place: '%s'", err.msg);
		ckptsrc_release(&v);

		write_pages(path);
		memset(&v, 0, sizeof v);
		rc = ckptsrc_map(fd, (uint64_t)page * PAGES, 0, (uint64_t)page * 8, &v, &bytes, &err);
		if (truncate(path, 0) < 0)
			abort();
		s = sum_bytes(bytes, (size_t)page * 8);     /* as a conversion reads it */
		write_pages(path);                        /* back to its size: only the fault tells */
		ckptsrc_unmap(&v);
		ok(rc == SW_OK && s == 0 && ckptsrc_check(&v, &err) == SW_EIO,
		   "ckptsrc view converted, then unmapped: the fault is remembered");
		ckptsrc_release(&v);
	}

	/* data.c: a token file cut under the trainer */
	{
		int32_t header[256] = {20240520, 1, 20000};
		uint16_t *tok = calloc(20000, sizeof *tok);
		struct dataset d;
		struct sw_rng r;
		int x[64], y[64], wfd;
		for (int i = 0; i < 20000; i++)
			tok[i] = (uint16_t)(1 + i % 300);
		wfd = open(tokens, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (write(wfd, header, sizeof header) != (ssize_t)sizeof header ||
		    write(wfd, tok, 20000 * sizeof *tok) != 20000 * (ssize_t)sizeof *tok)
			abort();
		close(wfd);
		rng_seed(&r, 1);
		rc = data_open(tokens, DATA_AUTO, 0.1, &d, &err);
		ok(rc == SW_OK && data_train_batch(&d, &r, 4, 16, x, y, &err) == SW_OK &&
		   x[0] > 0, "token file: a batch");
		if (truncate(tokens, 1024) < 0)
			abort();
		rc = SW_OK;
		for (int i = 0; i < 8 && !rc; i++)
			rc = data_train_batch(&d, &r, 4, 16, x, y, &err);
		ok(rc == SW_EIO && strstr(err.msg, "shrank"), "token file cut: the batch fails, '%s'", err.msg);
		ok(data_val_batch(&d, 0, 4, 16, x, y, &err) == SW_EIO, "and the validation batch");
		data_close(&d);
		free(tok);
	}

	/* SIGBUS that is none of ours keeps its default action */
	write_pages(path);
	rc = in_child(read_unregistered, path);
	ok(rc == SIGBUS, "a fault in a mapping not registered: dies of SIGBUS (got %d)", rc);
	write_pages(path);
	rc = in_child(sigbus_sent, path);
	ok(rc == SIGBUS, "kill -BUS: dies of it (got %d)", rc);

	close(fd);
	unlink(path);
	unlink(tokens);
	rmdir(dir);
	return tap_done();
}
