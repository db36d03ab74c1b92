/*
 * fuzz-tokens - the token-file reader (data_parse, what sw-train's
 * data_open runs on the mapped file; tokfile_parse, what sw-tokenize
 * reads). The input is two control bytes, then the file: byte 0 picks the
 * format (auto by magic with no name or with a ".bin" name, llm.c, uint16,
 * bytes, or tokfile_parse) and the window T, byte 1 the vocabulary size
 * and the validation fraction. Beyond "no crash", an accepted file has a
 * count consistent with its size (llm.c: 1024 + 2 x count bytes exactly;
 * uint16: half the bytes; bytes: every byte), at least 2 tokens, a train
 * split in 1..count and max_token the largest id; when data_check accepts
 * it for T and the vocabulary, every id is below the vocabulary and every
 * training and validation window lies inside the file (ASan) with targets
 * the tokens shifted by one. A refusal is SW_EDATA with a message.
 */
#include <string.h>

#include "../../lib/files/data.h"
#include "../../lib/files/tokfile.h"
#include "fuzz.h"

enum { B = 2, TMAX = 32 };

static void check_windows(const struct dataset *d, int T, int vocab)
{
	int x[B * TMAX], y[B * TMAX];
	struct sw_rng r;

	rng_seed(&r, 1);
	/* validation windows only when data_check left a validation split */
	for (int pass = 0; pass < (d->n > d->n_train ? 3 : 2); pass++) {
		if (pass < 2)
			FUZZ_ASSERT(data_train_batch(d, &r, B, T, x, y, NULL) == SW_OK);
		else
			FUZZ_ASSERT(data_val_batch(d, 7, B, T, x, y, NULL) == SW_OK);
		for (int i = 0; i < B * T; i++)
			FUZZ_ASSERT(x[i] >= 0 && x[i] < vocab && y[i] >= 0 && y[i] < vocab);
		for (int b = 0; b < B; b++)
			for (int t = 0; t + 1 < T; t++)
				FUZZ_ASSERT(y[b * T + t] == x[b * T + t + 1]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum data_format fmts[] = {DATA_AUTO, DATA_AUTO, DATA_LLMC, DATA_UINT16,
						 DATA_BYTES};
	struct dataset d;
	struct sw_err err = {0};
	unsigned pick, T, vocab;
	double val_fraction;
	size_t len;
	void *buf;
	int rc, max = 0;

	if (size < 2)
		return 0;
	pick = data[0] & 7;
	T = 1 + (data[0] >> 3);                 /* 1 .. 32 */
	vocab = data[1] ? data[1] * 257u : 65536u;
	val_fraction = 0.1 * (data[1] & 3);
	len = size - 2;
	buf = fuzz_copy(data + 2, len);        /* malloc-aligned for the uint16 view */

	if (pick >= 5) {
		const uint16_t *id;
		size_t n;
		unsigned sum = 0;

		rc = tokfile_parse(buf, len, &id, &n, &err);
		if (rc) {
			FUZZ_REFUSED(rc, err);
		} else {
			FUZZ_ASSERT(len == DATA_LLMC_HEADER_BYTES + 2 * n);
			for (size_t i = 0; i < n; i++)
				sum += id[i];
			(void)sum;
		}
		free(buf);
		return 0;
	}

	rc = data_parse(buf, len, fmts[pick], pick == 1 ? "x.bin" : NULL, val_fraction, &d, &err);
	if (rc) {
		FUZZ_REFUSED(rc, err);
		free(buf);
		return 0;
	}
	FUZZ_ASSERT(!d.map && d.n >= 2);
	switch (d.format) {
	case DATA_LLMC:
		FUZZ_ASSERT(len == DATA_LLMC_HEADER_BYTES + 2 * (size_t)d.n);
		FUZZ_ASSERT((const char *)d.tokens == (const char *)buf + DATA_LLMC_HEADER_BYTES);
		break;
	case DATA_UINT16:
		FUZZ_ASSERT(pick == 1 || pick == 3);
		FUZZ_ASSERT(len == 2 * (size_t)d.n && d.tokens == buf);
		break;
	case DATA_BYTES:
		FUZZ_ASSERT(pick == 0 || pick == 1 || pick == 4);
		FUZZ_ASSERT(len == (size_t)d.n && d.tokens == buf);
		break;
	default:
		FUZZ_ASSERT(!"a format data_parse cannot give");
	}
	FUZZ_ASSERT(d.n_train >= 1 && d.n_train <= d.n);
	for (int64_t i = 0; i < d.n; i++) {
		int t = data_token(&d, i);
		FUZZ_ASSERT(t >= 0 && t < 65536 && (d.format != DATA_BYTES || t < 256));
		max = t > max ? t : max;
	}
	FUZZ_ASSERT(max == d.max_token);

	rc = data_check(&d, (int)T, (int)vocab, &err);
	if (rc) {
		FUZZ_REFUSED(rc, err);
	} else {
		FUZZ_ASSERT(d.max_token < (int)vocab && d.n_train >= (int64_t)T + 1);
		check_windows(&d, (int)T, (int)vocab);
	}
	data_close(&d);
	free(buf);
	return 0;
}
