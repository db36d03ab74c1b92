/* data.c - token files (see data.h). */
#include "data.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && !strcmp(s + n - m, suffix);
}

int data_open(const char *path, enum data_format fmt, double val_fraction,
	      struct dataset *d, struct sw_err *err)
{
	struct stat st;
	int fd;
	int32_t header[3] = {0, 0, 0};

	memset(d, 0, sizeof *d);
	if (stat(path, &st) < 0)
		return sw_fail(err, sw_errno_status(errno), "%s", strerror(errno));
	if (!S_ISREG(st.st_mode))
		return sw_fail(err, SW_ENOINPUT, "not a regular file");
	if (st.st_size == 0)
		return sw_fail(err, SW_EDATA, "empty file");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sw_fail(err, sw_errno_status(errno), "%s", strerror(errno));
	d->map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (d->map == MAP_FAILED) {
		d->map = NULL;
		return sw_fail(err, SW_EIO, "mmap: %s", strerror(errno));
	}
	d->map_len = (size_t)st.st_size;
	if (d->map_len >= sizeof header)
		memcpy(header, d->map, sizeof header);
	if (fmt == DATA_AUTO)
		fmt = header[0] == DATA_LLMC_MAGIC ? DATA_LLMC : ends_with(path, ".bin") ? DATA_UINT16 : DATA_BYTES;
	d->format = fmt;
	switch (fmt) {
	case DATA_LLMC:
		if (d->map_len < DATA_LLMC_HEADER_BYTES || header[0] != DATA_LLMC_MAGIC) {
			data_close(d);
			return sw_fail(err, SW_EDATA, "not an llm.c token file (magic %d, expected %d)",
				       header[0], DATA_LLMC_MAGIC);
		}
		if (header[1] != 1) {
			data_close(d);
			return sw_fail(err, SW_EDATA, "llm.c token file version %d (expected 1)", header[1]);
		}
		if (header[2] < 0 || (uint64_t)DATA_LLMC_HEADER_BYTES + 2 * (uint64_t)header[2] != d->map_len) {
			int64_t have = ((int64_t)d->map_len - DATA_LLMC_HEADER_BYTES) / 2;
			data_close(d);
			return sw_fail(err, SW_EDATA,
				       "header says %d tokens, the file holds %lld", header[2], (long long)have);
		}
		d->tokens = d->map + DATA_LLMC_HEADER_BYTES;
		d->n = header[2];
		break;
	case DATA_UINT16:
		if (d->map_len % 2) {
			data_close(d);
			return sw_fail(err, SW_EDATA, "an odd number of bytes for uint16 tokens");
		}
		d->tokens = d->map;
		d->n = (int64_t)d->map_len / 2;
		break;
	default:
		d->tokens = d->map;
		d->n = (int64_t)d->map_len;
		break;
	}
	if (d->n < 2) {
		data_close(d);
		return sw_fail(err, SW_EDATA, "fewer than 2 tokens");
	}
	for (int64_t i = 0; i < d->n; i++) {
		int t = data_token(d, i);
		d->max_token = t > d->max_token ? t : d->max_token;
	}
	if (!(val_fraction >= 0 && val_fraction < 1))
		val_fraction = 0;
	d->n_train = d->n - (int64_t)((double)d->n * val_fraction);
	return SW_OK;
}

void data_close(struct dataset *d)
{
	if (d->map)
		munmap((void *)d->map, d->map_len);
	memset(d, 0, sizeof *d);
}

int data_token(const struct dataset *d, int64_t i)
{
	if (d->format == DATA_BYTES)
		return ((const unsigned char *)d->tokens)[i];
	uint16_t v;
	memcpy(&v, (const unsigned char *)d->tokens + 2 * i, 2);
	return v;
}

int data_check(const struct dataset *d, int T, int vocab, struct sw_err *err)
{
	if (d->max_token >= vocab)
		return sw_fail(err, SW_EDATA, "token id %d is not below the vocabulary size %d",
			       d->max_token, vocab);
	if (d->n_train < T + 1)
		return sw_fail(err, SW_EDATA, "%lld training tokens, a sequence needs %d",
			       (long long)d->n_train, T + 1);
	if (d->n - d->n_train > 0 && d->n - d->n_train < T + 1)
		return sw_fail(err, SW_EDATA, "%lld validation tokens, a sequence needs %d (change --val-fraction)",
			       (long long)(d->n - d->n_train), T + 1);
	return SW_OK;
}

static void window(const struct dataset *d, int64_t o, int T, int *tokens, int *targets)
{
	for (int t = 0; t < T; t++) {
		tokens[t] = data_token(d, o + t);
		targets[t] = data_token(d, o + t + 1);
	}
}

void data_train_batch(const struct dataset *d, struct sw_rng *r, int B, int T,
		      int *tokens, int *targets)
{
	uint64_t span = (uint64_t)(d->n_train - T);       /* offsets 0 .. n_train - T - 1 */

	for (int b = 0; b < B; b++) {
		int64_t o = (int64_t)(rng_next(r) % span);
		window(d, o, T, tokens + (size_t)b * T, targets + (size_t)b * T);
	}
}

void data_val_batch(const struct dataset *d, int64_t i, int B, int T, int *tokens,
		    int *targets)
{
	int64_t nval = d->n - d->n_train, per = nval / (T + 1);

	for (int b = 0; b < B; b++) {
		int64_t w = per > 0 ? (i * B + b) % per : 0;
		window(d, d->n_train + w * (T + 1), T, tokens + (size_t)b * T, targets + (size_t)b * T);
	}
}
