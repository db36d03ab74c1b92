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

#endif
