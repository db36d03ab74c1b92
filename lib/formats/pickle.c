/* pickle.c - the restricted unpickler (see pickle.h). */
#include "pickle.h"
#include "../base/dtype.h"
#include "../base/grow.h"
#include "attrmap.h"
#include "../base/jsonstrict.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the arena: every value and array, freed at once ----------------- */

struct pk_block {
	struct pk_block *next;
	size_t used, cap;
	_Alignas(max_align_t) unsigned char data[];
};

struct pk_arena {
	struct pk_block *head;
	size_t spent, budget;   /* bytes allocated; the most allowed */
};

static void *arena_alloc(struct pk_arena *a, size_t n)
{
	struct pk_block *b = a->head;

	n = (n + 15) & ~(size_t)15;
	if (n > a->budget - a->spent)
		return NULL;
	if (!b || b->cap - b->used < n) {
		size_t cap = n > 65536 ? n : 65536;
		if (!(b = malloc(sizeof *b + cap)))
			return NULL;
		b->used = 0;
		b->cap = cap;
		b->next = a->head;
		a->head = b;
	}
	a->spent += n;
	b->used += n;
	return b->data + b->used - n;
}

static void arena_free(struct pk_arena *a)
{
	while (a && a->head) {
		struct pk_block *b = a->head;
		a->head = b->next;
		free(b);
	}
	free(a);
}

/* ---- opcodes ---------------------------------------------------------- */

enum {
	OP_MARK = '(', OP_STOP = '.', OP_POP = '0', OP_POP_MARK = '1', OP_BININT = 'J',
	OP_BININT1 = 'K', OP_BININT2 = 'M', OP_NONE = 'N', OP_BINPERSID = 'Q', OP_REDUCE = 'R',
	OP_BINSTRING = 'T', OP_SHORT_BINSTRING = 'U', OP_BINUNICODE = 'X', OP_APPEND = 'a',
	OP_BUILD = 'b', OP_GLOBAL = 'c', OP_EMPTY_DICT = '}', OP_APPENDS = 'e', OP_BINGET = 'h',
	OP_LONG_BINGET = 'j', OP_EMPTY_LIST = ']', OP_BINPUT = 'q', OP_LONG_BINPUT = 'r',
	OP_SETITEM = 's', OP_TUPLE = 't', OP_EMPTY_TUPLE = ')', OP_SETITEMS = 'u',
	OP_BINFLOAT = 'G', OP_BINBYTES = 'B', OP_SHORT_BINBYTES = 'C', OP_PROTO = 0x80,
	OP_TUPLE1 = 0x85, OP_TUPLE2 = 0x86, OP_TUPLE3 = 0x87, OP_NEWTRUE = 0x88,
	OP_NEWFALSE = 0x89, OP_LONG1 = 0x8a, OP_SHORT_BINUNICODE = 0x8c, OP_BINUNICODE8 = 0x8d,
	OP_STACK_GLOBAL = 0x93, OP_MEMOIZE = 0x94, OP_FRAME = 0x95,
};

/* Every opcode of pickle's protocols 0-5, by name, for the messages. */
static const char *op_name(int op)
{
	static const struct { int op; const char *name; } names[] = {
		{'(', "MARK"}, {'.', "STOP"}, {'0', "POP"}, {'1', "POP_MARK"}, {'2', "DUP"},
		{'F', "FLOAT"}, {'I', "INT"}, {'J', "BININT"}, {'K', "BININT1"}, {'L', "LONG"},
		{'M', "BININT2"}, {'N', "NONE"}, {'P', "PERSID"}, {'Q', "BINPERSID"},
		{'R', "REDUCE"}, {'S', "STRING"}, {'T', "BINSTRING"}, {'U', "SHORT_BINSTRING"},
		{'V', "UNICODE"}, {'X', "BINUNICODE"}, {'a', "APPEND"}, {'b', "BUILD"},
		{'c', "GLOBAL"}, {'d', "DICT"}, {'}', "EMPTY_DICT"}, {'e', "APPENDS"},
		{'g', "GET"}, {'h', "BINGET"}, {'i', "INST"}, {'j', "LONG_BINGET"}, {'l', "LIST"},
		{']', "EMPTY_LIST"}, {'o', "OBJ"}, {'p', "PUT"}, {'q', "BINPUT"},
		{'r', "LONG_BINPUT"}, {'s', "SETITEM"}, {'t', "TUPLE"}, {')', "EMPTY_TUPLE"},
		{'u', "SETITEMS"}, {'G', "BINFLOAT"}, {'B', "BINBYTES"}, {'C', "SHORT_BINBYTES"},
		{0x80, "PROTO"}, {0x81, "NEWOBJ"}, {0x82, "EXT1"}, {0x83, "EXT2"}, {0x84, "EXT4"},
		{0x85, "TUPLE1"}, {0x86, "TUPLE2"}, {0x87, "TUPLE3"}, {0x88, "NEWTRUE"},
		{0x89, "NEWFALSE"}, {0x8a, "LONG1"}, {0x8b, "LONG4"}, {0x8c, "SHORT_BINUNICODE"},
		{0x8d, "BINUNICODE8"}, {0x8e, "BINBYTES8"}, {0x8f, "EMPTY_SET"}, {0x90, "ADDITEMS"},
		{0x91, "FROZENSET"}, {0x92, "NEWOBJ_EX"}, {0x93, "STACK_GLOBAL"}, {0x94, "MEMOIZE"},
		{0x95, "FRAME"}, {0x96, "BYTEARRAY8"}, {0x97, "NEXT_BUFFER"},
		{0x98, "READONLY_BUFFER"},
	};

	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (names[i].op == op)
			return names[i].name;
	return "unknown";
}

