/*
 * isa.h - the instruction sets the hot loops are compiled for. The build
 * targets any x86-64 (SSE2); a function marked ISA_CLONES or
 * ISA_VECTOR_CLONES is compiled also for AVX2 and AVX-512 and the loader
 * picks the widest this CPU has (GCC's target_clones). Not under the
 * sanitizers, whose run-time the loader's choice would precede.
 *
 * ISA_CLONES: x86-64-v4 / v3 / baseline, with FMA where the level has it
 * (a file that contracts a*b+c, as gram.c does, rounds differently per
 * level). ISA_VECTOR_CLONES: avx512f / avx2 / baseline, no FMA (-std=c17
 * contracts nothing): the same IEEE operations in every version.
 *
 * A build with SW_ISA_V3 or SW_ISA_BASE defined (make check-portable)
 * compiles only the version a machine of that level runs, so that a
 * machine with AVX-512 computes what an AVX2 or an SSE2 machine does.
 */
#ifndef SW_ISA_H
#define SW_ISA_H

#if !defined(__x86_64__) || !defined(__GNUC__) || defined(__SANITIZE_ADDRESS__) || \
	defined(SW_ISA_BASE)
#define ISA_CLONES
#define ISA_VECTOR_CLONES
#elif defined(SW_ISA_V3)
#define ISA_CLONES __attribute__((target("arch=x86-64-v3")))
#define ISA_VECTOR_CLONES __attribute__((target("avx2")))
#else
#define ISA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define ISA_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

#endif
