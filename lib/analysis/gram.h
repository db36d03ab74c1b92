/*
 * gram.h - a weight matrix as the singular-value kernels read it, and its
 * Gram operator applied to a block of vectors: the one pass over W under
 * every sigma_max and top-K computation (spectrum_top, sw-norms' sigma_max
 * through it).
 *
 * A view is float32, bf16 or f16 data addressed in place (a head's row or
 * column slice included), its columns optionally scaled (the output head
 * with the final norm's gain folded in). The kernels widen bf16 and f16 to
 * float32 a tile of rows at a time, so such a matrix needs no float32 copy
 * of itself; every product and sum is in double.
 *
 * The operator is A = W^T W, on vectors of length cols whatever the
 * shape (for a wide W its nonzero eigenvalues are W W^T's, and W is read
 * once per application instead of twice). Applied to b vectors at once, W
 * is read once per application whatever b: the arithmetic grows with b,
 * the memory traffic does not. Threads split the rows, each sums into its
 * own buffer, and the buffers are added in thread order: the result is
 * the same for a given thread count.
 */
#ifndef SW_GRAM_H
#define SW_GRAM_H

#include <stdint.h>

#include "../base/status.h"
#include "../base/tensor.h"

struct spec_view {
	const void *W;          /* element (i, j) at W[i * ld + j], of dtype */
	enum sw_dtype dtype;    /* F32 (0), BF16 or F16 */
	int64_t rows, cols;
	int64_t ld;             /* >= cols */
	const float *col_scale; /* NULL, or cols factors: W diag(col_scale) */
};

/* The whole float32 matrix, or head h's slice of an attention projection:
 * rows [h*hd, (h+1)*hd) of q, k, v (by_cols 0), columns of o (by_cols 1). */
struct spec_view spectrum_view(const float *W, int64_t rows, int64_t cols);
struct spec_view spectrum_head_view(const float *W, int64_t rows, int64_t cols,
				    int by_cols, int64_t head, int64_t head_dim);
/* A whole matrix of another element type (F32, BF16, F16), and head h's
 * slice of any view. */
struct spec_view gram_view(const void *W, enum sw_dtype dtype, int64_t rows, int64_t cols);
struct spec_view gram_head_view(const struct spec_view *whole, int by_cols, int64_t head,
				int64_t head_dim);

/*
 * Rows [r0, r0+pr) x columns [c0, c0+pc) of the view into buf (row-major,
 * pr x pc, double, scaled); returns their sum of squares, which is not
 * finite if one of them is NaN or Inf.
 */
double gram_to_double(const struct spec_view *v, int64_t r0, int64_t pr, int64_t c0,
		      int64_t pc, double *buf);

/* The largest block gram_apply takes. */
#define GRAM_BMAX 16

struct gram_op {
	const struct spec_view *v;
	int64_t n;              /* vector length: cols */
	int b;                  /* vectors per application */
	int nth;                /* threads */
	int64_t acc_len;        /* per-thread accumulator: cols x b */
	double *ws;             /* per thread: accumulator, f16 tile */
	int bf16;               /* bf16 rows: vectors in the kernel's order */
	double *pt;             /* the block scaled by the columns, reordered */
	double *zt;             /* bf16: the sum in the kernel's order */
	float *pf;              /* the block in float32 (gram_apply_single) */
	int wexp;               /* |W| ~ 2^wexp: gram_apply_single's scaling */
	int redone;             /* gram_apply_single's passes taken again in double */
};

/*
 * Workspace for blocks of b vectors (1 <= b <= GRAM_BMAX) on nth threads
 * (<= 0: OpenMP's maximum); -1 if out of memory. wmag is the size of W's
 * entries (its data, without col_scale), within a few powers of two: any
 * bound on max |W_ij| near it, ||W||_F for one (<= 0: unknown, taken as
 * 1). gram_apply_single scales by it, so that float32 neither overflows
 * nor underflows on a W of any size float32 holds.
 */
int gram_init(struct gram_op *g, const struct spec_view *v, int b, int nth, double wmag);
void gram_free(struct gram_op *g);

/* dst_q[j] *= s[j] for the b vectors of length len (vector q at dst + q
 * len): how a view's col_scale enters and leaves the operator. */
void gram_scale_columns(double *dst, int b, int64_t len, const float *s);
/* Z = A P for the b vectors P (vector q at P + q n), into Z (the same
 * layout). */
void gram_apply(struct gram_op *g, const double *P, double *Z);

/* The same in float32 arithmetic: about three times faster, each entry
 * of Z within about 1e-6 of the largest in relative terms (sums of one
 * row, and of one tile of 64 rows, in float32; the tiles added in
 * double), the vectors and products scaled by powers of two from wmag
 * (exact) so that float32's range holds them; a pass that overflows
 * float32 all the same (a col_scale far from 1 against W's size) is
 * taken again by gram_apply: Z is always finite for a finite W. For the
 * search of spectrum_top, whose stopping test applies gram_apply. */
void gram_apply_single(struct gram_op *g, const double *P, double *Z);

#endif
