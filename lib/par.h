/*
 * par.h - when a loop is worth the threads. An OpenMP parallel region
 * costs microseconds to open and close, and far more when another
 * process holds one of the two cores (the team waits at the barrier for
 * a descheduled thread): loops with less work than these run on the
 * calling thread. The work measure is elements touched, or multiply-adds.
 */
#ifndef SW_PAR_H
#define SW_PAR_H

#include <stddef.h>

#define PAR_MIN_ELEMS ((size_t)1 << 16)
#define PAR_MIN_FLOPS ((size_t)1 << 21)

/* for "#pragma omp parallel ... PAR_IF(n)" (GCC expands macros there) */
#define PAR_IF(n) if ((size_t)(n) >= PAR_MIN_ELEMS)
#define PAR_IF_FLOPS(n) if ((size_t)(n) >= PAR_MIN_FLOPS)

/*
 * A per-element loop in the widest vectors this CPU has: the build
 * targets any x86-64 (SSE2), so a function marked so is compiled also
 * for AVX2 and AVX-512 and the loader picks one (GCC's target_clones).
 * The same IEEE operations in every version (no FMA: -std=c17 contracts
 * nothing), so the same bits. Not under the sanitizers, whose run-time
 * the loader's choice would precede.
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__)
#define PAR_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PAR_VECTOR_CLONES
#endif

#endif
