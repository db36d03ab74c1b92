/* Unit tests of lib/base/dtype.c: BF16 and F16 against exactly known values;
 * each of ggml's quantized blocks written here by hand from its layout
 * (ggml-common.h), every value against the one the layout gives it. */
#include <float.h>
#include <stdint.h>
#include <string.h>

#include "../../lib/base/dtype.h"
#include "tap.h"

/* an F16 at p, little-endian */
static void f16_put(unsigned char *p, uint16_t h)
{
	p[0] = (unsigned char)(h & 0xff);
	p[1] = (unsigned char)(h >> 8);
}

/* dequantize n values of one block b of dtype; 1 if each is want(i) */
static int block_is(enum sw_dtype dtype, const unsigned char *b, int n, float (*want)(int),
		    const char *what)
{
	float y[256];
	struct sw_err err = {0};
	int good = sw_to_f32(dtype, b, y, (size_t)n, &err) == SW_OK, bad = -1;

	for (int i = 0; i < n && good; i++)
		if (y[i] != want(i))
			good = 0, bad = i;
	ok(good, "%s (%s)", what, err.msg[0] ? err.msg : "every value");
	if (bad >= 0)
		diag("value %d is %.9g, not %.9g", bad, (double)y[bad], (double)want(bad));
	return good;
}

/* the nibbles of q bytes j: j, and 15 - j in the high half */
static unsigned char nibbles(int j)
{
	return (unsigned char)(j | (15 - j) << 4);
}

/* Q4_0 d 1: the first 16 values q - 8 from the low nibbles, then the high */
static float want_q4_0(int i) { return i < 16 ? (float)(i - 8) : (float)(7 - (i - 16)); }
/* Q4_1 d 0.5, m -2: 0.5 q - 2 */
static float want_q4_1(int i) { return 0.5f * (float)(i < 16 ? i : 15 - (i - 16)) - 2; }
/* Q5_0 d 1, qh 0xAAAAAAAA: the fifth bit of the odd values, q - 16 */
static float want_q5_0(int i)
{
	return (float)((i < 16 ? i : 15 - (i - 16)) + (i % 2) * 16 - 16);
}
/* Q5_1 d 0.25, m 1, qh 0xFFFF0000: the fifth bit of the last 16 values */
static float want_q5_1(int i) { return 0.25f * (float)(i < 16 ? i : 31 - (i - 16)) + 1; }

/* the 2-bit fields of a K-quant's low bits (Q2_K, Q3_K): byte b of a
 * 32-byte group holds values at shifts 0, 2, 4, 6 = runs 0..3 of 32; here
 * every byte 0xE4 (fields 0 1 2 3), odd bytes ^ 0x55, the second group's ^
 * 0xAA: value i's field (i % 128) / 32, ^ 1 if i is odd, ^ 2 past 128 */
static int field2(int i) { return ((i % 128) / 32) ^ (i % 2) ^ (i >= 128 ? 2 : 0); }
static void fields2(unsigned char *qs)
{
	for (int b = 0; b < 64; b++)
		qs[b] = (unsigned char)(0xE4 ^ (b % 2 ? 0x55 : 0) ^ (b >= 32 ? 0xAA : 0));
}

/* Q2_K d 1, dmin 0.5, sub-block s of 16 scale s, min 15 - s */
static float want_q2_k(int i) { return (float)(i / 16) * (float)field2(i) - 0.5f * (float)(15 - i / 16); }
/* Q3_K d 0.5, scales s + 24 (s - 8 after the offset 32), the high bit set
 * for the first 128 values: 4 taken off the rest */
static float want_q3_k(int i)
{
	return 0.5f * (float)(i / 16 - 8) * (float)(field2(i) - (i >= 128 ? 4 : 0));
}
/* Q4_K/Q5_K's 6-bit scale and min of sub-block j of 32 */
static int sc_k(int j) { return 8 * j + 3; }
static int min_k(int j) { return 63 - 8 * j; }
/* Q4_K d 1, dmin 0.25: q the low nibble of byte l of group s / 2 for even
 * s, the high for odd (bytes nibbles(l % 16)) */
