/*
 * dtype.h - conversions between the stored float formats and float32.
 *
 * Safetensors checkpoints hold F32, F16 or BF16 (little-endian); the tools
 * compute on float32. BF16 is the top half of a float32, so widening is
 * exact; narrowing rounds to nearest even and keeps NaN a NaN.
 */
#ifndef SW_DTYPE_H
#define SW_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

float sw_bf16_to_f32(uint16_t h);
uint16_t sw_f32_to_bf16(float f);
float sw_f16_to_f32(uint16_t h);

/*
 * Widen n little-endian elements of dtype at src (any alignment) to
 * float32 at dst. Returns 0, or -1 for a dtype it cannot convert.
 */
int sw_to_f32(enum sw_dtype dtype, const void *src, float *dst, size_t n);

#endif
