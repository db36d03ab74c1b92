/* gram.c - weight-matrix views and their Gram operator on blocks (gram.h). */
#include "gram.h"
#include "dtype.h"
#include "linalg.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* a*b+c as one fused multiply-add in the kernels below: faster, and one
 * rounding instead of two (the project compiles as ISO C, which turns
 * contraction off) */
#pragma GCC optimize("fp-contract=fast")

/* Hot loops are compiled for AVX-512 and AVX2+FMA machines and for any
 * x86-64; the loader picks one at run time (as in linalg.c). */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define HOT __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define HOT
#endif

struct spec_view spectrum_view(const float *W, int64_t rows, int64_t cols)
{
	return (struct spec_view){W, SW_DTYPE_F32, rows, cols, cols, NULL};
}

struct spec_view spectrum_head_view(const float *W, int64_t rows, int64_t cols,
				    int by_cols, int64_t head, int64_t head_dim)
{
	struct spec_view whole = spectrum_view(W, rows, cols);

	return gram_head_view(&whole, by_cols, head, head_dim);
}

struct spec_view gram_view(const void *W, enum sw_dtype dtype, int64_t rows, int64_t cols)
{
	return (struct spec_view){W, dtype, rows, cols, cols, NULL};
}

struct spec_view gram_head_view(const struct spec_view *whole, int by_cols, int64_t head,
				int64_t head_dim)
{
	struct spec_view v = *whole;
	size_t size = (size_t)sw_dtype_size(whole->dtype);

	if (by_cols) {
		v.W = (const unsigned char *)whole->W + (size_t)(head * head_dim) * size;
		v.cols = head_dim;
		if (v.col_scale)
			v.col_scale += head * head_dim;
	} else {
		v.W = (const unsigned char *)whole->W + (size_t)(head * head_dim * whole->ld) * size;
		v.rows = head_dim;
	}
	return v;
}

/* bf16 is float32's upper half */
static inline float bf16_value(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, sizeof f);
	return f;
}

/* pc elements of row r from column c0 as double, scaled, into d; their
 * sum of squares. One plain loop per element type, so each vectorizes. */
HOT static double row_to_double(const struct spec_view *v, int64_t r, int64_t c0, int64_t pc,
				double *d)
{
	size_t at = (size_t)(r * v->ld + c0);
	const uint16_t *h = (const uint16_t *)v->W + at;
	const float *w = (const float *)v->W + at;
	double s = 0;

	switch (v->dtype) {
	case SW_DTYPE_BF16:
#pragma omp simd reduction(+ : s)
		for (int64_t j = 0; j < pc; j++) {
			d[j] = bf16_value(h[j]);
			s += d[j] * d[j];
		}
		break;
	case SW_DTYPE_F16:
		for (int64_t j = 0; j < pc; j++) {
			d[j] = sw_f16_to_f32(h[j]);
			s += d[j] * d[j];
		}
		break;
	default:
#pragma omp simd reduction(+ : s)
		for (int64_t j = 0; j < pc; j++) {
			d[j] = w[j];
			s += d[j] * d[j];
		}
		break;
	}
	if (v->col_scale) {
		const float *sc = v->col_scale + c0;
		s = 0;
#pragma omp simd reduction(+ : s)
		for (int64_t j = 0; j < pc; j++) {
			d[j] *= sc[j];
			s += d[j] * d[j];
		}
	}
	return s;
}

double gram_to_double(const struct spec_view *v, int64_t r0, int64_t pr, int64_t c0,
		      int64_t pc, double *buf)
{
	double s = 0;

	for (int64_t i = 0; i < pr; i++)
		s += row_to_double(v, r0 + i, c0, pc, buf + i * pc);
	return s;
}

/* ---- the block kernels ------------------------------------------------ */

/*
 * A tile is TILE rows of W as double (element (r, j) at T[r * cols + j]),
 * rows past the matrix's end zero. The block of b vectors is stored row
 * by row (element (j, q) at B[j * b + q]), so the b values a column of W
 * multiplies are one contiguous load, and a kernel step is TILE broadcasts
 * times one vector of b: TILE x b accumulators held in registers, TILE + 1
 * loads per TILE x b multiply-adds.
 */
#define TILE 8

static void load_tile(const struct spec_view *v, int64_t r0, int64_t nr, double *T)
{
	for (int64_t r = 0; r < nr; r++)
		row_to_double(v, r0 + r, 0, v->cols, T + r * v->cols);
	if (nr < TILE)
		memset(T + nr * v->cols, 0, (size_t)((TILE - nr) * v->cols) * sizeof *T);
}