static int q4_k(int i)
{
	int l = i % 32 % 16;
	return (i / 32) % 2 ? 15 - l : l;
}
static float want_q4_k(int i) { return (float)sc_k(i / 32) * (float)q4_k(i) - 0.25f * (float)min_k(i / 32); }
/* Q5_K: also bit s of qh[l], here 0x0F for even l, 0xF0 for odd */
static float want_q5_k(int i)
{
	int s = i / 32, hi = (i % 2) == (s >= 4);
	return (float)sc_k(s) * (float)(q4_k(i) + 16 * hi) - 0.25f * (float)min_k(s);
}
/* Q6_K d 0.5, int8 scales s - 8: value i of group g = i / 128 (r = i %
 * 128) has its low nibble in byte r % 64 of 64 (high half past 64), its
 * high 2 bits at field r / 32 of byte r % 32 of 32 (all 0xE4 here) */
static float want_q6_k(int i)
{
	int r = i % 128, lo = r < 64 ? r % 16 : 15 - r % 16;
	return 0.5f * (float)(i / 16 - 8) * (float)(lo + 16 * (r / 32) - 32);
}

static void quant_blocks(void)
{
	unsigned char b[256];
	struct sw_err err = {0};
	float y[512];
	static const struct { enum sw_dtype dtype; int values, bytes; } layout[] = {
		{SW_DTYPE_Q4_0, 32, 18}, {SW_DTYPE_Q4_1, 32, 20}, {SW_DTYPE_Q5_0, 32, 22},
		{SW_DTYPE_Q5_1, 32, 24}, {SW_DTYPE_Q8_0, 32, 34}, {SW_DTYPE_Q2_K, 256, 84},
		{SW_DTYPE_Q3_K, 256, 110}, {SW_DTYPE_Q4_K, 256, 144}, {SW_DTYPE_Q5_K, 256, 176},
		{SW_DTYPE_Q6_K, 256, 210},
	};
	int all = 1;

	for (size_t k = 0; k < sizeof layout / sizeof *layout; k++) {
		const struct sw_dtype_block *q = sw_dtype_block(layout[k].dtype);
		all &= q && q->values == layout[k].values && q->bytes == layout[k].bytes;
	}
	ok(all && !sw_dtype_block(SW_DTYPE_F16) && !sw_dtype_block(SW_DTYPE_UNSUPPORTED),
	   "blocks: ggml's values and bytes (18 for Q4_0's 32 ... 210 for Q6_K's 256); none for F16");

	f16_put(b, 0x3c00);                             /* d = 1 */
	for (int j = 0; j < 16; j++)
		b[2 + j] = nibbles(j);
	block_is(SW_DTYPE_Q4_0, b, 32, want_q4_0, "Q4_0: d (q - 8), low nibbles first");

	f16_put(b, 0x3800), f16_put(b + 2, 0xc000);     /* d = 0.5, m = -2 */
	for (int j = 0; j < 16; j++)
		b[4 + j] = nibbles(j);
	block_is(SW_DTYPE_Q4_1, b, 32, want_q4_1, "Q4_1: d q + m");

	f16_put(b, 0x3c00);
	memcpy(b + 2, "\xaa\xaa\xaa\xaa", 4);           /* qh: the odd values' bits */
	for (int j = 0; j < 16; j++)
		b[6 + j] = nibbles(j);
	block_is(SW_DTYPE_Q5_0, b, 32, want_q5_0, "Q5_0: d (q - 16), the fifth bits from qh");

	f16_put(b, 0x3400), f16_put(b + 2, 0x3c00);     /* d = 0.25, m = 1 */
	memcpy(b + 4, "\x00\x00\xff\xff", 4);           /* qh 0xFFFF0000 */
	for (int j = 0; j < 16; j++)
		b[8 + j] = nibbles(j);
	block_is(SW_DTYPE_Q5_1, b, 32, want_q5_1, "Q5_1: d q + m, qh little-endian");

	for (int s = 0; s < 16; s++)                    /* scale s, min 15 - s */
		b[s] = (unsigned char)(s | (15 - s) << 4);
	fields2(b + 16);
	f16_put(b + 80, 0x3c00), f16_put(b + 82, 0x3800);
	block_is(SW_DTYPE_Q2_K, b, 256, want_q2_k, "Q2_K: (d sc) q - dmin m, 2-bit q in runs of 32");

	memset(b, 0x0f, 32);                            /* hmask: bits 0-3, the first 128 */
	fields2(b + 32);
	/* 6-bit scales s + 24: low nibbles of s < 8 in bytes 0-7, of s >= 8 in
	 * their high halves; the high 2 bits (1 for s < 8, 2 after) in bytes
	 * 8-11, sub-block s at byte 8 + s % 4, shift 2 (s / 4) */
	for (int k = 0; k < 8; k++)
		b[96 + k] = (unsigned char)((k + 24) % 16 | (k + 8 + 24) % 16 << 4);
	for (int k = 0; k < 4; k++)
		b[104 + k] = 1 | 1 << 2 | 2 << 4 | 2 << 6;
	f16_put(b + 108, 0x3800);
	block_is(SW_DTYPE_Q3_K, b, 256, want_q3_k, "Q3_K: (d (sc - 32)) q, q - 4 where hmask is 0");

	/* the K-quants' 12 scale bytes: sub-block j < 4 in the low 6 bits of
	 * bytes j (scale) and j + 4 (min); j >= 4's low 4 bits in byte j + 4
	 * (scale low, min high nibble), its top 2 in bytes j - 4 and j */
	f16_put(b, 0x3c00), f16_put(b + 2, 0x3400);     /* d = 1, dmin = 0.25 */
	for (int k = 0; k < 4; k++) {
		b[4 + k] = (unsigned char)(sc_k(k) | (sc_k(k + 4) >> 4) << 6);
		b[8 + k] = (unsigned char)(min_k(k) | (min_k(k + 4) >> 4) << 6);
		b[12 + k] = (unsigned char)((sc_k(k + 4) & 15) | (min_k(k + 4) & 15) << 4);
	}
	for (int l = 0; l < 128; l++)
		b[16 + l] = nibbles(l % 16);
	block_is(SW_DTYPE_Q4_K, b, 256, want_q4_k, "Q4_K: (d sc) q - dmin m, 6-bit scales and mins");

	memmove(b + 48, b + 16, 128);                   /* Q5_K: qh between scales and qs */
	for (int l = 0; l < 32; l++)
		b[16 + l] = l % 2 ? 0xf0 : 0x0f;
	block_is(SW_DTYPE_Q5_K, b, 256, want_q5_k, "Q5_K: Q4_K's with a fifth bit, bit s of qh[l]");

	for (int l = 0; l < 128; l++)
		b[l] = nibbles(l % 16);
	memset(b + 128, 0xe4, 64);
	for (int s = 0; s < 16; s++)
		b[192 + s] = (unsigned char)(int8_t)(s - 8);
	f16_put(b + 208, 0x3800);
	block_is(SW_DTYPE_Q6_K, b, 256, want_q6_k, "Q6_K: (d sc) (q - 32), int8 scales");

	ok(sw_to_f32(SW_DTYPE_Q4_K, b, y, 512 - 32, &err) == SW_EDATA &&
	   strstr(err.msg, "480 Q4_K values are no whole number of blocks of 256"),
	   "Q4_K: 480 values refused: %s", err.msg);

	/* a sum that rounds: d 1 + 2^-10 times 31, plus m 2^-20, is 31 +
	 * 31 * 2^-10 + 2^-20, which float32 (24 bits) rounds to 31 + 31 * 2^-10 */
	f16_put(b, 0x3c01), f16_put(b + 2, 0x0010);     /* m = 16 * 2^-24 = 2^-20 */
	memset(b + 4, 0xff, 4);                         /* qh: every fifth bit */
	memset(b + 8, 0xff, 16);
	all = sw_to_f32(SW_DTYPE_Q5_1, b, y, 32, &err) == SW_OK;
	ok(all && y[0] == 31 + 31 * 0x1p-10f &&
	   (double)y[0] != 31 + 31 * 0x1p-10 + 0x1p-20, "Q5_1: d q + m rounded to float32: %.9g",
	   (double)y[0]);
}

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
	quant_blocks();
	return tap_done();
}
