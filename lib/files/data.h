/*
 * data.h - training tokens: llm.c token files (a 256 x int32 header: magic
 * 20240520, version 1, token count; then uint16 tokens), nanoGPT's raw
 * uint16 .bin, or raw text read as bytes (vocabulary 256). The file is
 * mapped read-only (lib/base/mapguard.h: a file truncated meanwhile makes the
 * batch functions fail with SW_EIO, never SIGBUS); the last val_fraction
 * of the tokens is held out for validation. Batches are windows of T + 1 tokens at pseudo-random offsets
 * drawn from the caller's RNG, so a run is reproducible and resumable from
 * the RNG state alone.
 */
#ifndef SW_DATA_H
#define SW_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "../base/mapguard.h"
#include "../base/rng.h"
#include "../base/status.h"

enum data_format { DATA_AUTO, DATA_LLMC, DATA_UINT16, DATA_BYTES };

/* "auto", "llmc", "uint16", "bytes" (--data-format): 0, or -1 if unknown. */
int data_format_parse(const char *s, enum data_format *out);
/* Its word, as data_format_parse reads it. */
const char *data_format_name(enum data_format f);

#define DATA_LLMC_MAGIC 20240520
#define DATA_LLMC_HEADER_BYTES 1024

struct dataset {
	enum data_format format;        /* as detected */
	const unsigned char *map;       /* the mapped file; NULL from data_parse */
	size_t map_len;
	struct mapguard guard;          /* the mapping and its open file; empty from data_parse */
	const void *tokens;             /* uint16 or bytes */
	int64_t n;                      /* tokens in the file */
	int64_t n_train;                /* [0, n_train) train, [n_train, n) val */
	int max_token;                  /* largest id present */
};

/*
 * Check buf[0, len) as tokens of format fmt and describe them in d, which
 * points into buf (buf must outlive it; data_close on it is a no-op).
 * DATA_AUTO: the llm.c magic, else uint16 when name (may be NULL) ends in
 * .bin, else bytes. The checks are data_open's; a bytes-in function so the
 * reader can be fuzzed.
 */
int data_parse(const void *buf, size_t len, enum data_format fmt, const char *name,
	       double val_fraction, struct dataset *d, struct sw_err *err);

/* Check buf[0, len) as an llm.c token file (header and count against the
 * size, zero tokens allowed); *id points at its *n tokens (buf 2-byte
 * aligned for *id to be used as an array, as malloc and mmap give). */
int data_llmc_parse(const void *buf, size_t len, const uint16_t **id, size_t *n,
		    struct sw_err *err);

/*
 * Map the file and check it with data_parse: an llm.c header whose count
 * disagrees with the file's size, an odd-sized uint16 file, or fewer than
 * 2 tokens is SW_EDATA. DATA_AUTO: the llm.c magic, else .bin as uint16,
 * else bytes.
 */
int data_open(const char *path, enum data_format fmt, double val_fraction,
	      struct dataset *d, struct sw_err *err);
void data_close(struct dataset *d);

int data_token(const struct dataset *d, int64_t i);

/* Every split must hold one window of T + 1 tokens: SW_EDATA if not. */
int data_check(const struct dataset *d, int T, int vocab, struct sw_err *err);

/* B training windows at random offsets: tokens[b, t] = x[o + t],
 * targets[b, t] = x[o + t + 1]. SW_EIO "the file shrank while it was
 * read" if the file was truncated since data_open (the batch is not the
 * file's). */
int data_train_batch(const struct dataset *d, struct sw_rng *r, int B, int T,
		     int *tokens, int *targets, struct sw_err *err)
	__attribute__((warn_unused_result));

/* Validation batch number i: B consecutive windows, wrapping around;
 * SW_EIO as data_train_batch. */
int data_val_batch(const struct dataset *d, int64_t i, int B, int T, int *tokens,
		   int *targets, struct sw_err *err)
	__attribute__((warn_unused_result));

#endif
