/*
 * fuzz-st-index - model.safetensors.index.json (st_parse_index). The input
 * is the file. Beyond "no crash", an accepted index maps every tensor name
 * to a plain file name in the index's own directory: both are
 * NUL-terminated within their fields, the shard is neither empty, ".",
 * "..", nor holds a '/' (no path leads outside the directory). A refusal
 * is SW_EDATA with a message.
 */
#include <string.h>

#include "../../lib/safetensors.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct st_index_entry *e;
	struct sw_err err = {0};
	size_t n;
	char *json = fuzz_copy(data, size);
	int rc;

	rc = st_parse_index(json, size, &e, &n, &err);
	free(json);
	if (rc) {
		FUZZ_REFUSED(rc, err);
		FUZZ_ASSERT(!e && n == 0);
		return 0;
	}
	FUZZ_ASSERT(n == 0 || e);
	for (size_t i = 0; i < n; i++) {
		const char *s = e[i].shard;

		FUZZ_ASSERT(memchr(e[i].name, '\0', sizeof e[i].name));
		FUZZ_ASSERT(memchr(s, '\0', sizeof e[i].shard));
		FUZZ_ASSERT(s[0] && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, ".."));
	}
	free(e);
	return 0;
}
