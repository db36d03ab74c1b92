/*
 * dtype.h - conversions between the stored float formats and float32.
 *
 * Safetensors checkpoints hold F32, F16 or BF16 (little-endian), rarely
 * F64, GGUF files also ggml's quantized blocks (Q4_0 ... Q8_0, the
 * K-quants Q2_K ... Q6_K); the tools compute on float32. BF16 is
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

/* A quantized dtype's block: values in it, its bytes, ggml's name. */
struct sw_dtype_block {
	int values, bytes;
	const char *name;
};

/* dtype's block (ggml-common.h's block_q4_0 ...), or NULL for a dtype
 * stored per element. */
const struct sw_dtype_block *sw_dtype_block(enum sw_dtype dtype);

/*
 * n little-endian elements of dtype at src (any alignment) as float32 at
 * dst. SW_EDATA for a dtype it cannot convert, or an F64 value float32
 * cannot hold (the message names the value and its index). A quantized
 * dtype: n a multiple of its block's values, src n/values blocks, each
 * dequantized as ggml's dequantize_row_* and gguf-py's quants.py do it,
 * bit for bit: the F16 scales widened exactly, then d * q, d * q + m or
 * (d * sc) * q - dmin * m in float32 (each product exact, each sum
 * rounded once).
 */
int sw_to_f32(enum sw_dtype dtype, const void *src, float *dst, size_t n, struct sw_err *err);

#endif
