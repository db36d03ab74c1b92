/*
 * fuzz-st-index - model.safetensors.index.json (st_parse_index). The input
 * is the file. Beyond "no crash", an accepted index maps every tensor name
 * to a plain file name in the index's own directory: the shard is neither
 * empty, ".", "..", nor holds a '/' (no path leads outside the directory);
 * every name is one an HDF5 dataset can have (not empty, not ".", no '/')
 * and listed once; the file is valid UTF-8, one object and nothing after
 * it, no key twice (fuzz_json_clean). A refusal is SW_EDATA with a
 * message.
 */
#include <string.h>

#include "../../lib/formats/safetensors.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct st_index idx;
	struct sw_err err = {0};
	char *json = fuzz_copy(data, size);
	int rc;

	rc = st_parse_index(json, size, &idx, &err);
	free(json);
	if (rc) {
		FUZZ_REFUSED(rc, err);
		FUZZ_ASSERT(!idx.e && !idx.pool && idx.n == 0);
		return 0;
	}
	fuzz_json_clean(data, size);
	FUZZ_ASSERT(idx.n == 0 || (idx.e && idx.pool));
	for (size_t i = 0; i < idx.n; i++) {
		const char *s = idx.e[i].shard, *name = idx.e[i].name;

		FUZZ_ASSERT(s[0] && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, ".."));
		FUZZ_ASSERT(name[0] && !strchr(name, '/') && strcmp(name, "."));
		for (size_t j = 0; j < i; j++)
			FUZZ_ASSERT(strcmp(name, idx.e[j].name));
	}
	st_index_free(&idx);
	return 0;
}