/*
 * tile_times_B:  Y (TILE x B) = T Bm         (T: TILE x cols, Bm: cols x B)
 * tile_t_acc_B:  C (cols x B) += T^T Y
 * one pair per block width B, written with GCC's vector types: a B-wide
 * row of the block is one vector, the TILE accumulators are registers,
 * and each step is TILE broadcast multiply-adds (fused: this file is
 * compiled with contraction on, see the pragma below).
 */
#define GRAM_KERNELS(B)                                                                         \
	typedef double vec##B __attribute__((vector_size(B * sizeof(double))));                \
	HOT static void tile_times_##B(const double *T, int64_t cols, const double *Bm, double *Y) \
	{                                                                                       \
		vec##B acc[TILE];                                                               \
		memset(acc, 0, sizeof acc);                                                     \
		for (int64_t j = 0; j < cols; j++) {                                            \
			vec##B bj;                                                              \
			memcpy(&bj, Bm + j * B, sizeof bj);                                     \
			for (int r = 0; r < TILE; r++)                                          \
				acc[r] += T[r * cols + j] * bj;                                            \
		}                                                                               \
		memcpy(Y, acc, sizeof acc);                                                     \
	}                                                                                       \
	HOT static void tile_t_acc_##B(const double *T, int64_t cols, const double *Y, double *C) \
	{                                                                                       \
		vec##B y[TILE];                                                                 \
		memcpy(y, Y, sizeof y);                                                         \
		for (int64_t j = 0; j < cols; j++) {                                            \
			vec##B c, h;                                                            \
			memcpy(&c, C + j * B, sizeof c);                                        \
			memset(&h, 0, sizeof h);                                                \
			/* two chains of TILE/2: half the latency */                            \
			for (int r = 0; r < TILE / 2; r++) {                                    \
				c += T[r * cols + j] * y[r];                                    \
				h += T[(r + TILE / 2) * cols + j] * y[r + TILE / 2];            \
			}                                                                       \
			c += h;                                                                 \
			memcpy(C + j * B, &c, sizeof c);                                        \
		}                                                                               \
	}

GRAM_KERNELS(1)
GRAM_KERNELS(2)
GRAM_KERNELS(4)
GRAM_KERNELS(8)
GRAM_KERNELS(16)

static void tile_times(int b, const double *T, int64_t cols, const double *Bm, double *Y)
{
	switch (b) {
	case 1: tile_times_1(T, cols, Bm, Y); break;
	case 2: tile_times_2(T, cols, Bm, Y); break;
	case 4: tile_times_4(T, cols, Bm, Y); break;
	case 8: tile_times_8(T, cols, Bm, Y); break;
	default: tile_times_16(T, cols, Bm, Y); break;
	}
}

static void tile_t_acc(int b, const double *T, int64_t cols, const double *Y, double *C)
{
	switch (b) {
	case 1: tile_t_acc_1(T, cols, Y, C); break;
	case 2: tile_t_acc_2(T, cols, Y, C); break;
	case 4: tile_t_acc_4(T, cols, Y, C); break;
	case 8: tile_t_acc_8(T, cols, Y, C); break;
	default: tile_t_acc_16(T, cols, Y, C); break;
	}
}

/* ---- the operator ----------------------------------------------------- */

static int padded_width(int b)
{
	int p = 1;

	while (p < b)
		p *= 2;
	return p;
}

/* per thread: a tile (cols x TILE), the accumulator (cols x bp), Y */
static size_t thread_ws(const struct gram_op *g)
{
	return (size_t)g->v->cols * TILE + (size_t)g->acc_len + (size_t)TILE * GRAM_BMAX;
}

