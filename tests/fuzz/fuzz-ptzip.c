/*
 * fuzz-ptzip - the zip container of PyTorch checkpoints (ptzip_open,
 * ptzip_read through minizip) and the pickle inside (pk_load). The input
 * is the archive. Beyond "no crash", an archive it accepted has every
 * record's data inside the input, a stored record's two sizes equal, its
 * names sorted, unique, not empty and without a NUL; a record read gives
 * exactly its stated size, its CRC-32 the one its entry gives (0 only
 * for a stored record); a refusal is SW_EDATA with a message.
 */
#include <string.h>

#include "../../lib/formats/pickle.h"
#include "../../lib/formats/ptzip.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ptzip z;
	struct sw_err err = {0};
	char *buf = fuzz_copy(data, size);
	int rc;

	rc = ptzip_open(-1, buf, size, &z, &err);
	if (rc) {
		FUZZ_REFUSED(rc, err);
		free(buf);
		return 0;
	}
	FUZZ_ASSERT(z.n > 0 && z.top[0] && !strchr(z.top, '/'));
	for (size_t i = 0; i < z.n; i++) {
		const struct ptzip_entry *e = &z.e[i];
		char *rec = NULL;
		size_t len = 0;

		FUZZ_ASSERT(e->name && e->name[0]);
		FUZZ_ASSERT(i == 0 || strcmp(z.e[i - 1].name, e->name) < 0);
		FUZZ_ASSERT(e->offset <= size && e->csize <= size - e->offset);
		FUZZ_ASSERT(e->method == 8 || (e->method == 0 && e->size == e->csize));
		FUZZ_ASSERT(ptzip_find(&z, e->name) == e);
		rc = ptzip_read(&z, e, 1u << 20, &rec, &len, &err);
		if (rc) {
			FUZZ_REFUSED(rc, err);
			FUZZ_ASSERT(!rec);
			continue;
		}
		FUZZ_ASSERT(len == e->size && rec[len] == '\0');
		FUZZ_ASSERT(ptzip_crc_ok(e->crc, e->method, rec, len));
		if (e->method == 0)
			FUZZ_ASSERT(!memcmp(rec, buf + e->offset, len));
		if (!strcmp(e->name, "data.pkl")) {
			struct pk_result r;
			if (pk_load(rec, len, z.n, &r, &err) == SW_OK)
				pk_free(&r);
		}
		free(rec);
	}
	ptzip_close(&z);
	free(buf);
	return 0;
}
