/* gram.c - weight-matrix views and their Gram operator on blocks (gram.h). */
#include "gram.h"
#include "../base/isa.h"
#include "../base/dtype.h"
#include "linalg.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* a*b+c as one fused multiply-add in the kernels below: faster, and one
 * rounding instead of two (the project compiles as ISO C, which turns
 * contraction off in gcc; clang, the fuzz build's compiler, contracts
 * within a statement by default) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast")
#endif

/* hot loops in the widest vectors this CPU has (isa.h) */
#define HOT ISA_CLONES

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
			d[j] = sw_bf16_to_f32(h[j]);
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

/* ---- the kernels ------------------------------------------------------ */

/*
 * Z_q += (w_i . P_q) w_i over a tile's rows: W^T W P, every product and
 * sum in double, W read once. Vectorized along the row, sixteen columns
 * at a time as two vectors of eight doubles (GCC's vector types: AVX-512,
 * AVX2 or SSE2 as the clone runs); four rows at a time, so each load of P
 * and Z serves four rows; a chunk of up to four vectors at a time, so each
 * element of W is loaded and widened once per chunk, not once per vector.
 *
 * bf16 is float32's upper half, so sixteen bf16 read as eight 32-bit words
 * give the even-numbered elements by a shift and the odd-numbered ones by
 * a mask, exactly and in two instructions; P and Z are kept in that order
 * (each run of sixteen: its eight even entries, then its eight odd ones)
 * for bf16 rows, and put back in gram_apply. f16 is widened a tile at a
 * time (tile_rows) and read as float32.
 */
typedef double v8d __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));

/* (macros, GNU C's statement expressions, not functions: a function
 * returning a vector would change the ABI of the clones that lack it) */
#define load_vec(VT, p) ({ VT v_; memcpy(&v_, (p), sizeof v_); v_; })
#define u_as_v8d(u) ({ v8u t_ = (u); v8f f_; memcpy(&f_, &t_, sizeof f_);  \
		       __builtin_convertvector(f_, v8d); })

/* sixteen elements from w: (lo, hi) = elements 0-7 and 8-15 for float32;
 * the even and the odd ones for bf16 */
#define load16_f32(w, lo, hi) do {                                             \
	lo = __builtin_convertvector(load_vec(v8f, w), v8d);                   \
	hi = __builtin_convertvector(load_vec(v8f, (w) + 8), v8d);             \
} while (0)
#define load16_bf16(w, lo, hi) do {                                            \
	v8u w_ = load_vec(v8u, w);                                             \
	lo = u_as_v8d(w_ << 16);                                                \
	hi = u_as_v8d(w_ & 0xffff0000u);                                        \
} while (0)
#define one_f32(w) ((double)*(w))
#define one_bf16(h) ((double)sw_bf16_to_f32(*(h)))

/* the eight lanes of a v8d added in a fixed order (the result must not
 * depend on how the compiler reduces) */
#define lanes_sum(a) ((((a)[0] + (a)[1]) + ((a)[2] + (a)[3])) + \
		      (((a)[4] + (a)[5]) + ((a)[6] + (a)[7])))

/*
 * NAME(W, ld, nr, n, P, ys, Z): Z_q += ys (w_i . P_q) w_i for the nr rows
 * of W (elements of type T, ld apart, n columns) and the B vectors P_q = P
 * + q n, Z_q = Z + q n of type ST (in the order LOAD reads a run of RUN
 * columns, above), in vectors VT of RUN/2 lanes, G rows at a time; ONE(w)
 * is one element as double, LANES(a) a vector's lanes added in double; ys
 * (a power of two: exact) scales w_i . P_q in double before it is rounded
 * to ST (float32's range: gram_apply_single). A last group of fewer than
 * G rows repeats its first row with weight 0.
 */
