/*
 * Unit tests of lib/analysis/gram.c: the Gram operator on blocks of every width,
 * tall and wide, rows not a multiple of the tile, head slices (ld > cols),
 * scaled columns, and bf16/f16 views read in place, each against the
 * product written out in double, element by element; and spectrum_top on
 * a bf16 view against the dense spectrum of the same values as float32.
 */
#include <stdlib.h>
#include <string.h>

#include "../../lib/base/dtype.h"
#include "../../lib/analysis/gram.h"
#include "../../lib/base/rng.h"
#include "../../lib/analysis/spectrum.h"
#include "../../lib/analysis/synth.h"
#include "tap.h"

/* element (i, j) of the view as the reference reads it */
static double elem(const struct spec_view *v, int64_t i, int64_t j)
{
	size_t at = (size_t)(i * v->ld + j);
	double e;

	switch (v->dtype) {
	case SW_DTYPE_BF16: e = sw_bf16_to_f32(((const uint16_t *)v->W)[at]); break;
	case SW_DTYPE_F16: e = sw_f16_to_f32(((const uint16_t *)v->W)[at]); break;
	default: e = ((const float *)v->W)[at]; break;
	}
	return v->col_scale ? e * v->col_scale[j] : e;
}

/* Z = A P by the definition, A = W^T W whatever the shape */
static void reference(const struct spec_view *v, const double *P, int b, double *Z)
{
	int64_t m = v->rows, c = v->cols;

	for (int q = 0; q < b; q++) {
		const double *p = P + (size_t)q * (size_t)c;
		double *z = Z + (size_t)q * (size_t)c;
		memset(z, 0, (size_t)c * sizeof *z);
		for (int64_t i = 0; i < m; i++) {
			double y = 0;
			for (int64_t j = 0; j < c; j++)
				y += elem(v, i, j) * p[j];
			for (int64_t j = 0; j < c; j++)
				z[j] += elem(v, i, j) * y;
		}
	}
}

static void check_apply(const struct spec_view *v, int b, int nth, struct sw_rng *r,
			const char *what)
{
	int64_t n = v->cols;
	double *P = malloc((size_t)(n * b) * sizeof *P), *Z = malloc((size_t)(n * b) * sizeof *Z);
	double *R = malloc((size_t)(n * b) * sizeof *R), worst = 0, scale = 0;
	struct gram_op g;

	for (int64_t i = 0; i < n * b; i++)
		P[i] = rng_normal(r);
	reference(v, P, b, R);
	if (gram_init(&g, v, b, nth, 0)) {
		ok(0, "%s: gram_init", what);
		goto out;
	}
	/* twice: the second application must not see the first's sums */
	gram_apply(&g, P, Z);
	gram_apply(&g, P, Z);
	for (int64_t i = 0; i < n * b; i++) {
		scale = fmax(scale, fabs(R[i]));
		worst = fmax(worst, fabs(Z[i] - R[i]));
	}
	ok(worst <= 1e-12 * scale, "%s (%lldx%lld ld %lld, b %d, %d threads): max error %.2g of %.3g",
	   what, (long long)v->rows, (long long)v->cols, (long long)v->ld, b, nth, worst, scale);
	/* in float32: within float32's rounding of sums of at most a row's
	 * and a tile's terms */
	gram_apply_single(&g, P, Z);
	gram_apply_single(&g, P, Z);
	gram_free(&g);
	worst = 0;
	for (int64_t i = 0; i < n * b; i++)
		worst = fmax(worst, fabs(Z[i] - R[i]));
	ok(worst <= 1e-5 * scale, "  the same in float32: max error %.2g of %.3g", worst, scale);
out:
	free(P);
	free(Z);
	free(R);
}

