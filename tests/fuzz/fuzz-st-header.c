/*
 * fuzz-st-header - the safetensors header parser (st_parse_header). The
 * input is an 8-byte little-endian length of the data part followed by the
 * header's JSON (so both the JSON and the size it must describe are
 * mutated). Beyond "no crash", a header that is accepted must describe the
 * data exactly: every entry has a known dtype and a rank <= SW_MAX_RANK,
 * numel is the product of its shape without overflow, end - begin is
 * numel x the dtype's size, names are unique NUL-terminated strings that
 * an HDF5 dataset can have (not empty, not ".", no '/'), and the ranges,
 * sorted, are contiguous from 0 and end at the data's length; the header
 * is valid UTF-8, one object and nothing after it but blanks, no key twice
 * in any object (fuzz_json_clean). A refusal is SW_EDATA with a message.
 */
#include <string.h>

#include "../../lib/formats/safetensors.h"
#include "fuzz.h"

/* The element sizes, written out again here as the reference. */
static int dtype_size(const char *name)
{
	static const struct { const char *name; int size; } t[] = {
		{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"U64", 8},
		{"I32", 4}, {"U32", 4}, {"I16", 2}, {"U16", 2}, {"I8", 1}, {"U8", 1},
		{"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (!strcmp(name, t[i].name))
			return t[i].size;
	return 0;
}

static int by_begin(const void *a, const void *b)
{
	const struct st_entry *x = *(const struct st_entry *const *)a;
	const struct st_entry *y = *(const struct st_entry *const *)b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;    /* empty tensors first */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct st_entry *e, **order;
	struct st_header h;
	struct sw_err err = {0};
	uint64_t data_len = 0, end = 0;
	size_t n;
	char *json;
	int rc;

	if (size < 8)
		return 0;
	for (int i = 0; i < 8; i++)
		data_len |= (uint64_t)data[i] << (8 * i);
	json = fuzz_copy(data + 8, size - 8);
	rc = st_parse_header(json, size - 8, data_len, NULL, &h, &err);
	free(json);
	e = h.e;
	n = h.n;
	if (rc) {
		FUZZ_REFUSED(rc, err);
		FUZZ_ASSERT(!e && n == 0 && !h.pool);
		return 0;
	}
	FUZZ_ASSERT(n == 0 || e);
	fuzz_json_clean(data + 8, size - 8);
	order = malloc((n ? n : 1) * sizeof *order);
	FUZZ_ASSERT(order);
	for (size_t i = 0; i < n; i++) {
		int64_t numel = 1;
		int es;

		FUZZ_ASSERT(strlen(e[i].name) < SW_NAME_MAX);
		FUZZ_ASSERT(strcmp(e[i].name, "__metadata__"));
		FUZZ_ASSERT(e[i].name[0] && !strchr(e[i].name, '/') && strcmp(e[i].name, "."));
		es = dtype_size(e[i].dtype_name);
		FUZZ_ASSERT(es > 0);
		FUZZ_ASSERT(e[i].dtype == SW_DTYPE_UNSUPPORTED || sw_dtype_size(e[i].dtype) == es);
		FUZZ_ASSERT(e[i].rank >= 0 && e[i].rank <= SW_MAX_RANK);
		for (int k = 0; k < e[i].rank; k++) {
			FUZZ_ASSERT(e[i].shape[k] >= 0);
			FUZZ_ASSERT(!__builtin_mul_overflow(numel, e[i].shape[k], &numel));
		}
		FUZZ_ASSERT(numel == e[i].numel);
		FUZZ_ASSERT(e[i].begin <= e[i].end);
		FUZZ_ASSERT((unsigned __int128)e[i].numel * (unsigned)es == e[i].end - e[i].begin);
		for (size_t j = 0; j < i; j++)
			FUZZ_ASSERT(strcmp(e[i].name, e[j].name));
		order[i] = &e[i];
	}
	qsort(order, n, sizeof *order, by_begin);
	for (size_t i = 0; i < n; i++) {
		FUZZ_ASSERT(order[i]->begin == end);
		end = order[i]->end;
	}
	FUZZ_ASSERT(end == data_len);
	free(order);
	st_header_free(&h);
	return 0;
}
