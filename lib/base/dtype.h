/*
 * dtype.h - conversions between the stored float formats and float32.
 *
 * Safetensors checkpoints hold F32, F16 or BF16 (little-endian), rarely
 * F64, GGUF files also Q8_0 blocks; the tools compute on float32. BF16 is
 * the top half of a float32, so widening is exact; narrowing rounds to
 * nearest even and keeps NaN a NaN.
 * F64 narrows to the nearest float32, and only where float32 holds the
 * value as well as it holds any (scalewatch-format(5), "Values"): a finite
 * value beyond float32's range, or a nonzero one below its normal range
 * that float32 can hold only as zero or as a subnormal with fewer digits
 * (not exactly), is refused: its norms would come out Inf, or 0.
 */
#ifndef SW_DTYPE_H
#define SW_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "status.h"
#include "tensor.h"

/* BF16 is float32's upper half: exact, and inline, so that the hot
 * loops that widen it in place (gram.c) vectorize. */
static inline float sw_bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, sizeof f);
	return f;
}

/* n (1 to 8) bytes at p as a little-endian unsigned integer: the one
 * decoder of the binary formats' fields (GGUF, pickle, llama2.c). */
static inline uint64_t sw_le_uint(const unsigned char *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}
uint16_t sw_f32_to_bf16(float f);
float sw_f16_to_f32(uint16_t h);

/*
 * n little-endian elements of dtype at src (any alignment) as float32 at
 * dst. SW_EDATA for a dtype it cannot convert, or an F64 value float32
 * cannot hold (the message names the value and its index). Q8_0 (GGUF,
 * ggml's block_q8_0): n a multiple of 32, src n/32 blocks of an F16 scale
 * d and 32 int8 q, each value d*q as ggml dequantizes it (the product in
 * float32).
 */
int sw_to_f32(enum sw_dtype dtype, const void *src, float *dst, size_t n, struct sw_err *err);

#endif