int main(void)
{
	struct sw_rng r;
	struct sw_err err;
	int64_t rows = 53, cols = 37, ld = 45;  /* rows past whole tiles, a slice */
	float *W = malloc((size_t)(rows * ld) * sizeof *W), scale[45];
	uint16_t *B = malloc((size_t)(rows * ld) * sizeof *B), *H = malloc((size_t)(rows * ld) * sizeof *H);

	rng_seed(&r, 7);
	for (int64_t i = 0; i < rows * ld; i++) {
		W[i] = (float)rng_normal(&r);
		B[i] = sw_f32_to_bf16(W[i]);
		H[i] = (uint16_t)(0x3c00u + (rng_next(&r) & 0x03ffu)); /* f16 in [1, 2) */
		if (rng_uniform(&r) < 0.5)
			H[i] |= 0x8000u;
	}
	for (int j = 0; j < 45; j++)
		scale[j] = (float)(0.5 + rng_uniform(&r));

	for (int b = 1; b <= GRAM_BMAX; b++) {
		struct spec_view tall = {W, SW_DTYPE_F32, rows, cols, ld, NULL};
		struct spec_view wide = {W, SW_DTYPE_F32, cols - 20, ld, ld, NULL};
		check_apply(&tall, b, 2, &r, "tall float32 slice");
		check_apply(&wide, b, 2, &r, "wide float32");
	}
	{
		struct spec_view v = {W, SW_DTYPE_F32, rows, cols, ld, scale};
		check_apply(&v, 4, 1, &r, "tall, columns scaled, one thread");
		v.rows = 9;
		check_apply(&v, 4, 3, &r, "wide, columns scaled, more threads than tiles");
	}
	{
		struct spec_view bf = {B, SW_DTYPE_BF16, rows, cols, ld, NULL};
		struct spec_view hf = {H, SW_DTYPE_F16, rows, cols, ld, scale};
		check_apply(&bf, 8, 2, &r, "tall bf16 in place");
		check_apply(&hf, 3, 2, &r, "tall f16 in place, scaled");
		bf.rows = hf.rows = 20;
		check_apply(&bf, 16, 2, &r, "wide bf16 in place");
		check_apply(&hf, 5, 2, &r, "wide f16 in place, scaled");
		/* whole runs of sixteen columns and no tail; groups of four
		 * rows ending two and three short */
		bf.rows = 22;
		bf.cols = 32;
		check_apply(&bf, 2, 1, &r, "bf16, no column tail");
		bf.rows = 23;
		bf.col_scale = scale;
		check_apply(&bf, 7, 2, &r, "bf16, no column tail, scaled");
	}

	/* W far from 1 in size (issue 53, H): the float32 pass scaled by
	 * powers of two from wmag (||W||_F here) within float32's rounding
	 * of the double pass, none taken again in double; told nothing of
	 * W's size, a W of 2^67 overflows float32 and the pass is the
	 * double one, bit for bit */
	for (int k = 0; k < 4; k++) {
		static const int e[4] = {67, -100, 120, -83};
		int64_t n = rows * cols, b = 3;
		float *S = malloc((size_t)n * sizeof *S), *bs = malloc(45 * sizeof *bs);
		double *P = malloc((size_t)(cols * b) * sizeof *P), *Z = malloc((size_t)(cols * b) * sizeof *Z);
		double *R = malloc((size_t)(cols * b) * sizeof *R), fsq = 0, worst = 0, big = 0;
		struct spec_view v = {S, SW_DTYPE_F32, rows, cols, cols, k == 3 ? bs : NULL};
		struct gram_op g;

		for (int64_t i = 0; i < n; i++) {
			S[i] = ldexpf(W[i], e[k]);
			fsq += (double)S[i] * S[i];
		}
		for (int j = 0; j < 45; j++)
			bs[j] = ldexpf(scale[j], 40);   /* a gain of 2^40 on W of 2^-83 */
		for (int64_t i = 0; i < cols * b; i++)
			P[i] = rng_normal(&r);
		if (gram_init(&g, &v, (int)b, 2, sqrt(fsq))) {
			ok(0, "gram_init");
			break;
		}
		gram_apply(&g, P, R);
		gram_apply_single(&g, P, Z);
		for (int64_t i = 0; i < cols * b; i++) {
			big = fmax(big, fabs(R[i]));
			worst = fmax(worst, fabs(Z[i] - R[i]));
		}
		ok(worst <= 1e-5 * big && big > 0 && isfinite(big) && g.redone == 0,
		   "float32 W of 2^%d%s: the float32 pass scaled, max error %.2g of %.3g, %d redone",
		   e[k], k == 3 ? ", columns scaled by 2^40" : "", worst, big, g.redone);
		gram_free(&g);
		if (k == 0) {
			int same = 1;
			gram_init(&g, &v, (int)b, 2, 0);
			gram_apply_single(&g, P, Z);
			for (int64_t i = 0; i < cols * b; i++)
				same &= Z[i] == R[i];
			ok(same && g.redone == 1,
			   "float32 W of 2^67, its size not told: the pass taken again in double (%d), its bits",
			   g.redone);
			gram_free(&g);
		}
		free(S);
		free(bs);
		free(P);
		free(Z);
		free(R);
	}

	/* spectrum_top on bf16 in place = the dense spectrum of the same
	 * values widened to float32; and sigma_max of a known spectrum */
	{
		int64_t m = 400, c = 300;
		double *w = malloc((size_t)(m * c) * sizeof *w), s[300], full[300], top[3];
		uint16_t *wb = malloc((size_t)(m * c) * sizeof *wb);
		float *wf = malloc((size_t)(m * c) * sizeof *wf);
		struct spectrum_top_info info;
		for (int i = 0; i < 300; i++)
			s[i] = 3.0 * pow(0.99, i);
		synth_known_spectrum(&r, m, c, s, w, &err);
		for (int64_t i = 0; i < m * c; i++) {
			wb[i] = sw_f32_to_bf16((float)w[i]);
			wf[i] = sw_bf16_to_f32(wb[i]);
		}
		struct spec_view vb = gram_view(wb, SW_DTYPE_BF16, m, c), vf = spectrum_view(wf, m, c);
		int rc = spectrum_full(&vf, full, NULL, &err) ||
			 spectrum_top(&vb, 3, 1e-5, top, NULL, &info, &err);
		ok(!rc && !strcmp(info.method, "lanczos") && close_rel(top[0], full[0], 5e-6) &&
		   close_rel(top[1], full[1], 5e-6) && close_rel(top[2], full[2], 5e-6),
		   "bf16 top 3 by Lanczos = dense spectrum of the widened values (%.9g %.9g %.9g)",
		   top[0], top[1], top[2]);
		/* the same values transposed (300 x 400, wide): the operator
		 * is W^T W, of length 400, its nonzero values the same */
		for (int64_t i = 0; i < m; i++)
			for (int64_t j = 0; j < c; j++)
				wb[j * m + i] = sw_f32_to_bf16((float)w[i * c + j]);
		vb = gram_view(wb, SW_DTYPE_BF16, c, m);
		rc = spectrum_top(&vb, 3, 1e-5, top, NULL, &info, &err);
		ok(!rc && !strcmp(info.method, "lanczos") && close_rel(top[0], full[0], 5e-6) &&
		   close_rel(top[1], full[1], 5e-6) && close_rel(top[2], full[2], 5e-6),
		   "the transpose, wide: the same top 3 (%.9g %.9g %.9g)", top[0], top[1], top[2]);
		free(w);
		free(wb);
		free(wf);
	}
	free(W);
	free(B);
	free(H);
	return tap_done();
}