/* ---- the globals it knows --------------------------------------------- */

enum { G_ORDERED_DICT, G_REBUILD_TENSOR_V2, G_REBUILD_PARAMETER, G_STORAGE };

static const struct storage_type {
	const char *name, *full;        /* GLOBAL torch NAME */
	enum sw_dtype dtype;
	const char *dtype_name;
	int size;
} storage_types[] = {
	{"FloatStorage", "torch.FloatStorage", SW_DTYPE_F32, "F32", 4},
	{"HalfStorage", "torch.HalfStorage", SW_DTYPE_F16, "F16", 2},
	{"BFloat16Storage", "torch.BFloat16Storage", SW_DTYPE_BF16, "BF16", 2},
	{"DoubleStorage", "torch.DoubleStorage", SW_DTYPE_F64, "F64", 8},
	{"LongStorage", "torch.LongStorage", SW_DTYPE_UNSUPPORTED, "I64", 8},
	{"IntStorage", "torch.IntStorage", SW_DTYPE_UNSUPPORTED, "I32", 4},
	{"ShortStorage", "torch.ShortStorage", SW_DTYPE_UNSUPPORTED, "I16", 2},
	{"CharStorage", "torch.CharStorage", SW_DTYPE_UNSUPPORTED, "I8", 1},
	{"ByteStorage", "torch.ByteStorage", SW_DTYPE_UNSUPPORTED, "U8", 1},
	{"BoolStorage", "torch.BoolStorage", SW_DTYPE_UNSUPPORTED, "BOOL", 1},
};
#define NSTORAGE_TYPES (sizeof storage_types / sizeof storage_types[0])

/* GLOBAL value: G_STORAGE + i for storage_types[i] */
static int global_find(const char *module, const char *name)
{
	if (!strcmp(module, "collections") && !strcmp(name, "OrderedDict"))
		return G_ORDERED_DICT;
	if (!strcmp(module, "torch._utils") && !strcmp(name, "_rebuild_tensor_v2"))
		return G_REBUILD_TENSOR_V2;
	if (!strcmp(module, "torch._utils") && !strcmp(name, "_rebuild_parameter"))
		return G_REBUILD_PARAMETER;
	if (!strcmp(module, "torch"))
		for (size_t i = 0; i < NSTORAGE_TYPES; i++)
			if (!strcmp(name, storage_types[i].name))
				return G_STORAGE + (int)i;
	return -1;
}

static const char *global_name(int g)
{
	switch (g) {
	case G_ORDERED_DICT: return "collections.OrderedDict";
	case G_REBUILD_TENSOR_V2: return "torch._utils._rebuild_tensor_v2";
	case G_REBUILD_PARAMETER: return "torch._utils._rebuild_parameter";
	}
	return storage_types[g - G_STORAGE].full;
}

/* ---- the machine ------------------------------------------------------ */

struct vm {
	const unsigned char *p, *end, *start;
	size_t at;                      /* offset of the opcode being run */
	struct pk_arena *arena;
	struct pk_value **stack;
	size_t sp, scap;
	size_t *marks;
	size_t nmarks, mcap;
	struct pk_value **memo;
	size_t nmemo, memo_next;        /* slots allocated; MEMOIZE's next index */
	struct attr_map storages;       /* KEY -> index in stor */
	struct pk_storage **stor;
	size_t nstor, stcap;
	struct sw_err *err;
	size_t records;                 /* of the archive: the budget's measure */
	int over_budget;                /* an array the budget refused to grow */
	int framed;                     /* a FRAME was met: its rules hold from there */
	size_t frame_end, frame_len;    /* where the last FRAME's frame ends; its length */
	size_t loose;                   /* bytes of opcodes outside any frame since then */
	int after_large;                /* a large string outside a frame came since then */
};

static struct pk_value none_value = {.type = PK_NONE};
static struct pk_value true_value = {.type = PK_BOOL, .u.i = 1};
static struct pk_value false_value = {.type = PK_BOOL, .u.i = 0};

static int fail(struct vm *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct vm *m, const char *fmt, ...)
{
	char what[360];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	return sw_fail(m->err, SW_EDATA, "data.pkl: byte %zu: %s", m->at, what);
}

