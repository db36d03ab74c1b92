/* dtype.c - float formats to float32 (see dtype.h). */
#include "dtype.h"

#include <string.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "scalewatch reads little-endian data in place; port sw_to_f32 first"
#endif

float sw_bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

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

int sw_to_f32(enum sw_dtype dtype, const void *src, float *dst, size_t n)
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
		}
		return 0;
	default:
		return -1;
	}
}
