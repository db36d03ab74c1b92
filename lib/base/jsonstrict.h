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
 * Python keeps the last. So a document is first checked in one pass
 * against RFC 8259 (UTF-8 included; only JSON whitespace after the value,
 * as both reference readers allow) with every object's keys unique (a
 * hash index per object: linear on average), then parsed by cJSON.
 *
 * A large document (a safetensors header of a million tensors) need not
 * become a cJSON tree: after jsonstrict_check, the cursor functions below
 * walk its bytes in place.
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
 * Check that len bytes (no NUL needed) are exactly one valid JSON value
 * with no key twice in an object. what names the document in a message
 * ("config.json is not valid JSON (byte 12: ...)", "config.json: key 'x'
 * appears twice"). SW_EDATA when they are not, SW_ESOFTWARE when out of
 * memory (it takes about the document's length).
 */
int jsonstrict_check(const char *buf, size_t len, const char *what, struct sw_err *err);

/* jsonstrict_check, then parse into *out (cJSON_Delete it). */
int jsonstrict_parse(const char *buf, size_t len, const char *what, cJSON **out,
		     struct sw_err *err);

/*
 * A cursor over a document jsonstrict_check accepted, end its end; each
 * returns where it stopped. jsonstrict_ws skips blanks; jsonstrict_skip
 * passes the value at p; jsonstrict_string decodes the string at p (its
 * opening quote) into out with a NUL (room: the quoted text's length).
 */
const char *jsonstrict_ws(const char *p, const char *end);
const char *jsonstrict_skip(const char *p, const char *end);
const char *jsonstrict_string(const char *p, const char *end, char *out);

/*
 * The length (1 to 4) of the valid UTF-8 sequence at s, of which avail
 * bytes may be read; 0 when the bytes there are no valid sequence
 * (overlong forms, surrogates and code points past U+10FFFF included).
 */
int jsonstrict_utf8_len(const unsigned char *s, size_t avail);

#endif