static int oom(struct vm *m)
{
	if (m->arena->spent + 64 > m->arena->budget || m->over_budget)
		return sw_fail(m->err, SW_EDATA, "data.pkl: byte %zu: builds more than an archive "
			       "of %zu records can justify (%zu bytes)", m->at, m->records,
			       m->arena->budget);
	return sw_fail(m->err, SW_ESOFTWARE, "out of memory");
}

static struct pk_value *new_value(struct vm *m, enum pk_type t)
{
	struct pk_value *v = arena_alloc(m->arena, sizeof *v);

	if (v) {
		memset(v, 0, sizeof *v);
		v->type = t;
	}
	return v;
}

static const char *type_name(const struct pk_value *v)
{
	static const char *const names[] = {
		"None", "bool", "int", "int", "float", "str", "bytes", "tuple", "list", "dict",
		"global", "storage", "tensor",
	};
	return names[v->type];
}

/* Room for need elements of elem bytes in one of the machine's own arrays
 * (*pp, *cap: the stack, the marks, the memo; not the arena's): at most
 * most, and never more bytes than the budget. */
static int grow_array(struct vm *m, void *pp, size_t *cap, size_t need, size_t elem,
		      size_t most)
{
	size_t max = m->arena->budget / elem;

	if (need > max) {
		m->over_budget = 1;
		return oom(m);
	}
	if (sw_grow_max(pp, cap, need, elem, most < max ? most : max) < 0)
		return oom(m);
	return SW_OK;
}

/* Push v (the stack grown by doubling) */
static int push(struct vm *m, struct pk_value *v)
{
	int rc;

	if (!v)
		return oom(m);
	if ((rc = grow_array(m, &m->stack, &m->scap, m->sp + 1, sizeof *m->stack, SIZE_MAX)))
		return rc;
	m->stack[m->sp++] = v;
	return SW_OK;
}

static int need(struct vm *m, size_t n, const char *op)
{
	size_t floor = m->nmarks ? m->marks[m->nmarks - 1] : 0;

	if (m->sp < floor + n)
		return fail(m, "%s on a stack too short", op);
	return SW_OK;
}

static int take_bytes(struct vm *m, size_t n, const unsigned char **out)
{
	*out = NULL;
	if ((size_t)(m->end - m->p) < n)
		return fail(m, "the pickle ends inside an opcode's argument");
	*out = m->p;
	m->p += n;
	return SW_OK;
}

/* Room for one more element in a tuple, list or dict. */
static int seq_grow(struct vm *m, struct pk_value *s, size_t more)
{
	size_t want = s->u.seq.n + more, c = s->u.seq.cap;
	struct pk_value **p;

	if (want <= c)
		return SW_OK;
	while (c < want)
		c = c ? 2 * c : 4;
	if (c > m->arena->budget / sizeof *p || !(p = arena_alloc(m->arena, c * sizeof *p)))
		return oom(m);
	if (s->u.seq.n)
		memcpy(p, s->u.seq.v, s->u.seq.n * sizeof *p);
	s->u.seq.v = p;
	s->u.seq.cap = c;
	return SW_OK;
}

/* A tuple of the n values on top of the stack, popped. */
static int make_tuple(struct vm *m, size_t n)
{
	struct pk_value *t = new_value(m, PK_TUPLE);
	int rc;

	if (!t || (rc = seq_grow(m, t, n)))
		return t ? rc : oom(m);
	if (n)          /* an empty tuple has no array */
		memcpy(t->u.seq.v, m->stack + m->sp - n, n * sizeof *t->u.seq.v);
	t->u.seq.n = n;
	m->sp -= n;
	return push(m, t);
}

static size_t pop_mark(struct vm *m, const char *op, int *rc)
{
	size_t at;

	if (!m->nmarks) {
		*rc = fail(m, "%s without a MARK", op);
		return 0;
	}
	at = m->marks[--m->nmarks];
	*rc = SW_OK;
	return at;
}

static int str_value(struct vm *m, enum pk_type t, size_t len, int utf8)
{
	const unsigned char *b = NULL;
	struct pk_value *v;
	char *s;
	int rc;

	if ((rc = take_bytes(m, len, &b)))
		return rc;
	if (utf8)
		for (size_t i = 0; i < len;) {
			int k = b[i] < 0x80 ? 1 : jsonstrict_utf8_len(b + i, len - i);
			if (!k)
				return fail(m, "a string that is not valid UTF-8");
			i += (size_t)k;
		}
	if (!(v = new_value(m, t)) || !(s = arena_alloc(m->arena, len + 1)))
		return oom(m);
	memcpy(s, b, len);
	s[len] = '\0';
	v->u.str.s = s;
	v->u.str.len = len;
	return push(m, v);
}

