/*
 * fma-peak - the float32 multiply-add rate of this machine's cores, the
 * ceiling any matrix product can reach, for bench/train to set sgemm's
 * peak against: every thread runs independent chains of vector FMAs
 * (more than a core's FMA latency times its FMA ports, so the ports never
 * wait) on registers only: 16 chains of 512 bits (of 32 registers), 12 of
 * 256 (of 16: with the two constants, 16 chains did not fit, and the three
 * kept on the stack made every round wait on a store and a load, which
 * printed about half of an AVX2 Zen's peak). The widest vectors the CPU
 * has: 512 bits, else 256 (--width 256 measures those on an AVX-512 CPU).
 * Best of 5 passes of 3.2e8 FMAs a thread. Prints GFLOP/s and the vector
 * width:
 *
 *   fma-peak [--width 256]   (threads: OMP_NUM_THREADS)
 */
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define PASS_FMAS 320000000L

/*
 * One function per vector width, the same body: each chain's value stays
 * finite, x -> x * (1 - 2^-20) + 2^-30, and the chains' lanes are summed
 * at the end so that no chain is optimized away.
 */
#define FMA_CHAINS(name, isa, vec, width, chains, set1, fmadd, store)                    \
	__attribute__((target(isa))) static float name(long rounds)                      \
	{                                                                                \
		vec acc[chains], mul = set1(1 - 0x1p-20f), add = set1(0x1p-30f);         \
		float lanes[width], sum = 0;                                             \
		for (int i = 0; i < chains; i++)                                         \
			acc[i] = set1((float)i);                                         \
		for (long r = 0; r < rounds; r++)                                        \
			_Pragma("GCC unroll 16") for (int i = 0; i < chains; i++)        \
				acc[i] = fmadd(acc[i], mul, add);                        \
		for (int i = 0; i < chains; i++) {                                       \
			store(lanes, acc[i]);                                            \
			for (int j = 0; j < width; j++)                                  \
				sum += lanes[j];                                         \
		}                                                                        \
		return sum;                                                              \
	}

#define CHAINS_512 16
#define CHAINS_256 12
FMA_CHAINS(fma_chains_512, "avx512f", __m512, 16, CHAINS_512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps)
FMA_CHAINS(fma_chains_256, "avx2,fma", __m256, 8, CHAINS_256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps)
#endif

int main(int argc, char **argv)
{
#if defined(__x86_64__)
	int width = __builtin_cpu_supports("avx512f") ? 16 : 8;
	if (argc == 3 && !strcmp(argv[1], "--width") && !strcmp(argv[2], "256")) {
		width = 8;
	} else if (argc != 1) {
		fprintf(stderr, "usage: fma-peak [--width 256]\n");
		return 64;
	}
	int chains = width == 16 ? CHAINS_512 : CHAINS_256;
	long rounds = PASS_FMAS / chains / width;
	double best = 1e30, flops = 0;
	float check = 0;

	if (width == 8 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
		fprintf(stderr, "fma-peak: this CPU has no FMA vectors\n");
		return 69;
	}
	for (int pass = 0; pass < 6; pass++) {
		struct timespec t0, t1;
		int nth = 1;

		clock_gettime(CLOCK_MONOTONIC, &t0);
#pragma omp parallel reduction(+ : check)
		{
#pragma omp single
			nth = omp_get_num_threads();
			check += width == 16 ? fma_chains_512(rounds) : fma_chains_256(rounds);
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
		flops = 2.0 * (double)rounds * chains * width * nth;
		if (pass > 0 && s < best)       /* the first pass wakes the threads and the clocks */
			best = s;
	}
	if (!(check == check))          /* keeps the chains from being optimized away */
		return 70;
	printf("%.1f\t%d-bit\n", flops / best / 1e9, width * 32);
	return 0;
#else
	(void)argc;
	(void)argv;
	fprintf(stderr, "fma-peak: only x86-64 is measured\n");
	return 69;
#endif
}
