/* dtype.c - float formats to float32 (see dtype.h). */
#include "dtype.h"

#include <float.h>
#include <math.h>
#include <string.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "scalewatch reads little-endian data in place; port sw_to_f32 first"
#endif

uint16_t sw_f32_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof u);
	if ((u & 0x7fffffffu) > 0x7f800000u)    /* NaN: keep it quiet, nonzero */
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1u);        /* round to nearest even */
	return (uint16_t)(u >> 16);
}

float sw_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
	float f;

	if (exp == 0) {
		if (man == 0) {
			u = sign;
		} else {                        /* subnormal: normalize */
			int e = -1;
			do {
				e++;
				man <<= 1;
			} while (!(man & 0x400u));
			u = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
		}
	} else if (exp == 31) {
		u = sign | 0x7f800000u | man << 13;  /* Inf or NaN */
	} else {
		u = sign | (exp + 127 - 15) << 23 | man << 13;
	}
	memcpy(&f, &u, sizeof f);
	return f;
}

/*
 * d narrowed to f: as good as float32 gets? NaN and Inf stay what they are
 * (the readers' NaN checks name them), a normal float32 is d to 24 bits as
 * any float32 is; zero or a subnormal only when exact (float32 data stored
 * as F64 reads back bit for bit), else digits are lost: 1e-300 would be 0.
 */
static int f64_fits(double d, float f)
{
	if (!isfinite(d) || d == 0)
		return 1;
	if (isinf(f))
		return 0;
	return fabsf(f) >= FLT_MIN || (double)f == d;
}

static int f64_refused(double d, float f, size_t i, struct sw_err *err)
{
	if (isinf(f))
		return sw_fail(err, SW_EDATA, "value %.9g at index %zu is beyond float32's range "
			       "(largest %.9g), in which the tools compute", d, i, (double)FLT_MAX);
	return sw_fail(err, SW_EDATA, "value %.9g at index %zu is below float32's normal range "
		       "(smallest %.9g), in which the tools compute: it would become %s", d, i,
		       (double)FLT_MIN, f == 0 ? "0" : "a subnormal with fewer digits");
}

/*
 * ggml's quantized blocks (ggml-common.h), one block at b to its values
 * at y, written as ggml's dequantize_row_* and gguf-py's quants.py
 * compute them. Every product is exact in float32 (an F16 scale's 11
 * significant bits times at most 13 bits of integers: a 6- or 8-bit
 * scale and a 2- to 6-bit q), so only a sum rounds, once, as numpy's does:
 * the same float32 whether or not a compiler fuses a * b + c.
 */
static float f16_at(const unsigned char *p)
{
	return sw_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

/* the K-quants' 6-bit scale and min of sub-block j (ggml's get_scale_min_k4) */
static void scale_min_k4(const unsigned char *q, int j, int *sc, int *m)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xf) | (q[j - 4] >> 6) << 4;
		*m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
	}
}

/* F16 d, 16 bytes of 4-bit q (low nibbles the first 16 values): d * (q - 8) */
static void block_q4_0(const unsigned char *b, float *y)
{
	float d = f16_at(b);

	for (int j = 0; j < 16; j++) {
		y[j] = d * (float)((b[2 + j] & 0xf) - 8);
		y[j + 16] = d * (float)((b[2 + j] >> 4) - 8);
	}
}

/* F16 d and m, 4-bit q: d * q + m */
static void block_q4_1(const unsigned char *b, float *y)
{
	float d = f16_at(b), m = f16_at(b + 2);

	for (int j = 0; j < 16; j++) {
		y[j] = d * (float)(b[4 + j] & 0xf) + m;
		y[j + 16] = d * (float)(b[4 + j] >> 4) + m;
	}
}

/* value j's fifth bit: bit j of the little-endian uint32 at qh */
static int bit5(const unsigned char *qh, int j)
{
	return (qh[j / 8] >> (j % 8) & 1) << 4;
}

/* F16 d, 32 high bits, 4-bit low parts: d * (q - 16) */
static void block_q5_0(const unsigned char *b, float *y)
{
	float d = f16_at(b);

	for (int j = 0; j < 16; j++) {
		y[j] = d * (float)(((b[6 + j] & 0xf) | bit5(b + 2, j)) - 16);
		y[j + 16] = d * (float)(((b[6 + j] >> 4) | bit5(b + 2, j + 16)) - 16);
	}
}