#define ROWS_KERNEL_OF(NAME, T, B, G, VT, ST, RUN, LOAD, ONE, LANES)                        \
HOT static void NAME(const T *W, int64_t ld, int64_t nr, int64_t n, const ST *P, double ys, \
		     ST *Z)                                                                  \
{                                                                                            \
	int64_t whole = n - n % (RUN);                                                       \
	for (int64_t i = 0; i < nr; i += (G)) {                                              \
		const T *w[G];                                                               \
		ST y[G][B];                                                                  \
		VT acc[G][B], a[G], b[G];                                                    \
		for (int r = 0; r < (G); r++)                                                \
			w[r] = W + (i + (i + r < nr ? r : 0)) * ld;                          \
		for (int r = 0; r < (G); r++)                                                \
			for (int q = 0; q < B; q++)                                          \
				acc[r][q] = (VT){0};                                         \
		for (int64_t j = 0; j < whole; j += (RUN)) {                                 \
			for (int r = 0; r < (G); r++)                                        \
				LOAD(w[r] + j, a[r], b[r]);                                  \
			for (int q = 0; q < B; q++) {                                        \
				const ST *p = P + (size_t)q * (size_t)n + j;                 \
				VT pa = load_vec(VT, p), pb = load_vec(VT, p + (RUN) / 2); \
				for (int r = 0; r < (G); r++) {                              \
					acc[r][q] += a[r] * pa;                              \
					acc[r][q] += b[r] * pb;                              \
				}                                                            \
			}                                                                    \
		}                                                                            \
		for (int r = 0; r < (G); r++)                                                \
			for (int q = 0; q < B; q++) {                                        \
				const ST *p = P + (size_t)q * (size_t)n;                     \
				double d = LANES(acc[r][q]);                                 \
				for (int64_t j = whole; j < n; j++)                          \
					d += ONE(w[r] + j) * p[j];                           \
				y[r][q] = i + r < nr ? (ST)(d * ys) : (ST)0;                 \
			}                                                                    \
		for (int64_t j = 0; j < whole; j += (RUN)) {                                 \
			for (int r = 0; r < (G); r++)                                        \
				LOAD(w[r] + j, a[r], b[r]);                                  \
			for (int q = 0; q < B; q++) {                                        \
				ST *z = Z + (size_t)q * (size_t)n + j;                       \
				VT za = load_vec(VT, z), zb = load_vec(VT, z + (RUN) / 2); \
				for (int r = 0; r < (G); r++) {                              \
					za += a[r] * y[r][q];                                \
					zb += b[r] * y[r][q];                                \
				}                                                            \
				memcpy(z, &za, sizeof za);                                   \
				memcpy(z + (RUN) / 2, &zb, sizeof zb);                       \
			}                                                                    \
		}                                                                            \
		for (int64_t j = whole; j < n; j++)                                          \
			for (int q = 0; q < B; q++) {                                        \
				double d = ONE(w[0] + j) * y[0][q];                          \
				for (int r = 1; r < (G); r++)                                \
					d += ONE(w[r] + j) * y[r][q];                        \
				Z[(size_t)q * (size_t)n + (size_t)j] += (ST)d;               \
			}                                                                    \
	}                                                                                    \
}

/* every element type and chunk width */
#define ALL_ROWS_KERNELS(KERNEL)                                               \
	KERNEL(f32, float, 1) KERNEL(f32, float, 2) KERNEL(f32, float, 3)      \
	KERNEL(f32, float, 4) KERNEL(bf16, uint16_t, 1)                        \
	KERNEL(bf16, uint16_t, 2) KERNEL(bf16, uint16_t, 3)                    \
	KERNEL(bf16, uint16_t, 4)

/* in double: rows_ELEM_B */
#define ROWS_KERNEL(ELEM, T, B) \
	ROWS_KERNEL_OF(rows_##ELEM##_##B, T, B, 4, v8d, double, 16, load16_##ELEM, one_##ELEM, lanes_sum)

ALL_ROWS_KERNELS(ROWS_KERNEL)

/*
 * The same products in float32 (gram_apply_single): sixteen lanes of float
 * where the kernels above have eight of double, and no widening to double.
 * Thirty-two columns at a time as two vectors of sixteen (bf16: the even
 * and the odd elements of the run of 32); the four rows' products summed
 * in float lanes over the row and the lanes added in double; Z summed in
 * float over one tile of rows (gram_apply_single adds each tile's sums in
 * double).
 */
typedef float v16f __attribute__((vector_size(64)));
typedef uint32_t v16u __attribute__((vector_size(64)));

#define u_as_v16f(u) ({ v16u t_ = (u); v16f f_; memcpy(&f_, &t_, sizeof f_); f_; })
#define load32_f32(w, lo, hi) do {                                             \
	lo = load_vec(v16f, w);                                                \
	hi = load_vec(v16f, (w) + 16);                                         \
} while (0)
#define load32_bf16(w, lo, hi) do {                                            \
	v16u w_ = load_vec(v16u, w);                                           \
	lo = u_as_v16f(w_ << 16);                                               \
	hi = u_as_v16f(w_ & 0xffff0000u);                                       \
} while (0)
#define lanes16_sum(a) ((double)(a)[0] + (a)[1] + (a)[2] + (a)[3] + (a)[4] + (a)[5] + (a)[6] + \
			(a)[7] + (a)[8] + (a)[9] + (a)[10] + (a)[11] + (a)[12] + (a)[13] +    \
			(a)[14] + (a)[15])
