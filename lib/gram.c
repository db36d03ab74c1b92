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
 * contraction off in gcc; clang, the fuzz build's compiler, contracts
 * within a statement by default) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast")
#endif

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

/* ---- the kernels ------------------------------------------------------ */

/*
 * Rows are read as float32 (BF16/F16 widened a tile at a time, exactly),
 * every product and sum in double, vectorized along the row: each row is
 * read from memory once per application and reused from cache for the b
 * vectors. Measured faster than vectorizing across the block (a tile times
 * the block in registers): along the row one load of W serves a whole
 * vector of products, so one vector is as fast as reading W, and b vectors
 * cost b times the arithmetic.
 */

/* Z_q += (w_i . P_q) w_i for rows i in [0, nr): W^T W P, four rows at a
 * time, so each load of P and Z serves four rows. */
HOT static void tall_rows(const float *W, int64_t ld, int64_t nr, int64_t n, const double *P,
			  int b, double *Z)
{
	double y[4][GRAM_BMAX];
	int64_t i = 0;

	for (; i + 4 <= nr; i += 4) {
		const float *w0 = W + i * ld, *w1 = w0 + ld, *w2 = w1 + ld, *w3 = w2 + ld;
		for (int q = 0; q < b; q++) {
			const double *p = P + (size_t)q * (size_t)n;
			double d0 = 0, d1 = 0, d2 = 0, d3 = 0;
#pragma omp simd reduction(+ : d0, d1, d2, d3)
			for (int64_t j = 0; j < n; j++) {
				d0 += (double)w0[j] * p[j];
				d1 += (double)w1[j] * p[j];
				d2 += (double)w2[j] * p[j];
				d3 += (double)w3[j] * p[j];
			}
			y[0][q] = d0;
			y[1][q] = d1;
			y[2][q] = d2;
			y[3][q] = d3;
		}
		for (int q = 0; q < b; q++) {
			double *z = Z + (size_t)q * (size_t)n;
			double y0 = y[0][q], y1 = y[1][q], y2 = y[2][q], y3 = y[3][q];
#pragma omp simd
			for (int64_t j = 0; j < n; j++)
				z[j] += y0 * (double)w0[j] + y1 * (double)w1[j] +
					y2 * (double)w2[j] + y3 * (double)w3[j];
		}
	}
	for (; i < nr; i++) {
		const float *w = W + i * ld;
		for (int q = 0; q < b; q++) {
			const double *p = P + (size_t)q * (size_t)n;
			double d = 0;
#pragma omp simd reduction(+ : d)
			for (int64_t j = 0; j < n; j++)
				d += (double)w[j] * p[j];
			y[0][q] = d;
		}
		for (int q = 0; q < b; q++) {
			double *z = Z + (size_t)q * (size_t)n, yq = y[0][q];
#pragma omp simd
			for (int64_t j = 0; j < n; j++)
				z[j] += yq * (double)w[j];
		}
	}
}

/* U_q += P[i, q] w_i for rows i in [0, nr): W^T P (P's rows of this tile,
 * stride n between vectors; U's vectors of length cols) */
HOT static void wide_rows_t(const float *W, int64_t ld, int64_t nr, int64_t cols, int64_t n,
			    const double *P, int b, double *U)
{
	for (int64_t i = 0; i < nr; i++) {
		const float *w = W + i * ld;
		for (int q = 0; q < b; q++) {
			double *u = U + (size_t)q * (size_t)cols, pq = P[(size_t)q * (size_t)n + (size_t)i];
#pragma omp simd
			for (int64_t j = 0; j < cols; j++)
				u[j] += pq * (double)w[j];
		}
	}
}

/* Z[i, q] = w_i . U_q for rows i in [0, nr): W U */
HOT static void wide_rows(const float *W, int64_t ld, int64_t nr, int64_t cols, int64_t n,
			  const double *U, int b, double *Z)
{
	for (int64_t i = 0; i < nr; i++) {
		const float *w = W + i * ld;
		for (int q = 0; q < b; q++) {
			const double *u = U + (size_t)q * (size_t)cols;
			double d = 0;
#pragma omp simd reduction(+ : d)
			for (int64_t j = 0; j < cols; j++)
				d += (double)w[j] * u[j];
			Z[(size_t)q * (size_t)n + (size_t)i] = d;
		}
	}
}

/* Rows converted at a time from BF16/F16: a few hundred KiB of float32. */
#define TILE 64

/* Rows [r0, r0+nr) as float32 rows ld apart: float32 in place, else
 * widened into tile (exact) */
static const float *tile_rows(const struct spec_view *v, int64_t r0, int64_t nr, float *tile,
			      int64_t *ld)
{
	size_t size = (size_t)sw_dtype_size(v->dtype);

	if (v->dtype == SW_DTYPE_F32) {
		*ld = v->ld;
		return (const float *)v->W + r0 * v->ld;
	}
	for (int64_t r = 0; r < nr; r++) {
		const uint16_t *h = (const uint16_t *)((const unsigned char *)v->W +
						       (size_t)((r0 + r) * v->ld) * size);
		float *t = tile + r * v->cols;
		if (v->dtype == SW_DTYPE_BF16) {
#pragma omp simd
			for (int64_t j = 0; j < v->cols; j++)
				t[j] = bf16_value(h[j]);
		} else {
			for (int64_t j = 0; j < v->cols; j++)
				t[j] = sw_f16_to_f32(h[j]);
		}
	}
	*ld = v->cols;
	return tile;
}

