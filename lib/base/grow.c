/* grow.c - the grow-array helper (see grow.h). */
#include "grow.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int sw_grow_max(void *pp, size_t *cap, size_t need, size_t elem, size_t max)
{
	void *p, *q;
	size_t c;

	if (need <= *cap)
		return 0;
	if (!elem) {
		errno = EINVAL;
		return -1;
	}
	if (max > SIZE_MAX / elem)
		max = SIZE_MAX / elem;
	if (need > max) {
		errno = ENOMEM;
		return -1;
	}
	c = *cap ? *cap : SW_GROW_FIRST;
	while (c < need)
		c = c > max / 2 ? max : 2 * c;
	if (c > max)
		c = max;
	/* through memcpy: *pp is a pointer of any object type */
	memcpy(&p, pp, sizeof p);
	if (!(q = realloc(p, c * elem)))
		return -1;
	memcpy(pp, &q, sizeof q);
	*cap = c;
	return 0;
}

int sw_grow(void *pp, size_t *cap, size_t need, size_t elem)
{
	return sw_grow_max(pp, cap, need, elem, SIZE_MAX);
}
