/* Unit tests of lib/base/grow.c: the grow-array helper. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/base/grow.h"
#include "tap.h"

#ifdef __SANITIZE_ADDRESS__
/* a realloc too large to serve must return NULL here, as without ASan,
 * rather than end the test */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}
#endif

struct rec {
	double x;
	char name[24];
};

/* every element of a[0..n) still holds what was written */
static int holds(const int *a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i] != (int)(i * 7 + 1))
			return 0;
	return 1;
}

int main(void)
{
	int *a = NULL, *before;
	size_t cap = 0, n, calls = 0, grew = 0, last;
	struct rec *r = NULL;
	size_t rcap = 0;
	char *s = NULL;
	size_t scap = 0;

	/* the first growth: SW_GROW_FIRST, or need when more */
	ok(SW_GROW(a, &cap, 1) == 0 && a && cap == SW_GROW_FIRST, "first growth: %d elements",
	   SW_GROW_FIRST);
	before = a;
	ok(SW_GROW(a, &cap, SW_GROW_FIRST) == 0 && a == before && cap == SW_GROW_FIRST,
	   "need within the capacity: nothing done");
	ok(SW_GROW(a, &cap, 0) == 0 && cap == SW_GROW_FIRST, "need 0: nothing done");
	free(a);
	a = NULL;
	cap = 0;
	ok(SW_GROW(s, &scap, 1000) == 0 && scap == 1024, "bytes: doubled from %d to 1024 for 1000",
	   SW_GROW_FIRST);
	free(s);

	/* appending one at a time: doubling, the contents kept */
	last = 0;
	for (n = 0; n < 100000; n++) {
		calls++;
		if (SW_GROW(a, &cap, n + 1) < 0)
			break;
		grew += cap != last;
		last = cap;
		a[n] = (int)(n * 7 + 1);
	}
	ok(n == 100000 && holds(a, n), "100000 appends: every element kept");
	ok(cap >= n && cap < 2 * n && (cap & (cap - 1)) == 0, "capacity %zu: a power of two, < 2n",
	   cap);
	ok(grew <= 14, "%zu reallocs for %zu appends (doubling)", grew, calls);

	/* a jump: straight to the doubling that holds it */
	ok(SW_GROW(a, &cap, 5 * cap + 3) == 0 && cap >= n * 5 && holds(a, n),
	   "a jump past several doublings: one call, the contents kept");

	/* any element type, by SW_GROW's sizeof */
	ok(SW_GROW(r, &rcap, 3) == 0 && rcap == SW_GROW_FIRST, "a struct array grows");
	strcpy(r[2].name, "kept");
	ok(SW_GROW(r, &rcap, 40) == 0 && rcap == 64 && !strcmp(r[2].name, "kept"),
	   "a struct array grows again, its elements kept");

	/* need * elem overflows size_t: refused, the array as it was */
	before = a;
	last = cap;
	errno = 0;
	ok(sw_grow(&a, &cap, SIZE_MAX / sizeof *a + 1, sizeof *a) == -1 && errno == ENOMEM,
	   "need * elem past SIZE_MAX: -1, ENOMEM");
	ok(a == before && cap == last && holds(a, n), "... *p and *cap unchanged, the array intact");
	ok(sw_grow(&a, &cap, SIZE_MAX, 2) == -1 && a == before && cap == last,
	   "need SIZE_MAX of 2 bytes: refused");
	ok(sw_grow(&r, &rcap, SIZE_MAX / sizeof *r, sizeof *r) == -1 && rcap == 64 &&
	   !strcmp(r[2].name, "kept"), "SIZE_MAX / elem of a struct: fits size_t, realloc refuses");
	/* doubling near the top stops at the largest size_t allows, not past it */
	{
		char *big = NULL;
		size_t bcap = SIZE_MAX / 2 + 1;  /* a capacity no doubling may pass */
		ok(sw_grow(&big, &bcap, SIZE_MAX / 2 + 2, 1) == -1 && !big && bcap == SIZE_MAX / 2 + 1,
		   "doubling past SIZE_MAX: capped at SIZE_MAX, then realloc refuses");
	}

	/* realloc refusing (more than any address space): the array intact */
	before = a;
	last = cap;
	ok(sw_grow(&a, &cap, SIZE_MAX / 4 / sizeof *a, sizeof *a) == -1 && a == before &&
	   cap == last && holds(a, n), "realloc refused: -1, *p and *cap unchanged");
	a[n - 1] = 5;   /* still the caller's to write and free */
	ok(a[n - 1] == 5, "the array still writable after a refusal");
	ok(sw_grow(&a, &cap, cap + 1, 0) == -1 && errno == EINVAL && a == before && cap == last,
	   "elem 0: EINVAL");

	/* a budget: never more than max elements */
	{
		size_t *b = NULL, bcap = 0;
		ok(sw_grow_max(&b, &bcap, 10, sizeof *b, 100) == 0 && bcap == 16, "budget 100: 16 first");
		ok(sw_grow_max(&b, &bcap, 65, sizeof *b, 100) == 0 && bcap == 100,
		   "budget 100, need 65: doubling stops at 100, not 128");
		ok(sw_grow_max(&b, &bcap, 100, sizeof *b, 100) == 0 && bcap == 100, "need 100: held");
		b[99] = 99;
		errno = 0;
		ok(sw_grow_max(&b, &bcap, 101, sizeof *b, 100) == -1 && errno == ENOMEM && bcap == 100 &&
		   b[99] == 99, "need 101 past the budget: refused, the array intact");
		free(b);
		b = NULL;
		bcap = 0;
		ok(sw_grow_max(&b, &bcap, 3, sizeof *b, 5) == 0 && bcap == 5,
		   "budget 5 under the first growth: 5");
		free(b);
	}
	free(a);
	free(r);
	return tap_done();
}
