/* Unit tests of lib/base/dtype.c: BF16 and F16 against exactly known values. */
#include <float.h>
#include <stdint.h>
#include <string.h>

#include "../../lib/base/dtype.h"
#include "tap.h"

int main(void)
{
	static const struct { uint16_t h; double v; } f16[] = {
		{0x3c00, 1.0}, {0xc000, -2.0}, {0x7bff, 65504.0},
		{0x0001, 5.9604644775390625e-08},          /* smallest subnormal, 2^-24 */
		{0x03ff, 6.0975551605224609e-05},          /* largest subnormal, 1023 * 2^-24 */
		{0x0400, 6.103515625e-05},                 /* smallest normal, 2^-14 */
		{0x3555, 0.333251953125}, {0x0000, 0.0},
	};
	static const struct { uint16_t h; double v; } bf16[] = {
		{0x3f80, 1.0}, {0xc040, -3.0}, {0x4049, 3.140625}, {0x0001, 9.183549615799121e-41},
		{0x7f7f, 3.3895313892515355e+38},
	};
	unsigned char bytes[8];
	float out[4];
	struct sw_err err;

	for (size_t i = 0; i < sizeof f16 / sizeof *f16; i++)
		ok(sw_f16_to_f32(f16[i].h) == (float)f16[i].v, "f16 0x%04x = %.17g", f16[i].h, f16[i].v);
	ok(isinf(sw_f16_to_f32(0x7c00)) && sw_f16_to_f32(0x7c00) > 0, "f16 +inf");
	ok(isnan(sw_f16_to_f32(0x7e00)), "f16 NaN");
	ok(signbit(sw_f16_to_f32(0x8000)) && sw_f16_to_f32(0x8000) == 0, "f16 -0");
	for (size_t i = 0; i < sizeof bf16 / sizeof *bf16; i++)
		ok(sw_bf16_to_f32(bf16[i].h) == (float)bf16[i].v, "bf16 0x%04x = %.17g", bf16[i].h, bf16[i].v);

	/* narrowing: round to nearest, ties to even; NaN stays NaN */
	ok(sw_f32_to_bf16(1.0f) == 0x3f80, "bf16(1) exact");
	ok(sw_f32_to_bf16(1.00390625f) == 0x3f80, "1 + 2^-8 is a tie: rounds to even 1.0");
	ok(sw_f32_to_bf16(1.01171875f) == 0x3f82, "1 + 3*2^-8 is a tie: rounds to even 1+2^-6");
	ok(sw_f32_to_bf16(1.0048828125f) == 0x3f81, "1 + 1.25*2^-8 rounds up");
	ok(isnan(sw_bf16_to_f32(sw_f32_to_bf16(NAN))), "NaN survives narrowing");
	ok(sw_f32_to_bf16(3.4e38f) == 0x7f80, "3.4e38 rounds to +inf in bf16");
	for (uint32_t h = 0; h < 65536; h += 7) {
		float f = sw_bf16_to_f32((uint16_t)h);
		if (!isnan(f) && sw_f32_to_bf16(f) != h) {
			ok(0, "bf16 round trip of 0x%04x", h);
			break;
		}
		if (h + 7 >= 65536)
			ok(1, "every sampled bf16 value round-trips through float32");
	}

	/* buffers at odd addresses, little-endian */
	bytes[0] = 0x80; bytes[1] = 0x3f; bytes[2] = 0x40; bytes[3] = 0xc0;
	ok(sw_to_f32(SW_DTYPE_BF16, bytes, out, 2, &err) == 0 && out[0] == 1.0f && out[1] == -3.0f,
	   "sw_to_f32 bf16 buffer");
	memset(bytes, 0, sizeof bytes);
	bytes[1] = 0x00; bytes[2] = 0x3c;
	ok(sw_to_f32(SW_DTYPE_F16, bytes + 1, out, 1, &err) == 0 && out[0] == 1.0f,
	   "sw_to_f32 f16 at an odd address");
	ok(sw_to_f32(SW_DTYPE_UNSUPPORTED, bytes, out, 1, &err) == SW_EDATA, "unsupported dtype refused");

	/* F64: as close as float32 gets, or refused naming the value */
	{
		static const struct { double d; int fits; } f64[] = {
			{0.1, 1}, {-2.5e38, 1}, {3.4028234663852886e38, 1}, {FLT_MIN, 1},
			{(double)FLT_TRUE_MIN, 1},                  /* a float32 subnormal, exactly */
			{3 * (double)FLT_TRUE_MIN, 1}, {0.0, 1}, {-0.0, 1}, {INFINITY, 1}, {NAN, 1},
			{1e300, 0}, {-1e39, 0}, {3.5e38, 0},        /* beyond the range */
			{1e-300, 0}, {1e-40, 0}, {-1.5 * (double)FLT_TRUE_MIN, 0},   /* 0 or fewer digits */
		};
		for (size_t i = 0; i < sizeof f64 / sizeof *f64; i++) {
			double in[3] = {1.0, f64[i].d, 2.0};
			int rc = sw_to_f32(SW_DTYPE_F64, in, out, 3, &err);
			if (f64[i].fits)
				ok(rc == SW_OK && out[0] == 1.0f && (isnan(f64[i].d) ? isnan(out[1]) :
				   out[1] == (float)f64[i].d) && out[2] == 2.0f, "f64 %.17g read", f64[i].d);
			else
				ok(rc == SW_EDATA && strstr(err.msg, "at index 1 ") &&
				   strstr(err.msg, fabs(f64[i].d) > 1 ? "beyond float32's range" :
						   "below float32's normal range"),
				   "f64 %.17g refused: %s", f64[i].d, err.msg);
		}
	}

	/* Q8_0: blocks of an F16 scale and 32 int8, each value d * q */
	{
		unsigned char blk[2 * 34];
		float q8[64];
		int good = 1;

		blk[0] = 0x00, blk[1] = 0x38;           /* d = 0.5 */
		blk[34] = 0x00, blk[35] = 0xbc;         /* d = -1 */
		for (int i = 0; i < 32; i++) {
			blk[2 + i] = (unsigned char)(int8_t)(i - 16);
			blk[36 + i] = (unsigned char)(int8_t)(i % 2 ? 127 : -127);
		}
		ok(sw_to_f32(SW_DTYPE_Q8_0, blk, q8, 64, &err) == SW_OK, "Q8_0: two blocks read");
		for (int i = 0; i < 32; i++)
			good &= q8[i] == 0.5f * (float)(i - 16) && q8[32 + i] == (i % 2 ? -127.0f : 127.0f);
		ok(good, "Q8_0: every value d * q (0.5 * -16 .. 15, -1 * +-127)");
		ok(sw_to_f32(SW_DTYPE_Q8_0, blk, q8, 48, &err) == SW_EDATA && strstr(err.msg, "blocks of 32"),
		   "Q8_0: a count that is no whole number of blocks refused: %s", err.msg);
		ok(sw_dtype_size(SW_DTYPE_Q8_0) == 0, "Q8_0 has no size per element");
	}
	return tap_done();
}
