/*
 * mapguard.h - read-only mappings of input files that may shrink while
 * mapped.
 *
 * A reader that touches a page of a mapping past the end of a file someone
 * truncated gets SIGBUS, and dies of it. Mapped tensor data is read by
 * OpenMP threads and inside BLAS, where no longjmp may leave, so the fault
 * is survived instead: every mapping made here is registered; a SIGBUS
 * handler (installed on the first mapping) that finds the faulting address
 * inside a registered mapping maps anonymous zero pages over the rest of
 * that mapping, from the faulting page on (a truncated file has no byte
 * past its new end, so every later page would fault too), counts the fault
 * against the mapping and returns: the access completes, reading zeros.
 * The owner calls mapguard_check once it has used the data: a fault, or a
 * file now shorter than the mapping, is SW_EIO "the file shrank while it
 * was read", so nothing computed from the zeros is ever printed. A SIGBUS
 * anywhere else keeps its default action: the process dies of it.
 *
 * The registry is the state a signal handler needs, the documented
 * exception to "no global mutable state in lib/" (atomicfile.c keeps the
 * other): a list of slots that are reused, never freed, so the handler
 * walks it while other threads add and remove mappings. A slot is read
 * under a sequence count, so a handler never matches a half-written one.
 * mmap over a page (MAP_FIXED) is not in POSIX's list of async-signal-safe
 * functions, but on Linux it is one system call that takes no lock of the
 * process's; the handler makes it through syscall(2), past any wrapper or
 * sanitizer interceptor.
 */
#ifndef SW_MAPGUARD_H
#define SW_MAPGUARD_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

struct mapguard_slot;

struct mapguard {
	void *base;             /* the mapping, NULL when none */
	size_t len;
	int fd;                 /* the file, open while mapped (not owned) */
	uint64_t end;           /* the file's bytes the mapping covers: offset + len */
	struct mapguard_slot *slot;
};

/*
 * Map len > 0 bytes of the file open at fd from offset (a multiple of the
 * page size), read-only, and register the mapping. fd must stay open until
 * mapguard_unmap. SW_EIO if mmap fails.
 */
int mapguard_map(int fd, uint64_t offset, size_t len, struct mapguard *g,
		 struct sw_err *err);

/* 1 if the file shrank under g (a fault in it, or the file now shorter
 * than what g maps), else 0. */
int mapguard_shrank(const struct mapguard *g);

/* SW_EIO "the file shrank while it was read" if mapguard_shrank, else
 * SW_OK. Call after the data was used, before anything computed from it
 * is trusted. */
int mapguard_check(const struct mapguard *g, struct sw_err *err);

/* Unregister and unmap; g is emptied. A no-op on an empty g. */
void mapguard_unmap(struct mapguard *g);

/* Faults survived in all mappings so far (for tests). */
uint64_t mapguard_faults(void);

#endif
