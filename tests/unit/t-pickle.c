/* Unit tests of lib/formats/pickle.c, the restricted unpickler: pickles assembled
 * here byte by byte (the values each opcode gives, worked out from
 * Python's pickle documentation), what it refuses and why. */
#include <stdlib.h>
#include <string.h>

#include "../../lib/formats/pickle.h"
#include "tap.h"

#define PK(s) s, sizeof s - 1

static int load(const char *buf, size_t len, struct pk_result *r, struct sw_err *err)
{
	memset(err, 0, sizeof *err);
	return pk_load(buf, len, 1, r, err);   /* a pickle of an archive of one record */
}

static int refused_for(const char *buf, size_t len, const char *why)
{
	struct pk_result r;
	struct sw_err err;
	int rc = load(buf, len, &r, &err);

	if (rc == SW_OK)
		pk_free(&r);
	if (rc != SW_EDATA || !strstr(err.msg, why))
		diag("got %d '%s'", rc, err.msg);
	return rc == SW_EDATA && strstr(err.msg, why) != NULL;
}

/* "ctorch._utils\n_rebuild_tensor_v2\n((Xstorage ctorch\nFloatStorage\n X0 Xcpu K6 tQ
 *  K1 (K2K2t (K3K1t \x89 ccollections\nOrderedDict\n)R tR" */
#define ST "X\7\0\0\0storage"
#define CPU "X\3\0\0\0cpu"
#define REBUILD "ctorch._utils\n_rebuild_tensor_v2\n"
#define OD "ccollections\nOrderedDict\n)R"
#define PID(type, numel) "(" ST "ctorch\n" type "\n" "X\1\0\0\0" "0" CPU "K" numel "tQ"

