/*
 * fuzz.h - what every fuzz target shares. Each tests/fuzz/fuzz-NAME.c
 * defines LLVMFuzzerTestOneInput: linked with clang's libFuzzer
 * (-fsanitize=fuzzer) it is fuzzed; linked with replay.c (gcc, no clang
 * needed) it runs once on every committed seed and regression input.
 *
 * Beyond "no crash", a target checks what a reader promises about what it
 * accepted: FUZZ_ASSERT aborts with the failed condition, so libFuzzer
 * keeps the input as a crash and the replay fails.
 */
#ifndef SW_FUZZ_H
#define SW_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/status.h"

#define FUZZ_ASSERT(cond)                                                       \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n",   \
				__FILE__, __LINE__, #cond);                     \
			abort();                                                \
		}                                                               \
	} while (0)

/* A refusal is SW_EDATA (bad data) with a message, never anything else. */
#define FUZZ_REFUSED(rc, err)                                                   \
	do {                                                                    \
		if ((rc) != SW_EDATA || !(err).msg[0]) {                        \
			fprintf(stderr, "%s:%d: refused with %d: '%s'\n",       \
				__FILE__, __LINE__, (rc), (err).msg);           \
			abort();                                                \
		}                                                               \
	} while (0)

/* An exactly sized malloc'ed copy of the input (size 0: one byte), so
 * ASan sees a read past its end; libFuzzer's own buffer may be larger. */
static inline void *fuzz_copy(const uint8_t *data, size_t size)
{
	void *p = malloc(size ? size : 1);

	FUZZ_ASSERT(p);
	if (size)
		memcpy(p, data, size);
	return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