/* ---- the operator ----------------------------------------------------- */

/* per thread: the accumulator (b x cols), a tile of widened rows */
static size_t thread_ws(const struct gram_op *g)
{
	size_t tile = g->v->dtype == SW_DTYPE_F32 ? 0 : (size_t)TILE * (size_t)g->v->cols;

	return (size_t)g->acc_len + (tile + 1) / 2;     /* floats in doubles */
}

int gram_init(struct gram_op *g, const struct spec_view *v, int b, int nth)
{
	memset(g, 0, sizeof *g);
	g->v = v;
	g->b = b;
	g->wide = v->rows < v->cols;
	g->n = g->wide ? v->rows : v->cols;
	/* inside another parallel region (matrices side by side) a nested
	 * region gets one thread */
	g->nth = nth > 0 ? nth : omp_in_parallel() ? 1 : omp_get_max_threads();
	if ((int64_t)g->nth > v->rows)
		g->nth = (int)(v->rows > 0 ? v->rows : 1);
	if (g->nth < 1)
		g->nth = 1;
	g->acc_len = v->cols * b;
	g->ws = malloc((size_t)g->nth * thread_ws(g) * sizeof *g->ws);
	/* the block scaled by the columns' factors (tall), or W^T P (wide) */
	g->pt = v->col_scale && !g->wide ? malloc((size_t)(g->n * b) * sizeof *g->pt) : NULL;
	g->u = g->wide ? malloc((size_t)g->acc_len * sizeof *g->u) : NULL;
	if (b < 1 || b > GRAM_BMAX || !g->ws || (v->col_scale && !g->wide && !g->pt) ||
	    (g->wide && !g->u)) {
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
	size_t stride = thread_ws(g), len = (size_t)g->acc_len;

	memcpy(dst, g->ws, len * sizeof *dst);
	for (int t = 1; t < nth; t++) {
		const double *a = g->ws + (size_t)t * stride;
		for (size_t j = 0; j < len; j++)
			dst[j] += a[j];
	}
}

/* dst_q[j] *= s[j]^power for the b vectors of length len */
static void scale_columns(double *dst, int b, int64_t len, const float *s, int power)
{
	for (int q = 0; q < b; q++)
		for (int64_t j = 0; j < len; j++) {
			double f = s[j];
			dst[(size_t)q * (size_t)len + (size_t)j] *= power == 2 ? f * f : f;
		}
}

/*
 * W diag(s) is applied through the vectors, not the rows: tall,
 * diag(s) W^T W diag(s) P (P scaled first, the sum after); wide,
 * W diag(s)^2 W^T P (W^T P scaled between the passes).
 */
void gram_apply(struct gram_op *g, const double *P, double *Z)
{
	const struct spec_view *v = g->v;
	int64_t n = g->n, cols = v->cols;
	int b = g->b;
	size_t stride = thread_ws(g);
	const double *Pin = P;
	int team = 1;

	if (g->pt) {
		memcpy(g->pt, P, (size_t)(n * b) * sizeof *g->pt);
		scale_columns(g->pt, b, n, v->col_scale, 1);
		Pin = g->pt;
	}
#pragma omp parallel num_threads(g->nth)
	{
		int tid = omp_get_thread_num();
		double *acc = g->ws + (size_t)tid * stride;
		float *tile = (float *)(acc + g->acc_len);
		int64_t lo, hi, ld;

		/* the team may be smaller than asked (nested, or a limit) */
		if (tid == 0)
			team = omp_get_num_threads();
		linalg_split(v->rows, omp_get_num_threads(), tid, &lo, &hi);
		memset(acc, 0, (size_t)g->acc_len * sizeof *acc);
		for (int64_t r0 = lo; r0 < hi; r0 += TILE) {
			int64_t nr = hi - r0 < TILE ? hi - r0 : TILE;
			const float *w = tile_rows(v, r0, nr, tile, &ld);
			if (g->wide)
				wide_rows_t(w, ld, nr, cols, n, Pin + r0, b, acc);
			else
				tall_rows(w, ld, nr, n, Pin, b, acc);
		}
	}
	if (!g->wide) {
		sum_threads(g, team, Z);
		if (v->col_scale)
			scale_columns(Z, b, n, v->col_scale, 1);
		return;
	}
	/* then W (W^T P), the rows read again */
	sum_threads(g, team, g->u);
	if (v->col_scale)
		scale_columns(g->u, b, cols, v->col_scale, 2);
#pragma omp parallel num_threads(g->nth)
	{
		int tid = omp_get_thread_num();
		float *tile = (float *)(g->ws + (size_t)tid * stride + g->acc_len);
		int64_t lo, hi, ld;

		linalg_split(v->rows, omp_get_num_threads(), tid, &lo, &hi);
		for (int64_t r0 = lo; r0 < hi; r0 += TILE) {
			int64_t nr = hi - r0 < TILE ? hi - r0 : TILE;
			const float *w = tile_rows(v, r0, nr, tile, &ld);
			wide_rows(w, ld, nr, cols, n, g->u, b, Z + r0);
		}
	}
}