/* in float32: rows1_ELEM_B (products and sums of one row and one tile in
 * float32, the lanes added in double) */
#define ROWS_KERNEL_SINGLE(ELEM, T, B) \
	ROWS_KERNEL_OF(rows1_##ELEM##_##B, T, B, 4, v16f, float, 32, load32_##ELEM, one_##ELEM, lanes16_sum)

ALL_ROWS_KERNELS(ROWS_KERNEL_SINGLE)

/* NAME(W, bf16, ld, nr, n, P, b, ys, Z): the chunks of up to four of the b
 * vectors, by the kernels PREFIX_f32_B or PREFIX_bf16_B (W read from cache
 * for every chunk after the first) */
#define ROWS_BLOCK(NAME, ST, PREFIX)                                                         \
static void NAME(const void *W, int bf16, int64_t ld, int64_t nr, int64_t n, const ST *P,  \
		 int b, double ys, ST *Z)                                                    \
{                                                                                            \
	static void (*const f32[4])(const float *, int64_t, int64_t, int64_t, const ST *,   \
				    double, ST *) = {PREFIX##_f32_1, PREFIX##_f32_2,           \
						     PREFIX##_f32_3, PREFIX##_f32_4};          \
	static void (*const bf[4])(const uint16_t *, int64_t, int64_t, int64_t, const ST *, \
				   double, ST *) = {PREFIX##_bf16_1, PREFIX##_bf16_2,          \
						    PREFIX##_bf16_3, PREFIX##_bf16_4};         \
	for (int q0 = 0; q0 < b; q0 += 4) {                                                  \
		int c = b - q0 < 4 ? b - q0 : 4;                                             \
		const ST *p = P + (size_t)q0 * (size_t)n;                                    \
		ST *z = Z + (size_t)q0 * (size_t)n;                                          \
		if (bf16)                                                                    \
			bf[c - 1]((const uint16_t *)W, ld, nr, n, p, ys, z);                 \
		else                                                                         \
			f32[c - 1]((const float *)W, ld, nr, n, p, ys, z);                   \
	}                                                                                    \
}

ROWS_BLOCK(rows_block, double, rows)
ROWS_BLOCK(rows_block_single, float, rows1)

/* Rows converted at a time from F16: a few hundred KiB of float32. */
#define TILE 64

/* Rows [r0, r0+nr): F16 widened into tile (exact), rows ld apart; F32 and
 * BF16 in place */
static const void *tile_rows(const struct spec_view *v, int64_t r0, int64_t nr, float *tile,
			     int64_t *ld)
{
	size_t size = (size_t)sw_dtype_size(v->dtype);

	if (v->dtype != SW_DTYPE_F16) {
		*ld = v->ld;
		return (const unsigned char *)v->W + (size_t)(r0 * v->ld) * size;
	}
	for (int64_t r = 0; r < nr; r++) {
		const uint16_t *h = (const uint16_t *)v->W + (size_t)((r0 + r) * v->ld);
		float *t = tile + r * v->cols;
		for (int64_t j = 0; j < v->cols; j++)
			t[j] = sw_f16_to_f32(h[j]);
	}
	*ld = v->cols;
	return tile;
}

/* ---- the operator ----------------------------------------------------- */

/* per thread: the accumulator (b x cols), a tile's float32 sums (b x
 * cols), an f16 tile of widened rows */
static size_t thread_ws(const struct gram_op *g)
{
	size_t tile = g->v->dtype == SW_DTYPE_F16 ? (size_t)TILE * (size_t)g->v->cols : 0;

	return (size_t)g->acc_len + ((size_t)g->acc_len + 1) / 2 + (tile + 1) / 2; /* floats in doubles */
}

int gram_init(struct gram_op *g, const struct spec_view *v, int b, int nth, double wmag)
{
	memset(g, 0, sizeof *g);
	g->v = v;
	g->b = b;
	g->n = v->cols;
	g->wexp = wmag > 0 && isfinite(wmag) ? ilogb(wmag) : 0;
	/* inside another parallel region (matrices side by side) a nested
	 * region gets one thread */
	g->nth = nth > 0 ? nth : omp_in_parallel() ? 1 : omp_get_max_threads();
	if ((int64_t)g->nth > v->rows)
		g->nth = (int)(v->rows > 0 ? v->rows : 1);
	if (g->nth < 1)
		g->nth = 1;
	g->acc_len = v->cols * b;
	g->ws = malloc((size_t)g->nth * thread_ws(g) * sizeof *g->ws);
	/* the block scaled by the columns' factors, or in bf16's order; the
	 * sum in that order */
	g->bf16 = v->dtype == SW_DTYPE_BF16;
	g->pt = v->col_scale || g->bf16 ? malloc((size_t)(g->n * b) * sizeof *g->pt) : NULL;
	g->zt = g->bf16 ? malloc((size_t)(g->n * b) * sizeof *g->zt) : NULL;
	g->pf = malloc((size_t)(g->n * b) * sizeof *g->pf);
	if (b < 1 || b > GRAM_BMAX || !g->ws || ((v->col_scale || g->bf16) && !g->pt) ||
	    (g->bf16 && !g->zt) || !g->pf) {
		gram_free(g);
		return -1;
	}
	return 0;
}

void gram_free(struct gram_op *g)
{
	free(g->ws);
	free(g->pt);
	free(g->zt);
	free(g->pf);
	memset(g, 0, sizeof *g);
}

/* sum the accumulators of a team of nth threads into dst, in thread order */
static void sum_threads(const struct gram_op *g, int nth, double *dst)
{
	size_t stride = thread_ws(g), len = (size_t)g->acc_len;

	memcpy(dst, g->ws, len * sizeof *dst);
	for (int t = 1; t < nth; t++) {
		const double *a = g->ws + (size_t)t * stride;
		for (size_t j = 0; j < len; j++)
			dst[j] += a[j];
	}
}

void gram_scale_columns(double *dst, int b, int64_t len, const float *s)
{
	for (int q = 0; q < b; q++)
		for (int64_t j = 0; j < len; j++)
			dst[(size_t)q * (size_t)len + (size_t)j] *= s[j];
}

/* b vectors of length n into the bf16 kernels' order (to_kernel) or back:
 * each whole run of `run` entries as its even entries, then its odd ones */
static void bf16_order(const double *src, double *dst, int b, int64_t n, int run, int to_kernel)
{
	int64_t whole = n - n % run, half = run / 2;

	for (int q = 0; q < b; q++) {
		const double *x = src + (size_t)q * (size_t)n;
		double *y = dst + (size_t)q * (size_t)n;
		for (int64_t j = 0; j < whole; j += run)
			for (int64_t k = 0; k < half; k++) {
				if (to_kernel) {
					y[j + k] = x[j + 2 * k];
					y[j + half + k] = x[j + 2 * k + 1];
				} else {
					y[j + 2 * k] = x[j + k];
					y[j + 2 * k + 1] = x[j + half + k];
				}
			}
		memcpy(y + whole, x + whole, (size_t)(n - whole) * sizeof *y);
	}
}

/*
 * The search's vectors in float32, each scaled by a power of two 2^e[q]
 * (exact), and the products w_i . p by 2^-wexp (ys): float32 holds 2^-126
 * to 2^128 only, and W^T W p takes p's scale times |W|^2 (one entry of
 * 1e20: 1e40; of 1e-30: 1e-60 underflows). With |W| ~ 2^wexp and p's
 * largest entry made 2^-(wexp/2), the kernel's values stay near 2^(+-wexp/2)
 * - within 2^+-80 for any float32 W - whatever the scale of W, and its
 * result comes back in double times 2^-(e[q] - wexp). For W of ordinary
 * size the bits are those of no scaling (float32 rounds the same at any
 * power of two).
 */
static void to_single(struct gram_op *g, const double *P, int *e)
{
	int64_t n = g->n;

	for (int q = 0; q < g->b; q++) {
		const double *p = P + (size_t)q * (size_t)n;
		float *pf = g->pf + (size_t)q * (size_t)n;
		double big = 0, f;

		for (int64_t i = 0; i < n; i++)
			big = fmax(big, fabs(p[i]));
		e[q] = big > 0 && isfinite(big) ? -ilogb(big) - g->wexp / 2 : 0;
		f = ldexp(1.0, e[q]);
		for (int64_t i = 0; i < n; i++)
			pf[i] = (float)(p[i] * f);
	}
}

/*
 * W diag(s) is applied through the vectors, not the rows:
 * diag(s) W^T W diag(s) P, P scaled first and the sum after. single: the
 * products in float32 (rows_block_single; scaled, to_single), each
 * tile's sums added in double; where float32 overflowed anyway (W diag(s)
 * with s and W of very different sizes) the pass is taken again in
 * double, so no Inf or NaN leaves it.
 */
static void apply(struct gram_op *g, const double *P, double *Z, int single)
{
	const struct spec_view *v = g->v;
	int64_t n = g->n;
	int b = g->b, run = single ? 32 : 16;
	size_t stride = thread_ws(g);
	const double *Pin = P;
	int team = 1, e[GRAM_BMAX];
	double ys = single ? ldexp(1.0, -g->wexp) : 1.0;

	if (v->col_scale) {
		memcpy(g->pt, P, (size_t)(n * b) * sizeof *g->pt);
		gram_scale_columns(g->pt, b, n, v->col_scale);
		Pin = g->pt;
	}
	if (g->bf16) {
		/* in place when already copied */
		if (Pin == g->pt) {
			memcpy(g->zt, g->pt, (size_t)(n * b) * sizeof *g->zt);
			Pin = g->zt;
		}
		bf16_order(Pin, g->pt, b, n, run, 1);
		Pin = g->pt;
	}
	if (single)
		to_single(g, Pin, e);
#pragma omp parallel num_threads(g->nth)
	{
		int tid = omp_get_thread_num();
		double *acc = g->ws + (size_t)tid * stride;
		float *zf = (float *)(acc + g->acc_len);
		float *tile = zf + ((g->acc_len + 1) / 2) * 2;
		int64_t lo, hi, ld;

		/* the team may be smaller than asked (nested, or a limit) */
		if (tid == 0)
			team = omp_get_num_threads();
		linalg_split(v->rows, omp_get_num_threads(), tid, &lo, &hi);
		memset(acc, 0, (size_t)g->acc_len * sizeof *acc);
		for (int64_t r0 = lo; r0 < hi; r0 += TILE) {
			int64_t nr = hi - r0 < TILE ? hi - r0 : TILE;
			const void *w = tile_rows(v, r0, nr, tile, &ld);
			if (!single) {
				rows_block(w, g->bf16, ld, nr, n, Pin, b, 1.0, acc);
				continue;
			}
			memset(zf, 0, (size_t)g->acc_len * sizeof *zf);
			rows_block_single(w, g->bf16, ld, nr, n, g->pf, b, ys, zf);
			for (int64_t j = 0; j < g->acc_len; j++)
				acc[j] += zf[j];
		}
	}
	if (g->bf16) {
		sum_threads(g, team, g->zt);
		bf16_order(g->zt, Z, b, n, run, 0);
	} else {
		sum_threads(g, team, Z);
	}
	if (single) {
		int finite = 1;
		for (int q = 0; q < b; q++) {
			double *z = Z + (size_t)q * (size_t)n, f = ldexp(1.0, g->wexp - e[q]);
			for (int64_t j = 0; j < n; j++) {
				z[j] *= f;
				finite &= isfinite(z[j]);
			}
		}
		if (!finite) {
			g->redone++;
			apply(g, P, Z, 0);
			return;
		}
	}
	if (v->col_scale)
		gram_scale_columns(Z, b, n, v->col_scale);
}

void gram_apply(struct gram_op *g, const double *P, double *Z)
{
	apply(g, P, Z, 0);
}

void gram_apply_single(struct gram_op *g, const double *P, double *Z)
{
	apply(g, P, Z, 1);
}