/* F16 d and m, 32 high bits, 4-bit low parts: d * q + m */
static void block_q5_1(const unsigned char *b, float *y)
{
	float d = f16_at(b), m = f16_at(b + 2);

	for (int j = 0; j < 16; j++) {
		y[j] = d * (float)((b[8 + j] & 0xf) | bit5(b + 4, j)) + m;
		y[j + 16] = d * (float)((b[8 + j] >> 4) | bit5(b + 4, j + 16)) + m;
	}
}

/* F16 d, 32 int8 q: d * q */
static void block_q8_0(const unsigned char *b, float *y)
{
	float d = f16_at(b);

	for (int i = 0; i < 32; i++)
		y[i] = d * (float)(int8_t)b[2 + i];
}

/*
 * The K-quants: super-blocks of 256 values in sub-blocks of 16 or 32.
 * Value i's bits sit in the byte of its position within its run of 32
 * (i % 32) of a 32- or 64-byte group, at a shift that counts the runs.
 */

/* 16 scale/min nibbles, 2-bit q, F16 d and dmin: (d*sc) * q - dmin*m */
static void block_q2_k(const unsigned char *b, float *y)
{
	const unsigned char *sc = b, *qs = b + 16;
	float d = f16_at(b + 80), dmin = f16_at(b + 82);

	for (int s = 0; s < 16; s++) {
		float dl = d * (float)(sc[s] & 0xf), ml = dmin * (float)(sc[s] >> 4);
		for (int k = 0; k < 16; k++) {
			int i = 16 * s + k, r = i % 128;
			y[i] = dl * (float)(qs[32 * (i / 128) + r % 32] >> (2 * (r / 32)) & 3) - ml;
		}
	}
}

/* a high-bit mask, 2-bit low parts, 16 6-bit scales, F16 d:
 * (d*(sc-32)) * q, q from -4 to 3 (4 taken off where the mask bit is 0) */
static void block_q3_k(const unsigned char *b, float *y)
{
	const unsigned char *hm = b, *qs = b + 32, *sc = b + 96;
	float d = f16_at(b + 108);

	for (int s = 0; s < 16; s++) {
		int lo = s < 8 ? sc[s] & 0xf : sc[s - 8] >> 4;
		int hi = sc[8 + s % 4] >> (2 * (s / 4)) & 3;
		float dl = d * (float)((lo | hi << 4) - 32);
		for (int k = 0; k < 16; k++) {
			int i = 16 * s + k, r = i % 128;
			int q = (qs[32 * (i / 128) + r % 32] >> (2 * (r / 32)) & 3) -
				(hm[i % 32] >> (i / 32) & 1 ? 0 : 4);
			y[i] = dl * (float)q;
		}
	}
}

/* F16 d and dmin, 12 bytes of 6-bit scales and mins, 4-bit q in 8 runs of
 * 32: (d*sc) * q - dmin*m */
static void block_q4_k(const unsigned char *b, float *y)
{
	float d = f16_at(b), dmin = f16_at(b + 2);
	const unsigned char *qs = b + 16;

	for (int s = 0; s < 8; s++) {
		int sc, m;
		scale_min_k4(b + 4, s, &sc, &m);
		float dl = d * (float)sc, ml = dmin * (float)m;
		for (int l = 0; l < 32; l++) {
			y[32 * s + l] = dl * (float)(qs[32 * (s / 2) + l] >> (4 * (s % 2)) & 0xf) - ml;
		}
	}
}

/* Q4_K's layout with a fifth bit per value: bit s of byte l of qh */
static void block_q5_k(const unsigned char *b, float *y)
{
	float d = f16_at(b), dmin = f16_at(b + 2);
	const unsigned char *qh = b + 16, *qs = b + 48;

	for (int s = 0; s < 8; s++) {
		int sc, m;
		scale_min_k4(b + 4, s, &sc, &m);
		float dl = d * (float)sc, ml = dmin * (float)m;
		for (int l = 0; l < 32; l++) {
			int q = (qs[32 * (s / 2) + l] >> (4 * (s % 2)) & 0xf) | (qh[l] >> s & 1) << 4;
			y[32 * s + l] = dl * (float)q - ml;
		}
	}
}