static int memo_put(struct vm *m, uint64_t idx)
{
	if (!m->sp || (m->nmarks && m->sp == m->marks[m->nmarks - 1]))
		return fail(m, "a memo store with nothing on the stack");
	/* indices stay below the pickle's length: a memo never outgrows the file */
	if (idx >= (uint64_t)(m->end - m->start))
		return fail(m, "a memo index beyond the pickle's length");
	if (idx >= m->nmemo) {
		size_t old = m->nmemo;
		int rc = grow_array(m, &m->memo, &m->nmemo, (size_t)idx + 1, sizeof *m->memo,
				    (size_t)(m->end - m->start));
		if (rc)
			return rc;
		memset(m->memo + old, 0, (m->nmemo - old) * sizeof *m->memo);
	}
	m->memo[idx] = m->stack[m->sp - 1];
	if (idx >= m->memo_next)
		m->memo_next = idx + 1;
	return SW_OK;
}

static int memo_get(struct vm *m, uint64_t idx)
{
	if (idx >= m->nmemo || !m->memo[idx])
		return fail(m, "a memo fetch of an index never stored");
	return push(m, m->memo[idx]);
}

static int global_value(struct vm *m, const char *module, const char *name)
{
	int g = global_find(module, name);
	struct pk_value *v;
	char full[300];

	if (g < 0) {
		snprintf(full, sizeof full, "%.120s.%.120s", module, name);
		return fail(m, "global %s is not one a state dict needs: refused, nothing executed",
			    full);
	}
	if (!(v = new_value(m, PK_GLOBAL)))
		return oom(m);
	v->u.global = g;
	return push(m, v);
}

/* GLOBAL: "module\nname\n" */
static int op_global(struct vm *m)
{
	const unsigned char *nl1, *nl2;
	char module[128], name[128];
	size_t a, b;

	nl1 = memchr(m->p, '\n', (size_t)(m->end - m->p));
	nl2 = nl1 ? memchr(nl1 + 1, '\n', (size_t)(m->end - nl1 - 1)) : NULL;
	if (!nl2)
		return fail(m, "GLOBAL without its two lines");
	a = (size_t)(nl1 - m->p);
	b = (size_t)(nl2 - nl1 - 1);
	if (a >= sizeof module || b >= sizeof name || memchr(m->p, 0, (size_t)(nl2 - m->p)))
		return fail(m, "GLOBAL naming something no state dict has");
	memcpy(module, m->p, a);
	module[a] = '\0';
	memcpy(name, nl1 + 1, b);
	name[b] = '\0';
	m->p = nl2 + 1;
	return global_value(m, module, name);
}

static int op_stack_global(struct vm *m)
{
	struct pk_value *mod, *name;
	int rc;

	if ((rc = need(m, 2, "STACK_GLOBAL")))
		return rc;
	mod = m->stack[m->sp - 2];
	name = m->stack[m->sp - 1];
	if (mod->type != PK_STR || name->type != PK_STR || strlen(mod->u.str.s) != mod->u.str.len ||
	    strlen(name->u.str.s) != name->u.str.len)
		return fail(m, "STACK_GLOBAL of something other than two strings");
	m->sp -= 2;
	return global_value(m, mod->u.str.s, name->u.str.s);
}

static int is_int(const struct pk_value *v)
{
	return v->type == PK_INT;
}

