/*
 * Unit tests of lib/formats/gguf.c, the GGUF parser: files built here byte by
 * byte from the spec (ggml's docs/gguf.md) are read back with every value
 * type, and each malformed variant is refused naming what is wrong; every
 * truncation of a valid file is refused, never read past its end. And
 * lib/formats/ropeperm.c's row order, against the permutation written out.
 */
#include <stdlib.h>
#include <string.h>

#include "../../lib/formats/gguf.h"
#include "../../lib/formats/ropeperm.h"
#include "tap.h"

struct buf {
	unsigned char *p;
	size_t n, cap;
};

static void put(struct buf *b, const void *d, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			abort();
	}
	memcpy(b->p + b->n, d, n);
	b->n += n;
}

static void le(struct buf *b, uint64_t v, int n)
{
	unsigned char x[8];

	for (int i = 0; i < n; i++)
		x[i] = (unsigned char)(v >> (8 * i));
	put(b, x, (size_t)n);
}

static void str(struct buf *b, const char *s)
{
	le(b, strlen(s), 8);
	put(b, s, strlen(s));
}

static void key(struct buf *b, const char *k, enum gguf_vtype t)
{
	str(b, k);
	le(b, t, 4);
}

static void pad(struct buf *b, size_t align)
{
	while (b->n % align)
		le(b, 0, 1);
}

/* A tensor info: name, dims (fastest first), ggml type, offset */
static void info(struct buf *b, const char *name, int nd, const uint64_t *ne, uint32_t type,
		 uint64_t off)
{
	str(b, name);
	le(b, (uint64_t)nd, 4);
	for (int i = 0; i < nd; i++)
		le(b, ne[i], 8);
	le(b, type, 4);
	le(b, off, 8);
}

static int parse(const struct buf *b, struct gguf_file *f, struct sw_err *err)
{
	unsigned char *copy = malloc(b->n ? b->n : 1);     /* exact size: ASan sees an overread */
	int rc;

	memcpy(copy, b->p, b->n);
	rc = gguf_parse(copy, b->n, f, err);
	free(copy);
	return rc;
}

/*
 * The good file: every value type among 17 keys, general.alignment 64
 * when align, and five tensors: F32 3x2 (ne 3, 2), F16 [5], Q8_0 (32, 2),
 * BF16 [1], F64 (2, 1), data each padded to the alignment.
 */
static void good(struct buf *b, int align)
{
	const uint64_t a = align ? 64 : 32;
	const uint64_t ne_f32[] = {3, 2}, ne_f16[] = {5}, ne_q8[] = {32, 2}, ne_bf[] = {1}, ne_f64[] = {2, 1};
	const uint64_t bytes[] = {24, 10, 68, 2, 16};
	uint64_t off = 0;

	memset(b, 0, sizeof *b);
	put(b, "GGUF", 4);
	le(b, 3, 4);
	le(b, 5, 8);
	le(b, 17 + (align != 0), 8);
	key(b, "general.architecture", GGUF_STRING), str(b, "llama");
	key(b, "t.u8", GGUF_UINT8), le(b, 250, 1);
	key(b, "t.i8", GGUF_INT8), le(b, (uint8_t)-5, 1);
	key(b, "t.u16", GGUF_UINT16), le(b, 65000, 2);
	key(b, "t.i16", GGUF_INT16), le(b, (uint16_t)-300, 2);
	key(b, "t.u32", GGUF_UINT32), le(b, 4000000000u, 4);
	key(b, "t.i32", GGUF_INT32), le(b, (uint32_t)-7, 4);
	key(b, "t.f32", GGUF_FLOAT32), le(b, 0x3e800000, 4);          /* 0.25 */
	key(b, "t.bool", GGUF_BOOL), le(b, 1, 1);
	key(b, "t.u64", GGUF_UINT64), le(b, (1ULL << 63) + 5, 8);
	key(b, "t.i64", GGUF_INT64), le(b, (uint64_t)-9, 8);
	key(b, "t.f64", GGUF_FLOAT64), le(b, 0xbff8000000000000ULL, 8);   /* -1.5 */
	key(b, "t.strings", GGUF_ARRAY), le(b, GGUF_STRING, 4), le(b, 3, 8);
	str(b, ""), str(b, "a"), str(b, "bc");
	key(b, "t.bools", GGUF_ARRAY), le(b, GGUF_BOOL, 4), le(b, 2, 8), le(b, 0x0100, 2);
	key(b, "t.empty", GGUF_ARRAY), le(b, GGUF_INT64, 4), le(b, 0, 8);
	/* an array of two arrays: [u16 1, 2] and [[string "x"]] */
	key(b, "t.nested", GGUF_ARRAY), le(b, GGUF_ARRAY, 4), le(b, 2, 8);
	le(b, GGUF_UINT16, 4), le(b, 2, 8), le(b, 0x00020001, 4);
	le(b, GGUF_ARRAY, 4), le(b, 1, 8), le(b, GGUF_STRING, 4), le(b, 1, 8), str(b, "x");
	key(b, "t.z", GGUF_STRING), str(b, "last");
	if (align)
		key(b, "general.alignment", GGUF_UINT32), le(b, a, 4);
	info(b, "w.f32", 2, ne_f32, GGML_F32, off), off += (bytes[0] + a - 1) / a * a;
	info(b, "w.f16", 1, ne_f16, GGML_F16, off), off += (bytes[1] + a - 1) / a * a;
	info(b, "w.q8", 2, ne_q8, GGML_Q8_0, off), off += (bytes[2] + a - 1) / a * a;
	info(b, "w.bf16", 1, ne_bf, GGML_BF16, off), off += (bytes[3] + a - 1) / a * a;
	info(b, "w.f64", 2, ne_f64, GGML_F64, off);
	pad(b, a);
	for (int i = 0; i < 5; i++) {
		for (uint64_t k = 0; k < bytes[i]; k++)
			le(b, (uint64_t)(i + 1), 1);
		if (i < 4)
			pad(b, a);
	}
}