int gram_init(struct gram_op *g, const struct spec_view *v, int b, int nth)
{
	int bp = padded_width(b);

	memset(g, 0, sizeof *g);
	g->v = v;
	g->b = b;
	g->wide = v->rows < v->cols;
	g->n = g->wide ? v->rows : v->cols;
	/* inside another parallel region (matrices side by side) a nested
	 * region gets one thread */
	g->nth = nth > 0 ? nth : omp_in_parallel() ? 1 : omp_get_max_threads();
	/* a thread per TILE rows at least */
	if ((int64_t)g->nth * TILE > v->rows)
		g->nth = (int)((v->rows + TILE - 1) / TILE);
	if (g->nth < 1)
		g->nth = 1;
	g->acc_len = v->cols * bp;
	g->ws = malloc((size_t)g->nth * thread_ws(g) * sizeof *g->ws);
	/* rows up to a whole tile past n: the wide kernel reads a partial
	 * last tile's rows of the block (multiplying zero rows of the
	 * tile), so they must exist, and be zero, not NaN */
	g->pt = calloc((size_t)(g->n + TILE) * (size_t)bp, sizeof *g->pt);
	g->u = g->wide ? malloc((size_t)g->acc_len * sizeof *g->u) : NULL;
	if (b < 1 || b > GRAM_BMAX || !g->ws || !g->pt || (g->wide && !g->u)) {
		gram_free(g);
		return -1;
	}
	return 0;
}

void gram_free(struct gram_op *g)
{
	free(g->ws);
	free(g->pt);
	free(g->u);
	memset(g, 0, sizeof *g);
}

/* sum the accumulators of a team of nth threads into dst, in thread order */
static void sum_threads(const struct gram_op *g, int nth, double *dst)
{
	size_t stride = thread_ws(g), off = (size_t)g->v->cols * TILE, len = (size_t)g->acc_len;

	memcpy(dst, g->ws + off, len * sizeof *dst);
	for (int t = 1; t < nth; t++) {
		const double *a = g->ws + (size_t)t * stride + off;
		for (size_t j = 0; j < len; j++)
			dst[j] += a[j];
	}
}

void gram_apply(struct gram_op *g, const double *P, double *Z)
{
	const struct spec_view *v = g->v;
	int64_t n = g->n, cols = v->cols;
	int b = g->b, bp = padded_width(b);
	size_t stride = thread_ws(g);
	int team = 1;

	/* the block row by row; columns past b stay zero from calloc */
	for (int q = 0; q < b; q++)
		for (int64_t j = 0; j < n; j++)
			g->pt[j * bp + q] = P[(size_t)q * (size_t)n + (size_t)j];
#pragma omp parallel num_threads(g->nth)
	{
		int tid = omp_get_thread_num();
		double *T = g->ws + (size_t)tid * stride, *acc = T + (size_t)cols * TILE;
		double *Y = acc + g->acc_len;
		int64_t lo, hi;

		/* the team may be smaller than asked (nested, or a limit) */
		if (tid == 0)
			team = omp_get_num_threads();
		linalg_split((v->rows + TILE - 1) / TILE, omp_get_num_threads(), tid, &lo, &hi);
		memset(acc, 0, (size_t)g->acc_len * sizeof *acc);
		for (int64_t t = lo; t < hi; t++) {
			int64_t r0 = t * TILE, nr = v->rows - r0 < TILE ? v->rows - r0 : TILE;
			load_tile(v, r0, nr, T);
			if (g->wide) {
				/* W^T P: this tile's rows of P are the block's rows r0.. */
				tile_t_acc(bp, T, cols, g->pt + r0 * bp, acc);
			} else {
				/* W^T (W P), the tile read once */
				tile_times(bp, T, cols, g->pt, Y);
				tile_t_acc(bp, T, cols, Y, acc);
			}
		}
	}
	if (!g->wide) {
		sum_threads(g, team, g->pt);
	} else {
		/* then W (W^T P), the tiles read again */
		sum_threads(g, team, g->u);
#pragma omp parallel num_threads(g->nth)
		{
			int tid = omp_get_thread_num();
			double *T = g->ws + (size_t)tid * stride, *Y = T + (size_t)cols * TILE + g->acc_len;
			int64_t lo, hi;

			linalg_split((v->rows + TILE - 1) / TILE, omp_get_num_threads(), tid, &lo, &hi);
			for (int64_t t = lo; t < hi; t++) {
				int64_t r0 = t * TILE, nr = v->rows - r0 < TILE ? v->rows - r0 : TILE;
				load_tile(v, r0, nr, T);
				tile_times(bp, T, cols, g->u, Y);
				for (int64_t r = 0; r < nr; r++)
					for (int q = 0; q < b; q++)
						g->pt[(r0 + r) * bp + q] = Y[r * bp + q];
			}
		}
	}
	for (int q = 0; q < b; q++)
		for (int64_t j = 0; j < n; j++)
			Z[(size_t)q * (size_t)n + (size_t)j] = g->pt[j * bp + q];
}