/* A storage key is a plain name: it becomes the record data/KEY. */
static int key_ok(const struct pk_value *k)
{
	if (k->type != PK_STR || k->u.str.len == 0 || k->u.str.len > 64)
		return 0;
	for (size_t i = 0; i < k->u.str.len; i++) {
		char c = k->u.str.s[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

/* BINPERSID: ('storage', torch.XStorage, KEY, LOCATION, NUMEL) */
static int op_persid(struct vm *m)
{
	const struct storage_type *st;
	struct pk_value *pid, **f, *v;
	struct pk_storage *s;
	const char *have;
	char idx[32];
	int rc;

	if ((rc = need(m, 1, "BINPERSID")))
		return rc;
	pid = m->stack[--m->sp];
	f = pid->type == PK_TUPLE ? pid->u.seq.v : NULL;
	if (!f || pid->u.seq.n != 5 || f[0]->type != PK_STR ||
	    strcmp(f[0]->u.str.s, "storage") || f[1]->type != PK_GLOBAL || f[1]->u.global < G_STORAGE ||
	    !key_ok(f[2]) || f[3]->type != PK_STR || !is_int(f[4]) || f[4]->u.i < 0 ||
	    f[4]->u.i > INT64_MAX / 8)
		return fail(m, "a persistent id that is not ('storage', torch.*Storage, KEY, "
			    "LOCATION, NUMEL)");
	st = &storage_types[f[1]->u.global - G_STORAGE];
	if ((have = attrmap_get(&m->storages, f[2]->u.str.s))) {
		s = m->stor[strtoul(have, NULL, 10)];
		if (s->dtype_name != st->dtype_name || s->numel != f[4]->u.i)
			return fail(m, "storage %s is given two types or sizes: refused as ambiguous",
				    s->key);
	} else {
		if (SW_GROW(m->stor, &m->stcap, m->nstor + 1) < 0 ||
		    !(s = arena_alloc(m->arena, sizeof *s)))
			return oom(m);
		s->key = f[2]->u.str.s;
		s->dtype = st->dtype;
		s->dtype_name = st->dtype_name;
		s->elem_size = st->size;
		s->numel = f[4]->u.i;
		snprintf(idx, sizeof idx, "%zu", m->nstor);
		if ((rc = attrmap_set(&m->storages, s->key, idx, m->err)))
			return rc;
		m->stor[m->nstor++] = s;
	}
	if (!(v = new_value(m, PK_STORAGE)))
		return oom(m);
	v->u.storage = s;
	return push(m, v);
}

/* The shape or stride tuple t into out (rank n): nonnegative ints. */
static int int_tuple(const struct pk_value *t, int64_t *out, int *n)
{
	if (t->type != PK_TUPLE || t->u.seq.n > SW_MAX_RANK)
		return -1;
	for (size_t i = 0; i < t->u.seq.n; i++) {
		if (!is_int(t->u.seq.v[i]) || t->u.seq.v[i]->u.i < 0)
			return -1;
		out[i] = t->u.seq.v[i]->u.i;
	}
	*n = (int)t->u.seq.n;
	return 0;
}

/* _rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
 * backward_hooks[, metadata]) */
static int rebuild_tensor(struct vm *m, const struct pk_value *args, struct pk_value **out)
{
	struct pk_value *const *a = args->u.seq.v;
	const struct pk_storage *s;
	struct pk_tensor *t;
	int64_t last = 0;
	int rank2;

	if (args->u.seq.n < 6 || args->u.seq.n > 7 || a[0]->type != PK_STORAGE || !is_int(a[1]) ||
	    a[1]->u.i < 0 || a[4]->type != PK_BOOL || a[5]->type != PK_DICT ||
	    (args->u.seq.n == 7 && a[6]->type != PK_DICT))
		return fail(m, "_rebuild_tensor_v2 with arguments that are not (storage, "
			    "offset, size, stride, requires_grad, hooks)");
	if (!(t = arena_alloc(m->arena, sizeof *t)))
		return oom(m);
	memset(t, 0, sizeof *t);
	s = t->storage = a[0]->u.storage;
	t->offset = a[1]->u.i;
	if (int_tuple(a[2], t->shape, &t->rank) || int_tuple(a[3], t->stride, &rank2) ||
	    rank2 != t->rank)
		return fail(m, "a tensor whose size and stride are not tuples of as many "
			    "nonnegative integers (rank 8 at most)");
	if (sw_shape_numel(t->rank, t->shape, &t->numel) < 0)
		return fail(m, "a tensor with too many elements");
	/* the last element it addresses: offset + sum (size_i - 1) * stride_i */
	if (t->numel > 0) {
		last = t->offset;
		for (int i = 0; i < t->rank; i++) {
			int64_t step;
			if (__builtin_mul_overflow(t->shape[i] - 1, t->stride[i], &step) ||
			    __builtin_add_overflow(last, step, &last))
				return fail(m, "a tensor addressing beyond any storage");
		}
		if (last >= s->numel)
			return fail(m, "a tensor addressing element %lld of storage %s, which has %lld",
				    (long long)last, s->key, (long long)s->numel);
	}
	if (!(*out = new_value(m, PK_TENSOR)))
		return oom(m);
	(*out)->u.tensor = t;
	return SW_OK;
}

static int op_reduce(struct vm *m)
{
	struct pk_value *fn, *args, *v = NULL;
	int rc;

	if ((rc = need(m, 2, "REDUCE")))
		return rc;
	fn = m->stack[m->sp - 2];
	args = m->stack[m->sp - 1];
	if (fn->type != PK_GLOBAL || fn->u.global >= G_STORAGE)
		return fail(m, "REDUCE of %s is not allowed: refused, nothing executed",
			    fn->type == PK_GLOBAL ? global_name(fn->u.global) : type_name(fn));
	if (args->type != PK_TUPLE)
		return fail(m, "REDUCE with arguments that are not a tuple");
	switch (fn->u.global) {
	case G_ORDERED_DICT:
		if (args->u.seq.n)
			return fail(m, "collections.OrderedDict called with arguments");
		if (!(v = new_value(m, PK_DICT)))
			return oom(m);
		break;
	case G_REBUILD_TENSOR_V2:
		if ((rc = rebuild_tensor(m, args, &v)))
			return rc;
		break;
	case G_REBUILD_PARAMETER:
		if (args->u.seq.n != 3 || args->u.seq.v[0]->type != PK_TENSOR ||
		    args->u.seq.v[1]->type != PK_BOOL || args->u.seq.v[2]->type != PK_DICT)
			return fail(m, "_rebuild_parameter with arguments that are not (tensor, "
				    "requires_grad, hooks)");
		v = args->u.seq.v[0];
		break;
	}
	m->sp -= 2;
	return push(m, v);
}

/* APPEND(S), SETITEM(S): the values from stack position from on go into
 * the list (or, as pairs, the dict) below them. */
static int op_extend(struct vm *m, size_t from, const char *op, enum pk_type want)
{
	struct pk_value *c;
	size_t n = m->sp - from;
	int rc;

	if (from == 0 || (want == PK_DICT && n % 2))
		return fail(m, "%s without a %s and its values", op, want == PK_DICT ? "dict" : "list");
	c = m->stack[from - 1];
	if (c->type != want)
		return fail(m, "%s on a %s", op, type_name(c));
	if ((rc = seq_grow(m, c, n)))
		return rc;
	if (n)
		memcpy(c->u.seq.v + c->u.seq.n, m->stack + from, n * sizeof *c->u.seq.v);
	c->u.seq.n += n;
	m->sp = from;
	return SW_OK;
}

static int op_int(struct vm *m, int64_t v)
{
	struct pk_value *x = new_value(m, PK_INT);

	if (x)
		x->u.i = v;
	return push(m, x);
}

/* LONG1: n bytes, little-endian two's complement */
static int op_long1(struct vm *m)
{
	const unsigned char *b;
	struct pk_value *x;
	uint64_t u;
	int rc;
	size_t n;

	if ((rc = take_bytes(m, 1, &b)))
		return rc;
	n = b[0];
	if ((rc = take_bytes(m, n, &b)))
		return rc;
	if (n > 8) {
		if (!(x = new_value(m, PK_BIGINT)))
			return oom(m);
		return push(m, x);
	}
	u = sw_le_uint(b, (int)n);
	if (n && n < 8 && (b[n - 1] & 0x80))
		u |= ~(uint64_t)0 << (8 * n);
	return op_int(m, (int64_t)u);
}

static int op_float(struct vm *m)
{
	const unsigned char *b;
	struct pk_value *x;
	uint64_t u = 0;
	int rc;

	if ((rc = take_bytes(m, 8, &b)))
		return rc;
	for (int i = 0; i < 8; i++)
		u = u << 8 | b[i];      /* big-endian */
	if (!(x = new_value(m, PK_FLOAT)))
		return oom(m);
	memcpy(&x->u.f, &u, sizeof u);
	return push(m, x);
}

static int dict_or_none(const struct pk_value *v)
{
	return v->type == PK_DICT || v->type == PK_NONE;
}

static int build_state_ok(const struct pk_value *v)
{
	if (v->type == PK_TUPLE)
		return v->u.seq.n == 2 && dict_or_none(v->u.seq.v[0]) && dict_or_none(v->u.seq.v[1]);
	return dict_or_none(v);
}

static int op_build(struct vm *m)
{
	int rc;

	if ((rc = need(m, 2, "BUILD")))
		return rc;
	/* a state dict's state: its _metadata (module versions), not needed */
	if (m->stack[m->sp - 2]->type != PK_DICT)
		return fail(m, "BUILD on a %s is not allowed: refused, nothing executed",
			    type_name(m->stack[m->sp - 2]));
	/* the state is a dict or None, or a pair of them (state, slots), as
	 * the unpickler's BUILD requires; anything else fails torch.load */
	if (!build_state_ok(m->stack[m->sp - 1]))
		return fail(m, "BUILD with a %s state (a dict's state is a dict): refused",
			    type_name(m->stack[m->sp - 1]));
	m->sp--;
	return SW_OK;
}

/*
 * Protocol 4's frames (PEP 3154), as CPython's picklers write them: from
 * the first FRAME on, every opcode lies inside a frame, whole, and a
 * FRAME's length is exactly the opcodes it holds, up to the next FRAME.
 * A frame is closed where it reaches FRAME_TARGET bytes, before a string
 * or bytes of FRAME_TARGET bytes or more (which stands outside any frame,
 * written past it), and at the end; a frame that would be shorter than
 * FRAME_MIN bytes is left unframed. So outside a frame stand only such a
 * large string and, after a full frame or a large string, fewer than
 * FRAME_MIN bytes of other opcodes before a large string or the end.
 * Python's unpickler refuses an opcode that crosses the end of its frame
 * and a FRAME inside a frame; a frame whose length is shorter than what
 * it holds (the rest read as if unframed), or 0, is refused here too: no
 * pickler writes one, and a reader that trusts frames (one that reads a
 * frame ahead) would read another pickle.
 */
#define FRAME_MIN 4
#define FRAME_TARGET ((size_t)64 << 10)

static int op_frame(struct vm *m)
{
	const unsigned char *b;
	uint64_t n;
	int rc;

	if (m->framed && m->at < m->frame_end)
		return fail(m, "a FRAME inside the frame that ends at byte %zu: that frame's length is "
			    "longer than what it holds", m->frame_end);
	if (m->loose)
		return fail(m, "a FRAME after %zu bytes outside any frame: the frame that ends at byte "
			    "%zu is shorter than what it holds", m->loose, m->frame_end);
	if ((rc = take_bytes(m, 8, &b)))
		return rc;
	n = sw_le_uint(b, 8);
	/* past the end, the C unpickler (torch.load's) refuses it as truncated */
	if (n > (uint64_t)(m->end - m->p))
		return fail(m, "a FRAME of %llu bytes, more than the %zu left: the pickle is "
			    "truncated", (unsigned long long)n, (size_t)(m->end - m->p));
	if (n < FRAME_MIN)
		return fail(m, "a FRAME of %llu bytes: picklers frame %d bytes or more, so its length "
			    "is not what it holds", (unsigned long long)n, FRAME_MIN);
	m->framed = 1;
	m->frame_len = (size_t)n;
	m->frame_end = (size_t)(m->p - m->start) + (size_t)n;
	m->after_large = 0;
	return SW_OK;
}

/* Once framed, the opcode op just run (from m->at to m->p) lies inside
 * the frame or is one that may stand outside. */
static int framing_ok(struct vm *m, int op)
{
	size_t end = (size_t)(m->p - m->start), len = end - m->at;

	if (!m->framed || op == OP_FRAME)
		return SW_OK;
	if (m->at < m->frame_end) {
		if (end > m->frame_end)
			return fail(m, "%s crosses the end of its frame (byte %zu): the FRAME's length is "
				    "shorter than what it holds", op_name(op), m->frame_end);
		return SW_OK;
	}
	if (((op == OP_BINUNICODE || op == OP_BINBYTES) && len >= 5 + FRAME_TARGET) ||
	    (op == OP_BINUNICODE8 && len >= 9 + FRAME_TARGET)) {
		m->loose = 0;
		m->after_large = 1;
		return SW_OK;
	}
	m->loose += len;
	if (m->loose >= FRAME_MIN || (!m->after_large && m->frame_len < FRAME_TARGET))
		return fail(m, "%s outside any frame, after the frame that ends at byte %zu: that "
			    "FRAME's length is shorter than what it holds", op_name(op), m->frame_end);
	return SW_OK;
}

/* One opcode; *stop when it was STOP. */
static int step(struct vm *m, int *stop)
{
	const unsigned char *b;
	size_t from;
	int op, rc = SW_OK;

	m->at = (size_t)(m->p - m->start);
	op = *m->p++;
	switch (op) {
	case OP_PROTO:
		if ((rc = take_bytes(m, 1, &b)))
			return rc;
		if (b[0] < 2 || b[0] > 5)
			return fail(m, "pickle protocol %d (torch.save writes 2)", b[0]);
		return SW_OK;
	case OP_FRAME: return op_frame(m);
	case OP_STOP:
		if (m->sp != 1 || m->nmarks)
			return fail(m, "STOP with a stack that does not hold exactly one value");
		*stop = 1;
		return SW_OK;
	case OP_MARK:
		if ((rc = grow_array(m, &m->marks, &m->mcap, m->nmarks + 1, sizeof *m->marks, SIZE_MAX)))
			return rc;
		m->marks[m->nmarks++] = m->sp;
		return SW_OK;
	case OP_POP:
		if ((rc = need(m, 1, "POP")))
			return rc;
		m->sp--;
		return SW_OK;
	case OP_POP_MARK:
		from = pop_mark(m, "POP_MARK", &rc);
		if (!rc)
			m->sp = from;
		return rc;
	case OP_NONE: return push(m, &none_value);
	case OP_NEWTRUE: return push(m, &true_value);
	case OP_NEWFALSE: return push(m, &false_value);
	case OP_BININT:
		if ((rc = take_bytes(m, 4, &b)))
			return rc;
		return op_int(m, (int32_t)(uint32_t)sw_le_uint(b, 4));
	case OP_BININT1:
		if ((rc = take_bytes(m, 1, &b)))
			return rc;
		return op_int(m, b[0]);
	case OP_BININT2:
		if ((rc = take_bytes(m, 2, &b)))
			return rc;
		return op_int(m, (int64_t)sw_le_uint(b, 2));
	case OP_LONG1: return op_long1(m);
	case OP_BINFLOAT: return op_float(m);
	case OP_BINUNICODE:
	case OP_BINSTRING:
	case OP_BINBYTES:
		if ((rc = take_bytes(m, 4, &b)))
			return rc;
		/* BINSTRING too: torch.load decodes it as UTF-8 */
		return str_value(m, op == OP_BINBYTES ? PK_BYTES : PK_STR, (size_t)sw_le_uint(b, 4),
				 op != OP_BINBYTES);
	case OP_SHORT_BINUNICODE:
	case OP_SHORT_BINSTRING:
	case OP_SHORT_BINBYTES:
		if ((rc = take_bytes(m, 1, &b)))
			return rc;
		return str_value(m, op == OP_SHORT_BINBYTES ? PK_BYTES : PK_STR, b[0],
				 op != OP_SHORT_BINBYTES);
	case OP_BINUNICODE8:
		if ((rc = take_bytes(m, 8, &b)))
			return rc;
		if (sw_le_uint(b, 8) > (uint64_t)(m->end - m->p))
			return fail(m, "the pickle ends inside an opcode's argument");
		return str_value(m, PK_STR, (size_t)sw_le_uint(b, 8), 1);
	case OP_EMPTY_TUPLE: return make_tuple(m, 0);
	case OP_TUPLE1:
	case OP_TUPLE2:
	case OP_TUPLE3:
		if ((rc = need(m, (size_t)(op - OP_TUPLE1 + 1), op_name(op))))
			return rc;
		return make_tuple(m, (size_t)(op - OP_TUPLE1 + 1));
	case OP_TUPLE:
		from = pop_mark(m, "TUPLE", &rc);
		return rc ? rc : make_tuple(m, m->sp - from);
	case OP_EMPTY_LIST: return push(m, new_value(m, PK_LIST));
	case OP_EMPTY_DICT: return push(m, new_value(m, PK_DICT));
	case OP_APPEND:
		if ((rc = need(m, 2, "APPEND")))
			return rc;
		return op_extend(m, m->sp - 1, "APPEND", PK_LIST);
	case OP_APPENDS:
		from = pop_mark(m, "APPENDS", &rc);
		return rc ? rc : op_extend(m, from, "APPENDS", PK_LIST);
	case OP_SETITEM:
		if ((rc = need(m, 3, "SETITEM")))
			return rc;
		return op_extend(m, m->sp - 2, "SETITEM", PK_DICT);
	case OP_SETITEMS:
		from = pop_mark(m, "SETITEMS", &rc);
		return rc ? rc : op_extend(m, from, "SETITEMS", PK_DICT);
	case OP_BINPUT:
		if ((rc = take_bytes(m, 1, &b)))
			return rc;
		return memo_put(m, b[0]);
	case OP_LONG_BINPUT:
		if ((rc = take_bytes(m, 4, &b)))
			return rc;
		return memo_put(m, sw_le_uint(b, 4));
	case OP_MEMOIZE: return memo_put(m, m->memo_next);
	case OP_BINGET:
		if ((rc = take_bytes(m, 1, &b)))
			return rc;
		return memo_get(m, b[0]);
	case OP_LONG_BINGET:
		if ((rc = take_bytes(m, 4, &b)))
			return rc;
		return memo_get(m, sw_le_uint(b, 4));
	case OP_GLOBAL: return op_global(m);
	case OP_STACK_GLOBAL: return op_stack_global(m);
	case OP_REDUCE: return op_reduce(m);
	case OP_BUILD: return op_build(m);
	case OP_BINPERSID: return op_persid(m);
	}
	{
		return fail(m, "opcode %s (0x%02x) is not one torch.save writes: refused, nothing executed",
			    op_name(op), op);
	}
}

int pk_load(const void *buf, size_t len, size_t records, struct pk_result *out,
	    struct sw_err *err)
{
	struct vm m = {0};
	int rc = SW_OK, stop = 0;

	memset(out, 0, sizeof *out);
	m.start = m.p = buf;
	m.end = m.start + len;
	m.err = err;
	attrmap_init(&m.storages);
	if (!(m.arena = calloc(1, sizeof *m.arena)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	m.records = records;
	m.arena->budget = (records > SIZE_MAX / 4 / PK_BYTES_PER_RECORD ? SIZE_MAX / 4 :
			   records * PK_BYTES_PER_RECORD) + (1u << 20);
	while (!rc && !stop) {
		if (m.p == m.end) {
			m.at = len;
			rc = fail(&m, "%s%s", "the pickle ends without STOP", "");
			break;
		}
		if (!(rc = step(&m, &stop)))
			rc = framing_ok(&m, m.start[m.at]);
	}
	if (!rc && m.p != m.end)
		rc = sw_fail(err, SW_EDATA, "data.pkl: %zu bytes after STOP", (size_t)(m.end - m.p));
	if (!rc) {
		out->root = m.stack[0];
		out->arena = m.arena;
	} else {
		arena_free(m.arena);
	}
	free(m.stack);
	free(m.marks);
	free(m.memo);
	free(m.stor);
	attrmap_free(&m.storages);
	return rc;
}

void pk_free(struct pk_result *r)
{
	arena_free(r->arena);
	memset(r, 0, sizeof *r);
}

const struct pk_value *pk_dict_get(const struct pk_value *d, const char *key)
{
	if (!d || d->type != PK_DICT)
		return NULL;
	for (size_t i = 0; i + 1 < d->u.seq.n; i += 2) {
		const struct pk_value *k = d->u.seq.v[i];
		if (k->type == PK_STR && k->u.str.len == strlen(key) && !strcmp(k->u.str.s, key))
			return d->u.seq.v[i + 1];
	}
	return NULL;
}
