/* Unit tests of lib/files/tokfile.c: what it writes, sw-train's reader
 * (lib/files/data.c) reads; a failed write leaves nothing; the checks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../lib/files/data.h"
#include "../../lib/files/tokfile.h"
#include "tap.h"

static size_t files_in(const char *dir)
{
	char cmd[512];
	FILE *p;
	size_t n = 0;
	int c;

	snprintf(cmd, sizeof cmd, "ls -A %s", dir);
	if (!(p = popen(cmd, "r")))
		return 999;
	while ((c = getc(p)) != EOF)
		n += c == '\n';
	pclose(p);
	return n;
}

int main(void)
{
	char dir[] = "/tmp/sw-t-tokfile.XXXXXX", path[256], cmd[300];
	uint16_t tok[3000];
	struct tokfile_writer w;
	struct dataset d;
	struct sw_err err;

	if (!mkdtemp(dir))
		return 1;
	for (int i = 0; i < 3000; i++)
		tok[i] = (uint16_t)(i * 37 % 65536);
	tok[5] = 65535;
	snprintf(path, sizeof path, "%s/a.llmc", dir);
	ok(!tokfile_create(&w, path, &err) && !tokfile_append(&w, tok, 1000, &err) &&
	   !tokfile_append(&w, tok + 1000, 2000, &err) && !tokfile_commit(&w, &err),
	   "written in two appends");
	ok(data_open(path, DATA_AUTO, 0, &d, &err) == SW_OK && d.format == DATA_LLMC && d.n == 3000 &&
	   data_token(&d, 5) == 65535 && data_token(&d, 2999) == tok[2999] && d.max_token == 65535,
	   "sw-train's reader: llm.c, 3000 tokens, the same ids");
	data_close(&d);
	ok(files_in(dir) == 1, "no temporary file left");

	FILE *f = fopen(path, "rb");
	static unsigned char buf[8192];
	size_t len = fread(buf, 1, sizeof buf, f);
	const uint16_t *id;
	size_t n;
	fclose(f);
	ok(len == 1024 + 6000 && tokfile_parse(buf, len, &id, &n, &err) == SW_OK && n == 3000 &&
	   !memcmp(id, tok, sizeof tok), "tokfile_parse: the same tokens");
	ok(tokfile_parse(buf, len - 1, &id, &n, &err) == SW_EDATA && strstr(err.msg, "and a half"),
	   "a byte short: %s", err.msg);
	ok(tokfile_parse(buf, 1000, &id, &n, &err) == SW_EDATA && strstr(err.msg, "header"),
	   "shorter than the header: %s", err.msg);
	buf[0] ^= 1;
	ok(tokfile_parse(buf, len, &id, &n, &err) == SW_EDATA && strstr(err.msg, "magic"), "bad magic");
	buf[0] ^= 1;
	buf[4] = 2;
	ok(tokfile_parse(buf, len, &id, &n, &err) == SW_EDATA && strstr(err.msg, "version 2"), "version 2");

	snprintf(path, sizeof path, "%s/empty.llmc", dir);
	ok(!tokfile_create(&w, path, &err) && !tokfile_commit(&w, &err), "zero tokens written");
	f = fopen(path, "rb");
	len = fread(buf, 1, sizeof buf, f);
	fclose(f);
	ok(len == 1024 && tokfile_parse(buf, len, &id, &n, &err) == SW_OK && n == 0,
	   "zero tokens: a valid file (data_open wants 2 to train on)");

	snprintf(path, sizeof path, "%s/b.llmc", dir);
	ok(!tokfile_create(&w, path, &err) && !tokfile_append(&w, tok, 10, &err), "started");
	tokfile_abort(&w);
	ok(access(path, F_OK) != 0 && files_in(dir) == 2, "abort: neither the file nor a temporary one");
	ok(tokfile_create(&w, "/nonexistent-dir/x.llmc", &err) == SW_ECANTCREAT, "unwritable: SW_ECANTCREAT");

	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd))
		return 1;
	return tap_done();
}
