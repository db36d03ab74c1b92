/*
 * jsonstrict.h - JSON from files that come from elsewhere (safetensors
 * headers, model.safetensors.index.json, config.json), read as the
 * reference readers read it (serde_json in the safetensors crate, Python's
 * json in transformers), or refused.
 *
 * cJSON alone is laxer than both: it takes bytes after the value
 * ("{...}}garbage"), every byte below 0x20 as whitespace, raw control
 * bytes inside strings, invalid UTF-8, numbers such as 01 or 1., and an
 * escaped NUL, which ends its C string early ("a\u0000b" reads as "a");
 * of a key given twice in one object cJSON's lookup finds the first while
 * Python keeps the last. So a document is first checked against RFC 8259
 * in one pass (UTF-8 included; only JSON whitespace after the value, as
 * both reference readers allow), then parsed by cJSON, then the keys of
 * every object are checked unique by sorting them: O(n log n) in all.
 */
#ifndef SW_JSONSTRICT_H
#define SW_JSONSTRICT_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "status.h"

/* Deeper nesting is refused (cJSON's own limit is 1000, serde_json's 128;
 * no file the tools read nests more than 4 deep). */
#define JSONSTRICT_MAX_DEPTH 512

/*
 * Parse len bytes (no NUL needed) into *out (cJSON_Delete it). what names
 * the document in a message ("config.json": "config.json is not valid
 * JSON (byte 12: ...)", "config.json: key 'x' appears twice"). SW_EDATA
 * when the bytes are not exactly one valid JSON value, SW_ESOFTWARE when
 * out of memory.
 */
int jsonstrict_parse(const char *buf, size_t len, const char *what, cJSON **out,
		     struct sw_err *err);

/*
 * The length (1 to 4) of the valid UTF-8 sequence at s, of which avail
 * bytes may be read; 0 when the bytes there are no valid sequence
 * (overlong forms, surrogates and code points past U+10FFFF included).
 */
int jsonstrict_utf8_len(const unsigned char *s, size_t avail);

#endif