/* 4-bit low parts in 64-byte groups, 2-bit high parts, 16 int8 scales,
 * F16 d: (d*sc) * (q - 32) */
static void block_q6_k(const unsigned char *b, float *y)
{
	const unsigned char *ql = b, *qh = b + 128;
	float d = f16_at(b + 208);

	for (int s = 0; s < 16; s++) {
		float dl = d * (float)(int8_t)b[192 + s];
		for (int k = 0; k < 16; k++) {
			int i = 16 * s + k, g = i / 128, r = i % 128;
			int q = (ql[64 * g + r % 64] >> (4 * (r / 64)) & 0xf) |
				(qh[32 * g + r % 32] >> (2 * (r / 32)) & 3) << 4;
			y[i] = dl * (float)(q - 32);
		}
	}
}

static const struct {
	struct sw_dtype_block block;
	void (*dequant)(const unsigned char *b, float *y);
} blocks[SW_DTYPE_UNSUPPORTED] = {
	[SW_DTYPE_Q4_0] = {{32, 18, "Q4_0"}, block_q4_0},
	[SW_DTYPE_Q4_1] = {{32, 20, "Q4_1"}, block_q4_1},
	[SW_DTYPE_Q5_0] = {{32, 22, "Q5_0"}, block_q5_0},
	[SW_DTYPE_Q5_1] = {{32, 24, "Q5_1"}, block_q5_1},
	[SW_DTYPE_Q8_0] = {{32, 34, "Q8_0"}, block_q8_0},
	[SW_DTYPE_Q2_K] = {{256, 84, "Q2_K"}, block_q2_k},
	[SW_DTYPE_Q3_K] = {{256, 110, "Q3_K"}, block_q3_k},
	[SW_DTYPE_Q4_K] = {{256, 144, "Q4_K"}, block_q4_k},
	[SW_DTYPE_Q5_K] = {{256, 176, "Q5_K"}, block_q5_k},
	[SW_DTYPE_Q6_K] = {{256, 210, "Q6_K"}, block_q6_k},
};

const struct sw_dtype_block *sw_dtype_block(enum sw_dtype dtype)
{
	if ((unsigned)dtype >= SW_DTYPE_UNSUPPORTED || !blocks[dtype].dequant)
		return NULL;
	return &blocks[dtype].block;
}

static int blocks_to_f32(enum sw_dtype dtype, const unsigned char *p, float *dst, size_t n,
			 struct sw_err *err)
{
	const struct sw_dtype_block *b = &blocks[dtype].block;

	if (n % (size_t)b->values)
		return sw_fail(err, SW_EDATA, "%zu %s values are no whole number of blocks of %d", n,
			       b->name, b->values);
	for (size_t k = 0; k < n / (size_t)b->values; k++)
		blocks[dtype].dequant(p + k * (size_t)b->bytes, dst + k * (size_t)b->values);
	return 0;
}

int sw_to_f32(enum sw_dtype dtype, const void *src, float *dst, size_t n, struct sw_err *err)
{
	const unsigned char *p = src;

	switch (dtype) {
	case SW_DTYPE_F32:
		memcpy(dst, src, n * sizeof *dst);
		return 0;
	case SW_DTYPE_BF16:
		for (size_t i = 0; i < n; i++) {
			uint16_t h;
			memcpy(&h, p + 2 * i, 2);
			dst[i] = sw_bf16_to_f32(h);
		}
		return 0;
	case SW_DTYPE_F16:
		for (size_t i = 0; i < n; i++) {
			uint16_t h;
			memcpy(&h, p + 2 * i, 2);
			dst[i] = sw_f16_to_f32(h);
		}
		return 0;
	case SW_DTYPE_F64:
		for (size_t i = 0; i < n; i++) {
			double d;
			memcpy(&d, p + 8 * i, 8);
			dst[i] = (float)d;
			if (!f64_fits(d, dst[i]))
				return f64_refused(d, dst[i], i, err);
		}
		return 0;
	default:
		if (sw_dtype_block(dtype))
			return blocks_to_f32(dtype, p, dst, n, err);
		return sw_fail(err, SW_EDATA, "not a floating-point dtype (%d)", (int)dtype);
	}
}
