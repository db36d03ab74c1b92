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

#include <cjson/cJSON.h>

#include "../../lib/base/status.h"

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
	else
		*(char *)p = 0;         /* never read: the length is 0 */
	return p;
}

/*
 * What every JSON document a reader accepted must be, as the reference
 * readers (serde_json, Python's json) would have it, checked here without
 * the library's own JSON code: valid UTF-8 (decoded by hand: no overlong
 * form, no surrogate, nothing past U+10FFFF), an object from the first
 * non-blank byte to the last (nothing after it but blanks), and, as cJSON
 * parses it, no key twice in any object (compared pairwise).
 */
static inline int fuzz_utf8_valid(const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint32_t c = s[i], min;
		size_t len;

		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xE0) == 0xC0)
			len = 2, c &= 0x1F, min = 0x80;
		else if ((c & 0xF0) == 0xE0)
			len = 3, c &= 0x0F, min = 0x800;
		else if ((c & 0xF8) == 0xF0)
			len = 4, c &= 0x07, min = 0x10000;
		else
			return 0;
		if (i + len > n)
			return 0;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return 0;
			c = c << 6 | (s[i + k] & 0x3F);
		}
		if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
			return 0;
		i += len;
	}
	return 1;
}

static inline int fuzz_keys_unique(const cJSON *j)
{
	for (const cJSON *a = j ? j->child : NULL; a; a = a->next) {
		if (cJSON_IsObject(j))
			for (const cJSON *b = a->next; b; b = b->next)
				if (!strcmp(a->string, b->string))
					return 0;
		if (!fuzz_keys_unique(a))
			return 0;
	}
	return 1;
}

static inline void fuzz_json_clean(const uint8_t *s, size_t n)
{
	size_t first = 0, last = n;
	cJSON *root;

	FUZZ_ASSERT(fuzz_utf8_valid(s, n));
	while (first < n && strchr(" \t\n\r", s[first]) && s[first])
		first++;
	while (last > first && strchr(" \t\n\r", s[last - 1]) && s[last - 1])
		last--;
	FUZZ_ASSERT(last > first && s[first] == '{' && s[last - 1] == '}');
	root = cJSON_ParseWithLength((const char *)s, n);
	FUZZ_ASSERT(root && fuzz_keys_unique(root));
	cJSON_Delete(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