/* good(), with the bytes at off replaced by the n bytes of v */
static int refused(const char *title, int align, size_t off, uint64_t v, int n, const char *want)
{
	struct buf b;
	struct gguf_file f;
	struct sw_err err = {0};
	int rc;

	good(&b, align);
	for (int i = 0; i < n; i++)
		b.p[off + (size_t)i] = (unsigned char)(v >> (8 * i));
	rc = parse(&b, &f, &err);
	free(b.p);
	return ok(rc == SW_EDATA && strstr(err.msg, want) && f.nkv == 0 && f.nt == 0,
		  "%s: refused, '%s'", title, err.msg);
}

/* where the string s first occurs in the good file */
static size_t at(const char *s, int align)
{
	struct buf b;
	size_t n = strlen(s), i;

	good(&b, align);
	for (i = 0; i + n <= b.n && memcmp(b.p + i, s, n); i++)
		;
	free(b.p);
	return i;
}

static void appended(const char *title, const void *extra, size_t n, const char *want)
{
	struct buf b;
	struct gguf_file f;
	struct sw_err err = {0};
	int rc;

	good(&b, 0);
	put(&b, extra, n);
	rc = parse(&b, &f, &err);
	free(b.p);
	ok(rc == SW_EDATA && strstr(err.msg, want), "%s: refused, '%s'", title, err.msg);
}

