/* data.c - token files (see data.h). */
#include "data.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && !strcmp(s + n - m, suffix);
}

static const char *const data_format_names[] = {"auto", "llmc", "uint16", "bytes"};

const char *data_format_name(enum data_format f)
{
	return (unsigned)f < 4 ? data_format_names[f] : "?";
}

int data_format_parse(const char *s, enum data_format *out)
{
	for (int i = 0; i < 4; i++)
		if (!strcmp(s, data_format_names[i])) {
			*out = (enum data_format)i;
			return 0;
		}
	return -1;
}

int data_llmc_parse(const void *buf, size_t len, const uint16_t **id, size_t *n,
		    struct sw_err *err)
{
	int32_t h[3];

	*id = NULL;
	*n = 0;
	if (len < DATA_LLMC_HEADER_BYTES)
		return sw_fail(err, SW_EDATA, "%zu bytes: not an llm.c token file (its header is %d bytes)",
			       len, DATA_LLMC_HEADER_BYTES);
	memcpy(h, buf, sizeof h);
	if (h[0] != DATA_LLMC_MAGIC)
		return sw_fail(err, SW_EDATA, "not an llm.c token file (magic %d, expected %d)", h[0],
			       DATA_LLMC_MAGIC);
	if (h[1] != 1)
		return sw_fail(err, SW_EDATA, "llm.c token file version %d (expected 1)", h[1]);
	/* 2 * count in 64 bits: a count near INT32_MAX must not wrap */
	if (h[2] < 0 || (uint64_t)DATA_LLMC_HEADER_BYTES + 2 * (uint64_t)h[2] != len)
		return sw_fail(err, SW_EDATA, "header says %d tokens, the file holds %zu%s", h[2],
			       (len - DATA_LLMC_HEADER_BYTES) / 2, len % 2 ? " and a half" : "");
	*id = (const uint16_t *)((const unsigned char *)buf + DATA_LLMC_HEADER_BYTES);
	*n = (size_t)h[2];
	return SW_OK;
}

int data_parse(const void *buf, size_t len, enum data_format fmt, const char *name,
	       double val_fraction, struct dataset *d, struct sw_err *err)
{
	int32_t magic = 0;
	const uint16_t *id;
	size_t n;
	int rc;

	memset(d, 0, sizeof *d);
	if (len == 0)
		return sw_fail(err, SW_EDATA, "empty file");
	if (len >= sizeof magic)
		memcpy(&magic, buf, sizeof magic);
	if (fmt == DATA_AUTO)
		fmt = magic == DATA_LLMC_MAGIC ? DATA_LLMC :
		      name && ends_with(name, ".bin") ? DATA_UINT16 : DATA_BYTES;
	switch (fmt) {
	case DATA_LLMC:
		if ((rc = data_llmc_parse(buf, len, &id, &n, err)))
			return rc;
		d->tokens = id;
		d->n = (int64_t)n;
		break;
	case DATA_UINT16:
		if (len % 2)
			return sw_fail(err, SW_EDATA, "an odd number of bytes for uint16 tokens");
		d->tokens = buf;
		d->n = (int64_t)(len / 2);
		break;
	default:
		d->tokens = buf;
		d->n = (int64_t)len;
		break;
	}
	d->format = fmt;
	if (d->n < 2) {
		memset(d, 0, sizeof *d);
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

int data_open(const char *path, enum data_format fmt, double val_fraction,
	      struct dataset *d, struct sw_err *err)
{
	struct stat st;
	struct mapguard g;
	int fd, rc;

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
	if ((rc = mapguard_map(fd, 0, (size_t)st.st_size, &g, err))) {
		close(fd);
		return rc;
	}
	rc = data_parse(g.base, (size_t)st.st_size, fmt, path, val_fraction, d, err);
	/* parse read every token: a file cut meanwhile gave zeros */
	if (!rc)
		rc = mapguard_check(&g, err);
	if (rc) {
		mapguard_unmap(&g);
		close(fd);
		memset(d, 0, sizeof *d);
		return rc;
	}
	d->map = g.base;
	d->map_len = g.len;
	d->guard = g;   /* keeps fd open until data_close */
	return SW_OK;
}

void data_close(struct dataset *d)
{
	int fd = d->guard.base ? d->guard.fd : -1;

	mapguard_unmap(&d->guard);
	if (fd >= 0)
		close(fd);
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

int data_train_batch(const struct dataset *d, struct sw_rng *r, int B, int T,
		     int *tokens, int *targets, struct sw_err *err)
{
	uint64_t span = (uint64_t)(d->n_train - T);       /* offsets 0 .. n_train - T - 1 */

	for (int b = 0; b < B; b++) {
		int64_t o = (int64_t)(rng_next(r) % span);
		window(d, o, T, tokens + (size_t)b * T, targets + (size_t)b * T);
	}
	return mapguard_check(&d->guard, err);
}

int data_val_batch(const struct dataset *d, int64_t i, int B, int T, int *tokens,
		   int *targets, struct sw_err *err)
{
	int64_t nval = d->n - d->n_train, per = nval / (T + 1);

	for (int b = 0; b < B; b++) {
		int64_t w = per > 0 ? (i * B + b) % per : 0;
		window(d, d->n_train + w * (T + 1), T, tokens + (size_t)b * T, targets + (size_t)b * T);
	}
	return mapguard_check(&d->guard, err);
}
