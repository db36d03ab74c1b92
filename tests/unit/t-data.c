/* Unit tests of lib/files/data.c on token files written here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../lib/files/data.h"
#include "tap.h"

static void write_file(const char *path, const void *a, size_t na, const void *b, size_t nb)
{
	FILE *f = fopen(path, "wb");
	fwrite(a, 1, na, f);
	if (b)
		fwrite(b, 1, nb, f);
	fclose(f);
}

int main(void)
{
	char dir[] = "/tmp/sw-t-data.XXXXXX", path[256];
	int32_t header[256] = {20240520, 1, 100};
	uint16_t tok[100];
	struct dataset d;
	struct sw_err err;
	struct sw_rng r;
	int x[12], y[12];

	if (!mkdtemp(dir))
		return 1;
	for (int i = 0; i < 100; i++)
		tok[i] = (uint16_t)(i * 7 % 50 + 1000);
	snprintf(path, sizeof path, "%s/a.llmc", dir);
	write_file(path, header, sizeof header, tok, sizeof tok);
	ok(data_open(path, DATA_AUTO, 0.2, &d, &err) == SW_OK && d.format == DATA_LLMC && d.n == 100 &&
	   d.n_train == 80 && d.max_token == 1049, "llm.c file: 100 tokens, 80 train, max id 1049");
	ok(data_token(&d, 3) == 1021, "token 3");
	ok(data_check(&d, 12, 1050, &err) == SW_OK, "fits vocab 1050");
	ok(data_check(&d, 12, 1049, &err) == SW_EDATA && strstr(err.msg, "1049"), "id >= vocab refused: %s", err.msg);
	ok(data_check(&d, 20, 2000, &err) == SW_EDATA, "validation split too short for T = 20");
	rng_seed(&r, 1);
	ok(data_train_batch(&d, &r, 2, 6, x, y, &err) == SW_OK, "a training batch");
	int shifted = 1;
	for (int b = 0; b < 2; b++)
		for (int t = 0; t + 1 < 6; t++)
			shifted &= y[b * 6 + t] == x[b * 6 + t + 1];
	ok(shifted, "targets are the tokens shifted by one");
	ok(data_val_batch(&d, 0, 2, 6, x, y, &err) == SW_OK, "a validation batch");
	ok(x[0] == tok[80] && y[0] == tok[81] && x[6] == tok[87], "validation windows from the held-out tail");
	data_close(&d);

	header[2] = 101;
	write_file(path, header, sizeof header, tok, sizeof tok);
	ok(data_open(path, DATA_AUTO, 0.1, &d, &err) == SW_EDATA && strstr(err.msg, "101 tokens") &&
	   strstr(err.msg, "holds 100"), "count disagreeing with the size: %s", err.msg);
	header[1] = 2;
	header[2] = 100;
	write_file(path, header, sizeof header, tok, sizeof tok);
	ok(data_open(path, DATA_LLMC, 0.1, &d, &err) == SW_EDATA && strstr(err.msg, "version 2"), "version 2 refused");

	snprintf(path, sizeof path, "%s/b.bin", dir);
	write_file(path, tok, sizeof tok, NULL, 0);
	ok(data_open(path, DATA_AUTO, 0, &d, &err) == SW_OK && d.format == DATA_UINT16 && d.n == 100 &&
	   d.n_train == 100, "nanoGPT .bin: raw uint16");
	data_close(&d);
	write_file(path, tok, 99, NULL, 0);
	ok(data_open(path, DATA_AUTO, 0, &d, &err) == SW_EDATA, "odd byte count refused");

	snprintf(path, sizeof path, "%s/c.txt", dir);
	write_file(path, "hello\xff", 6, NULL, 0);
	ok(data_open(path, DATA_AUTO, 0, &d, &err) == SW_OK && d.format == DATA_BYTES && d.n == 6 &&
	   d.max_token == 255, "text as bytes, 0..255");
	data_close(&d);
	write_file(path, "", 0, NULL, 0);
	ok(data_open(path, DATA_AUTO, 0, &d, &err) == SW_EDATA, "empty file refused");
	ok(data_open(dir, DATA_AUTO, 0, &d, &err) == SW_ENOINPUT, "a directory refused");
	/* data_parse: the same checks on bytes in memory (what fuzz-tokens feeds) */
	static int32_t mem[256 + 50] = {20240520, 1, 100};
	memcpy(mem + 256, tok, sizeof tok);
	ok(data_parse(mem, 1024 + 200, DATA_AUTO, NULL, 0.5, &d, &err) == SW_OK && d.format == DATA_LLMC &&
	   d.n == 100 && d.n_train == 50 && d.max_token == 1049 && !d.map && data_token(&d, 3) == 1021,
	   "data_parse: llm.c in memory, nothing mapped");
	data_close(&d);
	ok(data_parse(mem, 1024 + 199, DATA_LLMC, NULL, 0, &d, &err) == SW_EDATA &&
	   strstr(err.msg, "and a half") && !d.tokens && !d.n, "data_parse: a byte short: %s", err.msg);
	mem[2] = INT32_MAX;
	ok(data_parse(mem, 1024 + 200, DATA_AUTO, NULL, 0, &d, &err) == SW_EDATA &&
	   strstr(err.msg, "2147483647 tokens"), "data_parse: count INT32_MAX does not wrap: %s", err.msg);
	mem[2] = 0;
	ok(data_parse(mem, 1024, DATA_AUTO, NULL, 0, &d, &err) == SW_EDATA && strstr(err.msg, "fewer than 2"),
	   "data_parse: zero tokens refused (tokfile_parse allows them)");
	ok(data_parse(mem, 1023, DATA_LLMC, NULL, 0, &d, &err) == SW_EDATA && strstr(err.msg, "1023 bytes"),
	   "data_parse: shorter than the header: %s", err.msg);
	ok(data_parse(tok, 200, DATA_AUTO, "x.bin", 0, &d, &err) == SW_OK && d.format == DATA_UINT16 && d.n == 100,
	   "data_parse: a name ending in .bin is uint16");
	ok(data_parse(tok, 200, DATA_AUTO, NULL, 0, &d, &err) == SW_OK && d.format == DATA_BYTES && d.n == 200,
	   "data_parse: no name, no magic: bytes");
	ok(data_parse(tok, 1, DATA_BYTES, NULL, 0, &d, &err) == SW_EDATA, "data_parse: one byte is too few");
	ok(data_parse(tok, 0, DATA_AUTO, NULL, 0, &d, &err) == SW_EDATA && strstr(err.msg, "empty"),
	   "data_parse: empty");
	ok(data_parse(tok, 200, DATA_BYTES, NULL, 2.0, &d, &err) == SW_OK && d.n_train == 200,
	   "data_parse: a val_fraction outside [0, 1) holds nothing out");

	snprintf(path, sizeof path, "rm -rf %s", dir);
	if (system(path))
		return 1;
	return tap_done();
}