int main(void)
{
	struct buf b;
	struct gguf_file f;
	struct sw_err err = {0};
	uint64_t u;
	double d;
	const char *s;
	int present, all;

	good(&b, 0);
	ok(parse(&b, &f, &err) == SW_OK, "a file of every value type and five tensors is read: %s",
	   err.msg);
	ok(f.version == 3 && f.nkv == 17 && f.nt == 5 && f.alignment == 32, "version, counts, alignment 32");
	ok(gguf_uint(&f, "t.u8", &u, NULL, &err) == SW_OK && u == 250, "uint8 250");
	ok(gguf_find(&f, "t.i8")->i == -5 && gguf_find(&f, "t.i16")->i == -300 &&
	   gguf_find(&f, "t.i32")->i == -7 && gguf_find(&f, "t.i64")->i == -9, "signed integers");
	ok(gguf_find(&f, "t.u16")->u == 65000 && gguf_find(&f, "t.u32")->u == 4000000000u &&
	   gguf_find(&f, "t.u64")->u == (1ULL << 63) + 5, "unsigned integers, a uint64 past 2^63");
	ok(gguf_real(&f, "t.f32", &d, NULL, &err) == SW_OK && d == 0.25 &&
	   gguf_real(&f, "t.f64", &d, NULL, &err) == SW_OK && d == -1.5, "float32 0.25, float64 -1.5");
	ok(gguf_find(&f, "t.bool")->u == 1, "bool true");
	ok(gguf_string(&f, "general.architecture", &s, NULL, &err) == SW_OK && !strcmp(s, "llama") &&
	   gguf_string(&f, "t.z", &s, NULL, &err) == SW_OK && !strcmp(s, "last"),
	   "strings, one after the nested arrays");
	ok(gguf_find(&f, "t.strings")->type == GGUF_ARRAY && gguf_find(&f, "t.strings")->elem == GGUF_STRING &&
	   gguf_find(&f, "t.strings")->count == 3 && gguf_find(&f, "t.empty")->count == 0 &&
	   gguf_find(&f, "t.nested")->elem == GGUF_ARRAY && gguf_find(&f, "t.nested")->count == 2,
	   "arrays: their element types and counts");
	ok(gguf_uint(&f, "t.i8", &u, NULL, &err) == SW_EDATA && strstr(err.msg, "negative"),
	   "a negative integer is no size: %s", err.msg);
	ok(gguf_uint(&f, "t.strings", &u, NULL, &err) == SW_EDATA && strstr(err.msg, "type array"),
	   "an array is no integer: %s", err.msg);
	ok(gguf_real(&f, "t.u8", &d, NULL, &err) == SW_EDATA && gguf_string(&f, "t.u8", &s, NULL, &err) == SW_EDATA,
	   "an integer is no float and no string");
	ok(gguf_uint(&f, "nope", &u, &present, &err) == SW_OK && !present &&
	   gguf_uint(&f, "nope", &u, NULL, &err) == SW_EDATA && strstr(err.msg, "missing metadata nope"),
	   "an absent key: not present, or missing when required");
	{
		/* data start: the infos' end rounded up to 32 */
		static const int64_t numel[] = {6, 5, 64, 1, 2};
		static const uint64_t nbytes[] = {24, 10, 68, 2, 16}, rel[] = {0, 32, 64, 160, 192};
		static const enum sw_dtype dt[] = {SW_DTYPE_F32, SW_DTYPE_F16, SW_DTYPE_Q8_0, SW_DTYPE_BF16,
						   SW_DTYPE_F64};
		all = f.data_start % 32 == 0 && f.data_start + 208 == b.n;
		for (int i = 0; i < 5; i++)
			all &= f.t[i].numel == numel[i] && f.t[i].nbytes == nbytes[i] &&
			       f.t[i].offset == f.data_start + rel[i] && f.t[i].dtype == dt[i] &&
			       b.p[f.t[i].offset] == i + 1;
		ok(all && f.t[0].ne[0] == 3 && f.t[0].ne[1] == 2 && f.t[0].n_dims == 2 &&
		   !strcmp(f.t[2].name, "w.q8"), "tensors: dims, sizes, absolute offsets, padded to 32");
	}
	gguf_free(&f);
	free(b.p);

	good(&b, 1);
	ok(parse(&b, &f, &err) == SW_OK && f.alignment == 64 && f.data_start % 64 == 0 &&
	   f.t[1].offset == f.data_start + 64 && f.t[4].offset == f.data_start + 320,
	   "general.alignment 64: data and offsets padded to 64");
	gguf_free(&f);
	free(b.p);

	/* every truncation is refused, and read within its bytes (ASan) */
	good(&b, 1);
	all = 1;
	for (size_t n = 0; n < b.n; n++) {
		struct buf cut = {b.p, n, n};
		all &= parse(&cut, &f, &err) == SW_EDATA && err.msg[0];
	}
	ok(all, "each of the %zu truncations refused", b.n);
	free(b.p);

	refused("not GGUF", 0, 0, 0x46554747 + 1, 4, "not a GGUF file");
	refused("version 1", 0, 4, 1, 4, "GGUF version 1 is not supported");
	refused("version 4", 0, 4, 4, 4, "GGUF version 4 is not supported");
	refused("a big-endian file", 0, 4, 0x03000000, 4, "big-endian");
	refused("a tensor count the file cannot hold", 0, 8, 1ULL << 40, 8, "cannot fit in the file");
	refused("a string length past the end", 0, at("t.z", 0) + 7, 1ULL << 40, 8,
		"string length 1099511627776 at byte");
	refused("a key length past the end", 0, at("t.u8", 0) - 8, 1ULL << 32, 8, "runs past the end");
	refused("an empty key", 0, at("t.u8", 0) - 8, 0, 8, "is empty");
	refused("a key of a control byte", 0, at("t.u8", 0), '\n', 1, "printable ASCII");
	refused("a key twice", 0, at("t.i8", 0) + 2, 'u', 1, "metadata key 't.u8' appears twice");
	refused("a value type 13", 0, at("t.u8", 0) + 4, 13, 4, "value type 13 is not a GGUF type");
	refused("a bool 2", 0, at("t.bool", 0) + 10, 2, 1, "bool 2 is neither 0 nor 1");
	refused("a bool 2 in an array", 0, at("t.bools", 0) + 23, 2, 1, "bool 2 is neither 0 nor 1");
	refused("an array of 2^40 strings", 0, at("t.strings", 0) + 17, 1ULL << 40, 8, "cannot fit");
	refused("an array of 2^61 uint16", 0, at("t.nested", 0) + 28, 1ULL << 61, 8, "runs past the end");
	refused("alignment 48", 1, at("general.alignment", 1) + 21, 48, 4, "not a power of two");
	refused("alignment 0", 1, at("general.alignment", 1) + 21, 0, 4, "not a power of two");
	refused("alignment 2^21", 1, at("general.alignment", 1) + 21, 1u << 21, 4, "not a power of two");
	refused("alignment as a uint16", 1, at("general.alignment", 1) + 17, GGUF_UINT16, 4,
		"general.alignment has type uint16, not uint32");
	refused("a tensor name twice", 0, at("w.f16", 0) + 3, 0x3233, 2, "tensor w.f32 appears twice");
	refused("5 dims", 0, at("w.f32", 0) + 5, 5, 4, "5 dimensions (at most 4)");
	refused("dims whose product overflows", 0, at("w.f32", 0) + 9, 1ULL << 62, 8,
		"element count overflows");
	refused("a dim of 2^63", 0, at("w.f32", 0) + 9, 1ULL << 63, 8, "element count overflows");
	refused("Q4_K rows of 5", 0, at("w.f16", 0) + 5 + 4 + 8, 12, 4,
		"w.f16: Q4_K rows of 5 values are no whole number of blocks of 256");
	refused("Q4_0 rows of 3", 0, at("w.f32", 0) + 5 + 4 + 16, 2, 4,
		"w.f32: Q4_0 rows of 3 values are no whole number of blocks of 32");
	refused("IQ2_XS", 0, at("w.f16", 0) + 17, 17, 4,
		"w.f16: IQ2_XS: a quantization not read (F32, F16, BF16, F64, Q4_0");
	refused("IQ4_NL", 0, at("w.f16", 0) + 17, 20, 4, "IQ4_NL: a quantization not read");
	refused("Q8_K", 0, at("w.f16", 0) + 17, 15, 4, "Q8_K: a quantization not read");
	refused("I32", 0, at("w.f16", 0) + 17, 26, 4, "I32: an integer tensor");
	refused("type 31 (removed)", 0, at("w.f16", 0) + 17, 31, 4, "tensor type 31 is not a ggml type");
	refused("type 40", 0, at("w.f16", 0) + 17, 40, 4, "tensor type 40 is not a ggml type");
	refused("Q8_0 rows of 16", 0, at("w.q8", 0) + 8, 16, 8, "Q8_0 rows of 16 values are no whole number");
	refused("an offset that skips padding", 0, at("w.f16", 0) + 21, 24, 8,
		"w.f16: data offset 24, expected 32");
	refused("the first offset not 0", 0, at("w.f32", 0) + 29, 32, 8, "w.f32: data offset 32, expected 0");
	{
		const unsigned char junk[40] = {0};
		appended("bytes after the last tensor's padding", junk, 40, "24 bytes after the tensor data");
	}
	{
		/* the last tensor reaching past the end: its dims doubled */
		refused("a tensor past the end", 0, at("w.f64", 0) + 9, 4, 8,
			"w.f64: data at offset");
	}
	{
		/* nine arrays nested in each other: deeper than allowed */
		struct buf n = {0};
		put(&n, "GGUF", 4), le(&n, 3, 4), le(&n, 0, 8), le(&n, 1, 8);
		key(&n, "deep", GGUF_ARRAY);
		for (int i = 0; i < 9; i++)
			le(&n, GGUF_ARRAY, 4), le(&n, 1, 8);
		le(&n, GGUF_UINT8, 4), le(&n, 0, 8);
		ok(parse(&n, &f, &err) == SW_EDATA && strstr(err.msg, "nested deeper than 8"),
		   "arrays nested 10 deep refused: %s", err.msg);
		free(n.p);
	}
	{
		/* no tensors, no data: a valid (vocabulary-only) file */
		struct buf n = {0};
		put(&n, "GGUF", 4), le(&n, 2, 4), le(&n, 0, 8), le(&n, 0, 8);
		ok(parse(&n, &f, &err) == SW_OK && f.version == 2 && f.nt == 0 && f.nkv == 0,
		   "an empty version 2 file is read");
		gguf_free(&f);
		free(n.p);
	}
	{
		/* each quantization read: a [2, 256] tensor of ggml's block bytes
		 * (ggml-common.h: QK4_0 32, sizeof(block_q4_0) 18, QK_K 256, ...) */
		static const struct {
			uint32_t type;
			enum sw_dtype dtype;
			int values, bytes;
		} q[] = {
			{2, SW_DTYPE_Q4_0, 32, 18}, {3, SW_DTYPE_Q4_1, 32, 20}, {6, SW_DTYPE_Q5_0, 32, 22},
			{7, SW_DTYPE_Q5_1, 32, 24}, {8, SW_DTYPE_Q8_0, 32, 34}, {10, SW_DTYPE_Q2_K, 256, 84},
			{11, SW_DTYPE_Q3_K, 256, 110}, {12, SW_DTYPE_Q4_K, 256, 144},
			{13, SW_DTYPE_Q5_K, 256, 176}, {14, SW_DTYPE_Q6_K, 256, 210},
		};
		const uint64_t ne[] = {256, 2};
		for (size_t k = 0; k < sizeof q / sizeof q[0]; k++) {
			struct buf n = {0};
			uint64_t nbytes = 2 * 256 / (uint64_t)q[k].values * (uint64_t)q[k].bytes;
			put(&n, "GGUF", 4), le(&n, 3, 4), le(&n, 1, 8), le(&n, 0, 8);
			info(&n, "w", 2, ne, q[k].type, 0);
			pad(&n, 32);
			for (uint64_t i = 0; i < nbytes; i++)
				le(&n, 0, 1);
			pad(&n, 32);
			ok(parse(&n, &f, &err) == SW_OK && f.t[0].dtype == q[k].dtype &&
			   f.t[0].nbytes == nbytes && f.t[0].numel == 512,
			   "%s: read, %llu bytes for 512 values: %s", gguf_type_name(q[k].type),
			   (unsigned long long)nbytes, err.msg);
			gguf_free(&f);
			/* one byte short: the data runs past the end */
			n.n -= (32 - nbytes % 32) % 32 + 1;
			ok(parse(&n, &f, &err) == SW_EDATA && strstr(err.msg, "lies past the end"),
			   "%s: a byte short, refused: %s", gguf_type_name(q[k].type), err.msg);
			free(n.p);
		}
	}
	ok(!strcmp(gguf_type_name(12), "Q4_K") && !strcmp(gguf_type_name(30), "BF16") &&
	   !gguf_type_name(4) && !gguf_type_name(40), "ggml type names");

	/* ropeperm: HF row h*hd + j*hd/2 + i is interleaved row h*hd + 2i + j */
	{
		static const int64_t want[16] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};
		float src[16 * 2], dst[16 * 2];
		all = 1;
		for (int r = 0; r < 16; r++)
			all &= ropeperm_source_row(r, 8) == want[r];
		ok(all, "rows of two heads of 8 in rotate-half order: 0 2 4 6 1 3 5 7, 8 10 ...");
		for (int i = 0; i < 32; i++)
			src[i] = (float)i;
		ok(ropeperm_to_f32(SW_DTYPE_F32, (const unsigned char *)src, 8, 16, 2, 8, dst, &err) == SW_OK &&
		   dst[2] == 4 && dst[3] == 5 && dst[8] == 2 && dst[9] == 3 && dst[30] == 30,
		   "a 16x2 matrix's rows moved whole");
		ok(ropeperm_to_f32(SW_DTYPE_F32, (const unsigned char *)src, 8, 16, 2, 6, dst, &err) == SW_EDATA &&
		   ropeperm_to_f32(SW_DTYPE_F32, (const unsigned char *)src, 8, 15, 2, 5, dst, &err) == SW_EDATA,
		   "rows no multiple of the head, or an odd head, refused");
	}
	return tap_done();
}
