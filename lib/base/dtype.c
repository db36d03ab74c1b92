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
	case SW_DTYPE_Q8_0:
		if (n % 32)
			return sw_fail(err, SW_EDATA, "%zu Q8_0 values are no whole number of blocks of 32", n);
		for (size_t b = 0; b < n / 32; b++, p += 34) {
			uint16_t h;
			memcpy(&h, p, 2);
			float d = sw_f16_to_f32(h);
			for (size_t i = 0; i < 32; i++)
				dst[32 * b + i] = d * (float)(int8_t)p[2 + i];
		}
		return 0;
	default:
		return sw_fail(err, SW_EDATA, "not a floating-point dtype (%d)", (int)dtype);
	}
}