int main(void)
{
	struct pk_result r;
	struct sw_err err;
	const struct pk_value *v, *t;

	/* ints: BININT1, BININT2, BININT (signed), LONG1 (two's complement) */
	ok(load(PK("\x80\x02(K\xffM\x01\x02J\xfe\xff\xff\xff\x8a\x02\x00\x80\x8a\x01\xfft."), &r, &err) == SW_OK &&
	   r.root->type == PK_TUPLE && r.root->u.seq.n == 5 &&
	   r.root->u.seq.v[0]->u.i == 255 && r.root->u.seq.v[1]->u.i == 513 &&
	   r.root->u.seq.v[2]->u.i == -2 && r.root->u.seq.v[3]->u.i == -32768 &&
	   r.root->u.seq.v[4]->u.i == -1, "ints: 255, 513, -2, -32768, -1");
	pk_free(&r);
	/* BINFLOAT is big-endian: 0x3ff8000000000000 = 1.5 */
	ok(load(PK("\x80\x02G\x3f\xf8\x00\x00\x00\x00\x00\x00."), &r, &err) == SW_OK &&
	   r.root->type == PK_FLOAT && r.root->u.f == 1.5, "BINFLOAT 1.5");
	pk_free(&r);
	/* a dict with a memoized key fetched twice: {'a': 'a'} via BINPUT/BINGET */
	ok(load(PK("\x80\x02}(X\1\0\0\0aq\x00h\x00u."), &r, &err) == SW_OK &&
	   (v = pk_dict_get(r.root, "a")) && v->type == PK_STR && !strcmp(v->u.str.s, "a") &&
	   !pk_dict_get(r.root, "b"), "memo: BINPUT then BINGET gives the same string");
	pk_free(&r);
	/* protocol 4: FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL */
	ok(load(PK("\x80\x04\x95\x20\0\0\0\0\0\0\0\x8c\x0b" "collections\x94\x8c\x0bOrderedDict\x94\x93)R."),
		&r, &err) == SW_OK && r.root->type == PK_DICT && r.root->u.seq.n == 0,
	   "protocol 4 framing: OrderedDict() by STACK_GLOBAL");
	pk_free(&r);
	/* a tensor: 2x2 view at offset 1, strides (2, 1), of a 6-float storage */
	ok(load(PK("\x80\x02}(X\1\0\0\0w" REBUILD "(" PID("FloatStorage", "\x06") "K\x01(K\x02K\x02t(K\x02K\x01t\x89" OD "tRu."),
		&r, &err) == SW_OK && (t = pk_dict_get(r.root, "w")) && t->type == PK_TENSOR &&
	   t->u.tensor->offset == 1 && t->u.tensor->rank == 2 && t->u.tensor->numel == 4 &&
	   t->u.tensor->stride[0] == 2 && t->u.tensor->storage->numel == 6 &&
	   t->u.tensor->storage->dtype == SW_DTYPE_F32 && !strcmp(t->u.tensor->storage->key, "0"),
	   "a view: offset 1, 2x2, strides (2, 1), storage 0 of 6 F32: %s", err.msg);
	pk_free(&r);
	/* the same view two elements further reaches element 6 of 6: refused */
	ok(refused_for(PK("\x80\x02}(X\1\0\0\0w" REBUILD "(" PID("FloatStorage", "\x06") "K\x03(K\x02K\x02t(K\x02K\x01t\x89" OD "tRu."),
		       "addressing element 6 of storage 0, which has 6"), "a view one past its storage");
	/* an integer storage is a tag: the tensor is listed, its dtype unreadable */
	ok(load(PK("\x80\x02}(X\1\0\0\0i" REBUILD "(" PID("LongStorage", "\x02") "K\x00(K\x02t(K\x01t\x89" OD "tRu."),
		&r, &err) == SW_OK && (t = pk_dict_get(r.root, "i")) &&
	   t->u.tensor->storage->dtype == SW_DTYPE_UNSUPPORTED &&
	   !strcmp(t->u.tensor->storage->dtype_name, "I64"), "LongStorage: a tensor of dtype I64");
	pk_free(&r);
	/* one key, two types */
	ok(refused_for(PK("\x80\x02(" REBUILD "(" PID("FloatStorage", "\x02") "K\x00(K\x01t(K\x01t\x89" OD "tR"
			  REBUILD "(" PID("HalfStorage", "\x02") "K\x00(K\x01t(K\x01t\x89" OD "tRt."),
		       "storage 0 is given two types or sizes"), "one storage key with two types");
	/* what is never run */
	ok(refused_for(PK("\x80\x02" "cposix\nsystem\n(X\2\0\0\0lstR."), "global posix.system"),
	   "GLOBAL posix.system");
	ok(refused_for(PK("\x80\x02" "\x8c\x08" "builtins\x8c\x04" "eval\x93."), "global builtins.eval"),
	   "STACK_GLOBAL builtins.eval");
	ok(refused_for(PK("\x80\x02" "ctorch\nFloatStorage\n)R."), "REDUCE of torch.FloatStorage"),
	   "REDUCE of a storage type");
	ok(refused_for(PK("\x80\x02" "ccollections\nOrderedDict\n(K\x01tR."), "called with arguments"),
	   "OrderedDict(1)");
	ok(refused_for(PK("\x80\x02" "ccollections\nOrderedDict\n)\x81."), "opcode NEWOBJ (0x81)"),
	   "NEWOBJ");
	ok(refused_for(PK("\x80\x02(ios\nsystem\n."), "opcode INST (0x69)"), "INST");
	ok(refused_for(PK("\x80\x02]K\x01" "b."), "BUILD on a list"), "BUILD on a list");
	ok(refused_for(PK("\x80\x02K\x01K\x02R."), "REDUCE of int"), "REDUCE of an int");
	/* the machine's own bounds */
	ok(refused_for(PK("\x80\x02h\x05."), "a memo fetch of an index never stored"), "BINGET unset");
	ok(refused_for(PK("\x80\x02K\x01r\xff\xff\xff\x00."), "a memo index beyond the pickle"),
	   "LONG_BINPUT 2^24 in a tiny pickle");
	ok(refused_for(PK("\x80\x02K\x01K\x02."), "STOP with a stack that does not hold exactly one"),
	   "two values at STOP");
	ok(refused_for(PK("\x80\x02K\x01"), "ends without STOP"), "no STOP");
	ok(refused_for(PK("\x80\x02K\x01.K"), "1 bytes after STOP"), "bytes after STOP");
	ok(refused_for(PK("\x80\x02X\xff\xff\xff\x7f."), "ends inside an opcode's argument"),
	   "a string longer than the pickle");
	ok(refused_for(PK("\x80\x02X\2\0\0\0\xc3\x28."), "not valid UTF-8"), "invalid UTF-8");
	ok(refused_for(PK("\x80\x01K\x01."), "pickle protocol 1"), "protocol 1");
	/* what torch.load (the C unpickler, encoding utf-8) refuses, refused */
	ok(refused_for(PK("\x80\x04\x95\x40\0\0\0\0\0\0\0K\x01."), "a FRAME of 64 bytes, more than the 3 left"),
	   "a FRAME longer than what follows");
	/* a frame's length is what it holds (CPython's picklers: pickle.c) */
	ok(refused_for(PK("\x80\x04\x95\x04\0\0\0\0\0\0\0K\x01K\x02\x86."),
		       "byte 15: TUPLE2 outside any frame, after the frame that ends at byte 15: that "
		       "FRAME's length is shorter than what it holds"), "a FRAME shorter than what it holds");
	ok(refused_for(PK("\x80\x04\x95\x04\0\0\0\0\0\0\0K\x01J\x02\0\0\0\x86."),
		       "byte 13: BININT crosses the end of its frame (byte 15)"), "an opcode across a frame's end");
	ok(refused_for(PK("\x80\x04\x95\0\0\0\0\0\0\0\0K\x01."), "a FRAME of 0 bytes"),
	   "a FRAME of 0 bytes beside opcodes");
	ok(refused_for(PK("\x80\x04\x95\x0e\0\0\0\0\0\0\0K\x01\x95\x02\0\0\0\0\0\0\0K\x02\x86."),
		       "byte 13: a FRAME inside the frame that ends at byte 25"), "a FRAME inside a frame");
	{
		/* a full frame (64 KiB: MARK, 65535 NONE), then what picklers
		 * leave unframed at the end: 1 byte (TUPLE) and STOP */
		size_t n = 65536, at = 11 + n;
		char *p = malloc(11 + n + 15);
		ok(p != NULL, "memory for a full frame");
		memcpy(p, "\x80\x04\x95\0\0\1\0\0\0\0\0(", 12);
		memset(p + 12, 'N', n - 1);
		memcpy(p + at, "t.", 2);
		ok(load(p, at + 2, &r, &err) == SW_OK && r.root->type == PK_TUPLE &&
		   r.root->u.seq.n == n - 1, "a full frame, then TUPLE and STOP unframed: read (%s)", err.msg);
		pk_free(&r);
		/* the same with a frame after the loose byte: never written */
		memcpy(p + at, "t\x95\x04\0\0\0\0\0\0\0K\x01\x86" "0.", 15);
		ok(refused_for(p, at + 15, "a FRAME after 1 bytes outside any frame"),
		   "a loose opcode before a FRAME");
		free(p);
	}
	{
		/* a string of 64 KiB stands outside any frame, then APPENDS and
		 * STOP unframed, as pickle.dumps(["x" * 65536], 4) writes them */
		size_t n = 65536;
		char *p = malloc(15 + 5 + n + 2);
		ok(p != NULL, "memory for a large string");
		memcpy(p, "\x80\x04\x95\x04\0\0\0\0\0\0\0](K\x01X\0\0\1\0", 20);
		memset(p + 20, 'x', n);
		memcpy(p + 20 + n, "e.", 2);
		ok(load(p, 22 + n, &r, &err) == SW_OK && r.root->type == PK_LIST && r.root->u.seq.n == 2 &&
		   r.root->u.seq.v[1]->u.str.len == n, "a large string outside the frames: read (%s)", err.msg);
		pk_free(&r);
		/* a frame of 4 bytes before what follows the string: no
		 * pickler leaves the opcodes after a short frame unframed */
		memcpy(p + 15, "e.", 2);
		ok(refused_for(p, 17, "APPENDS outside any frame, after the frame that ends at byte 15"),
		   "opcodes after a short frame, unframed");
		free(p);
	}
	ok(refused_for(PK("\x80\x02}X\1\0\0\0sb."), "BUILD with a str state"), "BUILD with a string state");
	ok(refused_for(PK("\x80\x02}N}\x86}\x86" "b."), "BUILD with a tuple state"),
	   "BUILD with a state of two levels");
	{
		static const char *const states[] = {"\x80\x02}}b.", "\x80\x02}Nb.", "\x80\x02}N}\x86" "b."};
		int good = 0;
		for (int i = 0; i < 3; i++) {
			good += load(states[i], strlen(states[i]), &r, &err) == SW_OK && r.root->type == PK_DICT;
			pk_free(&r);
		}
		ok(good == 3, "BUILD with a dict, None, or (None, dict) state");
	}
	ok(refused_for(PK("\x80\x02U\2w\xff."), "not valid UTF-8"), "SHORT_BINSTRING: UTF-8 checked");
	ok(refused_for(PK("\x80\x02T\2\0\0\0w\xff."), "not valid UTF-8"), "BINSTRING: UTF-8 checked");
	{
		/* a million TUPLE1s around one list: each byte builds a tuple and
		 * its array, 64 MB, more than one record's 64 KiB and 1 MiB */
		size_t n = 1000000;
		char *big = malloc(n + 4);
		ok(big != NULL, "memory for the big pickle");
		memcpy(big, "\x80\x02]", 3);
		memset(big + 3, 0x85, n);
		big[n + 3] = '.';
		ok(refused_for(big, n + 4, "builds more than an archive of 1 records can justify"),
		   "a million nested tuples: more than the memory a pickle can justify");
		free(big);
	}
	return tap_done();
}
