/*
 * grow.h - the one grow-array helper: room for a count of elements in a
 * malloc'd array that a reader or writer appends to, grown by doubling.
 *
 * Every appending loop in lib/ and tools/ grows through here, so the
 * capacity rule and its size_t overflow checks are written once. A limit
 * that input may reach (at most N tensors, a pickle's memory budget) is the
 * caller's, checked before it grows; the helper only refuses what does not
 * fit in size_t, or what realloc refuses, and on either leaves the array
 * and its capacity as they were (still valid, still the caller's to free).
 *
 * The array is passed by the address of its pointer (any object pointer:
 * all share void *'s representation on the platforms built for), NULL with
 * capacity 0 at first. SW_GROW takes the pointer itself and its element
 * size from its type.
 */
#ifndef SW_GROW_H
#define SW_GROW_H

#include <stddef.h>

/* the capacity of an empty array's first growth, in elements (or need) */
#define SW_GROW_FIRST 16

/* Make *cap (elements of elem bytes at the pointer *pp) at least need:
 * nothing when it is, else a realloc to *cap doubled (SW_GROW_FIRST from
 * 0) until it holds need. 0, or -1 (errno ENOMEM: need * elem overflows
 * size_t, or realloc failed; EINVAL: elem 0) with *pp and *cap unchanged. */
int sw_grow(void *pp, size_t *cap, size_t need, size_t elem);

/* The same, the capacity never above max elements (a budget): -1 (ENOMEM)
 * when need is above it, doubling stopped at max otherwise. */
int sw_grow_max(void *pp, size_t *cap, size_t need, size_t elem, size_t max);

/* sw_grow for the array p (an lvalue of a pointer to a complete type) */
#define SW_GROW(p, cap, need) sw_grow(&(p), (cap), (need), sizeof *(p))

#endif
