/*
 * fuzz-pickle - the restricted unpickler (pk_load). The input is a
 * data.pkl. Beyond "no crash", what it accepted holds only values of the
 * kinds it knows, and every tensor in it addresses elements inside its
 * storage (recomputed here from the sizes and strides, in 128 bits), a
 * storage's key a plain name of [A-Za-z0-9_-]; a refusal is SW_EDATA
 * with a message. The tree is walked breadth-first with a budget (a
 * pickle may make a list hold itself).
 */
#include <string.h>

#include "../../lib/formats/pickle.h"
#include "fuzz.h"

static void check_tensor(const struct pk_tensor *t)
{
	const struct pk_storage *s = t->storage;
	__int128 last = t->offset, numel = 1;

	FUZZ_ASSERT(s && s->numel >= 0 && t->rank >= 0 && t->rank <= SW_MAX_RANK && t->offset >= 0);
	FUZZ_ASSERT(s->key[0] && strlen(s->key) <= 64 && strspn(s->key,
		    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_-") == strlen(s->key));
	FUZZ_ASSERT(s->elem_size == 1 || s->elem_size == 2 || s->elem_size == 4 || s->elem_size == 8);
	for (int i = 0; i < t->rank; i++) {
		FUZZ_ASSERT(t->shape[i] >= 0 && t->stride[i] >= 0);
		numel *= t->shape[i];
		last += (__int128)(t->shape[i] ? t->shape[i] - 1 : 0) * t->stride[i];
	}
	FUZZ_ASSERT(numel == t->numel);
	if (numel > 0)
		FUZZ_ASSERT(last < s->numel);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct pk_value **queue;
	struct pk_result r;
	struct sw_err err = {0};
	char *buf = fuzz_copy(data, size);
	size_t head = 0, tail = 0, cap = 4096;
	int rc;

	/* as from an archive of a record per 256 bytes of pickle */
	rc = pk_load(buf, size, size / 256 + 1, &r, &err);
	free(buf);
	if (rc) {
		FUZZ_REFUSED(rc, err);
		FUZZ_ASSERT(!r.root && !r.arena);
		return 0;
	}
	FUZZ_ASSERT(r.root);
	queue = malloc(cap * sizeof *queue);
	FUZZ_ASSERT(queue);
	queue[tail++] = r.root;
	while (head < tail) {
		const struct pk_value *v = queue[head++];
		FUZZ_ASSERT(v->type <= PK_TENSOR);
		if (v->type == PK_TENSOR)
			check_tensor(v->u.tensor);
		if (v->type == PK_STR || v->type == PK_BYTES)
			FUZZ_ASSERT(v->u.str.s && v->u.str.s[v->u.str.len] == '\0');
		if (v->type == PK_TUPLE || v->type == PK_LIST || v->type == PK_DICT) {
			FUZZ_ASSERT(v->type != PK_DICT || v->u.seq.n % 2 == 0);
			for (size_t i = 0; i < v->u.seq.n && tail < cap; i++)
				queue[tail++] = v->u.seq.v[i];
		}
	}
	free(queue);
	pk_free(&r);
	return 0;
}
